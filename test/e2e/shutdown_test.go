package e2e

import (
	"fmt"
	"github.com/turbokafka/turbo/test/testkit"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder is the http endpoint records are posted to: it remembers each
// record it answered, so "finished" means the handler got its 200.
type recorder struct {
	mu       sync.Mutex
	answered map[string]int
	work     time.Duration
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	time.Sleep(r.work) // simulated work of the endpoint itself
	id := fmt.Sprintf("%s/%s@%s", req.Header.Get("Kafka-Topic"), req.Header.Get("Kafka-Partition"), req.Header.Get("Kafka-Offset"))
	r.mu.Lock()
	r.answered[id]++
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *recorder) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.answered))
	for k, v := range r.answered {
		out[k] = v
	}
	return out
}

// SIGTERM mid-run: turbo drains, commits and exits 0; the next run
// redelivers nothing that finished before the signal.
func TestSigtermThenRestartRedeliversNothingFinished(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, sigtermThenRestartRedeliversNothingFinished)
}

func sigtermThenRestartRedeliversNothingFinished(t *testing.T, _ testkit.Side) {
	const records = 3000
	topic := testkit.TopicName("orders")
	addr := testkit.Cluster(t, 8, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, 300)

	first := &recorder{answered: map[string]int{}, work: 2 * time.Millisecond}
	srv1 := httptest.NewServer(first)
	defer srv1.Close()
	cfg := func(url string) string {
		return testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: 16
    commit_interval: 10s   # only the shutdown's final commit can save the work
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: 20s
log: {level: info, format: json}
`, addr, topic, topic, url))
	}
	run := testkit.Start(t, nil, "run", "--config", cfg(srv1.URL))
	deadline := time.Now().Add(60 * time.Second)
	for len(first.snapshot()) < records/3 {
		if time.Now().After(deadline) {
			t.Fatalf("first run handled only %d records in 60s", len(first.snapshot()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := run.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := run.Wait(t, 40*time.Second); code != 0 {
		t.Fatalf("turbo run exited %d after SIGTERM, want 0", code)
	}
	finished := first.snapshot()
	if len(finished) >= records {
		t.Fatalf("the first run finished everything before the signal; the test proves nothing")
	}

	second := &recorder{answered: map[string]int{}}
	srv2 := httptest.NewServer(second)
	defer srv2.Close()
	again := testkit.Start(t, nil, "run", "--config", cfg(srv2.URL), "--exit-on-idle")
	if code := again.Wait(t, 120*time.Second); code != 0 {
		t.Fatalf("second turbo run exited %d, want 0", code)
	}
	redelivered := 0
	for id := range second.snapshot() {
		if finished[id] > 0 {
			redelivered++
		}
	}
	if redelivered != 0 {
		t.Errorf("%d records that finished before SIGTERM were delivered again", redelivered)
	}
	if total := len(finished) + len(second.snapshot()); total != records {
		t.Errorf("first run %d + second run %d distinct records, want %d", len(finished), len(second.snapshot()), records)
	}
	t.Logf("FIGURES sigterm-restart: first run finished %d records before SIGTERM; the restart handled the other %d and none twice", len(finished), len(second.snapshot()))
}
