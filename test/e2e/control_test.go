package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// http.control through turbo run: POST /consumers/{name}/pause holds the
// consumer — /status and turbo_consumer_paused say so, /readyz stays 200,
// records produced meanwhile are not delivered — and /resume delivers them,
// each once, in key order.
func TestPauseAndResumeOverHTTP(t *testing.T) {
	t.Parallel()
	const first, second = 200, 100
	topic := testkit.TopicName("control")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, first, 20)
	ledger := testkit.NewLedger(0)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: ctl
    group: %s
    topics: [%s]
    handler: {type: http, url: %q, timeout: 30s}
http: {listen: "127.0.0.1:0", control: true}
log: {level: info, format: json}
`, addr, topic, topic, ledger.Endpoint(t)))
	var stderr testkit.Buffer
	run, listen := testkit.StartHTTP(t, nil, &stderr, "run", "--config", cfg)
	base := "http://" + listen
	testkit.Eventually(t, time.Minute, fmt.Sprintf("the first %d records delivered", first), func() bool { return ledger.Report().Distinct == first })

	post(t, base+"/consumers/ctl/pause", http.StatusOK)
	post(t, base+"/consumers/nobody/pause", http.StatusNotFound)
	if !statusPaused(t, base) {
		t.Fatal("/status does not show the consumer paused")
	}
	m, err := scrape.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v := m.Must(t, "turbo_consumer_paused", map[string]string{"consumer": "ctl"}); v != 1 {
		t.Fatalf("turbo_consumer_paused = %v while paused, want 1", v)
	}
	testkit.ProduceWithBinary(t, addr, topic, second, 20)
	deliveries := ledger.Report().Deliveries
	testkit.Holds(t, 2*time.Second, "nothing delivered while paused", func() error {
		if n := ledger.Report().Deliveries; n != deliveries {
			return fmt.Errorf("%d deliveries", n-deliveries)
		}
		return nil
	})
	if resp, err := http.Get(base + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz while paused: %v %v, want 200", resp, err)
	}

	// A reload replaces the consumer: the pause goes over to the new one.
	run.Signal(t, syscall.SIGHUP)
	testkit.Eventually(t, time.Minute, "the reload to be applied and the consumer to be back", func() bool {
		return statusReloads(t, base) == 1 && testkit.Reachable(listen) && statusReady(t, base)
	})
	if !statusPaused(t, base) {
		t.Fatal("/status shows the consumer running after a SIGHUP reload: the reload resumed it")
	}
	testkit.Holds(t, 2*time.Second, "nothing delivered while paused after the reload", func() error {
		if n := ledger.Report().Deliveries; n != deliveries {
			return fmt.Errorf("%d deliveries", n-deliveries)
		}
		return nil
	})

	// Retuned live, then reloaded: the file's concurrency is the truth
	// again.
	post(t, base+"/consumers/ctl/retune", http.StatusOK, `{"concurrency":2,"rate":1000}`)
	if c := statusOf(t, base); c.Concurrency != 2 || c.RateLimit != 1000 || !c.Retuned {
		t.Fatalf("/status after the retune: %+v, want concurrency 2, rate limit 1000, retuned", c)
	}
	post(t, base+"/consumers/ctl/retune", http.StatusBadRequest, `{"concurrency":0}`)
	// Every record so far finished: there is nothing in flight to skip.
	post(t, base+"/consumers/ctl/skip", http.StatusConflict, fmt.Sprintf(`{"topic":%q,"partition":0,"offset":0}`, topic))
	run.Signal(t, syscall.SIGHUP)
	testkit.Eventually(t, time.Minute, "the second reload to be applied and the consumer to be back", func() bool {
		return statusReloads(t, base) == 2 && testkit.Reachable(listen) && statusReady(t, base)
	})
	if c := statusOf(t, base); c.Concurrency != 16 || c.RateLimit != 0 || c.Retuned || !c.Paused {
		t.Fatalf("/status after a reload: %+v, want the file's concurrency 16 and no rate limit, still paused", c)
	}

	// The topic paused and resumed: every partition shown held, then none.
	// (A paused consumer may show no partition yet: the franz-go side
	// shows a partition once it has fetched from it.)
	post(t, base+"/consumers/ctl/pause", http.StatusOK, fmt.Sprintf(`{"topic":%q}`, topic))
	if c := statusOf(t, base); !slices.Equal(c.PausedTopics, []string{topic}) || !everyHeld(c.Partitions, true) {
		t.Fatalf("/status after pausing the topic: paused topics %v, partitions %+v", c.PausedTopics, c.Partitions)
	}
	post(t, base+"/consumers/ctl/resume", http.StatusOK, fmt.Sprintf(`{"topic":%q}`, topic))
	if c := statusOf(t, base); len(c.PausedTopics) != 0 || !everyHeld(c.Partitions, false) {
		t.Fatalf("/status after resuming the topic: paused topics %v, partitions %+v", c.PausedTopics, c.Partitions)
	}

	// Partition 0 paused on its own: after the resume, the others drain
	// while it holds (none of its records delivered), and /status marks it
	// held; then it is resumed too.
	p0 := func() int {
		n := 0
		for id := range ledger.Handled() {
			if strings.HasPrefix(id, topic+"/0@") {
				n++
			}
		}
		return n
	}
	p0Before := p0()
	post(t, base+"/consumers/ctl/pause", http.StatusOK, fmt.Sprintf(`{"topic":%q,"partition":0}`, topic))
	post(t, base+"/consumers/ctl/resume", http.StatusOK)
	testkit.Eventually(t, time.Minute, "partitions 1 to 3 drained", func() bool {
		drained := 0
		for _, p := range statusOf(t, base).Partitions {
			if p.Partition != 0 && p.Lag == 0 {
				drained++
			}
		}
		return drained == 3
	})
	if n := p0(); n != p0Before {
		t.Fatalf("%d records of the paused partition 0 delivered", n-p0Before)
	}
	for _, p := range statusOf(t, base).Partitions {
		if held := p.Partition == 0; p.Held != held {
			t.Fatalf("partition %d held %v, want %v", p.Partition, p.Held, held)
		}
	}
	post(t, base+"/consumers/ctl/resume", http.StatusOK, fmt.Sprintf(`{"topic":%q,"partition":0}`, topic))
	testkit.Eventually(t, time.Minute, "every record delivered after the resume", func() bool { return ledger.Report().Distinct == first+second })
	if statusPaused(t, base) {
		t.Fatal("/status still shows the consumer paused after the resume")
	}
	if cmds := statusOf(t, base).commands; len(cmds) == 0 {
		t.Fatal("/status lists no control command")
	}
	rep := ledger.Report()
	if rep.Duplicates != 0 || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Fatalf("%d duplicates, %d overlaps, %d order violations; want 0 (%v)", rep.Duplicates, rep.Overlaps, rep.OrderViolations, rep.Examples)
	}

	// A client toggling the consumer in a loop does not flood the log: a
	// line a second, and one that counts the rest and gives the state.
	changeLines := func() int {
		return strings.Count(stderr.String(), `"message":"consumer paused`) + strings.Count(stderr.String(), `"message":"consumer resumed"`)
	}
	before := changeLines()
	const toggles = 200
	for i := range toggles {
		post(t, base+"/consumers/ctl/"+[]string{"pause", "resume"}[i%2], http.StatusOK)
	}
	testkit.Eventually(t, 10*time.Second, "the burst's summary line", func() bool {
		return strings.Contains(stderr.String(), `"message":"more pauses and resumes than one line a window`)
	})
	if n := changeLines() - before; n > 4 {
		t.Errorf("%d pause/resume lines for %d toggles, want at most a few (one a second, the rest counted)", n, toggles)
	}
	if statusPaused(t, base) {
		t.Error("/status shows the consumer paused after a burst that ended with a resume")
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
}

// post sends a control command (its JSON body, "" for none) and wants
// status want.
func post(t *testing.T, url string, want int, body ...string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(strings.Join(body, "")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d, want %d", url, resp.StatusCode, want)
	}
}

func statusPaused(t *testing.T, base string) bool {
	t.Helper()
	resp, err := http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Consumers []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
		} `json:"consumers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Consumers) != 1 {
		t.Fatalf("/status: %+v, %v", st, err)
	}
	return st.Consumers[0].Paused
}

// statusReloads reads config.reloads from /status.
func statusReloads(t *testing.T, base string) int {
	t.Helper()
	var st struct {
		Config struct {
			Reloads int `json:"reloads"`
		} `json:"config"`
	}
	getJSON(t, base+"/status", &st)
	return st.Config.Reloads
}

// statusReady reads whether the one consumer of /status is ready.
func statusReady(t *testing.T, base string) bool {
	t.Helper()
	var st struct {
		Consumers []struct {
			Ready struct {
				OK bool `json:"ok"`
			} `json:"ready"`
		} `json:"consumers"`
	}
	getJSON(t, base+"/status", &st)
	return len(st.Consumers) == 1 && st.Consumers[0].Ready.OK
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// ctlStatus is the one consumer of /status, and the control commands.
type ctlStatus struct {
	web.Consumer
	commands []web.CommandEntry
}

func statusOf(t *testing.T, base string) ctlStatus {
	t.Helper()
	var st web.Status
	getJSON(t, base+"/status", &st)
	if len(st.Consumers) != 1 {
		t.Fatalf("/status shows %d consumers, want 1", len(st.Consumers))
	}
	return ctlStatus{st.Consumers[0], st.Commands}
}

// everyHeld reports whether every partition shown is held (or none is).
func everyHeld(parts []web.Partition, held bool) bool {
	for _, p := range parts {
		if p.Held != held {
			return false
		}
	}
	return true
}

// TestSkipAPoisonRecordOverHTTP: a record whose every delivery fails (an
// endpoint answering 500) pins its key, retried every 200 ms. A skip over
// HTTP with the control token ends it: it is dead-lettered exactly once,
// every other record is handled once, in key order, the group commits the
// end of every partition, and the token appears nowhere in the output.
func TestSkipAPoisonRecordOverHTTP(t *testing.T) {
	t.Parallel()
	const records = 200
	topic := testkit.TopicName("skip")
	dlq := topic + ".dlq"
	addr := testkit.Cluster(t, 2, topic, dlq)
	testkit.ProduceWithBinary(t, addr, topic, records, 20)
	ledger := testkit.NewLedger(0)
	ledger.Fail = func(rec *actors.Record) error {
		if rec.Partition == 0 && rec.Offset == 5 {
			return errors.New("poison")
		}
		return nil
	}
	const token = "e2e-control-token-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: skip
    group: %s
    topics: [%s]
    retry: {max_attempts: 1000, initial_backoff: 200ms, max_backoff: 200ms}
    on_failure: dlq
    dlq_topic: %s
    commit_interval: 100ms
    handler: {type: http, url: %q, timeout: 30s}
http: {listen: "127.0.0.1:0", control: true, control_token_file: %q}
log: {level: info, format: json}
`, addr, topic, topic, dlq, ledger.Endpoint(t), tokenFile))
	var stderr testkit.Buffer
	run, listen := testkit.StartHTTP(t, nil, &stderr, "run", "--config", cfg)
	base := "http://" + listen
	testkit.Eventually(t, time.Minute, "the poison record failing twice", func() bool { return ledger.Report().FailedAttempts >= 2 })
	if d := ledger.Report().Distinct; d >= records-1 {
		t.Fatalf("%d records handled while the poison one pins its key, want fewer than %d", d, records-1)
	}

	body := fmt.Sprintf(`{"topic":%q,"partition":0,"offset":5}`, topic)
	send := func(auth string) (int, web.Answer) {
		t.Helper()
		req, err := http.NewRequest("POST", base+"/consumers/skip/skip", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a web.Answer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, a
	}
	if code, a := send(""); code != http.StatusForbidden {
		t.Fatalf("a skip without the token: %d %+v, want 403", code, a)
	}
	if code, a := send("not-the-token-0123456789abcdef"); code != http.StatusForbidden {
		t.Fatalf("a skip with a wrong token: %d %+v, want 403", code, a)
	}
	if !ledger.Abandon(topic, 0, 5) { // it will never finish: the records behind it may go on
		t.Fatal("the ledger never saw the poison record")
	}
	code, a := send(token)
	if code != http.StatusOK || !a.OK || !strings.Contains(a.Reason, "dead-lettered") {
		t.Fatalf("the skip: %d %+v, want 200 and the record dead-lettered", code, a)
	}
	testkit.Eventually(t, time.Minute, "every other record handled", func() bool { return ledger.Report().Distinct == records-1 })
	testkit.AwaitCommittedEnd(t, []string{addr}, topic, topic, time.Minute)
	failed := ledger.Report().FailedAttempts
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	dead := testkit.ReadCommitted(t, []string{addr}, dlq, time.Minute)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	for _, h := range dead[0].Headers {
		if string(h.Key) == "turbo-original-offset" && string(h.Value) != "5" {
			t.Fatalf("the dead letter is of offset %s, want 5", h.Value)
		}
	}
	rep := ledger.Report()
	if rep.Distinct != records-1 || rep.Duplicates != 0 || rep.Overlaps != 0 || rep.OrderViolations != 0 || rep.FailedAttempts != failed {
		t.Fatalf("after the skip: %d distinct, %d duplicates, %d overlaps, %d order violations, %d failed attempts (%d at the commit); want %d, 0, 0, 0, no more (%v)",
			rep.Distinct, rep.Duplicates, rep.Overlaps, rep.OrderViolations, rep.FailedAttempts, failed, records-1, rep.Examples)
	}
	if strings.Contains(stderr.String(), token) {
		t.Fatal("turbo's output shows the control token")
	}
	t.Logf("FIGURES skip broker=%s poison-attempts-before-the-skip=%d", brokerKind(), failed)
}
