package config

import (
	"fmt"
	"slices"
)

// Select narrows the configuration to what the CLI filters ask for:
//
//  1. if includeConsumers is non-empty, only the consumers it names stay;
//  2. consumers named in excludeConsumers are removed;
//  3. if includeTopics is non-empty, each consumer keeps only those topics;
//  4. topics in excludeTopics are removed from each consumer;
//  5. consumers left without topics are dropped.
//
// A /pattern/ in topics is filtered by what it matches: with includeTopics,
// it is replaced by the included names it matches (a consumer whose pattern
// matches none of them has nothing left of it); excludeTopics join the
// consumer's exclude_topics, which the pattern never matches.
//
// A consumer name that matches no consumer is an error, since a typo in a
// filter would otherwise silently run the wrong set. So is a selection that
// leaves nothing to run. Topic names are not checked: the same topic filter
// is meant to apply across consumers that subscribe to different topics.
// On error c is left unchanged. Errors wrap ErrInvalid.
func (c *Config) Select(includeConsumers, excludeConsumers, includeTopics, excludeTopics []string) error {
	if err := c.checkNames("--include-consumers", includeConsumers); err != nil {
		return err
	}
	if err := c.checkNames("--exclude-consumers", excludeConsumers); err != nil {
		return err
	}
	var kept []Consumer
	for _, cons := range c.Consumers {
		if len(includeConsumers) > 0 && !slices.Contains(includeConsumers, cons.Name) {
			continue
		}
		if slices.Contains(excludeConsumers, cons.Name) {
			continue
		}
		// A fresh slice, so narrowing never writes into a topics array the
		// caller may share.
		var topics []string
		patterns := false
		for _, t := range cons.Topics {
			if IsTopicPattern(t) {
				// The filters apply to what the pattern matches: the
				// included names it matches replace it; the excluded ones
				// join exclude_topics.
				patterns = true
				if len(includeTopics) == 0 {
					topics = append(topics, t)
					continue
				}
				re, err := compileTopicPattern(t)
				if err != nil {
					return fieldErr("consumers", err.Error())
				}
				for _, inc := range includeTopics {
					if re.MatchString(inc) && !slices.Contains(excludeTopics, inc) && !slices.Contains(topics, inc) {
						topics = append(topics, inc)
					}
				}
				continue
			}
			if len(includeTopics) > 0 && !slices.Contains(includeTopics, t) {
				continue
			}
			if slices.Contains(excludeTopics, t) {
				continue
			}
			topics = append(topics, t)
		}
		if len(topics) == 0 {
			continue
		}
		cons.Topics = topics
		if patterns && len(excludeTopics) > 0 {
			cons.ExcludeTopics = slices.Concat(cons.ExcludeTopics, excludeTopics)
		}
		kept = append(kept, cons)
	}
	if len(kept) == 0 {
		return fieldErr("consumers", "nothing left to run: the include/exclude filters removed every consumer or topic")
	}
	c.Consumers = kept
	return nil
}

func (c *Config) checkNames(flag string, names []string) error {
	for _, n := range names {
		if !slices.ContainsFunc(c.Consumers, func(cons Consumer) bool { return cons.Name == n }) {
			return fieldErr(flag, fmt.Sprintf("no consumer named %q", n))
		}
	}
	return nil
}
