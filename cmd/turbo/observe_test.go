package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit"
)

// Done means 2, liveness: a handler that ignores its cancellation turns
// /healthz to 503 once it has run for max_handler_time plus
// shutdown_timeout, and says why.
func TestLivenessFailsWhenAHandlerIgnoresCancellation(t *testing.T) {
	const maxHandler, shutdown = 300 * time.Millisecond, time.Second
	topic := testkit.TopicName("live")
	brokers := testkit.Broker(t, 1, topic)
	testkit.Produce(t, brokers, topic, 1, 1)
	hold := make(chan struct{})
	defer close(hold)
	began := make(chan time.Time, 1)
	deaf := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		select {
		case began <- time.Now():
		default:
		}
		<-hold // ignores ctx
		return nil
	})
	cc := config.DefaultConsumer("deaf")
	cc.Topics = []string{topic}
	cc.Group = "g-" + topic
	cc.MaxHandlerTime = maxHandler
	log := testkit.Logger(t)
	c, err := actors.New(actors.Options{
		Consumer: cc, Kafka: testkit.Kafka(t, brokers), ShutdownTimeout: shutdown, Handler: deaf, Logger: log, Metrics: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background()) // abandons the deaf handler, bounded by shutdown
	obs := newObserver()
	if err := obs.add(c, cc); err != nil {
		t.Fatal(err)
	}
	srv, err := web.Start(web.Options{Addr: "127.0.0.1:0", Key: "http.listen", Gatherer: obs.reg, Source: obs, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	healthz := "http://" + srv.Addr() + "/healthz"
	var start time.Time
	select {
	case start = <-began:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never ran")
	}
	if code, _ := probeOnce(t, healthz); code != http.StatusOK {
		t.Errorf("/healthz = %d while the handler is within its time, want 200", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	var reason string
	for {
		code, r := probeOnce(t, healthz)
		if code == http.StatusServiceUnavailable {
			reason = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz still %d 30 s after the handler began", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("FIGURES /healthz 503 %s after the deaf handler began (max_handler_time %s + shutdown_timeout %s): %q",
		took.Round(time.Millisecond), maxHandler, shutdown, reason)
	// turbo times a call from its runner's clock reading just before it
	// calls the handler, a little before the handler's own reading here
	// (3 ms once, under the race detector beside other packages).
	const callerFirst = 50 * time.Millisecond
	if took < maxHandler+shutdown-callerFirst {
		t.Errorf("/healthz failed after %s, before max_handler_time + shutdown_timeout (%s)", took, maxHandler+shutdown)
	}
	if took > maxHandler+shutdown+3*time.Second {
		t.Errorf("/healthz took %s to fail, want about %s", took, maxHandler+shutdown)
	}
	if !strings.Contains(reason, "consumer deaf") || !strings.Contains(reason, "ignoring its cancellation") {
		t.Errorf("reason %q does not say which consumer and why", reason)
	}
}

func probeOnce(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var c web.Check
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatalf("GET %s: decoding %v", url, err)
	}
	return resp.StatusCode, c.Reason
}

// TestHeaderSecretsNeverShow: a header value (from the file, the
// environment and the configuration) reaches the endpoint, and appears
// nowhere in turbo's output, the failures it logs included. (Debug level
// adds sarama's protocol lines, which run in process race on the test's
// buffer; the binary's own sink is safe.)
func TestHeaderSecretsNeverShow(t *testing.T) {
	const fromFile, fromEnv, inline = "s3cret-from-file", "s3cret-from-env", "s3cret-inline"
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key")+"|"+r.Header.Get("X-Inline")] = true
		mu.Unlock()
		http.Error(w, "no", http.StatusBadRequest) // every record fails: errors are logged
	}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte(fromFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TURBO_TEST_HEADER_KEY", fromEnv)
	cfg := writeConfig(t, "app.yaml", fmt.Sprintf(`
kafka:
  brokers: [embedded]
  embedded: {partitions: 2, seed: {topic: sec, records: 20, keys: 5}}
consumers:
  - name: sec
    topics: [sec]
    on_failure: skip
    handler:
      type: http
      url: %q
      headers:
        - {name: Authorization, value_file: %s, prefix: "Bearer "}
        - {name: X-Api-Key, value_env: TURBO_TEST_HEADER_KEY}
        - {name: X-Inline, value: %s}
log: {level: info, format: json}
`, srv.URL, token, inline))
	r := call(t, "run", "--config", cfg, "--exit-on-idle")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	mu.Lock()
	sent := seen["Bearer "+fromFile+"|"+fromEnv+"|"+inline]
	mu.Unlock()
	if !sent {
		t.Fatalf("the endpoint never got the three headers: %v", seen)
	}
	for _, s := range []string{fromFile, fromEnv, inline} {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Fatalf("turbo's output shows the header value %q", s)
		}
	}
	if !strings.Contains(r.stderr, "400") {
		t.Fatalf("no failure in the logs, so the test shows nothing: %s", r.stderr)
	}
}
