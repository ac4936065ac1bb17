package actors

import (
	"fmt"
	"time"
)

// RetryAfterError is a handler's failure that also says how long the record
// should wait before its next attempt: an endpoint that answered 429 or 503
// with Retry-After, a rate limit with a known reset. Return it with
// RetryAfter; the failure policy finds it with errors.As anywhere in the
// error's chain.
//
// The attempt still counts against retry.max_attempts. The wait before the
// next attempt is the larger of the usual backoff and Delay, capped by
// retry.max_backoff: a retry never comes sooner than the backoff would have
// it, and a huge Delay cannot park a record (and its key) for longer than
// the operator allowed. An error that also wraps ErrPermanent is not retried
// at all.
type RetryAfterError struct {
	// Delay is the earliest the next attempt should start, from the moment
	// the failure is judged; 0 or less asks for no more than the backoff.
	Delay time.Duration
	// Err is the failure itself; it may be nil.
	Err error
}

// RetryAfter wraps err (the attempt's failure) with the wait the record
// should observe before its next attempt. See RetryAfterError.
func RetryAfter(delay time.Duration, err error) error {
	return &RetryAfterError{Delay: delay, Err: err}
}

func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("actors: retry no sooner than %s", e.Delay)
	}
	return fmt.Sprintf("%s (retry no sooner than %s)", e.Err, e.Delay)
}

// Unwrap returns the failure, so errors.Is and errors.As see through the
// wrapper (ErrPermanent, a handler's own error types).
func (e *RetryAfterError) Unwrap() error { return e.Err }
