//go:build linux

package webtest_test

// The example Grafana dashboard and alert rules (examples/observability)
// may only use metrics turbo exposes: every metric name in their PromQL is
// looked up in a live scrape of a real `turbo run` (embedded broker), and
// the swarm-only names (turbo_swarm_*) in a live scrape of a real
// `turbo swarm` of 2 nodes against `turbo dev`. Linux only, like `turbo
// swarm`.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
	webtest "github.com/turbokafka/turbo/test/web"
	"go.yaml.in/yaml/v3"
)

var (
	dashboardPath = filepath.Join("..", "..", "examples", "observability", "grafana-dashboard.json")
	alertsPath    = filepath.Join("..", "..", "examples", "observability", "alerts.yaml")
)

// Bounds of the live checks, generous for a loaded 2-core machine.
const (
	scrapeDeadline = 90 * time.Second // every name shows up in /metrics
	scrapeTimeout  = 10 * time.Second // one GET /metrics
	stopDeadline   = 30 * time.Second // turbo exits after SIGTERM
	promtoolBound  = 30 * time.Second // one promtool run
)

// promqlWords are PromQL's keywords, modifiers and aggregation operators
// (which "sum by (x) (…)" separates from their parenthesis): identifiers
// that are no metric.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
	"Inf": true, "NaN": true, "start": true, "end": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// labelLists are the keywords followed by a parenthesised list of label
// names.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// promqlMetricNames returns the metric names an expression selects, in
// order of first use: the identifiers that are not functions (followed by
// "("), keywords, label names (inside {…} or a by/without/on/ignoring/
// group_* list), strings, numbers and durations ([…], after offset), or
// Grafana variables ($x, ${x}). A Grafana label_values(metric, label)
// query gives its metric.
func promqlMetricNames(expr string) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	// skipTo returns the index after the close that matches the open at i,
	// skipping strings.
	skipTo := func(i int, open, close byte) int {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(expr, i) - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(expr)
	}
	nextNonSpace := func(i int) int {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
		return i
	}
	labelValues := false // inside label_values(…): only the first argument is a metric
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipTo(i, '{', '}')
		case c == '[':
			i = skipTo(i, '[', ']')
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = skipTo(i, '{', '}')
			}
			for i < len(expr) && isPart(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration (1e3, 0.99, 5m, 1h30m).
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case c == ',' && labelValues:
			// label_values(metric, label): the rest is the label.
			i = skipTo(strings.LastIndexByte(expr[:i], '('), '(', ')')
			labelValues = false
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word, next := expr[i:j], nextNonSpace(j)
			switch {
			case labelLists[word] && next < len(expr) && expr[next] == '(':
				j = skipTo(next, '(', ')')
			case next < len(expr) && expr[next] == '(':
				labelValues = word == "label_values"
			case promqlWords[word]:
			default:
				add(word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

// skipString returns the index after the string literal starting at i.
func skipString(s string, i int) int {
	quote := s[i]
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if quote != '`' {
				i++
			}
		case quote:
			return i + 1
		}
	}
	return len(s)
}

func TestPromQLMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`turbo_consumer_ready`, []string{"turbo_consumer_ready"}},
		{`sum by (consumer) (rate(turbo_records_processed_total{consumer=~"$consumer"}[$__rate_interval]))`,
			[]string{"turbo_records_processed_total"}},
		{`histogram_quantile(0.99, sum by (consumer, le) (rate(turbo_handler_duration_seconds_bucket{consumer=~"$consumer", topic!="a}b"}[5m])))`,
			[]string{"turbo_handler_duration_seconds_bucket"}},
		{`max by (consumer, topic, partition) (turbo_partition_lag) > 1000
		  and max by (consumer, topic, partition) (deriv(turbo_partition_lag[10m])) > 0`, []string{"turbo_partition_lag"}},
		{`sum without (node) (a_total offset 5m) / on (consumer) group_left (topic) b_count > bool 1e3`, []string{"a_total", "b_count"}},
		{`max by (node, state) (turbo_swarm_node_state) == 1`, []string{"turbo_swarm_node_state"}},
		{`label_values(turbo_records_processed_total, consumer)`, []string{"turbo_records_processed_total"}},
		{`sum(x) by (le) + ${var} * $other - y`, []string{"x", "y"}},
		{`{__name__="hidden"} + job:rule:rate5m`, []string{"job:rule:rate5m"}},
	}
	for _, tt := range tests {
		if got := promqlMetricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("promqlMetricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// usage is where a metric name is used: "panel <title>", "alert <name>".
type usage map[string][]string

func (u usage) add(where, expr string) int {
	names := promqlMetricNames(expr)
	for _, n := range names {
		u[n] = append(u[n], where)
	}
	return len(names)
}

// readDashboard checks the dashboard's shape and returns its metric names.
func readDashboard(t *testing.T) usage {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want a current Grafana schema (≥ 36)", d.SchemaVersion)
	}
	u := usage{}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" {
			if u.add("variable $"+v.Name, v.Definition) == 0 {
				t.Errorf("variable $%s: no metric in %q", v.Name, v.Definition)
			}
		}
	}
	if vars["datasource"] != "datasource" || vars["consumer"] != "query" {
		t.Errorf("variables %v: want a datasource variable \"datasource\" and a query variable \"consumer\"", vars)
	}
	var walk func([]panel)
	exprs := 0
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: its datasource is not ${datasource}", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs++
				names := promqlMetricNames(tg.Expr)
				if len(names) == 0 {
					t.Errorf("panel %q: no metric in %q", p.Title, tg.Expr)
				}
				u.add("panel "+p.Title, tg.Expr)
				// Consumer metrics follow the $consumer selector.
				for _, n := range names {
					if strings.HasPrefix(n, "turbo_") && !strings.HasPrefix(n, "turbo_swarm_") && !strings.Contains(tg.Expr, `consumer=~"$consumer"`) {
						t.Errorf("panel %q: %s is not filtered by $consumer in %q", p.Title, n, tg.Expr)
					}
				}
			}
		}
	}
	walk(d.Panels)
	t.Logf("dashboard: %d queries, %d metric names", exprs, len(u))
	return u
}

// rules is the part of a Prometheus rule file the test reads.
type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// readAlerts checks the rules' shape and returns their metric names.
func readAlerts(t *testing.T) usage {
	t.Helper()
	raw, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var r rules
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	u := usage{}
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Alert == "" {
				t.Errorf("group %s: a rule without an alert name", g.Name)
			}
			if rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("alert %s: want summary and description annotations", rule.Alert)
			}
			if rule.Labels["severity"] == "" {
				t.Errorf("alert %s: no severity label", rule.Alert)
			}
			if rule.For != "" {
				if _, err := time.ParseDuration(rule.For); err != nil {
					t.Errorf("alert %s: for %q: %v", rule.Alert, rule.For, err)
				}
			}
			if u.add("alert "+rule.Alert, rule.Expr) == 0 {
				t.Errorf("alert %s: no metric in %q", rule.Alert, rule.Expr)
			}
		}
	}
	if n < 6 {
		t.Errorf("%d alert rules, want at least the six examples/observability/README.md describes", n)
	}
	t.Logf("alerts: %d rules, %d metric names", n, len(u))
	return u
}

// families maps each metric family of a text exposition to its type.
func families(body []byte) map[string]string {
	f := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok {
			if name, typ, ok := strings.Cut(rest, " "); ok {
				f[name] = typ
			}
		}
	}
	return f
}

// exposes reports whether a scrape with these families has series named
// name: a family's own name, or a histogram's or summary's _bucket, _sum
// and _count series.
func exposes(f map[string]string, name string) bool {
	if _, ok := f[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			switch f[base] {
			case "histogram":
				return true
			case "summary":
				return suffix != "_bucket"
			}
		}
	}
	return false
}

// scrape GETs /metrics in Prometheus's text format.
func scrape(addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return body, nil
}

// awaitNames scrapes addr until every name in want is exposed, and returns
// the last scrape; after scrapeDeadline it fails the test with the names
// still missing and where the examples use them.
func awaitNames(t *testing.T, addr string, want usage, alive func() bool) []byte {
	t.Helper()
	deadline := time.Now().Add(scrapeDeadline)
	var body []byte
	var missing []string
	var lastErr error
	for {
		if b, err := scrape(addr); err == nil {
			body, lastErr = b, nil
			f := families(b)
			missing = missing[:0]
			for n := range want {
				if !exposes(f, n) {
					missing = append(missing, n)
				}
			}
			if len(missing) == 0 {
				return body
			}
		} else {
			lastErr = err
		}
		if !alive() {
			t.Fatalf("turbo exited before /metrics on %s exposed every name (last error: %v)", addr, lastErr)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // a scrape is the only way to know
	}
	if body == nil {
		t.Fatalf("no answer from /metrics on %s within %s: %v", addr, scrapeDeadline, lastErr)
	}
	slices.Sort(missing)
	for _, n := range missing {
		t.Errorf("%s is used by %s but not in the scrape of %s", n, strings.Join(want[n], ", "), addr)
	}
	t.Fatalf("%d names missing after %s", len(missing), scrapeDeadline)
	return nil
}

func runPromtool(t *testing.T, tool string, stdin []byte, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), promtoolBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		return
	}
	t.Logf("promtool %s: ok", strings.Join(args, " "))
}

// The rule file's shape, and `promtool check rules` when there is one.
func TestAlertRules(t *testing.T) {
	readAlerts(t)
	if tool := webtest.Promtool(t); tool != "" {
		runPromtool(t, tool, nil, "check", "rules", alertsPath)
	}
}

// split divides the names into those a `turbo run` exposes and the swarm
// supervisor's own (turbo_swarm_*).
func split(all ...usage) (run, swarm usage) {
	run, swarm = usage{}, usage{}
	for _, u := range all {
		for n, where := range u {
			dst := run
			if strings.HasPrefix(n, "turbo_swarm_") {
				dst = swarm
			}
			dst[n] = append(dst[n], where...)
		}
	}
	return run, swarm
}

// Every metric name of the dashboard and the alert rules is in the scrape
// of a real `turbo run`: embedded broker, two consumers over the same
// records (one dead-letters, one skips what fails), an http handler that
// fails every record whose offset ends in 3, so failures, retries,
// dead letters and skips happen.
func TestDashboardAndAlertsUseRunMetrics(t *testing.T) {
	want, _ := split(readDashboard(t), readAlerts(t))
	var handled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		if strings.HasSuffix(r.Header.Get("Kafka-Offset"), "3") {
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
			return
		}
		time.Sleep(5 * time.Millisecond) // handler durations worth a histogram
	}))
	defer srv.Close()

	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [embedded]
  embedded:
    partitions: 4
    seed: {topic: orders, records: 400, keys: 40}
consumers:
  - name: orders
    group: orders
    topics: [orders]
    concurrency: 4
    commit_interval: 100ms
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms}
    on_failure: dlq
    dlq_topic: orders-dlq
    handler: {type: http, url: %[1]q, timeout: 5s}
  - name: audit
    group: audit
    topics: [orders]
    concurrency: 4
    commit_interval: 100ms
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms}
    on_failure: skip
    handler: {type: http, url: %[1]q, timeout: 5s}
shutdown_timeout: 10s
http: {listen: "127.0.0.1:0"}
log: {level: info, format: json}
`, srv.URL))
	p, addr := testkit.StartHTTP(t, io.Discard, nil, "run", "--config", cfg)
	body := awaitNames(t, addr, want, p.Alive)
	t.Logf("turbo run's /metrics exposes all %d names the examples use (%d bytes; %d handler calls so far)", len(want), len(body), handled.Load())
	webtest.CheckMetrics(t, body)
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, stopDeadline); code != 0 {
		t.Errorf("turbo run exited %d after SIGTERM, want 0", code)
	}
}

// The swarm-only names are in the scrape of a real `turbo swarm` (2 nodes,
// `turbo dev` as the broker).
func TestDashboardAndAlertsUseSwarmMetrics(t *testing.T) {
	_, want := split(readDashboard(t), readAlerts(t))
	if len(want) == 0 {
		t.Fatal("the examples use no turbo_swarm_* metric: this test shows nothing")
	}
	broker := testkit.Dev(t, "--partitions", "4")
	testkit.ProduceWithBinary(t, broker, "orders", 200, 20)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: orders
    topics: [orders]
    handler: {type: noop}
shutdown_timeout: 10s
http: {listen: "127.0.0.1:0"}
log: {level: info, format: json}
swarm:
  nodes: 2
  node_report_interval: 200ms
  node_report_timeout: 2s
`, broker))
	p, addr := testkit.StartHTTP(t, io.Discard, nil, "swarm", "--config", cfg)
	body := awaitNames(t, addr, want, p.Alive)
	// Every node's state is listed, for both nodes.
	for _, node := range []int{0, 1} {
		if !bytes.Contains(body, []byte(`turbo_swarm_node_state{node="`+strconv.Itoa(node)+`"`)) {
			t.Errorf("no turbo_swarm_node_state series for node %d", node)
		}
	}
	t.Logf("turbo swarm's /metrics exposes all %d swarm names the examples use", len(want))
	webtest.CheckMetrics(t, body)
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, stopDeadline); code != 0 {
		t.Errorf("turbo swarm exited %d after SIGTERM, want 0", code)
	}
}

func TestExposes(t *testing.T) {
	f := families([]byte(`# HELP a_total A.
# TYPE a_total counter
a_total{consumer="x"} 1
# TYPE h_seconds histogram
h_seconds_bucket{le="+Inf"} 1
h_seconds_sum 1
h_seconds_count 1
# TYPE s summary
s_sum 1
s_count 1
`))
	for name, want := range map[string]bool{
		"a_total": true, "a": false, "a_total_count": false,
		"h_seconds": true, "h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true,
		"s": true, "s_sum": true, "s_count": true, "s_bucket": false, "missing": false,
	} {
		if got := exposes(f, name); got != want {
			t.Errorf("exposes(%q) = %v, want %v", name, got, want)
		}
	}
}
