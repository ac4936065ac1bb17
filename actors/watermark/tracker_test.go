package watermark

import (
	"errors"
	"slices"
	"testing"
)

type run struct{ from, to int64 }

func runs(t *Tracker) []run {
	var out []run
	t.FinishedAbove(func(from, to int64) { out = append(out, run{from, to}) })
	return out
}

func mustTrack(t *testing.T, tr *Tracker, offsets ...int64) {
	t.Helper()
	for _, o := range offsets {
		if err := tr.Track(o); err != nil {
			t.Fatalf("Track(%d) = %v", o, err)
		}
	}
}

func mustDone(t *testing.T, tr *Tracker, offsets ...int64) {
	t.Helper()
	for _, o := range offsets {
		if err := tr.Done(o); err != nil {
			t.Fatalf("Done(%d) = %v", o, err)
		}
	}
}

func wantCommittable(t *testing.T, tr *Tracker, want int64) {
	t.Helper()
	got, ok := tr.Committable()
	if !ok || got != want {
		t.Fatalf("Committable = (%d, %v), want (%d, true)", got, ok, want)
	}
}

func TestNothingTracked(t *testing.T) {
	tr := New()
	if o, ok := tr.Committable(); ok {
		t.Fatalf("Committable = (%d, true), want ok=false", o)
	}
	if tr.Pending() != 0 || runs(tr) != nil {
		t.Fatalf("Pending %d, runs %v on empty tracker", tr.Pending(), runs(tr))
	}
	var zero Tracker // the zero value is documented as usable
	mustTrack(t, &zero, 7)
	wantCommittable(t, &zero, 7)
}

func TestInOrderCompletion(t *testing.T) {
	tr := New()
	mustTrack(t, tr, 10, 11, 12)
	wantCommittable(t, tr, 10)
	mustDone(t, tr, 10)
	wantCommittable(t, tr, 11)
	mustDone(t, tr, 11)
	wantCommittable(t, tr, 12)
	mustDone(t, tr, 12)
	wantCommittable(t, tr, 13)
	if tr.Pending() != 0 {
		t.Fatalf("Pending = %d, want 0", tr.Pending())
	}
	// Tracking resumes after everything was finished.
	mustTrack(t, tr, 13)
	wantCommittable(t, tr, 13)
}

func TestOutOfOrderCompletion(t *testing.T) {
	tr := New()
	mustTrack(t, tr, 0, 1, 2, 3, 4)
	mustDone(t, tr, 3, 1, 4)
	wantCommittable(t, tr, 0) // 0 is still running: committing past it would lose it
	if tr.Pending() != 2 {
		t.Fatalf("Pending = %d, want 2", tr.Pending())
	}
	mustDone(t, tr, 0)
	wantCommittable(t, tr, 2)
	mustDone(t, tr, 2)
	wantCommittable(t, tr, 5)
}

func TestGapsNeverStall(t *testing.T) {
	tr := New()
	mustTrack(t, tr, 1, 5, 9)
	wantCommittable(t, tr, 1)
	mustDone(t, tr, 5)
	wantCommittable(t, tr, 1)
	mustDone(t, tr, 1)
	wantCommittable(t, tr, 9) // 6..8 were never tracked and are not waited for
	mustDone(t, tr, 9)
	wantCommittable(t, tr, 10)
}

func TestErrorsLeaveStateUnchanged(t *testing.T) {
	tr := New()
	mustTrack(t, tr, 5, 6, 8)
	mustDone(t, tr, 6)
	snapshot := func() (int64, int, []run) {
		o, _ := tr.Committable()
		return o, tr.Pending(), runs(tr)
	}
	o0, p0, r0 := snapshot()

	for _, o := range []int64{8, 7, 3, -1} {
		if err := tr.Track(o); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("Track(%d) = %v, want ErrOutOfOrder", o, err)
		}
	}
	for _, o := range []int64{6, 7, 4, 9, 100} { // done, gap, below, above
		if err := tr.Done(o); !errors.Is(err, ErrUnknownOffset) {
			t.Fatalf("Done(%d) = %v, want ErrUnknownOffset", o, err)
		}
	}
	if o, p, r := snapshot(); o != o0 || p != p0 || !slices.Equal(r, r0) {
		t.Fatalf("state after errors = (%d, %d, %v), want (%d, %d, %v)", o, p, r, o0, p0, r0)
	}
	// An offset below the watermark, finished and forgotten, is still "already done".
	mustDone(t, tr, 5)
	if err := tr.Done(5); !errors.Is(err, ErrUnknownOffset) {
		t.Fatalf("Done(5) twice = %v, want ErrUnknownOffset", err)
	}
	if err := tr.Done(1); !errors.Is(err, ErrUnknownOffset) {
		t.Fatalf("Done on an empty tracker = %v", err)
	}
	if err := New().Done(0); !errors.Is(err, ErrUnknownOffset) {
		t.Fatalf("Done on an empty tracker = %v", err)
	}
}

func TestFinishedAboveRuns(t *testing.T) {
	tr := New()
	mustTrack(t, tr, 0, 1, 2, 3, 5, 7, 8, 10, 11, 20)
	if got := runs(tr); got != nil {
		t.Fatalf("runs = %v, want none", got)
	}
	mustDone(t, tr, 1, 3, 5, 8, 11, 20)
	// 3 and 5 are one run although 4 was never tracked; 7 and 10 split runs.
	want := []run{{1, 1}, {3, 5}, {8, 8}, {11, 20}}
	if got := runs(tr); !slices.Equal(got, want) {
		t.Fatalf("runs = %v, want %v", got, want)
	}
	mustDone(t, tr, 0) // the watermark moves to 2; 1 is now below it
	want = []run{{3, 5}, {8, 8}, {11, 20}}
	if got := runs(tr); !slices.Equal(got, want) {
		t.Fatalf("runs = %v, want %v", got, want)
	}
	mustDone(t, tr, 2, 7, 10)
	if got := runs(tr); got != nil {
		t.Fatalf("runs = %v, want none when everything is done", got)
	}
	wantCommittable(t, tr, 21)
}

func TestCompactionKeepsWindow(t *testing.T) {
	tr := New()
	// A long-running record at the bottom pins the watermark while many
	// others finish; then it finishes and the window slides repeatedly.
	const n = 10_000
	mustTrack(t, tr, 0)
	for o := int64(1); o <= n; o++ {
		mustTrack(t, tr, o)
		if o > 100 {
			mustDone(t, tr, o-100)
		}
	}
	wantCommittable(t, tr, 0)
	mustDone(t, tr, 0)
	wantCommittable(t, tr, n-99)
	for o := int64(n + 1); o <= 3*n; o++ {
		mustTrack(t, tr, o)
		mustDone(t, tr, o-100)
		wantCommittable(t, tr, o-99)
	}
	if w := len(tr.offsets) - tr.head; w != 100 {
		t.Fatalf("window = %d entries, want 100", w)
	}
	if c := cap(tr.offsets); c > 4*n {
		t.Fatalf("arrays kept %d entries for a window of 100", c)
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	tr := New()
	next := int64(0)
	round := func() {
		for range 64 {
			_ = tr.Track(next)
			next++
		}
		for o := next - 1; o >= next-64; o-- { // reverse order: worst case for the watermark
			_ = tr.Done(o)
		}
	}
	round()
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("allocations per round = %v, want 0", a)
	}
}
