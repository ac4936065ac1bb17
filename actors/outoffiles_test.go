//go:build linux

package actors_test

// A handler that cannot open a connection because the process has run out
// of file descriptors (EMFILE, ENFILE) is not failing on its record: the
// consumer says so once, naming the limit, and retries such failures
// instead of restarting the tree over them (`ulimit -n
// 64` with concurrency 200 made the tree restart again and again, with no
// hint about the limit).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers/sleep"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// logTap is the test as the harness sees it, keeping a copy of every log
// line the consumer writes.
type logTap struct {
	*testing.T
	mu    sync.Mutex
	lines []string
}

func (l *logTap) Logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
	l.T.Logf(format, args...)
}

// matching returns the lines containing every one of parts.
func (l *logTap) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// dialEMFILE is the error net/http returns when the dial's socket() fails
// with EMFILE, as the http handler wraps it.
func dialEMFILE() error {
	return fmt.Errorf("actors/handlers: post: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)})
}

func openFilesLimit(t *testing.T) uint64 {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	return rl.Cur
}

// Every third record's first three attempts fail with a wrapped EMFILE,
// under max_attempts 1 and on_failure: fail. They must be retried (the
// tree never restarts), every record handled once, each such failure
// counted, and exactly one log line must explain it, naming the limit.
func TestOutOfFilesIsReportedOnceAndRetried(t *testing.T) {
	t.Parallel()
	tap := &logTap{T: t}
	var emfile atomic.Int64
	handler := harness.Fail(func(rec *actors.Record) bool { return rec.Offset%3 == 0 }, func(attempt int) error {
		if attempt <= 3 {
			emfile.Add(1)
			return dialEMFILE()
		}
		return nil
	}, nil)
	h := harness.New(tap, consumer(func(c *config.Consumer) { c.Retry.MaxAttempts = 1 }), handler)
	feedAll(h, 4, 60, 10)
	h.AwaitAllCommitted()
	checkOnce(t, h, 4, 60)
	s := h.Stats()
	if s.Restarts != 0 {
		t.Errorf("%d tree restarts over a resource limit of the process, want 0", s.Restarts)
	}
	if s.FileLimit != emfile.Load() || s.FileLimit == 0 {
		t.Errorf("%d failures counted as out of file descriptors, want %d", s.FileLimit, emfile.Load())
	}
	limit := fmt.Sprintf("open_files_limit=%d", openFilesLimit(t))
	if got := tap.matching("RLIMIT_NOFILE"); len(got) != 1 || !strings.Contains(got[0], limit) {
		t.Errorf("log lines naming RLIMIT_NOFILE: %q, want exactly one, with %s", got, limit)
	}
}

// The same with a real limit: a child process lowers its RLIMIT_NOFILE to
// a few descriptors above what it uses, and its handler dials a listener of
// this process and holds the connection a moment, with sixteen runners.
func TestOutOfFilesWithARealLimit(t *testing.T) {
	t.Parallel()
	if os.Getenv("TURBO_OUT_OF_FILES_CHILD") != "" {
		outOfFilesChild(t)
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Accept and hold, so the child's connections stay open until it
	// closes them (the kernel's backlog would accept them too, but held
	// they cannot be mistaken for refused ones).
	var conns sync.WaitGroup
	stop := make(chan struct{})
	accepted := make(chan net.Conn)
	conns.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c:
			case <-stop:
				c.Close()
				return
			}
		}
	})
	conns.Go(func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			select {
			case c := <-accepted:
				held = append(held, c)
			case <-stop:
				return
			}
		}
	})
	defer func() {
		close(stop)
		l.Close()
		conns.Wait()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOutOfFilesWithARealLimit$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TURBO_OUT_OF_FILES_CHILD="+l.Addr().String())
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("child: %v\n%s", err, text)
	}
	var limit string
	for line := range strings.Lines(text) {
		if after, ok := strings.CutPrefix(strings.TrimSpace(line), "child limit: "); ok {
			limit = strings.TrimSpace(after)
		}
		if strings.HasPrefix(line, "child figures: ") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if limit == "" {
		t.Fatalf("the child did not say which limit it set:\n%s", text)
	}
	var explained []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, "RLIMIT_NOFILE") {
			explained = append(explained, strings.TrimSpace(line))
		}
	}
	if len(explained) != 1 || !strings.Contains(explained[0], "open_files_limit="+limit) {
		t.Errorf("child's log lines naming RLIMIT_NOFILE: %q, want exactly one, with open_files_limit=%s\n%s", explained, limit, text)
	}
}

// outOfFilesChild runs in the child: it lowers its own limit, then runs a
// consumer whose handler dials addr.
func outOfFilesChild(t *testing.T) {
	addr := os.Getenv("TURBO_OUT_OF_FILES_CHILD")
	// One dial first, so the runtime's poller descriptors already exist.
	if c, err := net.Dial("tcp", addr); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = uint64(len(fds) + 6)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	fmt.Println("child limit: " + strconv.FormatUint(rl.Cur, 10))

	var emfile atomic.Int64
	dial := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EMFILE) {
				emfile.Add(1)
			}
			return fmt.Errorf("dialing: %w", err)
		}
		defer c.Close()
		return sleep.For(ctx, 20*time.Millisecond)
	})
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.Concurrency = 16
		c.Ordering = config.OrderingUnordered
		c.Retry.MaxAttempts = 2
	}), dial)
	feedAll(h, 2, 50, 0)
	h.AwaitAllCommitted()
	s := h.Stats()
	fmt.Printf("child figures: 100 records, %d handled, %d dials out of files, %d restarts\n", h.HandledCount(), emfile.Load(), s.Restarts)
	if emfile.Load() == 0 {
		t.Fatal("no dial ran out of file descriptors: the limit did not bite")
	}
	checkOnce(t, h, 2, 50)
	if s.Restarts != 0 || s.FileLimit != emfile.Load() {
		t.Errorf("%d restarts and %d failures counted as out of files, want 0 and %d", s.Restarts, s.FileLimit, emfile.Load())
	}
}
