package testkit

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// Capped is an endpoint in front of another that serves at most Capacity
// requests at once and answers 503 to the others at once: a downstream
// with a capacity, which tests may change while it runs.
type Capped struct {
	Next     http.Handler
	Capacity atomic.Int64
	Serving  atomic.Int64 // requests being served now
	Answered atomic.Int64 // 2xx answers so far
	Refused  atomic.Int64 // 503s so far
	// Probe, if set, is called at each sample of Follow: what the client
	// says of itself then (e.g. its concurrency limit and calls in flight),
	// kept in Sample.Probed.
	Probe func() []int64
}

func (c *Capped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.Serving.Add(1) > c.Capacity.Load() {
		c.Serving.Add(-1)
		c.Refused.Add(1)
		http.Error(w, "over capacity", http.StatusServiceUnavailable)
		return
	}
	defer c.Serving.Add(-1)
	rec := httptest.NewRecorder()
	c.Next.ServeHTTP(rec, r)
	if rec.Code < 300 {
		c.Answered.Add(1)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// Sample is one point of a capacity curve.
type Sample struct {
	At       time.Duration // since the curve began
	Capacity int64
	Serving  int64 // requests being served at that moment
	Answered int64 // 2xx answers since the previous sample
	Refused  int64 // 503s since the previous sample
	Probed   []int64
}

// Follow sets the capacity to caps[0], caps[1], … for phase each, and
// samples the endpoint every interval meanwhile; it returns the curve.
func (c *Capped) Follow(caps []int64, phase, every time.Duration) []Sample {
	var curve []Sample
	start := time.Now()
	last, lastRefused := c.Answered.Load(), c.Refused.Load()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for range len(caps) * int(phase/every) {
		<-tick.C
		at := time.Since(start)
		ph := min(int(at/phase), len(caps)-1)
		c.Capacity.Store(caps[ph])
		a, r := c.Answered.Load(), c.Refused.Load()
		s := Sample{At: at, Capacity: caps[ph], Serving: c.Serving.Load(), Answered: a - last, Refused: r - lastRefused}
		if c.Probe != nil {
			s.Probed = c.Probe()
		}
		curve = append(curve, s)
		last, lastRefused = a, r
	}
	return curve
}

// Phase sums the samples from skip into phase i (of length phase): how many
// there are, and their Serving and Answered totals.
func Phase(curve []Sample, i int, phase, skip time.Duration) (n, serving, answered float64) {
	for _, s := range curve {
		if into := s.At - time.Duration(i)*phase; into >= skip && into < phase {
			n, serving, answered = n+1, serving+float64(s.Serving), answered+float64(s.Answered)
		}
	}
	return n, serving, answered
}
