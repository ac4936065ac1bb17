package testkit

import (
	"strings"
	"testing"
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
	if n := countRaces([]byte(out)); n != 2 {
		t.Fatalf("countRaces = %d, want 2", n)
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
