package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// BenchmarkAdaptive: turbo run with concurrency_mode adaptive (4..400) and
// the http handler toward an endpoint of 20 ms whose capacity goes 200 →
// 50 → 200 requests at once (503 beyond it), 5 s each. Every 250 ms it
// samples the requests in flight and the answers; the curve goes to
// .bench/adaptive-curve.md (adaptive-curve-franz-go.md for the franz-go
// side, which runs second), and each phase, from 2 s in, is a row: records
// answered per second against what the capacity allows.
func BenchmarkAdaptive(b *testing.B) {
	const work, phase, every = 20 * time.Millisecond, 5 * time.Second, 250 * time.Millisecond
	caps := []int64{200, 50, 200}
	// Enough for the three phases at capacity (a quick run's 60,000 ran out
	// 3 s into the last phase once turbo kept up with the capacity).
	const records = 150_000
	j := newTopic(b, brokers(b), "adaptive", records, uniformKeys(10_000))
	scenario := fmt.Sprintf("adaptive concurrency: http handler toward an endpoint of 20 ms whose capacity goes %d → %d → %d (503 beyond it), %s each; concurrency_mode adaptive 4..400, key ordering", caps[0], caps[1], caps[2], human(phase))
	for range b.N {
		for _, side := range []struct{ name, env, curve string }{
			{"turbo key adaptive", "", "adaptive-curve.md"},
			{"turbo franz-go key adaptive", "TURBO_KAFKA_CLIENT=franz-go", "adaptive-curve-franz-go.md"},
		} {
			ep := &testkit.Capped{Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(work)
				w.WriteHeader(http.StatusNoContent)
			})}
			ep.Capacity.Store(caps[0])
			srv := httptest.NewServer(ep)
			j.url, j.concurrency = srv.URL, 400
			cfg := turboConfigWith(b, j, fmt.Sprintf("bench-adaptive-%d", time.Now().UnixNano()), config.OrderingKey, 400, "")
			// The adaptive settings go into the consumer's block.
			raw, err := os.ReadFile(cfg)
			if err != nil {
				b.Fatal(err)
			}
			text := strings.Replace(string(raw), "    concurrency: 400\n", "    concurrency: 400\n    concurrency_mode: adaptive\n    concurrency_min: 4\n    retry: {max_attempts: 1000, initial_backoff: 5ms, max_backoff: 50ms}\n", 1)
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(testkit.PerfBinary(b), "run", "--config", cfg)
			if side.env != "" {
				cmd.Env = append(os.Environ(), side.env)
			}
			logf := peerLog(b, strings.ReplaceAll(side.name, " ", "-"))
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			deadline := time.Now().Add(time.Minute)
			for ep.Answered.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			curve := ep.Follow(caps, phase, every)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			logf.Close()
			srv.Close()

			var md strings.Builder
			fmt.Fprintf(&md, "# %s\n\n| time | capacity | requests in flight | answers/s |\n|---|---|---|---|\n", scenario)
			for _, s := range curve {
				fmt.Fprintf(&md, "| %.2f s | %d | %d | %.0f |\n", s.At.Seconds(), s.Capacity, s.Serving, float64(s.Answered)/every.Seconds())
			}
			fmt.Fprintf(&md, "\nrefused: %d\n", ep.Refused.Load())
			_ = os.MkdirAll(filepath.Join(moduleRoot, ".bench"), 0o755)
			_ = os.WriteFile(filepath.Join(moduleRoot, ".bench", side.curve), []byte(md.String()), 0o644)
			for ph, capacity := range caps {
				n, serving, answered := testkit.Phase(curve, ph, phase, 2*time.Second)
				if n == 0 {
					continue
				}
				ideal := float64(capacity) / work.Seconds()
				perSec := answered / (n * every.Seconds())
				o := outcome{wall: time.Duration(n) * every, committed: int64(answered)}
				name := fmt.Sprintf("%s, phase %d (capacity %d): mean in flight %.1f", side.name, ph+1, capacity, serving/n)
				record(row(scenario, name, o, perSec/ideal, fmt.Sprintf("the capacity's %s answers/s (throughput)", thousands(ideal))))
				judge(fmt.Sprintf("adaptive, %s: phase %d (capacity %d) at ≥ 80%% of its capacity, mean in flight ≤ capacity + 10%%", side.name, ph+1, capacity),
					true, perSec >= 0.8*ideal && serving/n <= 1.1*float64(capacity), "%.0f answers/s (%.2f×), %.1f in flight", perSec, perSec/ideal, serving/n)
				if ph > 0 && capacity > caps[ph-1] {
					// The rise: in flight half a second to a second after it.
					m, serving1, _ := phaseWindow(curve, ph, phase, 500*time.Millisecond, time.Second)
					judge(fmt.Sprintf("adaptive, %s: within 1 s of the rise to %d, in flight ≥ 70%% of it", side.name, capacity), m > 0,
						serving1/m >= 0.7*float64(capacity), "%.1f in flight 0.5–1 s after it (%.2f×)", serving1/max(m, 1), serving1/max(m, 1)/float64(capacity))
				}
			}
		}
	}
}

// phaseWindow sums the samples of phase i taken from..to into it.
func phaseWindow(curve []testkit.Sample, i int, phase, from, to time.Duration) (n, serving, answered float64) {
	for _, s := range curve {
		if into := s.At - time.Duration(i)*phase; into >= from && into <= to {
			n, serving, answered = n+1, serving+float64(s.Serving), answered+float64(s.Answered)
		}
	}
	return n, serving, answered
}
