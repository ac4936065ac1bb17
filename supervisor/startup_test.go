//go:build linux

package supervisor

import (
	"testing"
	"time"
)

// A stop right after start is clean: nodes that the supervisor's SIGTERM
// reached before they could handle it (their runtime still starting) had
// consumed nothing. Before, Run returned ErrUnclean: SIGINT to the swarm
// 10 ms after start exited 1, "not every node stopped cleanly".
func TestStopDuringNodeStartUpIsClean(t *testing.T) {
	r := startSwarm(t, "slow", fastSwarm(2))
	eventually(t, 10*time.Second, "2 nodes started", func() bool { return r.rec.forkCount() == 2 })
	r.cancel()
	start := time.Now()
	if err := r.wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run = %v after a stop during the nodes' start-up, want nil", err)
	}
	t.Logf("stopped during start-up: Run returned nil after %s", time.Since(start).Round(time.Millisecond))
}
