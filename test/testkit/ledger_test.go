package testkit

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/turbokafka/turbo/actors"
)

func TestKeyOrderJudgesAcrossRedeliveries(t *testing.T) {
	type step struct {
		offset int64
		finish bool // the delivery finishes (else it fails or is cancelled)
		ok     bool // the start keeps the order
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{0, true, true}, {1, true, true}, {2, true, true}}},
		{"redelivered from the committed offset", []step{{0, true, true}, {1, true, true}, {2, true, true}, {1, true, true}, {2, true, true}, {3, true, true}}},
		{"a failed record tried again", []step{{0, false, true}, {0, false, true}, {0, true, true}, {1, true, true}}},
		{"a later record while an earlier one is unfinished", []step{{0, true, true}, {1, false, true}, {2, true, false}}},
		{"a first delivery after a later record", []step{{0, true, true}, {2, true, true}, {1, true, false}}},
		{"a cancelled record, then the next owner starts past it", []step{{5, false, true}, {6, true, false}}},
		{"a cancelled record, then the next owner starts with it", []step{{5, false, true}, {5, true, true}, {6, true, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &keyOrder{maxStarted: -1, unfinished: map[int64]bool{}}
			started := map[int64]bool{}
			for i, s := range tc.steps {
				if got := o.start(s.offset, started[s.offset]); got != s.ok {
					t.Fatalf("step %d: start(%d) kept the order = %t, want %t", i, s.offset, got, s.ok)
				}
				started[s.offset] = true
				if s.finish {
					delete(o.unfinished, s.offset)
				}
			}
		})
	}
}

func TestLedgerJudgesOwnershipByMember(t *testing.T) {
	l := NewLedger(0)
	rec := func(p int32, off int64, key string) *actors.Record {
		return &actors.Record{Topic: "t", Partition: p, Offset: off, Key: []byte(key)}
	}
	block := make(chan struct{})
	started := make(chan struct{})
	l.Fail = func(r *actors.Record) error {
		if r.Offset == 0 && r.Partition == 0 {
			close(started)
			<-block
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- l.HandleAs(context.Background(), rec(0, 0, "a"), "m1") }()
	<-started
	if err := l.HandleAs(context.Background(), rec(1, 0, "b"), "m2"); err != nil { // another partition
		t.Fatal(err)
	}
	if err := l.HandleAs(context.Background(), rec(0, 1, "c"), "m2"); err != nil { // m1 still runs partition 0
		t.Fatal(err)
	}
	close(block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.HandleAs(context.Background(), rec(0, 2, "d"), "m2"); err != nil { // after m1 ended: a clean handover
		t.Fatal(err)
	}
	if rep := l.Report(); rep.OwnershipOverlaps != 1 || rep.Overlaps != 0 || len(rep.OwnershipExamples) != 1 {
		t.Fatalf("report %+v, want exactly one ownership overlap", rep)
	}
}

// One ledger, two identities: its own records are known by their value
// wherever they are delivered (in the process or over HTTP), any other by
// offset; and a ledger that produces counts what it did not produce.
func TestLedgerJudgesProducedAndOffsetRecordsAlike(t *testing.T) {
	l := NewLedger(0)
	ctx := context.Background()
	// By offset: order and overlap by key, duplicates by offset.
	for _, off := range []int64{0, 1, 1} {
		if err := l.Handle(ctx, &actors.Record{Topic: "t", Partition: 2, Offset: off, Key: []byte("a")}); err != nil {
			t.Fatal(err)
		}
	}
	if rep := l.Report(); rep.Distinct != 2 || rep.Total != 3 || rep.Duplicates != 1 || rep.Unknown != 0 || rep.Err() != nil {
		t.Fatalf("by offset: report %+v (%v), want 2 distinct, 1 duplicate, no verdict", rep, rep.Err())
	}
	if h := l.Handled(); h["t/2@0"] != 1 || h["t/2@1"] != 2 {
		t.Fatalf("Handled() = %v", h)
	}

	// Produced: the value names the record, in the process as over HTTP.
	r := producedOn(l, "k0", 3, 2)
	if err := l.Handle(ctx, &actors.Record{Topic: "t", Partition: 3, Offset: 0, Key: []byte("k0"), Value: r[0].value()}); err != nil {
		t.Fatal(err)
	}
	url := l.Endpoint(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/m1", strings.NewReader(string(r[1].value())))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Kafka-Key", base64.StdEncoding.EncodeToString([]byte("k0")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delivery over HTTP answered %d, want 204", resp.StatusCode)
	}
	rep := l.Report()
	if rep.Produced != 2 || rep.Finished != 2 || rep.Lost != 0 || rep.Distinct != 4 || rep.ByLabel["m1"] != 1 || rep.Err() != nil {
		t.Fatalf("produced: report %+v (%v), want both produced records finished, no verdict", rep, rep.Err())
	}
	if h := l.Handled(); h["t/3@0"] != 1 || h["t/3@1"] != 1 {
		t.Fatalf("Handled() = %v, want the produced records by offset too", h)
	}

	// A producing ledger is given a record it did not produce.
	if err := l.Handle(ctx, &actors.Record{Topic: "t", Partition: 2, Offset: 7, Key: []byte("a"), Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if rep := l.Report(); rep.Unknown != 1 || rep.Err() == nil {
		t.Fatalf("report %+v, want 1 unknown delivery and a verdict", rep)
	}
}

// Over HTTP, records known by offset are judged as in the process: order
// by the headers' offsets, members by the URL.
func TestLedgerEndpointJudgesRecordsByOffset(t *testing.T) {
	l := NewLedger(0)
	url := l.Endpoint(t)
	post := func(member string, offset int64) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url+"/"+member, strings.NewReader("v"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Kafka-Topic", "t")
		req.Header.Set("Kafka-Partition", "0")
		req.Header.Set("Kafka-Offset", strconv.FormatInt(offset, 10))
		req.Header.Set("Kafka-Key", base64.StdEncoding.EncodeToString([]byte("a")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("offset %d answered %d, want 204", offset, resp.StatusCode)
		}
	}
	post("m1", 0)
	post("m1", 2)
	post("m2", 1) // a first delivery after a later record of its key
	rep := l.Report()
	if rep.OrderViolations != 1 || rep.Distinct != 3 || rep.Members != 2 || rep.OwnershipOverlaps != 0 {
		t.Fatalf("report %+v, want 1 order violation among 3 records of 2 members", rep)
	}
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "order violations") {
		t.Fatalf("Err() = %v, want it to name the order violation", err)
	}
}
