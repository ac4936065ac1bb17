package actors

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/rs/zerolog"
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

// judge decides after the attempts-th failed attempt (of those that count
// against max_attempts) ended with err. A permanent error (wrapping
// ErrPermanent) skips the remaining attempts; a cancellation by a teardown is
// never retried here (the record comes again after the restart); running
// out of file descriptors is always retried (see outOfFiles).
func (p failurePolicy) judge(err error, attempts int, tearingDown bool) verdict {
	permanent := errors.Is(err, ErrPermanent)
	switch {
	case tearingDown && errors.Is(err, context.Canceled):
		return verdictEscalate
	case !permanent && (attempts < p.maxAttempts || outOfFiles(err)):
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

// outOfFiles reports whether err is the process running out of file
// descriptors: its own limit (EMFILE) or the system's (ENFILE), typically
// when a handler dials. Such a failure says nothing about the record, so it
// must not use up the record's attempts: escalating made a tree restart
// loop (concurrency 200 under `ulimit -n 64`: restarts, nothing committed,
// no hint), and skipping or dead-lettering would drop good records for a
// fault of the process. It is retried with backoff instead, while the
// records that got a descriptor go on; as their connections are reused or
// closed, the retries get through, at the concurrency the limit allows.
func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// reportOutOfFiles explains, once per consumer (the caller counts), what an
// out-of-files failure means and what to do about it.
func reportOutOfFiles(log zerolog.Logger, err error, concurrency int) {
	ev := log.Error().Err(err).Int("concurrency", concurrency)
	if cur, hard, ok := openFilesLimit(); ok {
		ev = ev.Uint64("open_files_limit", cur).Uint64("open_files_hard_limit", hard)
	}
	ev.Msg("the process ran out of file descriptors (RLIMIT_NOFILE, or the system's table for ENFILE): " +
		"raise the limit (ulimit -n, systemd LimitNOFILE=) or lower concurrency; " +
		"these failures are retried with backoff and do not count against retry.max_attempts " +
		"(reported once; counted in Snapshot.FileLimit)")
}
