package harness_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// sized returns a record of exactly size bytes (key and value) at offset.
func sized(offset int64, size int) harness.Record {
	key := fmt.Sprintf("k%03d", offset)
	return harness.Rec("big", 0, offset, key, strings.Repeat("x", size-len(key)))
}

// max_buffered_bytes bounds what a partition reads, whatever max_buffered
// allows, and reading resumes as records finish. A record larger than the
// whole budget still runs — alone: nothing after it is read until it
// finished.
func TestByteBudgetBoundsReadingAndLetsAnOversizeRecordRun(t *testing.T) {
	const quarter = int(config.MiB / 4) // a quarter of the budget: the gate wakes at that much free
	c := harness.Consumer("bytes", "big")
	c.Concurrency = 2
	c.MaxBuffered = 1000 // the record budget would admit all of them
	c.MaxBufferedBytes = config.MiB
	tokens := make(chan struct{}) // one per ordinary record allowed to finish
	bigDone := make(chan struct{})
	h := harness.New(t, harness.Config{Consumer: c}, actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		release := (<-chan struct{})(tokens)
		if rec.Offset == 7 {
			release = bigDone
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	for off := range int64(7) {
		h.Feed(sized(off, quarter))
	}
	h.Feed(sized(7, 3*int(config.MiB))) // three times the budget
	h.Feed(sized(8, 100))
	h.Assign("big", 0)

	// Four quarters fill the budget: two run, two wait, nothing more is read.
	h.Await("4 records fetched (the byte budget), 2 running", func() bool {
		s := h.Stats()
		return s.Fetched == 4 && s.InFlight == 2 && s.Buffered == 2
	})
	if s := h.Stats(); s.Fetched != 4 {
		t.Fatalf("fetched %d records of %d bytes with a budget of %d bytes, want 4", s.Fetched, quarter, config.MiB)
	}
	// One finishes: a quarter is free, one more is read.
	tokens <- struct{}{}
	h.AwaitHandled(1)
	h.Await("a 5th record fetched once a quarter of the budget is free", func() bool { return h.Stats().Fetched == 5 })

	// The oversize record (offset 7) is read as soon as any byte credit is
	// free, runs, and holds the budget alone: offset 8 waits for it.
	for range 6 {
		tokens <- struct{}{}
	}
	h.AwaitStarted("big", 0, 7)
	h.Await("offsets 0-6 handled and their credits back, the oversize record running alone", func() bool {
		s := h.Stats()
		return h.HandledCount() == 7 && s.InFlight == 1 && s.Buffered == 0
	})
	if s := h.Stats(); s.Fetched != 8 {
		t.Fatalf("fetched %d records while a record three times the budget runs, want 8 (offset 8 must wait)", s.Fetched)
	}
	close(bigDone)
	tokens <- struct{}{} // offset 8
	h.AwaitAllCommitted()
	if got := h.HandledCount(); got != 9 {
		t.Fatalf("%d records handled, want 9", got)
	}
}
