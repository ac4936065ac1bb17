package actors

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"
)

// consumerStats are a consumer's live counters. Actors write them with atomics and
// readers (the CLI's status line, health reports) take a Snapshot at any time,
// so observing a consumer never costs a message round trip through the tree.
type consumerStats struct {
	fetched   atomic.Int64
	processed atomic.Int64
	failed    atomic.Int64
	commits   atomic.Int64
	restarts  atomic.Int64
	inFlight  atomic.Int64
	readAhead atomic.Int64
	paused    atomic.Int64
	lag       atomic.Int64
	assigned  atomic.Int64
	lastFetch atomic.Int64 // unix nanoseconds
	committed atomic.Int64 // sum over partitions of offsets moved by commits
	retries   atomic.Int64
	skipped   atomic.Int64
	seeks     atomic.Int64 // partitions moved by Seek
	dead      atomic.Int64
	outputs   atomic.Int64 // output records acknowledged
	outErrs   atomic.Int64 // output writes that failed
	txns      atomic.Int64 // transactions committed (output.exactly_once)
	txnAborts atomic.Int64 // transactions aborted
	inherited atomic.Int64
	noFiles   atomic.Int64 // failed attempts: the process ran out of file descriptors
	rateWait  atomic.Int64 // nanoseconds dispatching waited for the rate limit
	suspended atomic.Bool  // Consumer.Pause: nothing starts, nothing is fetched, until Resume
	limit     atomic.Int64 // handler calls allowed in flight now (concurrency, or the adaptive limit)
	pushbacks atomic.Int64 // runs in which the downstream pushed back
	moves     atomic.Int64
	inSession atomic.Bool
	reached   atomic.Bool  // Kafka answered once: the client and its consumer group were made
	lastPoll  atomic.Int64 // unix nanoseconds: when the group session last ended

	kafkaErr atomic.Pointer[string] // why Kafka refuses the connection now; nil once it answers

	commitErrs atomic.Int64 // errors Kafka returned for commits
	// metaOverflows counts partitions that began to overflow the commit
	// metadata budget; metaUnrecorded is the finished offsets above the
	// committed ones it does not hold now (a next owner would run them
	// again).
	metaOverflows  atomic.Int64
	metaUnrecorded atomic.Int64
	hwmErrs        atomic.Int64 // high watermark refreshes that failed
	rebalances     atomic.Int64 // group sessions started
	gained         atomic.Int64 // partitions assigned
	released       atomic.Int64 // partitions revoked or lost
	connErrs       [numConnErrorKinds]atomic.Int64

	// Histograms, nil unless Options.Metrics: observing costs a clock read
	// and a few atomic adds per record.
	handlerTime *histogram
	waitTime    *histogram
	commitTime  *histogram
	txnTime     *histogram

	mu    sync.Mutex
	parts map[TopicPartition]*gate // assigned partitions, for Partitions
	// countedTo is, per partition, the offset up to which committed has
	// counted its records (countCommitted).
	countedTo map[TopicPartition]int64
	// pausedParts are the partitions paused by Consumer.Pause(tps...);
	// partsPaused is their number, read without the lock; pausesChanged
	// counts the calls, so the coordinator can tell before any dispatch
	// that its holds are behind (see coordinator.dispatch).
	pausedParts  map[TopicPartition]bool
	pausedTopics map[string]bool // by Consumer.PauseTopics: every partition of them
	// tuned: SetConcurrency and SetRate; tunesChanged counts the calls, so
	// that the coordinator applies them before its next dispatch.
	tuned         tuning
	tunesChanged  atomic.Uint64
	partsPaused   atomic.Int64
	pausesChanged atomic.Uint64
	running       []*atomic.Int64 // per runner: when its current handler call began (unix ns), 0 when idle
	gaveUp        chan struct{}   // closed by giveUp; made on first use
	fatal         error
}

// countCommitted counts the records of tp in [from, to) as committed, those
// not counted before. A partition claimed again starts from the broker's
// committed offset, which lies below what an earlier claim of this consumer
// marked when that claim's last commit did not land (its session was lost):
// the records run again and are marked again, but they are the same
// records, and Committed is a count of records, not of marks. (A topic
// deleted and created again under its name is counted from where the old
// one was.)
func (s *consumerStats) countCommitted(tp TopicPartition, from, to int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from = max(from, s.countedTo[tp], 0)
	if to <= from {
		return
	}
	s.committed.Add(to - from)
	if s.countedTo == nil {
		s.countedTo = make(map[TopicPartition]int64)
	}
	s.countedTo[tp] = to
}

// setKafkaError records why Kafka refuses the connection ("" once it
// answers), for the status output and health reports.
func (s *consumerStats) setKafkaError(cause string) {
	if cause == "" {
		s.kafkaErr.Store(nil)
		return
	}
	s.kafkaErr.Store(&cause)
}

// giveUp records that the consumer cannot run (Kafka refuses it at
// start-up) and closes the channel of gaveUpWith; only the first call counts.
func (s *consumerStats) giveUp(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return
	}
	s.fatal = err
	close(s.failedLocked())
}

// gaveUpWith returns a channel closed once giveUp is called, and its error.
func (s *consumerStats) gaveUpWith() (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failedLocked(), s.fatal
}

func (s *consumerStats) failedLocked() chan struct{} {
	if s.gaveUp == nil {
		s.gaveUp = make(chan struct{})
	}
	return s.gaveUp
}

// handlerClock returns runner id's slot for the start of its handler calls.
// Runners of every generation share the slots of the same id.
func (s *consumerStats) handlerClock(id int) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.running) <= id {
		s.running = append(s.running, new(atomic.Int64))
	}
	return s.running[id]
}

// setPaused shows whether the partition of gate g is paused.
func (s *consumerStats) setPaused(g *gate, on bool) {
	g.watch.paused.Store(on)
	if on {
		s.paused.Add(1)
	} else {
		s.paused.Add(-1)
	}
}

// sessionStarted and sessionEnded follow the consumer group's sessions.
func (s *consumerStats) sessionStarted() {
	s.inSession.Store(true)
	s.rebalances.Add(1)
}

func (s *consumerStats) sessionEnded() {
	if s.inSession.Swap(false) {
		s.lastPoll.Store(time.Now().UnixNano())
	}
}

// oldestHandler returns when the longest-running handler call began, or the
// zero time when no handler runs.
func (s *consumerStats) oldestHandler() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest int64
	for _, r := range s.running {
		if ns := r.Load(); ns != 0 && (oldest == 0 || ns < oldest) {
			oldest = ns
		}
	}
	if oldest == 0 {
		return time.Time{}
	}
	return time.Unix(0, oldest)
}

// Snapshot is a point-in-time copy of a consumer's counters (Consumer.Stats).
type Snapshot struct {
	Fetched   int64 // records received from Kafka
	Processed int64 // records whose handler succeeded
	Failed    int64 // failed handler attempts (errors, panics, timeouts)
	Retries   int64 // attempts scheduled again after a failure
	Skipped   int64 // records given up on and skipped (on_failure: skip)
	Seeks     int64 // partitions moved by Seek
	Dead      int64 // records written to the dead-letter topic
	// Outputs is the output records the brokers acknowledged (Emit);
	// OutputErrors the writes of one that failed, each a tree restart.
	Outputs      int64
	OutputErrors int64
	// Transactions (output.exactly_once) is the transactions committed,
	// each holding outputs and the input offsets they answer;
	// TransactionsAborted those aborted (each restarts the consumer).
	Transactions        int64
	TransactionsAborted int64
	Inherited           int64 // records not run again: an earlier owner had finished them
	FileLimit           int64 // failed attempts caused by the process's file descriptor limit (EMFILE, ENFILE), retried
	Commits             int64 // offset commits sent
	Committed           int64 // records covered by committed offsets
	Restarts            int64 // actor tree restarts after a failure
	InFlight            int64 // records running in a handler now
	// Buffered is the records fetched from the partitions held and not
	// finished that are not in a handler: waiting for a runner, a retry or
	// their key. It is the sum of the partitions' Buffered (Partitions).
	Buffered  int64
	ReadAhead int64     // records Kafka delivered to a paused partition, waiting outside the budget for its credits (at most about one fetch per partition)
	Paused    int64     // partitions not read now: their share of the budget is used up
	Lag       int64     // records behind the partitions' high watermarks, by committed offset
	Assigned  int64     // partitions assigned now
	LastFetch time.Time // when records last arrived from Kafka (zero if never)
	Moves     int64     // partitions gained or handed over: unchanged while the assignment is
	LastPoll  time.Time // now while in a group session; else when the last one ended (zero if never)
	Oldest    time.Time // when the longest-running handler call began, or the run of fast calls it ends (zero if none runs)
	// KafkaError says why Kafka refuses the connection now (credentials, a
	// certificate, TLS or SASL on the wrong listener); empty once it answers.
	KafkaError string
	Reached    bool  // Kafka answered once
	InSession  bool  // in a consumer group session now
	Rebalances int64 // group sessions started
	Gained     int64 // partitions assigned
	Released   int64 // partitions revoked or lost
	CommitErrs int64 // errors Kafka returned for commits
	// MetaOverflows counts the times a partition's finished offsets above
	// its committed one began to overflow commit_metadata_bytes;
	// MetaUnrecorded is how many of them the commits do not record now: a
	// next owner of those partitions would run them again.
	MetaOverflows  int64
	MetaUnrecorded int64
	// WatermarkErrs counts failed refreshes of the high watermarks of
	// partitions not being read (their lag may be stale meanwhile).
	WatermarkErrs int64
	// RateWait is the time the rate limit (rate.limit) held runnable
	// records back from free runners.
	RateWait time.Duration
	// Suspended: Consumer.Pause was called, and Resume not since.
	Suspended bool
	// Limit is how many handler calls may be in flight now: concurrency,
	// or under concurrency_mode adaptive the limit as it stands.
	Limit int64
	// Pushbacks counts runner turns in which the downstream pushed back
	// (ErrBackpressure: HTTP 429 and 503).
	Pushbacks int64
}

// Snapshot returns the current values.
func (s *consumerStats) Snapshot() Snapshot { return s.snapshot(s.buffered()) }

// snapshot returns the current values, with buffered the sum of the
// partitions' (status reads it with them).
func (s *consumerStats) snapshot(buffered int64) Snapshot {
	var last, poll time.Time
	if ns := s.lastFetch.Load(); ns != 0 {
		last = time.Unix(0, ns)
	}
	if s.inSession.Load() {
		poll = time.Now()
	} else if ns := s.lastPoll.Load(); ns != 0 {
		poll = time.Unix(0, ns)
	}
	return Snapshot{
		Fetched:             s.fetched.Load(),
		Processed:           s.processed.Load(),
		Failed:              s.failed.Load(),
		Retries:             s.retries.Load(),
		RateWait:            time.Duration(s.rateWait.Load()),
		Suspended:           s.suspended.Load(),
		Limit:               s.limit.Load(),
		Pushbacks:           s.pushbacks.Load(),
		Skipped:             s.skipped.Load(),
		Seeks:               s.seeks.Load(),
		Dead:                s.dead.Load(),
		Outputs:             s.outputs.Load(),
		OutputErrors:        s.outErrs.Load(),
		Transactions:        s.txns.Load(),
		TransactionsAborted: s.txnAborts.Load(),
		Inherited:           s.inherited.Load(),
		FileLimit:           s.noFiles.Load(),
		Commits:             s.commits.Load(),
		Committed:           s.committed.Load(),
		Restarts:            s.restarts.Load(),
		InFlight:            s.inFlight.Load(),
		Buffered:            buffered,
		ReadAhead:           s.readAhead.Load(),
		Paused:              s.paused.Load(),
		Lag:                 s.lag.Load(),
		Assigned:            s.assigned.Load(),
		LastFetch:           last,
		Moves:               s.moves.Load(),
		LastPoll:            poll,
		Oldest:              s.oldestHandler(),
		Reached:             s.reached.Load(),
		InSession:           s.inSession.Load(),
		Rebalances:          s.rebalances.Load(),
		Gained:              s.gained.Load(),
		Released:            s.released.Load(),
		CommitErrs:          s.commitErrs.Load(),
		MetaOverflows:       s.metaOverflows.Load(),
		MetaUnrecorded:      s.metaUnrecorded.Load(),
		WatermarkErrs:       s.hwmErrs.Load(),
		KafkaError: func() string {
			if p := s.kafkaErr.Load(); p != nil {
				return *p
			}
			return ""
		}(),
	}
}

// Add returns the sum of two snapshots (for totals over several consumers).
// Reached and InSession are one consumer's: the sum leaves them false.
// Suspended is true when either is (a consumer of the two is paused).
func (a Snapshot) Add(b Snapshot) Snapshot {
	last := later(a.LastFetch, b.LastFetch)
	oldest := a.Oldest
	if oldest.IsZero() || (!b.Oldest.IsZero() && b.Oldest.Before(oldest)) {
		oldest = b.Oldest
	}
	// The least recent poll of the two: a node polls only if all its consumers do.
	poll := a.LastPoll
	if poll.IsZero() || (!b.LastPoll.IsZero() && b.LastPoll.Before(poll)) {
		poll = b.LastPoll
	}
	return Snapshot{
		Fetched:             a.Fetched + b.Fetched,
		Processed:           a.Processed + b.Processed,
		Failed:              a.Failed + b.Failed,
		Retries:             a.Retries + b.Retries,
		Skipped:             a.Skipped + b.Skipped,
		Seeks:               a.Seeks + b.Seeks,
		Dead:                a.Dead + b.Dead,
		Outputs:             a.Outputs + b.Outputs,
		OutputErrors:        a.OutputErrors + b.OutputErrors,
		Transactions:        a.Transactions + b.Transactions,
		TransactionsAborted: a.TransactionsAborted + b.TransactionsAborted,
		Inherited:           a.Inherited + b.Inherited,
		FileLimit:           a.FileLimit + b.FileLimit,
		Commits:             a.Commits + b.Commits,
		Committed:           a.Committed + b.Committed,
		Restarts:            a.Restarts + b.Restarts,
		InFlight:            a.InFlight + b.InFlight,
		Buffered:            a.Buffered + b.Buffered,
		ReadAhead:           a.ReadAhead + b.ReadAhead,
		Paused:              a.Paused + b.Paused,
		Lag:                 a.Lag + b.Lag,
		Assigned:            a.Assigned + b.Assigned,
		LastFetch:           last,
		Moves:               a.Moves + b.Moves,
		LastPoll:            poll,
		Oldest:              oldest,
		// Consumers share the kafka section: one cause says it for all.
		KafkaError:     cmp.Or(a.KafkaError, b.KafkaError),
		Rebalances:     a.Rebalances + b.Rebalances,
		Gained:         a.Gained + b.Gained,
		Released:       a.Released + b.Released,
		CommitErrs:     a.CommitErrs + b.CommitErrs,
		MetaOverflows:  a.MetaOverflows + b.MetaOverflows,
		MetaUnrecorded: a.MetaUnrecorded + b.MetaUnrecorded,
		WatermarkErrs:  a.WatermarkErrs + b.WatermarkErrs,
		RateWait:       a.RateWait + b.RateWait,
		Suspended:      a.Suspended || b.Suspended,
		Limit:          a.Limit + b.Limit,
		Pushbacks:      a.Pushbacks + b.Pushbacks,
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
