package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// A handler that scribbles over its record — every field, and the key's
// bytes — cannot derail the consumer: the fields are its own copy, and the
// scheduler keys records by a private copy of the key's bytes. Scheduling
// by key, retries and commits go on as if it had not. (Before the envelope was private, the scheduler keyed
// its map with the handler's key bytes: the scribble lost track of the key,
// and the coordinator panicked.)
func TestHandlerCannotCorruptItsRecord(t *testing.T) {
	const records, keys = 200, 10
	var failed atomic.Bool
	cc := harness.Consumer("tree", topic)
	cc.Retry = config.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	h := harness.New(t, harness.Config{Consumer: cc},
		actors.HandlerFunc(func(_ context.Context, rec *actors.Record) error {
			first := rec.Offset == 7 && failed.CompareAndSwap(false, true)
			if rec.Offset != 7 { // its bytes are shared with its retry (and a dead letter)
				for i := range rec.Key {
					rec.Key[i] = 'x'
				}
			}
			rec.Key, rec.Value, rec.Headers = nil, nil, nil
			rec.Topic, rec.Partition, rec.Offset = "elsewhere", 99, -1
			if first { // one failure: its retry must see the record as fetched
				return fmt.Errorf("once")
			}
			return nil
		}))
	h.Assign(topic, 0)
	for off := range int64(records) {
		h.Feed(harness.Rec(topic, 0, off, fmt.Sprintf("key-%d", off%keys), "v"))
	}
	h.AwaitAllCommitted()
	if c := h.Committed(topic, 0); c.Offset != records {
		t.Errorf("committed %d, want %d", c.Offset, records)
	}
	if n := h.Restarts(); n != 0 {
		t.Errorf("%d tree restarts, want 0", n)
	}
	if got := h.HandledOffsets("key-7"); len(got) != records/keys || got[0] != 7 {
		t.Errorf("key-7 handled at %v, want %d offsets from 7 (the retried record first)", got, records/keys)
	}
}
