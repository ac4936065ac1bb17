package actors

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Exactly-once outputs (output.exactly_once), on either Kafka side.
//
// The offset controller hands the proxy each commit together with the
// records whose outputs (or dead letters) that commit passes for the first
// time: below its watermark, or in the finished ranges its metadata
// records. The proxy gives both to the Kafka side in one step (transact):
// under the transaction loop's lock the marks and the records join the
// next transaction, so that whenever the loop takes a snapshot, the outputs
// it has sent and the offsets it commits cover the same records. The loop
// sends outputs as they come, into the open transaction; a commit request
// (commitTxn, from the committer or a revoked claim) makes it send what is
// queued, add the marks with the group's generation, and commit. The side's
// transactional producer (txnProducer: sarama's, or a franz-go client) is
// all that differs between the sides.
//
// Only what a live claim holds may be committed: a claim that ended
// without its final commit (its partition lost with the session), or whose
// member has lost its partitions since it began (a zombie that rejoined:
// with a new member id, or under the consumer protocol the same one and a
// new member epoch), makes the transaction start again without that
// claim's outputs and marks; the partition's next owner runs those records
// again. The franz-go side checks that once more after it has read the
// membership its offsets commit in. A commit the group
// refuses because it moved to a new generation meanwhile (a cooperative
// rebalance under the commit) is aborted and made again, with what live
// claims still hold, up to txnAttempts times; any other failure aborts the
// transaction and restarts the tree from the offsets last committed.
//
// The records of the open transaction keep their fetch credits until it
// commits: what is written but not committed counts against max_buffered.

// txnEvery is the shortest time between two transactions' commits: a
// transaction ends with a marker written to every partition it touched,
// so committing after every batch would cost the brokers more than the
// work; the outputs flow meanwhile, only their visibility waits.
const txnEvery = 100 * time.Millisecond

// errTxnClosed answers a commit asked of a producer that has stopped.
var errTxnClosed = errors.New("actors: the transactional producer has stopped")

// txnAttempts bounds the attempts of one transaction's commit that the
// group refuses for a generation it has left (a rebalance under the commit).
const txnAttempts = 5

// txnMark is one partition's offset to commit, with its metadata, and the
// claim (epoch) that marked it.
type txnMark struct {
	epoch  uint64
	offset int64
	meta   string
}

// txnGroup is a group session whose marks a transaction commits; the
// side's producer knows its kind and asks it for its generation.
type txnGroup interface {
	// order is the session's place among those the side began.
	order() uint64
}

// txnMarks are the marks of a transaction, per session and partition.
type txnMarks map[txnGroup]map[TopicPartition]txnMark

// merge adds newer to m: a partition's newer mark replaces its older one.
func (m txnMarks) merge(newer txnMarks) txnMarks {
	if m == nil {
		m = make(txnMarks)
	}
	for s, ms := range newer {
		if m[s] == nil {
			m[s] = make(map[TopicPartition]txnMark, len(ms))
		}
		maps.Copy(m[s], ms)
	}
	return m
}

// live returns the marks of claims that are still this member's, and
// whether any were not.
func (m txnMarks) live(alive func(epoch uint64) bool) (txnMarks, bool) {
	out := make(txnMarks, len(m))
	stale := false
	for s, ms := range m {
		for tp, mk := range ms {
			if !alive(mk.epoch) {
				stale = true
				continue
			}
			if out[s] == nil {
				out[s] = make(map[TopicPartition]txnMark, len(ms))
			}
			out[s][tp] = mk
		}
	}
	return out, stale
}

// String lists the marks, for debug logs: session order, partition,
// offset and metadata.
func (m txnMarks) String() string {
	var b strings.Builder
	for _, s := range m.sessionsNewestFirst() {
		for _, tp := range slices.SortedFunc(maps.Keys(m[s]), compareTP) {
			mk := m[s][tp]
			fmt.Fprintf(&b, "[s%d %s@%d %q] ", s.order(), tp, mk.offset, mk.meta)
		}
	}
	return b.String()
}

// recordRanges lists recs' offsets per partition as ranges, for debug logs.
func recordRanges(recs []*envelope) string {
	byTP := map[TopicPartition][]int64{}
	for _, r := range recs {
		byTP[r.TP()] = append(byTP[r.TP()], r.Offset)
	}
	var b strings.Builder
	for _, tp := range slices.SortedFunc(maps.Keys(byTP), compareTP) {
		offs := byTP[tp]
		slices.Sort(offs)
		fmt.Fprintf(&b, "%s:", tp)
		for i := 0; i < len(offs); {
			j := i
			for j+1 < len(offs) && offs[j+1] <= offs[j]+1 {
				j++
			}
			fmt.Fprintf(&b, "%d-%d,", offs[i], offs[j])
			i = j + 1
		}
		b.WriteString(" ")
	}
	return b.String()
}

// sessionsNewestFirst returns the sessions of marks, the newest first.
func (m txnMarks) sessionsNewestFirst() []txnGroup {
	return slices.SortedFunc(maps.Keys(m), func(x, y txnGroup) int { return cmp.Compare(y.order(), x.order()) })
}

// txnProducer is a Kafka side's transactional producer, as the transaction
// loop drives it: one transaction open at a time, from begin to commit or
// abort.
type txnProducer interface {
	// begin opens a transaction.
	begin() error
	// inTxn reports whether a transaction is open.
	inTxn() bool
	// send hands rec's outputs (or its dead letter) to the open
	// transaction; false if quit closed first.
	send(rec *envelope, quit <-chan struct{}) bool
	// commit adds marks, each session's with its generation now, to the
	// open transaction and commits it, after every output sent to it is
	// acknowledged.
	commit(marks txnMarks) error
	// abort aborts the open transaction.
	abort() error
	// abortAfter aborts the open transaction after a failed commit, if it
	// still can.
	abortAfter(err error)
	// rebalanced reports whether err is the group refusing the offsets for
	// a generation it has left.
	rebalanced(err error) bool
	// fenced reports whether err says another producer took the
	// transactional id over.
	fenced(err error) bool
	// close closes the producer once no transaction is under way.
	close()
}

// txnLoop is the goroutine that writes a side's outputs in transactions,
// with what it was handed: it owns the producer once started.
type txnLoop struct {
	p     txnProducer
	txnID string
	alive func(epoch uint64) bool // whether a claim is still this member's
	send  func(msg any)           // to the proxy
	stats *consumerStats
	log   zerolog.Logger

	mu      sync.Mutex
	queue   []*envelope // records whose outputs wait for the loop, in the order they finished
	marks   txnMarks    // of the next transaction, per session
	waiters []chan error
	soon    bool          // a commit is asked for that nobody waits for (commitSoon)
	closed  bool          // the loop takes no more commits
	wake    chan struct{} // capacity 1: something was queued
	quit    chan struct{}
	done    chan struct{} // closed when run has returned
	once    sync.Once
}

func newTxnLoop(p txnProducer, txnID string, alive func(uint64) bool, send func(any), stats *consumerStats, log zerolog.Logger) *txnLoop {
	return &txnLoop{p: p, txnID: txnID, alive: alive, send: send, stats: stats, log: log,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// stop ends the loop (what it has not committed is aborted with the
// producer, or by the brokers after the transaction timeout) and waits for
// it; idempotent.
func (l *txnLoop) stop() {
	l.once.Do(func() { close(l.quit) })
	<-l.done
}

// transact records offsets to commit on s and queues the records whose
// outputs the same commit passes, in one step (see the top of this file).
func (l *txnLoop) transact(s txnGroup, offsets []partitionOffset, recs []*envelope) {
	l.mu.Lock()
	if len(offsets) > 0 {
		if l.marks == nil {
			l.marks = make(txnMarks)
		}
		ms := l.marks[s]
		if ms == nil {
			ms = make(map[TopicPartition]txnMark, len(offsets))
			l.marks[s] = ms
		}
		for _, o := range offsets {
			ms[o.tp] = txnMark{epoch: o.epoch, offset: o.offset, meta: o.meta}
		}
	}
	l.queue = append(l.queue, recs...)
	l.mu.Unlock()
	l.wakeUp()
}

func (l *txnLoop) wakeUp() {
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// commitTxn asks the loop for a transaction commit holding everything
// recorded so far, and waits for it.
func (l *txnLoop) commitTxn() error {
	done := make(chan error, 1)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errTxnClosed
	}
	l.waiters = append(l.waiters, done)
	l.mu.Unlock()
	l.wakeUp()
	return <-done // the loop answers every waiter, at the latest when it returns
}

// commitSoon asks the loop for a commit without waiting for it: after
// claims were lost, so that the open transaction lets their outputs go (it
// is aborted and made again without them) now, rather than holding
// read_committed readers of those output partitions until a live claim's
// next commit, or the transaction timeout.
func (l *txnLoop) commitSoon() {
	l.mu.Lock()
	l.soon = true
	l.mu.Unlock()
	l.wakeUp()
}

// run hands the queued records' outputs and dead letters to the open
// transaction, and commits it when asked (at most every txnEvery). After a
// failed commit nothing more goes into the producer: the tree is
// restarting. It opens the first transaction itself.
func (l *txnLoop) run() {
	var outs, open []*envelope // open: the records whose outputs the open transaction holds
	var last time.Time         // when the last commit began
	broken := l.p.begin()
	if broken != nil {
		broken = fmt.Errorf("opening the first transaction: %w", broken)
		l.send(&transactionFailed{err: broken})
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer func() {
		timer.Stop()
		l.mu.Lock()
		l.closed = true
		waiters := l.waiters
		l.waiters = nil
		l.mu.Unlock()
		for _, w := range waiters {
			w <- errTxnClosed
		}
		close(l.done)
	}()
	for {
		var marks txnMarks
		var waiters []chan error
		var wait time.Duration
		due := false
		l.mu.Lock()
		outs, l.queue = l.queue, outs[:0]
		if len(l.waiters) > 0 || l.soon {
			if wait = txnEvery - time.Since(last); wait <= 0 || broken != nil {
				marks, l.marks = l.marks, nil
				waiters, l.waiters = l.waiters, nil
				due, l.soon = true, false
			}
		}
		l.mu.Unlock()
		if broken != nil {
			clear(outs)
			for _, w := range waiters {
				w <- broken
			}
		} else {
			for i, rec := range outs {
				if !l.p.send(rec, l.quit) {
					return
				}
				open = append(open, rec)
				outs[i] = nil
			}
			if due {
				last = time.Now()
				written, dropped, err := l.commit(marks, open)
				open = nil
				if len(written) > 0 || len(dropped) > 0 {
					l.send(&outputsWritten{written: written, dropped: dropped})
				}
				for _, w := range waiters {
					w <- err
				}
				if err != nil {
					broken = err
					l.send(&transactionFailed{err: err})
				}
				continue
			}
		}
		if len(outs) > 0 {
			continue // more may have come while these were fed
		}
		if wait > 0 && broken == nil {
			timer.Reset(wait)
		}
		select {
		case <-l.wake:
		case <-timer.C:
		case <-l.quit:
			return
		}
		timer.Stop()
	}
}

// commit commits the open transaction with marks, its outputs (recs) sent
// already. It returns the records it committed and those it left out
// (their claims ended without a commit: their partitions' next owners run
// them again).
func (l *txnLoop) commit(marks txnMarks, recs []*envelope) (written, dropped []*envelope, err error) {
	for attempt := 1; ; attempt++ {
		// One answer per claim for the whole attempt: a claim that ended
		// between the marks and the records would otherwise commit its
		// offsets without its outputs.
		alive := l.aliveOnce()
		live, stale := marks.live(alive)
		kept := recs[:0:0]
		for _, rec := range recs {
			if alive(rec.epoch) {
				kept = append(kept, rec)
			} else {
				dropped = append(dropped, rec)
			}
		}
		if stale || len(kept) < len(recs) {
			// The open transaction holds outputs of a claim that is no
			// longer this member's: again without them.
			if err := l.again(kept); err != nil {
				return nil, append(dropped, kept...), err
			}
		}
		marks, recs = live, kept
		start := time.Now()
		err = l.p.commit(marks)
		if e := l.log.Debug(); e.Enabled() {
			e.Int("attempt", attempt).Str("marks", marks.String()).Str("outputs_of", recordRanges(recs)).
				Int("left_out", len(dropped)).AnErr("error", err).Msg("transaction commit")
		}
		if err == nil {
			l.stats.observeTransaction(start)
			if err := l.p.begin(); err != nil {
				return recs, dropped, fmt.Errorf("opening the next transaction: %w", err)
			}
			return recs, dropped, nil
		}
		err = l.aborted(err)
		if !l.p.rebalanced(err) || attempt == txnAttempts {
			return nil, append(dropped, recs...), err
		}
		// The group moved to a new generation under the commit (a
		// rebalance): after a pause, again with what live claims hold.
		l.log.Info().Err(err).Int("attempt", attempt).Msg("the group rebalanced under a transaction's commit; committing it again")
		t := time.NewTimer(time.Duration(attempt) * txnEvery)
		select {
		case <-t.C:
		case <-l.quit:
			t.Stop()
			return nil, append(dropped, recs...), errTxnClosed
		}
		if err := l.again(recs); err != nil {
			return nil, append(dropped, recs...), err
		}
	}
}

// aliveOnce returns l.alive memoized: each claim's answer is the first one.
func (l *txnLoop) aliveOnce() func(epoch uint64) bool {
	seen := map[uint64]bool{}
	return func(epoch uint64) bool {
		ok, asked := seen[epoch]
		if !asked {
			ok = l.alive(epoch)
			seen[epoch] = ok
		}
		return ok
	}
}

// again aborts the open transaction and opens a new one holding the
// outputs of recs, sent again.
func (l *txnLoop) again(recs []*envelope) error {
	if l.p.inTxn() {
		if err := l.p.abort(); err != nil {
			return l.aborted(err)
		}
		l.stats.txnAborts.Add(1)
	}
	if err := l.p.begin(); err != nil {
		return fmt.Errorf("opening a transaction: %w", err)
	}
	for _, rec := range recs {
		if !l.p.send(rec, l.quit) {
			return errTxnClosed
		}
	}
	return nil
}

// aborted aborts the open transaction after err if it still can, counts
// it, and returns err as the tree is told.
func (l *txnLoop) aborted(err error) error {
	l.stats.txnAborts.Add(1)
	l.p.abortAfter(err)
	if l.p.fenced(err) {
		return fmt.Errorf("committing the transaction: another producer took transactional id %q over (this process's successor, or a second process with the same output.transactional_id): %w", l.txnID, err)
	}
	return fmt.Errorf("committing the transaction: %w", err)
}
