package harness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// fanOut emits offset%3 outputs (0, 1 or 2) for each record, keyed by the
// record's key, their values naming the input and the output's index.
func fanOut(ctx context.Context, rec *actors.Record) error {
	for i := range int(rec.Offset % 3) {
		v := fmt.Sprintf("%s/%d/%d/%d", rec.Topic, rec.Partition, rec.Offset, i)
		if err := actors.Emit(ctx, rec, actors.Output{Key: rec.Key, Value: []byte(v)}); err != nil {
			return err
		}
	}
	return nil
}

// outputSeq is an output's place: its input's partition and offset, and
// its index among the input's outputs.
type outputSeq struct {
	partition, offset, i int64
}

func parseOutput(t *testing.T, v []byte) (topic string, s outputSeq) {
	t.Helper()
	parts := strings.Split(string(v), "/")
	if len(parts) != 4 {
		t.Fatalf("output value %q: want topic/partition/offset/index", v)
	}
	if _, err := fmt.Sscanf(parts[1]+" "+parts[2]+" "+parts[3], "%d %d %d", &s.partition, &s.offset, &s.i); err != nil {
		t.Fatalf("output value %q: %v", v, err)
	}
	return parts[0], s
}

// Every record's outputs are written, once each, and those of a key's
// records in the records' order; the commit passes only records whose
// outputs were written.
func TestOutputsWrittenOnceInKeyOrder(t *testing.T) {
	c := harness.Consumer("fan", "in")
	c.Concurrency = 8
	c.Output.Topic = "out"
	h := harness.New(t, harness.Config{Consumer: c}, actors.HandlerFunc(fanOut))
	const n = 300
	h.Feed(harness.Seq("in", 0, 0, n, 7)...)
	h.Feed(harness.Seq("in", 1, 0, n, 7)...)
	h.Assign("in", 0, 1)
	want := 2 * (n / 3 * (0 + 1 + 2))
	h.AwaitAllCommitted()
	outs := h.Outputs()
	if len(outs) != want {
		t.Fatalf("%d outputs, want %d", len(outs), want)
	}
	seen := map[outputSeq]bool{}
	last := map[string]outputSeq{} // by input partition and key
	for _, o := range outs {
		topic, s := parseOutput(t, o.Value)
		if o.Topic != "out" || topic != "in" {
			t.Fatalf("output %q on topic %s: want topic out, input topic in", o.Value, o.Topic)
		}
		if seen[s] {
			t.Errorf("output %q written twice", o.Value)
		}
		seen[s] = true
		unit := fmt.Sprintf("%d/%s", s.partition, o.Key)
		if prev, ok := last[unit]; ok && (s.offset < prev.offset || s.offset == prev.offset && s.i <= prev.i) {
			t.Errorf("key %s: output %q after %d/%d: out of the records' order", unit, o.Value, prev.offset, prev.i)
		}
		last[unit] = s
	}
	if s := h.Stats(); s.Outputs != int64(want) || s.OutputErrors != 0 {
		t.Errorf("stats: %d outputs, %d errors; want %d, 0", s.Outputs, s.OutputErrors, want)
	}
}

// While outputs cannot be written, the consumer restarts and its commit
// stays below the first record with outputs; once they can, every record's
// outputs are written (at least once) and everything is committed.
func TestOutputFailureHoldsTheCommit(t *testing.T) {
	c := harness.Consumer("held", "in")
	c.Output.Topic = "out"
	h := harness.New(t, harness.Config{Consumer: c}, actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Offset == 5 || rec.Offset == 12 {
			return actors.Emit(ctx, rec, actors.Output{Value: fmt.Appendf(nil, "%d", rec.Offset)})
		}
		return nil
	}))
	h.FailOutputs(errors.New("brokers unreachable"))
	h.Feed(harness.Seq("in", 0, 0, 20, 20)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 5)
	h.Await("two restarts on the failed output", func() bool { return h.Restarts() >= 2 })
	if got := h.Committed("in", 0); got.Offset != 5 {
		t.Fatalf("committed at %d while offset 5's output was never written: want 5", got.Offset)
	}
	if s := h.Stats(); s.OutputErrors == 0 {
		t.Errorf("stats: no output errors counted after %d restarts", h.Restarts())
	}
	h.FailOutputs(nil)
	h.AwaitCommitted("in", 0, 20)
	got := map[string]bool{}
	for _, o := range h.Outputs() {
		got[string(o.Value)] = true
	}
	if !got["5"] || !got["12"] || len(got) != 2 {
		t.Errorf("outputs %v: want those of offsets 5 and 12", got)
	}
}

// An output the rules refuse fails its record at once, even when the
// handler ignores Emit's error: the record is dead-lettered with the reason,
// and none of its outputs is written.
func TestOutputRejectedFailsTheRecord(t *testing.T) {
	c := harness.Consumer("strict", "in")
	c.Output.Topic = "out"
	c.Output.MaxBytes = 16
	c.OnFailure, c.DLQTopic = config.OnFailureDLQ, "dead"
	var mu sync.Mutex
	errs := map[int64]error{}
	h := harness.New(t, harness.Config{Consumer: c}, actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		outs := []actors.Output{{Value: []byte("fine")}}
		switch rec.Offset {
		case 1:
			outs = append(outs, actors.Output{Topic: "elsewhere", Value: []byte("x")})
		case 2:
			outs = append(outs, actors.Output{Value: make([]byte, 17)})
		}
		err := actors.Emit(ctx, rec, outs...)
		mu.Lock()
		errs[rec.Offset] = err
		mu.Unlock()
		return nil // ignored on purpose: the rejection fails the record anyway
	}))
	h.Feed(harness.Seq("in", 0, 0, 4, 4)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 4)
	dead := h.AwaitDeadLetters(2)
	for _, d := range dead {
		offset, _ := d.Header("turbo-original-offset")
		reason, _ := d.Header("turbo-error")
		want := map[string]string{"1": `topic "elsewhere" is not in output.topic`, "2": "over output.max_bytes (16)"}[offset]
		if want == "" || !strings.Contains(reason, want) {
			t.Errorf("dead letter of offset %s: turbo-error %q, want it to say %q", offset, reason, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for off, err := range errs {
		rejected := errors.Is(err, actors.ErrOutputRejected) && errors.Is(err, actors.ErrPermanent)
		if (off == 1 || off == 2) != rejected {
			t.Errorf("offset %d: Emit returned %v", off, err)
		}
	}
	if outs := h.Outputs(); len(outs) != 2 {
		t.Errorf("%d outputs written, want 2 (offsets 0 and 3; a rejected record's are dropped)", len(outs))
	}
}

// Without an output block, Emit says so; the handler decides what follows.
func TestEmitWithoutOutputs(t *testing.T) {
	c := harness.Consumer("plain", "in")
	got := make(chan error, 1)
	h := harness.New(t, harness.Config{Consumer: c}, actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		got <- actors.Emit(ctx, rec, actors.Output{Value: []byte("x")})
		return nil
	}))
	h.Feed(harness.Seq("in", 0, 0, 1, 1)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 1)
	if err := <-got; !errors.Is(err, actors.ErrNoOutput) {
		t.Errorf("Emit without outputs configured: %v, want ErrNoOutput", err)
	}
	if err := actors.Emit(context.Background(), &actors.Record{}); !errors.Is(err, actors.ErrNoOutput) {
		t.Errorf("Emit outside a handler call: %v, want ErrNoOutput", err)
	}
}

// A batch handler emits for each of its records; a record that fails in the
// batch has its outputs dropped, and its retry emits them again.
func TestBatchHandlerEmitsPerRecord(t *testing.T) {
	c := harness.Consumer("batch", "in")
	c.Batch = config.Batch{MaxRecords: 10}
	c.Ordering = config.OrderingUnordered
	c.Output.Topic = "out"
	var mu sync.Mutex
	failed := false
	h := harness.NewBatch(t, harness.Config{Consumer: c}, actors.BatchHandlerFunc(func(ctx context.Context, recs []*actors.Record) actors.BatchResult {
		var res actors.BatchResult
		for i, rec := range recs {
			_ = actors.Emit(ctx, rec, actors.Output{Value: fmt.Appendf(nil, "%d", rec.Offset)})
			mu.Lock()
			if rec.Offset == 7 && !failed {
				failed = true
				res.Failed = map[int]error{i: errors.New("once")}
			}
			mu.Unlock()
		}
		return res
	}))
	h.Feed(harness.Seq("in", 0, 0, 30, 30)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 30)
	count := map[string]int{}
	for _, o := range h.Outputs() {
		count[string(o.Value)]++
	}
	for off := range 30 {
		if n := count[fmt.Sprint(off)]; n != 1 {
			t.Errorf("offset %d: %d outputs, want 1", off, n)
		}
	}
}
