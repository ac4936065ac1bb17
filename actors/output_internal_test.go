package actors

import (
	"context"
	"errors"
	"sync"
	"testing"

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
