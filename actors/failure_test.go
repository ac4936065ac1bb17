package actors_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// attempts counts handler calls per record.
type attempts struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *attempts) add(rec *actors.Record) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	id := fmt.Sprintf("%s@%d", rec.TP(), rec.Offset)
	a.n[id]++
	return a.n[id]
}

func (a *attempts) of(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[id]
}

// A record that fails twice and then succeeds is handled exactly three times;
// its key's later records wait for it; the other keys do not.
func TestRetryKeepsKeyOrderAndOtherKeysFlow(t *testing.T) {
	r := newRun(t, 1, 200, 10) // one partition: offsets tell the order
	var tries attempts
	ledger := testkit.NewLedger(0)
	var target string
	var targetKey []byte
	var mu sync.Mutex
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		n := tries.add(rec)
		if rec.Offset == 20 { // key-0's third record
			mu.Lock()
			target, targetKey = fmt.Sprintf("%s@%d", rec.TP(), rec.Offset), rec.Key
			mu.Unlock()
			if n <= 2 {
				return fmt.Errorf("transient failure %d", n)
			}
		}
		return ledger.Handle(ctx, rec)
	})
	c := r.consumer("retry", func(c *config.Consumer) {
		c.Concurrency = 4
		c.Retry = config.Retry{MaxAttempts: 5, InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second}
	})
	cons := r.start(c, h)
	testkit.Eventually(t, 60*time.Second, "all 200 records handled", func() bool { return ledger.Report().Distinct >= 200 })
	r.waitCommitted(c.Group, 20*time.Second)
	if n := tries.of(target); n != 3 {
		t.Errorf("the failing record was attempted %d times, want 3", n)
	}
	checkClean(t, ledger.Report(), 200) // includes: no record of key-0 started before offset 20 succeeded
	s := cons.Stats()
	if s.Retries != 2 || s.Failed != 2 || s.Restarts != 0 {
		t.Errorf("stats %+v: want 2 retries, 2 failed attempts, no restart", s)
	}
	if targetKey == nil {
		t.Error("the failing record was never seen")
	}
}

// An endpoint answering 400 for some records, on_failure: dlq: those records
// are not retried and land once each in the dead-letter topic with their
// origin and error; the others are handled once; everything is committed.
func TestDeadLetterTopicForPermanentFailures(t *testing.T) {
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
}

// on_failure: skip gives up on a record after its attempts and carries on.
func TestSkipAfterAttempts(t *testing.T) {
	r := newRun(t, 2, 100, 10)
	var tries attempts
	ledger := testkit.NewLedger(0)
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		tries.add(rec)
		if rec.Offset == 5 {
			return errors.New("always fails")
		}
		return ledger.Handle(ctx, rec)
	})
	c := r.consumer("skip", func(c *config.Consumer) {
		c.OnFailure = config.OnFailureSkip
		c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	})
	cons := r.start(c, h)
	r.waitCommitted(c.Group, 60*time.Second)
	if got := ledger.Report().Distinct; got != 98 {
		t.Errorf("%d records handled, want 98 (two partitions each skip offset 5)", got)
	}
	for p := 0; p < 2; p++ {
		if n := tries.of(fmt.Sprintf("%s/%d@5", r.topic, p)); n != 3 {
			t.Errorf("partition %d offset 5 attempted %d times, want 3", p, n)
		}
	}
	if s := cons.Stats(); s.Skipped != 2 || s.Restarts != 0 {
		t.Errorf("stats %+v: want 2 skipped, no restart", s)
	}
}

// on_failure: fail restarts the tree (with backoff) once the attempts run
// out; the record comes again and succeeds on a later delivery.
func TestFailRestartsTheTreeAfterAttempts(t *testing.T) {
	r := newRun(t, 1, 30, 3)
	var tries attempts
	ledger := testkit.NewLedger(0)
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Offset == 10 && tries.add(rec) <= 3 {
			return errors.New("fails three times")
		}
		return ledger.Handle(ctx, rec)
	})
	c := r.consumer("fail", func(c *config.Consumer) {
		c.OnFailure = config.OnFailureFail
		c.Retry = config.Retry{MaxAttempts: 2, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	})
	cons := r.start(c, h)
	r.waitCommitted(c.Group, 60*time.Second)
	if got := ledger.Report().Distinct; got != 30 {
		t.Errorf("%d records handled, want 30", got)
	}
	// Attempts 1 and 2 fail → restart; redelivered: attempt 3 fails, 4 succeeds.
	if n := tries.of(fmt.Sprintf("%s/0@10", r.topic)); n != 4 {
		t.Errorf("offset 10 attempted %d times, want 4", n)
	}
	if s := cons.Stats(); s.Restarts != 1 {
		t.Errorf("stats %+v: want exactly one restart", s)
	}
}

// max_handler_time cancels an attempt that runs too long; it counts as a
// failed attempt and is retried.
func TestMaxHandlerTimeCancelsAndRetries(t *testing.T) {
	r := newRun(t, 1, 10, 2)
	var tries attempts
	var timedOut atomic.Int64
	ledger := testkit.NewLedger(0)
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Offset == 3 && tries.add(rec) == 1 {
			<-ctx.Done() // hangs until max_handler_time cancels it
			timedOut.Add(1)
			return ctx.Err()
		}
		return ledger.Handle(ctx, rec)
	})
	c := r.consumer("timeout", func(c *config.Consumer) {
		c.MaxHandlerTime = 200 * time.Millisecond
		c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	})
	cons := r.start(c, h)
	r.waitCommitted(c.Group, 30*time.Second)
	checkClean(t, ledger.Report(), 10)
	if timedOut.Load() != 1 {
		t.Errorf("%d attempts were cancelled by max_handler_time, want 1", timedOut.Load())
	}
	if s := cons.Stats(); s.Failed != 1 || s.Retries != 1 || s.Restarts != 0 {
		t.Errorf("stats %+v: want 1 failed attempt, 1 retry, no restart", s)
	}
}

// A record parked for a retry holds its key even when its partition is
// revoked (here by Stop): the key's later records are dropped with it, not
// run past it.
func TestRevocationDoesNotRunPastAParkedRecord(t *testing.T) {
	r := newRun(t, 1, 20, 2) // key-0 at even offsets, key-1 at odd ones
	var mu sync.Mutex
	var ranKey0 []int64
	failedOnce := false
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if rec.Offset == 0 && !failedOnce {
			failedOnce = true
			return errors.New("transient")
		}
		if string(rec.Key) == "key-0" {
			ranKey0 = append(ranKey0, rec.Offset)
		}
		return nil
	})
	c := r.consumer("parked", func(c *config.Consumer) {
		c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 20 * time.Second, MaxBackoff: 20 * time.Second}
	})
	cons := r.start(c, h)
	testkit.Eventually(t, 30*time.Second, "key-1's 10 records", func() bool { return cons.Stats().Processed >= 10 })
	stop(t, cons)
	mu.Lock()
	defer mu.Unlock()
	if len(ranKey0) > 0 {
		t.Errorf("key-0 records %v ran while offset 0 waited for its retry", ranKey0)
	}
	if off, _ := testkit.CommittedMetadata(t, r.brokers, c.Group, r.topic, 0); off > 0 {
		t.Errorf("committed offset %d passes the record still waiting for its retry", off)
	}
}

// A record that fails for good (on_failure: fail) holds its key until the
// restart: nothing after it runs before it comes again.
func TestEscalatedFailureHoldsItsKeyUntilTheRestart(t *testing.T) {
	r := newRun(t, 1, 100, 1) // a single key
	var mu sync.Mutex
	var after []int64 // offsets run after the failure
	failed := false
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if rec.Offset == 5 && !failed {
			failed = true
			return errors.New("boom")
		}
		if failed {
			after = append(after, rec.Offset)
		}
		return nil
	})
	c := r.consumer("escalate", func(c *config.Consumer) { c.Retry.MaxAttempts = 1 })
	cons := r.start(c, h)
	r.waitCommitted(c.Group, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	// After the restart the key starts again at the committed offset (at
	// most 5); no record above 5 may run before 5 has run again.
	for _, off := range after {
		if off == 5 {
			break
		}
		if off > 5 {
			t.Errorf("offset %d ran before offset 5 came again; run after the failure: %v", off, after[:min(len(after), 12)])
			break
		}
	}
	if s := cons.Stats(); s.Restarts != 1 {
		t.Errorf("stats %+v: want one restart", s)
	}
}
