package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
)

// status shows progress: a live line on a terminal, a periodic log line
// otherwise, and a summary at the end.
type status struct {
	out       io.Writer
	log       zerolog.Logger
	consumers []*actors.Consumer
	tty       bool
}

// newStatus draws a live line only when live and out is a terminal: swarm
// nodes share their supervisor's terminal, so they log instead.
func newStatus(out io.Writer, log zerolog.Logger, consumers []*actors.Consumer, live bool) *status {
	return &status{out: out, log: log, consumers: consumers, tty: live && isTerminal(out)}
}

func isTerminal(w io.Writer) bool {
	if s, ok := w.(*logSink); ok {
		w = s.Underlying()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (s *status) total() actors.Snapshot {
	var t actors.Snapshot
	for _, c := range s.consumers {
		t = t.Add(c.Stats())
	}
	return t
}

func (s *status) run(ctx context.Context) {
	interval := 10 * time.Second
	if s.tty {
		interval = 250 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last, lastAt := s.total(), time.Now()
	for {
		select {
		case <-ctx.Done():
			if s.tty {
				fmt.Fprint(s.out, "\r\033[K")
			}
			return
		case now := <-t.C:
			cur := s.total()
			rate := float64(cur.Processed-last.Processed) / now.Sub(lastAt).Seconds()
			last, lastAt = cur, now
			if s.tty {
				kafka := ""
				if cur.KafkaError != "" {
					kafka = "  kafka: " + cur.KafkaError
				}
				fmt.Fprintf(s.out, "\r\033[K%8.0f rec/s  processed %d  in flight %d  buffered %d  lag %d  committed %d  partitions %d%s",
					rate, cur.Processed, cur.InFlight, cur.Buffered, cur.Lag, cur.Committed, cur.Assigned, kafka)
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

// summary writes the exit summary. out never blocks in the real process (a
// logSink), so a stderr nobody reads cannot hold the exit; the lines it
// dropped are counted here.
func (s *status) summary(elapsed time.Duration) {
	t := s.total()
	dropped := ""
	if ls, ok := s.out.(*logSink); ok && ls.Dropped() > 0 {
		dropped = fmt.Sprintf("; %d lines of standard error dropped (not read fast enough)", ls.Dropped())
	}
	fmt.Fprintf(s.out, "turbo: processed %d records in %s (%.0f rec/s); committed %d; failed attempts %d, retries %d, skipped %d, dead-lettered %d, restarts %d%s\n",
		t.Processed, elapsed.Round(time.Millisecond), float64(t.Processed)/elapsed.Seconds(), t.Committed, t.Failed, t.Retries, t.Skipped, t.Dead, t.Restarts, dropped)
}
