package actors_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// A partition taken away without a handover (the broker expired the
// member's session) is dropped at once: its running handlers are cancelled
// — and that is no failure —, nothing more of that assignment starts, and
// nothing is committed for it; the partition's next assignment (here the
// same consumer's, as after a rejoin) handles again what did not finish.
func TestLostPartitionIsDroppedAtOnce(t *testing.T) {
	t.Parallel()
	for _, policy := range []config.OnFailure{config.OnFailureFail, config.OnFailureSkip} {
		t.Run(string(policy), func(t *testing.T) {
			var mu sync.Mutex
			seen := map[int64]bool{}
			firstCall := func(r *actors.Record) bool { // the first calls of offsets 0–3 block
				mu.Lock()
				defer mu.Unlock()
				first := !seen[r.Offset]
				seen[r.Offset] = true
				return first && r.Offset < 4
			}
			never := make(chan struct{})
			h := harness.New(t, consumer(func(c *config.Consumer) { c.Concurrency = 4; c.OnFailure = policy }),
				harness.Block(firstCall, never, nil))
			h.Feed(harness.Seq(topic, 0, 0, 20, 20)...)
			h.Assign(topic, 0)
			h.AwaitRunning(4)
			h.Lose(topic, 0)
			h.Await("the lost partition's running records to be cancelled", func() bool {
				calls := h.Calls()
				for _, c := range calls[:4] {
					if c.Running || !errors.Is(c.Err, context.Canceled) {
						return false
					}
				}
				return true
			})
			h.AwaitAllCommitted()
			calls := h.Calls()
			// Offset 4 can start only once a runner is free. In the lost
			// assignment that happens when the cancelled calls return; in
			// the next one, only after that assignment's dispatch (in offset
			// order) gave 0–3 out again, and one of them ran: so its first
			// call follows the first second attempt. (Which of 0–3 is called
			// first again is up to the goroutines.)
			firstOf4 := slices.IndexFunc(calls, func(c harness.Call) bool { return c.Offset == 4 })
			firstAgain := slices.IndexFunc(calls, func(c harness.Call) bool { return c.Offset < 4 && c.Attempt == 2 })
			if firstAgain < 0 || firstOf4 < firstAgain {
				t.Errorf("offset 4 started (call %d) before the next assignment ran any of 0–3 again (call %d): the lost assignment went on", firstOf4, firstAgain)
			}
			for off := int64(0); off < 20; off++ {
				want := 1
				if off < 4 {
					want = 2 // cancelled, then by the next assignment
				}
				if a := h.Attempts(topic, 0, off); a != want {
					t.Errorf("offset %d attempted %d times, want %d", off, a, want)
				}
				if n := h.TimesHandled(topic, 0, off); n != 1 {
					t.Errorf("offset %d handled %d times, want 1", off, n)
				}
			}
			if s := h.Stats(); s.Restarts != 0 || s.Failed != 0 || s.Skipped != 0 {
				t.Errorf("restarts %d, failed %d, skipped %d; want 0: a lost partition's cancelled records did not fail", s.Restarts, s.Failed, s.Skipped)
			}
		})
	}
}
