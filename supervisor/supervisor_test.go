//go:build linux

package supervisor

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

// fastSwarm has timings short enough for tests. node_report_timeout is
// 4 s: a race-built node starting on a loaded machine (CI runs this
// package beside the others) took more than 1 s to say hello, and was
// restarted as silent by tests that count restarts.
func fastSwarm(nodes int) config.Swarm {
	return config.Swarm{
		Nodes:               nodes,
		NodeReportInterval:  100 * time.Millisecond,
		NodeReportTimeout:   4 * time.Second,
		NodeRestartTimeout:  100 * time.Millisecond,
		SupervisionInterval: 100 * time.Millisecond,
		MaxRestarts:         100,
		RestartWindow:       time.Minute,
	}
}

// recorder collects hook calls.
type recorder struct {
	mu       sync.Mutex
	forks    []int // pids
	stopping []swarmpb.Status
	killed   int
}

func (r *recorder) hooks() hooks {
	return hooks{
		AfterFork: func(_, pid int) { r.mu.Lock(); r.forks = append(r.forks, pid); r.mu.Unlock() },
		Stopping: func(_, _ int, st swarmpb.Status, _ string) {
			r.mu.Lock()
			r.stopping = append(r.stopping, st)
			r.mu.Unlock()
		},
		Terminating: func(int, int) { r.mu.Lock(); r.killed++; r.mu.Unlock() },
	}
}

func (r *recorder) forkCount() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.forks) }

func (r *recorder) sawStatus(st swarmpb.Status) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.stopping {
		if s == st {
			return true
		}
	}
	return false
}

type swarmRun struct {
	sup    *Supervisor
	rec    *recorder
	cancel context.CancelFunc
	done   chan error
}

func startSwarm(t *testing.T, mode string, cfg config.Swarm) *swarmRun {
	t.Helper()
	rec := &recorder{}
	sup, err := New(Options{
		Swarm:           cfg,
		ShutdownTimeout: 2 * time.Second,
		Args:            []string{"-test.run=^$"},
		Env:             append(os.Environ(), envFakeNode+"="+mode),
		Log:             testLogger(t),
		hooks:           rec.hooks(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &swarmRun{sup: sup, rec: rec, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- sup.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			sup.Kill()
			t.Error("the supervisor did not stop within 10 s of its context")
			<-r.done
		}
	})
	return r
}

// wait returns Run's result, failing the test after timeout.
func (r *swarmRun) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(timeout):
		t.Fatalf("the supervisor did not return within %s", timeout)
		return nil
	}
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func running(s *Supervisor) []NodeStatus {
	var out []NodeStatus
	for _, n := range s.Status() {
		if n.State == "running" && n.SinceReport >= 0 && n.SinceReport < 0.5 {
			out = append(out, n)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestNodesReportAndStopCleanly(t *testing.T) {
	r := startSwarm(t, "ok", fastSwarm(2))
	eventually(t, 10*time.Second, "2 nodes reporting", func() bool { return len(running(r.sup)) == 2 })
	if !r.sup.Healthy() {
		t.Error("Healthy() = false with every node reporting")
	}
	pids := []int{}
	for _, n := range r.sup.Status() {
		pids = append(pids, n.PID)
	}
	r.cancel()
	if err := r.wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run = %v, want nil after a clean shutdown", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("node %d still exists after Run returned", pid)
		}
	}
	if r.rec.killed != 0 {
		t.Errorf("%d nodes were killed on a clean shutdown", r.rec.killed)
	}
}

// Done means 6: a node that exits at start exhausts the restart budget.
func TestNodeExitingAtStartExhaustsTheBudget(t *testing.T) {
	cfg := fastSwarm(1)
	cfg.MaxRestarts = 3
	r := startSwarm(t, "exit", cfg)
	start := time.Now()
	if err := r.wait(t, 20*time.Second); !errors.Is(err, ErrRestartBudget) {
		t.Fatalf("Run = %v, want ErrRestartBudget", err)
	}
	if n := r.rec.forkCount(); n != 4 {
		t.Errorf("%d processes started, want 4 (the first and max_restarts 3)", n)
	}
	t.Logf("gave up after %d starts in %s", r.rec.forkCount(), time.Since(start).Round(time.Millisecond))
}

// Done means 7: a node over memory_limit is restarted with status 3.
func TestNodeOverMemoryLimitIsRestarted(t *testing.T) {
	cfg := fastSwarm(1)
	cfg.MemoryLimit = 64 * config.MiB
	r := startSwarm(t, "alloc", cfg)
	eventually(t, 20*time.Second, "a node stopped for memory and started again", func() bool {
		return r.rec.sawStatus(swarmpb.Status_STATUS_MEMORY) && r.rec.forkCount() >= 2
	})
	for _, n := range r.sup.Status() {
		t.Logf("node %d: restarts %d, last exit %q, status %s", n.Index, n.Restarts, n.LastExit, n.StatusName)
	}
	// Each restart counted under cause memory, none as exit.
	eventually(t, 5*time.Second, "the restart published under cause memory", func() bool {
		v := r.sup.view.Load()
		return v.obs[0].restartsBy[causeMemory] >= 1
	})
	if by := r.sup.view.Load().obs[0].restartsBy; by[causeExit] != 0 || by[causeHung] != 0 {
		t.Errorf("restarts by cause %v: a memory stop counted as another cause", by)
	}
}

// Done means 3: a stopped (hung) node is killed within report timeout +
// shutdown timeout (+1 s) and replaced.
func TestStoppedNodeIsReplaced(t *testing.T) {
	cfg := fastSwarm(1)
	r := startSwarm(t, "ok", cfg)
	eventually(t, 10*time.Second, "the node reporting", func() bool { return len(running(r.sup)) == 1 })
	pid := r.sup.Status()[0].PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Not ready as soon as a report is missing (1.5 report intervals),
	// long before node_report_timeout replaces it; still live meanwhile.
	eventually(t, 5*time.Second, "readiness to name the frozen node while it is still there", func() bool {
		c := r.sup.Ready()
		return !c.OK && strings.Contains(c.Reason, "node 0 has not reported for") && strings.Contains(c.Reason, "it reports every 100ms") && alive(pid)
	})
	if notReady := time.Since(stopped); notReady > time.Second {
		t.Errorf("readiness turned false %s after the node froze, want within a second (reports every 100ms)", notReady)
	}
	limit := cfg.NodeReportTimeout + 2*time.Second + time.Second
	eventually(t, 2*limit, "the hung node gone", func() bool { return !alive(pid) })
	gone := time.Since(stopped)
	if gone > limit {
		t.Errorf("the hung node was gone after %s, want within %s", gone, limit)
	}
	if !r.rec.sawStatus(swarmpb.Status_STATUS_SILENT) {
		t.Error("the node was not stopped as silent (status -1)")
	}
	eventually(t, 10*time.Second, "a new node reporting", func() bool {
		n := running(r.sup)
		return len(n) == 1 && n[0].PID != pid && n[0].Restarts == 1
	})
	// The restart is counted under cause hung.
	eventually(t, 5*time.Second, "the restart published under cause hung", func() bool {
		return r.sup.view.Load().obs[0].restartsBy == [numCauses]int{causeHung: 1}
	})
	t.Logf("SIGSTOP → gone in %s (report timeout %s + shutdown timeout 2 s)", gone.Round(time.Millisecond), cfg.NodeReportTimeout)
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Done means 8: the supervisor's descriptors do not grow with restarts.
func TestFileDescriptorsStayFlatAcrossRestarts(t *testing.T) {
	cfg := fastSwarm(1)
	cfg.NodeRestartTimeout = 0
	r := startSwarm(t, "brief", cfg)
	var after1 int
	eventually(t, 20*time.Second, "the first restart", func() bool {
		if r.rec.forkCount() >= 2 {
			after1 = openFDs(t)
			return true
		}
		return false
	})
	eventually(t, 60*time.Second, "20 restarts", func() bool { return r.rec.forkCount() >= 21 })
	after20 := openFDs(t)
	if after20 != after1 {
		t.Errorf("open descriptors: %d after the first restart, %d after 20", after1, after20)
	}
	t.Logf("open descriptors after 1 restart: %d, after %d: %d", after1, r.rec.forkCount()-1, after20)
}

// Done means 9: a process that is not a node is refused, and a garbage
// frame closes only its own connection.
func TestHealthSocketRefusesStrangersAndSurvivesGarbage(t *testing.T) {
	r := startSwarm(t, "garbage", fastSwarm(2))
	eventually(t, 10*time.Second, "both nodes reporting after their garbage", func() bool { return len(running(r.sup)) == 2 })
	for _, n := range r.sup.Status() {
		if n.Restarts != 0 {
			t.Errorf("node %d was restarted %d times: garbage must close only its connection", n.Index, n.Restarts)
		}
	}
	// This test process is not a node (it is the supervisor itself).
	c, err := net.Dial("unix", r.sup.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writeFrame(c, &swarmpb.Frame{Body: &swarmpb.Frame_Hello{Hello: &swarmpb.Hello{Index: 0, Pid: int32(os.Getpid())}}})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a stranger's connection was not closed (read: %v)", err)
	}
	if len(running(r.sup)) != 2 {
		t.Error("the nodes stopped reporting after a stranger connected")
	}
	info, err := os.Stat(strings.TrimSuffix(r.sup.Socket(), "/health.sock"))
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %v (%v), want 0700", info.Mode().Perm(), err)
	}
}
