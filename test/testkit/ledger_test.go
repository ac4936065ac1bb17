package testkit

import (
	"context"
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
