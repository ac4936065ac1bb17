package web

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/rs/zerolog"
)

// fakeSource answers what it was last given.
type fakeSource struct {
	mu          sync.Mutex
	live, ready Check
	status      Status
}

func (f *fakeSource) Live() Check    { f.mu.Lock(); defer f.mu.Unlock(); return f.live }
func (f *fakeSource) Ready() Check   { f.mu.Lock(); defer f.mu.Unlock(); return f.ready }
func (f *fakeSource) Status() Status { f.mu.Lock(); defer f.mu.Unlock(); return f.status }

func testLog(t *testing.T) zerolog.Logger { return zerolog.New(zerolog.NewTestWriter(t)) }

// start serves src on a random port until the test ends.
func start(t *testing.T, g prometheus.Gatherer, src Source) string {
	t.Helper()
	s, err := Start(Options{Addr: "127.0.0.1:0", Key: "http.listen", Gatherer: g, Source: src, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return "http://" + s.Addr()
}

func get(t *testing.T, method, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestProbes(t *testing.T) {
	src := &fakeSource{}
	url := start(t, nil, src)
	for _, c := range []struct {
		path  string
		set   func(Check)
		check Check
		code  int
	}{
		{"/healthz", func(c Check) { src.live = c }, Check{OK: true}, 200},
		{"/healthz", func(c Check) { src.live = c }, Check{Reason: `handler stuck for 2m0s on "orders"/3`}, 503},
		{"/readyz", func(c Check) { src.ready = c }, Check{OK: true, Reason: "every consumer joined"}, 200},
		{"/readyz", func(c Check) { src.ready = c }, Check{Reason: "kafka unreachable: dial tcp: connection refused"}, 503},
	} {
		src.mu.Lock()
		c.set(c.check)
		src.mu.Unlock()
		resp, body := get(t, "GET", url+c.path)
		if resp.StatusCode != c.code {
			t.Errorf("%s with %+v: %d, want %d", c.path, c.check, resp.StatusCode, c.code)
		}
		if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
			t.Errorf("%s: Content-Type %q, Cache-Control %q; want application/json, no-store", c.path, ct, cc)
		}
		var got Check
		if err := json.Unmarshal(body, &got); err != nil || got != c.check {
			t.Errorf("%s: body %s (%v), want %+v", c.path, body, err, c.check)
		}
		// The body is {"ok":..,"reason":..}, reason left out when empty.
		if c.check.Reason == "" && strings.Contains(string(body), "reason") {
			t.Errorf("%s: body %s has an empty reason", c.path, body)
		}
	}
}

// TestStatusShape pins the JSON field names of /status: the console and
// users' scripts depend on them.
func TestStatusShape(t *testing.T) {
	node, stuckAt := 1, int64(7)
	src := &fakeSource{status: Status{
		Mode: ModeSwarm,
		Time: time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC),
		Live: Check{OK: true}, Ready: Check{Reason: "node 1 not ready"},
		Consumers: []Consumer{{Name: "orders", Group: "g", Node: &node, Ready: Check{OK: true}, Processed: 42,
			StuckAfterSeconds: 30, KafkaError: "broker down",
			Partitions: []Partition{{Topic: "orders", Partition: 3, Owner: "w-1", Committed: -1, HighWatermark: 10, Lag: 10,
				InFlight: 2, Paused: true, OldestUnfinishedSeconds: 31.5, OldestUnfinishedOffset: &stuckAt}}}},
		Nodes:  []Node{{Index: 1, PID: 99, State: "running", RSSBytes: 1 << 20, SinceReportSeconds: 0.5, Ready: true}},
		Config: &ConfigState{LoadedAt: time.Date(2026, 11, 5, 9, 0, 0, 0, time.UTC), Reloads: 2, Refused: 1, LastError: "consumers[0].concurrency: must be at least 1"},
	}}
	url := start(t, nil, src)
	resp, body := get(t, "GET", url+"/status")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("/status: %d, headers %v", resp.StatusCode, resp.Header)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(v any) []string {
		var ks []string
		for k := range v.(map[string]any) {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	want := map[string][]string{
		"status":    {"config", "consumers", "live", "mode", "nodes", "ready", "time"},
		"config":    {"last_error", "loaded_at", "refused", "reloads"},
		"consumer":  {"assigned_partitions", "buffered", "commits", "committed", "concurrency", "dead_lettered", "failed", "fetched", "group", "in_flight", "inherited", "kafka_error", "lag", "name", "node", "output_errors", "outputs", "partitions", "paused", "paused_partitions", "processed", "rate_limit", "ready", "restarts", "retries", "seeks", "skipped", "stuck_after_seconds"},
		"partition": {"buffered", "committed", "held", "high_watermark", "in_flight", "lag", "oldest_unfinished_offset", "oldest_unfinished_seconds", "owner", "partition", "paused", "topic"},
		"node": {"assigned_partitions", "buffered", "heap_bytes", "in_flight", "index", "lag", "last_exit", "partition_moves", "pid",
			"processed", "ready", "restarts", "rss_bytes", "seconds_since_report", "state", "status_name"},
	}
	consumer := doc["consumers"].([]any)[0]
	got := map[string][]string{
		"status":    keys(doc),
		"config":    keys(doc["config"]),
		"consumer":  keys(consumer),
		"partition": keys(consumer.(map[string]any)["partitions"].([]any)[0]),
		"node":      keys(doc["nodes"].([]any)[0]),
	}
	// omitempty fields left empty above: kafka_error is set, detail and
	// last_exit are not.
	want["node"] = slices.DeleteFunc(want["node"], func(k string) bool { return k == "last_exit" })
	for what, w := range want {
		if !slices.Equal(got[what], w) {
			t.Errorf("%s fields:\n got %v\nwant %v", what, got[what], w)
		}
	}
	if doc["time"] != "2026-11-05T10:00:00Z" || doc["mode"] != "swarm" {
		t.Errorf("time %v, mode %v", doc["time"], doc["mode"])
	}
	p := consumer.(map[string]any)["partitions"].([]any)[0].(map[string]any)
	if p["committed"] != float64(-1) || p["oldest_unfinished_seconds"] != 31.5 || p["oldest_unfinished_offset"] != float64(7) || p["partition"] != float64(3) {
		t.Errorf("partition %v", p)
	}
}

// An empty status is served with [] lists (not null) and a time.
func TestStatusEmpty(t *testing.T) {
	src := &fakeSource{status: Status{Mode: ModeRun, Consumers: []Consumer{{Name: "a"}}}}
	url := start(t, nil, src)
	_, body := get(t, "GET", url+"/status")
	if !strings.Contains(string(body), `"partitions":[]`) || strings.Contains(string(body), "null") || strings.Contains(string(body), `"nodes"`) {
		t.Errorf("/status = %s; want partitions [], no null, no nodes in run mode", body)
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil || st.Time.IsZero() {
		t.Errorf("/status time %v (%v), want the serving time", st.Time, err)
	}
	src.mu.Lock()
	src.status = Status{}
	src.mu.Unlock()
	if _, body := get(t, "GET", url+"/status"); !strings.Contains(string(body), `"consumers":[]`) {
		t.Errorf("/status = %s, want consumers []", body)
	}
	// The source's own slice was not written to.
	if src.status.Consumers != nil {
		t.Error("normalizing wrote to the source's status")
	}
}

func TestConsoleAndUnknownRoutes(t *testing.T) {
	url := start(t, nil, &fakeSource{})
	resp, body := get(t, "GET", url+"/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "<title>turbo") || len(body) != len(console) {
		t.Errorf("GET /: %d %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'sha256-") || !strings.Contains(csp, "style-src 'sha256-") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("GET /: Content-Security-Policy %q lacks the page's hashes", csp)
	}
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/metrics", 404}, // no Gatherer
		{"GET", "/index.html", 404},
		{"GET", "/status/x", 404},
		{"GET", "/healthz/", 404},
		{"GET", "/nope", 404},
		{"POST", "/status", 405},
		{"DELETE", "/", 405},
		{"HEAD", "/healthz", 503}, // HEAD is GET without the body; the fake is not live
	} {
		if resp, _ := get(t, c.method, url+c.path); resp.StatusCode != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.code)
		}
	}
}

func TestContentPolicyHashes(t *testing.T) {
	// The hashes of "x" and "" (printf x | openssl dgst -sha256 -binary | base64).
	p := contentPolicy([]byte("<style></style><script>x</script>"))
	if !strings.Contains(p, "script-src 'sha256-LXEWQrcmsEQBYnyp+6wy9chTD7GQPMTbAiWHF5IaSIE='") ||
		!strings.Contains(p, "style-src 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='") {
		t.Errorf("contentPolicy = %q", p)
	}
	if p := contentPolicy([]byte("<p>no script</p>")); !strings.Contains(p, "script-src 'none'") {
		t.Errorf("contentPolicy without a script = %q", p)
	}
}

// failing is a collector whose Collect reports an error next to a good
// metric.
type failing struct{ desc *prometheus.Desc }

func (f failing) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("node 2 did not report"))
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	processed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turbo_records_processed_total", Help: "Records processed."}, []string{"consumer"})
	processed.WithLabelValues("orders").Add(7)
	reg.MustRegister(processed, failing{prometheus.NewDesc("turbo_broken", "A collector that fails.", nil, nil)})
	url := start(t, reg, &fakeSource{})
	resp, body := get(t, "GET", url+"/metrics")
	// ContinueOnError: the good series are served despite the failing
	// collector.
	if resp.StatusCode != 200 || !strings.Contains(string(body), `turbo_records_processed_total{consumer="orders"} 7`) {
		t.Fatalf("/metrics: %d\n%s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	problems, err := promlint.New(strings.NewReader(string(body))).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", err, problems)
	}
}

func TestStartErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(Options{Addr: ln.Addr().String(), Key: "http.listen", Source: &fakeSource{}, Log: testLog(t)})
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.HasPrefix(err.Error(), "http.listen: ") {
		t.Errorf("Start on a busy port: %v, want an EADDRINUSE naming http.listen", err)
	}
	if _, err := Start(Options{Addr: "127.0.0.1:0", Key: "http.listen", Log: testLog(t)}); err == nil {
		t.Error("Start without a Source: no error")
	}
	// An empty address serves nothing and stops as a no-op, twice.
	s, err := Start(Options{Key: "http.listen", Log: testLog(t)})
	if err != nil || s.Addr() != "" {
		t.Fatalf("Start(\"\") = %v, %q", err, s.Addr())
	}
	s.Stop()
	s.Stop()
}

// Stop is idempotent, bounded, and leaves no goroutine behind, even with
// a keep-alive connection open.
func TestStopWaits(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := Start(Options{Addr: "127.0.0.1:0", Key: "http.listen", Source: &fakeSource{}, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	began := time.Now()
	s.Stop()
	s.Stop()
	if took := time.Since(began); took > stopTimeout+time.Second {
		t.Errorf("Stop took %v, want at most %v", took, stopTimeout)
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Error("still listening after Stop")
	}
	tr.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for goroutines to return to %d after Stop; %d remain", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLimitsDefaults(t *testing.T) {
	if got := (Limits{}).withDefaults(); got != DefaultLimits {
		t.Errorf("zero Limits → %+v, want DefaultLimits", got)
	}
	got := Limits{Idle: time.Second, MaxConns: -1}.withDefaults()
	if got.Idle != time.Second || got.MaxConns != MaxConns || got.Write != DefaultLimits.Write {
		t.Errorf("partial Limits → %+v", got)
	}
	if DefaultLimits.Write < 10*time.Second {
		t.Errorf("DefaultLimits.Write %v cuts a scrape before Prometheus's default 10 s timeout", DefaultLimits.Write)
	}
}

// A listener on loopback answers requests for loopback names only: a page
// whose name was re-pointed at 127.0.0.1 (DNS rebinding) gets 403 and
// nothing of /status; one on every interface answers any Host.
func TestLoopbackListenerChecksTheHost(t *testing.T) {
	src := &fakeSource{live: Check{OK: true}, status: Status{Mode: ModeRun}}
	get := func(base, host string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusForbidden && strings.Contains(string(body), `"mode"`) {
			t.Errorf("Host %q: 403 with the status in it: %s", host, body)
		}
		return resp.StatusCode
	}
	loop := start(t, nil, src)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(loop, "http://"))
	for host, want := range map[string]int{
		"127.0.0.1:" + port:       http.StatusOK,
		"localhost:" + port:       http.StatusOK,
		"LOCALHOST.":              http.StatusOK,
		"[::1]:" + port:           http.StatusOK,
		"127.8.9.10":              http.StatusOK,
		"app.localhost":           http.StatusOK,
		"rebound.example":         http.StatusForbidden,
		"rebound.example:" + port: http.StatusForbidden,
		"10.0.0.7:" + port:        http.StatusForbidden,
		"localhost.example.com":   http.StatusForbidden,
	} {
		if got := get(loop, host); got != want {
			t.Errorf("loopback listener, Host %q: %d, want %d", host, got, want)
		}
	}
	s, err := Start(Options{Addr: "0.0.0.0:0", Key: "http.listen", Source: src, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	_, anyPort, _ := net.SplitHostPort(s.Addr())
	if got := get("http://127.0.0.1:"+anyPort, "rebound.example"); got != http.StatusOK {
		t.Errorf("listener on every interface, Host rebound.example: %d, want 200 (it serves names it cannot know)", got)
	}
}
