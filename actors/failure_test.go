package actors_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// An endpoint answering 400 for some records, on_failure: dlq: those records
// are not retried and land once each in the dead-letter topic with their
// origin and error; the others are handled once; everything is committed.
func TestDeadLetterTopicForPermanentFailures(t *testing.T) {
	t.Parallel()
	r := newRun(t, 4, 400, 40)
	var calls sync.Map // offset id → count
	var ok atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("Kafka-Partition") + "@" + req.Header.Get("Kafka-Offset")
		v, _ := calls.LoadOrStore(id, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		if off, _ := strconv.Atoi(req.Header.Get("Kafka-Offset")); off%10 == 7 {
			http.Error(w, "bad record", http.StatusBadRequest)
			return
		}
		ok.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	dlq := r.topic + "-dlq"
	c := r.consumer("dlq", func(c *config.Consumer) {
		c.Concurrency = 8
		c.OnFailure = config.OnFailureDLQ
		c.DLQTopic = dlq
		c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}
	})
	h := handlers.NewHTTP(srv.URL, 5*time.Second, 8)
	cons := r.start(c, h)
	r.waitCommitted(c.Group, 60*time.Second)

	end := testkit.EndOffsets(t, r.brokers, r.topic)
	bad := 0
	for _, e := range end {
		for off := int64(0); off < e; off++ {
			if off%10 == 7 {
				bad++
			}
		}
	}
	dead := testkit.ReadTopic(t, r.brokers, dlq, bad, 30*time.Second)
	seen := map[string]bool{}
	for _, m := range dead {
		h := map[string]string{}
		for _, rh := range m.Headers {
			h[string(rh.Key)] = string(rh.Value)
		}
		id := h["turbo-original-partition"] + "@" + h["turbo-original-offset"]
		if seen[id] {
			t.Errorf("record %s dead-lettered twice", id)
		}
		seen[id] = true
		if h["turbo-original-topic"] != r.topic || h["turbo-attempts"] != "1" || h["turbo-error"] == "" {
			t.Errorf("dead letter %s headers %v: want the original topic, 1 attempt (400 is permanent) and the error", id, h)
		}
		if _, err := time.Parse(time.RFC3339Nano, h["turbo-failed-at"]); err != nil {
			t.Errorf("dead letter %s: turbo-failed-at %q: %v", id, h["turbo-failed-at"], err)
		}
		if off, _ := strconv.Atoi(h["turbo-original-offset"]); off%10 != 7 {
			t.Errorf("record %s dead-lettered but its endpoint answered 2xx", id)
		}
	}
	calls.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 1 {
			t.Errorf("record %v posted %d times, want once", k, n)
		}
		return true
	})
	if got, want := int(ok.Load()), 400-bad; got != want {
		t.Errorf("%d records answered 2xx, want %d", got, want)
	}
	if s := cons.Stats(); s.Dead != int64(bad) || s.Restarts != 0 {
		t.Errorf("stats %+v: want %d dead letters and no restart", s, bad)
	}
	t.Logf("FIGURES dlq: 400 records, %d answered 2xx once each, %d dead-lettered once each, all committed", ok.Load(), len(seen))
}
