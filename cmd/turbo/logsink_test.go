package main

import (
	"bytes"
	"fmt"
	"github.com/turbokafka/turbo/config"
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// blockingWriter blocks every write until released, like a pipe nobody reads.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *blockingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// With the sink's output blocked, writes neither block nor fail: what does
// not fit is dropped and counted; once the output drains, one line says how
// many were lost; Close is bounded.
func TestLogSinkNeverBlocks(t *testing.T) {
	out := &blockingWriter{release: make(chan struct{})}
	s := newLogSink(out, 100)
	line := []byte(strings.Repeat("x", 9) + "\n") // 10 bytes
	start := time.Now()
	for range 1000 {
		if n, err := s.Write(line); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("1000 writes to a blocked sink took %s", took)
	}
	// The writer goroutine holds at most one batch (≤ 100 bytes) in its
	// blocked write; the queue holds ≤ 100 more; the rest was dropped.
	if d := s.Dropped(); d < 1000-20 || d > 1000-10 {
		t.Errorf("dropped %d of 1000 ten-byte lines with a 100-byte queue, want 980–990", d)
	}
	start = time.Now()
	if s.Close(50 * time.Millisecond) {
		t.Error("Close reported everything written while the output is blocked")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close with a blocked output took %s, want its bound", took)
	}
	dropped := s.Dropped()
	close(out.release) // the reader comes back
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sink's goroutine did not return once its output drained")
	}
	// Each time the output moved after drops, one line said how many: all
	// of them are accounted for.
	var reported int64
	for _, l := range strings.Split(out.String(), "\n") {
		var n, total int64
		if _, err := fmt.Sscanf(l, "turbo: %d lines of standard error were dropped (%d in all)", &n, &total); err == nil {
			reported += n
		}
	}
	if reported != dropped {
		t.Errorf("the notices report %d dropped lines, want %d:\n%s", reported, dropped, out.String())
	}
}

// An output that keeps up gets every line, in order, and Close flushes.
func TestLogSinkWritesEverythingInOrder(t *testing.T) {
	var out bytes.Buffer
	s := newLogSink(&out, 1<<20)
	var want strings.Builder
	for i := range 1000 {
		l := fmt.Sprintf("line %d\n", i)
		want.WriteString(l)
		s.Write([]byte(l))
	}
	if !s.Close(10 * time.Second) {
		t.Fatal("Close did not flush within 10 s")
	}
	if out.String() != want.String() {
		t.Errorf("output differs from what was written (%d vs %d bytes)", out.Len(), want.Len())
	}
	if s.Dropped() != 0 {
		t.Errorf("dropped %d", s.Dropped())
	}
	s.Write([]byte("after close\n"))
	if strings.Contains(out.String(), "after close") || s.Dropped() != 1 {
		t.Errorf("a write after Close was not dropped (dropped %d)", s.Dropped())
	}
}

// Console log lines carry colour codes only on a terminal, and never with
// NO_COLOR: written to a file or a pipe (`make run > log`) they are plain.
func TestConsoleLogsAreColouredOnlyOnATerminal(t *testing.T) {
	write := func(out *os.File, noColor string) {
		t.Helper()
		t.Setenv("NO_COLOR", noColor)
		sink := newLogSink(out, 1<<20)
		log := newLogger(config.Log{Level: config.LogInfo, Format: config.LogConsole}, sink)
		log.Warn().Str("k", "v").Msg("a line")
		if !sink.Close(10 * time.Second) {
			t.Fatal("the sink did not drain in 10s")
		}
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write(f, "")
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "a line") || strings.Contains(string(got), "\x1b[") {
		t.Fatalf("a console line written to a file: %q, want it without escape codes", got)
	}

	// A pseudo-terminal: coloured, unless NO_COLOR says otherwise.
	master, slave := openPTY(t)
	for _, c := range []struct {
		noColor string
		want    bool
	}{{"", true}, {"1", false}} {
		write(slave, c.noColor)
		buf := make([]byte, 4096)
		if err := master.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := master.Read(buf)
		if err != nil {
			t.Fatalf("reading the terminal: %v", err)
		}
		if coloured := strings.Contains(string(buf[:n]), "\x1b["); coloured != c.want {
			t.Fatalf("NO_COLOR=%q on a terminal: %q, coloured %v, want %v", c.noColor, buf[:n], coloured, c.want)
		}
	}
}

// openPTY opens a pseudo-terminal pair, closed when the test ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening its other end: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}
