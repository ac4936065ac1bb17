// Package scrape reads Prometheus metrics the way a test needs them: a
// /metrics answer (or a registry) parsed into families, and the value of
// the series with some labels. It depends on the Prometheus libraries
// alone, so that any package's tests may use it.
package scrape

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one exposition: its text (empty when gathered from a
// registry) and its families by name.
type Metrics struct {
	Raw      []byte
	Families map[string]*dto.MetricFamily
}

// maxBody bounds a /metrics answer read by Get.
const maxBody = 64 << 20

var client = &http.Client{Timeout: 5 * time.Second}

// Get fetches url (a /metrics endpoint) in the text format and parses it.
// The error says whether nothing answered, the status was not 200, or the
// text does not parse.
func Get(url string) (Metrics, error) {
	resp, err := client.Get(url)
	if err != nil {
		return Metrics{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Metrics{}, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Metrics{}, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return Parse(body)
}

// Parse parses an exposition in the text format.
func Parse(body []byte) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return Metrics{}, fmt.Errorf("parsing metrics: %w", err)
	}
	return Metrics{Raw: body, Families: fams}, nil
}

// Gather collects a registry's families.
func Gather(g prometheus.Gatherer) (Metrics, error) {
	fams, err := g.Gather()
	if err != nil {
		return Metrics{}, err
	}
	m := Metrics{Families: make(map[string]*dto.MetricFamily, len(fams))}
	for _, f := range fams {
		m.Families[f.GetName()] = f
	}
	return m, nil
}

// Value returns the value of the first series of family name whose labels
// include want — a counter's, gauge's or untyped value, or a histogram's
// sample count — and whether there is one.
func (m Metrics) Value(name string, want map[string]string) (float64, bool) {
	f := m.Families[name]
	if f == nil {
		return 0, false
	}
	for _, s := range f.GetMetric() {
		if !HasLabels(s, want) {
			continue
		}
		switch {
		case s.Counter != nil:
			return s.Counter.GetValue(), true
		case s.Gauge != nil:
			return s.Gauge.GetValue(), true
		case s.Untyped != nil:
			return s.Untyped.GetValue(), true
		case s.Histogram != nil:
			return float64(s.Histogram.GetSampleCount()), true
		}
		return 0, true
	}
	return 0, false
}

// Must is Value for a series that must exist: the test fails without it.
func (m Metrics) Must(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := m.Value(name, want)
	if !ok {
		t.Fatalf("no series %s%v in the scrape", name, want)
	}
	return v
}

// HasLabels reports whether series s has every label of want.
func HasLabels(s *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if got, ok := Label(s, k); !ok || got != v {
			return false
		}
	}
	return true
}

// Label returns the value of series s's label name, and whether it has one.
func Label(s *dto.Metric, name string) (string, bool) {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}
