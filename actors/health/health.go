// Package health holds the pure rule by which a consumer judges a stuck
// handler, shared by the consumer's liveness probe (actors.Consumer.Live)
// and the report a swarm node sends its supervisor (cmd/turbo's node side),
// so the two verdicts cannot drift apart. The supervisor itself does not
// judge handlers: it acts on what the node reports. The package imports
// neither a Kafka client nor the actor system.
package health

import (
	"fmt"
	"time"
)

// StuckReason says what StuckHandler found, in the same words for the
// liveness probe and a swarm node's report.
func StuckReason(ran, maxHandler, grace time.Duration) string {
	return fmt.Sprintf("a handler has run for %s, ignoring its cancellation (max_handler_time %s, shutdown_timeout %s)",
		ran.Round(time.Second), maxHandler, grace)
}

// StuckHandler judges the oldest running handler, started at oldest (zero:
// none runs). It is stuck when it has run for longer than maxHandler plus
// grace: grace is the time it had to notice its cancellation
// (shutdown_timeout), so only a handler that ignores its context counts. A
// maxHandler of 0 or less (unlimited handlers) is never stuck. ran is how
// long the handler has run (0 when none runs or handlers are unlimited),
// for the caller's message.
func StuckHandler(now, oldest time.Time, maxHandler, grace time.Duration) (ran time.Duration, stuck bool) {
	if maxHandler <= 0 || oldest.IsZero() {
		return 0, false
	}
	ran = now.Sub(oldest)
	return ran, ran > maxHandler+grace
}
