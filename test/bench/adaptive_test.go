package bench

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
			// The baseline: a fixed concurrency equal to the capacity, which
			// never draws a 503 — what this machine delivers through the
			// HTTP client and server at that capacity.
			fixed := followEndpoint(b, j, side.env, side.name+" fixed", fmt.Sprintf("    concurrency: %d\n", caps[0]), caps[:1], phase, every, work)
			_, _, fixedAnswered := testkit.Phase(fixed, 0, phase, 2*time.Second)
			fixedN, _, _ := testkit.Phase(fixed, 0, phase, 2*time.Second)
			fixedPerSec := fixedAnswered / (max(fixedN, 1) * every.Seconds())
			record(row(scenario, fmt.Sprintf("%s: fixed concurrency %d, capacity %d throughout (the baseline)", strings.TrimSuffix(side.name, " adaptive"), caps[0], caps[0]),
				outcome{wall: time.Duration(fixedN) * every, committed: int64(fixedAnswered)}, fixedPerSec/(float64(caps[0])/work.Seconds()),
				fmt.Sprintf("the capacity's %s answers/s (throughput)", thousands(float64(caps[0])/work.Seconds()))))

			curve := followEndpoint(b, j, side.env, side.name, "    concurrency: 400\n    concurrency_mode: adaptive\n    concurrency_min: 4\n", caps, phase, every, work)
			var md strings.Builder
			fmt.Fprintf(&md, "# %s\n\n| time | capacity | requests in flight | answers/s | 503s/s | turbo's limit | turbo's calls in flight | turbo's buffered records |\n|---|---|---|---|---|---|---|---|\n", scenario)
			for _, s := range curve {
				fmt.Fprintf(&md, "| %.2f s | %d | %d | %.0f | %.0f |", s.At.Seconds(), s.Capacity, s.Serving, float64(s.Answered)/every.Seconds(), float64(s.Refused)/every.Seconds())
				for _, v := range s.Probed {
					fmt.Fprintf(&md, " %d |", v)
				}
				md.WriteString("\n")
			}
			fmt.Fprintf(&md, "\nfixed concurrency %d at capacity %d (the baseline): %.0f answers/s\n", caps[0], caps[0], fixedPerSec)
			_ = os.MkdirAll(filepath.Join(moduleRoot, ".bench"), 0o755)
			_ = os.WriteFile(filepath.Join(moduleRoot, ".bench", side.curve), []byte(md.String()), 0o644)
			for ph, capacity := range caps {
				n, serving, answered := testkit.Phase(curve, ph, phase, 2*time.Second)
				if n == 0 {
					continue
				}
				ideal := float64(capacity) / work.Seconds()
				perSec := answered / (n * every.Seconds())
				own := probedMean(curve, ph, phase, 2*time.Second, phase, 1)
				o := outcome{wall: time.Duration(n) * every, committed: int64(answered)}
				name := fmt.Sprintf("%s, phase %d (capacity %d): mean in flight %.1f at the endpoint, %.1f in turbo", side.name, ph+1, capacity, serving/n, own)
				record(row(scenario, name, o, perSec/ideal, fmt.Sprintf("the capacity's %s answers/s (throughput)", thousands(ideal))))
				judge(fmt.Sprintf("adaptive, %s: phase %d (capacity %d) at ≥ 80%% of its capacity, mean in flight ≤ capacity + 10%%", side.name, ph+1, capacity),
					true, perSec >= 0.8*ideal && serving/n <= 1.1*float64(capacity), "%.0f answers/s (%.2f×), %.1f in flight", perSec, perSec/ideal, serving/n)
				judge(fmt.Sprintf("adaptive, %s: phase %d (capacity %d), turbo's calls in flight ≥ 80%% of the capacity", side.name, ph+1, capacity),
					own >= 0, own >= 0.8*float64(capacity), "%.1f (%.2f×)", own, own/float64(capacity))
				if capacity == caps[0] {
					judge(fmt.Sprintf("adaptive, %s: phase %d (capacity %d) at ≥ 90%% of the fixed-concurrency baseline", side.name, ph+1, capacity),
						fixedPerSec > 0, perSec >= 0.9*fixedPerSec, "%.0f answers/s against %.0f (%.2f×)", perSec, fixedPerSec, perSec/fixedPerSec)
				}
				if ph > 0 && capacity > caps[ph-1] {
					// The rise: turbo's calls in flight half a second to a
					// second after it (the endpoint's own count, sampled at
					// an instant, also holds the calls' time in the HTTP
					// client: shown beside it).
					m, serving1, _ := phaseWindow(curve, ph, phase, 500*time.Millisecond, time.Second)
					own1 := probedMean(curve, ph, phase, 500*time.Millisecond, time.Second+time.Nanosecond, 1)
					judge(fmt.Sprintf("adaptive, %s: within 1 s of the rise to %d, turbo's calls in flight ≥ 70%% of it", side.name, capacity), m > 0 && own1 >= 0,
						own1 >= 0.7*float64(capacity), "%.1f in flight 0.5–1 s after it (%.2f×; %.1f at the endpoint)", own1, own1/float64(capacity), serving1/max(m, 1))
				}
			}
		}
	}
}

// followEndpoint runs turbo (the side's environment, the consumer's
// concurrency lines given) with the http handler toward an endpoint of
// work whose capacity follows caps, and returns the curve, turbo's limit,
// calls in flight and buffered records probed from /metrics at each
// sample.
func followEndpoint(b *testing.B, j job, env, name, concurrency string, caps []int64, phase, every, work time.Duration) []testkit.Sample {
	ep := &testkit.Capped{Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(work)
		w.WriteHeader(http.StatusNoContent)
	})}
	ep.Capacity.Store(caps[0])
	srv := httptest.NewServer(ep)
	defer srv.Close()
	j.url, j.concurrency = srv.URL, 400
	// /metrics on: the curve shows turbo's limit beside the endpoint's view.
	cfg := turboConfigWith(b, j, fmt.Sprintf("bench-adaptive-%d", time.Now().UnixNano()), config.OrderingKey, 400, "http:\n  listen: \"127.0.0.1:0\"\n")
	raw, err := os.ReadFile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// The concurrency settings and the retries go into the consumer's block.
	text := strings.Replace(string(raw), "    concurrency: 400\n", concurrency+"    retry: {max_attempts: 1000, initial_backoff: 5ms, max_backoff: 50ms}\n", 1)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(testkit.PerfBinary(b), "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "TURBO_LOG_LEVEL=info", "TURBO_LOG_FORMAT=json")
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	logf := peerLog(b, strings.ReplaceAll(name, " ", "-"))
	defer logf.Close()
	var said <-chan string
	cmd.Stdout = logf
	cmd.Stderr, said = testkit.WatchHTTPAddr(b, logf)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	deadline := time.Now().Add(time.Minute)
	for ep.Answered.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case addr := <-said:
		ep.Probe = metricsProbe("http://"+addr+"/metrics", "turbo_concurrency_limit", "turbo_in_flight_records", "turbo_buffered_records")
	case <-time.After(time.Until(deadline)):
		b.Fatalf("%s never logged where /metrics listens", name)
	}
	return ep.Follow(caps, phase, every)
}

// probedMean is the mean of probe value k over the samples of phase i
// taken from..to (exclusive) into it; -1 when none was read.
func probedMean(curve []testkit.Sample, i int, phase, from, to time.Duration, k int) float64 {
	var n, sum float64
	for _, s := range curve {
		if into := s.At - time.Duration(i)*phase; into >= from && into < to && k < len(s.Probed) && s.Probed[k] >= 0 {
			n, sum = n+1, sum+float64(s.Probed[k])
		}
	}
	if n == 0 {
		return -1
	}
	return sum / n
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

// metricsProbe reads the named gauges from a Prometheus text endpoint (the
// sum over their labels), -1 for one it cannot read; a scrape is bounded by
// 100 ms so that the curve's sampling keeps its pace.
func metricsProbe(url string, names ...string) func() []int64 {
	client := &http.Client{Timeout: 100 * time.Millisecond}
	return func() []int64 {
		out := make([]int64, len(names))
		for i := range out {
			out[i] = -1
		}
		resp, err := client.Get(url)
		if err != nil {
			return out
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			for i, n := range names {
				if !strings.HasPrefix(line, n) || len(line) == len(n) || (line[len(n)] != ' ' && line[len(n)] != '{') {
					continue
				}
				f := strings.Fields(line)
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
					out[i] = max(out[i], 0) + int64(v)
				}
			}
		}
		return out
	}
}
