package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// misreader is an http batch downstream that answers a batch holding a
// record it has not seen before with a 207 whose body is not the document
// (the list under a misspelt key, "failures", naming every record), and any
// other batch with 200. It counts, per record, the 207s and the 200s.
type misreader struct {
	*httptest.Server
	mu   sync.Mutex
	bad  map[string]int // record ("partition@offset") → 207s answered
	done map[string]int // record → 200s answered
}

func newMisreader(t *testing.T) *misreader {
	m := &misreader{bad: map[string]int{}, done: map[string]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		type entry struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Retryable bool   `json:"retryable"`
			Error     string `json:"error"`
		}
		var batch []entry
		sc := bufio.NewScanner(r.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("a batch line is not JSON: %v", err)
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			e.Retryable, e.Error = true, "misread"
			batch = append(batch, e)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		fresh := false
		for _, e := range batch {
			fresh = fresh || m.bad[fmt.Sprintf("%d@%d", e.Partition, e.Offset)] == 0
		}
		for _, e := range batch {
			if fresh {
				m.bad[fmt.Sprintf("%d@%d", e.Partition, e.Offset)]++
			} else {
				m.done[fmt.Sprintf("%d@%d", e.Partition, e.Offset)]++
			}
		}
		if !fresh {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMultiStatus)
		_ = json.NewEncoder(w).Encode(map[string]any{"failures": batch})
	}))
	t.Cleanup(m.Close)
	return m
}

// counts returns, per record, the 207s and the 200s answered so far.
func (m *misreader) counts() (bad, done map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	bad, done = map[string]int{}, map[string]int{}
	for k, v := range m.bad {
		bad[k] = v
	}
	for k, v := range m.done {
		done[k] = v
	}
	return bad, done
}

// TestA207ThatIsNotTheDocumentIsRetried: turbo run posts batches of up to
// 25 records to a downstream whose first answer for every record is a 207
// with the list under a misspelt key. That is not the documented document,
// so the whole batch fails, retryably: every record is retried until the
// downstream answers 200, the committed offsets cover them all, and the log
// says the 207 was not understood. (A parser that took the misspelt body as
// "nothing failed" committed every record unprocessed.)
func TestA207ThatIsNotTheDocumentIsRetried(t *testing.T) {
	t.Parallel()
	const records, keys = 500, 50
	topic := testkit.TopicName("multistatus")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, keys)
	down := newMisreader(t)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: multistatus
    group: %s
    topics: [%s]
    concurrency: 8
    commit_interval: 100ms
    batch: {max_records: 25, max_wait: 20ms}
    # A record is retried each time it shares a batch with one the
    # downstream has not seen: the bound is far above what that takes.
    retry: {max_attempts: 1000, initial_backoff: 10ms, max_backoff: 100ms}
    handler: {type: http, url: %q, timeout: 10s}
log: {level: debug, format: json}
`, addr, topic, topic, down.URL))
	var stderr testkit.Buffer
	start := time.Now()
	run := testkit.StartWith(t, nil, &stderr, "run", "--config", cfg, "--exit-on-idle")
	if code, how := run.WaitHow(t, 3*time.Minute); code != 0 {
		t.Fatalf("turbo run ended with %s\n%s", how, tail(stderr.String(), 4000))
	}
	took := time.Since(start)

	ends := testkit.EndOffsets(t, []string{addr}, topic)
	bad, done := down.counts()
	total, lost, neverMisread, retries := 0, 0, 0, 0
	var examples []string
	for p, end := range ends {
		for o := int64(0); o < end; o++ {
			id := fmt.Sprintf("%d@%d", p, o)
			total++
			retries += bad[id]
			if bad[id] == 0 {
				neverMisread++
			}
			if done[id] == 0 {
				lost++
				if len(examples) < 5 {
					examples = append(examples, id)
				}
			}
		}
	}
	if total != records {
		t.Fatalf("the topic holds %d records, want %d", total, records)
	}
	if neverMisread != 0 {
		t.Errorf("%d records never got the bad 207: the downstream did not exercise it", neverMisread)
	}
	if lost != 0 {
		t.Errorf("%d of %d records were never answered 200 (e.g. %v): a 207 that is not the document counted them done", lost, records, examples)
	}
	committed := testkit.CommittedOffsets(t, []string{addr}, topic, topic) // the group is named after the topic
	for p, end := range ends {
		if committed[p] != end {
			t.Errorf("partition %d: committed offset %d, want its end %d", p, committed[p], end)
		}
	}
	understood := 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		var ev struct{ Message, Error string }
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Message == "handler failed; retrying" &&
			strings.Contains(ev.Error, "a 207 answer was not understood") && strings.Contains(ev.Error, `unknown key "failures"`) {
			understood++
		}
	}
	if understood == 0 {
		t.Errorf("the log never says the 207 was not understood (unknown key \"failures\"):\n%s", tail(stderr.String(), 2000))
	}
	t.Logf("FIGURES multistatus broker=%s records=%d bad207s=%d (per record: %.1f) retry_log_lines=%d lost=%d took=%s",
		brokerKind(), records, retries, float64(retries)/float64(records), understood, lost, took.Round(time.Millisecond))
}
