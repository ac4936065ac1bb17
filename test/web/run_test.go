//go:build linux

package webtest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
	webtest "github.com/turbokafka/turbo/test/web"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// holder is the http endpoint of the console test: each record takes a
// little work, and one record (partition 1, offset 5) is held until the
// test ends, so that its partition turns stuck.
type holder struct {
	release chan struct{}
	once    sync.Once
	held    chan struct{}
}

func (h *holder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Kafka-Partition") == "1" && r.Header.Get("Kafka-Offset") == "5" {
		h.once.Do(func() { close(h.held) })
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}
	time.Sleep(2 * time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
}

// Done means 4: the console in headless Chromium against a real `turbo
// run` (embedded broker) shows the live numbers — the processed count
// grows, the partition whose record is held turns up as stuck — and a
// screenshot is saved.
func TestConsoleShowsARealRun(t *testing.T) {
	h := &holder{release: make(chan struct{}), held: make(chan struct{})}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer close(h.release)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [embedded]
  embedded: {partitions: 4, seed: {topic: orders, records: 40000, keys: 400}}
consumers:
  - name: orders
    topics: [orders]
    concurrency: 8
    handler: {type: http, url: %q, timeout: 2m}
    retry: {max_backoff: 1s}
http: {listen: "127.0.0.1:0"}
shutdown_timeout: 5s
log: {level: info, format: json} # info: the line saying where http.listen bound
`, srv.URL))
	run, listen := testkit.StartHTTP(t, nil, nil, "run", "--config", cfg)
	page := webtest.OpenConsole(t, "http://"+listen+"/")

	page.Await("the console to show a processed count", `Number(document.querySelector("#processed").textContent) > 0`, 60*time.Second)
	first := page.Processed()
	page.Await("the processed count to grow", fmt.Sprintf(`Number(document.querySelector("#processed").textContent) > %d`, first), 30*time.Second)
	second := page.Processed()
	if second <= first {
		t.Errorf("processed %d then %d: want it growing", first, second)
	}
	if !page.Ready() || !page.Live() {
		t.Errorf("ready %v, live %v: want both badges on for a consuming run", page.Ready(), page.Live())
	}
	select {
	case <-h.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the record to hold (partition 1, offset 5) never reached the endpoint")
	}
	// stuck_after is max(5 s, max_handler_time, retry.max_backoff) = 5 s.
	page.Await("partition orders/1 to show as stuck", `document.querySelector('li[data-stuck="orders/1"]') !== null`, 30*time.Second)
	stuck := page.Stuck()
	if age, ok := stuck["orders/1"]; !ok || age < 5 {
		t.Errorf("stuck list %v: want orders/1 older than 5 s", stuck)
	}
	for tp := range stuck {
		if tp != "orders/1" {
			t.Errorf("%s shows as stuck; only orders/1 holds a record", tp)
		}
	}
	if rows := page.StuckRows(); len(rows) != 1 || rows[0] != "orders/1" {
		t.Errorf("rows marked stuck: %v, want [orders/1]", rows)
	}
	shot := filepath.Join(t.TempDir(), "console-real-run.png")
	size := page.Screenshot(shot)
	if size < 10_000 {
		t.Errorf("screenshot %s is %d bytes: too small to show the page", shot, size)
	}
	webtest.Keep(t, shot)
	t.Logf("FIGURES console of a real run: processed %d then %d, stuck %v, screenshot %s (%d bytes)", first, second, stuck, shot, size)
	if p := page.Problems(); len(p) > 0 {
		t.Errorf("the page reported problems: %v", p)
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("turbo run exited %d after SIGTERM, want 0", code)
	}
}
