package actors

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// memGroup is the client proxy's Kafka side over an in-memory cluster
// (memkafka), for test/harness. It sends the proxy the same messages as
// kafkaGroup, from the same kinds of goroutines — a session loop, and one
// claim goroutine per held partition that takes its gate's credits, reads at
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
	topics     []string
	newest     bool // initial_offset: newest
	maxBatch   int
	revokeWait time.Duration
	dlqTopic   string
	readMeta   bool
	stats      *Stats
	log        zerolog.Logger

	send      func(msg any)
	member    *memkafka.Member
	ctx       context.Context // cancelled to leave the group gracefully
	cancel    context.CancelFunc
	abort     chan struct{} // closed to leave at once, without handshakes
	abortOnce sync.Once
	done      chan struct{} // closed when run has returned
	epochs    atomic.Uint64
	warned    sync.Once
}

// memClaim is one held partition's claim goroutine, as the session loop
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
	g.send = send
	g.member = g.cluster.Join(g.topics)
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.abort = make(chan struct{})
	g.done = make(chan struct{})
	go g.run()
}

func (g *memGroup) stop() { g.cancel() }

func (g *memGroup) kill() <-chan struct{} {
	if g.done == nil {
		return nil
	}
	g.abortOnce.Do(func() { close(g.abort) })
	g.cancel()
	return g.done
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

func (g *memGroup) deadLetter(fs []recordFailure) {
	for _, f := range fs {
		err := errors.New("actors: no dead-letter producer")
		if g.dlqTopic != "" {
			err = g.member.DeadLetter(deadLetterRecord(g.dlqTopic, f))
		}
		g.send(&deadLetterWritten{rec: f.rec, err: err})
	}
}

// deadLetterRecord is the record as written to the dead-letter topic, with
// the same headers as the sarama producer's deadLetterMessage.
func deadLetterRecord(topic string, f recordFailure) memkafka.Record {
	rec := f.rec
	origin := originHeaders(f, time.Now())
	headers := make([]memkafka.Header, 0, len(rec.Headers)+len(origin))
	for _, h := range rec.Headers {
		headers = append(headers, memkafka.Header{Key: h.Key, Value: h.Value})
	}
	for _, h := range origin {
		headers = append(headers, memkafka.Header{Key: h.Key, Value: h.Value})
	}
	return memkafka.Record{Topic: topic, Key: rec.Key, Value: rec.Value, Headers: headers, Timestamp: time.Now()}
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
	g.send(&sessionStarted{sess: sess})
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
				g.send(&groupStopped{})
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
	epoch := g.epochs.Add(1)
	gt := newGate(0, 0) // the proxy sizes it on claimStarted
	g.send(&claimStarted{tp: tp, epoch: epoch, gate: gt})
	for {
		n, room := gt.take(g.maxBatch)
		if n == 0 {
			select {
			case <-gt.wake:
			case <-cl.revoked:
				g.handOver(sess, cl, tp, epoch)
				return
			case <-cl.lost:
				g.lose(tp, epoch)
				return
			case <-g.abort:
				return
			}
			continue
		}
		// Like a claim blocked on sarama's channel, it holds its credits
		// while it waits for records.
		var recs []memkafka.Record
		var end int64
		for {
			changed := g.cluster.Changed()
			if recs, end = g.member.Fetch(cl.tp, pos, n); len(recs) > 0 {
				break
			}
			select {
			case <-changed:
			case <-cl.revoked:
				g.handOver(sess, cl, tp, epoch)
				return
			case <-cl.lost:
				g.lose(tp, epoch)
				return
			case <-g.abort:
				return
			}
		}
		slab := make([]Record, len(recs))
		batch := make([]*Record, 0, len(recs))
		inherited := 0
		var used int64 // bytes of the batch's records that will run
		for i := range recs {
			rec := fillMemRecord(&slab[i], &recs[i], epoch, gt)
			if finished = skipBelow(finished, rec.Offset); len(finished) > 0 && rec.Offset >= finished[0].From {
				rec.inherited = true
				inherited++
			} else {
				used += rec.size
			}
			batch = append(batch, rec)
			if used >= room {
				break // out of bytes: the rest is read again later
			}
		}
		pos = batch[len(batch)-1].Offset + 1
		select {
		case <-cl.lost: // not one more record of a lost partition
			gt.give(n, 0) // nothing of the batch goes on: every credit taken comes back
			g.lose(tp, epoch)
			return
		default:
		}
		// Inherited records never run: their credits come back at once.
		gt.settle(n-len(batch)+inherited, used, pos)
		g.send(&claimFetched{tp: tp, epoch: epoch, records: batch, inherited: inherited, hwm: end})
	}
}

// handOver runs the revocation handshake, unless the group was killed: a
// kill revokes every claim too, and its proxy is gone.
func (g *memGroup) handOver(sess *memSession, cl *memClaim, tp TopicPartition, epoch uint64) {
	if !g.aborted() {
		handOver(g.send, g.abort, cl.lost, g.revokeWait, g.log, sess, tp, epoch)
	}
}

// lose drops a partition the cluster took away (as kafkaGroup.lose): no
// handover, no commit.
func (g *memGroup) lose(tp TopicPartition, epoch uint64) {
	if !g.aborted() {
		g.log.Warn().Str("partition", tp.String()).Msg("partition lost: dropping it without a handover")
		dropLost(g.send, g.abort, tp, epoch)
	}
}

func (g *memGroup) aborted() bool {
	select {
	case <-g.abort:
		return true
	default:
		return false
	}
}

func fillMemRecord(rec *Record, m *memkafka.Record, epoch uint64, gt *gate) *Record {
	*rec = Record{
		Topic:     m.Topic,
		Partition: m.Partition,
		Offset:    m.Offset,
		Key:       m.Key,
		Value:     m.Value,
		Timestamp: m.Timestamp,
		epoch:     epoch,
		gate:      gt,
	}
	if len(m.Headers) > 0 {
		rec.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	rec.size = recordSize(rec)
	return rec
}

// memSession is the in-memory group session. It marks offsets per held
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
