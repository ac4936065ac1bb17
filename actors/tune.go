package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/pipeline"
	"github.com/turbokafka/turbo/config"
)

// tuning is what SetConcurrency and SetRate changed of the configuration,
// kept in consumerStats so that every generation of the tree applies it.
type tuning struct {
	concurrency int          // 0: the configuration's
	rate        *config.Rate // nil: the configuration's
}

// Tuning is a consumer's concurrency and rate limit as they stand:
// the configuration's unless SetConcurrency or SetRate changed them.
type Tuning struct {
	Concurrency int         // the most handler calls at once (under concurrency_mode adaptive, the limit's upper bound)
	Rate        config.Rate // Limit 0: no rate limit
	Retuned     bool        // SetConcurrency or SetRate changed one of them
}

// SetConcurrency changes the most handler calls at once, live: lowered, the
// calls running above it finish and none replaces them; raised, more
// start as records allow. Under concurrency_mode adaptive it moves the
// limit's upper bound. The read-ahead stays what the configuration sized
// (concurrency + max_buffered at start): raising concurrency far above the
// configured one gains only as many calls as records are buffered. It holds
// across tree restarts, and until the configuration is loaded again
// (SIGHUP, a new Consumer), whose value is then the truth. n is 1 to
// config.MaxConcurrency.
func (c *Consumer) SetConcurrency(n int) error {
	if n < 1 || n > config.MaxConcurrency {
		return fmt.Errorf("%w: concurrency must be 1 to %d (got %d)", config.ErrInvalid, config.MaxConcurrency, n)
	}
	c.stats.retune(func(t *tuning) { t.concurrency = n })
	c.control.change(func(log zerolog.Logger) { log.Info().Int("concurrency", n).Msg("concurrency retuned") })
	c.tellCoordinator()
	return nil
}

// SetRate changes the rate limit live (r.Limit 0 lifts it; r.Burst 0 is a
// tenth of a second's worth), with the rules of the configuration's rate
// block. Like SetConcurrency it holds across tree restarts, until the
// configuration is loaded again.
func (c *Consumer) SetRate(r config.Rate) error {
	if err := r.Check(); err != nil {
		return err
	}
	c.stats.retune(func(t *tuning) { t.rate = &r })
	c.control.change(func(log zerolog.Logger) {
		log.Info().Float64("rate_limit", r.Limit).Int("rate_burst", r.Burst).Msg("rate limit retuned")
	})
	c.tellCoordinator()
	return nil
}

// Tuning reports the consumer's concurrency and rate limit as they stand.
func (c *Consumer) Tuning() Tuning {
	t := c.stats.tuning()
	out := Tuning{Concurrency: c.cfg.Concurrency, Rate: c.cfg.Rate, Retuned: t.concurrency > 0 || t.rate != nil}
	if t.concurrency > 0 {
		out.Concurrency = t.concurrency
	}
	if t.rate != nil {
		out.Rate = *t.rate
	}
	return out
}

// PauseTopics pauses whole topics: every partition of them, held now or
// assigned later, as Pause(tps...) does for one. ResumeTopics undoes it,
// and resumes the topics' partitions paused one by one too.
func (c *Consumer) PauseTopics(topics ...string) {
	c.stats.pauseTopics(topics, true)
	c.control.change(func(log zerolog.Logger) {
		log.Info().Strs("topics", topics).Msg("topics paused: none of their records starts and nothing of them is fetched until they are resumed")
	})
	c.tellCoordinator()
}

// ResumeTopics undoes PauseTopics, and Pause(tps...) of the topics'
// partitions.
func (c *Consumer) ResumeTopics(topics ...string) {
	c.stats.pauseTopics(topics, false)
	c.control.change(func(log zerolog.Logger) { log.Info().Strs("topics", topics).Msg("topics resumed") })
	c.tellCoordinator()
}

// PausedTopics lists the topics paused by PauseTopics.
func (c *Consumer) PausedTopics() []string { return c.stats.pausedTopicList() }

// retune changes the tuning and counts the change for the coordinator.
func (s *consumerStats) retune(change func(*tuning)) {
	s.mu.Lock()
	change(&s.tuned)
	s.mu.Unlock()
	s.tunesChanged.Add(1)
}

func (s *consumerStats) tuning() tuning {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tuned
}

// SkipResult is what Skip did.
type SkipResult struct {
	TopicPartition
	Offset int64
	// Found: the record is here (fetched, not finished); else nothing was
	// done.
	Found bool
	// Where it stood: "running" (its handler runs now), "parked" (failed,
	// waiting for a retry), "due" (its retry came due), "queued" (given to a
	// runner, not started) or "waiting" (behind its key or for a runner).
	Where string
	// Attempts is how many of its attempts had failed.
	Attempts int
	// DeadLetter: it goes to the dead-letter topic (on_failure: dlq); else
	// it is skipped and counted in Stats().Skipped.
	DeadLetter bool
	// Again: it had been skipped already.
	Again bool
	// Cancelled: it was running, and its handler's context was cancelled
	// (under max_handler_time; without it, a running handler is left to
	// return).
	Cancelled bool
}

func (r SkipResult) String() string {
	at := fmt.Sprintf("%s@%d", r.TopicPartition, r.Offset)
	if !r.Found {
		return at + " is not in flight here: finished already, not fetched yet, or another member's"
	}
	fate := "skipped"
	if r.DeadLetter {
		fate = "dead-lettered"
	}
	switch r.Where {
	case "running":
		if r.Cancelled {
			return fmt.Sprintf("%s was running (%d attempts failed before): its handler is cancelled, and when it returns the record is %s, not retried", at, r.Attempts, fate)
		}
		return fmt.Sprintf("%s is running (%d attempts failed before): when its handler returns it is %s, not retried (its call is not cancelled: only a call of one record under max_handler_time is)", at, r.Attempts, fate)
	case "parked":
		return fmt.Sprintf("%s was waiting for a retry (%d attempts failed): %s now, without running again", at, r.Attempts, fate)
	}
	return fmt.Sprintf("%s was %s (%d attempts failed): %s when its turn comes, without running", at, r.Where, r.Attempts, fate)
}

// ErrSkipTimeout: Skip had no answer from the consumer in time (its tree
// restarting, or stopping).
var ErrSkipTimeout = errors.New("actors: the consumer did not answer the skip (its tree may be restarting): try again")

// skipAnswerTimeout bounds Skip's wait for the coordinator.
const skipAnswerTimeout = 5 * time.Second

// Skip skips the record at offset of tp, for a record that is failing,
// stuck or must not be processed: it is not run (again) and not retried;
// it goes to the dead-letter topic when the consumer has one (on_failure:
// dlq), else it is skipped and counted. Its key then goes on, and the
// committed offset passes it. A record running now is skipped when its
// handler returns, whatever it returns; under max_handler_time its
// handler's context is cancelled at once (without it, the handler is left
// to return). A record this consumer does not hold (not
// fetched, finished, another member's) is reported not found; skipping
// twice is skipping once.
func (c *Consumer) Skip(ctx context.Context, tp TopicPartition, offset int64) (SkipResult, error) {
	reply := make(chan SkipResult, 1)
	select {
	case <-c.stopped:
		return SkipResult{}, ErrSkipTimeout
	default:
		c.sys.Root.Send(c.pid, &skipRecord{tp: tp, offset: offset, reply: reply})
	}
	ctx, cancel := context.WithTimeout(ctx, skipAnswerTimeout)
	defer cancel()
	select {
	case r := <-reply:
		if r.Found && !r.Again {
			c.log.Warn().Stringer("partition", tp).Int64("offset", offset).Str("was", r.Where).Bool("dead_letter", r.DeadLetter).Msg("record skipped by its operator")
		}
		return r, nil
	case <-ctx.Done():
		return SkipResult{}, ErrSkipTimeout
	case <-c.stopped:
		return SkipResult{}, ErrSkipTimeout
	}
}

// skip marks the record at offset of tp skipped, wherever it stands here,
// and lets a parked one run (to be skipped) at once.
func (co *coordinator) skip(tp TopicPartition, offset int64) SkipResult {
	res := SkipResult{TopicPartition: tp, Offset: offset}
	rec, place, runner := co.p.Find(func(r *envelope) bool {
		return r.Offset == offset && r.Partition == tp.Partition && r.Topic == tp.Topic
	})
	if place == pipeline.Absent {
		return res
	}
	res.Found, res.Where, res.Attempts = true, place.String(), rec.attempts
	res.DeadLetter = co.policy.onFailure == config.OnFailureDLQ
	res.Again = rec.skip.Swap(true)
	if place == pipeline.Running && runner >= 0 && runner < len(co.runs) {
		res.Cancelled = co.runs[runner].cancelCall(rec)
	}
	if place == pipeline.Parked {
		if cancel := co.parked[rec]; cancel != nil {
			cancel()
		}
		if co.p.RetryDue(rec) {
			delete(co.parked, rec)
		}
	}
	co.dispatch()
	return res
}
