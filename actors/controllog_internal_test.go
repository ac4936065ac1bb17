package actors

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.b.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// A thousand pauses and resumes in a burst make two lines: the first
// change, and at the window's end one that counts the rest and gives the
// state they left; a change after a quiet window is logged at once again;
// close writes a summary still due and stops the timer.
func TestControlLogBoundsPauseAndResumeLines(t *testing.T) {
	var out lockedBuffer
	var mu sync.Mutex
	paused := false
	l := newControlLog(zerolog.New(&out), func() (bool, int) { mu.Lock(); defer mu.Unlock(); return paused, 3 })
	l.window = 50 * time.Millisecond
	for i := range 1000 {
		mu.Lock()
		paused = i%2 == 0
		mu.Unlock()
		l.change(func(log zerolog.Logger) { log.Info().Msg("change") })
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(out.lines()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for the burst's summary: %v", out.lines())
		}
		time.Sleep(5 * time.Millisecond)
	}
	lines := out.lines()
	if len(lines) != 2 || lines[0]["message"] != "change" || lines[1]["changes"] != float64(999) ||
		lines[1]["paused"] != false || lines[1]["paused_partitions"] != float64(3) {
		t.Fatalf("a burst of 1,000 changes logged %d lines, want the first and one summary of 999 (paused false, 3 partitions): %v", len(lines), lines)
	}
	time.Sleep(2 * l.window) // a quiet window: what the test is about
	l.change(func(log zerolog.Logger) { log.Info().Msg("change") })
	if n := len(out.lines()); n != 3 {
		t.Fatalf("a change after a quiet window: %d lines, want it logged at once (3)", n)
	}
	l.change(func(log zerolog.Logger) { log.Info().Msg("change") })
	l.close()
	lines = out.lines()
	if len(lines) != 4 || lines[3]["changes"] != float64(1) {
		t.Fatalf("close with a counted change: %v, want its summary written", lines)
	}
	l.mu.Lock()
	timer := l.timer
	l.mu.Unlock()
	if timer != nil {
		t.Error("a timer outlived close")
	}
}
