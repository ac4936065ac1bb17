package schedule

import (
	"errors"
	"slices"
	"strconv"
	"testing"
)

// sizes exposes the internal collections so tests can check that nothing
// lingers once all work is done.
func (s *Scheduler[T]) sizes() (units, ready, unordered int) {
	return len(s.units), len(s.ready), s.unordered.len()
}

func mustNext[T any](t *testing.T, s *Scheduler[T]) (string, T) {
	t.Helper()
	u, v, ok := s.Next()
	if !ok {
		t.Fatalf("Next: nothing runnable, want an item")
	}
	return u, v
}

func mustNone[T any](t *testing.T, s *Scheduler[T]) {
	t.Helper()
	if s.Runnable() {
		t.Fatalf("Runnable() = true, want false")
	}
	if u, v, ok := s.Next(); ok {
		t.Fatalf("Next = (%q, %v), want nothing runnable", u, v)
	}
}

func mustDone[T any](t *testing.T, s *Scheduler[T], unit string) {
	t.Helper()
	if err := s.Done(unit); err != nil {
		t.Fatalf("Done(%q) = %v", unit, err)
	}
}

func TestSameUnitSerializedInAddOrder(t *testing.T) {
	s := New[int]()
	for i := range 3 {
		s.Add("k", i)
	}
	for want := range 3 {
		u, v := mustNext(t, s)
		if u != "k" || v != want {
			t.Fatalf("Next = (%q, %d), want (k, %d)", u, v, want)
		}
		mustNone(t, s) // the unit is busy, so its next item must wait
		if s.Busy() != 1 {
			t.Fatalf("Busy = %d, want 1", s.Busy())
		}
		mustDone(t, s, "k")
	}
	mustNone(t, s)
	if s.Busy() != 0 || s.Waiting() != 0 {
		t.Fatalf("Busy, Waiting = %d, %d, want 0, 0", s.Busy(), s.Waiting())
	}
}

func TestDifferentUnitsRunInParallel(t *testing.T) {
	s := New[string]()
	s.Add("a", "a1")
	s.Add("b", "b1")
	s.Add("c", "c1")
	var got []string
	for range 3 {
		_, v := mustNext(t, s)
		got = append(got, v)
	}
	if want := []string{"a1", "b1", "c1"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s.Busy() != 3 {
		t.Fatalf("Busy = %d, want 3", s.Busy())
	}
	mustNone(t, s)
}

func TestUnorderedNeverBlocked(t *testing.T) {
	s := New[int]()
	s.Add("", 1)
	s.Add("", 2)
	s.Add("", 3)
	for want := 1; want <= 3; want++ {
		u, v := mustNext(t, s)
		if u != "" || v != want {
			t.Fatalf("Next = (%q, %d), want (\"\", %d)", u, v, want)
		}
	}
	if s.Busy() != 0 {
		t.Fatalf("Busy = %d, want 0: unit \"\" is never marked", s.Busy())
	}
	if err := s.Done(""); err != nil {
		t.Fatalf("Done(\"\") = %v, want nil", err)
	}
}

func TestUnorderedNeverBlocking(t *testing.T) {
	s := New[int]()
	s.Add("k", 1)
	s.Add("k", 2)
	s.Add("", 3)
	mustNext(t, s) // k busy with 1
	u, v := mustNext(t, s)
	if u != "" || v != 3 {
		t.Fatalf("Next = (%q, %d), want the unordered item 3 past the blocked k", u, v)
	}
}

func TestOldestFirstAcrossUnits(t *testing.T) {
	s := New[int]()
	s.Add("a", 0)
	s.Add("a", 1)
	s.Add("b", 2)
	s.Add("", 3)
	s.Add("b", 4)
	s.Add("c", 5)

	u, v := mustNext(t, s)
	if u != "a" || v != 0 {
		t.Fatalf("got (%q,%d), want (a,0)", u, v)
	}
	u, v = mustNext(t, s)
	if u != "b" || v != 2 {
		t.Fatalf("got (%q,%d), want (b,2)", u, v)
	}
	mustDone(t, s, "a") // a's head is 1, older than everything else still waiting
	u, v = mustNext(t, s)
	if u != "a" || v != 1 {
		t.Fatalf("got (%q,%d), want (a,1)", u, v)
	}
	u, v = mustNext(t, s)
	if u != "" || v != 3 {
		t.Fatalf("got (%q,%d), want (\"\",3)", u, v)
	}
	u, v = mustNext(t, s)
	if u != "c" || v != 5 {
		t.Fatalf("got (%q,%d), want (c,5): b is busy", u, v)
	}
	mustNone(t, s)
	mustDone(t, s, "b")
	u, v = mustNext(t, s)
	if u != "b" || v != 4 {
		t.Fatalf("got (%q,%d), want (b,4)", u, v)
	}
}

func TestZeroValueUsable(t *testing.T) {
	var s Scheduler[int]
	if err := s.Done("k"); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("Done on zero value = %v, want ErrNotBusy", err)
	}
	s.Add("k", 1)
	if u, v := mustNext(t, &s); u != "k" || v != 1 {
		t.Fatalf("got (%q,%d), want (k,1)", u, v)
	}
	mustDone(t, &s, "k")
}

func TestDoneFrees(t *testing.T) {
	s := New[int]()
	s.Add("k", 1)
	mustNext(t, s)
	mustDone(t, s, "k")
	if s.Busy() != 0 {
		t.Fatalf("Busy = %d, want 0", s.Busy())
	}
	s.Add("k", 2)
	if u, v := mustNext(t, s); u != "k" || v != 2 {
		t.Fatalf("got (%q,%d), want (k,2)", u, v)
	}
}

func TestErrNotBusy(t *testing.T) {
	s := New[int]()
	if err := s.Done("never"); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("Done(unknown) = %v, want ErrNotBusy", err)
	}
	s.Add("k", 1)
	s.Add("k", 2)
	if err := s.Done("k"); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("Done(waiting, not busy) = %v, want ErrNotBusy", err)
	}
	if s.Waiting() != 2 || s.Busy() != 0 || !s.Runnable() {
		t.Fatalf("state changed by failed Done: waiting %d busy %d", s.Waiting(), s.Busy())
	}
	mustNext(t, s)
	mustDone(t, s, "k")
	mustNext(t, s)
	mustDone(t, s, "k")
	if err := s.Done("k"); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("second Done = %v, want ErrNotBusy", err)
	}
	if u, _, r := s.sizes(); u != 0 || r != 0 {
		t.Fatalf("units, ready = %d, %d after failed Done, want 0, 0", u, r)
	}
}

func TestDropIf(t *testing.T) {
	s := New[int]()
	s.Add("a", 0)
	s.Add("b", 1)
	s.Add("a", 2)
	s.Add("", 3)
	s.Add("b", 4)
	s.Add("c", 5)
	s.Add("a", 6)
	s.Add("", 7)
	if _, v := mustNext(t, s); v != 0 {
		t.Fatalf("first Next = %d, want 0", v)
	} // a busy running 0

	odd := func(v int) bool { return v%2 == 1 }
	got := s.DropIf(odd)
	if want := []int{1, 3, 5, 7}; !slices.Equal(got, want) {
		t.Fatalf("DropIf = %v, want %v", got, want)
	}
	if s.Waiting() != 3 || s.Busy() != 1 {
		t.Fatalf("Waiting, Busy = %d, %d, want 3, 1", s.Waiting(), s.Busy())
	}
	// c lost its only item and is gone; a is still busy so only b's 4 runs.
	if u, v := mustNext(t, s); u != "b" || v != 4 {
		t.Fatalf("got (%q,%d), want (b,4)", u, v)
	}
	mustNone(t, s)
	if err := s.Done("c"); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("Done(c) = %v, want ErrNotBusy", err)
	}
	mustDone(t, s, "a")
	for _, want := range []int{2, 6} {
		u, v := mustNext(t, s)
		if u != "a" || v != want {
			t.Fatalf("got (%q,%d), want (a,%d)", u, v, want)
		}
		mustDone(t, s, "a")
	}
	if got := s.DropIf(func(int) bool { return true }); got != nil {
		t.Fatalf("DropIf on empty = %v, want nil", got)
	}
}

func TestDropIfBusyUnitStaysBusy(t *testing.T) {
	s := New[int]()
	s.Add("k", 1)
	s.Add("k", 2)
	mustNext(t, s)
	if got := s.DropIf(func(int) bool { return true }); !slices.Equal(got, []int{2}) {
		t.Fatalf("DropIf = %v, want [2]", got)
	}
	if s.Busy() != 1 || s.Waiting() != 0 {
		t.Fatalf("Busy, Waiting = %d, %d, want 1, 0", s.Busy(), s.Waiting())
	}
	s.Add("k", 3)
	mustNone(t, s) // still busy with 1
	mustDone(t, s, "k")
	if _, v := mustNext(t, s); v != 3 {
		t.Fatalf("got %d, want 3", v)
	}
}

func TestMemoryReleasedAfterDistinctKeys(t *testing.T) {
	s := New[int]()
	// 100 times the largest of the bounds it checks (maxSpare, maxIdleCap,
	// minShrink).
	const n = 400_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	// Interleave to exercise both paths: units created while others are
	// busy, and a large peak that must be given back.
	for i, k := range keys {
		s.Add(k, i)
		if i%2 == 1 {
			u, _ := mustNext(t, s)
			mustDone(t, s, u)
		}
	}
	for {
		u, _, ok := s.Next()
		if !ok {
			break
		}
		mustDone(t, s, u)
	}
	units, ready, unordered := s.sizes()
	if units != 0 || ready != 0 || unordered != 0 || s.Waiting() != 0 || s.Busy() != 0 {
		t.Fatalf("after all done: units %d ready %d unordered %d waiting %d busy %d, want all 0",
			units, ready, unordered, s.Waiting(), s.Busy())
	}
	if len(s.spare) > maxSpare {
		t.Fatalf("spare units = %d, want <= %d", len(s.spare), maxSpare)
	}
	if cap(s.ready) > maxIdleCap {
		t.Fatalf("ready heap kept capacity %d", cap(s.ready))
	}
	if s.peak >= minShrink {
		t.Fatalf("map was not rebuilt after the spike: peak %d", s.peak)
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	s := New[int]()
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	i := 0
	round := func() {
		for range 8 {
			s.Add(keys[i%len(keys)], i)
			i++
		}
		for range 8 {
			u, _, _ := s.Next()
			_ = s.Done(u)
		}
	}
	for range 100 {
		round() // warm the map, spare units and queues
	}
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("allocations per round = %v, want 0", a)
	}
}

func mustNextRun[T any](t *testing.T, s *Scheduler[T], max int) (string, []T) {
	t.Helper()
	u, items, ok := s.NextRun(max)
	if !ok {
		t.Fatalf("NextRun(%d): nothing runnable, want a run", max)
	}
	return u, items
}

func mustRequeue[T any](t *testing.T, s *Scheduler[T], unit string, items ...T) {
	t.Helper()
	if err := s.Requeue(unit, items); err != nil {
		t.Fatalf("Requeue(%q, %v) = %v", unit, items, err)
	}
}

func TestNextRunTakesConsecutiveItemsOfOneUnit(t *testing.T) {
	s := New[int]()
	s.Add("b", 0)
	s.Add("a", 1)
	s.Add("b", 2)
	s.Add("", 3)
	s.Add("a", 4)
	s.Add("b", 5)
	s.Add("c", 6)
	s.Add("b", 7)

	// b holds the oldest item; its run skips over everything in between.
	if u, run := mustNextRun(t, s, 10); u != "b" || !slices.Equal(run, []int{0, 2, 5, 7}) {
		t.Fatalf("NextRun = (%q, %v), want (b, [0 2 5 7])", u, run)
	}
	if s.Busy() != 1 || s.Waiting() != 4 {
		t.Fatalf("Busy, Waiting = %d, %d, want 1, 4", s.Busy(), s.Waiting())
	}
	s.Add("b", 8) // arrives while b runs, so it waits for the next run
	if u, run := mustNextRun(t, s, 10); u != "a" || !slices.Equal(run, []int{1, 4}) {
		t.Fatalf("NextRun = (%q, %v), want (a, [1 4])", u, run)
	}
	if u, run := mustNextRun(t, s, 10); u != "" || !slices.Equal(run, []int{3}) {
		t.Fatalf("NextRun = (%q, %v), want (\"\", [3])", u, run)
	}
	if u, run := mustNextRun(t, s, 10); u != "c" || !slices.Equal(run, []int{6}) {
		t.Fatalf("NextRun = (%q, %v), want (c, [6])", u, run)
	}
	if u, run, ok := s.NextRun(10); ok || u != "" || run != nil {
		t.Fatalf("NextRun = (%q, %v, %v), want nothing: b is busy", u, run, ok)
	}
	if s.Busy() != 3 {
		t.Fatalf("Busy = %d, want 3", s.Busy())
	}
	// A whole run is one busy period: one Done frees it, a second fails.
	mustDone(t, s, "b")
	if err := s.Done("b"); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("second Done(b) = %v, want ErrNotBusy", err)
	}
	if u, run := mustNextRun(t, s, 10); u != "b" || !slices.Equal(run, []int{8}) {
		t.Fatalf("NextRun = (%q, %v), want (b, [8])", u, run)
	}
}

func TestNextRunRespectsMax(t *testing.T) {
	s := New[int]()
	for i := range 10 {
		s.Add("k", i)
	}
	for _, tc := range []struct {
		max  int
		want []int
	}{
		{3, []int{0, 1, 2}},
		{0, []int{3}}, // max < 1 acts as 1
		{-5, []int{4}},
		{1, []int{5}},
		{2, []int{6, 7}},
		{100, []int{8, 9}},
	} {
		u, run := mustNextRun(t, s, tc.max)
		if u != "k" || !slices.Equal(run, tc.want) {
			t.Fatalf("NextRun(%d) = (%q, %v), want (k, %v)", tc.max, u, run, tc.want)
		}
		if cap(run) != len(run) {
			t.Fatalf("NextRun(%d) returned cap %d for %d items, want an exact fit", tc.max, cap(run), len(run))
		}
		mustNone(t, s)
		mustDone(t, s, "k")
	}
	if u, r, o := s.sizes(); u != 0 || r != 0 || o != 0 || s.Waiting() != 0 {
		t.Fatalf("after all runs: units %d ready %d unordered %d waiting %d", u, r, o, s.Waiting())
	}
}

func TestNextRunUnorderedReturnsOne(t *testing.T) {
	s := New[int]()
	s.Add("", 1)
	s.Add("", 2)
	s.Add("", 3)
	for want := 1; want <= 3; want++ {
		if u, run := mustNextRun(t, s, 5); u != "" || !slices.Equal(run, []int{want}) {
			t.Fatalf("NextRun = (%q, %v), want (\"\", [%d])", u, run, want)
		}
	}
	if s.Busy() != 0 {
		t.Fatalf("Busy = %d, want 0", s.Busy())
	}
}

func TestNextRunAppend(t *testing.T) {
	s := New[int]()
	buf := make([]int, 1, 8)
	buf[0] = -1
	if u, got, ok := s.NextRunAppend(buf, 4); ok || u != "" || !slices.Equal(got, []int{-1}) {
		t.Fatalf("NextRunAppend on empty = (%q, %v, %v), want dst unchanged", u, got, ok)
	}
	for i := range 3 {
		s.Add("k", i)
	}
	u, got, ok := s.NextRunAppend(buf, 4)
	if !ok || u != "k" || !slices.Equal(got, []int{-1, 0, 1, 2}) {
		t.Fatalf("NextRunAppend = (%q, %v, %v), want (k, [-1 0 1 2], true)", u, got, ok)
	}
	if &got[0] != &buf[0] {
		t.Fatalf("NextRunAppend reallocated a dst with room to spare")
	}
	mustDone(t, s, "k")

	// Reusing one buffer, a run-at-a-time loop allocates nothing, nor do
	// partial requeues, and NextRun's own slices are not reused behind the
	// caller's back.
	s.Add("k", 10)
	s.Add("k", 11)
	_, owned := mustNextRun(t, s, 4)
	mustDone(t, s, "k")
	buf = buf[:0]
	round := func() {
		for i := range 8 {
			s.Add("k", i)
		}
		var u string
		u, buf, _ = s.NextRunAppend(buf[:0], 8)
		_ = s.Requeue(u, buf[5:])
		_ = s.Done(u)
		u, buf, _ = s.NextRunAppend(buf[:0], 8)
		_ = s.Done(u)
	}
	for range 10 {
		round()
	}
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("allocations per round = %v, want 0", a)
	}
	if !slices.Equal(owned, []int{10, 11}) {
		t.Fatalf("a slice returned by NextRun changed under its owner: %v", owned)
	}
}

func TestRequeueRestoresOrderAndAge(t *testing.T) {
	s := New[int]()
	s.Add("a", 0)
	s.Add("a", 1)
	s.Add("b", 2)
	s.Add("a", 3)
	s.Add("c", 4)
	s.Add("a", 5)
	s.Add("", 6)

	if u, run := mustNextRun(t, s, 3); u != "a" || !slices.Equal(run, []int{0, 1, 3}) {
		t.Fatalf("NextRun = (%q, %v), want (a, [0 1 3])", u, run)
	}
	// The runner ran 0 only; 1 and 3 go back in front of 5.
	mustRequeue(t, s, "a", 1, 3)
	if s.Waiting() != 6 || s.Busy() != 1 {
		t.Fatalf("Waiting, Busy = %d, %d, want 6, 1", s.Waiting(), s.Busy())
	}
	// a stays busy until Done, so the others go first.
	if u, v := mustNext(t, s); u != "b" || v != 2 {
		t.Fatalf("got (%q,%d), want (b,2)", u, v)
	}
	mustDone(t, s, "a")
	// 1 is older than c's 4 and the unordered 6, so a runs next, and its run
	// is what it was, followed by what waited behind it.
	if u, run := mustNextRun(t, s, 10); u != "a" || !slices.Equal(run, []int{1, 3, 5}) {
		t.Fatalf("NextRun = (%q, %v), want (a, [1 3 5])", u, run)
	}
	if u, v := mustNext(t, s); u != "c" || v != 4 {
		t.Fatalf("got (%q,%d), want (c,4)", u, v)
	}
	if u, v := mustNext(t, s); u != "" || v != 6 {
		t.Fatalf("got (%q,%d), want (\"\",6)", u, v)
	}
	mustNone(t, s)
}

func TestRequeueAfterNext(t *testing.T) {
	s := New[int]()
	s.Add("k", 0)
	s.Add("x", 1)
	s.Add("k", 2)
	if u, v := mustNext(t, s); u != "k" || v != 0 {
		t.Fatalf("got (%q,%d), want (k,0)", u, v)
	}
	mustRequeue(t, s, "k", 0)
	if u, v := mustNext(t, s); u != "x" || v != 1 {
		t.Fatalf("got (%q,%d), want (x,1): k is still busy", u, v)
	}
	mustNone(t, s)
	s.Add("y", 3)
	mustDone(t, s, "k")
	for _, want := range []int{0, 2} {
		if u, v := mustNext(t, s); u != "k" || v != want {
			t.Fatalf("got (%q,%d), want (k,%d) before the younger y", u, v, want)
		}
		mustDone(t, s, "k")
	}
	if u, v := mustNext(t, s); u != "y" || v != 3 {
		t.Fatalf("got (%q,%d), want (y,3)", u, v)
	}
}

func TestRequeueInSteps(t *testing.T) {
	s := New[int]()
	for i := range 5 {
		s.Add("k", i)
	}
	mustNextRun(t, s, 4)      // 0 1 2 3
	mustRequeue(t, s, "k", 3) // the runner gives back from the end...
	mustRequeue(t, s, "k", 2) // ...one item at a time
	mustRequeue(t, s, "k")    // nothing is fine too
	if err := s.Requeue("k", []int{0, 1, 9}); !errors.Is(err, ErrNotHandedOut) {
		t.Fatalf("Requeue of more than held = %v, want ErrNotHandedOut", err)
	}
	if s.Waiting() != 3 || s.Busy() != 1 {
		t.Fatalf("state changed by failed Requeue: waiting %d busy %d", s.Waiting(), s.Busy())
	}
	mustDone(t, s, "k")
	if u, run := mustNextRun(t, s, 10); u != "k" || !slices.Equal(run, []int{2, 3, 4}) {
		t.Fatalf("NextRun = (%q, %v), want (k, [2 3 4])", u, run)
	}
}

func TestRequeueNotBusy(t *testing.T) {
	s := New[int]()
	if err := s.Requeue("never", []int{1}); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("Requeue(unknown) = %v, want ErrNotBusy", err)
	}
	s.Add("k", 1)
	s.Add("k", 2)
	for _, items := range [][]int{{1}, nil} {
		if err := s.Requeue("k", items); !errors.Is(err, ErrNotBusy) {
			t.Fatalf("Requeue(waiting, not busy, %v) = %v, want ErrNotBusy", items, err)
		}
	}
	if s.Waiting() != 2 || s.Busy() != 0 || !s.Runnable() {
		t.Fatalf("state changed by failed Requeue: waiting %d busy %d", s.Waiting(), s.Busy())
	}
	mustNextRun(t, s, 2)
	mustDone(t, s, "k")
	if err := s.Requeue("k", []int{2}); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("Requeue after Done = %v, want ErrNotBusy", err)
	}
	if u, r, o := s.sizes(); u != 0 || r != 0 || o != 0 || s.Waiting() != 0 {
		t.Fatalf("after failed Requeue: units %d ready %d unordered %d waiting %d", u, r, o, s.Waiting())
	}
}

func TestRequeueThenDropIf(t *testing.T) {
	s := New[int]()
	s.Add("k", 0)
	s.Add("k", 1)
	s.Add("j", 2)
	s.Add("k", 3)
	mustNextRun(t, s, 3) // k: 0 1 3
	mustRequeue(t, s, "k", 1, 3)
	if got := s.DropIf(func(v int) bool { return v != 2 }); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("DropIf = %v, want [1 3]", got)
	}
	if s.Waiting() != 1 || s.Busy() != 1 {
		t.Fatalf("Waiting, Busy = %d, %d, want 1, 1", s.Waiting(), s.Busy())
	}
	mustDone(t, s, "k")
	if u, v := mustNext(t, s); u != "j" || v != 2 {
		t.Fatalf("got (%q,%d), want (j,2)", u, v)
	}
	mustDone(t, s, "j")
	if u, r, o := s.sizes(); u != 0 || r != 0 || o != 0 {
		t.Fatalf("units %d ready %d unordered %d, want 0", u, r, o)
	}
}

func TestRequeueUnordered(t *testing.T) {
	s := New[int]()
	s.Add("a", 0)
	s.Add("a", 1)
	s.Add("", 2)
	s.Add("", 3)
	s.Add("", 4)
	s.Add("b", 5)
	for range 4 {
		mustNext(t, s) // a0 2 3 4
	}
	mustDone(t, s, "a") // a1 is now runnable
	mustRequeue[int](t, s, "")
	mustRequeue(t, s, "", 3, 4)
	mustRequeue(t, s, "", 2) // requeued last, so oldest
	if s.Waiting() != 5 || s.Busy() != 0 {
		t.Fatalf("Waiting, Busy = %d, %d, want 5, 0", s.Waiting(), s.Busy())
	}
	// Requeued unordered items come before every unit, even before a1,
	// which was added before them: the sequences of unordered items are not
	// remembered once they are handed out, so requeued ones are made the
	// oldest of all.
	for _, want := range []int{2, 3} {
		if u, v := mustNext(t, s); u != "" || v != want {
			t.Fatalf("got (%q,%d), want (\"\",%d)", u, v, want)
		}
	}
	if got := s.DropIf(func(int) bool { return true }); !slices.Equal(got, []int{4, 1, 5}) {
		t.Fatalf("DropIf = %v, want [4 1 5]", got)
	}
	if s.Waiting() != 0 {
		t.Fatalf("Waiting = %d, want 0", s.Waiting())
	}
}

// A unit with a backlog goes ahead of younger items by its backlog times the
// weight, and no further: with weight 4, a unit of three items added after
// ten others counts as added 2×4 Adds earlier, so it runs after the two
// items older than that and ahead of the rest.
func TestABacklogGoesAheadByItsWeight(t *testing.T) {
	s := New[int]()
	s.SetBacklogWeight(4)
	for i := range 10 {
		s.Add(string(rune('a'+i)), i)
	}
	for i := 10; i < 13; i++ {
		s.Add("hot", i)
	}
	var order []string
	for {
		u, _, ok := s.Next()
		if !ok {
			break
		}
		order = append(order, u)
	}
	// hot's head has sequence 10 and two items behind it: key 10-8 = 2, a tie
	// with c's, which is older.
	want := []string{"a", "b", "c", "hot", "d", "e", "f", "g", "h", "i", "j"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	mustDone(t, s, "hot")
	if u, v := mustNext(t, s); u != "hot" || v != 11 {
		t.Fatalf("after hot's first: Next = (%q, %d), want (hot, 11)", u, v)
	}
}
