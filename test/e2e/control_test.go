package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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

	// The topic paused and resumed: every partition held, then none.
	post(t, base+"/consumers/ctl/pause", http.StatusOK, fmt.Sprintf(`{"topic":%q}`, topic))
	if c := statusOf(t, base); !slices.Equal(c.PausedTopics, []string{topic}) || !allHeld(c.Partitions, true) {
		t.Fatalf("/status after pausing the topic: paused topics %v, partitions %+v", c.PausedTopics, c.Partitions)
	}
	post(t, base+"/consumers/ctl/resume", http.StatusOK, fmt.Sprintf(`{"topic":%q}`, topic))
	if c := statusOf(t, base); len(c.PausedTopics) != 0 || !allHeld(c.Partitions, false) {
		t.Fatalf("/status after resuming the topic: paused topics %v, partitions %+v", c.PausedTopics, c.Partitions)
	}

	// Partition 0 paused on its own: after the resume, the others drain
	// while it holds, and /status marks it held; then it is resumed too.
	post(t, base+"/consumers/ctl/pause", http.StatusOK, fmt.Sprintf(`{"topic":%q,"partition":0}`, topic))
	post(t, base+"/consumers/ctl/resume", http.StatusOK)
	testkit.Eventually(t, time.Minute, "the other partitions' records delivered", func() bool {
		c := statusOf(t, base)
		for _, p := range c.Partitions {
			if p.Partition != 0 && p.Lag != 0 {
				return false
			}
		}
		return len(c.Partitions) == 4
	})
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

// allHeld reports whether every partition (at least one) is held, or none.
func allHeld(parts []web.Partition, held bool) bool {
	for _, p := range parts {
		if p.Held != held {
			return false
		}
	}
	return len(parts) > 0
}
