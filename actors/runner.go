package actors

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// runner runs the user's handler, one record at a time. It runs the handler
// inside Receive on purpose: a runner has nothing else to do while a record
// runs, and the coordinator never sends it more than it asked for. Its context
// belongs to the tree's generation, so tearing the tree down cancels every
// running handler.
type runner struct {
	id      int
	ctx     context.Context
	handler Handler       // the user's, traced (tracer)
	maxTime time.Duration // max_handler_time; 0 = unlimited
	outputs *outputRules  // nil: the consumer has no outputs (Emit fails)
	since   *atomic.Int64 // when the current handler call began (unix ns), 0 when idle: see Stats
	held    *atomic.Bool  // the consumer is paused: claim nothing more (the coordinator takes the rest back)
	// Batch mode (batch): handler calls of up to maxRecords records and
	// maxBytes of keys, values and headers (0: no bound); call, recs and errs are
	// reused from call to call.
	batch      BatchHandler
	maxRecords int
	maxBytes   int64
	call       []*envelope
	recs       []*Record
	errs       []error
	// The duration histograms, nil when off (Options.Metrics).
	handlerTime, waitTime prometheus.Observer
	// Under max_handler_time, the call running and its context's cancel,
	// for Skip (cancelCall); nil when none runs.
	callMu     sync.Mutex
	calling    *envelope
	callCancel context.CancelFunc
}

// cancelCall cancels the handler call of rec if it is the one this runner
// runs now (under max_handler_time: only then has a call a context of its
// own), and reports whether it did.
func (r *runner) cancelCall(rec *envelope) bool {
	r.callMu.Lock()
	defer r.callMu.Unlock()
	if r.calling != rec || r.callCancel == nil {
		return false
	}
	r.callCancel()
	return true
}

// calls notes the call running (rec and its cancel) or its end (nil).
func (r *runner) calls(rec *envelope, cancel context.CancelFunc) {
	r.callMu.Lock()
	r.calling, r.callCancel = rec, cancel
	r.callMu.Unlock()
}

func (r *runner) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *runRecords:
		if r.batch != nil {
			c.Send(c.Parent(), r.runCalls(m.batch))
			return
		}
		c.Send(c.Parent(), r.run(m.batch))
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		unexpected(c)
	}
}

func (r *runner) run(b *runBatch) *ranRecords {
	// The clock is read when the run begins and when it ends. Between calls
	// it is read only when each call's duration is measured (metrics on): a
	// record's end is then the next one's start. Otherwise every call of the
	// run counts as starting when the run did: a clock read can cost more
	// than a fast handler's record, and a run holds more than one record
	// only when its handlers are fast (pipeline.SetBatchSize), so a stuck
	// call's age (Stats) is off by no more than its run's fast calls before it.
	first := time.Now()
	start := first
	m := &ranRecords{runner: r.id, began: first}
	r.since.Store(first.UnixNano())
	for {
		if r.held.Load() {
			break // Pause: nothing starts any more
		}
		i, ok := b.Claim()
		if !ok {
			break
		}
		rec := b.Item(i)
		ctx := r.ctx
		if rec.ctx != nil {
			ctx = rec.ctx
		}
		err := ctx.Err() // a cancelled generation (or lost partition) runs nothing more
		switch {
		case err != nil:
		case rec.skip.Load(): // skipped by its operator: no handler runs
			err = ErrSkipped
		default:
			start, err = r.handle(ctx, rec, start)
			m.note(err)
		}
		b.Finish(i, err)
		if err != nil {
			// The records after a failure may share its key: they must
			// not run before its retry. The coordinator takes them back.
			break
		}
	}
	if r.handlerTime == nil { // start is still the run's
		start = time.Now()
	}
	r.since.Store(0)
	m.elapsed = start.Sub(first)
	return m
}

// finished accounts for the end of a handler call that began at start, and
// returns when it ended: the clock's reading when call durations are
// measured (metrics on), start otherwise (see run).
func (r *runner) finished(start time.Time, w *partWatch) time.Time {
	if w != nil {
		w.running.Add(-1)
	}
	if r.handlerTime == nil {
		return start
	}
	end := time.Now()
	r.since.Store(end.UnixNano()) // the next call's start, if the run goes on
	r.handlerTime.Observe(end.Sub(start).Seconds())
	return end
}

// handle runs one attempt of rec that starts now (start is the clock's last
// reading, or the run's start when metrics are off), and returns when it
// ended (finished). The handler sees rec.Record alone. rec.attempts counts the
// failed runs before this one: the coordinator writes it only between runs,
// and the runRecords message that brought the record here orders that write
// before this read.
func (r *runner) handle(parent context.Context, rec *envelope, start time.Time) (end time.Time, err error) {
	var w *partWatch
	if rec.gate != nil {
		w = rec.gate.watch
		w.running.Add(1)
	}
	defer func() { end = r.finished(start, w) }()
	if r.handlerTime != nil && rec.attempts == 0 && rec.arrived != 0 {
		r.waitTime.Observe(float64(start.UnixNano()-rec.arrived) / 1e9)
	}
	if rec.attempts > 0 { // a retry: its span says which attempt it is
		parent = withAttempt(parent, rec.attempts+1)
	}
	if r.outputs != nil {
		call := newEmitCall(r.outputs, []*envelope{rec})
		parent = context.WithValue(parent, emitKey{}, call)
		defer func() { // before the end is taken: the outputs are the call's
			call.close()
			err = settle(rec, err)
		}()
	}
	if r.maxTime <= 0 {
		return end, safeHandle(parent, r.handler, &rec.Record)
	}
	ctx, cancel := context.WithTimeoutCause(parent, r.maxTime, ErrHandlerTimeout)
	defer cancel()
	r.calls(rec, cancel)
	err = safeHandle(ctx, r.handler, &rec.Record)
	r.calls(nil, nil)
	if err != nil && context.Cause(ctx) == ErrHandlerTimeout && parent.Err() == nil {
		err = fmt.Errorf("%w (%s): %w", ErrHandlerTimeout, r.maxTime, err)
	}
	return end, err
}

// PanicError is the failure recorded when a handler panics.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("actors: handler panicked: %v", e.Value) }

// safeHandle calls the handler and turns a panic into an error, so a broken
// record fails like any other instead of taking the process down.
func safeHandle(ctx context.Context, h Handler, rec *Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h.Handle(ctx, rec)
}
