package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
)

// Helpers for tests that drive the real binary: `turbo dev` as the broker (a
// separate process, so the broker's memory and CPU are not the consumer's),
// `turbo produce`, `turbo run`.

// binary is one build of cmd/turbo, made once per test binary run.
type binary struct {
	once sync.Once
	path string
	err  error
}

var (
	raceBin binary // Binary: with the race detector
	perfBin binary // PerfBinary: without
	binDir  string // holds both; RemoveBinary deletes it
	binMu   sync.Mutex
)

// Main is a TestMain for packages that run the binary: it runs the tests,
// removes the binaries Binary and PerfBinary built, and exits with the
// tests' code.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBinary()
	os.Exit(code)
}

// RemoveBinary deletes the binaries Binary and PerfBinary built, if any.
// Call it from TestMain after m.Run (Main does).
func RemoveBinary() {
	binMu.Lock()
	defer binMu.Unlock()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// The prebuilt binaries a test run may be given, so that the packages
// that run the binary share one build instead of linking their own (the
// Makefile builds both once per `make test` and sets these).
const (
	EnvBinary     = "TURBO_TEST_BINARY"      // built with -race: Binary
	EnvPerfBinary = "TURBO_TEST_PERF_BINARY" // built without: PerfBinary
)

// Binary builds the turbo binary with the race detector once per test
// binary run and returns its path, or returns the one TURBO_TEST_BINARY
// names. Start, StartWith, Command and ProduceWithBinary run it with
// ChildEnv and fail the test when a child reports a race (see RaceWatch).
func Binary(t testing.TB) string {
	t.Helper()
	return raceBin.build(t, EnvBinary, "turbo-race", "-race")
}

// PerfBinary builds the turbo binary without the race detector (or returns
// the one TURBO_TEST_PERF_BINARY names), for the suites that measure
// performance (test/bench): the detector slows a program 2–20 times,
// unevenly, which would skew turbo's figures against its peers'. Every
// other suite uses Binary.
func PerfBinary(t testing.TB) string {
	t.Helper()
	return perfBin.build(t, EnvPerfBinary, "turbo")
}

// TransactionalBinary is the turbo binary for a process whose transactions
// fail on client's side ("" is the default, sarama): Binary, but for
// sarama, whose transactional producer races with itself once its produce
// requests fail (transitionTo writes its lastError under one lock while
// publishTxnPartitions reads it under another: IBM/sarama#2913), which the
// race build reports whatever turbo does.
func TransactionalBinary(t testing.TB, client config.KafkaClient) string {
	t.Helper()
	if client == "" || client == config.ClientSarama {
		return PerfBinary(t)
	}
	return Binary(t)
}

func (b *binary) build(t testing.TB, env, name string, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		if path := os.Getenv(env); path != "" {
			if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				b.err = fmt.Errorf("%s=%s is not an executable file (%v)", env, path, err)
			}
			b.path = path
			return
		}
		binMu.Lock()
		if binDir == "" {
			binDir, b.err = os.MkdirTemp("", "turbo-e2e-")
		}
		dir := binDir
		binMu.Unlock()
		if b.err != nil {
			return
		}
		b.path = filepath.Join(dir, name)
		args := append(append([]string{"build"}, flags...), "-o", b.path, "github.com/turbokafka/turbo/cmd/turbo")
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("building turbo: %v", b.err)
	}
	return b.path
}

// Proc is a child process of the test, killed at cleanup.
type Proc struct {
	Cmd     *exec.Cmd
	Started time.Time
	Exited  time.Time // when it exited; read it only once Wait or Alive said so
	done    chan struct{}
	err     error
}

// Start runs the binary with args; stdout goes to the given writer (the test
// log if nil), stderr to the test log. The process is killed at cleanup.
func Start(t testing.TB, stdout io.Writer, args ...string) *Proc {
	t.Helper()
	if stdout == nil {
		stdout = logWriter{t, "stdout"}
	}
	return StartWith(t, stdout, logWriter{t, "stderr"}, args...)
}

// StartWith runs the binary with args and the given stdout and stderr (any
// writer, or an *os.File such as a pipe's end). The process is killed at
// cleanup.
func StartWith(t testing.TB, stdout, stderr io.Writer, args ...string) *Proc {
	t.Helper()
	return StartBinary(t, Binary(t), stdout, stderr, args...)
}

// StartBinary is StartWith for a given build of turbo: PerfBinary for a
// test that measures the process (its memory, its speed), which the race
// detector would distort. Nil writers mean the test log.
func StartBinary(t testing.TB, bin string, stdout, stderr io.Writer, args ...string) *Proc {
	t.Helper()
	if stdout == nil {
		stdout = logWriter{t, "stdout"}
	}
	if stderr == nil {
		stderr = logWriter{t, "stderr"}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = childEnvOf(t)
	name := "turbo " + strings.Join(args, " ")
	if _, isFile := stderr.(*os.File); !isFile {
		// A file (a pipe's end the test reads) is the child's own: wrapping
		// it would put a copying goroutine in between. The exit code still
		// tells of a race.
		stderr = RaceWatch(t, name, stderr)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting turbo %v: %v", args, err)
	}
	p := &Proc{Cmd: cmd, Started: time.Now(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		p.Exited = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if cmd.ProcessState.ExitCode() == RaceExitCode {
			t.Errorf("%s exited with the race detector's exit code %d: a data race (its report is in its stderr)", name, RaceExitCode)
		}
	})
	return p
}

// Wait waits for the process to exit and returns its exit code (-1 when a
// signal killed it).
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	code, _ := p.WaitHow(t, timeout)
	return code
}

// WaitHow waits for the process to exit and says how it ended: its exit
// code and "exit code N", or -1 and "killed by SIG".
func (p *Proc) WaitHow(t testing.TB, timeout time.Duration) (code int, how string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("turbo %v did not exit within %s", p.Cmd.Args[1:], timeout)
	}
	ws := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -1, "killed by " + ws.Signal().String()
	}
	return ws.ExitStatus(), fmt.Sprintf("exit code %d", ws.ExitStatus())
}

// Signal sends sig and returns when it did.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) time.Time {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %s: %v", sig, err)
	}
	return time.Now()
}

// Alive reports whether the process has not exited yet.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// devListening is how `turbo dev` says where it listens, on stdout.
const devListening = "turbo dev: Kafka-protocol broker listening on "

// Dev starts `turbo dev` on a port of its choosing (with extra flags such as
// "--partitions", "1") and returns the address it says it listens on. The
// child binds port 0 itself: a port found free by the test and bound later
// by the child could be taken in between by another package's test.
//
// The broker is a fixture, not what the tests judge, so it runs on the build
// without the race detector (PerfBinary): instrumented, it took about a
// third of the CPU of the suites that use it, and it would slow the
// benchmarks' peers unevenly. Its code is raced where it is the subject:
// testkit.Broker runs the same embedded broker inside the race-built test
// binaries, and the examples test runs `turbo dev` on Binary.
func Dev(t testing.TB, extra ...string) string {
	t.Helper()
	addr, _ := DevOn(t, "127.0.0.1:0", extra...)
	return addr
}

// DevOn is Dev on the given address (to start a broker again on the address
// a first one got), and returns the process too.
func DevOn(t testing.TB, listen string, extra ...string) (string, *Proc) {
	t.Helper()
	return devOn(t, PerfBinary(t), listen, extra...)
}

func devOn(t testing.TB, bin, listen string, extra ...string) (string, *Proc) {
	t.Helper()
	said := make(chan string, 1)
	out := &lineWatch{t: t, prefix: "stdout", match: func(line string) {
		if a, ok := strings.CutPrefix(line, devListening); ok {
			say(said, strings.Fields(a)[0])
		}
	}}
	p := StartBinary(t, bin, out, nil, append([]string{"dev", "--listen", listen}, extra...)...)
	return awaitSaid(t, p, said, fmt.Sprintf("turbo dev to say where it listens (%q on stdout)", devListening)), p
}

// httpListening starts the message of turbo's log line that says where
// http.listen bound (its field addr): how a test learns the port of a
// child configured with http.listen on port 0.
const httpListening = "http listening"

// StartHTTP is StartWith for a turbo (run or swarm) whose config has
// http.listen on port 0, e.g. 127.0.0.1:0: it returns the process and the
// address the child bound, which it logs on stderr (log.format json). The
// child binds the port itself: a port found free by the test and bound
// later by the child could be taken in between by another package's test.
// Nil writers mean the test log.
func StartHTTP(t testing.TB, stdout, stderr io.Writer, args ...string) (*Proc, string) {
	t.Helper()
	return StartHTTPBinary(t, Binary(t), stdout, stderr, args...)
}

// StartHTTPBinary is StartHTTP for a given build of turbo (see StartBinary).
func StartHTTPBinary(t testing.TB, bin string, stdout, stderr io.Writer, args ...string) (*Proc, string) {
	t.Helper()
	w, said := WatchHTTPAddr(t, stderr)
	p := StartBinary(t, bin, stdout, w, args...)
	return p, awaitSaid(t, p, said, fmt.Sprintf("turbo %s to log where http.listen bound (%q, field addr, on stderr)", args[0], httpListening))
}

// WatchHTTPAddr returns a writer for a turbo's stderr that passes
// everything on to next (the test log if nil) and sends the address of the
// first "http listening" JSON log line on the channel. It is StartHTTP's
// part for a process the test starts itself.
func WatchHTTPAddr(t testing.TB, next io.Writer) (io.Writer, <-chan string) {
	said := make(chan string, 1)
	return &lineWatch{t: t, prefix: "stderr", next: next, match: func(line string) {
		if a, ok := httpAddr(line); ok {
			say(said, a)
		}
	}}, said
}

// httpAddr reads the bound address from a turbo JSON log line saying
// where http.listen listens.
func httpAddr(line string) (string, bool) {
	if !strings.Contains(line, httpListening) { // most lines: no JSON decoding
		return "", false
	}
	var l struct {
		Message string `json:"message"`
		Addr    string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || !strings.HasPrefix(l.Message, httpListening) || l.Addr == "" {
		return "", false
	}
	return l.Addr, true
}

// say sends v unless a value was sent already: the first line counts.
func say(said chan<- string, v string) {
	select {
	case said <- v:
	default:
	}
}

// saidWithin bounds how long a child may take to say where it listens.
const saidWithin = 20 * time.Second

// awaitSaid returns what p's output watch sends on said, failing the test
// (with what, what it waited for) if p exits first or saidWithin passes.
func awaitSaid(t testing.TB, p *Proc, said <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-said:
		return v
	case <-p.done:
		t.Fatalf("waiting for %s: the process exited first: %v", what, p.err)
	case <-time.After(saidWithin):
		t.Fatalf("waited %s for %s", saidWithin, what)
	}
	return ""
}

// lineWatch shows match each complete line of a child's output, and logs
// the lines as Start does, or passes the output on to next if set.
type lineWatch struct {
	t      testing.TB
	prefix string
	match  func(line string)
	next   io.Writer

	mu      sync.Mutex
	partial []byte
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next != nil {
		if _, err := w.next.Write(p); err != nil {
			return 0, err
		}
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if w.next == nil {
			w.t.Logf("%s: %s", w.prefix, line)
		}
		w.match(line)
	}
	if len(w.partial) > maxLine { // a line that never ends: drop it (logged in pieces)
		if w.next == nil {
			w.t.Logf("%s: %s", w.prefix, w.partial)
		}
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// maxLine bounds what lineWatch holds of an unfinished line.
const maxLine = 64 << 10

// Reachable reports whether something accepts TCP connections on addr.
func Reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Cluster returns the address of a broker that turbo processes reach, with
// topics on it (partitions each): the shared cluster of TURBO_TEST_BROKERS,
// or else a `turbo dev` of the test's own. Name the topics, and the groups,
// with TopicName: on a shared cluster they must be unique.
func Cluster(t testing.TB, partitions int, topics ...string) string {
	t.Helper()
	if brokers := SharedBrokers(); brokers != nil {
		createTopics(t, brokers, partitions, topics)
		return brokers[0] // enough to bootstrap from
	}
	return Dev(t, "--partitions", strconv.Itoa(partitions))
}

// ProduceWithBinary writes demo records with `turbo produce`, built without
// the race detector (a fixture, as Dev's broker; testkit.Produce runs the
// same producer inside the race-built test binaries).
func ProduceWithBinary(t testing.TB, addr, topic string, count, keys int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, PerfBinary(t), "produce", "--brokers", addr, "--topic", topic,
		"--count", fmt.Sprint(count), "--keys", fmt.Sprint(keys))
	cmd.Env = ChildEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("turbo produce: %v\n%s", err, out)
	}
}

type logWriter struct {
	t      testing.TB
	prefix string
}

func (w logWriter) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(string(p)))
	for sc.Scan() {
		w.t.Logf("%s: %s", w.prefix, sc.Text())
	}
	return len(p), nil
}

// WriteConfig writes a config file into a temp dir and returns its path.
func WriteConfig(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
