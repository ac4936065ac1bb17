package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// result is one row of the table.
type result struct {
	Scenario string  `json:"scenario"`
	Peer     string  `json:"peer"`
	Records  int64   `json:"records"` // records committed in the measured time
	Seconds  float64 `json:"seconds"` // wall time (see measure_test.go)
	PerSec   float64 `json:"records_per_s"`
	Ratio    float64 `json:"ratio,omitempty"`
	RatioTo  string  `json:"ratio_to,omitempty"`
	JoinedS  float64 `json:"joined_s,omitempty"`          // start → group Stable
	CPUus    float64 `json:"cpu_us_per_record,omitempty"` // the peer's CPU (user+system) per record
	RSSMiB   float64 `json:"peak_rss_mib,omitempty"`
	Note     string  `json:"note,omitempty"` // n/a and why, or how the run was cut short
}

// target is one of the benchmark's targets, judged on this run's figures.
type target struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      string `json:"met"` // yes, no, n/a
}

var (
	reportMu sync.Mutex
	results  []result
	targets  []target
	runStart = time.Now()
)

func record(r result) {
	reportMu.Lock()
	defer reportMu.Unlock()
	results = append(results, r)
}

// judge records a target: met when ok, n/a when the figures are missing.
func judge(name string, available, ok bool, measured string, args ...any) {
	t := target{Target: name, Measured: "—", Met: "n/a"}
	if available {
		t.Measured = fmt.Sprintf(measured, args...)
		t.Met = map[bool]string{true: "yes", false: "no"}[ok]
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	targets = append(targets, t)
}

// show records a figure beside the targets that is not one itself (what a
// baseline does), so a target's miss can be read against it.
func show(name, measured string, args ...any) {
	reportMu.Lock()
	defer reportMu.Unlock()
	targets = append(targets, target{Target: name, Measured: fmt.Sprintf(measured, args...), Met: "shown"})
}

// row turns an outcome into a table row; ratio and ratioTo are the scenario's
// comparison (0 when none).
func row(scenario, peer string, o outcome, ratio float64, ratioTo string) result {
	r := result{Scenario: scenario, Peer: peer}
	if o.na != "" {
		r.Note = "n/a (" + o.na + ")"
		return r
	}
	r.Records, r.Seconds, r.PerSec = o.committed, o.wall.Seconds(), o.rate()
	r.Ratio, r.RatioTo = ratio, ratioTo
	r.JoinedS = o.joined.Seconds()
	if o.committed > 0 {
		r.CPUus = float64(o.cpu.Microseconds()) / float64(o.committed)
	}
	r.RSSMiB = float64(o.rss) / (1 << 20)
	if !o.done && o.committed > 0 {
		r.Note = fmt.Sprintf("stopped after %.0f s", o.wall.Seconds())
	}
	return r
}

// report prints the table and the targets, and writes both under .bench/ at
// the module root as results.md and results.json.
// resultsName is the base name of the table's files in .bench/:
// TURBO_BENCH_OUT (make bench-kafka names each Kafka line's run), or
// "results".
func resultsName() string {
	if v := os.Getenv("TURBO_BENCH_OUT"); v != "" && filepath.Base(v) == v {
		return v
	}
	return "results"
}

func report() {
	reportMu.Lock()
	defer reportMu.Unlock()
	var md strings.Builder
	took := time.Since(runStart).Round(time.Second)
	fmt.Fprintf(&md, "%s, %s, %d CPUs, broker: %s; the whole run took %s.\n\n",
		runStart.Format("2006-01-02 15:04"), runtime.Version(), runtime.NumCPU(), brokerDescription(), took)
	fmt.Fprintf(&md, "| scenario | peer | wall time | records/s | ratio | joined after | CPU µs/record | peak RSS |\n")
	fmt.Fprintf(&md, "|---|---|---:|---:|---|---:|---:|---:|\n")
	last := ""
	for _, r := range results {
		scenario := r.Scenario
		if scenario == last {
			scenario = "" // one scenario's rows under one heading
		}
		last = r.Scenario
		if r.Seconds == 0 {
			fmt.Fprintf(&md, "| %s | %s | — | — | %s | — | — | — |\n", scenario, r.Peer, r.Note)
			continue
		}
		ratio := "—"
		switch {
		case r.Ratio >= 0.1:
			ratio = fmt.Sprintf("%.2f× %s", r.Ratio, r.RatioTo)
		case r.Ratio > 0:
			ratio = fmt.Sprintf("%.3f× %s", r.Ratio, r.RatioTo)
		}
		if r.Note != "" {
			ratio += " (" + r.Note + ")"
		}
		fmt.Fprintf(&md, "| %s | %s | %.2f s | %s | %s | %s | %s | %s |\n", scenario, r.Peer, r.Seconds,
			thousands(r.PerSec), ratio, orDash(r.JoinedS, "%.2f s"), orDash(r.CPUus, "%.2f"), orDash(r.RSSMiB, "%.0f MiB"))
	}
	if len(targets) > 0 {
		fmt.Fprintf(&md, "\n| target | measured | met |\n|---|---|---|\n")
		for _, t := range targets {
			fmt.Fprintf(&md, "| %s | %s | %s |\n", t.Target, t.Measured, t.Met)
		}
	}
	fmt.Print("\n" + md.String())
	dir := filepath.Join(moduleRoot, ".bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return
	}
	js, _ := json.MarshalIndent(map[string]any{
		"started": runStart.Format(time.RFC3339), "duration_s": took.Seconds(), "go": runtime.Version(),
		"cpus": runtime.NumCPU(), "broker": brokerDescription(), "scale": scaleName(),
		"results": results, "targets": targets,
	}, "", "  ")
	base := resultsName()
	for name, data := range map[string][]byte{base + ".json": js, base + ".md": []byte(md.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
}

func orDash(v float64, format string) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

// thousands formats a rate as a whole number with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
