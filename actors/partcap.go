package actors

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// partitionCap is max_partitions: the most partitions a consumer's
// subscription may cover (every partition of every topic it reads). It
// outlives the tree's generations: what it admitted last is what a
// restarted tree subscribes to when the topics matching the patterns have
// grown past the cap meanwhile.
//
// The rule: a subscription over the cap when the consumer first starts is
// refused (capError: the consumer gives up, naming the count); later, a
// set of matching topics over it is not taken in — the consumer keeps the
// set it admitted last (less the topics gone since), and an error names
// the count and the topics left out, once per refused set.
type partitionCap struct {
	max int
	log zerolog.Logger

	mu       sync.Mutex
	admitted []string // the last set taken in; nil before the first
	refused  string   // the last set refused, so that it is logged once
}

func newPartitionCap(max int, log zerolog.Logger) *partitionCap {
	return &partitionCap{max: max, log: log}
}

// capError is a subscription over max_partitions at start-up: a
// configuration mistake (or a pattern far broader than meant) that
// retrying does not cure.
type capError struct {
	partitions, topics, max int
}

func (e *capError) Error() string {
	return fmt.Sprintf("the subscription covers %d partitions of %d topics, more than max_partitions %d: narrow topics (a pattern, exclude_topics) or raise max_partitions",
		e.partitions, e.topics, e.max)
}

func (e *capError) fatalDial() {}

// check judges the subscription a tree connects with (the topics it reads
// now, and their partitions): over the cap before anything was admitted
// (the consumer's start) it is refused; within it, it is admitted; over it
// later (a restarted tree), admit keeps the set admitted before.
func (c *partitionCap) check(topics []string, partitions int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case partitions <= c.max:
		c.admitted = slices.Clone(topics)
	case c.admitted == nil:
		return &capError{partitions: partitions, topics: len(topics), max: c.max}
	}
	return nil
}

// admit returns the topics to subscribe to, given those matching now
// (sorted) and a count of the partitions of any set of them: matching
// itself when within the cap; otherwise the set admitted last, less the
// topics that no longer match (nil when none was: the caller waits).
func (c *partitionCap) admit(matching []string, partitions func([]string) int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := partitions(matching)
	if n <= c.max {
		c.admitted, c.refused = slices.Clone(matching), ""
		return matching
	}
	var kept []string
	for _, t := range c.admitted {
		if slices.Contains(matching, t) {
			kept = append(kept, t)
		}
	}
	if key := strings.Join(matching, ","); key != c.refused {
		c.refused = key
		var left []string
		for _, t := range matching {
			if !slices.Contains(kept, t) {
				left = append(left, t)
			}
		}
		c.log.Error().Int("partitions", n).Int("max_partitions", c.max).Strs("left_out", head(left, 20)).Int("left_out_count", len(left)).
			Msg("the topics matching the patterns cover more partitions than max_partitions: not taking in the new ones (raise max_partitions, or narrow the patterns)")
	}
	if kept != nil {
		c.admitted = kept
	}
	return kept
}

// head is at most n of s.
func head(s []string, n int) []string { return s[:min(len(s), n)] }
