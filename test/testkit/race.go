package testkit

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The binary Binary builds runs under the race detector, and a race it
// reports in a child must fail the test that started the child. Two nets
// catch it: the child's stderr is scanned for the detector's report
// (RaceWatch), which names the race in the test log; and GORACE gives a
// child that raced a distinctive exit code (RaceExitCode), which catches the
// children whose stderr is a file the test cannot scan (a pipe's end).

// RaceExitCode is the exit code of a child that the race detector saw race
// (GORACE exitcode; Go's default, 66, made explicit).
const RaceExitCode = 66

// raceReport is the first line of every report of the race detector.
const raceReport = "WARNING: DATA RACE"

// ChildEnv is the environment of the children tests start: the test's own,
// with GORACE set so that a race gives RaceExitCode. The swarm passes it on
// to its nodes.
func ChildEnv() []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " exitcode=66")
	return append(os.Environ(), "GORACE="+gorace) // the last value of a key wins
}

// childEnvs holds what Setenv added, per test name: []string of
// KEY=VALUE.
var childEnvs sync.Map // t.Name() → []string

// Setenv is t.Setenv for the turbo processes t starts (Start and its
// kin, Command): they see key=value, the test process does not. Unlike
// t.Setenv it leaves t free to run in parallel with other tests. Subtests
// inherit it (and may set the key again: theirs wins).
func Setenv(t testing.TB, key, value string) {
	t.Helper()
	old, _ := childEnvs.Load(t.Name())
	env, _ := old.([]string)
	childEnvs.Store(t.Name(), append(slices.Clip(env), key+"="+value))
	t.Cleanup(func() { childEnvs.Delete(t.Name()) })
}

// addedFor returns what Setenv added for t and the tests it is a subtest
// of, outermost first.
func addedFor(t testing.TB) []string {
	var env []string
	name := t.Name()
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '/' {
			continue
		}
		if added, ok := childEnvs.Load(name[:i]); ok {
			env = append(env, added.([]string)...)
		}
	}
	return env
}

// childEnvOf is ChildEnv with what Setenv added for t, which wins.
func childEnvOf(t testing.TB) []string {
	return append(ChildEnv(), addedFor(t)...)
}

// Command is exec.Command for the turbo binary (race-enabled, see Binary)
// with ChildEnv: give its Stderr through RaceWatch.
func Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = childEnvOf(t)
	return cmd
}

// RaceWatch returns a writer that passes everything to w and fails t, at
// its cleanup, if the race detector reported a race in what was written;
// name says whose output it is.
func RaceWatch(t testing.TB, name string, w io.Writer) io.Writer {
	rw := &raceWriter{w: w}
	t.Cleanup(func() {
		if n := rw.races(); n > 0 {
			t.Errorf("%s: the race detector reported %d data race(s) (%q in its stderr, in the log above)", name, n, raceReport)
		}
	})
	return rw
}

// raceWriter counts the race detector's reports in a stream, across the
// boundaries of writes.
type raceWriter struct {
	w io.Writer

	mu    sync.Mutex
	tail  []byte // the end of the last write: a report may straddle two
	count int
}

func (r *raceWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	buf := append(r.tail, p...)
	r.count += bytes.Count(buf, []byte(raceReport))
	// Keep just less than a report's length, so that no report is counted
	// twice and none is missed.
	keep := min(len(buf), len(raceReport)-1)
	r.tail = append(r.tail[:0:0], buf[len(buf)-keep:]...)
	r.mu.Unlock()
	return r.w.Write(p)
}

func (r *raceWriter) races() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}
