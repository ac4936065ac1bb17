package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/actors/pipeline"
	"github.com/turbokafka/turbo/config"
)

// Call is one call of the handler.
type Call struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string // "" for a record without a key
	// Attempt is 1 for the record's first call, 2 for the next, and so on,
	// counted across retries, restarts and redeliveries.
	Attempt int
	// Running is true while the handler runs.
	Running bool
	// Err is what the handler returned (ErrPanicked if it panicked); nil
	// while it runs. In a batch, ErrNotRun for a record after a failed one
	// of its key (or partition), whatever the handler said.
	Err error
	// Batch numbers the handler call of a BatchHandler the record was in,
	// from 1; 0 for a Handler's call.
	Batch int
}

func (c Call) String() string { return fmt.Sprintf("%s/%d@%d", c.Topic, c.Partition, c.Offset) }

// ErrPanicked is the Call.Err of a handler call that panicked.
var ErrPanicked = errors.New("harness: the handler panicked")

// ErrNotRun is the Call.Err of a record of a batch that turbo counts as not
// run: it followed a failed record of its key (or partition) in the batch.
// It is the consumer's own sentinel (pipeline.ErrNotRun), so the harness
// and the runtime cannot name the case two ways.
var ErrNotRun = pipeline.ErrNotRun

// recorder wraps the user's handler: it records every call and judges the
// ordering guarantee as the calls start.
type recorder struct {
	ordering config.Ordering
	cluster  *memkafka.Cluster

	mu         sync.Mutex
	calls      []Call
	attempts   map[recordID]int
	handled    map[recordID]int // successful calls per record
	running    map[string]int   // calls running per ordering unit
	last       map[unitPartition]lastStart
	now, peak  int
	violations []string
	batches    int           // BatchHandler calls so far
	changed    chan struct{} // closed (and replaced) on every call start and end
}

type recordID struct {
	tp     memkafka.TopicPartition
	offset int64
}

type unitPartition struct {
	unit string
	tp   memkafka.TopicPartition
}

// lastStart is the offset a unit last started in a partition, and which
// assignment of the partition (the cluster's claim count) that was in: a new
// assignment reads again from the committed offset, so offsets may go back.
type lastStart struct {
	offset int64
	claims int
}

func (r *recorder) init(ordering config.Ordering, cluster *memkafka.Cluster) {
	r.ordering, r.cluster = ordering, cluster
	r.attempts = make(map[recordID]int)
	r.handled = make(map[recordID]int)
	r.running = make(map[string]int)
	r.last = make(map[unitPartition]lastStart)
	r.changed = make(chan struct{})
}

// unit names what the consumer's ordering serializes rec on; "" when nothing.
func (r *recorder) unit(rec *actors.Record) string {
	switch {
	case r.ordering == config.OrderingUnordered:
		return ""
	case r.ordering == config.OrderingPartition, rec.Key == nil:
		return "partition " + rec.TP().String()
	default:
		return fmt.Sprintf("key %q", rec.Key)
	}
}

func (r *recorder) call(ctx context.Context, rec *actors.Record, next actors.Handler) (err error) {
	idx, unit := r.begin(rec)
	given := *rec // the record as given, whatever the handler does to rec
	ended := false
	defer func() {
		if !ended { // a panic on its way to the runner, which recovers it
			r.end(idx, unit, &given, ErrPanicked)
		}
	}()
	if next != nil {
		err = next.Handle(ctx, rec)
	}
	ended = true
	r.end(idx, unit, &given, err)
	return err
}

// callBatch is call for a batch: its records start together, in order (a
// unit's records in one batch count as one after the other), and end with
// the outcomes turbo gives them.
func (r *recorder) callBatch(ctx context.Context, recs []*actors.Record, next actors.BatchHandler) (res actors.BatchResult) {
	r.mu.Lock()
	r.batches++
	batch := r.batches
	r.mu.Unlock()
	idx, units, given := make([]int, len(recs)), make([]string, len(recs)), make([]actors.Record, len(recs))
	inBatch := map[string]int{}
	for i, rec := range recs {
		given[i] = *rec
		idx[i], units[i] = r.beginIn(rec, batch, inBatch[r.unit(rec)])
		inBatch[units[i]]++
	}
	ended := false
	defer func() {
		if !ended {
			for i := range recs {
				r.end(idx[i], units[i], &given[i], ErrPanicked)
			}
		}
	}()
	if next != nil {
		res = next.HandleBatch(ctx, recs)
	}
	ended = true
	failed := map[string]bool{}
	// A unit runs again from its failed record: in each partition, its
	// records from there on in the batch do not count as started.
	rewind := map[unitPartition]int64{}
	for i := range recs {
		err, ok := res.Failed[i]
		if !ok {
			err = res.Err
		}
		u := units[i]
		switch {
		case u != "" && failed[u]:
			err = ErrNotRun
		case err != nil && u != "":
			failed[u] = true
		}
		k := unitPartition{unit: u, tp: memkafka.TopicPartition{Topic: given[i].Topic, Partition: given[i].Partition}}
		if _, seen := rewind[k]; err != nil && u != "" && !seen {
			rewind[k] = given[i].Offset
		}
		r.end(idx[i], units[i], &given[i], err)
	}
	r.mu.Lock()
	for k, off := range rewind {
		r.last[k] = lastStart{offset: off, claims: r.last[k].claims}
	}
	r.mu.Unlock()
	return res
}

func (r *recorder) begin(rec *actors.Record) (int, string) { return r.beginIn(rec, 0, 0) }

// beginIn records the start of a call of rec, in BatchHandler call batch
// (0: a Handler's call) after before records of its unit in that call.
func (r *recorder) beginIn(rec *actors.Record, batch, before int) (int, string) {
	tp := memkafka.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
	id := recordID{tp: tp, offset: rec.Offset}
	unit := r.unit(rec)
	claims := r.cluster.Partition(tp).Claims
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts[id]++
	if unit != "" {
		if r.running[unit] > before {
			r.violations = append(r.violations, fmt.Sprintf("%s@%d (%s) started while another record of its %s ran", tp, rec.Offset, unit, strings.Fields(unit)[0]))
		}
		r.running[unit]++
		k := unitPartition{unit: unit, tp: tp}
		if l, ok := r.last[k]; ok && l.claims == claims && rec.Offset < l.offset {
			r.violations = append(r.violations, fmt.Sprintf("%s@%d (%s) started after %s@%d of the same assignment", tp, rec.Offset, unit, tp, l.offset))
		}
		r.last[k] = lastStart{offset: rec.Offset, claims: claims}
	}
	r.now++
	r.peak = max(r.peak, r.now)
	r.calls = append(r.calls, Call{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: string(rec.Key), Attempt: r.attempts[id], Running: true, Batch: batch})
	r.notifyLocked()
	return len(r.calls) - 1, unit
}

func (r *recorder) end(idx int, unit string, rec *actors.Record, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[idx].Running, r.calls[idx].Err = false, err
	if unit != "" {
		r.running[unit]--
	}
	r.now--
	if err == nil {
		r.handled[recordID{tp: memkafka.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}, offset: rec.Offset}]++
	}
	r.notifyLocked()
}

func (r *recorder) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) events() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *recorder) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var running []string
	for _, c := range r.calls {
		if c.Running {
			running = append(running, fmt.Sprintf("%s (attempt %d)", c, c.Attempt))
		}
	}
	if len(running) > 10 {
		running = append(running[:10], "…")
	}
	return fmt.Sprintf("handler: %d calls, %d distinct records handled, %d running %v", len(r.calls), len(r.handled), r.now, running)
}

// Calls returns every handler call so far, in the order they started.
func (h *Harness) Calls() []Call {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return append([]Call(nil), h.rec.calls...)
}

// Handled returns the successful handler calls, in the order they started.
func (h *Harness) Handled() []Call {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	var out []Call
	for _, c := range h.rec.calls {
		if !c.Running && c.Err == nil {
			out = append(out, c)
		}
	}
	return out
}

// HandledOffsets returns the offsets of the successful calls of the
// records with key key (of every partition), in the order they started:
// the order the key was processed in.
func (h *Harness) HandledOffsets(key string) []int64 {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	var out []int64
	for _, c := range h.rec.calls {
		if c.Key == key && !c.Running && c.Err == nil {
			out = append(out, c.Offset)
		}
	}
	return out
}

// Attempts returns how many times the handler was called for a record.
func (h *Harness) Attempts(topic string, partition int32, offset int64) int {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return h.rec.attempts[recordID{tp: memkafka.TopicPartition{Topic: topic, Partition: partition}, offset: offset}]
}

// TimesHandled returns how many calls for a record succeeded (more than one
// after a redelivery).
func (h *Harness) TimesHandled(topic string, partition int32, offset int64) int {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return h.rec.handled[recordID{tp: memkafka.TopicPartition{Topic: topic, Partition: partition}, offset: offset}]
}

// HandledCount returns how many distinct records were handled successfully.
func (h *Harness) HandledCount() int {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return len(h.rec.handled)
}

// Running returns how many handler calls run now.
func (h *Harness) Running() int {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return h.rec.now
}

// Peak returns the most handler calls that ran at once.
func (h *Harness) Peak() int {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return h.rec.peak
}

// Violations returns the breaches of the ordering guarantee seen so far:
// two calls of one unit (key or partition, per the consumer's ordering) at
// once, or a unit's record starting below one it started before in the
// same assignment of its partition. The test fails with them when it ends.
func (h *Harness) Violations() []string {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return append([]string(nil), h.rec.violations...)
}
