// Package health holds the pure rules by which turbo judges its own health,
// shared by a consumer's liveness probe (actors.Consumer.Live) and a swarm
// node's report to its supervisor (cmd/turbo). Written once so the two
// verdicts cannot drift apart. It imports neither a Kafka client nor the
// actor system, so the supervisor side may use it without linking either.
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
