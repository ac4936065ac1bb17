package actors

import "testing"

// fakeFetcher models what sarama holds for one partition: while the
// partition is not paused and nothing of the previous response is left, each
// fetch decodes a whole response of perFetch records; the claim reads them one
// by one (the channel and the feeder's remainder are one queue here).
type fakeFetcher struct {
	perFetch int
	next     int // offset of the next record to fetch
	pending  []int
}

func (f *fakeFetcher) fetch(paused bool) {
	if paused || len(f.pending) > 0 {
		return
	}
	for range f.perFetch {
		f.pending = append(f.pending, f.next)
		f.next++
	}
}

func (f *fakeFetcher) read() (int, bool) {
	if len(f.pending) == 0 {
		return 0, false
	}
	m := f.pending[0]
	f.pending = f.pending[1:]
	return m, true
}

// TestClaimFlowBoundsReadAhead drives claimFlow the way ConsumeClaim does,
// behind a handler far slower than the fetches: one credit comes back per
// cycle, after the partition has starved and been paused. Whatever the number
// of cycles, the records fetched but not yet handed to the pipeline must stay
// within one response, and every record must come out once, in order.
func TestClaimFlowBoundsReadAhead(t *testing.T) {
	t.Parallel()
	const perFetch, cycles = 500, 5000
	src := &fakeFetcher{perFetch: perFetch}
	var flow claimFlow[int]
	want := 0
	take := func() {
		if flow.resume() && flow.isPaused() {
			t.Fatal("resume reported true but left the partition paused")
		}
		src.fetch(flow.isPaused())
		m, ok := flow.next()
		if !ok {
			m, ok = src.read()
		}
		if !ok {
			return // nothing fetched yet; the credit stays for the next cycle
		}
		if m != want {
			t.Fatalf("record %d came out, want %d", m, want)
		}
		want++
	}
	for c := range cycles {
		take() // one credit came back
		// Out of credits: starve, pause, and read what sarama delivers.
		src.fetch(flow.isPaused())
		if !flow.isPaused() && !flow.starved() {
			t.Fatal("starving an unpaused partition must pause it")
		}
		for {
			m, ok := src.read()
			if !ok {
				break
			}
			flow.hold(m)
		}
		if ahead := src.next - want; ahead > perFetch {
			t.Fatalf("cycle %d: %d records fetched ahead of the pipeline, want at most one response (%d)", c, ahead, perFetch)
		}
	}
	if want < cycles-1 {
		t.Fatalf("only %d records came out in %d cycles", want, cycles)
	}
}

// TestClaimFlowResumesOnlyWhenEmpty: the rule itself, step by step.
func TestClaimFlowResumesOnlyWhenEmpty(t *testing.T) {
	t.Parallel()
	var f claimFlow[int]
	if f.resume() {
		t.Fatal("resume of a partition never paused")
	}
	if !f.starved() {
		t.Fatal("the first starvation must pause")
	}
	if f.starved() {
		t.Fatal("a paused partition must not be paused again")
	}
	f.hold(1)
	f.hold(2)
	if f.resume() {
		t.Fatal("resumed with 2 records held")
	}
	if m, ok := f.next(); !ok || m != 1 {
		t.Fatalf("next = %d, %v; want 1, true", m, ok)
	}
	if f.resume() {
		t.Fatal("resumed with 1 record held")
	}
	if m, ok := f.next(); !ok || m != 2 {
		t.Fatalf("next = %d, %v; want 2, true", m, ok)
	}
	if _, ok := f.next(); ok {
		t.Fatal("next on an empty flow")
	}
	if !f.resume() || f.isPaused() {
		t.Fatal("an empty paused flow must resume")
	}
}
