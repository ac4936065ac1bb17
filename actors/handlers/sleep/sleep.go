// Package sleep is simulated work: a wait of a fixed length that a
// cancelled context cuts short. turbo's `handler.type: sleep` uses it, and so
// do the benchmark's plain peers, which must not link turbo itself, so that
// every consumer in a comparison does exactly the same work.
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx is done, whichever comes first; it returns the
// context's error in the second case. d <= 0 returns at once.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
