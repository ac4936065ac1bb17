package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/turbokafka/turbo/config"
)

// Output is a record a handler writes to Kafka for the record it handles
// (Emit). It is written only if the handler call succeeds; the input record
// counts as finished once every output written for it is acknowledged.
type Output struct {
	// Topic is where it goes; "" is the consumer's output.topic.
	Topic   string
	Key     []byte // nil: no key (the producer spreads keyless records)
	Value   []byte // nil: a tombstone
	Headers []Header
}

// size is what an output counts against output.max_bytes: its key, value
// and headers.
func (o *Output) size() int {
	n := len(o.Key) + len(o.Value)
	for _, h := range o.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Errors of Emit. An output that breaks the consumer's output rules fails
// its input record at once (ErrPermanent: on_failure decides what follows),
// even when the handler ignores Emit's error.
var (
	// ErrNoOutput: Emit was called with a context that is not a handler
	// call's of a consumer with outputs (output.topic or output.topics
	// set), or after that call returned, or for a record the call does not
	// handle.
	ErrNoOutput = errors.New("actors: no output here")
	// ErrOutputRejected: the output names a topic outside output.topic and
	// output.topics, or is over output.max_bytes, or the record's outputs
	// are over output.max_per_record.
	ErrOutputRejected = errors.New("actors: output rejected")
	// ErrOutput wraps a failure to write an output (the producer's retries
	// ran out): the tree restarts, and the input record runs again.
	ErrOutput = errors.New("actors: writing an output failed")
)

// Emit writes outputs for rec, the record (or one of the records of a batch)
// that the handler called with ctx is handling. The outputs go out after the
// handler returns, and only if it succeeds for rec (a failed attempt's
// outputs are dropped, a retry emits its own); rec finishes, and its offset
// may be committed, once every one of them is acknowledged by the brokers.
// Under key or partition ordering, the outputs of a key's (or partition's)
// records are written in the records' order, so those of one key that land
// on one output partition keep it.
//
// Emit takes the outputs' byte slices: the handler must not change them
// afterwards. It may be called more than once per record and from the
// handler's own goroutines, while the call runs. An output that breaks the
// consumer's output rules returns an error wrapping ErrOutputRejected and
// ErrPermanent, and fails rec even if the handler returns nil.
func Emit(ctx context.Context, rec *Record, outs ...Output) error {
	call, _ := ctx.Value(emitKey{}).(*emitCall)
	if call == nil {
		return fmt.Errorf("%w: the context is not a handler call's of a consumer with output.topic or output.topics", ErrNoOutput)
	}
	return call.emit(rec, outs)
}

// emitKey is the context key of a handler call's emitCall.
type emitKey struct{}

// outputRules are a consumer's output block, as Emit checks it.
type outputRules struct {
	topic    string
	allowed  []string // output.topics, with topic
	maxPer   int
	maxBytes int
}

// newOutputRules returns the consumer's rules, nil when it has no outputs.
func newOutputRules(c config.Output) *outputRules {
	if !c.Enabled() {
		return nil
	}
	r := &outputRules{topic: c.Topic, maxPer: c.MaxPerRecord, maxBytes: int(c.MaxBytes)}
	if c.Topic != "" {
		r.allowed = append(r.allowed, c.Topic)
	}
	for _, t := range c.Topics {
		if !slices.Contains(r.allowed, t) {
			r.allowed = append(r.allowed, t)
		}
	}
	return r
}

// check fills in an output's topic and judges it against the rules; have is
// how many outputs its record has already.
func (r *outputRules) check(o *Output, have int) error {
	if o.Topic == "" {
		if r.topic == "" {
			return fmt.Errorf("%w: the output names no topic and output.topic is not set (allowed: %v)", ErrOutputRejected, r.allowed)
		}
		o.Topic = r.topic
	}
	if !slices.Contains(r.allowed, o.Topic) {
		return fmt.Errorf("%w: topic %q is not in output.topic or output.topics (allowed: %v)", ErrOutputRejected, o.Topic, r.allowed)
	}
	if n := o.size(); n > r.maxBytes {
		return fmt.Errorf("%w: an output of %d bytes to %s is over output.max_bytes (%d)", ErrOutputRejected, n, o.Topic, r.maxBytes)
	}
	if have >= r.maxPer {
		return fmt.Errorf("%w: more than output.max_per_record (%d) outputs for one record", ErrOutputRejected, r.maxPer)
	}
	return nil
}

// emitCall collects the outputs of one handler call's records. It lives as
// long as the call: closed when the call returns, it takes nothing more.
type emitCall struct {
	rules *outputRules
	mu    sync.Mutex
	recs  []*envelope // the call's records
	open  bool
}

// newEmitCall starts collecting for the records of one call, whose earlier
// attempts' outputs are dropped.
func newEmitCall(rules *outputRules, recs []*envelope) *emitCall {
	for _, rec := range recs {
		rec.outputs, rec.outputErr = nil, nil
	}
	return &emitCall{rules: rules, recs: recs, open: true}
}

func (c *emitCall) emit(rec *Record, outs []Output) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open {
		return fmt.Errorf("%w: Emit after the handler call returned", ErrNoOutput)
	}
	var env *envelope
	for _, e := range c.recs {
		if &e.Record == rec {
			env = e
			break
		}
	}
	if env == nil {
		return fmt.Errorf("%w: the record is not one this handler call handles", ErrNoOutput)
	}
	if env.outputErr != nil {
		return env.outputErr
	}
	for _, o := range outs {
		if err := c.rules.check(&o, len(env.outputs)); err != nil {
			env.outputErr = fmt.Errorf("%w (%w)", err, ErrPermanent)
			env.outputs = nil
			return env.outputErr
		}
		env.outputs = append(env.outputs, o)
	}
	return nil
}

// close ends the call: Emit takes nothing more (a goroutine of the handler
// that outlives the call gets ErrNoOutput).
func (c *emitCall) close() {
	c.mu.Lock()
	c.open = false
	c.mu.Unlock()
}

// settle is a record's outcome once its call closed, given its handler's
// (err): a rejected output fails a record the handler passed, and a failed
// record's outputs are dropped.
func settle(rec *envelope, err error) error {
	if err == nil && rec.outputErr != nil {
		err = rec.outputErr
	}
	if err != nil {
		rec.outputs = nil
	}
	return err
}
