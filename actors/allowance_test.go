package actors

import (
	"testing"
	"time"
)

// A backlog worked off between ticks: the ticks spend what fills, so the
// drain at its end commits at once, and only once.
func TestAllowanceCommitsTheEndOfABacklogAtOnce(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	t0 := time.Unix(1000, 0)
	var a commitAllowance
	for i := range 50 {
		a.ticked(t0.Add(time.Duration(i)*interval), interval)
	}
	end := t0.Add(49*interval + interval/3)
	if !a.drained(end, interval) {
		t.Fatal("the drain at the end of a backlog waited for the tick")
	}
	if a.drained(end.Add(time.Millisecond), interval) {
		t.Fatal("a second drain right after the first committed too")
	}
}

// A trickle drains the partition with every record: over any stretch the
// commits stay within one per interval plus the burst.
func TestAllowanceBoundsCommitsUnderATrickle(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	t0 := time.Unix(1000, 0)
	var a commitAllowance
	commits := 0
	const span = 10 * time.Second
	for at := time.Duration(0); at < span; at += time.Millisecond {
		now := t0.Add(at)
		if at%interval == 0 && at > 0 { // the tick finds news: the trickle never stops
			a.ticked(now, interval)
			commits++
		}
		if at%(7*time.Millisecond) == 0 && a.drained(now, interval) { // a record drains the partition every 7 ms
			commits++
		}
	}
	if bound := int(span/interval) + allowanceBurst; commits > bound {
		t.Fatalf("%d commits in %s at interval %s, want at most %d", commits, span, interval, bound)
	}
	if commits < int(span/interval)-1 {
		t.Fatalf("%d commits in %s: the ticks must still commit every interval", commits, span)
	}
}

// After a quiet spell the allowance is full again, but never holds more
// than the burst however long the quiet lasted.
func TestAllowanceRefillsUpToTheBurst(t *testing.T) {
	t.Parallel()
	const interval = time.Second
	t0 := time.Unix(1000, 0)
	var a commitAllowance
	for range allowanceBurst {
		if !a.drained(t0, interval) {
			t.Fatal("a fresh allowance refused a drain commit within its burst")
		}
	}
	if a.drained(t0, interval) {
		t.Fatal("a drain commit beyond the burst")
	}
	later := t0.Add(time.Hour)
	n := 0
	for a.drained(later, interval) {
		n++
	}
	if n != allowanceBurst {
		t.Fatalf("after an hour's quiet %d drain commits at once, want the burst %d", n, allowanceBurst)
	}
}
