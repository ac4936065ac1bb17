package webtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// Promtool is the path of Prometheus's promtool: TURBO_TEST_PROMTOOL
// (set by `make test-web` and `make test` from test/web/browser.sh), else
// promtool on PATH; "" when there is none.
func Promtool(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TURBO_TEST_PROMTOOL"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("TURBO_TEST_PROMTOOL=%s is not an executable: %v", p, err)
		}
		return p
	}
	p, _ := exec.LookPath("promtool")
	return p
}

// promtoolTimeout bounds one `promtool check metrics`.
const promtoolTimeout = 30 * time.Second

// CheckMetrics fails the test when the exposition text body breaks
// Prometheus's conventions: checked by `promtool check metrics` when there
// is a promtool (Promtool), else by client_golang's promlint, the same
// rules. It returns which of the two checked.
func CheckMetrics(t testing.TB, body []byte) string {
	t.Helper()
	if tool := Promtool(t); tool != "" {
		ctx, cancel := context.WithTimeout(context.Background(), promtoolTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, tool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s check metrics: %v\n%s", tool, err, out)
		}
		return "promtool"
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Errorf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	return "promlint"
}
