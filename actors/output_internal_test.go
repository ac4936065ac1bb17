package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/config"
)

func testRules() *outputRules {
	return newOutputRules(config.Output{Topic: "out", Topics: []string{"side", "out"}, MaxPerRecord: 3, MaxBytes: 8})
}

// The rules: the default topic filled in, the allow-list (output.topic
// once), the size of key, value and headers, the count per record.
func TestOutputRules(t *testing.T) {
	r := testRules()
	if len(r.allowed) != 2 {
		t.Errorf("allowed %v: want out and side once each", r.allowed)
	}
	o := Output{Value: []byte("12345678")}
	if err := r.check(&o, 0); err != nil || o.Topic != "out" {
		t.Errorf("an output of 8 bytes with no topic: %v, topic %q; want it taken, to out", err, o.Topic)
	}
	for name, tc := range map[string]struct {
		o    Output
		have int
	}{
		"topic not allowed": {Output{Topic: "other"}, 0},
		"over max_bytes":    {Output{Key: []byte("k"), Value: []byte("12345678")}, 0},
		"header bytes":      {Output{Value: []byte("1234"), Headers: []Header{{Key: "ab", Value: []byte("cde")}}}, 0},
		"one too many":      {Output{}, 3},
	} {
		if err := r.check(&tc.o, tc.have); !errors.Is(err, ErrOutputRejected) {
			t.Errorf("%s: %v, want ErrOutputRejected", name, err)
		}
	}
	none := newOutputRules(config.Output{Topics: []string{"side"}, MaxPerRecord: 1, MaxBytes: 1})
	if err := none.check(&Output{}, 0); !errors.Is(err, ErrOutputRejected) {
		t.Errorf("no topic and no output.topic: %v, want ErrOutputRejected", err)
	}
	if newOutputRules(config.Output{MaxPerRecord: 1, MaxBytes: 1}) != nil {
		t.Errorf("rules without a topic: want nil (no outputs)")
	}
}

// Emit from many goroutines of one call collects every output; a rejected
// one fails the record for good and drops what it had; after the call
// closes, Emit is refused; a failed attempt's outputs are dropped and the
// next attempt starts empty.
func TestEmitCall(t *testing.T) {
	rules := newOutputRules(config.Output{Topic: "out", MaxPerRecord: 100, MaxBytes: 100})
	a, b := &envelope{}, &envelope{}
	call := newEmitCall(rules, []*envelope{a, b})
	ctx := context.WithValue(context.Background(), emitKey{}, call)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := Emit(ctx, &a.Record, Output{Value: []byte("x")}); err != nil {
				t.Errorf("Emit: %v", err)
			}
		})
	}
	wg.Wait()
	if err := Emit(ctx, &(&envelope{}).Record, Output{}); !errors.Is(err, ErrNoOutput) {
		t.Errorf("Emit for a record outside the call: %v, want ErrNoOutput", err)
	}
	if err := Emit(ctx, &b.Record, Output{Value: []byte("ok")}, Output{Topic: "elsewhere"}); !errors.Is(err, ErrPermanent) {
		t.Errorf("Emit to a topic not allowed: %v, want a permanent failure", err)
	}
	if err := Emit(ctx, &b.Record, Output{Value: []byte("later")}); !errors.Is(err, ErrOutputRejected) {
		t.Errorf("Emit after a rejection: %v, want the rejection again", err)
	}
	call.close()
	if err := Emit(ctx, &a.Record, Output{}); !errors.Is(err, ErrNoOutput) {
		t.Errorf("Emit after the call: %v, want ErrNoOutput", err)
	}
	if err := settle(a, nil); err != nil || len(a.outputs) != 50 {
		t.Errorf("record a: %v with %d outputs, want nil and 50", err, len(a.outputs))
	}
	if err := settle(b, nil); !errors.Is(err, ErrOutputRejected) || b.outputs != nil {
		t.Errorf("record b: %v with %d outputs, want the rejection and none", err, len(b.outputs))
	}
	if err := settle(a, errors.New("handler failed")); err == nil || a.outputs != nil {
		t.Errorf("a failed attempt kept %d outputs", len(a.outputs))
	}
	a.outputs = []Output{{}}
	newEmitCall(rules, []*envelope{a})
	if a.outputs != nil || a.outputErr != nil {
		t.Errorf("a new attempt starts with %d outputs and error %v", len(a.outputs), a.outputErr)
	}
}

// Exactly once, a commit passes a pending record's outputs only when the
// next owner would skip the record: below the committed offset, or in a
// range the metadata records. The others wait, in the order they finished.
func TestTakePassedFollowsTheCommit(t *testing.T) {
	t.Parallel()
	rec := func(off int64) *envelope {
		e := &envelope{}
		e.Offset = off
		return e
	}
	p := &partitionWatermark{pending: []*envelope{rec(9), rec(3), rec(12), rec(5), rec(20), rec(14)}}
	recorded := []offsetmeta.Range{{From: 8, To: 9}, {From: 12, To: 12}}
	out := p.takePassed(6, recorded, nil)
	var got, left []int64
	for _, r := range out {
		got = append(got, r.Offset)
	}
	for _, r := range p.pending {
		left = append(left, r.Offset)
	}
	if !slices.Equal(got, []int64{9, 3, 12, 5}) || !slices.Equal(left, []int64{20, 14}) {
		t.Errorf("passed %v and kept %v; want [9 3 12 5] and [20 14]", got, left)
	}
	for _, c := range []struct {
		off  int64
		want bool
	}{{7, false}, {8, true}, {9, true}, {10, false}, {12, true}, {13, false}, {0, false}} {
		if inRanges(recorded, c.off) != c.want {
			t.Errorf("inRanges(%v, %d) = %t", recorded, c.off, !c.want)
		}
	}
}

// Exactly once, a transaction's marks of claims that are no longer this
// member's are left out, and said so.
func TestTxnMarksLive(t *testing.T) {
	t.Parallel()
	s1, s2 := &txnSession{seq: 1}, &txnSession{seq: 2}
	a, b := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	var m txnMarks
	m = m.merge(txnMarks{s1: {a: {epoch: 1, offset: 5}, b: {epoch: 2, offset: 7}}})
	m = m.merge(txnMarks{s1: {a: {epoch: 1, offset: 9}}, s2: {b: {epoch: 3, offset: 8}}})
	if m[s1][a].offset != 9 || m[s1][b].offset != 7 || m[s2][b].offset != 8 {
		t.Fatalf("merged marks %v", m)
	}
	live, stale := m.live(func(epoch uint64) bool { return epoch != 2 })
	if !stale || len(live[s1]) != 1 || live[s1][a].offset != 9 || live[s2][b].offset != 8 {
		t.Errorf("live marks %v (stale %t): want s1's a@9 and s2's b@8, stale", live, stale)
	}
	if _, stale := m.live(func(uint64) bool { return true }); stale {
		t.Errorf("every claim alive, yet stale")
	}
}
