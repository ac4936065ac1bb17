package actors

import (
	"context"
	"errors"
	"time"

	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/config"
)

// verdict is what becomes of a record whose handler attempt failed.
type verdict int

const (
	verdictRetry      verdict = iota // run it again after a backoff; its key waits
	verdictSkip                      // give up on it and count it done
	verdictDeadLetter                // write it to the dead-letter topic, then count it done
	verdictEscalate                  // restart the tree; it will be delivered again
)

// failurePolicy decides about failed attempts (retry, on_failure). It is pure:
// no clock, no randomness of its own.
type failurePolicy struct {
	maxAttempts int
	backoff     backoff.Policy
	onFailure   config.OnFailure
}

func newFailurePolicy(c config.Consumer) failurePolicy {
	return failurePolicy{
		maxAttempts: c.Retry.MaxAttempts,
		backoff:     backoff.Policy{Initial: c.Retry.InitialBackoff, Max: c.Retry.MaxBackoff, Multiplier: 2, Jitter: 0.2},
		onFailure:   c.OnFailure,
	}
}

// judge decides after the attempts-th failed attempt ended with err. A
// permanent error (wrapping ErrPermanent) skips the remaining attempts; a
// cancellation by a teardown is never retried here (the record comes again
// after the restart).
func (p failurePolicy) judge(err error, attempts int, tearingDown bool) verdict {
	switch {
	case tearingDown && errors.Is(err, context.Canceled):
		return verdictEscalate
	case !errors.Is(err, ErrPermanent) && attempts < p.maxAttempts:
		return verdictRetry
	case p.onFailure == config.OnFailureSkip:
		return verdictSkip
	case p.onFailure == config.OnFailureDLQ:
		return verdictDeadLetter
	default:
		return verdictEscalate
	}
}

// retryDelay is the wait before attempt attempts+1 after a failure with err;
// u is uniform in [0,1). It is the backoff, or longer when err asks for it
// (a RetryAfterError: an endpoint's Retry-After), but never longer than
// max_backoff on that account: the larger of the two, capped.
func (p failurePolicy) retryDelay(attempts int, u float64, err error) time.Duration {
	d := p.backoff.Delay(attempts, u)
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		d = max(d, min(ra.Delay, p.backoff.Max))
	}
	return d
}
