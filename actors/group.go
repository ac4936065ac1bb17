package actors

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/config"
)

// pauseAfter is how long a partition may lack credits before it is paused in
// sarama.
const pauseAfter = 100 * time.Millisecond

// pauseOnArrivalFrom is the number of partitions a member holds from which
// a claim without credits takes what sarama delivers at once and pauses its
// partition, rather than leaving it in sarama's channel for pauseAfter (see
// saramaFeed).
const pauseOnArrivalFrom = 64

// kafkaGroup is the client proxy's sarama side. It owns the sarama
// ConsumerGroup and every goroutine around it: the join/consume loop, the
// error drain, the committer, and sarama's ConsumeClaim goroutines. It tells
// the proxy actor what happens by messages and never touches actor state.
type kafkaGroup struct {
	brokers     []string
	groupID     string
	topics      config.Subscription
	partCap     *partitionCap // max_partitions
	joinGate    *joinGate
	refresh     time.Duration // how often the topics matching patterns are looked up
	cfg         *sarama.Config
	budgetBytes int64         // max_buffered_bytes, which sizes the fetches (partitionFetch)
	net         *kafkanet.Net // secures cfg before every attempt to connect
	log         zerolog.Logger
	retry       backoff.Policy
	maxBatch    int
	revokeWait  time.Duration  // upper bound on a revocation handshake
	dlqTopic    string         // "" without a dead-letter topic
	topicIDs    topicIDs       // shared among the claims that start together
	readMeta    bool           // skip what the commit metadata says finished
	auxQueue    int            // dead letters that may wait for the producer
	outputBytes int            // output.max_bytes; 0 without outputs
	txnID       string         // output.exactly_once: the transactional id; "" writes outputs at least once
	stats       *consumerStats // sessions, for health reports

	sideLife // run is its session goroutine

	released *releasedAt // where this consumer let partitions go, for when they come back (kept across generations)
	commits  *committer

	noMatch sync.Once // warned that no topic matches the patterns

	claims     atomic.Int64  // ConsumeClaim calls running
	claimEnded chan struct{} // signalled when one returns

	txnSess  atomic.Pointer[txnSession] // exactly once: the current session, as the proxy and the claims see it
	sessions atomic.Uint64              // sessions begun (txnSession.seq)
	// Exactly once: the claims running (by epoch), with the session and
	// member id they began under (claimAlive).
	claimLives sync.Map
	client     sarama.Client                // the group's, for the session watch
	watch      atomic.Pointer[sessionWatch] // the current session's, nil between sessions
	probes     sync.WaitGroup               // the watches and their probes

	mu    sync.Mutex
	group sarama.ConsumerGroup
	aux   *kafkaAux
	lost  lostClaims // lost claims whose final watermark is still to come
	// metaAhead is what a session's Setup read, in one request, of the
	// commit metadata of the claims it was about to start (metaGen: the
	// session's generation); each of those claims takes its entry.
	metaAhead   map[TopicPartition][]offsetmeta.Range
	metaAheadAt map[TopicPartition]int64 // the committed offset each entry was written with
	metaGen     int32
}

// stuckJoinGrace is how long a stopping group whose claims have all ended
// may take to leave Consume by itself before its client is closed under it.
const stuckJoinGrace = 500 * time.Millisecond

func (g *kafkaGroup) start(send func(msg any)) {
	g.begin(send)
	g.held = &g.stats.suspended
	g.commits = newCommitter(g.stats)
	g.claimEnded = make(chan struct{}, 1)
	go g.run()
}

func (g *kafkaGroup) run() {
	defer close(g.done)
	defer g.stats.sessionEnded()
	client, group, err := g.connect()
	if err != nil {
		g.stopped(nil)
		return
	}
	defer client.Close()
	aux, err := g.connectAux()
	if err != nil {
		_ = group.Close()
		g.stopped(nil)
		return
	}
	g.mu.Lock()
	g.group, g.aux = group, aux
	g.mu.Unlock()
	g.client = client // before Consume: Setup reads it

	var wg sync.WaitGroup
	wg.Go(func() { g.drainErrors(group) })
	wg.Go(g.commits.run)
	consumed := make(chan struct{})
	if g.cfg.Consumer.Group.InstanceId != "" {
		// Only static members: a dynamic member must stay able to send its
		// LeaveGroup, and its rejoin completes as the others rejoin.
		wg.Go(func() { g.unblockStop(client, consumed) })
	}

	g.joinGate.pass(g.ctx.Done())
	failures := 0
	for g.ctx.Err() == nil {
		topics, ctx, endSession := g.subscribe(client)
		if topics == nil {
			continue // nothing to read yet, waited for
		}
		err := group.Consume(ctx, topics, g)
		endSession()
		if g.ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			break
		}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		d := g.retry.Delay(failures, rand.Float64())
		if r := g.net.Explain(err); r != nil {
			// Later in a run (a rotated password, a renewed certificate the
			// brokers do not trust): retried like an outage, and shown in
			// the stats until a session starts again.
			g.stats.setKafkaError(r.Cause)
			g.log.Error().Str("cause", r.Cause).Stringer("retry_in", d).Msg("Kafka refuses the connection: " + r.Cause + "; rejoining")
		} else {
			g.log.Warn().Err(err).Stringer("retry_in", d).Msg("consumer group session failed; rejoining")
		}
		if !g.sleep(d) {
			break
		}
	}
	close(consumed)
	close(g.commits.stop)
	g.stopWatch()
	err = group.Close()
	wg.Wait()
	g.probes.Wait() // bounded by the probe's read timeout
	aux.close()
	g.stopped(err)
}

// connectAux opens the second connection (commit metadata, dead letters),
// retrying like connect.
func (g *kafkaGroup) connectAux() (*kafkaAux, error) {
	for failures := 1; ; failures++ {
		aux, err := newKafkaAux(g.brokers, g.cfg, auxOptions{groupID: g.groupID, dlqTopic: g.dlqTopic, outputBytes: g.outputBytes,
			txnID: g.txnID, queue: g.auxQueue, stats: g.stats, alive: g.claimAlive}, g.send, g.log)
		if err == nil {
			return aux, nil
		}
		d := g.retry.Delay(failures, rand.Float64())
		g.log.Warn().Err(err).Stringer("retry_in", d).Msg("cannot open the admin connection to Kafka; retrying")
		if !g.sleep(d) {
			return nil, g.ctx.Err()
		}
	}
}

// deadLetter hands records to the dead-letter producer.
func (g *kafkaGroup) deadLetter(fs []recordFailure) {
	g.mu.Lock()
	aux := g.aux
	g.mu.Unlock()
	if aux == nil || aux.producer == nil {
		for _, f := range fs {
			g.deadLettered(f.rec, errNoDeadLetterProducer)
		}
		return
	}
	aux.deadLetter(fs)
}

// session is how the proxy and the claims see sess: itself, or with
// output.exactly_once the txnSession around it (one per session, made by
// Setup), whose commits are transactions.
func (g *kafkaGroup) session(sess sarama.ConsumerGroupSession) groupSession {
	if g.txnID == "" {
		return sess
	}
	if ts := g.txnSess.Load(); ts != nil && ts.sess == sess {
		return ts
	}
	g.mu.Lock()
	aux := g.aux
	g.mu.Unlock()
	ts := &txnSession{aux: aux, sess: sess, seq: g.sessions.Add(1)}
	g.txnSess.Store(ts)
	return ts
}

// claimLife is a running claim's session and the member id it began under.
type claimLife struct {
	sess   sarama.ConsumerGroupSession
	member string
}

// claimAlive reports whether the claim of epoch still runs (its final
// commit included: a revoked claim ends once that commit returns) under
// the member id it began with: only then may a transaction commit its
// offsets and outputs with the group's generation now (a cooperative
// rebalance that kept the partition changes the generation, not the
// claim). A claim lost with the session has ended; a member that was
// dropped from the group and rejoined under a new id (a zombie) holds none
// of its old claims. (The session's context is no guide: a graceful stop
// cancels it while the claims make their final commits.)
func (g *kafkaGroup) claimAlive(epoch uint64) bool {
	v, ok := g.claimLives.Load(epoch)
	if !ok {
		return false
	}
	l := v.(claimLife)
	return l.sess.MemberID() == l.member
}

// transact implements kafkaSide: the aux producer's next transaction holds
// the marks and the records' outputs.
func (g *kafkaGroup) transact(sess groupSession, offsets []partitionOffset, recs []*envelope) {
	ts, ok := sess.(*txnSession)
	if !ok || ts.aux == nil || ts.aux.txn == nil {
		dropOutputs(recs)
		g.send(&transactionFailed{err: errNoOutputProducer})
		return
	}
	ts.aux.txn.transact(ts, offsets, recs)
}

// produceOutputs implements kafkaSide: the aux connection's producer writes
// them.
func (g *kafkaGroup) produceOutputs(recs []*envelope) {
	g.mu.Lock()
	aux := g.aux
	g.mu.Unlock()
	if aux == nil || aux.producer == nil || aux.outputBytes == 0 {
		g.send(&outputsWritten{failed: recs[0], err: errNoOutputProducer})
		return
	}
	aux.produceOutputs(recs)
}

// refreshWatermarks implements kafkaSide: the aux connection asks the
// brokers, on its own goroutine.
func (g *kafkaGroup) refreshWatermarks(q []partitionHWM) {
	g.mu.Lock()
	aux := g.aux
	g.mu.Unlock()
	if aux != nil {
		aux.refreshWatermarks(q)
	}
}

// offsetsAt implements kafkaSide: the aux connection asks the brokers, on
// its refresh goroutine.
func (g *kafkaGroup) offsetsAt(q []partitionHWM) {
	g.mu.Lock()
	aux := g.aux
	g.mu.Unlock()
	if aux == nil {
		g.send(&offsetsFound{err: errNotConnected})
		return
	}
	aux.atReq <- q // capacity 1, and one request at a time
}

// finishedAbove returns the ranges an earlier owner of tp already finished,
// per the commit metadata (none when reading it is off), for a claim of
// generation gen: what Setup read ahead for it, or else read now.
//
// Exactly once, the metadata must be the one written with the claim's
// committed offset (committed): with the metadata of an earlier commit,
// the claim would run again records a later one passed, whose outputs that
// transaction wrote.
func (g *kafkaGroup) finishedAbove(tp TopicPartition, gen int32, committed int64) []offsetmeta.Range {
	g.mu.Lock()
	aux := g.aux
	ranges, ahead := g.metaAhead[tp]
	at := committedAt(g.metaAheadAt, tp)
	ahead = ahead && g.metaGen == gen
	delete(g.metaAhead, tp)
	delete(g.metaAheadAt, tp)
	g.mu.Unlock()
	if !g.readMeta || aux == nil {
		return nil
	}
	if g.txnID == "" {
		if ahead {
			return ranges
		}
		return aux.finishedAbove(tp)
	}
	if ahead && at == max(committed, -1) {
		return ranges
	}
	ranges, ok := aux.finishedAboveAt(tp, committed)
	if !ok {
		g.log.Error().Str("partition", tp.String()).Int64("committed", committed).
			Msg("the commit metadata read does not match the committed offset: records finished above it may run again and write their outputs twice")
	}
	return ranges
}

// readMetaAhead reads the commit metadata of a new session's claims in one
// request, before they start (sarama starts them together; the later
// claims of a cooperative session read their own). Without it the claims
// read one each: at 4,096 partitions, requests queued on the coordinator's
// connection for seconds while no claim could start.
func (g *kafkaGroup) readMetaAhead(sess sarama.ConsumerGroupSession) {
	g.mu.Lock()
	aux := g.aux
	g.metaAhead, g.metaAheadAt = nil, nil
	g.mu.Unlock()
	if !g.readMeta || aux == nil || len(sess.Claims()) == 0 {
		return
	}
	got, at, err := aux.finishedAboveAll(sess.Claims())
	if err != nil {
		g.log.Debug().Err(err).Msg("reading the claims' commit metadata together; each claim reads its own")
		return
	}
	g.mu.Lock()
	g.metaAhead, g.metaAheadAt, g.metaGen = got, at, sess.GenerationID()
	g.mu.Unlock()
}

// topicID returns the id of topic as the broker has it now (zero when
// unknown), which tells releasedAt whether its memory is of this topic.
func (g *kafkaGroup) topicID(topic string) topicID {
	g.mu.Lock()
	aux := g.aux
	g.mu.Unlock()
	if aux == nil {
		return topicID{}
	}
	return g.topicIDs.get(topic, time.Now, func() topicID { return aux.topicID(topic) })
}

// unblockStop closes the client under a stopping static member once every
// claim has ended (nothing is left to commit) but Consume still has not
// returned: it is then waiting for a rebalance that sarama joined (a
// JoinGroup blocks on the broker until every member rejoins, and static
// members that stopped never rejoin before their session times out) and
// would hold the stop for as long. Static members send no LeaveGroup, so
// closing the client loses nothing.
func (g *kafkaGroup) unblockStop(client sarama.Client, consumed <-chan struct{}) {
	select {
	case <-g.ctx.Done():
	case <-consumed:
		return
	}
	for g.claims.Load() > 0 {
		select {
		case <-g.claimEnded:
		case <-consumed:
			return
		}
	}
	t := time.NewTimer(stuckJoinGrace)
	defer t.Stop()
	select {
	case <-consumed:
	case <-t.C:
		g.log.Info().Msg("leaving a rebalance in progress: every partition is released")
		client.Close()
	}
}

// connect creates the client and the consumer group on it (see
// connectRetrying). The caller closes the client after the group.
func (g *kafkaGroup) connect() (sarama.Client, sarama.ConsumerGroup, error) {
	type conn struct {
		client sarama.Client
		group  sarama.ConsumerGroup
	}
	c, err := connectRetrying(dialing{life: &g.sideLife, brokers: g.brokers, net: g.net, stats: g.stats, log: g.log, retry: g.retry},
		func() (conn, error) {
			client, group, err := g.dial()
			return conn{client, group}, err
		})
	return c.client, c.group, err
}

// dial secures the configuration (reading its files again) and makes the
// client and the consumer group.
func (g *kafkaGroup) dial() (sarama.Client, sarama.ConsumerGroup, error) {
	if err := g.net.Apply(g.cfg); err != nil {
		return nil, nil, err
	}
	client, err := sarama.NewClient(g.brokers, g.cfg)
	if err != nil {
		return nil, nil, err
	}
	// Before the consumer group exists nothing reads the fetch size yet:
	// size it to the subscription (partitionFetch), within max_partitions.
	topics, partitions := g.subscribedPartitions(client)
	if err := g.partCap.check(topics, partitions); err != nil {
		client.Close()
		return nil, nil, err
	}
	g.cfg.Consumer.Fetch.Default = partitionFetch(partitions, g.budgetBytes)
	group, err := sarama.NewConsumerGroupFromClient(g.groupID, client)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, group, nil
}

// subscribedPartitions returns the topics the consumer reads now and
// counts their partitions; 0 if they cannot be listed (or none exists
// yet), which sizes fetches as for few partitions. Topics a pattern matches
// later are not counted until the next connection (a restarted tree).
func (g *kafkaGroup) subscribedPartitions(client sarama.Client) ([]string, int) {
	topics, err := topicsRead(client, g.topics)
	if err != nil {
		return nil, 0
	}
	return topics, partitionsOf(client, topics)
}

// partitionsOf counts the partitions of topics as the client's metadata
// has them (a topic it does not know counts 0).
func partitionsOf(client sarama.Client, topics []string) int {
	n := 0
	for _, t := range topics {
		if ps, err := client.Partitions(t); err == nil {
			n += len(ps)
		}
	}
	return n
}

func (g *kafkaGroup) drainErrors(group sarama.ConsumerGroup) {
	for err := range group.Errors() {
		// Mostly refused commits: sarama reports nothing else of them.
		g.stats.commitErrs.Add(1)
		if w := g.watch.Load(); w != nil && memberGone(err) {
			w.commitFailed(err)
		}
		g.log.Warn().Err(err).Msg("kafka consumer error")
	}
}

// requestCommit implements kafkaSide: the committer flushes the offsets
// marked on sess.
func (g *kafkaGroup) requestCommit(sess groupSession) { g.commits.request(sess) }

func (g *kafkaGroup) pause(tp TopicPartition) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.group != nil {
		g.group.Pause(map[string][]int32{tp.Topic: {tp.Partition}})
	}
}

func (g *kafkaGroup) resume(tp TopicPartition) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.group != nil {
		g.group.Resume(map[string][]int32{tp.Topic: {tp.Partition}})
	}
}

// Setup implements sarama.ConsumerGroupHandler.
func (g *kafkaGroup) Setup(sess sarama.ConsumerGroupSession) error {
	w := newSessionWatch(g.client, g.cfg, g.groupID, sess, &g.probes, g.log)
	w.onLost = g.stats.sessionEnded
	g.watch.Store(w)
	g.probes.Go(w.run)
	g.stats.sessionStarted()
	g.stats.setKafkaError("")
	g.sessionStarted(g.session(sess))
	g.readMetaAhead(sess)
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler. Exactly once, a session
// that was lost has the transaction loop commit soon: every claim of it has
// ended (sarama calls Cleanup after the last), so the commit leaves their
// outputs out of the open transaction at once, rather than holding
// read_committed readers of those output partitions until the next
// session's first commit, or until the brokers abort it after the
// transaction timeout (which fences the producer, and restarts the tree).
func (g *kafkaGroup) Cleanup(sarama.ConsumerGroupSession) error {
	lost := false
	if w := g.watch.Load(); w != nil {
		select {
		case <-w.lost:
			lost = true
		default:
		}
	}
	g.stopWatch()
	g.stats.sessionEnded()
	g.mu.Lock()
	aux := g.aux
	g.mu.Unlock()
	if lost && aux != nil && aux.txn != nil {
		aux.txn.commitSoon()
	}
	return nil
}

func (g *kafkaGroup) stopWatch() {
	if w := g.watch.Swap(nil); w != nil {
		w.stop()
	}
}

// ConsumeClaim implements sarama.ConsumerGroupHandler: it reads the
// partition within its credits, forwards batches to the proxy, and on
// revocation waits for the tree to drain the partition and commits its final
// watermark before returning, which is when sarama lets the partition go.
func (g *kafkaGroup) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	g.claims.Add(1)
	defer func() {
		g.claims.Add(-1)
		select {
		case g.claimEnded <- struct{}{}:
		default:
		}
	}()
	tp := TopicPartition{Topic: claim.Topic(), Partition: claim.Partition()}
	w := g.watch.Load() // set by Setup, before any claim
	var lost <-chan struct{}
	if w != nil {
		lost = w.lost
	}
	// Read before any record: the first records may be among them. A lost
	// claim of the partition may still be giving back what it finished.
	if !g.lost.settled(tp, g.revokeWait, sess.Context().Done()) {
		g.log.Warn().Str("partition", tp.String()).Stringer("waited", g.revokeWait).
			Msg("the partition's lost claim did not give back what it finished in time: records it finished since its last commit may run again")
	}
	id := g.topicID(tp.Topic)
	finished := g.finishedAbove(tp, sess.GenerationID(), claim.InitialOffset())
	if g.txnID == "" {
		// Exactly once, what this member finished counts only once its
		// transaction commits, and the committed metadata says so: a
		// record of an aborted one runs again (its outputs went with it).
		finished = g.released.finished(tp, id, claim.InitialOffset(), finished)
	}
	g.log.Debug().Str("partition", tp.String()).Int64("committed", claim.InitialOffset()).
		Int32("generation", sess.GenerationID()).Any("finished", finished).Msg("claim starts")
	// InitialOffset is the committed offset, or sarama's OffsetOldest or
	// OffsetNewest (negative) when there is none.
	c := g.newClaim(claimSpec{tp: tp, committed: claim.InitialOffset(), finished: finished, maxBatch: g.maxBatch,
		revokeWait: g.revokeWait, lost: lost, sess: g.session(sess), log: g.log})
	// Before the claim can be lost: a lost claim's final watermark may come
	// after it has gone (rememberLost).
	g.lost.expect(c.epoch, tp, id)
	if g.txnID != "" {
		g.claimLives.Store(c.epoch, claimLife{sess: sess, member: sess.MemberID()})
		defer g.claimLives.Delete(c.epoch) // after the final commit
	}
	c.start()

	// sarama keeps a partition's pause across its reassignment: a claim
	// revoked while paused would leave the partition paused for this
	// member's next claim of it, which would then never get a record.
	g.resume(tp)

	f := &saramaFeed{g: g, sess: sess, claim: claim, msgs: claim.Messages(), w: w, tp: tp, id: id, epoch: c.epoch, gt: c.gate}
	f.starved = time.NewTimer(time.Hour)
	f.starved.Stop()
	defer f.close()
	runClaim(c, f)
	return nil
}

// saramaFeed feeds a claim from sarama's claim channel.
//
// Out of credits, the claim first just waits: sarama's own back-pressure
// (a full channel) holds the partition, and short waits are the norm under
// load. Only a partition starved for pauseAfter is paused in sarama (so it
// is not fetched at all); from then on the claim reads what sarama had
// buffered into flow's read-ahead records, and resumes the partition only once
// they are all used (see claimFlow: that is what bounds memory).
//
// Which of two sarama stalls to risk depends on how many partitions the
// member holds. sarama fetches from a broker in one loop that, after each
// fetch, waits until every partition's share of the response is in its
// channel, up to Consumer.MaxProcessingTime (100 ms), and an abandoned
// partition rejoins the loop through a 100 ms batching window during which
// the loop waits too. A claim that leaves a full channel unread holds every
// partition of the broker that long. With a few partitions, waiting is still
// the better choice: pausing at once would make every partition of a broker
// paused at the same time, and sarama naps 100 ms then. With many, some
// claim is always starved with a full channel, and the loop stalled on
// nearly every fetch: from pauseOnArrivalFrom partitions a claim without
// credits takes each record sarama delivers into its read-ahead at once and
// pauses the partition. (Measured on Kafka 4.4.0, 1,000,000 records, no-op:
// at 4,096 partitions, 140-300 fetch rounds waiting against 20-40 in most
// runs pausing at once; at 8, 1.9 s waiting against 3.8-4.1 s pausing at
// once; at 64, the same either way.)
type saramaFeed struct {
	g       *kafkaGroup
	sess    sarama.ConsumerGroupSession
	claim   sarama.ConsumerGroupClaim
	msgs    <-chan *sarama.ConsumerMessage
	w       *sessionWatch // nil: no watch (the claim is never lost)
	tp      TopicPartition
	id      topicID // the topic's id when the claim started, for releasedAt
	epoch   uint64
	gt      *gate
	flow    claimFlow[*sarama.ConsumerMessage]
	starved *time.Timer
	closed  bool // msgs closed while a batch was assembled
}

// close gives back the stats of what the claim still had read ahead, or paused.
func (f *saramaFeed) close() {
	f.starved.Stop()
	f.g.stats.readAhead.Add(-int64(f.flow.readAheadLen()))
	if f.flow.isPaused() {
		f.g.stats.setPaused(f.gt, false)
	}
}

// lost is the session watch's loss channel (nil without a watch: never).
func (f *saramaFeed) lost() <-chan struct{} {
	if f.w == nil {
		return nil
	}
	return f.w.lost
}

// idle implements claimFeed: it pauses a partition starved of credits, and
// once paused keeps reading sarama's channel into flow's read-ahead records (a
// cooperative revocation is announced only by the channel closing).
func (f *saramaFeed) idle(gt *gate) claimEnd {
	paused := f.flow.isPaused()
	if !paused && gt.outOfBytes() {
		// Out of bytes, pause at once: each record sarama reads ahead
		// meanwhile costs a record's size, and pauseAfter is ample time to
		// fill its channel with large records.
		f.flow.starved()
		f.pause()
		return readOn
	}
	// Not paused: wait for credits, and pause after pauseAfter without, or
	// (from pauseOnArrivalFrom partitions) as soon as sarama delivers a
	// record. Paused: read sarama's channel meanwhile. (A nil channel is
	// never ready, so one select serves all three.)
	var starved <-chan time.Time
	var msgs <-chan *sarama.ConsumerMessage
	if paused || f.g.stats.assigned.Load() >= pauseOnArrivalFrom {
		msgs = f.msgs
	}
	if !paused {
		f.starved.Reset(pauseAfter)
		defer f.starved.Stop()
		starved = f.starved.C
	}
	select {
	case <-gt.wake:
	case <-starved:
		if f.flow.starved() {
			f.pause()
		}
	case m, ok := <-msgs:
		if !ok {
			return f.end()
		}
		f.flow.hold(m)
		// And whatever else sarama has delivered already, in this one
		// call: a claim without credits would otherwise go round the
		// loop, asking its gate for credits, once per record.
		n, closed := int64(1), false
	drain:
		for {
			select {
			case m, ok = <-msgs:
				if closed = !ok; closed {
					break drain
				}
				f.flow.hold(m)
				n++
			default:
				break drain
			}
		}
		f.g.stats.readAhead.Add(n)
		if closed {
			return f.end()
		}
		if !paused && f.flow.starved() {
			f.pause()
		}
	case <-f.sess.Context().Done():
		return f.end()
	case <-f.lost():
		return endLost
	case <-f.g.abort:
		return endAborted
	}
	return readOn
}

func (f *saramaFeed) pause() {
	f.g.pause(f.tp)
	f.g.stats.setPaused(f.gt, true)
}

// first implements claimFeed: read-ahead records come before sarama's channel.
func (f *saramaFeed) first(int) (*sarama.ConsumerMessage, claimEnd) {
	if f.flow.resume() {
		f.g.resume(f.tp)
		f.g.stats.setPaused(f.gt, false)
	}
	if m, ok := f.flow.next(); ok {
		f.g.stats.readAhead.Add(-1)
		return m, readOn
	}
	// A session can end without closing msgs: sarama keeps them open while
	// it rejoins a cooperative rebalance.
	select {
	case m, ok := <-f.msgs:
		if !ok {
			return nil, f.end()
		}
		return m, readOn
	case <-f.sess.Context().Done():
		return nil, f.end()
	case <-f.lost():
		return nil, endLost
	case <-f.g.abort:
		return nil, endAborted
	}
}

// next implements claimFeed: read-ahead records, then what sarama's channel has
// ready.
func (f *saramaFeed) next() (*sarama.ConsumerMessage, bool) {
	if m, ok := f.flow.next(); ok {
		f.g.stats.readAhead.Add(-1)
		return m, true
	}
	if f.closed {
		return nil, false
	}
	select {
	case m, ok := <-f.msgs:
		if !ok {
			f.closed = true
			return nil, false
		}
		return m, true
	default:
		return nil, false
	}
}

// unread implements claimFeed: m becomes a read-ahead record again.
func (f *saramaFeed) unread(m *sarama.ConsumerMessage) {
	f.flow.unread(m)
	f.g.stats.readAhead.Add(1)
}

// ready implements claimFeed: the records read ahead, and those in sarama's
// channel.
func (f *saramaFeed) ready() int {
	if f.closed {
		return f.flow.readAheadLen()
	}
	return f.flow.readAheadLen() + len(f.msgs)
}

// backlog implements claimFeed: what sarama's channel and the read-ahead
// hold.
func (f *saramaFeed) backlog() int { return f.ready() }

// hwm implements claimFeed.
func (f *saramaFeed) hwm() int64 { return f.claim.HighWaterMarkOffset() }

// batched implements claimFeed.
func (f *saramaFeed) batched() claimEnd {
	if f.closed {
		return f.end()
	}
	return readOn
}

// fill implements claimFeed.
func (f *saramaFeed) fill(rec *Record, m *sarama.ConsumerMessage) {
	// Field by field into the zeroed record: a composite literal assigned
	// through the pointer is built aside and copied over with a bulk write
	// barrier (runtime.wbMove), once per record.
	rec.Topic, rec.Partition, rec.Offset = m.Topic, m.Partition, m.Offset
	rec.Key, rec.Value, rec.Timestamp = m.Key, m.Value, m.Timestamp
	if len(m.Headers) > 0 {
		rec.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			rec.Headers[i] = Header{Key: string(h.Key), Value: h.Value}
		}
	}
}

// end is a claim whose records stopped coming or whose session ended: a
// revocation (the session goes on) is handed over; the end of a session the
// member did not leave is a loss.
func (f *saramaFeed) end() claimEnd {
	if f.w == nil {
		return endRevoked
	}
	if f.sess.Context().Err() != nil {
		cause := sessionCause(f.sess.Context())
		f.w.sessionEnded(cause, f.g.ctx.Err() != nil || errors.Is(cause, errResubscribed))
	}
	if f.w.reason() != nil {
		return endLost
	}
	return endRevoked
}

// ended implements claimFeed: it remembers the final watermark with the id
// of the topic the claim read. A claim lost during its handover may still
// get its final watermark (rememberLost).
//
// A partition of a lost session is dropped: no handover, no commit (it
// would be refused, and must not be needed: the next owner starts from the
// last committed watermark and its metadata). The claim returns at once,
// which ends sarama's session, and the member joins again. What it had
// finished is still remembered: skipping it when the partition comes back
// never loses a record.
func (f *saramaFeed) ended(end claimEnd, fc finalCommit) {
	if f.g.txnID == "" { // exactly once: see ConsumeClaim
		f.g.released.remember(f.tp, f.id, fc)
	}
	if end == endLost {
		return
	}
	select {
	case <-f.lost(): // its final watermark may still come (rememberLost)
	default:
		f.g.lost.forget(f.epoch)
	}
}

// rememberLost implements kafkaSide (lostClaims).
func (g *kafkaGroup) rememberLost(tp TopicPartition, epoch uint64, fc finalCommit) {
	if g.txnID != "" { // exactly once: see ConsumeClaim
		g.lost.forget(epoch)
		return
	}
	g.lost.rememberLost(g.released, tp, epoch, fc)
}

// subscribe returns the topics of the next session and the context it runs
// under, and ends the session's watch. Without patterns those are the
// named topics and the group's context. With patterns they are the topics
// matching now; a watch looks them up again every metadata_refresh and
// ends the session when they change, so the group joins again with them
// (Kafka rebalances the group, as for Java's pattern subscription). When
// nothing matches yet, or the lookup fails, it waits a refresh interval and
// returns nil topics.
func (g *kafkaGroup) subscribe(client sarama.Client) ([]string, context.Context, func()) {
	if !g.topics.HasPatterns() {
		return g.topics.Names(), g.ctx, func() {}
	}
	matched, err := g.matching(client)
	var topics []string
	if err == nil {
		topics = g.partCap.admit(matched, func(ts []string) int { return partitionsOf(client, ts) })
	}
	if err != nil || len(topics) == 0 {
		switch {
		case err != nil:
			g.log.Warn().Err(err).Stringer("retry_in", g.refresh).Msg("cannot list the topics to match the patterns against")
		case len(matched) > 0: // over max_partitions: admit said so
		default:
			g.noMatch.Do(func() {
				g.log.Warn().Stringer("metadata_refresh", g.refresh).Msg("no topic matches the consumer's patterns yet; looking again every metadata_refresh")
			})
		}
		g.sleep(g.refresh)
		return nil, nil, nil
	}
	sub, cancel := context.WithCancelCause(g.ctx)
	ctx := context.WithValue(sub, subscriptionKey{}, sub)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTicker(g.refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now, err := g.matching(client)
			if err != nil {
				continue
			}
			if now = g.partCap.admit(now, func(ts []string) int { return partitionsOf(client, ts) }); len(now) == 0 || slices.Equal(now, topics) {
				continue
			}
			g.log.Info().Strs("topics", now).Strs("before", topics).Msg("the topics matching the patterns changed: joining the group again with them")
			cancel(errResubscribed)
			return
		}
	}()
	g.log.Debug().Strs("topics", topics).Msg("subscribing to the topics matching the patterns")
	return topics, ctx, func() {
		cancel(nil)
		<-watched
	}
}

// errResubscribed ends a session whose member joins again at once with the
// topics now matching its patterns: it stays in its group, so the
// session's partitions are handed over as in a revocation (running records
// finish, what finished is committed), not dropped as a lost session's.
var errResubscribed = errors.New("the topics matching the patterns changed")

// subscriptionKey holds, in the context a sarama session runs under, that
// context's own cancellable parent: the one ended with errResubscribed.
type subscriptionKey struct{}

// sessionCause is why the sarama session whose context is ctx ended. The
// cause of the subscription it ran under comes first: cancelling a context
// closes its Done channel before it reaches its children, so sarama, woken
// by that, may end the session with a plain cancel (release's) before the
// subscription's cause arrives — and a resubscription must not read as a
// lost session.
func sessionCause(ctx context.Context) error {
	if sub, ok := ctx.Value(subscriptionKey{}).(context.Context); ok && sub.Err() != nil {
		return context.Cause(sub)
	}
	return context.Cause(ctx)
}

// matching asks the brokers for every topic and returns those the
// subscription reads.
func (g *kafkaGroup) matching(client sarama.Client) ([]string, error) {
	return topicsRead(client, g.topics)
}

// topicsRead returns the topics sub reads now: its topics by name and, when
// it has patterns, the topics the brokers list that they match. The group
// subscribes with it, and WaitCaughtUp judges what it returns, so the two
// cannot disagree on a topic (a dead-letter topic a pattern matches).
func topicsRead(client sarama.Client, sub config.Subscription) ([]string, error) {
	if !sub.HasPatterns() {
		return sub.Names(), nil
	}
	if err := client.RefreshMetadata(); err != nil {
		return nil, err
	}
	all, err := client.Topics()
	if err != nil {
		return nil, err
	}
	return sub.Match(all), nil
}

// joinGate holds a consumer's first join until Options.JoinGate returns;
// later joins (a rebalance, a restarted tree) pass at once.
type joinGate struct {
	wait func(done <-chan struct{})
	once sync.Once
}

func (j *joinGate) pass(done <-chan struct{}) {
	if j == nil || j.wait == nil {
		return
	}
	j.once.Do(func() { j.wait(done) })
}
