package modeltest

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

func TestSources(t *testing.T) {
	r := Rand(rand.New(rand.NewSource(1)), 3)
	for i := range 3 {
		if v, ok := r.Intn(5); !ok || v < 0 || v >= 5 {
			t.Fatalf("choice %d: %d, %v; want one in [0, 5)", i, v, ok)
		}
	}
	if _, ok := r.Intn(5); ok {
		t.Error("a Rand of 3 choices gave a fourth")
	}
	b := Bytes([]byte{7, 2})
	if v, ok := b.Intn(5); !ok || v != 2 {
		t.Errorf("first byte 7 %% 5 = %d, %v; want 2", v, ok)
	}
	if v, ok := b.Intn(5); !ok || v != 2 {
		t.Errorf("second byte 2 %% 5 = %d, %v; want 2", v, ok)
	}
	if _, ok := b.Intn(5); ok {
		t.Error("Bytes of 2 gave a third choice")
	}
}

// Seeds runs n seeds from the one the environment names, and names the
// seed that failed.
func TestSeeds(t *testing.T) {
	t.Setenv("MODELTEST_SEED", "41")
	var got []int64
	Seeds(t, "MODELTEST_SEED", 3, func(seed int64) { got = append(got, seed) })
	if len(got) != 3 || got[0] != 41 || got[2] != 43 {
		t.Fatalf("seeds %v, want 41, 42, 43", got)
	}
	// A failing seed stops the run and is named (on a recorder, so that
	// this test does not fail with it).
	rec := &recorder{TB: t}
	var ran []int64
	Seeds(rec, "MODELTEST_SEED", 5, func(seed int64) {
		ran = append(ran, seed)
		if seed == 42 {
			rec.Fail()
		}
	})
	if len(ran) != 2 {
		t.Fatalf("ran seeds %v after seed 42 failed, want 41 and 42 only", ran)
	}
	if want := "failed at seed 42 (MODELTEST_SEED=42 starts from it)"; !slices.Contains(rec.logs, want) {
		t.Fatalf("logged %q, want %q", rec.logs, want)
	}
}

// recorder is a testing.TB whose failures and logs are its own.
type recorder struct {
	testing.TB
	failed bool
	logs   []string
}

func (r *recorder) Helper()      {}
func (r *recorder) Fail()        { r.failed = true }
func (r *recorder) Failed() bool { return r.failed }
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
