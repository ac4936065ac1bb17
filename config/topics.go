package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// IsTopicPattern reports whether an entry of a consumer's topics is a
// pattern, written /regex/, rather than a topic's name.
func IsTopicPattern(t string) bool { return len(t) >= 2 && t[0] == '/' && t[len(t)-1] == '/' }

// compileTopicPattern compiles a /regex/ entry. The expression must match a
// topic's whole name (Go's RE2 syntax, anchored at both ends), as Kafka's
// Java client matches its subscription patterns.
func compileTopicPattern(t string) (*regexp.Regexp, error) {
	expr := t[1 : len(t)-1]
	switch {
	case expr == "":
		return nil, fmt.Errorf("the pattern %s is empty", quoteValue(t))
	case len(t) > MaxTopicPatternBytes:
		return nil, fmt.Errorf("the pattern is %d bytes long, at most %d", len(t), MaxTopicPatternBytes)
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("the pattern %s is not a regular expression: %w", quoteValue(t), err)
	}
	return re, nil
}

// Subscription is what a consumer reads: its topics by name, and the topics
// that exist matching one of its patterns — except internal topics (names
// starting with "__", such as __consumer_offsets), its dead-letter topic
// and its exclude_topics (where Load puts every other
// consumer's dead-letter topic), which a pattern never matches.
type Subscription struct {
	names    []string
	patterns []*regexp.Regexp
	never    []string
}

// Subscription returns the consumer's subscription; the consumer must have
// passed Validate.
func (c Consumer) Subscription() (Subscription, error) {
	s := Subscription{never: slices.Clone(c.ExcludeTopics)}
	if c.DLQTopic != "" {
		s.never = append(s.never, c.DLQTopic)
	}
	for _, t := range c.Topics {
		if !IsTopicPattern(t) {
			s.names = append(s.names, t)
			continue
		}
		re, err := compileTopicPattern(t)
		if err != nil {
			return Subscription{}, fmt.Errorf("consumer %s: %w", c.Name, err)
		}
		s.patterns = append(s.patterns, re)
	}
	return s, nil
}

// HasPatterns reports whether the topics depend on what exists.
func (s Subscription) HasPatterns() bool { return len(s.patterns) > 0 }

// Names returns the topics given by name.
func (s Subscription) Names() []string { return slices.Clone(s.names) }

// Match returns the topics to read, sorted, given the topics that exist:
// every topic given by name (whether it exists yet or not, as without
// patterns) and every existing topic a pattern matches and nothing
// excludes.
func (s Subscription) Match(existing []string) []string {
	out := slices.Clone(s.names)
	for _, t := range existing {
		if strings.HasPrefix(t, "__") || slices.Contains(s.never, t) || slices.Contains(out, t) {
			continue
		}
		if slices.ContainsFunc(s.patterns, func(re *regexp.Regexp) bool { return re.MatchString(t) }) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
