package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// Member processes: real `turbo run` processes of one consumer group, each
// posting to the ledger under its own URL (so the ledger knows who delivered
// what), their JSON logs parsed for partition moves and forwarded to the
// test log.

const (
	// shutdownTimeout is the members' shutdown_timeout.
	shutdownTimeout = 10 * time.Second
	// stopWait bounds a graceful stop: turbo's own bound (shutdown_timeout
	// plus 10 s to leave) and a margin for a loaded machine.
	stopWait = shutdownTimeout + 30*time.Second
	// killWait bounds the exit of a process sent SIGKILL.
	killWait = 20 * time.Second
)

// groupSpec is what every member of the group shares.
type groupSpec struct {
	brokers     []string
	group       string
	topic       string
	url         string // the ledger; each member posts to url/<name>
	concurrency int
}

func (g groupSpec) config(t *testing.T, name string) string {
	brokers, _ := json.Marshal(g.brokers)
	return testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: %s
  client_id: %s
consumers:
  - name: chaos
    group: %q
    topics: [%q]
    ordering: key
    concurrency: %d
    max_buffered: 500
    commit_interval: 200ms
    retry: {max_attempts: 5, initial_backoff: 10ms, max_backoff: 200ms}
    on_failure: fail
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: %s
log: {level: info, format: json}
`, brokers, name, g.group, g.topic, g.concurrency, g.url+"/"+name, shutdownTimeout))
}

// members runs and counts the member processes of one group.
type members struct {
	t    *testing.T
	spec groupSpec

	mu       sync.Mutex
	seq      int
	procs    []*member
	changed  chan struct{} // closed and replaced at every partition event
	assigned int           // "partition assigned" lines, every member
	released int           // "partition released" lines, every member
	failures int           // "consumer tree failed" lines, every member
}

type member struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited and its output was read
	held map[string]bool
}

func newMembers(t *testing.T, spec groupSpec) *members {
	ms := &members{t: t, spec: spec, changed: make(chan struct{})}
	t.Cleanup(func() {
		// Whatever is still running at the end (a failed test): SIGKILL,
		// and wait, so that no output reaches a finished test's log.
		for _, m := range ms.all() {
			select {
			case <-m.done:
				continue
			default:
			}
			_ = m.cmd.Process.Kill()
			select {
			case <-m.done:
			case <-time.After(killWait):
				t.Errorf("member %s (pid %d) did not exit within %s of SIGKILL", m.name, m.cmd.Process.Pid, killWait)
			}
		}
	})
	return ms
}

func (ms *members) all() []*member {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]*member(nil), ms.procs...)
}

// live returns the members still running, oldest first.
func (ms *members) live() []*member {
	var out []*member
	for _, m := range ms.all() {
		select {
		case <-m.done:
		default:
			out = append(out, m)
		}
	}
	return out
}

// start starts a new member, named m<N>.
func (ms *members) start() *member {
	ms.t.Helper()
	ms.mu.Lock()
	ms.seq++
	m := &member{name: fmt.Sprintf("m%d", ms.seq), done: make(chan struct{}), held: map[string]bool{}}
	ms.mu.Unlock()
	m.cmd = testkit.Command(ms.t, "run", "--config", ms.spec.config(ms.t, m.name))
	m.cmd.Env = append(m.cmd.Env, "GOTRACEBACK=all") // dumpStacks: every goroutine
	m.cmd.Stdout = &lineWriter{line: func(l string) { ms.t.Logf("%s stdout: %s", m.name, l) }}
	m.cmd.Stderr = testkit.RaceWatch(ms.t, "member "+m.name, &lineWriter{line: func(l string) { ms.logLine(m, l) }})
	if err := m.cmd.Start(); err != nil {
		ms.t.Fatalf("starting member %s: %v", m.name, err)
	}
	ms.mu.Lock()
	ms.procs = append(ms.procs, m)
	ms.mu.Unlock()
	// The one reaper of this child; the cleanup waits for it.
	go func() {
		_ = m.cmd.Wait() // the exit status stays in cmd.ProcessState
		ms.mu.Lock()
		clear(m.held) // a dead process holds nothing
		ms.notifyLocked()
		ms.mu.Unlock()
		close(m.done)
	}()
	ms.t.Logf("member %s started (pid %d)", m.name, m.cmd.Process.Pid)
	return m
}

func (ms *members) notifyLocked() {
	close(ms.changed)
	ms.changed = make(chan struct{})
}

// logLine forwards one line of a member's JSON log to the test log and
// counts the partition moves it reports.
func (ms *members) logLine(m *member, line string) {
	ms.t.Logf("%s: %s", m.name, line)
	var ev struct {
		Message   string `json:"message"`
		Partition string `json:"partition"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	switch ev.Message {
	case "partition assigned":
		ms.assigned++
		m.held[ev.Partition] = true
	case "partition released",
		"partition lost with the group session: its running records are cancelled, nothing more of it starts or is committed":
		ms.released++
		delete(m.held, ev.Partition)
	case "consumer tree failed; stopping it":
		ms.failures++
	default:
		return
	}
	ms.notifyLocked()
}

// held returns how many partitions m holds by its log.
func (ms *members) held(m *member) int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return len(m.held)
}

// counts returns the partition events seen so far.
func (ms *members) counts() (assigned, released, failures int) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.assigned, ms.released, ms.failures
}

// await waits until cond holds, checking at every partition event and every
// ledger change, and fails the test naming what it waited for.
func (ms *members) await(ledger *testkit.Ledger, timeout time.Duration, what string, cond func(testkit.Progress) bool) {
	ms.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := ms.awaitCtx(ctx, ledger, what, cond); err != nil {
		ms.dumpStacks()
		ms.t.Fatalf("after %s: %v", timeout, err)
	}
}

// dumpStacks has every live member print its goroutines to the test log
// and exit (SIGABRT): what a wait that timed out waited on is in them.
func (ms *members) dumpStacks() {
	for _, m := range ms.live() {
		ms.t.Logf("member %s: SIGABRT for its goroutines", m.name)
		_ = m.cmd.Process.Signal(syscall.SIGABRT)
	}
	for _, m := range ms.all() {
		select {
		case <-m.done:
		case <-time.After(killWait):
			ms.t.Logf("member %s did not exit within %s of SIGABRT", m.name, killWait)
		}
	}
}

func (ms *members) awaitCtx(ctx context.Context, ledger *testkit.Ledger, what string, cond func(testkit.Progress) bool) error {
	for {
		ms.mu.Lock()
		ch := ms.changed
		ms.mu.Unlock()
		lch := ledger.Changed()
		p := ledger.Progress()
		if cond(p) {
			return nil
		}
		select {
		case <-ch:
		case <-lch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (ledger: produced %d, finished %d, running %v; members holding: %s)",
				what, context.Cause(ctx), p.Produced, p.Finished, p.Running, ms.holding())
		}
	}
}

// heldByLive returns how many partitions the running members hold.
func (ms *members) heldByLive() int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	n := 0
	for _, m := range ms.procs {
		n += len(m.held) // emptied when the process exits
	}
	return n
}

// commitPoll is how often drain reads the group's committed offsets, which
// nothing announces.
const commitPoll = 250 * time.Millisecond

// drain waits, within timeout, until (1) every record produced finished at
// least once, (2) the running members hold all partitions (a member killed
// late holds its partitions until its session times out, and what it
// finished but had not committed comes again), and (3) the group committed
// the end of every partition. Stop producing first.
func (ms *members) drain(ledger *testkit.Ledger, brokers []string, partitions int, timeout time.Duration) error {
	ms.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := ledger.AwaitAllFinished(ctx); err != nil {
		return err
	}
	if err := ms.awaitCtx(ctx, ledger, fmt.Sprintf("the running members to hold all %d partitions", partitions), func(testkit.Progress) bool {
		return ms.heldByLive() == partitions
	}); err != nil {
		return err
	}
	ends := testkit.EndOffsets(ms.t, brokers, ms.spec.topic)
	tk := time.NewTicker(commitPoll)
	defer tk.Stop()
	for {
		committed := testkit.CommittedOffsets(ms.t, brokers, ms.spec.group, ms.spec.topic)
		behind := 0
		for p, end := range ends {
			if committed[p] != end {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		select {
		case <-tk.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the group to commit the end of every partition: %d partitions behind (committed %v, ends %v)", behind, committed, ends)
		}
	}
}

func (ms *members) holding() string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var b strings.Builder
	for _, m := range ms.procs {
		select {
		case <-m.done:
			continue
		default:
		}
		fmt.Fprintf(&b, "%s=%d ", m.name, len(m.held))
	}
	return strings.TrimSpace(b.String())
}

// kill sends SIGKILL to m and waits for it to be reaped.
func (ms *members) kill(m *member) {
	ms.t.Helper()
	ms.t.Logf("member %s: SIGKILL (holding %d partitions)", m.name, ms.held(m))
	if err := m.cmd.Process.Kill(); err != nil {
		ms.t.Fatalf("killing member %s: %v", m.name, err)
	}
	select {
	case <-m.done:
	case <-time.After(killWait):
		ms.t.Fatalf("member %s did not exit within %s of SIGKILL", m.name, killWait)
	}
}

// stop sends SIGTERM to m, waits for it to exit, and reports an exit code
// other than 0 (a graceful stop must be clean) as a test error.
func (ms *members) stop(m *member) {
	ms.t.Helper()
	ms.t.Logf("member %s: SIGTERM (holding %d partitions)", m.name, ms.held(m))
	started := time.Now()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		ms.t.Fatalf("stopping member %s: %v", m.name, err)
	}
	select {
	case <-m.done:
	case <-time.After(stopWait):
		ms.t.Fatalf("member %s did not exit within %s of SIGTERM", m.name, stopWait)
	}
	if code := m.cmd.ProcessState.ExitCode(); code != 0 {
		ms.t.Errorf("member %s exited %d after SIGTERM, want 0", m.name, code)
	}
	ms.t.Logf("member %s: exited %d, %s after SIGTERM", m.name, m.cmd.ProcessState.ExitCode(), time.Since(started).Round(time.Millisecond))
}

// lineWriter calls line for every complete line written to it; what is left
// unterminated is dropped at exit (a killed process's last words).
type lineWriter struct {
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// brokerKind names the broker the test runs against.
func brokerKind() string {
	if testkit.SharedBrokers() != nil {
		return "kafka"
	}
	return "embedded"
}

// checkCommittedToTheEnd fails the test unless the group's committed offset
// is the end of every partition of topic: after a drain and a graceful stop,
// every record finished and every watermark was committed, so a restart
// would redeliver nothing.
func checkCommittedToTheEnd(t *testing.T, brokers []string, group, topic string) {
	t.Helper()
	committed := testkit.CommittedOffsets(t, brokers, group, topic)
	for p, end := range testkit.EndOffsets(t, brokers, topic) {
		if committed[p] != end {
			t.Errorf("partition %d: committed offset %d after the drain and a graceful stop, want its end %d", p, committed[p], end)
		}
	}
}
