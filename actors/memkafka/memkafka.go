// Package memkafka is an in-memory stand-in for what one turbo consumer sees
// of Kafka: a log per partition, the partitions the group assigns to the
// consumer, the group's committed offsets with their metadata, and a
// dead-letter topic. It knows nothing of turbo's actors: actors/harness
// starts a consumer whose Kafka side is a Cluster in place of sarama (the
// side speaks to it as a Member) and drives the Cluster from a test.
//
// It is not a Kafka implementation: no brokers, no protocol, no rebalancing
// of its own. The test decides the assignment (Assign, Revoke), and the
// consumer's member claims and releases partitions the way a consumer-group
// member does: a partition is held by at most one member at a time, a member
// reads from the committed offset (or the initial one), commits only what it
// holds, and a new member (a restarted tree) reads again from what was
// committed.
//
// Use it through actors/harness; this API serves the harness and may change.
package memkafka

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record of a partition's log (or of the dead-letter topic).
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte // nil: no key
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// TP returns the record's partition.
func (r Record) TP() TopicPartition { return TopicPartition{Topic: r.Topic, Partition: r.Partition} }

// Header returns the value of the record's last header named key.
func (r Record) Header(key string) (string, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value), true
		}
	}
	return "", false
}

// ErrOffsetOrder is returned by Produce for a record whose offset is not
// above the last one of its partition: a log only grows. Gaps are allowed
// (compacted topics, transaction markers).
var ErrOffsetOrder = errors.New("memkafka: offsets must increase within a partition")

// Cluster is the in-memory cluster. It is safe for concurrent use.
type Cluster struct {
	mu      sync.Mutex
	parts   map[TopicPartition]*partition
	dead    []Record
	deadErr error
	outs    []Record         // written by handlers (Output), in order
	outN    map[string]int64 // outputs per topic
	outErr  error
	members int
	changed chan struct{} // closed (and replaced) on every change
}

type partition struct {
	log       []Record // ascending offsets
	assigned  bool     // the group gives it to the consumer
	owner     int      // member holding it, 0 if none
	lostBy    int      // member it was taken from by Lose, until that member releases it; 0 if none
	claims    int      // times a member took it
	committed int64    // -1 if nothing committed
	meta      string
	commits   int
}

// New returns an empty cluster.
func New() *Cluster {
	return &Cluster{parts: make(map[TopicPartition]*partition), changed: make(chan struct{})}
}

// Changed returns a channel closed at the next change of anything in the
// cluster (records, assignment, ownership, commits, dead letters): read it
// before checking a condition, then wait on it, and no change is missed.
func (c *Cluster) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Cluster) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Cluster) partLocked(tp TopicPartition) *partition {
	p := c.parts[tp]
	if p == nil {
		p = &partition{committed: -1}
		c.parts[tp] = p
	}
	return p
}

// Produce appends records to their partitions' logs. Each record's offset
// must be above the last one of its partition; records are copied. On an
// error, the records before the offending one were appended.
func (c *Cluster) Produce(recs ...Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.notifyLocked()
	for _, r := range recs {
		p := c.partLocked(r.TP())
		if r.Offset < 0 {
			return fmt.Errorf("%w: %s@%d is negative", ErrOffsetOrder, r.TP(), r.Offset)
		}
		if n := len(p.log); n > 0 && r.Offset <= p.log[n-1].Offset {
			return fmt.Errorf("%w: %s@%d after offset %d", ErrOffsetOrder, r.TP(), r.Offset, p.log[n-1].Offset)
		}
		p.log = append(p.log, clone(r))
	}
	return nil
}

func clone(r Record) Record {
	if r.Key != nil {
		r.Key = slices.Clone(r.Key)
	}
	r.Value = slices.Clone(r.Value)
	if r.Headers != nil {
		hs := make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = Header{Key: h.Key, Value: slices.Clone(h.Value)}
		}
		r.Headers = hs
	}
	return r
}

// Assign gives partitions to the consumer's group: its member claims them
// (once any earlier holder released them).
func (c *Cluster) Assign(tps ...TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		c.partLocked(tp).assigned = true
	}
	c.notifyLocked()
}

// Revoke takes partitions away: the member holding one goes through its
// revocation and releases it (Partition tells when).
func (c *Cluster) Revoke(tps ...TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		c.partLocked(tp).assigned = false
	}
	c.notifyLocked()
}

// Lose takes partitions from the member holding them without telling it, as
// a broker does when it expires a member's session: the member's commits of
// them are refused from now on, and the member learns of the loss only when
// it looks (Member.Lost). Unlike Revoke, nothing waits for the member: the
// partitions stay assigned, and the member may claim them again — a new
// assignment — once it has released the lost claim.
func (c *Cluster) Lose(tps ...TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		if p := c.partLocked(tp); p.owner != 0 {
			p.lostBy, p.owner = p.owner, 0
		}
	}
	c.notifyLocked()
}

// PartitionState is what the cluster knows of one partition.
type PartitionState struct {
	End       int64  // the offset after the last record (0 for an empty log)
	Records   int    // records in the log
	Assigned  bool   // the group gives it to the consumer
	Owned     bool   // a member owns it now (claimed, not yet released)
	Claims    int    // times a member took it (each a new assignment)
	Committed int64  // the committed offset, -1 if none
	Metadata  string // the committed metadata
	Commits   int    // commits that changed the offset or the metadata
}

// Partition returns a partition's state.
func (c *Cluster) Partition(tp TopicPartition) PartitionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.parts[tp]
	if p == nil {
		return PartitionState{Committed: -1}
	}
	return PartitionState{End: p.end(), Records: len(p.log), Assigned: p.assigned, Owned: p.owner != 0, Claims: p.claims,
		Committed: p.committed, Metadata: p.meta, Commits: p.commits}
}

// Partitions returns every partition the cluster knows, sorted.
func (c *Cluster) Partitions() []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicPartition, 0, len(c.parts))
	for tp := range c.parts {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// DeadLetters returns the records written to the dead-letter topic, in the
// order they were written.
func (c *Cluster) DeadLetters() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dead)
}

// Outputs returns the records handlers wrote (Member.Output), in the order
// they were written; each topic's have offsets 0, 1, 2, … (one partition).
func (c *Cluster) Outputs() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.outs)
}

// FailOutputs makes every later output write fail with err (nil: succeed
// again), as a producer whose retries ran out would.
func (c *Cluster) FailOutputs(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outErr = err
}

// FailDeadLetters makes every later dead-letter write fail with err (nil:
// succeed again), as a producer whose retries ran out would.
func (c *Cluster) FailDeadLetters(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadErr = err
}

func (p *partition) end() int64 {
	if len(p.log) == 0 {
		return 0
	}
	return p.log[len(p.log)-1].Offset + 1
}

// Member is one consumer-group member: one generation of a consumer's tree.
type Member struct {
	c      *Cluster
	id     int
	topics []string
}

// Join adds a member subscribed to topics.
func (c *Cluster) Join(topics []string) *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members++
	return &Member{c: c, id: c.members, topics: slices.Clone(topics)}
}

// Acquire takes every partition of the member's topics that is assigned and
// held by nobody, and returns them sorted. Each is a new assignment.
func (m *Member) Acquire() []TopicPartition {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []TopicPartition
	for tp, p := range c.parts {
		if p.assigned && p.owner == 0 && p.lostBy != m.id && slices.Contains(m.topics, tp.Topic) {
			p.owner = m.id
			p.claims++
			out = append(out, tp)
		}
	}
	if len(out) > 0 {
		c.notifyLocked()
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Assigned reports whether tp is still assigned to the group.
func (m *Member) Assigned(tp TopicPartition) bool {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	p := m.c.parts[tp]
	return p != nil && p.assigned
}

// Lost reports whether tp was taken from the member by Cluster.Lose (and
// the member has not released it since).
func (m *Member) Lost(tp TopicPartition) bool {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	p := m.c.parts[tp]
	return p != nil && p.lostBy == m.id
}

// Committed returns tp's committed offset and metadata (-1 and "" if none).
func (m *Member) Committed(tp TopicPartition) (int64, string) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	p := m.c.parts[tp]
	if p == nil {
		return -1, ""
	}
	return p.committed, p.meta
}

// End returns the offset after tp's last record.
func (m *Member) End(tp TopicPartition) int64 {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if p := m.c.parts[tp]; p != nil {
		return p.end()
	}
	return 0
}

// OffsetAt returns the offset of tp's first record whose timestamp is at or
// after t, as Kafka's ListOffsets by timestamp does, or the offset after
// the last record when none is (Kafka answers -1 there; the caller seeks
// to the end either way).
func (m *Member) OffsetAt(tp TopicPartition, t time.Time) int64 {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	p := m.c.parts[tp]
	if p == nil {
		return 0
	}
	for _, r := range p.log {
		if !r.Timestamp.Before(t) {
			return r.Offset
		}
	}
	return p.end()
}

// Fetch returns up to max records of tp from offset from on (copies of the
// slice; the records' bytes are shared and must not be modified), and the
// offset after the partition's last record.
func (m *Member) Fetch(tp TopicPartition, from int64, max int) ([]Record, int64) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	p := m.c.parts[tp]
	if p == nil {
		return nil, 0
	}
	i, _ := slices.BinarySearchFunc(p.log, from, func(r Record, off int64) int { return cmp.Compare(r.Offset, off) })
	j := min(len(p.log), i+max)
	if i >= j {
		return nil, p.end()
	}
	return slices.Clone(p.log[i:j]), p.end()
}

// Commit sets tp's committed offset and metadata, if the member holds tp
// (a member's commits for partitions it no longer holds are fenced off, as
// the group coordinator fences an old generation). It reports whether the
// commit was applied.
func (m *Member) Commit(tp TopicPartition, offset int64, meta string) bool {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.parts[tp]
	if p == nil || p.owner != m.id {
		return false
	}
	if p.committed != offset || p.meta != meta {
		p.committed, p.meta = offset, meta
		p.commits++
		c.notifyLocked()
	}
	return true
}

// Release gives tp up.
func (m *Member) Release(tp TopicPartition) {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.parts[tp]; p != nil && (p.owner == m.id || p.lostBy == m.id) {
		if p.owner == m.id {
			p.owner = 0
		}
		if p.lostBy == m.id {
			p.lostBy = 0
		}
		c.notifyLocked()
	}
}

// Leave releases whatever the member still holds.
func (m *Member) Leave() {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.parts {
		if p.owner == m.id {
			p.owner = 0
		}
		if p.lostBy == m.id {
			p.lostBy = 0
		}
	}
	c.notifyLocked()
}

// Output writes a record a handler produced (one partition per topic), or
// returns the error set by FailOutputs.
func (m *Member) Output(r Record) error {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outErr != nil {
		return c.outErr
	}
	if c.outN == nil {
		c.outN = make(map[string]int64)
	}
	r.Partition, r.Offset = 0, c.outN[r.Topic]
	c.outN[r.Topic]++
	c.outs = append(c.outs, clone(r))
	c.notifyLocked()
	return nil
}

// DeadLetter writes a record to the dead-letter topic, or returns the error
// set by FailDeadLetters.
func (m *Member) DeadLetter(r Record) error {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadErr != nil {
		return c.deadErr
	}
	r.Partition, r.Offset = 0, int64(len(c.dead)) // one partition
	c.dead = append(c.dead, clone(r))
	c.notifyLocked()
	return nil
}
