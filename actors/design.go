package actors

// How package actors is built, for those who work on it. (The package
// documentation, in doc.go, is for those who use it.)
//
// # Glossary (each word means one thing here)
//
//   - consumer: one configured consumer (config.Consumer) and its tree.
//   - tree, generation: a consumer's actors below the restarter; a
//     generation is one incarnation of it, replaced whole after a failure.
//   - restarter: the backoff supervisor at the root of a tree (restarter.go).
//     "supervisor" alone means package supervisor, which supervises
//     processes.
//   - side, Kafka side: what talks to the cluster for the proxy (kafkaSide):
//     kafkaGroup (sarama) or memGroup (memkafka, for actors/harness).
//   - claim: one owned partition as a side reads it (claim.go), from its
//     assignment to its handover or loss. An owned partition is one the
//     group assigned to this member and the member has not let go.
//   - assignment, epoch: one claim's lifetime as the tree sees it; every
//     record carries its assignment's epoch, so nothing of an earlier
//     assignment of a partition touches a later one.
//   - gate, credit: a claim's allowance of records and bytes it may read
//     (gate.go); a record's credit goes back when it finishes.
//   - read-ahead: records sarama delivered to a partition paused for want of
//     credits, waiting outside the budget (claimFlow, Snapshot.ReadAhead).
//   - unit: what the ordering serializes on — a key, a partition, or ""
//     (unordered); at most one record of a unit runs at a time.
//   - pinned: a unit kept busy by a failed record of it that waits (parked
//     for a retry, or on its way to the dead-letter topic).
//   - parked: a failed record waiting for its retry's timer.
//   - handed out: records a scheduler gave to a runner and has not seen
//     finish (schedule.ErrNotHandedOut).
//   - watermark: a partition's lowest unfinished offset: what is committed.
//   - revocation: the group takes a partition back and the member hands it
//     over (drain, final commit). loss: the member's session ended without
//     one, and nothing of the partition is committed any more.
//   - drain: stop taking records and let those running finish. halt: after
//     a failure, start nothing more and drop what waits.
//
// # Topology
//
//	restarter                    restarts the whole tree after any failure (clean slate)
//	└── orchestrator             routes every batch; the only actor that knows the flow
//	    ├── offsetController     per partition: watermark.Tracker (lowest unfinished offset)
//	    ├── coordinator          pipeline.Pipeline (over schedule.Scheduler: the buffer,
//	    │                        the ordering, the runners' batches) + runners
//	    │   └── runner × concurrency   runs the Handler, panics recovered
//	    └── clientProxy          the only actor that talks to Kafka, through its kafkaSide:
//	                             kafkaGroup (sarama), or memGroup (in memory, for actors/harness);
//	                             both run one claim per owned partition (claim.go)
//
// # Message flow (every arrow carries a batch, not a record)
//
//  1. A claim (runClaim, whichever side feeds it) takes credits from its
//     partition's gate and reads at most that many records, charging their
//     bytes, while byte credits last → claimFetched → proxy.
//  2. proxy → orchestrator: recordsFetched → offsetController (trackRecords)
//     and coordinator (scheduleRecords).
//  3. coordinator: Pipeline.Add, then Dispatch gives runnable records to idle runners
//     (runRecords; one record each for slow handlers, small batches for fast
//     ones; a batch's unstarted tail can be taken back, its finished head
//     accounted for early, so a slow record never holds the others). With
//     a BatchHandler a runner's batch is up to batch.max_records, which it
//     hands over in calls (batch.go); a record after a failed one of its
//     unit in a call comes back as pipeline.ErrNotRun and is requeued. What
//     Dispatch gives out is bounded by the rate limit's tokens (SetQuota),
//     an adaptive concurrency limit (SetLimit, actors/adaptive, fed by each
//     ranRecords), and paused partitions (Hold/Release); batch.max_wait and a
//     Retry-After under adaptive concurrency hold it back for a while
//     (fillTurn).
//  4. runner → coordinator: ranRecords; coordinator → orchestrator:
//     recordsFinished (flushed once per mailbox drain).
//  5. orchestrator → offsetController: markDone; every commit_interval (or at
//     once after a large move) it publishes committable watermarks with their
//     metadata → orchestrator → proxy: commitOffsets (marked and committed).
//  6. The coordinator returns each finished record's credit (and bytes) to its
//     partition's gate directly (the gate is the one object shared across
//     goroutines on this path), so the claim goroutine reads again without
//     waiting for the completion to travel through the tree.
//
// # Back-pressure
//
// The budget is concurrency + the read-ahead records in the pipeline
// (fetched and not finished), and max_buffered_bytes of their keys, values
// and headers. Each partition owned has a floor of both (half the lowest
// budget shared evenly), so it always gets credits once its own records
// finished; the rest is a pool lent to the partitions whose client holds
// records to read, up to a ceiling each (an eighth of the pool, an even
// share of it with fewer than eight partitions), and paid
// back first as their records finish (creditPool). The read-ahead sizes
// itself to about a second of work at the rate records finish, between
// 1,000 and max_buffered (readAhead; the proxy samples the rate and resizes
// the pool when it moves by a quarter). A partition out of both stops being
// read and is paused in sarama; the others keep flowing. So a key that
// cannot progress fills its partition's floor and at most the ceiling.
// Bytes are charged as records are read, so a record is read while any
// byte credit is left: a partition overshoots by at most one record of its
// own and one of the pool, and a record larger than the whole share is read
// alone once the records before it finished — never stuck (gate). A
// partition out of records is paused after pauseAfter (short waits are the
// norm under load); one out of bytes at once (what sarama reads ahead costs
// a record's size each). A paused partition is resumed only once the claim
// has used every record sarama delivered before the pause took effect
// (claimFlow), so beyond the budget sarama holds at most about one fetch
// response (Consumer.Fetch.Default, max_buffered_bytes shared among the
// subscription's partitions, 16–256 KiB: partitionFetch) and its channel per
// partition, whatever the backlog — with large records, the one or two read before the pause.
//
// # Revocation (and graceful shutdown, which revokes everything)
//
// sarama closes a revoked claim's channel; the claim goroutine sends
// claimEnding and waits. proxy → orchestrator: partitionRevoked → coordinator
// drops the partition's buffered records (in a rebalance all of them: the
// final commit's metadata lets the next owner skip what finished above the
// watermark; when the member is stopping, or commits carry no metadata,
// those below the highest record started still run first) and answers
// partitionDrained once none of its records runs → offsetController: finalizePartition →
// partitionFinal → proxy: partitionReleased, and the claim goroutine commits
// that watermark before it returns, which is when sarama lets the partition
// go. The wait is bounded by shutdown_timeout; past it the partition is
// released at its last committed watermark, which never passes unfinished
// work.
//
// # Loss (the session ended without a revocation)
//
// A member that can no longer prove its group session — a heartbeat or a
// commit answered UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or FENCED_INSTANCE_ID,
// sarama's session ending while the member is not leaving, or no heartbeat
// answered for a session timeout — may already have seen its partitions
// given to another member. sessionLiveness (pure) judges it from those
// inputs; sessionWatch feeds it (its own heartbeat per interval, on its own
// connection, and the commit errors). Then every claim of the session sends
// claimLost and returns at once, without a handover: proxy → orchestrator:
// partitionLost → coordinator: dropPartition (nothing more of it starts,
// what runs is cancelled — not a failure —, it is reported drained), and
// nothing of it is committed (the next owner starts from the last committed
// watermark and its metadata). The claims' return ends sarama's session and
// the member joins again. This is the Java client's onPartitionsLost, where
// a revocation is its onPartitionsRevoked.
//
// Stop (SIGTERM) = stopIntake: the proxy cancels the consumer group's
// context, every partition goes through the revocation above, the group is
// closed, then the restarter stops the actors. The whole Stop returns
// within shutdown_timeout (stopBudget divides it: revocations expire first,
// then the drain's deadline, then the wait for cancelled handlers); a drain
// that hit its deadline returns ErrUncommitted.
//
// # Failure
//
// A failed attempt (error, panic, or max_handler_time exceeded) is judged by
// failurePolicy: retried after a backoff (no shorter than a RetryAfterError
// in the failure asks, up to max_backoff) while the record is parked in the
// coordinator — holding its unit, so no later record of its key runs first,
// but no runner — or, once attempts run out (at once for ErrPermanent),
// skipped, dead-lettered (the proxy produces it; the key stays pinned until the
// broker acknowledges), or escalated. A runner stops its batch at a failure;
// the rest goes back to the scheduler. A failure caused by the process
// running out of file descriptors (EMFILE, ENFILE: a handler's dial) is not
// the record's: it is retried without using up max_attempts, explained once
// in the log with the RLIMIT_NOFILE values, and counted (Snapshot.FileLimit).
//
// An escalated failure, or a panic in an actor (escalated through protoactor),
// reaches the restarter (treeFailed). The restarter cancels the
// generation's context (running handlers see it), stops the orchestrator,
// waits for it to terminate (bounded by shutdown_timeout), and spawns a new
// generation after backoff.Policy's delay. Records are tagged with their
// partition assignment's epoch, so nothing of an earlier assignment moves a
// later one's watermark.
//
// Before it stops the orchestrator after a handler's (or the dead-letter
// topic's) failure, the restarter has the generation commit what finished,
// whatever the commit ticker did: startDrain{halt} → coordinator: haltRunners
// (no record starts any more; the waiting ones are dropped, unfinished) and
// proxy: stopIntake, so every partition goes through the revocation above
// and its claim commits the watermark — below the failed record and the
// cancelled ones — with the metadata of what finished above it, which the
// next generation skips. This is bounded like a drain (shutdown_timeout);
// past it, or after a panic in an actor (whose bookkeeping cannot be
// trusted), the tree is stopped without that commit. So a restart loop still
// moves the committed offsets and metadata forward, and a record that
// finished is not handled again by the next generation.
//
// # Commit metadata
//
// The offset controller publishes, every commit_interval, each partition's
// watermark with offsetmeta's encoding of the finished offsets above it. A
// claim goroutine reads its partition's committed metadata before its first
// record; records listed there are marked inherited: tracked and marked done
// at once, never run.
//
// # Observation
//
// What a consumer shows costs nothing on the record path beyond a few
// atomic stores: consumerStats holds its counters, and each partition assignment's
// gate holds a partWatch that the actors owning each value write as it
// changes (the proxy the committed offset, high watermark and lag; the
// offset controller when the oldest unfinished record arrived, kept per
// batch by arrivals; the claim its pause; the runners their records in
// flight). A partition's high watermark comes with each batch read from
// it; for one not read for watermarkRefresh (paused, out of credits, or
// caught up) the proxy asks its side every interval (refreshTick →
// kafkaSide.refreshWatermarks), which asks the leaders off the actor, one
// refresh at a time, and answers with watermarksRefreshed (hwmrefresh.go).
// A partition's buffered records are its gate's records in the pipeline
// (settled by the claim, released by the coordinator with their credits,
// per batch under the gate's lock it takes anyway) less those its runners
// hold; the consumer's are their sum, so the two always add up
// (Consumer.Status reads both at once).
// Consumer.Collector reads them when scraped; Live pings the tree
// (pingTree, answered by the orchestrator) and Ready reads the group session.
// With Options.Metrics, runners also observe the handler and buffer-wait
// histograms, sharded by runner so that cores do not share their counters.
//
// New wraps the handler in a tracer (trace.go): a record's W3C
// traceparent reaches the handler's context, and with a TracerProvider each
// attempt is a span.
//
// # State ownership
//
// Each actor owns its state alone. The only shared objects are:
//   - the gates, under a mutex: the claim takes credits (and settles the
//     records it keeps into the gate's count of records in the pipeline);
//     the proxy sizes them; the coordinator gives the credits of records
//     that left the pipeline back (and releases them from that count); the
//     offset controller sets the reading limit that bounds the watermark
//     window (checkWindow). Their partWatch, atomics: the proxy writes the
//     committed offset, high watermark and lag, the offset controller the
//     oldest unfinished record's arrival, the claim its pause, the runners
//     their records in flight; Collector and Partitions read them.
//   - the runBatch (pipeline.Batch), atomics: its runner claims and
//     finishes records, the coordinator takes back what was not started.
//   - consumerStats, atomics, read by anyone.
//   - an envelope's Record, read-only once fetched (the handler's contract);
//     what the pipeline keys on is private (keyArena).

// (This comment is not the package documentation: see doc.go.)
