package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/turbokafka/turbo/test/testkit"
)

// The exact bytes liveLine adds around log output, step by step.
func TestLiveLineBytes(t *testing.T) {
	type step struct {
		op   string // "log", "show", "hide"
		arg  string
		want string
	}
	const c = clearLine
	tests := []struct {
		name  string
		steps []step
	}{
		{"no live line: log output passes untouched", []step{
			{"log", "a\n", "a\n"},
			{"log", "b\n", "b\n"},
			{"hide", "", ""},
		}},
		{"a log line clears the live line and draws it again after", []step{
			{"show", "live 1", c + "live 1"},
			{"log", "a\n", c + "a\nlive 1"},
			{"show", "live 2", c + "live 2"},
			{"log", "b\nc\n", c + "b\nc\nlive 2"},
			{"hide", "", c},
			{"log", "d\n", "d\n"},
		}},
		{"an unfinished log line is not erased: the live line waits for its end", []step{
			{"show", "live 1", c + "live 1"},
			{"log", "part", c + "part"},
			{"show", "live 2", ""},
			{"log", " two\n", " two\nlive 2"},
			{"log", "x\n", c + "x\nlive 2"},
		}},
		{"hide while a log line is unfinished writes nothing", []step{
			{"show", "live", c + "live"},
			{"log", "part", c + "part"},
			{"hide", "", ""},
			{"log", " end\n", " end\n"},
		}},
		{"show with empty text hides", []step{
			{"show", "live", c + "live"},
			{"show", "", c},
			{"log", "a\n", "a\n"},
		}},
		{"empty log output changes nothing", []step{
			{"show", "live", c + "live"},
			{"log", "", ""},
			{"log", "a\n", c + "a\nlive"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l liveLine
			for i, s := range tt.steps {
				var got []byte
				overhead := l.overhead()
				switch s.op {
				case "log":
					got = l.appendLog(nil, []byte(s.arg))
					if len(got) > len(s.arg)+overhead {
						t.Errorf("step %d: wrote %d bytes around %d, more than the overhead %d the queue's bound counts", i, len(got), len(s.arg), overhead)
					}
				case "show":
					got = l.appendShow(nil, s.arg)
				case "hide":
					got = l.appendHide(nil)
				}
				if string(got) != s.want {
					t.Fatalf("step %d (%s %q): wrote %q, want %q", i, s.op, s.arg, got, s.want)
				}
			}
		})
	}
}

func TestOneRow(t *testing.T) {
	tests := []struct {
		in    string
		width int
		want  string
	}{
		{"abcdef", 0, "abcdef"},
		{"abcdef", 1, "abcdef"},
		{"abcdef", 7, "abcdef"},
		{"abcdef", 6, "abcde"},
		{"abcdef", 3, "ab"},
		{"kafka: dial\ntcp\r\x1b[2J", 0, "kafka: dial tcp  [2J"},
		{"héllo wörld", 6, "héllo"},
	}
	for _, tt := range tests {
		if got := oneRow(tt.in, tt.width); got != tt.want {
			t.Errorf("oneRow(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
		}
	}
}

// screen replays what a terminal does with b: '\r' returns to column 0,
// "\033[K" erases to the end of the row, '\n' ends the row. It returns
// the rows ended, and the row the cursor is on.
func screen(t *testing.T, b []byte) (rows []string, current string) {
	t.Helper()
	var row []byte
	col := 0
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\r':
			col = 0
		case b[i] == '\n':
			rows = append(rows, string(row))
			row, col = row[:0:0], 0
		case bytes.HasPrefix(b[i:], []byte("\033[K")):
			row = row[:col]
			i += len("\033[K") - 1
		case b[i] == '\033':
			t.Fatalf("unexpected escape sequence at byte %d: %q", i, b[i:min(i+8, len(b))])
		default:
			if col < len(row) {
				row[col] = b[i]
			} else {
				row = append(row, b[i])
			}
			col++
		}
	}
	return rows, string(row)
}

// The live line and log lines from several goroutines, through the sink as
// the real process does on a terminal, without a terminal: replayed on an
// emulated screen, every row is one whole log line (no live text in it, no
// log line cut), and once the status stops the live line is gone and the
// exit summary has a row of its own.
func TestLiveLineNeverTakesLogLines(t *testing.T) {
	out := &testkit.Buffer{}
	sink := newLogSink(out, 1<<20)
	log := zerolog.New(sink)
	st := &status{out: sink, log: log, interval: time.Millisecond, live: sink, width: func() int { return 0 }}

	ctx, cancel := context.WithCancel(context.Background())
	statusDone := make(chan struct{})
	go func() { defer close(statusDone); st.run(ctx) }()

	// Wait for the live line to be drawn at least once, so that the log
	// lines below are written while it is shown.
	deadline := time.Now().Add(10 * time.Second)
	for !bytes.Contains(out.Bytes(), []byte("rec/s")) {
		if time.Now().After(deadline) {
			t.Fatal("the live line was not drawn within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	const writers, lines = 4, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				log.Info().Int("writer", w).Int("line", i).Msg("a log line while the live line is shown")
			}
		})
	}
	wg.Wait()
	cancel()
	select {
	case <-statusDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the status goroutine did not return within 10 s of its context ending")
	}
	st.summary(time.Second)
	if !sink.Close(10 * time.Second) {
		t.Fatal("the sink did not flush within 10 s")
	}
	if sink.Dropped() != 0 {
		t.Fatalf("the sink dropped %d writes: the test needs them all", sink.Dropped())
	}

	raw := out.Bytes()
	if n := bytes.Count(raw, []byte("rec/s")); n < 2 {
		t.Errorf("the live line was drawn %d times, want it redrawn around the log lines", n)
	}
	rows, current := screen(t, raw)
	if current != "" {
		t.Errorf("after the status stopped the cursor's row shows %q, want it empty", current)
	}
	if len(rows) != writers*lines+1 {
		t.Fatalf("the screen has %d rows, want %d log lines and the summary", len(rows), writers*lines+1)
	}
	seen := map[[2]int]bool{}
	for i, r := range rows[:len(rows)-1] {
		var line struct{ Writer, Line int }
		if err := json.Unmarshal([]byte(r), &line); err != nil || strings.Contains(r, "rec/s") {
			t.Fatalf("row %d is not one whole log line (%v): %q", i, err, r)
		}
		seen[[2]int{line.Writer, line.Line}] = true
	}
	if len(seen) != writers*lines {
		t.Errorf("%d distinct log lines on screen, want %d", len(seen), writers*lines)
	}
	if last := rows[len(rows)-1]; !strings.HasPrefix(last, "turbo: processed 0 records in 1s") {
		t.Errorf("the last row is %q, want the exit summary", last)
	}
}

// Without a terminal (a test's buffer, a pipe, a file) there is no live
// line: the status is logged.
func TestNoLiveLineWithoutTerminal(t *testing.T) {
	var b bytes.Buffer
	sink := newLogSink(&b, 1<<20)
	defer sink.Close(10 * time.Second)
	if st := newStatus(sink, zerolog.Nop(), true); st.live != nil || st.interval != loggedInterval {
		t.Errorf("a sink over a buffer got a live line (interval %s)", st.interval)
	}
	if st := newStatus(&b, zerolog.Nop(), true); st.live != nil {
		t.Error("a plain writer got a live line")
	}
}

// A full queue drops the redraw, not a log line's frame: the state stays
// what the queued bytes left on screen.
func TestSinkLiveLineWithFullQueue(t *testing.T) {
	out := &blockingWriter{release: make(chan struct{})}
	sink := newLogSink(out, 64)
	sink.ShowLive("live")
	// Wait until the writer goroutine holds the first batch in its blocked
	// write, so the queue below starts empty.
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink.mu.Lock()
		empty := len(sink.queue) == 0
		sink.mu.Unlock()
		if empty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer goroutine did not take the first batch within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Fprint(sink, strings.Repeat("x", 40)+"\n") // 6 + 41 + 4 bytes: fits
	sink.ShowLive(strings.Repeat("y", 30))         // does not fit: skipped
	fmt.Fprint(sink, strings.Repeat("z", 40)+"\n") // does not fit: dropped
	sink.HideLive()                                // 6 more bytes: fits
	close(out.release)
	if !sink.Close(10 * time.Second) {
		t.Fatal("the sink did not flush within 10 s")
	}
	want := clearLine + "live" + clearLine + strings.Repeat("x", 40) + "\nlive" + clearLine
	if got := out.String(); !strings.HasPrefix(got, want) {
		t.Errorf("wrote %q, want it to start with %q", got, want)
	}
	rows, current := screen(t, []byte(out.String()))
	if current != "" || len(rows) < 1 || rows[0] != strings.Repeat("x", 40) {
		t.Errorf("screen rows %q, cursor row %q: want the x line, then a clean row", rows, current)
	}
}
