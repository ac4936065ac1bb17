package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
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
