package actors_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
)

// A handler that scribbles over its record's key bytes (against the
// contract: the record is read-only) cannot derail the ordering: the
// scheduler keys records by a private copy of the key. Before it did, the
// scheduler keyed its map with the handler's own bytes, the scribble lost
// track of the key, and the coordinator panicked (a restart loop).
func TestAHandlerCannotCorruptTheScheduling(t *testing.T) {
	t.Parallel()
	const records, keys = 200, 10
	h := harness.New(t, harness.Config{Consumer: harness.Consumer("tree", topic)},
		actors.HandlerFunc(func(_ context.Context, rec *actors.Record) error {
			for i := range rec.Key {
				rec.Key[i] = 'x'
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
	for k := range keys {
		if got := h.HandledOffsets(fmt.Sprintf("key-%d", k)); len(got) != records/keys {
			t.Errorf("key-%d handled %d times, want %d", k, len(got), records/keys)
		}
	}
}
