package actors

import "github.com/turbokafka/turbo/actors/offsetmeta"

// Messages handled by the client proxy. The claim* messages come from the
// goroutines of the proxy's Kafka side (kafkaSide); the others from the
// orchestrator.

// sessionStarted: sarama's Setup ran for a new group session.
type sessionStarted struct {
	sess groupSession
}

// claimStarted: a ConsumeClaim goroutine took a partition.
type claimStarted struct {
	tp        TopicPartition
	epoch     uint64
	gate      *gate
	committed int64              // the group's committed offset when the claim began, -1 if none
	finished  []offsetmeta.Range // what an earlier owner finished above it (read-only)
}

// claimsStarted: claims of one assignment, which start together: the proxy
// shares the budgets among all of them at once, so that none takes the
// share of a partition whose start it has not seen yet.
type claimsStarted struct {
	starts []*claimStarted
}

// claimFetched: records read from a partition within its credits.
type claimFetched struct {
	tp        TopicPartition
	epoch     uint64
	records   []*envelope
	inherited int // records an earlier owner finished (see Record.inherited)
	hwm       int64
}

// claimEnding: the partition is being revoked (or the session ends). The
// claim goroutine waits on reply for the offset to commit before it lets sarama
// release the partition.
type claimEnding struct {
	tp    TopicPartition
	epoch uint64
	reply chan<- finalCommit
}

// claimLost: the partition's session was lost (see sessionLiveness): the
// claim drops it without a handover. Nothing of it may run or be committed
// any more. The proxy answers on reply (buffered) with the last watermark
// it marked, which the member remembers as finished (releasedAt) — it is
// not committed.
type claimLost struct {
	tp    TopicPartition
	epoch uint64
	reply chan<- finalCommit
}

// finalCommit is the proxy's answer to claimEnding.
type finalCommit struct {
	moved  bool // Seek moved the partition: offset is its new position, to be remembered as it is (releasedAt)
	offset int64
	meta   string
	ok     bool // false: nothing to commit
}

// groupStopped: the sarama goroutine has closed the consumer group and exited.
type groupStopped struct {
	err error
}

// refreshTick: time to refresh the high watermarks of the partitions not
// read (hwmrefresh.go).
type refreshTick struct{}

// reshareBudget: share the budgets among the partitions held now
// (clientProxy.reshare).
type reshareBudget struct{}

// readAheadTick: time to size the read-ahead to the rate records finish
// at (readahead.go).
type readAheadTick struct{}

// watermarksRefreshed: the latest offsets of the partitions the proxy asked
// about (kafkaSide.refreshWatermarks); err says what could not be asked
// (marks then holds what could).
type watermarksRefreshed struct {
	marks []partitionHWM
	err   error
}

// revokeTimeout: shutdown_timeout elapsed for a revoked partition.
type revokeTimeout struct {
	tp    TopicPartition
	epoch uint64
}

// stopIntake (orchestrator → proxy): leave the group gracefully.
type stopIntake struct{}

// commitOffsets (orchestrator → proxy): watermarks to commit.
type commitOffsets struct {
	offsets []partitionOffset
	outputs []*envelope // exactly once: written in the transaction that commits offsets
}

// partitionReleased (orchestrator → proxy): the answer to a revocation.
type partitionReleased struct {
	tp      TopicPartition
	epoch   uint64
	fc      finalCommit
	outputs []*envelope // exactly once: written in the transaction of fc
}

// produceOutputs (orchestrator → proxy): records whose outputs to write, in
// the order they finished; each comes back in an outputsWritten.
type produceOutputs struct {
	records []*envelope
}

// produceDeadLetters (orchestrator → proxy): records to write to the
// dead-letter topic.
type produceDeadLetters struct {
	records []recordFailure
}

// deadLetterWritten: the dead-letter producer's outcome for one record.
type deadLetterWritten struct {
	rec *envelope
	err error
}
