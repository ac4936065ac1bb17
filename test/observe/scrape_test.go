package observe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var client = &http.Client{Timeout: 5 * time.Second}

// get fetches url and returns the status code and body (code 0 when the
// request failed, e.g. nothing listens yet).
func get(url string) (int, []byte) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// scrape is one /metrics answer, parsed.
type scrape struct {
	raw  []byte
	fams map[string]*dto.MetricFamily
}

func scrapeMetrics(t *testing.T, base string) scrape {
	t.Helper()
	code, body := get(base + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return scrape{raw: body, fams: fams}
}

// value is the value of the series of name whose labels include want; ok
// false when there is none.
func (s scrape) value(name string, want map[string]string) (float64, bool) {
	f := s.fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func (s scrape) must(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := s.value(name, labels)
	if !ok {
		t.Fatalf("no series %s%v in the scrape", name, labels)
	}
	return v
}

// lint checks the exposition: with promtool when TURBO_TEST_PROMTOOL names
// one (make test installs it), and always with the client library's linter.
func lint(t *testing.T, raw []byte) {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(raw)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
	promtool := os.Getenv("TURBO_TEST_PROMTOOL")
	if promtool == "" {
		t.Log("TURBO_TEST_PROMTOOL unset: linted with the client library's promlint only (make test sets it)")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	} else {
		t.Logf("promtool check metrics: ok (%d bytes checked)", len(raw))
	}
}

// probe is a /healthz or /readyz answer.
type probe struct {
	Code   int
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
}

func getProbe(url string) probe {
	code, body := get(url)
	p := probe{Code: code}
	if code != 0 {
		_ = json.Unmarshal(body, &p)
	}
	return p
}

func (p probe) String() string { return fmt.Sprintf("%d %q", p.Code, p.Reason) }

// waitProbe polls url until cond holds, and returns the answer and when.
func waitProbe(t *testing.T, url string, timeout time.Duration, what string, cond func(probe) bool) (probe, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last probe
	for {
		last = getProbe(url)
		if cond(last) {
			return last, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last answer of %s: %v", timeout, what, url, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
