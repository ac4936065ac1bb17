package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// TestEnrichExample runs examples/enrich-http as its README says — the
// Python service, then `turbo run` with the example's app.yaml — against a
// broker of the test's own: every order gets exactly one enriched record in
// the output topic, keyed like the order, carrying what the service added.
func TestEnrichExample(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("examples/enrich-http needs python3 (Debian: apt-get install python3): %v", err)
	}
	svc := exec.Command(python, "../../examples/enrich-http/enrich.py", "--port", "0")
	out, err := svc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	svc.Stderr = os.Stderr
	if err := svc.Start(); err != nil {
		t.Fatalf("starting enrich.py: %v", err)
	}
	t.Cleanup(func() {
		_ = svc.Process.Signal(syscall.SIGTERM)
		_ = svc.Wait()
	})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
	}()
	var addr string
	select {
	case addr = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("enrich.py did not say where it listens within 30 s")
	}

	const orders = 300
	in := testkit.TopicName("orders")
	enriched := in + "-enriched"
	broker := testkit.Cluster(t, 4, in, enriched)
	testkit.ProduceWithBinary(t, broker, in, orders, 30)

	example, err := os.ReadFile("../../examples/enrich-http/app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(example)
	kafka := cfg[strings.Index(cfg, "kafka:"):strings.Index(cfg, "consumers:")]
	for old, repl := range map[string]string{
		kafka:                               fmt.Sprintf("kafka:\n  brokers: [%q]\n", broker),
		"topics: [orders]":                  fmt.Sprintf("topics: [%s]", in),
		"topic: orders-enriched":            "topic: " + enriched,
		"url: http://127.0.0.1:8090/enrich": "url: http://" + addr + "/enrich",
		"consumers:\n  - name: enrich\n":    "consumers:\n  - name: enrich\n    commit_interval: 100ms\n",
	} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("examples/enrich-http/app.yaml no longer has %q: update this test with it", old)
		}
		cfg = strings.Replace(cfg, old, repl, 1)
	}
	p := testkit.Start(t, nil, "run", "--config", testkit.WriteConfig(t, cfg), "--exit-on-idle")
	if code, how := p.WaitHow(t, 2*time.Minute); code != 0 {
		t.Fatalf("turbo run of the example: %s, want exit code 0", how)
	}

	var written int
	for _, end := range testkit.EndOffsets(t, []string{broker}, enriched) {
		written += int(end)
	}
	if written != orders {
		t.Errorf("%d records in %s, want one per order (%d)", written, enriched, orders)
	}
	seen := map[int64]bool{}
	for _, m := range testkit.ReadTopic(t, []string{broker}, enriched, min(written, orders), 30*time.Second) {
		var v struct {
			Customer   string `json:"customer"`
			Offset     int64  `json:"source_offset"`
			EnrichedBy string `json:"enriched_by"`
			Bytes      int    `json:"bytes"`
			Order      string `json:"order"`
		}
		if err := json.Unmarshal(m.Value, &v); err != nil {
			t.Fatalf("enriched record %q: %v", m.Value, err)
		}
		if v.EnrichedBy != "enrich.py" || v.Customer != string(m.Key) || v.Bytes != len(v.Order) {
			t.Errorf("enriched record %q with key %q: want the service's fields and the order's key", m.Value, m.Key)
		}
		seen[v.Offset] = true
	}
	if len(seen) == 0 {
		t.Errorf("no enriched record names its order's offset")
	}
}
