package testkit

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// produced registers n records of key and acknowledges them at offsets
// 0, 1, … of partition 0, as the producer would.
func produced(l *Ledger, key string, n int) []*lrecord {
	return producedOn(l, key, 0, n)
}

// producedOn is produced on another partition of topic "t".
func producedOn(l *Ledger, key string, partition int32, n int) []*lrecord {
	var out []*lrecord
	for i := range n {
		r := l.newRecord("t", key)
		l.ack(r, partition, int64(i))
		out = append(out, r)
	}
	return out
}

// deliver runs one whole delivery of r.
func deliver(l *Ledger, r *lrecord, finished bool) {
	l.Begin(r.value(), "m").End(finished)
}

func TestLedgerProducedCleanRunHasNoVerdict(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	a, b := produced(l, "k0", 3), producedOn(l, "k1", 1, 2)
	// Keys interleave freely; each key in order, one at a time; members
	// m1 and m2 hold different partitions.
	da := l.Begin(a[0].value(), "m1")
	db := l.Begin(b[0].value(), "m2")
	da.End(true)
	db.End(true)
	deliver(l, a[1], true)
	deliver(l, b[1], true)
	deliver(l, a[2], true)
	rep := l.Report()
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rep.Produced != 5 || rep.Finished != 5 || rep.Duplicates != 0 || rep.ByLabel["m1"] != 1 || rep.ByLabel["m"] != 3 {
		t.Fatalf("report %+v", rep)
	}
}

func TestLedgerProducedRedeliveryAfterAHandoverIsADuplicateNotAViolation(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	r := produced(l, "k0", 3)
	deliver(l, r[0], true)
	deliver(l, r[1], true)
	// The new owner starts again from an older committed offset.
	deliver(l, r[0], true)
	deliver(l, r[1], true)
	deliver(l, r[2], true)
	rep := l.Report()
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rep.Duplicates != 2 || rep.DuplicatePct < 66 || rep.DuplicatePct > 67 {
		t.Fatalf("duplicates %d (%.2f%%), want 2 (66.67%%)", rep.Duplicates, rep.DuplicatePct)
	}
}

func TestLedgerProducedCatchesAKeyThatSkipsAhead(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	r := produced(l, "k0", 3)
	deliver(l, r[1], true) // seq 0 never finished before
	deliver(l, r[0], true)
	deliver(l, r[2], true)
	rep := l.Report()
	if rep.OrderViolations != 1 || rep.Overlaps != 0 || rep.Lost != 0 {
		t.Fatalf("report %+v, want exactly one order violation", rep)
	}
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "k0 seq 1") {
		t.Fatalf("Err() = %v, want it to name k0 seq 1", err)
	}
}

func TestLedgerProducedAFailedAttemptIsNotFinished(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	r := produced(l, "k0", 2)
	deliver(l, r[0], false) // e.g. its caller was killed
	deliver(l, r[1], true)  // skipped ahead of it
	rep := l.Report()
	if rep.OrderViolations != 1 || rep.Lost != 1 || rep.FailedAttempts != 1 {
		t.Fatalf("report %+v, want 1 order violation, 1 lost, 1 failed attempt", rep)
	}
}

func TestLedgerProducedCatchesOverlaps(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	r := produced(l, "k0", 2)
	first := l.Begin(r[0].value(), "m1")
	again := l.Begin(r[0].value(), "m2") // the same record on two members at once
	again.End(true)
	first.End(true)
	d0 := l.Begin(r[1].value(), "m1")
	other := l.Begin([]byte("k0:x:unknown"), "m2") // an unknown value of the same key
	other.End(true)
	d0.End(true)
	rep := l.Report()
	// The record on two members at once is also two owners of partition 0;
	// the unknown value is not judged for ownership.
	if rep.Overlaps != 1 || rep.OwnershipOverlaps != 1 || rep.Duplicates != 1 || rep.Unknown != 1 || rep.OrderViolations != 0 {
		t.Fatalf("report %+v, want 1 overlap, 1 ownership overlap, 1 duplicate, 1 unknown, no order violation", rep)
	}
}

func TestLedgerProducedIgnoresRecordsNeverProduced(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	r0 := l.newRecord("t", "k0")
	l.giveUp(r0) // the broker never took it
	r := produced(l, "k0", 1)[0]
	deliver(l, r, true)
	if err := l.Report().Err(); err != nil {
		t.Fatal(err)
	}
	// A record not yet answered when a later one starts is judged once its
	// fate is known: acknowledged makes it a violation.
	l2 := NewLedgerWith(LedgerOptions{})
	p0, p1 := l2.newRecord("t", "k0"), l2.newRecord("t", "k0")
	l2.ack(p1, 0, 1)
	deliver(l2, p1, true)
	l2.ack(p0, 0, 0)
	if rep := l2.Report(); rep.OrderViolations != 1 || rep.ProduceDisorder != 0 || rep.Lost != 1 {
		t.Fatalf("report %+v, want the later-acknowledged seq 0 to make an order violation and be lost", rep)
	}
}

func TestLedgerProducedCatchesAProducerThatReorders(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	a, b := l.newRecord("t", "k0"), l.newRecord("t", "k0")
	l.ack(a, 3, 10)
	l.ack(b, 3, 9)
	if rep := l.Report(); rep.ProduceDisorder != 1 || rep.Err() == nil {
		t.Fatalf("report %+v, want 1 produce disorder", rep)
	}
}

// post sends a record to the endpoint as turbo's http handler does.
func post(ctx context.Context, url string, r *lrecord) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(r.value())))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Kafka-Key", base64.StdEncoding.EncodeToString([]byte(r.key)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestLedgerProducedEndpoint(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{Work: time.Hour, FailFirst: 1})
	srv := httptest.NewServer(l)
	defer srv.Close()
	r := produced(l, "k0", 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Every first delivery fails (FailFirst 1), at once.
	if code, err := post(ctx, srv.URL+"/m1", r); err != nil || code != http.StatusInternalServerError {
		t.Fatalf("first delivery: %d %v, want 500", code, err)
	}
	// The second works for an hour: the caller goes away meanwhile.
	gone, leave := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := post(gone, srv.URL+"/m1", r)
		errc <- err
	}()
	if err := l.Await(ctx, "the second delivery running", func(p Progress) bool { return p.Running["m1"] == 1 }); err != nil {
		t.Fatal(err)
	}
	leave()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled delivery succeeded")
	}
	if err := l.Await(ctx, "the cancelled delivery ended", func(p Progress) bool { return p.Running["m1"] == 0 }); err != nil {
		t.Fatal(err)
	}
	rep := l.Report()
	if rep.Lost != 1 || rep.Injected != 1 || rep.FailedAttempts != 2 || rep.Deliveries != 2 {
		t.Fatalf("report %+v, want the record lost after 2 failed deliveries (1 injected)", rep)
	}

}

func TestLedgerProducedEndpointAnswers(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{Work: time.Millisecond})
	srv := httptest.NewServer(l)
	defer srv.Close()
	r := produced(l, "k0", 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// An answered delivery finishes; a mismatched key is not judged.
	if code, err := post(ctx, srv.URL+"/m2", r); err != nil || code != http.StatusNoContent {
		t.Fatalf("delivery: %d %v, want 204", code, err)
	}
	if err := l.AwaitAllFinished(ctx); err != nil {
		t.Fatal(err)
	}
	bad := *r
	bad.key = "k9"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/m2", strings.NewReader(string(r.value())))
	req.Header.Set("Kafka-Key", base64.StdEncoding.EncodeToString([]byte(bad.key)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rep := l.Report(); rep.Lost != 0 || rep.Finished != 1 || rep.ByLabel["m2"] != 1 || rep.Unknown != 1 {
		t.Fatalf("report %+v, want the record finished once by m2 and one unknown delivery", rep)
	}
}

func TestLedgerProducedAwaitSaysWhatItWaitedFor(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	produced(l, "k0", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := l.AwaitAllFinished(ctx)
	if err == nil || !strings.Contains(err.Error(), "every produced record to finish") || !strings.Contains(err.Error(), "produced 1, finished 0") {
		t.Fatalf("AwaitAllFinished = %v", err)
	}
}

func TestProducerKnowsWhatItProduced(t *testing.T) {
	topic := TopicName("ledger")
	brokers := Broker(t, 4, topic)
	l := NewLedgerWith(LedgerOptions{})
	p := l.Produce(t, brokers, topic, ProducerOptions{Keys: 7, Count: 500, Seed: 1})
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatalf("500 records not acknowledged within a minute: %+v", l.Progress())
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	rep := l.Report()
	if rep.Produced != 500 || rep.Sent != 500 || rep.ProduceDisorder != 0 {
		t.Fatalf("report %+v, want 500 produced in order", rep)
	}
	// What the broker holds is exactly what the ledger knows.
	for _, m := range ReadTopic(t, brokers, topic, 500, time.Minute) {
		parts := strings.SplitN(string(m.Value), ":", 3)
		r := l.produced[parts[2]]
		if r == nil || r.key != string(m.Key) || r.partition != m.Partition || r.offset != m.Offset {
			t.Fatalf("record %s at %d@%d is not what the ledger knows (%+v)", m.Value, m.Partition, m.Offset, r)
		}
	}
	// A rate-limited producer runs until Stop.
	l2 := NewLedgerWith(LedgerOptions{})
	p2 := l2.Produce(t, brokers, topic, ProducerOptions{Rate: 500})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l2.Await(ctx, "50 records acknowledged", func(p Progress) bool { return p.Produced >= 50 }); err != nil {
		t.Fatal(err)
	}
	if err := p2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := l2.Report(); rep.Sent != rep.Produced+rep.NotProduced || rep.Produced < 50 {
		t.Fatalf("after Stop: %+v, want every record sent answered", rep)
	}
}

// Two members handling different keys of one partition at once is the
// failure the key verdicts cannot see: a member went on with a partition the
// broker had given to another.
func TestLedgerProducedCatchesTwoOwnersOfAPartition(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	a, b := produced(l, "k0", 1), produced(l, "k1", 1) // both on partition 0
	old := l.Begin(a[0].value(), "node-1")
	l.Begin(b[0].value(), "node-0").End(true)
	old.End(true)
	rep := l.Report()
	if rep.OwnershipOverlaps != 1 || rep.Overlaps != 0 {
		t.Fatalf("report %+v, want 1 ownership overlap and no key overlap", rep)
	}
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "ownership overlaps") {
		t.Fatalf("Err() = %v, want it to name the ownership overlap", err)
	}
}

// A correct handover: the old owner's last record of the partition ended
// before the new owner's first began — no verdict, however close in time.
func TestLedgerProducedCleanHandoverIsNoOwnershipOverlap(t *testing.T) {
	l := NewLedgerWith(LedgerOptions{})
	r := append(produced(l, "k0", 2), produced(l, "k2", 2)...) // partition 0: k0 0–1, k2 0–1
	r[1], r[2] = r[2], r[1]
	other := producedOn(l, "k1", 1, 1)
	deliver0 := l.Begin(r[0].value(), "node-1")
	deliver1 := l.Begin(r[1].value(), "node-1") // one member, two keys at once: fine
	keep := l.Begin(other[0].value(), "node-0") // the new owner busy elsewhere
	deliver0.End(true)
	deliver1.End(true)
	// node-1 released partition 0; node-0 takes it over, and node-1 may run
	// other partitions meanwhile.
	l.Begin(r[2].value(), "node-0").End(true)
	keep.End(true)
	l.Begin(r[3].value(), "node-0").End(true)
	if rep := l.Report(); rep.OwnershipOverlaps != 0 || rep.Err() != nil {
		t.Fatalf("report %+v (%v), want no verdict", rep, rep.Err())
	}
}

func TestOwnershipJudge(t *testing.T) {
	j := NewOwnershipJudge()
	endA := j.Begin("t/0", "a")
	endA2 := j.Begin("t/0", "a")
	j.Begin("t/1", "b")() // another partition: fine
	endA()
	endA() // idempotent
	if n, _ := j.Overlaps(); n != 0 {
		t.Fatalf("%d overlaps before b touched t/0", n)
	}
	endB := j.Begin("t/0", "b") // a still runs one record of t/0
	endA2()
	endB()
	j.Begin("t/0", "a")() // after b ended: a clean handover back
	n, ex := j.Overlaps()
	if n != 1 || len(ex) != 1 || !strings.Contains(ex[0], "b began a record of partition t/0 while a (1 running)") {
		t.Fatalf("overlaps %d %q, want exactly b's start while a ran", n, ex)
	}
}
