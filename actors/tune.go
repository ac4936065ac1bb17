package actors

import (
	"fmt"

	"github.com/rs/zerolog"
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
