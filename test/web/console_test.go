package webtest

import (
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/turbokafka/turbo/supervisor/web"
)

// A partition of the fake whose oldest record never finishes: it turns
// stuck stuckAfter after the fake starts.
const (
	blocked    = "orders/3"
	stuckAfter = 1.5 // seconds
	// rate is the fake's records per second.
	rate = 400
)

// movingSource is a fake web.Source whose numbers move with time: processed
// grows at rate, orders/3's oldest unfinished record ages from the start,
// lags wobble. Its strings carry markup, which the page must show as text.
type movingSource struct {
	started time.Time
	ready   atomic.Bool
	mode    string
}

func (f *movingSource) Live() web.Check { return web.Check{OK: true} }

func (f *movingSource) Ready() web.Check {
	if f.ready.Load() {
		return web.Check{OK: true}
	}
	return web.Check{Reason: "consumer orders: joining group g-orders"}
}

func (f *movingSource) Status() web.Status {
	now := time.Now()
	age := now.Sub(f.started).Seconds()
	processed := int64(age * rate)
	wobble := int64(age*10) % 40
	parts := make([]web.Partition, 4)
	for i := range parts {
		parts[i] = web.Partition{Topic: "orders", Partition: int32(i), Owner: "orders-w" + string(rune('0'+i)),
			Committed: processed/4 - 5, HighWatermark: processed/4 + 20*int64(i) + wobble,
			Lag: 20*int64(i) + wobble + 5, InFlight: 2, Buffered: int64(i) * 3}
	}
	parts[3].OldestUnfinishedSeconds = age // the blocked record, fetched at the start
	parts[3].Paused = true
	parts[1].OldestUnfinishedSeconds = 0.2
	st := web.Status{
		Mode: f.mode, Time: now, Live: f.Live(), Ready: f.Ready(),
		Consumers: []web.Consumer{{
			Name: "orders", Group: "g-orders", Ready: f.Ready(), Fetched: processed + 40, Processed: processed,
			Failed: processed / 100, Retries: processed / 120, DeadLettered: 3, Commits: processed / 50, Committed: processed,
			InFlight: 6 + int64(age*3)%5, Buffered: 18, PausedPartitions: 1, AssignedPartitions: 4, Lag: 150 + 4*wobble,
			StuckAfterSeconds: stuckAfter, Partitions: parts,
		}, {
			// Markup in every string the server sends: shown, never run.
			Name: `<img src=x onerror="window.pwned=1">`, Group: `<b>g</b>`, Ready: web.Check{Reason: `<script>window.pwned=2</script>`},
			KafkaError:        `<img src=y onerror="window.pwned=3"> kafka: client has run out of available brokers`,
			StuckAfterSeconds: stuckAfter,
			Partitions:        []web.Partition{{Topic: `<i>t</i>`, Partition: 0, Owner: `<u>o</u>`, Committed: -1, HighWatermark: -1}},
		}},
	}
	if f.mode == web.ModeSwarm {
		for i := range st.Consumers {
			n := i
			st.Consumers[i].Node = &n
		}
		st.Nodes = []web.Node{
			{Index: 0, PID: 4242, State: "running", RSSBytes: 48 << 20, HeapBytes: 21 << 20, SinceReportSeconds: 0.4, Ready: true},
			{Index: 1, PID: 4243, State: "restarting", Detail: `<b>hung</b>`, Restarts: 2, RSSBytes: 31 << 20, HeapBytes: 9 << 20,
				SinceReportSeconds: 3.2, LastExit: "signal: killed (hung: no report for 5s)"},
		}
	}
	return st
}

// failing wraps h: while down is set, /status answers 503, as a process
// that cannot answer would.
func failing(h http.Handler, down *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && r.URL.Path == "/status" {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func serve(t *testing.T, src web.Source, down *atomic.Bool) string {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t))
	srv, err := web.Listen("127.0.0.1:0", "http.listen", failing(web.Handler(nil, src, log), down), web.Limits{}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return "http://" + srv.Addr() + "/"
}

// TestConsoleInChromium drives the console in headless Chromium against a
// server whose numbers move: the processed count grows in the page, the
// blocked partition turns up in the stuck list and its row is marked, the
// ready badge follows Ready, a failing /status shows "connection lost"
// and the page recovers, markup from the server stays text, and the page
// runs with no script error (its Content-Security-Policy included).
func TestConsoleInChromium(t *testing.T) {
	began := time.Now()
	src := &movingSource{started: time.Now(), mode: web.ModeRun}
	var down atomic.Bool
	url := serve(t, src, &down)
	p := OpenConsole(t, url)
	t.Logf("Chromium up and the first /status shown in %v", time.Since(began).Round(time.Millisecond))

	// The processed count grows.
	first := p.Processed()
	p.Await("#processed to grow", `+document.getElementById("processed").textContent > `+itoa(first), 10*time.Second)
	p.Await("a records/s figure", `/^[0-9.\u202f]+$/.test(document.getElementById("rate").textContent)`, 10*time.Second)
	t.Logf("processed %d, then %d; %s records/s (the fake does %d)", first, p.Processed(), p.Rate(), rate)

	// Ready follows the source.
	if p.Ready() {
		t.Error("the ready badge says ready while Ready() is not OK")
	}
	if reason := Eval[string](p, `document.getElementById("ready-reason").textContent`); reason != src.Ready().Reason {
		t.Errorf("ready reason %q, want %q", reason, src.Ready().Reason)
	}
	src.ready.Store(true)
	p.Await("the ready badge to say ready", `document.getElementById("ready").dataset.ok === "true"`, 10*time.Second)
	if !p.Ready() || !p.Live() {
		t.Errorf("ready %v, live %v; want both", p.Ready(), p.Live())
	}

	// The blocked partition becomes stuck; the others do not.
	p.Await(blocked+" in the stuck list", `document.querySelector('li[data-stuck="`+blocked+`"]') !== null`, 10*time.Second)
	stuck := p.Stuck()
	if len(stuck) != 1 || stuck[blocked] <= stuckAfter {
		t.Errorf("stuck list %v, want only %s older than %v s", stuck, blocked, stuckAfter)
	}
	if rows := p.StuckRows(); !slices.Equal(rows, []string{blocked}) {
		t.Errorf("rows marked stuck: %v, want [%s]", rows, blocked)
	}
	// … and its age keeps growing.
	p.Await("the stuck age to grow", `parseFloat(document.querySelector('li[data-stuck="`+blocked+`"]').dataset.age) > `+ftoa(stuck[blocked]+1), 10*time.Second)

	// Lag bars: scaled to the largest lag, so the largest is full width.
	if w := Eval[float64](p, `parseFloat(document.querySelector('tr[data-partition="orders/3"] .bar .fill').style.width)`); w != 100 {
		t.Errorf("the largest lag's bar is %v%% wide, want 100%%", w)
	}

	// Markup from the server is text.
	if pwned := Eval[bool](p, `window.pwned !== undefined`); pwned {
		t.Error("markup from /status ran as script")
	}
	// The page makes no img, script or u element of its own.
	if n := Eval[int](p, `document.querySelectorAll("img, script:not(head script, body > script), u, [onerror]").length`); n != 0 {
		t.Errorf("%d elements made from /status strings, want 0", n)
	}
	text := Eval[string](p, `document.getElementById("consumers").textContent`)
	for _, want := range []string{"group <b>g</b>", "<i>t</i>/0", "<u>o</u>", "<script>window.pwned=2</script>"} {
		if !strings.Contains(text, want) {
			t.Errorf("the consumers' text lacks %q, shown as text", want)
		}
	}
	if got := Eval[string](p, `document.querySelectorAll("#consumers h3")[1].textContent`); got != `<img src=x onerror="window.pwned=1">` {
		t.Errorf("the second consumer's name shows as %q", got)
	}
	if got := Eval[string](p, `document.querySelector("#consumers .error").textContent`); got == "" {
		t.Error("the kafka_error is not shown")
	}

	shot := filepath.Join(t.TempDir(), "console-run.png")
	size := p.Screenshot(shot)
	t.Logf("screenshot %s: %d bytes", shot, size)
	Keep(t, shot)
	if size < 10<<10 {
		t.Errorf("the screenshot has %d bytes: blank?", size)
	}

	// /status failing: "connection lost", polling goes on, and recovers.
	down.Store(true)
	p.Await(`"connection lost"`, `document.getElementById("conn").dataset.state === "lost" && /connection lost/.test(document.getElementById("conn").textContent)`, 10*time.Second)
	before := p.Processed()
	down.Store(false)
	p.Await("the page to recover after /status is back", `document.getElementById("conn").dataset.state === "ok" && +document.getElementById("processed").textContent > `+itoa(before), 10*time.Second)

	if problems := p.Problems(); len(problems) > 0 {
		t.Errorf("the page had script problems: %q", problems)
	}
	t.Logf("the browser test took %v", time.Since(began).Round(time.Millisecond))
}

// TestConsoleSwarm: in swarm mode the page shows the node table and the
// node of each consumer.
func TestConsoleSwarm(t *testing.T) {
	src := &movingSource{started: time.Now(), mode: web.ModeSwarm}
	src.ready.Store(true)
	var down atomic.Bool
	p := OpenConsole(t, serve(t, src, &down))
	p.Await("two node rows", `document.querySelectorAll("#nodes tr[data-node]").length === 2 && !document.getElementById("nodes").hidden`, 10*time.Second)
	cells := Eval[[]string](p, `[...document.querySelectorAll('#nodes tr[data-node="1"] td')].map(td => td.textContent)`)
	want := []string{"1", "4243", "restarting · <b>hung</b>", "2", "31.0 MiB", "9.0 MiB", "3.2 s", "not ready", "signal: killed (hung: no report for 5s)"}
	if !slices.Equal(cells, want) {
		t.Errorf("node 1's row: %q\nwant %q", cells, want)
	}
	if tags := Eval[[]string](p, `[...document.querySelectorAll("#consumers .tag")].map(e => e.textContent)`); !slices.Equal(tags, []string{"node 0", "node 1"}) {
		t.Errorf("consumers' node tags %q", tags)
	}
	p.Await(blocked+" in the stuck list", `document.querySelector('li[data-stuck="`+blocked+`"]') !== null`, 10*time.Second)
	shot := filepath.Join(t.TempDir(), "console-swarm.png")
	t.Logf("screenshot %s: %d bytes", shot, p.Screenshot(shot))
	Keep(t, shot)
	if problems := p.Problems(); len(problems) > 0 {
		t.Errorf("the page had script problems: %q", problems)
	}
}

// TestMetricsCheck: what web serves on /metrics passes `promtool check
// metrics` (or promlint when no promtool is installed).
func TestMetricsCheck(t *testing.T) {
	reg := prometheus.NewRegistry()
	processed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turbo_records_processed_total", Help: "Records processed."}, []string{"consumer"})
	processed.WithLabelValues("orders").Add(3)
	took := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "turbo_handler_duration_seconds", Help: "Handler attempts' duration."})
	took.Observe(0.02)
	reg.MustRegister(processed, took, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := web.Start(web.Options{Addr: "127.0.0.1:0", Key: "http.listen", Gatherer: reg, Source: &movingSource{started: time.Now()},
		Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d, %v", resp.StatusCode, err)
	}
	t.Logf("/metrics: %d bytes, checked by %s", len(body), CheckMetrics(t, body))
}

func itoa(n int64) string   { return strconv.FormatInt(n, 10) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }
