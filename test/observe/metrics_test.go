package observe

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// ledger is the http endpoint records are posted to: it counts each record
// it answered, and holds one record (blockPartition@blockOffset) until
// released.
type ledger struct {
	mu       sync.Mutex
	answered map[string]int
	blocked  chan struct{} // closed when the held record arrives
	release  chan struct{}
	once     sync.Once
}

const blockPartition, blockOffset = "2", "10"

func newLedger() *ledger {
	return &ledger{answered: map[string]int{}, blocked: make(chan struct{}), release: make(chan struct{})}
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, off := r.Header.Get("Kafka-Partition"), r.Header.Get("Kafka-Offset")
	if p == blockPartition && off == blockOffset {
		l.once.Do(func() { close(l.blocked) })
		select {
		case <-l.release:
		case <-r.Context().Done():
			return
		}
	}
	l.mu.Lock()
	l.answered[p+"@"+off]++
	l.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// counts returns the records answered (distinct) and the answers (all).
func (l *ledger) counts() (distinct, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.answered {
		distinct++
		total += n
	}
	return distinct, total
}

// Done means 1: a real `turbo run` on the embedded broker, scraped mid-run:
// the counters match the ledger, a blocked record shows as a growing
// oldest-unfinished age on its partition alone, every partition's lag
// reaches 0 at the end, and the exposition passes promtool.
func TestMetricsOfARunMatchTheLedger(t *testing.T) {
	const records = 2000
	l := newLedger()
	srv := httptest.NewServer(l)
	defer srv.Close()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [embedded]
  embedded: {partitions: 4, seed: {topic: obs, records: %d, keys: 200}}
consumers:
  - name: obs
    topics: [obs]
    concurrency: 16
    commit_interval: 200ms
    handler: {type: http, url: %q, timeout: 2m}
http: {listen: "127.0.0.1:0"}
shutdown_timeout: 10s
log: {level: info, format: json}
`, records, srv.URL))
	run, listen := testkit.StartHTTP(t, nil, nil, "run", "--config", cfg)
	base := "http://" + listen

	select {
	case <-l.blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("the record to hold (partition 2, offset 10) never reached the endpoint")
	}
	part := func(p string) map[string]string {
		return map[string]string{"consumer": "obs", "topic": "obs", "partition": p}
	}
	// Everything but the held record's key finishes; its partition alone has
	// an unfinished record, and its age grows.
	var mid scrape.Metrics
	// Partition 2's other keys go on meanwhile: the wait also lets them
	// finish (under a loaded machine's scheduling they trailed the others by
	// seconds, and 15 of them were still in handlers at the scrape).
	testkit.Eventually(t, 60*time.Second, "every partition but 2 to finish, 2's oldest unfinished record to be 1 s old and the held one alone to run", func() bool {
		mid = scrapeMetrics(t, base)
		if n, ok := mid.Value("turbo_partition_in_flight_records", part("2")); !ok || n != 1 {
			return false
		}
		if processed, ok := mid.Value("turbo_records_processed_total", map[string]string{"consumer": "obs"}); !ok {
			return false
		} else if _, total := l.counts(); processed < float64(total-16) {
			return false
		}
		for _, p := range []string{"0", "1", "3"} {
			if age, ok := mid.Value("turbo_partition_oldest_unfinished_age_seconds", part(p)); !ok || age != 0 {
				return false
			}
			if lag, ok := mid.Value("turbo_partition_lag", part(p)); !ok || lag != 0 {
				return false
			}
		}
		age, _ := mid.Value("turbo_partition_oldest_unfinished_age_seconds", part("2"))
		return age >= 1
	})
	age1 := mid.Must(t, "turbo_partition_oldest_unfinished_age_seconds", part("2"))
	processedMid := mid.Must(t, "turbo_records_processed_total", map[string]string{"consumer": "obs"})
	distinct, total := l.counts()
	// The endpoint answers before the handler returns: the counter may lag
	// the ledger by the records between the two, never lead it.
	if processedMid > float64(total) || processedMid < float64(total-16) {
		t.Errorf("mid-run: turbo_records_processed_total = %v, the ledger answered %d records (%d distinct)", processedMid, total, distinct)
	}
	if lag := mid.Must(t, "turbo_partition_lag", part("2")); lag == 0 {
		t.Errorf("partition 2 shows lag 0 while its record %s is held: the commit cannot pass it", blockOffset)
	}
	if inFlight := mid.Must(t, "turbo_partition_in_flight_records", part("2")); inFlight != 1 {
		t.Errorf("partition 2 has %v records in flight, want the held one", inFlight)
	}
	lint(t, mid.Raw)
	// The age is a clock: it keeps growing while the record is held.
	var age2 float64
	grew := time.Now()
	testkit.Eventually(t, 10*time.Second, "partition 2's oldest unfinished age to grow by 1 s", func() bool {
		age2 = scrapeMetrics(t, base).Must(t, "turbo_partition_oldest_unfinished_age_seconds", part("2"))
		return age2 >= age1+1
	})
	if took := time.Since(grew); took > 3*time.Second {
		t.Errorf("partition 2's age took %s to grow by 1 s", took)
	}
	t.Logf("FIGURES mid-run: processed %v, ledger %d; partition 2 oldest unfinished %.2f s then %.2f s; partitions 0, 1, 3 at 0",
		processedMid, total, age1, age2)

	close(l.release)
	var end scrape.Metrics
	testkit.Eventually(t, 60*time.Second, "every record processed and every partition's lag at 0", func() bool {
		end = scrapeMetrics(t, base)
		if v, _ := end.Value("turbo_records_processed_total", nil); v != records {
			return false
		}
		for _, p := range []string{"0", "1", "2", "3"} {
			if lag, ok := end.Value("turbo_partition_lag", part(p)); !ok || lag != 0 {
				return false
			}
		}
		return true
	})
	distinct, total = l.counts()
	if distinct != records || total != records {
		t.Errorf("the ledger answered %d records (%d distinct), want %d once each", total, distinct, records)
	}
	for _, p := range []string{"0", "1", "2", "3"} {
		if age := end.Must(t, "turbo_partition_oldest_unfinished_age_seconds", part(p)); age != 0 {
			t.Errorf("partition %s: oldest unfinished age %v at the end, want 0", p, age)
		}
		c, h := end.Must(t, "turbo_partition_committed_offset", part(p)), end.Must(t, "turbo_partition_high_watermark", part(p))
		if c != h || c <= 0 {
			t.Errorf("partition %s: committed %v, high watermark %v: want committed at the end", p, c, h)
		}
	}
	obs := map[string]string{"consumer": "obs"}
	for name, want := range map[string]float64{
		"turbo_handler_duration_seconds": records, "turbo_buffer_wait_seconds": records, "turbo_records_fetched_total": records,
		"turbo_committed_records_total": records, "turbo_handler_failures_total": 0, "turbo_tree_restarts_total": 0,
		"turbo_assigned_partitions": 4, "turbo_consumer_ready": 1,
	} {
		if got := end.Must(t, name, obs); got != want {
			t.Errorf("%s = %v at the end, want %v", name, got, want)
		}
	}
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := end.Value(family, nil); !ok {
			t.Errorf("no %s: the Go and process collectors are missing", family)
		}
	}
	lint(t, end.Raw)
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("turbo run exited %d after SIGTERM, want 0", code)
	}
}
