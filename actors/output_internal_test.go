package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/actors/watermark"
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

// A commit before the claim has read what an earlier owner finished still
// records it (a revocation soon after the claim began used to commit the
// watermark with only what this claim had read, and the next owner ran
// those records again: exactly once, their outputs were written twice); a
// finished range at the watermark moves the commit past it.
func TestCommitPointKeepsWhatAnEarlierOwnerFinished(t *testing.T) {
	for _, c := range []struct {
		name      string
		inherited []offsetmeta.Range
		tracked   []int64 // offsets read, in order
		done      []int64
		wantOff   int64
		want      []offsetmeta.Range
	}{
		{"nothing read beyond the watermark", []offsetmeta.Range{{From: 74, To: 99}}, []int64{72, 73}, []int64{72}, 73, []offsetmeta.Range{{From: 74, To: 99}}},
		{"some of it read", []offsetmeta.Range{{From: 74, To: 99}}, []int64{72, 73, 74, 75}, []int64{72, 74, 75}, 73, []offsetmeta.Range{{From: 74, To: 99}}},
		{"the claim's own finished records beside it", []offsetmeta.Range{{From: 80, To: 89}}, []int64{72, 73, 74, 75}, []int64{72, 75}, 73, []offsetmeta.Range{{From: 75, To: 75}, {From: 80, To: 89}}},
		{"finished at the watermark", []offsetmeta.Range{{From: 73, To: 79}, {From: 90, To: 95}}, []int64{72}, []int64{72}, 80, []offsetmeta.Range{{From: 90, To: 95}}},
		{"passed already", []offsetmeta.Range{{From: 74, To: 79}}, []int64{72, 73, 74, 75, 76, 77, 78, 79, 80, 81}, []int64{72, 73, 74, 75, 76, 77, 78, 79, 81}, 80, []offsetmeta.Range{{From: 81, To: 81}}},
		{"no earlier owner", nil, []int64{5, 6, 7}, []int64{5, 7}, 6, []offsetmeta.Range{{From: 7, To: 7}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &partitionWatermark{tracker: watermark.New(), inherited: slices.Clone(c.inherited)}
			for _, off := range c.tracked {
				if err := p.tracker.Track(off); err != nil {
					t.Fatal(err)
				}
			}
			for _, off := range c.done {
				if err := p.tracker.Done(off); err != nil {
					t.Fatal(err)
				}
			}
			off, got, ok := p.commitPoint()
			if !ok || off != c.wantOff || !slices.Equal(got, c.want) {
				t.Fatalf("commit point %d %v (ok %t); want %d %v", off, got, ok, c.wantOff, c.want)
			}
			oc := &offsetController{metaBudget: 4096, stats: &consumerStats{}, log: zerolog.Nop()}
			meta, recorded := oc.metadata(TopicPartition{Topic: "t"}, p, off, got)
			decoded, err := offsetmeta.Decode(off, meta)
			if len(c.want) > 0 && (err != nil || !slices.Equal(decoded, c.want) || !slices.Equal(recorded, c.want)) {
				t.Fatalf("metadata %q decodes to %v (%v), recorded %v; want %v", meta, decoded, err, recorded, c.want)
			}
			// Again: the commit point never goes back.
			if off2, got2, _ := p.commitPoint(); off2 != off || !slices.Equal(got2, got) {
				t.Fatalf("second commit point %d %v; want %d %v", off2, got2, off, got)
			}
		})
	}
}
