package actors

import "github.com/turbokafka/turbo/actors/offsetmeta"

// Messages handled by the orchestrator. It is the only actor that knows the
// whole flow; every other actor reports to it.

// startDrain (restarter → orchestrator): stop intake and finish in-flight
// work. halt (a failure's teardown, handlers already cancelled): start no
// record any more, so each partition drains as soon as its running records
// have returned, and commits what finished.
type startDrain struct {
	halt bool
}

// recordsFetched (client proxy → orchestrator): a batch from one partition, in
// offset order.
type recordsFetched struct {
	records   []*envelope
	inherited int // how many of them an earlier owner already finished
}

// deadLetterDone (client proxy → orchestrator): records the dead-letter
// topic acknowledged, and the error of a write that failed (nil if none)
// with its record.
type deadLetterDone struct {
	written []*envelope
	failed  []*envelope
	err     error
}

// outputsWritten (Kafka side → client proxy → orchestrator): records whose
// outputs the brokers acknowledged, all of them; or, with err, one record
// (failed) of which one could not be written.
type outputsWritten struct {
	written []*envelope
	failed  *envelope
	err     error
	// dropped (exactly once) are records whose outputs a transaction left
	// out: their claims ended uncommitted, and whoever holds their
	// partitions runs them again. Their credits come back.
	dropped []*envelope
}

// partitionAssigned (client proxy → orchestrator), with what an earlier
// owner finished above the committed offset (read-only).
type partitionAssigned struct {
	tp       TopicPartition
	epoch    uint64
	finished []offsetmeta.Range
}

// partitionRevoked (client proxy → orchestrator): Kafka takes the partition
// away; answer with partitionReleased once it is drained and its final
// watermark is known.
type partitionRevoked struct {
	tp    TopicPartition
	epoch uint64
}

// revocationExpired (client proxy → orchestrator): a revoked partition did
// not drain within shutdown_timeout and was released at its last committed
// watermark; none of its buffered records may start any more.
type revocationExpired struct {
	tp    TopicPartition
	epoch uint64
}

// partitionLost (client proxy → orchestrator): the member's group session
// was lost, and with it the partition, which the broker may have given to
// another member already: nothing of it may start any more, what runs is
// cancelled, nothing is committed.
type partitionLost struct {
	tp    TopicPartition
	epoch uint64
}

// intakeStopped (client proxy → orchestrator): the consumer group has closed.
type intakeStopped struct{}

// recordsFinished (coordinator → orchestrator): records whose handler ran.
type recordsFinished struct {
	done   []*envelope     // succeeded, or skipped by policy
	failed []recordFailure // failed for good under on_failure: fail
	dead   []recordFailure // failed for good under on_failure: dlq
}

type recordFailure struct {
	rec *envelope
	err error
}

// partitionDrained (coordinator → orchestrator): a revoked partition has no
// buffered and no running records left.
type partitionDrained struct {
	tp    TopicPartition
	epoch uint64
}

// committable (offset controller → orchestrator): watermarks that moved.
// With output.exactly_once, outputs are the records (with outputs or a dead
// letter) that these watermarks and their metadata pass for the first
// time: they go into the transaction that commits them.
type committable struct {
	offsets []partitionOffset
	outputs []*envelope
}

type partitionOffset struct {
	tp     TopicPartition
	epoch  uint64
	offset int64
	meta   string // commit metadata: finished offsets above offset
}

// partitionFinal (offset controller → orchestrator): the last watermark of a
// released partition; ok is false when no record of it was ever tracked.
type partitionFinal struct {
	tp      TopicPartition
	epoch   uint64
	offset  int64
	meta    string
	ok      bool
	outputs []*envelope // exactly once: what the final watermark passes (committable)
}

// transactionFailed (Kafka side → proxy → orchestrator): a transaction of
// output.exactly_once could not be committed; it was aborted, with the
// offsets it held, so the tree restarts from the last one committed.
type transactionFailed struct {
	err error
}
