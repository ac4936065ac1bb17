package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/turbokafka/turbo/actors/pipeline"
)

// BatchHandler processes records a batch at a time: up to
// batch.max_records records (and batch.max_bytes of keys and values) per
// call. Ordering holds inside a batch: under key ordering a key's records
// in one batch are consecutive and in offset order, and a key is never in
// two batches at once; under partition ordering likewise per partition.
//
// The records belong to the call: a handler must not keep the slice or the
// records after it returns. The context is cancelled when the consumer is
// torn down or the call runs past max_handler_time; a batch that holds
// records of several partitions is not cancelled when one of them is taken
// away (the new owner runs that partition's records again).
type BatchHandler interface {
	HandleBatch(ctx context.Context, recs []*Record) BatchResult
}

// BatchHandlerFunc adapts a function to the BatchHandler interface.
type BatchHandlerFunc func(ctx context.Context, recs []*Record) BatchResult

// HandleBatch calls f(ctx, recs).
func (f BatchHandlerFunc) HandleBatch(ctx context.Context, recs []*Record) BatchResult {
	return f(ctx, recs)
}

// BatchResult is what became of a batch. The zero value means every record
// succeeded.
//
// A failed record is retried, skipped or dead-lettered under the consumer's
// failure policy, exactly as if Handle had returned its error (wrap
// ErrPermanent to skip its retries). A record that follows a failed record
// of its own key (or partition, under partition ordering) in the same batch
// counts as not run, whatever the handler said of it: it must not finish
// before the failed record does, so it runs again after it. Every other
// record that did not fail is done.
type BatchResult struct {
	// Err, when not nil, is the outcome of every record Failed does not
	// name: the whole batch failed.
	Err error
	// Failed gives the records that failed, by index in the batch, with
	// their errors. An index outside the batch is ignored.
	Failed map[int]error
}

// BatchFailed is the result of a batch that failed as a whole with err.
func BatchFailed(err error) BatchResult { return BatchResult{Err: err} }

// outcome is the error of the record at index i (nil: it succeeded).
func (r BatchResult) outcome(i int) error {
	if err, ok := r.Failed[i]; ok {
		return err
	}
	return r.Err
}

// oneByOne runs a batch through a per-record handler, in order, stopping at
// the first failure: the records after it count as not run, and go back to
// run later — so the batch form of a handler that has none (noop, sleep,
// hash, a Go Handler) behaves as it does one record at a time.
type oneByOne struct{ h Handler }

func (o oneByOne) HandleBatch(ctx context.Context, recs []*Record) BatchResult {
	for i, rec := range recs {
		if err := safeHandle(ctx, o.h, rec); err != nil {
			res := BatchResult{Failed: make(map[int]error, len(recs)-i)}
			res.Failed[i] = err
			for j := i + 1; j < len(recs); j++ {
				res.Failed[j] = errNotRun
			}
			return res
		}
	}
	return BatchResult{}
}

// runCalls runs a batch in handler calls of at most maxRecords records and
// maxBytes of keys, values and headers (a larger record goes alone), one after the
// other, and stops after a call in which a record failed: the records after
// it go back to the coordinator.
func (r *runner) runCalls(b *runBatch) *ranRecords {
	first := time.Now()
	start := first
	m := &ranRecords{runner: r.id, began: first}
	for !r.held.Load() { // Pause: nothing starts any more
		call, from := r.call[:0], -1
		var bytes int64
		for len(call) < r.maxRecords {
			if r.maxBytes > 0 && len(call) > 0 {
				next, ok := b.Peek()
				if !ok || bytes+next.size > r.maxBytes {
					break
				}
			}
			i, ok := b.Claim()
			if !ok {
				break
			}
			if from < 0 {
				from = i
			}
			rec := b.Item(i)
			bytes += rec.size
			call = append(call, rec)
		}
		r.call = call
		if len(call) == 0 {
			break
		}
		var failed bool
		start, failed = r.handleCall(call, start)
		var pushed error // the call's push-back, if any record says so
		for _, err := range r.errs {
			if err != nil && err != errNotRun && (pushed == nil || errors.Is(err, ErrBackpressure)) {
				pushed = err
			}
		}
		m.note(pushed)
		b.FinishRange(from, r.errs)
		clear(r.call)
		if failed {
			break
		}
	}
	m.elapsed = start.Sub(first)
	return m
}

// handleCall makes one handler call of the records (start is the clock's
// last reading), leaves their outcomes in r.errs, and returns when it ended
// and whether any record failed. A record whose partition was taken away
// before the call is not sent: it fails with its context's error.
func (r *runner) handleCall(call []*envelope, start time.Time) (end time.Time, failed bool) {
	r.errs = slices.Grow(r.errs[:0], len(call))[:len(call)] // reused: no allocation per call
	clear(r.errs)
	parent := r.ctx
	if shared := call[0].ctx; shared != nil {
		for _, rec := range call[1:] {
			if rec.ctx != shared {
				shared = nil
				break
			}
		}
		if shared != nil {
			parent = shared // one partition's: its loss cancels the call
		}
	}
	recs := r.recs[:0]
	for i, rec := range call {
		if rec.ctx != nil && rec.ctx.Err() != nil {
			r.errs[i] = rec.ctx.Err()
			continue
		}
		if err := parent.Err(); err != nil {
			r.errs[i] = err
			continue
		}
		if rec.skip.Load() { // skipped by its operator: not sent
			r.errs[i] = ErrSkipped
			continue
		}
		recs = append(recs, &rec.Record)
	}
	if len(recs) > 0 {
		end = r.invoke(parent, call, recs, start)
	} else {
		end = start
	}
	clear(recs)
	r.recs = recs[:0]
	// A record after a failed one of its unit must not finish before it: it
	// counts as not run, and so does every later one of that unit.
	var failedUnits []string
	for i, rec := range call {
		err := r.errs[i]
		if rec.unit != "" && containsUnit(failedUnits, rec.unit) {
			err = errNotRun
		} else if err != nil && rec.unit != "" {
			failedUnits = append(failedUnits, rec.unit)
		}
		failed = failed || err != nil
		r.errs[i] = err
	}
	return end, failed
}

// errNotRun is the outcome of a record a handler call did not run.
var errNotRun = pipeline.ErrNotRun

func containsUnit(units []string, u string) bool {
	for _, v := range units {
		if v == u {
			return true
		}
	}
	return false
}

// invoke makes the handler call proper for the records sent (recs, those of
// call not failed yet), and files their outcomes in r.errs.
func (r *runner) invoke(parent context.Context, call []*envelope, recs []*Record, start time.Time) time.Time {
	r.since.Store(start.UnixNano())
	for _, rec := range call {
		if rec.gate != nil {
			rec.gate.watch.running.Add(1)
		}
		if r.handlerTime != nil && rec.attempts == 0 && rec.arrived != 0 {
			r.waitTime.Observe(float64(start.UnixNano()-rec.arrived) / 1e9)
		}
	}
	var emits *emitCall
	if r.outputs != nil {
		emits = newEmitCall(r.outputs, call)
		parent = context.WithValue(parent, emitKey{}, emits)
	}
	ctx, cancel := parent, context.CancelFunc(func() {})
	if r.maxTime > 0 {
		ctx, cancel = context.WithTimeoutCause(parent, r.maxTime, ErrHandlerTimeout)
	}
	res := safeHandleBatch(ctx, r.batch, recs)
	cancel()
	if emits != nil {
		emits.close()
	}
	timedOut := r.maxTime > 0 && context.Cause(ctx) == ErrHandlerTimeout && parent.Err() == nil
	end := time.Now()
	r.since.Store(0)
	if r.handlerTime != nil {
		r.handlerTime.Observe(end.Sub(start).Seconds())
	}
	k := 0
	for i, rec := range call {
		if rec.gate != nil {
			rec.gate.watch.running.Add(-1)
		}
		if r.errs[i] != nil {
			rec.outputs = nil
			continue // not sent
		}
		err := res.outcome(k)
		k++
		if err != nil && timedOut {
			err = fmt.Errorf("%w (%s): %w", ErrHandlerTimeout, r.maxTime, err)
		}
		r.errs[i] = settle(rec, err)
	}
	return end
}

// safeHandleBatch calls the batch handler and turns a panic into the
// failure of the whole batch.
func safeHandleBatch(ctx context.Context, h BatchHandler, recs []*Record) (res BatchResult) {
	defer func() {
		if v := recover(); v != nil {
			res = BatchFailed(&PanicError{Value: v, Stack: debug.Stack()})
		}
	}()
	return h.HandleBatch(ctx, recs)
}
