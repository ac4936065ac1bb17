package observe

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit/scrape"
	webtest "github.com/turbokafka/turbo/test/web"
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

// scrapeMetrics parses base's /metrics.
func scrapeMetrics(t *testing.T, base string) scrape.Metrics {
	t.Helper()
	m, err := scrape.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// lint checks the exposition: `promtool check metrics` (make test
// installs promtool), else client_golang's promlint.
func lint(t *testing.T, raw []byte) {
	t.Helper()
	t.Logf("metrics checked by %s (%d bytes)", webtest.CheckMetrics(t, raw), len(raw))
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
