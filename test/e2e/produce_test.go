package e2e

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// turbo produce against a broker that never answers: SIGINT while it
// connects ends it at once (sarama's producer connects before it returns,
// and took minutes of retries to give up), with exit 1 and a line saying
// it was interrupted, not a package name.
func TestProduceIsInterruptedWhileConnecting(t *testing.T) {
	t.Parallel()
	addr, accepted := silentBroker(t)
	var stdout, stderr bytes.Buffer
	p := testkit.StartWith(t, &stdout, &stderr, "produce", "--brokers", addr, "--topic", "t", "--count", "10")
	testkit.Eventually(t, 30*time.Second, "turbo produce to connect to the silent broker", func() bool { return accepted.Load() > 0 })
	sent := p.Signal(t, syscall.SIGINT)
	code := p.Wait(t, 30*time.Second)
	took := time.Since(sent)
	if took > 2*time.Second {
		t.Errorf("turbo produce exited %s after SIGINT, want within 2 s", took.Round(time.Millisecond))
	}
	if code != 1 {
		t.Errorf("exit %d after SIGINT while connecting, want 1 (the records were not written)", code)
	}
	out := stderr.String()
	if !strings.Contains(out, "interrupted") || strings.Contains(out, "embedded:") {
		t.Errorf("stderr %q: want a line saying it was interrupted, without the package name", out)
	}
	t.Logf("FIGURES produce-interrupted exit=%d after %s: %s", code, took.Round(time.Millisecond), strings.TrimSpace(out))
}
