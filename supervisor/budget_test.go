package supervisor

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestRestartBudgetAllowsMaxPerWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := restartBudget{max: 3, window: time.Minute}
	for i := range 3 {
		if !b.allow(t0.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("restart %d refused within the budget", i+1)
		}
	}
	if b.allow(t0.Add(59 * time.Second)) {
		t.Fatal("a 4th restart within the window was allowed")
	}
	if !b.allow(t0.Add(60 * time.Second)) {
		t.Fatal("a restart once the first left the window was refused")
	}
	if zero := (restartBudget{max: 0, window: time.Minute}); zero.allow(t0) {
		t.Fatal("max_restarts 0 allowed a restart")
	}
}

// The budget agrees with counting, for every restart (and for what
// remains before it), the accepted restarts
// in the window before it.
func TestRestartBudgetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := restartBudget{max: rng.IntN(5), window: time.Duration(1+rng.IntN(10)) * time.Second}
		var accepted []time.Time
		now := time.Unix(0, 0)
		for range 100 {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			n := 0
			for _, a := range accepted {
				if now.Sub(a) < b.window {
					n++
				}
			}
			want := n < b.max
			if left := b.remaining(now); left != max(b.max-n, 0) {
				t.Fatalf("max %d window %s at %s: remaining = %d, want %d", b.max, b.window, now, left, max(b.max-n, 0))
			}
			if got := b.allow(now); got != want {
				t.Fatalf("max %d window %s at %s: allow = %v, want %v", b.max, b.window, now, got, want)
			}
			if want {
				accepted = append(accepted, now)
			}
		}
	}
}

func TestStartRetryDelay(t *testing.T) {
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := startRetryDelay(i + 1); got != w {
			t.Errorf("after %d failures: %s, want %s", i+1, got, w)
		}
	}
	if got := startRetryDelay(1 << 30); got != startRetryMax {
		t.Errorf("after very many failures: %s, want %s", got, startRetryMax)
	}
}
