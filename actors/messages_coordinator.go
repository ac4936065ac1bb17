package actors

import (
	"errors"
	"time"
)

// Messages handled by the parallelism coordinator.

// scheduleRecords hands fetched records to the coordinator's buffer.
type scheduleRecords struct {
	records []*envelope
}

// revokePartition drops a partition's buffered records; the coordinator answers
// partitionDrained once none of its records runs any more. leaving: the
// member is stopping (intake stopped), not handing the partition over in a
// rebalance.
type revokePartition struct {
	tp      TopicPartition
	epoch   uint64
	leaving bool
}

// retryDue is the coordinator's timer: a parked record's backoff is over.
type retryDue struct {
	rec *envelope
}

// deadLettered (orchestrator → coordinator): the dead-letter topic
// acknowledged records, whose keys may go on, and failed others, which leave
// the pipeline unfinished (the tree restarts) and keep their keys held.
type deadLettered struct {
	records []*envelope
	failed  []*envelope
}

// haltRunners (orchestrator → coordinator): the generation is torn down after
// a failure; start no record any more and drop every waiting one (none of
// them finished, so the watermark stays below them), so that revoked
// partitions drain as soon as their running records return.
type haltRunners struct{}

// dropPartition drops every buffered record of an assignment whose
// revocation expired or whose partition was lost, and cancels its running
// ones; the coordinator answers partitionDrained once none runs any more.
type dropPartition struct {
	tp    TopicPartition
	epoch uint64
}

// ranRecords (runner → coordinator): the runner is done with its batch; the
// outcomes are in the batch, which it no longer touches (the coordinator's
// pipeline reuses it). elapsed is the handlers' total running time.
type ranRecords struct {
	runner  int
	elapsed time.Duration
	// For concurrency_mode adaptive: when the run began, how many handler
	// calls it made, whether the downstream pushed back (ErrBackpressure)
	// in any, and the longest Retry-After it asked for.
	began      time.Time
	calls      int
	pushback   bool
	retryAfter time.Duration
}

// note folds a call's outcome into the run's report.
func (m *ranRecords) note(err error) {
	m.calls++
	if err == nil || !errors.Is(err, ErrBackpressure) {
		return
	}
	m.pushback = true
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		m.retryAfter = max(m.retryAfter, ra.Delay)
	}
}

// flushFinished is the coordinator's note to itself: send the completions
// gathered so far. Because the mailbox is FIFO, every completion queued before
// the note is gathered by the time it is read, which batches completions under
// load without ever delaying one when the coordinator is idle.
type flushFinished struct{}

// stealCheck is the coordinator's timer while multi-record batches are out:
// a record that starts late in a batch and then runs long would otherwise hold
// the records behind it while other runners sit idle, and nothing else would
// wake the coordinator to take them back.
type stealCheck struct{}

// controlChanged (Consumer → restarter → orchestrator → coordinator): Pause
// or Resume flipped consumerStats.suspended, paused or resumed partitions or
// topics, or SetConcurrency or SetRate retuned the consumer; the coordinator
// applies what changed and dispatches again (or stops dispatching).
type controlChanged struct{}

// skipRecord (Consumer → restarter → orchestrator → coordinator): Skip
// asks the coordinator to skip the record at offset of tp; it answers on
// reply (buffered), once.
type skipRecord struct {
	tp     TopicPartition
	offset int64
	reply  chan<- SkipResult
}

// fillTurn is the coordinator's timer while it holds records back for a
// batch to fill (batch.max_wait): it fires when they have waited enough.
type fillTurn struct{}

// rateTurn is the coordinator's timer while the rate limit (rate.limit)
// holds runnable records back: it fires when the next token is due.
type rateTurn struct{}
