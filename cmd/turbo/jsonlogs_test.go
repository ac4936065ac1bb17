package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"

	"github.com/turbokafka/turbo/test/testkit"
)

// jsonLines parses every line of out as one JSON object, failing the test
// on any other line.
func jsonLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var obj map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Errorf("stderr line %d is not a JSON object (%v): %q", n, err, sc.Text())
			continue
		}
		objs = append(objs, obj)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading stderr: %v", err)
	}
	return objs
}

// findMessage returns the first object whose message is msg.
func findMessage(t *testing.T, objs []map[string]any, msg string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o[zerolog.MessageFieldName] == msg {
			return o
		}
	}
	t.Fatalf("no JSON line with message %q among %d lines", msg, len(objs))
	return nil
}

// durationField checks that field holds a Go duration string.
func durationField(t *testing.T, o map[string]any, field string) time.Duration {
	t.Helper()
	s, ok := o[field].(string)
	if !ok {
		t.Fatalf("%q is %T %v, want a Go duration string", field, o[field], o[field])
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%q = %q: %v", field, s, err)
	}
	return d
}

// A whole `turbo run` in JSON mode (embedded broker, seeded, --exit-on-idle,
// debug level so sarama's chatter is in it too) writes nothing but JSON
// objects to stderr: the logs, the exit summary, everything.
func TestRunJSONModeWritesOnlyJSON(t *testing.T) {
	const records = 300
	path := writeConfig(t, "config.yaml", fmt.Sprintf(`kafka:
  brokers: [embedded]
  embedded:
    partitions: 4
    seed: {topic: orders, records: %d, keys: 20}
consumers:
  - name: orders
    topics: [orders]
    concurrency: 8
    commit_interval: 50ms
    handler: {type: noop}
shutdown_timeout: 10s
log: {level: debug, format: json}
`, records))
	var out testkit.Buffer
	sink := newLogSink(&out, 16<<20)
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- runMain([]string{"run", "--config", path, "--exit-on-idle"}, &stdout, sink) }()
	const runDeadline = 60 * time.Second
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit code %d, want %d", code, exitOK)
		}
	case <-time.After(runDeadline):
		t.Fatalf("turbo run --exit-on-idle did not finish %d records within %s", records, runDeadline)
	}
	if !sink.Close(10 * time.Second) {
		t.Fatal("the stderr sink did not flush within 10 s")
	}
	if d := sink.Dropped(); d != 0 {
		t.Fatalf("the sink dropped %d lines: the test must see them all", d)
	}
	objs := jsonLines(t, out.Bytes())
	if len(objs) < 10 {
		t.Fatalf("only %d JSON lines on stderr:\n%s", len(objs), out.Bytes())
	}
	t.Logf("%d JSON lines on stderr", len(objs))
	sum := findMessage(t, objs, "exit summary")
	if sum["processed"] != float64(records) || sum["level"] != "info" {
		t.Errorf("exit summary %v: want processed %d, level info", sum, records)
	}
	if d := durationField(t, sum, "elapsed"); d <= 0 {
		t.Errorf("exit summary elapsed %s", d)
	}
	durationField(t, findMessage(t, objs, "seeded demo records"), "took")
	if last := objs[len(objs)-1]; last[zerolog.MessageFieldName] != "exit summary" {
		t.Errorf("the last line is %v, want the exit summary", last)
	}
}

// The exit error of a run that logs JSON is a JSON object; before the
// configuration is read (no format known) it stays a plain line.
func TestExitErrorFollowsLogFormat(t *testing.T) {
	for _, tt := range []struct {
		name string
		json bool
		err  error
		code int
	}{
		{"json runtime error", true, errors.New("consumer orders: boom"), exitFailure},
		{"json configuration error", true, fmt.Errorf("%w: bad key", config.ErrInvalid), exitUsage},
		{"plain", false, errors.New("consumer orders: boom"), exitFailure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			sink := newLogSink(&out, 1<<20)
			sink.setJSON(tt.json)
			if code := exitCode(tt.err, sink); code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			tellSignal(sink, syscall.SIGTERM, "turbo: second signal, exiting now", "second signal, exiting now")
			if !sink.Close(10 * time.Second) {
				t.Fatal("the sink did not flush within 10 s")
			}
			if !tt.json {
				want := "turbo: " + tt.err.Error() + "\nturbo: second signal, exiting now\n"
				if out.String() != want {
					t.Errorf("wrote %q, want %q", out.String(), want)
				}
				return
			}
			objs := jsonLines(t, out.Bytes())
			if len(objs) != 2 {
				t.Fatalf("%d JSON lines, want 2:\n%s", len(objs), out.String())
			}
			if o := objs[0]; o["level"] != "error" || o["error"] != tt.err.Error() || o["exit_code"] != float64(tt.code) || o["time"] == nil {
				t.Errorf("exit line %v", o)
			}
			if o := objs[1]; o["level"] != "warn" || o["signal"] != "terminated" || !strings.Contains(o["message"].(string), "second signal") {
				t.Errorf("signal line %v", o)
			}
		})
	}
}

// The "lines dropped" notice of a JSON run is a JSON object, with the run's
// fields.
func TestDroppedLinesNoticeIsJSON(t *testing.T) {
	out := &blockingWriter{release: make(chan struct{})}
	sink := newLogSink(out, 200)
	reportDroppedLines(sink, config.Log{Level: config.LogInfo, Format: config.LogJSON}, func(c zerolog.Context) zerolog.Context {
		return c.Int("node", 3)
	})
	log := newLogger(config.Log{Level: config.LogInfo, Format: config.LogJSON}, sink)
	for i := range 100 {
		log.Info().Int("i", i).Msg("filling a queue nobody drains")
	}
	if sink.Dropped() == 0 {
		t.Fatal("nothing was dropped: the test shows nothing")
	}
	close(out.release)
	if !sink.Close(10 * time.Second) {
		t.Fatal("the sink did not flush within 10 s")
	}
	objs := jsonLines(t, []byte(out.String()))
	var reported float64
	for _, o := range objs {
		if n, ok := o["dropped_lines"].(float64); ok {
			reported += n
			if o["node"] != float64(3) || o["level"] != "warn" {
				t.Errorf("notice %v: want node 3, level warn", o)
			}
		}
	}
	if reported != float64(sink.Dropped()) {
		t.Errorf("the notices report %v dropped lines, want %d:\n%s", reported, sink.Dropped(), out.String())
	}
}

// blockedWriter holds each Write until release is closed, saying when one
// has begun.
type blockedWriter struct {
	began   chan struct{}
	release chan struct{}
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	w.began <- struct{}{}
	<-w.release
	return len(p), nil
}

// Switching sarama's logger (to none, before the exit summary) waits for a
// line being written with the old one: none of sarama's lines can follow
// the summary. The wait is the point: a switch that returned while the
// line was still being written would let it land after the summary.
func TestSaramaLoggerSwitchWaitsForALineBeingWritten(t *testing.T) {
	w := &blockedWriter{began: make(chan struct{}, 1), release: make(chan struct{})}
	useSaramaLogger(zerolog.New(w).Level(zerolog.DebugLevel))
	t.Cleanup(func() { useSaramaLogger(zerolog.Nop()) })
	written := make(chan struct{})
	go func() { saramaLog.Printf("Closed connection to broker %s", "127.0.0.1:9092"); close(written) }()
	select {
	case <-w.began:
	case <-time.After(10 * time.Second):
		t.Fatal("sarama's line was not written within 10 s")
	}
	switched := make(chan struct{})
	go func() { useSaramaLogger(zerolog.Nop()); close(switched) }()
	select {
	case <-switched:
		t.Error("the switch returned while sarama's line was still being written")
	case <-time.After(50 * time.Millisecond): // the switch waits, as it must
	}
	close(w.release)
	for what, ch := range map[string]chan struct{}{"the line": written, "the switch": switched} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not end within 10 s of the write's end", what)
		}
	}
	saramaLog.Printf("after the switch")
	if len(w.began) != 0 {
		t.Error("a line after the switch went to the old logger")
	}
}
