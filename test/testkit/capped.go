package testkit

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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
