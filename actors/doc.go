// Package actors runs Kafka consumers with far more parallelism than their
// topics have partitions, without losing a record, committing past
// unfinished work, or breaking per-key order.
//
// A consumer is a Handler, its configuration and a Kafka connection:
//
//	c, err := actors.New(actors.Options{
//		Consumer: cc,    // config.DefaultConsumer(...) and your changes: topics, group, ordering, concurrency
//		Kafka:    kafka, // brokers, TLS, SASL
//		Handler: actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
//			return process(ctx, rec.Key, rec.Value)
//		}),
//		Logger: log,
//	})
//	if err != nil { ... }           // the options are invalid: nothing started
//	defer c.Stop(context.Background()) // drains, commits what finished, leaves the group
//
// New returns at once; records flow as soon as the consumer has joined its
// group. The handler is called from up to Consumer.Concurrency goroutines at
// a time, never twice at once for the same key (ordering "key"), partition
// ("partition"), or without that constraint ("unordered"), and for each key
// in offset order. The record is read-only, its fields and its bytes: the
// consumer reads it too (for the commit, a retry, the dead-letter topic).
//
// A handler's error fails the record: it is retried with backoff (the
// key's later records wait for it), then skipped, dead-lettered or
// escalated as configured (on_failure). Wrap ErrPermanent to give up at
// once, return RetryAfter(d, err) to ask for a delay. A handler that runs
// past max_handler_time has its context cancelled and fails with
// ErrHandlerTimeout; a panic fails it with a PanicError.
//
// Offsets are committed every commit_interval up to the lowest unfinished
// record of each partition (the watermark); what finished above it travels
// in the commit's metadata, so the next owner of the partition skips it.
// Stop, a revocation and a restart after a failure all commit what
// finished before they let a partition go.
//
// A consumer shows its state through Stats (counters), Partitions (per
// partition), Status (the two read together), Live and Ready (health
// checks), and Collector (Prometheus).
// The consumer's actor tree restarts itself after an escalated failure;
// Failed is closed only when Kafka refuses the connection outright (a
// configuration mistake).
//
// To test a handler against the real runtime without a broker, use the
// actors/harness package; to run a broker in the process, actors/embedded.
//
// How the runtime is built — its actors, its messages and the invariants
// they keep — is described in design.go, for those who work on it.
package actors
