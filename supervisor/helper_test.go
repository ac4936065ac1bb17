//go:build linux

package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

func init() { helperSupervisor = runHelperSupervisor }

// helperSwarm is the helper supervisor's configuration.
func helperSwarm() config.Swarm {
	cfg := fastSwarm(2)
	cfg.MaxRestarts = 1
	return cfg
}

// runHelperSupervisor is the helper supervisor (envHelperSupervisor). It
// writes one JSON line per hook call and its log to stdout, and exits 0
// (clean stop), 1 (restart budget exhausted) or 3 (unclean stop). Modes:
//
//	plain    two "ok" nodes, max_restarts 1
//	rlimit   one "ok" node, max_restarts 1; SIGUSR1 sets the soft
//	         RLIMIT_NOFILE to 3 (no descriptor can be created: 0–2 are open),
//	         SIGUSR2 restores it
//	flood    two "ok" nodes, max_restarts 1, http.listen on a random port,
//	         and a soft RLIMIT_NOFILE of floodFileLimit
//	hungreload  two "ok" nodes; SIGHUP asks for a reload whose Validate
//	         never returns (a configuration on a hung file system)
func runHelperSupervisor(mode string) int {
	out := &lockedWriter{w: os.Stdout}
	log := zerolog.New(out).With().Timestamp().Logger()
	emit := func(fields map[string]any) {
		b, _ := json.Marshal(fields)
		out.Write(append(b, '\n'))
	}
	cfg := helperSwarm()
	var httpCfg config.HTTP
	switch mode {
	case "rlimit":
		cfg.Nodes = 1
	case "flood":
		httpCfg.Listen = "127.0.0.1:0"
		lim := syscall.Rlimit{Cur: floodFileLimit, Max: floodFileLimit}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur); err == nil {
			lim.Max = cur.Max
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envHelperSupervisor+"=") })
	var reload chan struct{}
	var validate func() error
	var readWait time.Duration
	if mode == "hungreload" {
		readWait = 2 * time.Second
		reload = make(chan struct{}, 1)
		hup := make(chan os.Signal, 2)
		signal.Notify(hup, syscall.SIGHUP)
		go func() { // the helper process's life: it ends with it
			for range hup {
				select {
				case reload <- struct{}{}:
				default:
				}
			}
		}()
		validate = func() error {
			emit(map[string]any{"hook": "validate"})
			select {} // a read that never returns
		}
	}
	sup, err := New(Options{
		Reload:            reload,
		Validate:          validate,
		reloadReadTimeout: readWait,
		Swarm:             cfg,
		HTTP:              httpCfg,
		ShutdownTimeout:   2 * time.Second,
		Args:              []string{"-test.run=^$"},
		Env:               append(env, envFakeNode+"=ok"),
		Log:               log,
		hooks: hooks{
			AfterFork: func(index, pid int) { emit(map[string]any{"hook": "fork", "node": index, "pid": pid}) },
			Stopping: func(index, pid int, st swarmpb.Status, detail string) {
				emit(map[string]any{"hook": "stopping", "node": index, "pid": pid, "status": st.String(), "detail": detail})
			},
			Control: func(nodes []NodeStatus) {
				n := 0
				for _, s := range nodes {
					if s.State == "running" {
						n++
					}
				}
				emit(map[string]any{"hook": "control", "running": n})
			},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	if mode == "rlimit" {
		var orig syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		usr := make(chan os.Signal, 2)
		signal.Notify(usr, syscall.SIGUSR1, syscall.SIGUSR2)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case s := <-usr:
					lim := orig
					if s == syscall.SIGUSR1 {
						lim.Cur = 3
					}
					err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
					emit(map[string]any{"hook": "rlimit", "soft": lim.Cur, "error": fmt.Sprint(err)})
				case <-stop:
					return
				}
			}
		}()
		defer wg.Wait()
		defer close(stop)
	}
	switch err := sup.Run(ctx); {
	case err == nil:
		return 0
	case errors.Is(err, ErrRestartBudget):
		return 1
	default:
		return 3
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *os.File
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// helperProc is a running helper supervisor as the test sees it.
type helperProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	code int

	mu    sync.Mutex
	lines []map[string]any
	cond  chan struct{} // closed and replaced on every new line
}

func startHelper(t *testing.T, mode string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envFakeNode+"=") }),
		envHelperSupervisor+"="+mode)
	cmd.Stderr = logWriterT{t, "helper stderr"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helperProc{cmd: cmd, done: make(chan struct{}), cond: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"raw": sc.Text()}
			}
			if m["hook"] != "control" && m["event"] != "swarm.manager.control" {
				t.Logf("helper: %s", sc.Text())
			}
			h.mu.Lock()
			h.lines = append(h.lines, m)
			close(h.cond)
			h.cond = make(chan struct{})
			h.mu.Unlock()
		}
		_ = cmd.Wait()
		h.code = cmd.ProcessState.ExitCode()
		close(h.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-h.done
			t.Error("the helper supervisor did not stop within 10 s of SIGTERM")
		}
	})
	return h
}

type logWriterT struct {
	t      *testing.T
	prefix string
}

func (w logWriterT) Write(p []byte) (int, error) {
	for line := range strings.Lines(string(p)) {
		w.t.Logf("%s: %s", w.prefix, strings.TrimRight(line, "\n"))
	}
	return len(p), nil
}

// count returns how many lines so far match.
func (h *helperProc) count(match func(map[string]any) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.lines {
		if match(m) {
			n++
		}
	}
	return n
}

// await waits until cond holds over the lines so far, or timeout; it fails
// the test naming what it waited for, also when the helper exits first.
func (h *helperProc) await(t *testing.T, timeout time.Duration, what string, cond func(lines []map[string]any) bool) {
	t.Helper()
	if !h.awaitOrExit(t, timeout, what, cond) {
		t.Fatalf("the helper supervisor exited (code %d) while waiting for %s", h.code, what)
	}
}

// awaitOrExit is await that returns false, instead of failing, when the
// helper exits before cond holds.
func (h *helperProc) awaitOrExit(t *testing.T, timeout time.Duration, what string, cond func(lines []map[string]any) bool) bool {
	t.Helper()
	deadline := time.After(timeout)
	for {
		h.mu.Lock()
		ok, changed := cond(h.lines), h.cond
		h.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-h.done:
			h.mu.Lock()
			defer h.mu.Unlock()
			return cond(h.lines)
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// exit sends SIGTERM and returns the helper's exit code.
func (h *helperProc) exit(t *testing.T) int {
	t.Helper()
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
		return h.code
	case <-time.After(10 * time.Second):
		t.Fatal("the helper supervisor did not exit within 10 s of SIGTERM")
		return -1
	}
}

func hook(name string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["hook"] == name }
}

func message(sub string) func(map[string]any) bool {
	return func(m map[string]any) bool { s, _ := m["message"].(string); return strings.Contains(s, sub) }
}

// controlsWithRunning counts supervision ticks after line `from` that saw
// n nodes running.
func controlsWithRunning(lines []map[string]any, from, n int) int {
	c := 0
	for _, m := range lines[min(from, len(lines)):] {
		if m["hook"] == "control" && m["running"] == float64(n) {
			c++
		}
	}
	return c
}

// A supervisor stopped (SIGSTOP) for longer than
// node_report_timeout and then continued must not judge its healthy nodes
// silent: their reports wait unread on the socket, and the gap is the
// supervisor's own, not theirs.
func TestStoppedSupervisorKeepsHealthyNodes(t *testing.T) {
	h := startHelper(t, "plain")
	cfg := helperSwarm()
	h.await(t, 20*time.Second, "2 nodes running", func(l []map[string]any) bool { return controlsWithRunning(l, 0, 2) >= 3 })
	forks := h.count(hook("fork"))
	pause := cfg.NodeReportTimeout + 2*time.Second // well past node_report_timeout
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The pause is what is under test, not a wait for a condition.
	time.Sleep(pause)
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	resumed := len(h.lines)
	h.mu.Unlock()
	// 20 ticks (2 s) after the resume with both nodes running: time enough
	// for any silence verdict to have been reached and acted on.
	kept := h.awaitOrExit(t, 30*time.Second, "20 supervision ticks with 2 nodes running after SIGCONT", func(l []map[string]any) bool {
		return controlsWithRunning(l, resumed, 2) >= 20
	})
	stopped := h.count(hook("stopping"))
	restarted := h.count(hook("fork")) - forks
	t.Logf("after a %s SIGSTOP of the supervisor (node_report_timeout %s): %d nodes stopped, %d restarted", pause, cfg.NodeReportTimeout, stopped, restarted)
	if stopped != 0 || restarted != 0 {
		t.Errorf("%d healthy nodes were stopped and %d restarted after the supervisor itself was stopped", stopped, restarted)
	}
	if !kept {
		t.Fatalf("the helper supervisor exited %d after SIGCONT", h.code)
	}
	if code := h.exit(t); code != 0 {
		t.Errorf("the helper supervisor exited %d, want 0", code)
	}
}

// A SIGHUP whose configuration read never returns (a hung file system)
// holds up neither supervision nor SIGTERM: the read runs off the
// supervisor's loop, a second SIGHUP meanwhile starts no second one, and
// the swarm stops cleanly.
func TestHungReloadDoesNotHoldUpTheStop(t *testing.T) {
	h := startHelper(t, "hungreload")
	h.await(t, 20*time.Second, "2 nodes running", func(l []map[string]any) bool { return controlsWithRunning(l, 0, 2) >= 3 })
	if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	h.await(t, 10*time.Second, "the reload to start reading the configuration", func(l []map[string]any) bool { return h.countIn(l, hook("validate")) == 1 })
	if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	h.await(t, 10*time.Second, "the second SIGHUP to be logged as adding nothing", func(l []map[string]any) bool {
		return h.countIn(l, message("still being read")) == 1
	})
	// Past the read's deadline (2 s in this helper; 10 s by default) the
	// reload is refused, saying why; the nodes keep running.
	h.await(t, 10*time.Second, "the reload to be refused for its read's time", func(l []map[string]any) bool {
		return h.countIn(l, func(m map[string]any) bool {
			e, _ := m["error"].(string)
			return strings.Contains(e, "reading the configuration did not finish within 2s")
		}) == 1
	})
	h.mu.Lock()
	since := len(h.lines)
	h.mu.Unlock()
	h.await(t, 10*time.Second, "5 supervision ticks with 2 nodes running while the read hangs", func(l []map[string]any) bool {
		return controlsWithRunning(l, since, 2) >= 5
	})
	if code := h.exit(t); code != 0 {
		t.Errorf("the helper supervisor exited %d after SIGTERM, want 0", code)
	}
	if n := h.count(hook("validate")); n != 1 {
		t.Errorf("%d configuration reads for two SIGHUPs while the first hung, want 1", n)
	}
}

// A node that cannot be started because the
// supervisor itself is out of descriptors (EMFILE) is retried, and the
// failures do not consume max_restarts; the health socket keeps accepting
// through the shortage.
func TestSupervisorOutOfDescriptorsKeepsRestartBudget(t *testing.T) {
	h := startHelper(t, "rlimit") // one node, max_restarts 1
	h.await(t, 20*time.Second, "the node running", func(l []map[string]any) bool { return controlsWithRunning(l, 0, 1) >= 1 })
	var socket string
	var pid int
	h.mu.Lock()
	for _, m := range h.lines {
		if s, ok := m["socket"].(string); ok && m["message"] == "swarm starting" {
			socket = s
		}
		if m["hook"] == "fork" {
			pid = int(m["pid"].(float64))
		}
	}
	h.mu.Unlock()
	if socket == "" || pid == 0 {
		t.Fatalf("no socket (%q) or node pid (%d) in the helper's output", socket, pid)
	}

	if err := h.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	h.await(t, 10*time.Second, "the soft RLIMIT_NOFILE lowered to 3", func(l []map[string]any) bool {
		return slices.ContainsFunc(l, func(m map[string]any) bool { return m["hook"] == "rlimit" && m["soft"] == float64(3) })
	})
	// A connection the supervisor cannot accept now (EMFILE on accept).
	stranger, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	// The node dies: its restart is the one max_restarts allows, and it
	// cannot start (no descriptor for fork's pipe).
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	notStarted := message("did not start")
	ok := h.awaitOrExit(t, 20*time.Second, "3 failed starts", func(l []map[string]any) bool {
		return h.countIn(l, notStarted) >= 3
	})
	failed := h.count(notStarted)
	if !ok {
		t.Fatalf("the swarm stopped (exit %d) after %d failed starts of a node for want of the supervisor's own descriptors: they used up max_restarts 1", h.code, failed)
	}
	if err := h.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	h.await(t, 20*time.Second, "the node started again and reporting", func(l []map[string]any) bool {
		return h.countIn(l, hook("fork")) == 2 && controlsWithRunning(l, len(l)-5, 1) >= 1
	})
	t.Logf("%d failed starts for want of descriptors, then the node ran again; the swarm kept going with max_restarts 1", failed)
	// The stranger's connection was accepted (and refused) once descriptors
	// were back: the health socket did not stop accepting.
	stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stranger.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the stranger's connection was not accepted and closed after the shortage: %v", err)
	}
	if code := h.exit(t); code != 0 {
		t.Errorf("the helper supervisor exited %d, want 0", code)
	}
}

// floodFileLimit is the helper's soft RLIMIT_NOFILE in mode flood: the
// issue's 1,024 scaled down.
const floodFileLimit = 128

// Idle keep-alive connections to the
// HTTP listener (the liveness endpoint then), then one node killed, under a tight descriptor limit.
// The restart must work and the swarm must keep running.
func TestLivenessFloodDoesNotStopTheSwarm(t *testing.T) {
	h := startHelper(t, "flood") // two nodes, max_restarts 1, soft limit 128
	h.await(t, 20*time.Second, "2 nodes running", func(l []map[string]any) bool { return controlsWithRunning(l, 0, 2) >= 1 })
	var addr string
	var pid int
	h.mu.Lock()
	for _, m := range h.lines {
		if a, ok := m["addr"].(string); ok && strings.HasPrefix(fmt.Sprint(m["message"]), "http listening") {
			addr = a
		}
		if m["hook"] == "fork" && pid == 0 {
			pid = int(m["pid"].(float64))
		}
	}
	h.mu.Unlock()
	if addr == "" || pid == 0 {
		t.Fatalf("no http.listen address (%q) or node pid (%d) in the helper's output", addr, pid)
	}
	helperFDs := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.cmd.Process.Pid))
		if err != nil {
			return -1
		}
		return len(ents)
	}
	base := helperFDs()
	const clients = 2 * floodFileLimit
	for i := range clients {
		// From eight addresses: one address holds at most a quarter of the
		// listener's connections.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%8))}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The helper takes what it will (all it can before the fix, up to its
	// connection cap after): wait until it holds 50 more descriptors.
	deadline := time.Now().Add(20 * time.Second)
	for helperFDs() < base+50 {
		if time.Now().After(deadline) {
			t.Fatalf("the helper holds %d descriptors (%d before the clients), want %d or more within 20 s", helperFDs(), base, base+50)
		}
		time.Sleep(10 * time.Millisecond)
	}
	held := helperFDs()
	forks := h.count(hook("fork"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ok := h.awaitOrExit(t, 20*time.Second, "the killed node restarted and 2 nodes running", func(l []map[string]any) bool {
		return h.countIn(l, hook("fork")) == forks+1 && controlsWithRunning(l, len(l)-3, 2) >= 1
	})
	t.Logf("%d idle clients; the supervisor held %d descriptors (%d before, soft limit %d); start failures: %d; swarm kept running: %v",
		clients, held, base, floodFileLimit, h.count(message("did not start")), ok)
	if !ok {
		t.Fatalf("the swarm stopped (exit %d) after a node kill while http.listen was flooded", h.code)
	}
	if held > floodFileLimit-fdReserve {
		t.Errorf("the supervisor held %d descriptors with a soft limit of %d: not the reserve of %d", held, floodFileLimit, fdReserve)
	}
	if code := h.exit(t); code != 0 {
		t.Errorf("the helper supervisor exited %d, want 0", code)
	}
}

// countIn is count over a slice the caller holds (inside await).
func (h *helperProc) countIn(lines []map[string]any, match func(map[string]any) bool) int {
	n := 0
	for _, m := range lines {
		if match(m) {
			n++
		}
	}
	return n
}
