package actors

import (
	"sync/atomic"
	"time"
)

// Stats are a consumer's live counters. Actors write them with atomics and
// readers (the CLI's status line, health reports) take a Snapshot at any time,
// so observing a consumer never costs a message round trip through the tree.
type Stats struct {
	fetched   atomic.Int64
	processed atomic.Int64
	failed    atomic.Int64
	commits   atomic.Int64
	restarts  atomic.Int64
	inFlight  atomic.Int64
	buffered  atomic.Int64
	lag       atomic.Int64
	assigned  atomic.Int64
	lastFetch atomic.Int64 // unix nanoseconds
	committed atomic.Int64 // sum over partitions of offsets moved by commits
	retries   atomic.Int64
	skipped   atomic.Int64
	dead      atomic.Int64
	inherited atomic.Int64
}

// Snapshot is a point-in-time copy of Stats.
type Snapshot struct {
	Fetched   int64     // records received from Kafka
	Processed int64     // records whose handler succeeded
	Failed    int64     // failed handler attempts (errors, panics, timeouts)
	Retries   int64     // attempts scheduled again after a failure
	Skipped   int64     // records given up on and skipped (on_failure: skip)
	Dead      int64     // records written to the dead-letter topic
	Inherited int64     // records not run again: an earlier owner had finished them
	Commits   int64     // offset commits sent
	Committed int64     // records covered by committed offsets
	Restarts  int64     // actor tree restarts after a failure
	InFlight  int64     // records running in a handler now
	Buffered  int64     // records waiting for a runner
	Lag       int64     // records behind the partitions' high watermarks, by committed offset
	Assigned  int64     // partitions held now
	LastFetch time.Time // when records last arrived from Kafka (zero if never)
}

// Snapshot returns the current values.
func (s *Stats) Snapshot() Snapshot {
	var last time.Time
	if ns := s.lastFetch.Load(); ns != 0 {
		last = time.Unix(0, ns)
	}
	return Snapshot{
		Fetched:   s.fetched.Load(),
		Processed: s.processed.Load(),
		Failed:    s.failed.Load(),
		Retries:   s.retries.Load(),
		Skipped:   s.skipped.Load(),
		Dead:      s.dead.Load(),
		Inherited: s.inherited.Load(),
		Commits:   s.commits.Load(),
		Committed: s.committed.Load(),
		Restarts:  s.restarts.Load(),
		InFlight:  s.inFlight.Load(),
		Buffered:  s.buffered.Load(),
		Lag:       s.lag.Load(),
		Assigned:  s.assigned.Load(),
		LastFetch: last,
	}
}

// Add returns the sum of two snapshots (for totals over several consumers).
func (a Snapshot) Add(b Snapshot) Snapshot {
	last := a.LastFetch
	if b.LastFetch.After(last) {
		last = b.LastFetch
	}
	return Snapshot{
		Fetched:   a.Fetched + b.Fetched,
		Processed: a.Processed + b.Processed,
		Failed:    a.Failed + b.Failed,
		Retries:   a.Retries + b.Retries,
		Skipped:   a.Skipped + b.Skipped,
		Dead:      a.Dead + b.Dead,
		Inherited: a.Inherited + b.Inherited,
		Commits:   a.Commits + b.Commits,
		Committed: a.Committed + b.Committed,
		Restarts:  a.Restarts + b.Restarts,
		InFlight:  a.InFlight + b.InFlight,
		Buffered:  a.Buffered + b.Buffered,
		Lag:       a.Lag + b.Lag,
		Assigned:  a.Assigned + b.Assigned,
		LastFetch: last,
	}
}
