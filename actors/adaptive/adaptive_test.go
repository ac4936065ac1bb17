package adaptive

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// downstream simulates a service in 1 ms steps: it serves up to capacity
// requests at once, each for latency; a request over capacity is answered
// 503 after 1 ms (refuse), or waits its turn (queue: its latency grows with
// the load, as a server's backlog does).
type downstream struct {
	latency time.Duration
	refuse  bool
}

// window is one row of the curve: a stretch of simulated time.
type window struct {
	from, to   time.Duration
	capacity   int
	limit      int     // at the window's end
	inFlight   float64 // mean attempts out (served, queued or being refused)
	maxFlight  int
	served     int // successes
	pushbacks  int
	throughput float64 // successes per second
}

type attempt struct {
	start, end time.Time
	sig        Signal
}

// simulate runs the limiter against d for the capacity phases (each
// phaseLen long) with an endless backlog, and returns the curve in windows
// of step.
func simulate(t *testing.T, l *Limiter, d downstream, capacities []int, phaseLen, step time.Duration) []window {
	t.Helper()
	t0 := time.Unix(1_700_000_000, 0)
	var out []*attempt // in flight
	var curve []window
	var w window
	var flightSum float64
	ticks := 0
	total := phaseLen * time.Duration(len(capacities))
	for now := time.Duration(0); now < total; now += time.Millisecond {
		capacity := capacities[int(now/phaseLen)]
		clock := t0.Add(now)
		// Completions due now.
		kept := out[:0]
		for _, a := range out {
			if a.end.After(clock) {
				kept = append(kept, a)
				continue
			}
			l.Observe(a.start, a.end, a.sig, len(out))
			if a.sig == Pushback {
				w.pushbacks++
			} else {
				w.served++
			}
		}
		out = kept
		// New attempts up to the limit.
		for len(out) < l.Limit() {
			busy := 0
			for _, a := range out {
				if a.sig == Done {
					busy++
				}
			}
			a := &attempt{start: clock, sig: Done, end: clock.Add(d.latency)}
			switch {
			case busy >= capacity && d.refuse:
				a.sig, a.end = Pushback, clock.Add(time.Millisecond)
			case busy >= capacity: // queued behind the load
				a.end = clock.Add(time.Duration(float64(d.latency) * float64(busy+1) / float64(capacity)))
			}
			out = append(out, a)
		}
		flightSum += float64(len(out))
		ticks++
		w.maxFlight = max(w.maxFlight, len(out))
		if (now+time.Millisecond)%step == 0 {
			w.from, w.to, w.capacity, w.limit = now+time.Millisecond-step, now+time.Millisecond, capacity, l.Limit()
			w.inFlight = flightSum / float64(ticks)
			w.throughput = float64(w.served) / step.Seconds()
			curve = append(curve, w)
			w, flightSum, ticks = window{}, 0, 0
		}
	}
	return curve
}

func table(curve []window) string {
	var b strings.Builder
	b.WriteString("| time | capacity | limit | mean in flight | max in flight | successes/s | push-backs |\n|---|---|---|---|---|---|---|\n")
	for _, w := range curve {
		fmt.Fprintf(&b, "| %.2f–%.2f s | %d | %d | %.1f | %d | %.0f | %d |\n",
			w.from.Seconds(), w.to.Seconds(), w.capacity, w.limit, w.inFlight, w.maxFlight, w.throughput, w.pushbacks)
	}
	return b.String()
}

// TestFollowsACapacityThatChanges: a downstream of 20 ms that refuses (503)
// beyond 200, then 50, then 200 requests in flight. The limit follows: in
// each phase, once settled, throughput is at least 90 % of what the
// capacity allows; within a second of the rise the limit is at least 70 %
// of the new capacity; and no quarter-second holds on average more than
// the capacity plus 10 % in flight.
func TestFollowsACapacityThatChanges(t *testing.T) {
	const lat = 20 * time.Millisecond
	caps := []int{200, 50, 200}
	l := New(1, 1000)
	curve := simulate(t, l, downstream{latency: lat, refuse: true}, caps, 5*time.Second, 250*time.Millisecond)
	t.Logf("curve:\n%s", table(curve))
	settle := 2 * time.Second // from the start of a phase
	risen := false
	for _, w := range curve {
		risen = risen || w.to == 11*time.Second
		into := w.from % (5 * time.Second)
		if w.to == 11*time.Second && float64(w.limit) < 0.7*float64(w.capacity) {
			t.Errorf("%.2f–%.2f s: limit %d a second after the rise to %d, want ≥ 70 %% of it", w.from.Seconds(), w.to.Seconds(), w.limit, w.capacity)
		}
		if into < settle {
			continue
		}
		ideal := float64(w.capacity) / lat.Seconds()
		if w.throughput < 0.9*ideal {
			t.Errorf("%.2f–%.2f s: %.0f successes/s, want ≥ 90 %% of %.0f (capacity %d)", w.from.Seconds(), w.to.Seconds(), w.throughput, ideal, w.capacity)
		}
		if w.inFlight > 1.1*float64(w.capacity) {
			t.Errorf("%.2f–%.2f s: %.1f in flight on average, over capacity %d + 10 %%", w.from.Seconds(), w.to.Seconds(), w.inFlight, w.capacity)
		}
	}
	if !risen {
		t.Fatal("no window ends a second after the rise: the check of the recovery never ran")
	}
}

// TestQueueingDownstream: a downstream that never refuses but queues
// beyond 100 in flight (its latency grows with the load) is not driven to
// the maximum of 1,000: the latency rule holds the limit near where
// queueing starts, and throughput stays at the capacity.
func TestQueueingDownstream(t *testing.T) {
	const lat = 20 * time.Millisecond
	l := New(1, 1000)
	curve := simulate(t, l, downstream{latency: lat}, []int{100}, 10*time.Second, 500*time.Millisecond)
	t.Logf("curve:\n%s", table(curve))
	for _, w := range curve[len(curve)/2:] {
		if w.inFlight > 2.5*100 {
			t.Errorf("%.1f–%.1f s: %.1f in flight against a capacity of 100: queueing not noticed", w.from.Seconds(), w.to.Seconds(), w.inFlight)
		}
		if w.throughput < 0.8*100/lat.Seconds() {
			t.Errorf("%.1f–%.1f s: %.0f successes/s, want ≥ 80 %% of 5000", w.from.Seconds(), w.to.Seconds(), w.throughput)
		}
	}
}

// TestOneCutPerCongestion: fifty push-backs from attempts that started
// before the cut they caused cut the limit once, by cutFactor.
func TestOneCutPerCongestion(t *testing.T) {
	l := New(1, 1000)
	t0 := time.Unix(0, 0)
	for i := range 99 { // slow start from 1 to 100, every answer in 5 ms
		start := t0.Add(time.Duration(i) * time.Millisecond)
		l.Observe(start, start.Add(5*time.Millisecond), Done, l.Limit())
	}
	if l.Limit() != 100 {
		t.Fatalf("limit %d after 99 successes at the limit, want 100", l.Limit())
	}
	start := t0.Add(200 * time.Millisecond)
	for i := range 50 {
		l.Observe(start, start.Add(time.Duration(i+1)*time.Millisecond), Pushback, 100)
	}
	once, twice := int(100*cutFactor), int(100*cutFactor*cutFactor)
	if l.Limit() != once {
		t.Fatalf("limit %d after one congestion, want %d", l.Limit(), once)
	}
	late := start.Add(time.Second)
	l.Observe(late, late.Add(time.Millisecond), Pushback, once)
	if l.Limit() != twice {
		t.Fatalf("limit %d after a second congestion, want %d", l.Limit(), twice)
	}
	for range 10 {
		l.Observe(late, late.Add(time.Millisecond), Pushback, twice)
	}
	if l.Limit() != twice {
		t.Fatalf("limit %d: stale push-back cut again", l.Limit())
	}
}

// TestBounds: the limit never leaves min..max, and unused headroom does not
// grow it.
func TestBounds(t *testing.T) {
	l := New(4, 10)
	t0 := time.Unix(0, 0)
	for i := range 100 {
		l.Observe(t0, t0.Add(time.Millisecond), Done, l.Limit())
		if l.Limit() > 10 {
			t.Fatalf("limit %d after %d successes, over the maximum 10", l.Limit(), i+1)
		}
	}
	if l.Limit() != 10 {
		t.Fatalf("limit %d, want the maximum 10", l.Limit())
	}
	for i := range 10 {
		now := t0.Add(time.Duration(i+1) * time.Second)
		l.Observe(now, now.Add(time.Millisecond), Pushback, 10)
	}
	if l.Limit() != 4 {
		t.Fatalf("limit %d after ten congestions, want the minimum 4", l.Limit())
	}
	for range 100 {
		l.Observe(t0.Add(time.Hour), t0.Add(time.Hour+time.Millisecond), Done, 1) // 1 in flight: headroom unused
	}
	if l.Limit() != 4 {
		t.Fatalf("limit %d grew while the traffic did not use it", l.Limit())
	}
}
