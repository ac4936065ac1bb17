package harness

import (
	"fmt"
	"slices"

	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// Record is a record to Feed, or one read back from the dead-letter topic.
type Record = memkafka.Record

// Header is a record header.
type Header = memkafka.Header

// Rec returns a record to Feed. An empty key means a record without a key
// (set Key to []byte{} for an empty one).
func Rec(topic string, partition int32, offset int64, key, value string, headers ...Header) Record {
	r := Record{Topic: topic, Partition: partition, Offset: offset, Value: []byte(value), Headers: headers}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

// Seq returns n records of one partition at offsets from, from+1, …, with
// keys "k0" … "k<keys-1>" in turn (no key when keys is 0) and values
// "v<offset>".
func Seq(topic string, partition int32, from int64, n, keys int) []Record {
	out := make([]Record, n)
	for i := range out {
		off := from + int64(i)
		key := ""
		if keys > 0 {
			key = fmt.Sprintf("k%d", i%keys)
		}
		out[i] = Rec(topic, partition, off, key, fmt.Sprintf("v%d", off))
	}
	return out
}

// Feed appends records to their partitions' logs, as producers would.
// Offsets must increase within a partition; gaps are allowed (compaction,
// transaction markers), and the consumer never waits for a missing offset.
func (h *Harness) Feed(recs ...Record) {
	h.t.Helper()
	if err := h.cluster.Produce(recs...); err != nil {
		h.t.Fatalf("harness: Feed: %v", err)
	}
}

// Assign gives partitions of topic to the consumer, as the group
// coordinator would. A partition still being released (after Revoke) is
// taken again once it is.
func (h *Harness) Assign(topic string, partitions ...int32) {
	h.t.Helper()
	sub, err := h.cfg.Consumer.Subscription()
	if err != nil || !slices.Contains(sub.Match([]string{topic}), topic) {
		h.t.Fatalf("harness: Assign: the consumer does not subscribe to %q (topics %v)", topic, h.cfg.Consumer.Topics)
	}
	h.cluster.Assign(tps(topic, partitions)...)
}

// Revoke takes partitions of topic away. It returns at once; the partition
// goes through turbo's revocation in a rebalance (the running records
// finish, the unstarted ones are dropped, the watermark is committed with
// what finished above it) and is released after that: AwaitReleased waits
// for it.
func (h *Harness) Revoke(topic string, partitions ...int32) {
	h.cluster.Revoke(tps(topic, partitions)...)
}

// Lose takes partitions of topic from the consumer without telling it, as a
// broker does that expired the consumer's session (or dropped its member):
// the consumer's commits of them are refused from then on, and the consumer
// must drop them at once — cancel what runs, start nothing more of them,
// commit nothing — as it does when its session is lost. The partitions stay
// assigned: the consumer claims them again afterwards (a new assignment,
// from the last committed offset), as a member that rejoins would.
func (h *Harness) Lose(topic string, partitions ...int32) {
	h.cluster.Lose(tps(topic, partitions)...)
}

// Owned reports whether the consumer owns the partition now.
func (h *Harness) Owned(topic string, partition int32) bool {
	return h.cluster.Partition(memkafka.TopicPartition{Topic: topic, Partition: partition}).Owned
}

// AwaitOwned waits until the consumer owns every one of the partitions.
func (h *Harness) AwaitOwned(topic string, partitions ...int32) {
	h.t.Helper()
	h.Await(fmt.Sprintf("the consumer to hold %s %v", topic, partitions), func() bool {
		for _, p := range partitions {
			if !h.Owned(topic, p) {
				return false
			}
		}
		return true
	})
}

// AwaitReleased waits until the consumer has released every one of the
// partitions (its revocation finished).
func (h *Harness) AwaitReleased(topic string, partitions ...int32) {
	h.t.Helper()
	h.Await(fmt.Sprintf("the consumer to release %s %v", topic, partitions), func() bool {
		for _, p := range partitions {
			if h.Owned(topic, p) {
				return false
			}
		}
		return true
	})
}

func tps(topic string, partitions []int32) []memkafka.TopicPartition {
	out := make([]memkafka.TopicPartition, len(partitions))
	for i, p := range partitions {
		out[i] = memkafka.TopicPartition{Topic: topic, Partition: p}
	}
	return out
}

// Commit is a partition's committed offset as the group holds it.
type Commit struct {
	// Offset is the committed offset: the next record to read, -1 when
	// nothing was committed.
	Offset int64
	// Metadata is the commit metadata as written.
	Metadata string
	// Finished are the offsets above Offset that Metadata records as
	// finished (nil when it records none, or cannot be read).
	Finished []offsetmeta.Range
	// Commits counts the commits that changed the offset or the metadata.
	Commits int
}

// Committed returns the partition's committed offset and metadata.
func (h *Harness) Committed(topic string, partition int32) Commit {
	return decodeCommit(h.cluster.Partition(memkafka.TopicPartition{Topic: topic, Partition: partition}))
}

func decodeCommit(p memkafka.PartitionState) Commit {
	c := Commit{Offset: p.Committed, Metadata: p.Metadata, Commits: p.Commits}
	if p.Committed >= 0 && p.Metadata != "" {
		c.Finished, _ = offsetmeta.Decode(p.Committed, p.Metadata)
	}
	return c
}

// AwaitCommitted waits until the partition's committed offset is at least
// offset, and returns the commit.
func (h *Harness) AwaitCommitted(topic string, partition int32, offset int64) Commit {
	h.t.Helper()
	var c Commit
	h.Await(fmt.Sprintf("%s/%d to be committed at %d", topic, partition, offset), func() bool {
		c = h.Committed(topic, partition)
		return c.Offset >= offset
	})
	return c
}

// AwaitAllCommitted waits until every assigned partition is committed at
// the end of its log: everything fed to the consumer is done.
func (h *Harness) AwaitAllCommitted() {
	h.t.Helper()
	h.Await("every assigned partition to be committed at the end of its log", func() bool {
		for _, tp := range h.cluster.Partitions() {
			p := h.cluster.Partition(tp)
			if p.Assigned && p.Records > 0 && p.Committed < p.End {
				return false
			}
		}
		return true
	})
}

// DeadLetters returns the records written to the dead-letter topic, in
// order, with their headers (the record's own, then turbo-original-topic,
// turbo-original-partition, turbo-original-offset, turbo-error,
// turbo-attempts, turbo-failed-at).
func (h *Harness) DeadLetters() []Record { return h.cluster.DeadLetters() }

// AwaitDeadLetters waits until at least n records were dead-lettered, and
// returns them all.
func (h *Harness) AwaitDeadLetters(n int) []Record {
	h.t.Helper()
	var dead []Record
	h.Await(fmt.Sprintf("%d dead letters", n), func() bool {
		dead = h.cluster.DeadLetters()
		return len(dead) >= n
	})
	return dead
}

// FailDeadLetters makes every later write to the dead-letter topic fail
// with err (nil: succeed again), as a producer whose retries ran out.
func (h *Harness) FailDeadLetters(err error) { h.cluster.FailDeadLetters(err) }

// Outputs returns the records the handlers wrote (actors.Emit), in the
// order they were written; each topic's are numbered from offset 0.
func (h *Harness) Outputs() []Record { return h.cluster.Outputs() }

// AwaitOutputs waits until at least n outputs were written, and returns
// them all.
func (h *Harness) AwaitOutputs(n int) []Record {
	h.t.Helper()
	var outs []Record
	h.Await(fmt.Sprintf("%d outputs", n), func() bool {
		outs = h.cluster.Outputs()
		return len(outs) >= n
	})
	return outs
}

// FailOutputs makes every later output write fail with err (nil: succeed
// again), as a producer whose retries ran out: the consumer restarts, and
// the records whose outputs failed run again.
func (h *Harness) FailOutputs(err error) { h.cluster.FailOutputs(err) }
