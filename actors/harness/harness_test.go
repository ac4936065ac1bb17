package harness_test

import (
	"errors"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/harness"
)

// Stop leaves nothing running: not the tree's actors and workers of any
// generation, nor the in-memory group's session and claims.
func TestStopLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	c := harness.Consumer("leaks", "orders")
	c.Retry.MaxAttempts = 1
	h := harness.New(t, harness.Config{Consumer: c}, harness.FailTimes(harness.At("orders", 0, 3), 1, errors.New("boom"), nil))
	h.Feed(harness.Seq("orders", 0, 0, 10, 3)...)
	h.Feed(harness.Seq("orders", 1, 0, 10, 3)...)
	h.Assign("orders", 0, 1)
	h.AwaitAllCommitted() // through a restart
	h.Revoke("orders", 1)
	h.AwaitReleased("orders", 1)
	if err := h.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if h.Restarts() != 1 {
		t.Errorf("%d restarts, want 1", h.Restarts())
	}
	// protoactor may still run a dead-letter log throttle for a second.
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			var dump strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Fatalf("%d goroutines after Stop, %d before:\n%s", runtime.NumGoroutine(), before, dump.String())
		}
		<-tick.C
	}
}
