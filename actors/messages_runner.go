package actors

import "sync/atomic"

// runRecords (coordinator → runner): records to run one after the other. The
// coordinator batches only when handlers are fast enough that a batch costs
// less than the actor hops it saves.
type runRecords struct {
	batch *runBatch
}

// runBatch is shared by the runner that runs it and the coordinator, so that
// one slow or stuck record never holds the records around it:
//   - the coordinator may take back the records the runner has not started
//     (work stealing); both sides claim records through next, so each record
//     is either run or taken back, never both;
//   - the coordinator may account for the records the runner has finished
//     before the batch ends (their keys become free again); the runner
//     publishes each outcome in errs before it moves done past it.
type runBatch struct {
	records []*Record
	errs    []error      // errs[i]: outcome of records[i], valid once done > i
	next    atomic.Int64 // index of the first record not claimed yet
	done    atomic.Int64 // records finished: always a prefix of the claimed ones
	seen    int          // coordinator only: finished records accounted for
	limit   int          // coordinator only: records left to the runner (the rest was taken back)
	aged    bool         // coordinator only: out since before the last stealCheck
}

func newRunBatch(records []*Record) *runBatch {
	return &runBatch{records: records, errs: make([]error, len(records)), limit: len(records)}
}

// runEnd reports whether records[i] is the last record of its unit's run
// among those left to the runner: finishing it frees the unit.
func (b *runBatch) runEnd(i int) bool {
	return i+1 >= b.limit || b.records[i+1].unit != b.records[i].unit
}

// claim returns the index of the next record for the runner, or false when
// the batch is exhausted or was taken back.
func (b *runBatch) claim() (int, bool) {
	i := b.next.Add(1) - 1
	return int(i), i < int64(len(b.records))
}

// finish publishes the outcome of the record claimed at index i.
func (b *runBatch) finish(i int, err error) {
	b.errs[i] = err
	b.done.Store(int64(i + 1))
}

// steal takes back every record the runner has not claimed yet.
func (b *runBatch) steal() []*Record {
	i := b.next.Swap(int64(len(b.records)))
	if i >= int64(len(b.records)) {
		return nil
	}
	return b.records[i:]
}

// pending reports whether the coordinator may still find records to take back
// or outcomes to account for before the runner reports the batch.
func (b *runBatch) pending() bool {
	return b.next.Load() < int64(len(b.records)) || int(b.done.Load()) > b.seen
}
