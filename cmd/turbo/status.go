package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"golang.org/x/term"
)

// Status intervals: the live line redraws often enough to look live, the
// logged status is a heartbeat for whoever reads the log.
const (
	liveInterval   = 250 * time.Millisecond
	loggedInterval = 10 * time.Second
)

// status shows progress: a live line on a terminal, a periodic log line
// otherwise, and a summary at the end.
type status struct {
	out      io.Writer
	log      zerolog.Logger
	interval time.Duration

	mu        sync.Mutex
	consumers []*actors.Consumer // the running ones
	retired   actors.Snapshot    // the counts of consumers stopped by a reload
	// live draws the live line, nil when the status is logged instead.
	live *logSink
	// width is the terminal's width in columns (0: not known).
	width func() int
}

// newStatus draws a live line only when live, out is the process's
// standard error sink over a terminal, and the log is not JSON (every line
// is then a JSON object: the status is logged). Swarm nodes share their
// supervisor's terminal, so they log instead.
func newStatus(out io.Writer, log zerolog.Logger, live bool) *status {
	s := &status{out: out, log: log, interval: loggedInterval}
	if sink, ok := out.(*logSink); ok && live && !sink.JSON() {
		if f, ok := sink.Underlying().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			s.live, s.interval = sink, liveInterval
			s.width = func() int {
				w, _, err := term.GetSize(int(f.Fd()))
				if err != nil {
					return 0
				}
				return w
			}
		}
	}
	return s
}

// set shows these consumers from now on.
func (s *status) set(consumers []*actors.Consumer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consumers = consumers
}

// retire stops showing consumers that a reload stopped, keeping what they
// counted: the totals and the exit summary cover the whole run.
func (s *status) retire(consumers []*actors.Consumer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range consumers {
		s.retired = s.retired.Add(counts(c.Stats()))
	}
	s.consumers = nil
}

// counts keeps the counters of a snapshot and drops its gauges (in flight,
// lag, partitions...), which end with the consumer.
func counts(s actors.Snapshot) actors.Snapshot {
	return actors.Snapshot{
		Fetched: s.Fetched, Processed: s.Processed, Failed: s.Failed, Retries: s.Retries, Skipped: s.Skipped, Dead: s.Dead,
		Outputs: s.Outputs, OutputErrors: s.OutputErrors, Transactions: s.Transactions, TransactionsAborted: s.TransactionsAborted, Inherited: s.Inherited, FileLimit: s.FileLimit, Commits: s.Commits, Committed: s.Committed, Restarts: s.Restarts,
		Rebalances: s.Rebalances, Gained: s.Gained, Released: s.Released, CommitErrs: s.CommitErrs,
	}
}

func (s *status) total() actors.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.retired
	for _, c := range s.consumers {
		t = t.Add(c.Stats())
	}
	return t
}

func (s *status) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	last, lastAt := s.total(), time.Now()
	for {
		select {
		case <-ctx.Done():
			if s.live != nil {
				s.live.HideLive()
			}
			return
		case now := <-t.C:
			cur := s.total()
			rate := float64(cur.Processed-last.Processed) / now.Sub(lastAt).Seconds()
			last, lastAt = cur, now
			if s.live != nil {
				s.live.ShowLive(oneRow(liveText(rate, cur), s.width()))
				continue
			}
			ev := s.log.Info().Float64("records_per_s", rate).Int64("processed", cur.Processed).Int64("failed", cur.Failed).
				Int64("in_flight", cur.InFlight).Int64("buffered", cur.Buffered).Int64("lag", cur.Lag).
				Int64("committed", cur.Committed).Int64("partitions", cur.Assigned)
			if cur.KafkaError != "" {
				ev.Str("kafka_error", cur.KafkaError)
			}
			ev.Msg("status")
		}
	}
}

// liveText is the live status line.
func liveText(rate float64, cur actors.Snapshot) string {
	kafka := ""
	if cur.KafkaError != "" {
		kafka = "  kafka: " + cur.KafkaError
	}
	return fmt.Sprintf("%8.0f rec/s  processed %d  in flight %d  buffered %d  lag %d  committed %d  partitions %d%s",
		rate, cur.Processed, cur.InFlight, cur.Buffered, cur.Lag, cur.Committed, cur.Assigned, kafka)
}

// summary writes the exit summary: a JSON object when the run logs JSON
// (with the run's fields, e.g. the node), else one human line. out never
// blocks in the real process (a logSink), so a stderr nobody reads cannot
// hold the exit; the lines it dropped are counted here.
func (s *status) summary(elapsed time.Duration) {
	t := s.total()
	var dropped int64
	if ls, ok := s.out.(*logSink); ok {
		dropped = ls.Dropped()
	}
	rate := float64(t.Processed) / elapsed.Seconds()
	outputs := t.Outputs > 0 || t.OutputErrors > 0
	if _, json := ownJSON(s.out); json {
		// Log, not Info: the summary is written whatever log.level says,
		// like its plain form.
		ev := s.log.Log()
		if outputs {
			ev = ev.Int64("outputs", t.Outputs).Int64("output_errors", t.OutputErrors)
		}
		if t.Transactions > 0 || t.TransactionsAborted > 0 {
			ev = ev.Int64("transactions", t.Transactions).Int64("transactions_aborted", t.TransactionsAborted)
		}
		ev.Str(zerolog.LevelFieldName, zerolog.InfoLevel.String()).
			Int64("processed", t.Processed).Stringer("elapsed", elapsed.Round(time.Millisecond)).
			Float64("records_per_s", rate).Int64("committed", t.Committed).Int64("failed_attempts", t.Failed).
			Int64("retries", t.Retries).Int64("skipped", t.Skipped).Int64("dead_lettered", t.Dead).
			Int64("restarts", t.Restarts).Int64("dropped_lines", dropped).Msg("exit summary")
		return
	}
	note := ""
	if outputs {
		note = fmt.Sprintf("; outputs %d, output errors %d", t.Outputs, t.OutputErrors)
	}
	if t.Transactions > 0 || t.TransactionsAborted > 0 {
		note += fmt.Sprintf("; transactions %d, aborted %d", t.Transactions, t.TransactionsAborted)
	}
	if dropped > 0 {
		note += fmt.Sprintf("; %d lines of standard error dropped (not read fast enough)", dropped)
	}
	fmt.Fprintf(s.out, "turbo: processed %d records in %s (%.0f rec/s); committed %d; failed attempts %d, retries %d, skipped %d, dead-lettered %d, restarts %d%s\n",
		t.Processed, elapsed.Round(time.Millisecond), rate, t.Committed, t.Failed, t.Retries, t.Skipped, t.Dead, t.Restarts, note)
}
