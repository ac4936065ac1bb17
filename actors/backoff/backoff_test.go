package backoff

import (
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// justBelowOne is the largest float64 below 1, the supremum of u.
var justBelowOne = math.Nextafter(1, 0)

func TestDelay(t *testing.T) {
	exact := Policy{Initial: time.Second, Max: 30 * time.Second, Multiplier: 2}
	jittered := Default
	for _, tc := range []struct {
		name    string
		p       Policy
		attempt int
		u       float64
		want    time.Duration
	}{
		{"first attempt", exact, 1, 0, time.Second},
		{"doubling 2", exact, 2, 0, 2 * time.Second},
		{"doubling 3", exact, 3, 0, 4 * time.Second},
		{"doubling 5", exact, 5, 0, 16 * time.Second},
		{"capped", exact, 6, 0, 30 * time.Second},
		{"attempt 0 is 1", exact, 0, 0, time.Second},
		{"negative attempt is 1", exact, -5, 0, time.Second},
		{"huge attempt capped", exact, math.MaxInt, 0, 30 * time.Second},
		{"huge attempt with jitter", jittered, math.MaxInt, 0.5, 27 * time.Second},
		{"no jitter ignores u", exact, 3, 0.9, 4 * time.Second},
		{"u=0 full delay", jittered, 3, 0, 4 * time.Second},
		{"u=0.5 takes off half the jitter", jittered, 3, 0.5, 3600 * time.Millisecond},
		{"multiplier 1 is constant", Policy{Initial: time.Second, Max: time.Minute, Multiplier: 1}, 100, 0, time.Second},
		{"multiplier 1.5", Policy{Initial: time.Second, Max: time.Minute, Multiplier: 1.5}, 3, 0, 2250 * time.Millisecond},
		{"huge multiplier", Policy{Initial: time.Second, Max: time.Minute, Multiplier: 1e300}, 3, 0, time.Minute},
		{"max of int64", Policy{Initial: time.Second, Max: math.MaxInt64, Multiplier: 2}, 1000, 0, math.MaxInt64},
		{"full jitter can reach 0", Policy{Initial: time.Second, Max: time.Second, Multiplier: 1, Jitter: 1}, 1, justBelowOne, 0},
		{"u out of range clamped high", jittered, 1, 7, 800 * time.Millisecond},
		{"u negative clamped", jittered, 1, -1, time.Second},
		{"u NaN", jittered, 1, math.NaN(), time.Second},
		{"invalid zero policy", Policy{}, 3, 0, 0},
		{"invalid negative Multiplier", Policy{Initial: time.Second, Max: time.Minute, Multiplier: -2}, 2, 0, 0},
		{"invalid negative Max", Policy{Initial: time.Second, Max: -time.Second, Multiplier: 2}, 3, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Delay(tc.attempt, tc.u); got != tc.want {
				t.Fatalf("Delay(%d, %v) = %v, want %v", tc.attempt, tc.u, got, tc.want)
			}
		})
	}
}

func TestDelayJitterBounds(t *testing.T) {
	p := Default
	for attempt := 1; attempt <= 10; attempt++ {
		base := p.Delay(attempt, 0)
		low := p.Delay(attempt, justBelowOne)
		wantLow := time.Duration(float64(base) * (1 - p.Jitter))
		// u never reaches 1, so the low end is approached but may sit a
		// rounding step above it.
		if low < wantLow || low > wantLow+time.Microsecond {
			t.Fatalf("attempt %d: Delay(u→1) = %v, want just above %v", attempt, low, wantLow)
		}
		if base > p.Max {
			t.Fatalf("attempt %d: Delay(u=0) = %v above Max", attempt, base)
		}
	}
}

// TestDelayProperty checks over random policies and inputs that the delay
// always lies within [(1-Jitter)*min(base, Max), min(base, Max)].
func TestDelayProperty(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := range 200_000 {
		p := Policy{
			Initial:    time.Duration(1 + r.Int63n(int64(time.Hour))),
			Multiplier: 1 + r.Float64()*r.Float64()*10,
			Jitter:     r.Float64(),
		}
		p.Max = p.Initial + time.Duration(r.Int63n(int64(100*time.Hour)))
		if i%10 == 0 {
			p.Max = math.MaxInt64 // no cap in practice: the overflow path
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("generated invalid policy %+v: %v", p, err)
		}
		attempt := 1 + r.Intn(100)
		if i%7 == 0 {
			attempt = r.Int()
		}
		u := r.Float64()

		// The expected range, computed independently by repeated
		// multiplication in float64 with an early cap.
		hi := float64(p.Initial)
		for n := 1; n < attempt && hi < float64(p.Max); n++ {
			hi *= p.Multiplier
		}
		hi = math.Min(hi, float64(p.Max))
		lo := (1 - p.Jitter) * hi

		got := p.Delay(attempt, u)
		// Allow for rounding to whole nanoseconds and for Pow differing from
		// repeated multiplication in the last bits.
		tol := 1 + hi*1e-9
		if float64(got) < lo-tol || float64(got) > hi+tol || got < 0 || got > p.Max {
			t.Fatalf("%+v Delay(%d, %v) = %v, want within [%v, %v]", p, attempt, u, got,
				time.Duration(lo), time.Duration(hi))
		}
	}
}

func TestNext(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 10 * time.Second, Multiplier: 2, ResetAfter: time.Minute}
	var s State
	var d time.Duration
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		s, d = p.Next(s, time.Second, 0) // crashing quickly keeps counting
		if s.Failures != i+1 || d != want {
			t.Fatalf("failure %d: (%d, %v), want (%d, %v)", i+1, s.Failures, d, i+1, want)
		}
	}
	s, d = p.Next(s, time.Minute, 0) // ran for the whole ResetAfter: forgiven
	if s.Failures != 1 || d != time.Second {
		t.Fatalf("after a stable period: (%d, %v), want (1, 1s)", s.Failures, d)
	}
	s, d = p.Next(s, 59*time.Second, 0) // just short of stable
	if s.Failures != 2 || d != 2*time.Second {
		t.Fatalf("after a short run: (%d, %v), want (2, 2s)", s.Failures, d)
	}

	never := p
	never.ResetAfter = 0 // disables forgiveness, however long it ran
	if s, _ := never.Next(State{Failures: 3}, 1000*time.Hour, 0); s.Failures != 4 {
		t.Fatalf("ResetAfter=0: Failures = %d, want 4", s.Failures)
	}
	if s, d := p.Next(State{Failures: math.MaxInt}, 0, 0); s.Failures != math.MaxInt || d != p.Max {
		t.Fatalf("saturation: (%d, %v), want (MaxInt, Max)", s.Failures, d)
	}
	if s, _ := p.Next(State{Failures: -4}, 0, 0); s.Failures != 1 {
		t.Fatalf("negative count: Failures = %d, want 1", s.Failures)
	}
	if s, d := Default.Next(State{}, 0, 0.5); s.Failures != 1 || d != 900*time.Millisecond {
		t.Fatalf("Default first failure: (%d, %v), want (1, 900ms)", s.Failures, d)
	}
}

func TestValidate(t *testing.T) {
	if err := Default.Validate(); err != nil {
		t.Fatalf("Default.Validate() = %v", err)
	}
	valid := Policy{Initial: time.Second, Max: time.Second, Multiplier: 1, Jitter: 1}
	if err := valid.Validate(); err != nil {
		t.Fatalf("boundary values: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Policy)
		field string
	}{
		{"zero Initial", func(p *Policy) { p.Initial = 0 }, "Initial"},
		{"negative Initial", func(p *Policy) { p.Initial = -time.Second }, "Initial"},
		{"Max below Initial", func(p *Policy) { p.Max = p.Initial - 1 }, "Max"},
		{"Multiplier below 1", func(p *Policy) { p.Multiplier = 0.5 }, "Multiplier"},
		{"Multiplier NaN", func(p *Policy) { p.Multiplier = math.NaN() }, "Multiplier"},
		{"negative Jitter", func(p *Policy) { p.Jitter = -0.1 }, "Jitter"},
		{"Jitter above 1", func(p *Policy) { p.Jitter = 1.1 }, "Jitter"},
		{"Jitter NaN", func(p *Policy) { p.Jitter = math.NaN() }, "Jitter"},
		{"negative ResetAfter", func(p *Policy) { p.ResetAfter = -1 }, "ResetAfter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Default
			tc.edit(&p)
			err := p.Validate()
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error naming %s", p, tc.field)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "backoff: "+tc.field+" ") {
				t.Fatalf("Validate error %q, want it to start with %q", msg, "backoff: "+tc.field)
			}
		})
	}
}

func BenchmarkDelay(b *testing.B) {
	p := Default
	for i := 0; b.Loop(); i++ {
		_ = p.Delay(i&15, 0.5)
	}
}
