package testkit

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A report is counted once however the writes cut it.
func TestRaceWriterCountsReportsAcrossWrites(t *testing.T) {
	out := "noise\n==================\n" + raceReport + "\nRead at 0x00c\n" + "x" + raceReport + "\n"
	for step := 1; step <= len(out); step++ {
		var sink strings.Builder
		rw := &raceWriter{w: &sink}
		for i := 0; i < len(out); i += step {
			if _, err := rw.Write([]byte(out[i:min(i+step, len(out))])); err != nil {
				t.Fatal(err)
			}
		}
		if got := rw.races(); got != 2 {
			t.Fatalf("writes of %d bytes: counted %d reports, want 2", step, got)
		}
		if sink.String() != out {
			t.Fatalf("writes of %d bytes: passed on %q, want %q", step, sink.String(), out)
		}
	}
}

func TestChildEnvSetsTheRaceExitCode(t *testing.T) {
	t.Setenv("GORACE", "history_size=3")
	env := ChildEnv()
	var last string
	for _, kv := range env {
		if strings.HasPrefix(kv, "GORACE=") {
			last = kv
		}
	}
	if last != "GORACE=history_size=3 exitcode=66" {
		t.Fatalf("the GORACE children see is %q, want the test's options and exitcode=66", last)
	}
}

// lastValue is the value of key's last entry in env ("" when absent).
func lastValue(env []string, key string) string {
	var v string
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func TestSetenvReachesOnlyTheTestsChildren(t *testing.T) {
	t.Parallel() // what Setenv is for
	const key = "TURBO_TESTKIT_SETENV_PROBE"
	Setenv(t, key, "one")
	Setenv(t, key, "two")
	if got := lastValue(childEnvOf(t), key); got != "two" {
		t.Errorf("a child of the test sees %s=%q, want the last value set, \"two\"", key, got)
	}
	if v, ok := os.LookupEnv(key); ok {
		t.Errorf("the test process itself sees %s=%q: Setenv must leave it alone", key, v)
	}
	t.Run("subtest", func(t *testing.T) {
		if got := lastValue(childEnvOf(t), key); got != "two" {
			t.Errorf("a subtest's child sees %s=%q, want its parent's \"two\"", key, got)
		}
		Setenv(t, key, "sub")
		if got := lastValue(childEnvOf(t), key); got != "sub" {
			t.Errorf("a subtest's child sees %s=%q after its Setenv, want \"sub\"", key, got)
		}
	})
	if got := lastValue(childEnvOf(t), key); got != "two" {
		t.Errorf("after the subtest, a child of the test sees %s=%q, want \"two\"", key, got)
	}
	if cmd := Command(t, "version"); lastValue(cmd.Env, key) != "two" {
		t.Errorf("Command's environment lacks %s=two", key)
	}
}

// recordingTB is a testing.TB whose failures and cleanups the test keeps.
type recordingTB struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recordingTB) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// A child that races fails the test that started it: once by its report on
// stderr, once by its exit code; a file as stderr leaves the exit code.
func TestARaceInAChildFailsTheTest(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "racer")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, "./testdata/racer").CombinedOutput(); err != nil {
		t.Fatalf("go build -race ./testdata/racer: %v\n%s", err, out)
	}
	rt := &recordingTB{TB: t}
	p := StartBinary(rt, bin, io.Discard, io.Discard) // the report stays out of the log: nobody should take it for a real one
	if code := p.Wait(t, time.Minute); code != RaceExitCode {
		t.Errorf("the racer exited with %d, want GORACE's %d", code, RaceExitCode)
	}
	rt.cleanup()
	if len(rt.errs) != 2 || !strings.Contains(strings.Join(rt.errs, "\n"), "race detector reported 1 data race") {
		t.Fatalf("the test's failures: %q, want the report and the exit code", rt.errs)
	}

	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rt = &recordingTB{TB: t}
	StartBinary(rt, bin, io.Discard, f).Wait(t, time.Minute)
	rt.cleanup()
	if len(rt.errs) != 1 || !strings.Contains(rt.errs[0], "exit code 66") {
		t.Fatalf("the test's failures with stderr a file: %q, want the exit code's", rt.errs)
	}
}
