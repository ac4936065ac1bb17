package actors

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/config"
)

// memGroup is the client proxy's Kafka side over an in-memory cluster
// (memkafka), for actors/harness. It sends the proxy the same messages as
// kafkaGroup, from the same kinds of goroutines — a session loop, and one
// claim goroutine per owned partition that takes its gate's credits, reads at
// most that many records, and on revocation runs the same handshake
// (handOver) — so the proxy and the rest of the tree run unchanged. It
// leaves out what only sarama needs: pausing a starved partition (nothing is
// fetched ahead here), a committer goroutine (an in-memory commit does not
// block) and a second connection.
//
// It owns its goroutines: kill (or stop, after the handshakes) ends them, and
// done is closed once all have returned.
type memGroup struct {
	cluster    *memkafka.Cluster
	topics     config.Subscription
	newest     bool // initial_offset: newest
	maxBatch   int
	revokeWait time.Duration
	dlqTopic   string
	dlqLimit   int // deadLetterLimit
	readMeta   bool
	stats      *consumerStats
	log        zerolog.Logger

	sideLife
	member *memkafka.Member
	warned sync.Once
}

// memClaim is one owned partition's claim goroutine, as the session loop
// sees it.
type memClaim struct {
	tp         memkafka.TopicPartition
	revoked    chan struct{}
	revokeOnce sync.Once
	lost       chan struct{} // the cluster took the partition away (memkafka.Cluster.Lose)
	loseOnce   sync.Once
	done       chan struct{}
}

func (cl *memClaim) revoke() { cl.revokeOnce.Do(func() { close(cl.revoked) }) }
func (cl *memClaim) lose()   { cl.loseOnce.Do(func() { close(cl.lost) }) }

func (g *memGroup) start(send func(msg any)) {
	g.begin(send)
	g.held = &g.stats.suspended
	// Patterns match the topics the cluster has when the consumer starts:
	// the in-memory cluster's topics do not come and go.
	var existing []string
	for _, tp := range g.cluster.Partitions() {
		existing = append(existing, tp.Topic)
	}
	g.member = g.cluster.Join(g.topics.Match(existing))
	go g.run()
}

// requestCommit commits at once: an in-memory commit never blocks.
func (g *memGroup) requestCommit(sess groupSession) {
	start := time.Now()
	sess.Commit()
	g.stats.observeCommit(start)
}

// rememberLost implements kafkaSide: the in-memory side keeps no memory of
// released partitions.
func (g *memGroup) rememberLost(TopicPartition, uint64, finalCommit) {}

// refreshWatermarks implements kafkaSide: the in-memory cluster answers at
// once, without blocking.
func (g *memGroup) refreshWatermarks(q []partitionHWM) {
	for i := range q {
		q[i].hwm = g.member.End(memkafka.TopicPartition{Topic: q[i].tp.Topic, Partition: q[i].tp.Partition})
	}
	g.send(&watermarksRefreshed{marks: q})
}

// offsetsAt implements kafkaSide: the in-memory cluster answers at once.
func (g *memGroup) offsetsAt(q []partitionHWM) {
	for i := range q {
		tp := memkafka.TopicPartition{Topic: q[i].tp.Topic, Partition: q[i].tp.Partition}
		if q[i].at.IsZero() {
			q[i].hwm = g.member.End(tp)
		} else {
			q[i].hwm = g.member.OffsetAt(tp, q[i].at)
		}
	}
	g.send(&offsetsFound{marks: q})
}

func (g *memGroup) deadLetter(fs []recordFailure) {
	for _, f := range fs {
		err := errNoDeadLetterProducer
		if g.dlqTopic != "" {
			err = g.member.DeadLetter(deadLetterRecord(g.dlqTopic, g.dlqLimit, f))
		}
		g.deadLettered(f.rec, err)
	}
}

// transact implements kafkaSide: the in-memory cluster takes the marks and
// the outputs at once (it cannot fail between the two).
func (g *memGroup) transact(sess groupSession, offsets []partitionOffset, recs []*envelope) {
	for _, o := range offsets {
		sess.MarkOffset(o.tp.Topic, o.tp.Partition, o.offset, o.meta)
		sess.ResetOffset(o.tp.Topic, o.tp.Partition, o.offset, o.meta)
	}
	if len(recs) > 0 {
		g.produceOutputs(recs)
	}
}

// produceOutputs implements kafkaSide: the in-memory cluster takes the
// outputs (and, exactly once, the dead letters) at once, or fails them with
// FailOutputs' error.
func (g *memGroup) produceOutputs(recs []*envelope) {
	for i, rec := range recs {
		if rec.deadErr != nil {
			err := errNoDeadLetterProducer
			if g.dlqTopic != "" {
				err = g.member.DeadLetter(deadLetterRecord(g.dlqTopic, g.dlqLimit, recordFailure{rec: rec, err: rec.deadErr}))
			}
			if err != nil {
				if i > 0 {
					g.send(&outputsWritten{written: recs[:i]})
				}
				g.send(&outputsWritten{failed: rec, err: err})
				return
			}
		}
		for _, o := range rec.outputs {
			out := memkafka.Record{Topic: o.Topic, Key: o.Key, Value: o.Value, Timestamp: time.Now()}
			for _, h := range o.Headers {
				out.Headers = append(out.Headers, memkafka.Header{Key: h.Key, Value: h.Value})
			}
			if err := g.member.Output(out); err != nil {
				if i > 0 {
					g.send(&outputsWritten{written: recs[:i]})
				}
				g.send(&outputsWritten{failed: rec, err: err})
				return
			}
		}
	}
	g.send(&outputsWritten{written: recs})
}

// deadLetterRecord is the record as written to the dead-letter topic, with
// the same headers as the sarama producer's deadLetterMessage.
func deadLetterRecord(topic string, limit int, f recordFailure) memkafka.Record {
	key, value, headers := deadLetter(f, time.Now(), limit, func(k string, v []byte) memkafka.Header {
		return memkafka.Header{Key: k, Value: v}
	})
	return memkafka.Record{Topic: topic, Key: key, Value: value, Headers: headers, Timestamp: time.Now()}
}

// run is the session: it claims the partitions the cluster assigns, revokes
// the claims of partitions taken away, and on stop revokes every claim and
// waits for the handshakes.
func (g *memGroup) run() {
	defer close(g.done)
	defer g.stats.sessionEnded()
	defer g.member.Leave()
	var wg sync.WaitGroup
	defer wg.Wait() // first: every claim has returned before the member leaves
	sess := &memSession{member: g.member, poms: make(map[memkafka.TopicPartition]*memPOM)}
	g.stats.reached.Store(true)
	g.stats.sessionStarted()
	g.sessionStarted(sess)
	claims := make(map[memkafka.TopicPartition]*memClaim)
	for {
		changed := g.cluster.Changed() // before looking: no change is missed
		for tp, cl := range claims {
			select {
			case <-cl.done:
				delete(claims, tp)
				continue
			default:
			}
			if g.member.Lost(tp) {
				cl.lose()
			} else if !g.member.Assigned(tp) {
				cl.revoke()
			}
		}
		for _, tp := range g.member.Acquire() {
			cl := &memClaim{tp: tp, revoked: make(chan struct{}), lost: make(chan struct{}), done: make(chan struct{})}
			claims[tp] = cl
			wg.Go(func() {
				g.claim(sess, cl)
				close(cl.done)
				// Released after done is closed: the session loop wakes on
				// the release and must see the claim gone.
				g.member.Release(cl.tp)
			})
		}
		select {
		case <-changed:
		case <-g.ctx.Done():
			for _, cl := range claims {
				cl.revoke()
			}
			wg.Wait()
			if !g.aborted() { // killed: the proxy is gone
				g.stopped(nil)
			}
			return
		}
	}
}

// claim reads one partition within its gate's credits, like
// kafkaGroup.ConsumeClaim, from the committed offset (or the initial one),
// and hands it over when revoked.
func (g *memGroup) claim(sess *memSession, cl *memClaim) {
	tp := TopicPartition{Topic: cl.tp.Topic, Partition: cl.tp.Partition}
	committed, meta := g.member.Committed(cl.tp)
	var finished []offsetmeta.Range
	if g.readMeta { // read before any record: the first records may be among them
		finished = finishedIn(tp, committed, meta, &g.warned, g.log)
	}
	pos := committed
	if pos < 0 {
		pos = 0
		if g.newest {
			pos = g.member.End(cl.tp)
		}
	}
	sess.open(cl.tp, committed, meta)
	defer sess.close(cl.tp)
	c := g.newClaim(claimSpec{tp: tp, committed: committed, finished: finished, maxBatch: g.maxBatch,
		revokeWait: g.revokeWait, lost: cl.lost, sess: sess, log: g.log})
	c.start()
	runClaim(c, &memFeed{g: g, cl: cl, pos: pos})
}

// memFeed feeds a claim from the in-memory cluster: it reads at most the
// credits taken, from where the last batch ended, and waits for the
// cluster to change when there is nothing to read.
type memFeed struct {
	g    *memGroup
	cl   *memClaim
	pos  int64             // the next offset to read: after the last record returned
	recs []memkafka.Record // the last fetch's records not returned yet
	end  int64             // the partition's end, as of the last fetch
}

// idle implements claimFeed: nothing is fetched ahead, so there is nothing
// to pause.
func (f *memFeed) idle(gt *gate) claimEnd {
	select {
	case <-gt.wake:
		return readOn
	case <-f.cl.revoked:
		return endRevoked
	case <-f.cl.lost:
		return endLost
	case <-f.g.abort:
		return endAborted
	}
}

// first implements claimFeed. What the last fetch read beyond the last
// batch (it ran out of bytes) is read again.
func (f *memFeed) first(n int) (memkafka.Record, claimEnd) {
	for {
		changed := f.g.cluster.Changed() // before looking: no change is missed
		if f.recs, f.end = f.g.member.Fetch(f.cl.tp, f.pos, n); len(f.recs) > 0 {
			m, _ := f.next()
			return m, readOn
		}
		select {
		case <-changed:
		case <-f.cl.revoked:
			return memkafka.Record{}, endRevoked
		case <-f.cl.lost:
			return memkafka.Record{}, endLost
		case <-f.g.abort:
			return memkafka.Record{}, endAborted
		}
	}
}

// next implements claimFeed.
func (f *memFeed) next() (memkafka.Record, bool) {
	if len(f.recs) == 0 {
		return memkafka.Record{}, false
	}
	m := f.recs[0]
	f.recs = f.recs[1:]
	f.pos = m.Offset + 1
	return m, true
}

// unread implements claimFeed: m is read again first.
func (f *memFeed) unread(m memkafka.Record) {
	f.recs = append([]memkafka.Record{m}, f.recs...)
	f.pos = m.Offset
}

// ready implements claimFeed: the rest of the last fetch.
func (f *memFeed) ready() int { return len(f.recs) }

// backlog implements claimFeed: the partition past pos, as of the last
// fetch.
func (f *memFeed) backlog() int { return max(len(f.recs), int(f.end-f.pos)) }

// hwm implements claimFeed.
func (f *memFeed) hwm() int64 { return f.end }

// batched implements claimFeed: what the batch left of the fetch is read
// again from pos. The in-memory partition never ends by itself
// (revocation and loss come through the claim's channels).
func (f *memFeed) batched() claimEnd {
	f.recs = nil
	return readOn
}

// fill implements claimFeed.
func (f *memFeed) fill(rec *Record, m memkafka.Record) {
	rec.Topic, rec.Partition, rec.Offset = m.Topic, m.Partition, m.Offset
	rec.Key, rec.Value, rec.Timestamp = m.Key, m.Value, m.Timestamp
	if len(m.Headers) > 0 {
		rec.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
}

// ended implements claimFeed: the in-memory side keeps no memory of
// released partitions.
func (f *memFeed) ended(end claimEnd, _ finalCommit) {
	if end == endLost {
		tp := TopicPartition{Topic: f.cl.tp.Topic, Partition: f.cl.tp.Partition}
		f.g.log.Warn().Str("partition", tp.String()).Msg("partition lost: dropped without a handover")
	}
}

// memSession is the in-memory group session. It marks offsets per owned
// partition with sarama's rules — MarkOffset only moves forward, ResetOffset
// only back (or to the same offset, with new metadata), both starting from
// the offset committed when the partition was claimed — and Commit writes
// what changed to the cluster, which ignores partitions the member no longer
// holds.
type memSession struct {
	member *memkafka.Member
	mu     sync.Mutex
	poms   map[memkafka.TopicPartition]*memPOM
}

type memPOM struct {
	offset int64
	meta   string
	dirty  bool
}

func (s *memSession) open(tp memkafka.TopicPartition, committed int64, meta string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poms[tp] = &memPOM{offset: committed, meta: meta}
}

func (s *memSession) close(tp memkafka.TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.poms, tp)
}

// MarkOffset implements groupSession.
func (s *memSession) MarkOffset(topic string, partition int32, offset int64, metadata string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.poms[memkafka.TopicPartition{Topic: topic, Partition: partition}]; p != nil && offset > p.offset {
		p.offset, p.meta, p.dirty = offset, metadata, true
	}
}

// ResetOffset implements groupSession.
func (s *memSession) ResetOffset(topic string, partition int32, offset int64, metadata string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.poms[memkafka.TopicPartition{Topic: topic, Partition: partition}]; p != nil && offset <= p.offset {
		p.offset, p.meta, p.dirty = offset, metadata, true
	}
}

// Commit implements groupSession.
func (s *memSession) Commit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp, p := range s.poms {
		if p.dirty {
			s.member.Commit(tp, p.offset, p.meta)
			p.dirty = false
		}
	}
}
