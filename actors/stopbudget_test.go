package actors

import (
	"testing"
	"time"
)

// The phases of a drain fit within shutdown_timeout, in order, whatever its
// value, with room left for the actors to stop.
func TestStopBudgetFitsWithinShutdownTimeout(t *testing.T) {
	t.Parallel()
	for _, shutdown := range []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 30 * time.Second, time.Hour} {
		b := newStopBudget(shutdown)
		if b.total != shutdown {
			t.Errorf("%s: total %s", shutdown, b.total)
		}
		if !(0 < b.revoke && b.revoke < b.drain && b.drain+b.abandon < b.total) {
			t.Errorf("%s: phases out of order or beyond the bound: %+v", shutdown, b)
		}
		if shutdown >= 8*time.Second && b.total-b.revoke != stopReserve {
			t.Errorf("%s: the records get %s, want all but %s", shutdown, b.revoke, stopReserve)
		}
		if w := b.groupCloseWait(); w <= 0 || w >= b.abandon {
			t.Errorf("%s: the group's close wait %s is not within the abandon phase %s", shutdown, w, b.abandon)
		}
	}
}
