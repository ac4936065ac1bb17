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
	const n = 1_000_000
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
