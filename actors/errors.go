package actors

import "errors"

// The errors of this package, by where they surface. Match them with
// errors.Is; each message starts with "actors:".

// Errors a handler returns (wrapped: fmt.Errorf("...: %w", actors.ErrPermanent))
// to tell the consumer what kind of failure it is.
var (
	// ErrPermanent marks a handler error as not worth retrying (a record that
	// can never succeed): the record goes straight to on_failure (fail, skip
	// or the dead-letter topic) without using its remaining attempts.
	ErrPermanent = errors.New("actors: permanent failure")
	// ErrBackpressure marks a handler error as the downstream pushing back
	// (it is overloaded: an HTTP 429 or 503 says the same). It is retried
	// like any failure; under concurrency_mode adaptive it also cuts the
	// consumer's concurrency limit.
	ErrBackpressure = errors.New("actors: the downstream pushed back")
)

// Errors the consumer gives a failed record: what Consumer.Err, the logs and
// a dead-letter record's headers carry.
var (
	// ErrHandlerTimeout is the failure of a handler that ran longer than
	// max_handler_time (its context was cancelled).
	ErrHandlerTimeout = errors.New("actors: handler exceeded max_handler_time")
	// ErrSkipped is the failure of a record its operator skipped
	// (Consumer.Skip): what its dead letter's headers carry.
	ErrSkipped = errors.New("actors: skipped by its operator")
	// ErrHandlerFailed wraps the error of a record whose handler failed for
	// good under on_failure: fail, which made the tree restart.
	ErrHandlerFailed = errors.New("actors: handler failed")
	// ErrDeadLetter wraps a failure to write a record to the dead-letter
	// topic (the tree restarts; the record runs again).
	ErrDeadLetter = errors.New("actors: writing to the dead-letter topic failed")
	// ErrSessionLost is why a member dropped its partitions without handing
	// them over: it could no longer prove that its consumer-group session
	// was alive, so the broker may already have given them to another
	// member. It wraps what showed it (a refusal, or the silence); the
	// records then running are cancelled and run again by the next owner.
	ErrSessionLost = errors.New("actors: consumer group session lost")
)

// Errors Consumer.Stop returns.
var (
	// ErrStopTimeout: the context ended before the tree had drained and
	// stopped.
	ErrStopTimeout = errors.New("actors: consumer did not stop in time")
	// ErrUncommitted: the drain did not finish within shutdown_timeout
	// (Kafka did not answer, or records still ran): the tree was torn down
	// without its final commits, so records that finished since the last
	// commit will be delivered again.
	ErrUncommitted = errors.New("actors: the drain did not finish in time; finished records may not be committed")
	// ErrAbandoned: handlers did not return after their context was
	// cancelled. The consumer stopped (records drained as far as possible,
	// offsets committed, group left), but those handlers' goroutines still
	// run.
	ErrAbandoned = errors.New("actors: handlers never returned and were abandoned")
)

// Configuration errors (New, CheckKafka) wrap config.ErrInvalid; a refusal
// by Kafka at start-up (Consumer.Failed) wraps kafkanet.ErrRefused.
