package actors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzGroup is the client proxy's franz-go side (kafka.client: franz-go).
// It owns one kgo client per generation of the tree — the group member, its
// commits, the dead-letter producer and the metadata requests all go
// through it — and every goroutine around it: the poll loop, the
// committer, the pattern watch and one claim goroutine per owned partition.
// Like kafkaGroup it tells the proxy what happens by messages and never
// touches actor state; the claims run the same runClaim as the other sides.
//
// Records reach the claims through the poll loop: it polls the client and
// appends each partition's records to that partition's feed (franzFeed),
// which the claim reads within its gate's credits. The client is built with
// BlockRebalanceOnPoll, so a rebalance callback never runs between a poll
// and its delivery: once a revocation callback has run, no record of the
// partition reaches any feed, and a partition assigned again starts a new
// feed that only ever sees records fetched for it.
//
// Group changes come through the client's callbacks, which run on its group
// goroutine and block it: a revocation waits for the claims' handovers
// (running records finish, the final watermark is committed), a loss drops
// the claims without a commit. Claims start once the group's committed
// offsets are known (OnOffsetsFetched), with the commit metadata that came
// with them.
type franzGroup struct {
	brokers     []string
	groupID     string
	topics      config.Subscription
	partCap     *partitionCap // max_partitions
	joinGate    *joinGate
	refresh     time.Duration // how often the topics matching patterns are looked up
	opts        []kgo.Opt     // the client's options but its security and callbacks (franzOpts)
	budgetBytes int64         // max_buffered_bytes, which sizes the fetches (partitionFetch)
	fetch       int32         // bytes fetched of a partition (set by dial)
	protocol    config.GroupProtocol
	instanceID  string // static membership, "" without
	clientID    string
	net         *kafkanet.Net
	log         zerolog.Logger
	retry       backoff.Policy
	maxBatch    int
	revokeWait  time.Duration
	dlqTopic    string
	dlqLimit    int // deadLetterLimit
	readMeta    bool
	stats       *consumerStats
	released    *releasedAt
	// output.exactly_once: the transactional id ("" writes outputs at
	// least once) and the producer client's options but its security.
	txnID   string
	txnOpts []kgo.Opt

	sideLife // run is its session goroutine
	// killCtx bounds the requests a graceful stop still needs (the final
	// commits): unlike sideLife's ctx it is cancelled only by kill.
	killCtx    context.Context
	killCancel context.CancelFunc

	commits *committer
	hwmReq  chan []partitionHWM
	atReq   chan []partitionHWM // offsetsAt
	noMatch sync.Once
	warned  sync.Once // unreadable commit metadata

	mu        sync.Mutex
	cl        *kgo.Client  // nil until connected
	pauses    *fetchPauses // cl's, set with it
	sess      *franzSession
	feeds     map[TopicPartition]*franzFeed
	ending    map[TopicPartition]*franzFeed // claims handing over or dropped, until they return
	assigned  map[TopicPartition]bool       // assigned, their offsets not yet fetched
	lost      lostClaims                    // lost claims whose final watermark is still to come
	topicIDs  map[string]topicID            // as last read, for the commits (OffsetCommit v10 names topics by id)
	idLookups topicIDs                      // shared among the claims that start together
	claims    sync.WaitGroup
	outAcks   outputAcks // at least once: the acknowledged outputs' records, batched

	// Exactly once: the transaction loop and its producer (set by run
	// before the member joins), the sessions begun, the running claims'
	// member ids and losses (claimAlive), and the member's losses so far.
	txn        *txnLoop
	txnProd    *franzTxn
	sessions   atomic.Uint64
	claimLives sync.Map // claim epoch → franzLife
	losses     atomic.Uint64
}

// franzLife is what a running claim began under: the member id, and how
// many times the member had lost its partitions.
type franzLife struct {
	memberID string
	losses   uint64
}

// alive reports whether a claim that began as l may still commit, now that
// the member is memberID and has lost its partitions losses times. Under
// the consumer protocol a member that was fenced (a zombie: its session
// expired) joins again with the same member id and a new member epoch, so
// the member id alone cannot tell that its claims ended with the loss.
func (l franzLife) alive(memberID string, losses uint64) bool {
	return memberID != "" && memberID == l.memberID && losses == l.losses
}

// franzOpts maps turbo's configuration onto the kgo client options of a
// consumer (security and callbacks come later, from franzGroup.dial).
func franzOpts(k config.Kafka, brokers []string, c config.Consumer, shutdownTimeout time.Duration) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(k.ClientID),
		kgo.ConsumerGroup(c.Group),
		kgo.DisableAutoCommit(), // turbo commits watermarks itself, with their metadata
		kgo.BlockRebalanceOnPoll(),
		// As the sarama side: a revoked partition waits for its running
		// records (up to shutdown_timeout) before it is released, and
		// members learn of a rebalance from a heartbeat's answer.
		kgo.RebalanceTimeout(shutdownTimeout + 10*time.Second),
		kgo.HeartbeatInterval(250 * time.Millisecond),
		kgo.SessionTimeout(10 * time.Second),
		kgo.FetchMaxWait(fetchMaxWait),
		// What the client holds beyond turbo's own budget: one fetch per
		// broker, bounded as the sarama side bounds its fetches.
		kgo.FetchMaxBytes(int32(min(max(c.MaxBufferedBytes/4, config.MiB), 50*config.MiB))),
		kgo.FetchMaxPartitionBytes(maxPartitionFetch), // or less, sized to the subscription at dial
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Dead letters: every one the pipeline can hold may wait here, so
		// producing never blocks the proxy.
		kgo.MaxBufferedRecords(franzBufferedRecords(c)),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// As sarama: a dead-letter topic that does not exist yet is created
		// by the brokers that allow it.
		kgo.AllowAutoTopicCreation(),
	}
	if c.Output.Enabled() {
		// An output may be as large as output.max_bytes, plus its framing
		// (the client's default batch bound, 1,000,012 bytes, is below the
		// default output.max_bytes).
		opts = append(opts, kgo.ProducerBatchMaxBytes(outputBatchBytes(c)))
	}
	if c.Output.ExactlyOnce {
		// Read what upstream transactions committed only, and start a
		// partition from an offset no open transaction holds (KIP-447).
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets())
	}
	if c.InitialOffset == config.OffsetNewest {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	}
	if k.GroupProtocol == config.GroupConsumer {
		// KIP-848: the broker assigns; "uniform" is its sticky assignor.
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	} else {
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	if k.GroupInstanceID != "" {
		opts = append(opts, kgo.InstanceID(k.GroupInstanceID))
	}
	return opts
}

func (g *franzGroup) start(send func(msg any)) {
	g.begin(send)
	g.killCtx, g.killCancel = context.WithCancel(context.Background())
	g.held = &g.stats.suspended
	g.commits = newCommitter(g.stats)
	g.hwmReq = make(chan []partitionHWM)
	g.atReq = make(chan []partitionHWM, 1)
	g.feeds = make(map[TopicPartition]*franzFeed)
	g.ending = make(map[TopicPartition]*franzFeed)
	g.assigned = make(map[TopicPartition]bool)
	go g.run()
}

func (g *franzGroup) run() {
	defer close(g.done)
	cl, err := g.connect()
	if err != nil {
		g.stopped(nil)
		return
	}
	g.mu.Lock()
	g.cl, g.pauses = cl, newFetchPauses(
		func(m map[string][]int32) { cl.PauseFetchPartitions(m) },
		func(m map[string][]int32) { cl.ResumeFetchPartitions(m) })
	g.mu.Unlock()

	var wg sync.WaitGroup
	if g.txnID != "" {
		if err := g.startTxn(cl); err != nil { // stopped while it retried
			cl.Close()
			g.killCancel()
			g.stopped(nil)
			return
		}
		wg.Go(g.txn.run)
	}
	wg.Go(g.commits.run)
	wg.Go(func() { g.watermarks(cl) })
	acksDone := make(chan struct{})
	wg.Go(func() { g.outAcks.run(g.send, acksDone) })
	g.joinGate.pass(g.ctx.Done())
	if g.ctx.Err() == nil {
		watch, ctx := sync.WaitGroup{}, g.ctx
		watch.Go(func() { g.subscribe(ctx, cl) })
		g.poll(cl)
		watch.Wait()
	}
	if g.protocol == config.GroupConsumer {
		// The consumer protocol's heartbeats wait for the assignment
		// callbacks: held off, they would stop, and the broker drop the
		// member in its drain. There the final commits follow the member
		// epoch instead (franzSession.Commit), and partitions assigned
		// now start no claim (onFetched).
		cl.AllowRebalance()
	}
	if !g.aborted() {
		// Hand every partition over (drain, final commit) while still a
		// member of the group. Under the classic protocol the last poll
		// holds a rebalance that begins meanwhile (another member
		// leaving) off, as the end of a sarama session does: the member
		// keeps heartbeating in its generation, and neither joins the
		// next one under its final commits nor takes on partitions it
		// would only give back. Then leave; a static member keeps its
		// place, as on the sarama side.
		g.endClaims(g.ownedNow(), endRevoked)
	}
	cl.AllowRebalance()
	if !g.aborted() {
		ctx, cancel := context.WithTimeout(context.Background(), leaveWait)
		if err := g.leave(ctx, cl); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			g.log.Warn().Err(err).Msg("leaving the consumer group")
		}
		cancel()
	}
	close(g.commits.stop)
	g.claims.Wait()
	if g.txn != nil {
		g.txn.stop() // after the claims' final commits
		g.txnProd.close()
	}
	memberID, _ := cl.GroupMetadata()
	cl.Close()      // the last outputs' promises have run
	close(acksDone) // then their batch goes
	if !g.aborted() && g.protocol == config.GroupConsumer && g.instanceID != "" && memberID != "" {
		ctx, cancel := context.WithTimeout(g.killCtx, leaveWait)
		if err := g.leaveStatic(ctx, memberID); err != nil {
			g.log.Warn().Err(err).Msg("leaving the consumer group")
		}
		cancel()
	}
	wg.Wait()
	g.endSession()
	g.killCancel()
	g.stopped(nil)
}

// kill implements kafkaSide: the requests of a graceful stop are cut short
// too.
func (g *franzGroup) kill() <-chan struct{} {
	if g.killCancel != nil {
		g.killCancel()
	}
	return g.sideLife.kill()
}

// leave leaves the group after the handovers. A static member of the
// classic protocol stays (the client sends no LeaveGroup for it); one of
// the consumer protocol leaves for a while (leaveStatic).
func (g *franzGroup) leave(ctx context.Context, cl *kgo.Client) error {
	if g.protocol == config.GroupConsumer && g.instanceID != "" {
		return nil // after the client is closed: leaveStatic
	}
	return cl.LeaveGroupContext(ctx)
}

// leaveStatic ends a static member of the consumer protocol, once its
// client is closed, with member epoch -2: its partitions wait for it, or
// for a member with its instance id, until its session times out. It sends
// that heartbeat from a client of its own, because franz-go's leave omits
// the instance id, which Kafka refuses (INVALID_REQUEST), and the member's
// own client would join again meanwhile.
func (g *franzGroup) leaveStatic(ctx context.Context, memberID string) error {
	sec, err := g.net.Franz()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(slices.Concat([]kgo.Opt{kgo.SeedBrokers(g.brokers...), kgo.ClientID(g.clientID)}, sec)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = g.groupID, memberID, -2
	id := g.instanceID
	req.InstanceID = &id
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownMemberID) {
		return err
	}
	return nil
}

// leaveWait bounds a graceful leave after the handovers.
const leaveWait = 5 * time.Second

// connect makes the client and checks that Kafka answers (see
// connectRetrying: the same refusal rules and messages as kafkaGroup's).
func (g *franzGroup) connect() (*kgo.Client, error) {
	return connectRetrying(dialing{life: &g.sideLife, brokers: g.brokers, net: g.net, stats: g.stats, log: g.log, retry: g.retry}, g.dial)
}

// groupProtocolError is kafka.group_protocol asking for what the brokers
// do not offer: a configuration mistake, not an outage.
type groupProtocolError struct{ brokers []string }

func (*groupProtocolError) fatalDial() {}

func (e *groupProtocolError) Error() string {
	return fmt.Sprintf("kafka.group_protocol: consumer needs Kafka 4.0 or later, and the brokers %v do not offer the consumer group protocol (use classic, or upgrade the cluster)", e.brokers)
}

// txnProtocolError is output.exactly_once on brokers that cannot fence a
// stale member's transactional commits: a configuration mistake.
type txnProtocolError struct{ brokers []string }

func (*txnProtocolError) fatalDial() {}

func (e *txnProtocolError) Error() string {
	return fmt.Sprintf("output.exactly_once needs Kafka 2.5 or later, and the brokers %v do not fence a stale member's transactional commits (TxnOffsetCommit v3, KIP-447)", e.brokers)
}

// fencesStaleMembers reports whether the brokers take TxnOffsetCommit v3,
// which carries the member's generation (Kafka 2.5).
func fencesStaleMembers(resp *kmsg.ApiVersionsResponse) bool {
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.TxnOffsetCommit) {
			return k.MaxVersion >= 3
		}
	}
	return false
}

// dialWait bounds the first requests of a new client.
const dialWait = 10 * time.Second

// dial secures the options (reading their files again), makes the client
// and asks the brokers which requests they serve: an answer proves them
// reachable, and tells whether they offer the consumer group protocol.
func (g *franzGroup) dial() (*kgo.Client, error) {
	sec, err := g.net.Franz()
	if err != nil {
		return nil, err
	}
	opts := slices.Concat(g.opts, sec, []kgo.Opt{
		kgo.WithLogger(g.logger()),
		kgo.OnPartitionsAssigned(g.onAssigned),
		kgo.OnOffsetsFetched(g.onFetched),
		kgo.OnPartitionsRevoked(g.onRevoked),
		kgo.OnPartitionsLost(g.onLost),
	})
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(g.ctx, dialWait)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	if g.protocol == config.GroupConsumer && !offersConsumerProtocol(resp) {
		cl.Close()
		return nil, &groupProtocolError{brokers: g.brokers}
	}
	if g.txnID != "" && !fencesStaleMembers(resp) {
		cl.Close()
		return nil, &txnProtocolError{brokers: g.brokers}
	}
	// The fetch size is the client's, fixed when it is made: with many
	// partitions (partitionFetch), make it again, before it joins the group
	// (it joins once it is given topics, in subscribe).
	topics, partitions := g.subscribedPartitions(ctx, cl)
	if err := g.partCap.check(topics, partitions); err != nil {
		cl.Close()
		return nil, err
	}
	g.fetch = partitionFetch(partitions, g.budgetBytes)
	if g.fetch < maxPartitionFetch {
		cl.Close()
		if cl, err = kgo.NewClient(append(opts, kgo.FetchMaxPartitionBytes(g.fetch))...); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// subscribedPartitions returns the topics the consumer reads now and
// counts their partitions; 0 if they cannot be listed (or none exists
// yet), which sizes fetches as for few partitions. Topics a pattern matches
// later are not counted until the next connection (a restarted tree).
func (g *franzGroup) subscribedPartitions(ctx context.Context, cl *kgo.Client) ([]string, int) {
	req := kmsg.NewPtrMetadataRequest()
	if !g.topics.HasPatterns() {
		for _, name := range g.topics.Names() {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, t)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, 0
	}
	partitions := topicSizes(resp)
	topics := g.topics.Match(slices.Sorted(maps.Keys(partitions)))
	return topics, partitions.of(topics)
}

// sizes are topics' partition counts.
type sizes map[string]int

// topicSizes reads the partition counts of a metadata answer's topics.
func topicSizes(resp *kmsg.MetadataResponse) sizes {
	out := make(sizes, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			out[*t.Topic] = len(t.Partitions)
		}
	}
	return out
}

// of counts the partitions of topics.
func (s sizes) of(topics []string) int {
	n := 0
	for _, t := range topics {
		n += s[t]
	}
	return n
}

// logger is the client's logger: with the consumer protocol, a client that
// falls back to the classic one (brokers that offer the request but turn
// the protocol down) ends the consumer as the missing request does.
func (g *franzGroup) logger() franzLogger {
	l := franzLogger{log: g.log, held: &heldNotice{}}
	if g.protocol == config.GroupConsumer {
		l.fallback = func() {
			err := &groupProtocolError{brokers: g.brokers}
			g.log.Error().Str("cause", err.Error()).Msg(err.Error() + "; giving up")
			g.stats.setKafkaError(err.Error())
			g.stats.giveUp(err)
		}
	}
	return l
}

// offersConsumerProtocol reports whether a broker serves the consumer group
// protocol as franz-go speaks it (ConsumerGroupHeartbeat v1, Kafka 4.0).
func offersConsumerProtocol(resp *kmsg.ApiVersionsResponse) bool {
	hb := kmsg.NewConsumerGroupHeartbeatRequest()
	for _, k := range resp.ApiKeys {
		if k.ApiKey == hb.Key() {
			return k.MaxVersion >= 1
		}
	}
	return false
}

// pollRecords bounds one poll: the poll loop delivers them before the next.
const pollRecords = 10_000

// poll is the poll loop: it hands every fetched partition's records to its
// feed, then lets a pending rebalance run, until the group is stopped.
func (g *franzGroup) poll(cl *kgo.Client) {
	for {
		fs := cl.PollRecords(g.ctx, pollRecords)
		if g.ctx.Err() != nil || fs.IsClientClosed() {
			// The poll holds rebalances off until run allows them again
			// (classic protocol: after the handovers).
			return
		}
		fs.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			g.log.Warn().Err(err).Str("partition", TopicPartition{Topic: topic, Partition: partition}.String()).Msg("kafka fetch error")
		})
		g.mu.Lock()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			if f := g.feeds[TopicPartition{Topic: p.Topic, Partition: p.Partition}]; f != nil {
				f.deliver(p.Records, p.HighWatermark)
			}
		})
		g.mu.Unlock()
		cl.AllowRebalance()
	}
}

// subscribe gives the client the topics to consume: the named ones, or
// those the patterns match now and every metadata_refresh after, so that
// the member joins again as they change (the same anchoring and exclusions
// as kafkaGroup.subscribe: Subscription.Match).
func (g *franzGroup) subscribe(ctx context.Context, cl *kgo.Client) {
	if !g.topics.HasPatterns() {
		cl.AddConsumeTopics(g.topics.Names()...)
		return
	}
	var now []string
	t := time.NewTicker(g.refresh)
	defer t.Stop()
	for {
		matched, sz, err := g.matching(ctx, cl)
		var topics []string
		if err == nil {
			topics = g.partCap.admit(matched, sz.of)
		}
		switch {
		case err != nil:
			if ctx.Err() == nil {
				g.log.Warn().Err(err).Stringer("retry_in", g.refresh).Msg("cannot list the topics to match the patterns against")
			}
		case len(topics) == 0 && len(matched) > 0: // over max_partitions: admit said so
		case len(topics) == 0 && len(now) == 0:
			g.noMatch.Do(func() {
				g.log.Warn().Stringer("metadata_refresh", g.refresh).Msg("no topic matches the consumer's patterns yet; looking again every metadata_refresh")
			})
		case !slices.Equal(topics, now):
			if now != nil {
				g.log.Info().Strs("topics", topics).Strs("before", now).Msg("the topics matching the patterns changed: joining the group again with them")
			}
			var gone []string
			for _, topic := range now {
				if !slices.Contains(topics, topic) {
					gone = append(gone, topic)
				}
			}
			if len(gone) > 0 {
				cl.PurgeTopicsFromConsuming(gone...)
			}
			cl.AddConsumeTopics(topics...)
			now = topics
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// matching asks the brokers for every topic and returns those the
// subscription reads.
func (g *franzGroup) matching(ctx context.Context, cl *kgo.Client) ([]string, sizes, error) {
	ctx, cancel := context.WithTimeout(ctx, dialWait)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	s := topicSizes(resp)
	return g.topics.Match(slices.Sorted(maps.Keys(s))), s, nil
}

// onAssigned implements kgo's OnPartitionsAssigned: the partitions wait for
// their committed offsets (onFetched) to start their claims.
func (g *franzGroup) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for topic, ps := range assigned {
		for _, p := range ps {
			g.assigned[TopicPartition{Topic: topic, Partition: p}] = true
		}
	}
}

// onFetched implements kgo's OnOffsetsFetched: the committed offsets (and
// their metadata) of newly assigned partitions are known, and their fetches
// begin once it returns, so their claims start now.
func (g *franzGroup) onFetched(_ context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	type committed struct {
		tp     TopicPartition
		offset int64
		meta   string
	}
	var starts []committed
	add := func(topic string, p int32, offset int64, meta *string, code int16) {
		tp := TopicPartition{Topic: topic, Partition: p}
		if code != 0 {
			return // the client fetches it again
		}
		g.mu.Lock()
		ok := g.assigned[tp]
		delete(g.assigned, tp)
		g.mu.Unlock()
		if ok {
			c := committed{tp: tp, offset: offset}
			if meta != nil {
				c.meta = *meta
			}
			starts = append(starts, c)
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
		}
	}
	for _, grp := range resp.Groups {
		for _, t := range grp.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
			}
		}
	}
	if len(starts) == 0 || g.ctx.Err() != nil {
		return nil // nothing new, or stopping: the leave takes them back
	}
	sess := g.session()
	cs := make([]*claim, len(starts))
	fs := make([]*franzFeed, len(starts))
	for i, s := range starts {
		cs[i], fs[i] = g.newFranzClaim(cl, sess, s.tp, s.offset, s.meta)
	}
	g.startAll(cs)
	losses := g.losses.Load() // before the member id: one read after a loss and its rejoin sees the loss
	memberID, _ := cl.GroupMetadata()
	for i := range cs {
		c, f := cs[i], fs[i]
		if g.txnID != "" {
			g.claimLives.Store(c.epoch, franzLife{memberID: memberID, losses: losses})
		}
		g.claims.Go(func() {
			defer close(f.returned)
			defer f.close()
			defer g.claimLives.Delete(c.epoch) // after the final commit
			runClaim(c, f)
		})
	}
	return nil
}

// session returns the current session, starting one (and telling the
// proxy) after a loss or at the first assignment.
func (g *franzGroup) session() *franzSession {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sess == nil {
		g.sess = &franzSession{g: g, txn: g.txn, seq: g.sessions.Add(1), marks: make(map[TopicPartition]franzMark)}
		g.stats.sessionStarted()
		g.stats.setKafkaError("")
		g.sessionStarted(g.sess)
	}
	return g.sess
}

// endSession ends the current session, if any.
func (g *franzGroup) endSession() {
	g.mu.Lock()
	sess := g.sess
	g.sess = nil
	g.mu.Unlock()
	if sess != nil {
		g.stats.sessionEnded()
	}
}

// newFranzClaim makes the claim and feed of a partition whose committed
// offset (-1: none) and metadata the group just fetched; the caller starts
// it.
func (g *franzGroup) newFranzClaim(cl *kgo.Client, sess *franzSession, tp TopicPartition, committed int64, meta string) (*claim, *franzFeed) {
	var fromMeta []offsetmeta.Range
	if g.readMeta {
		fromMeta = finishedIn(tp, committed, meta, &g.warned, g.log)
	}
	id := g.topicID(cl, tp.Topic)
	finished := fromMeta
	if g.txnID == "" {
		// Exactly once, what this member finished counts only once its
		// transaction commits, and the committed metadata says so: a
		// record of an aborted one runs again (its outputs went with it).
		finished = g.released.finished(tp, id, committed, fromMeta)
	}
	g.log.Debug().Str("partition", tp.String()).Int64("committed", committed).
		Any("finished", finished).Msg("claim starts")
	f := &franzFeed{g: g, tp: tp, id: id, wake: make(chan struct{}, 1), revoked: make(chan struct{}), lost: make(chan struct{}),
		hw: -1, returned: make(chan struct{}), marks: marksFor(g.fetch)}
	c := g.newClaim(claimSpec{tp: tp, committed: max(committed, -1), finished: finished, maxBatch: g.maxBatch,
		revokeWait: g.revokeWait, lost: f.lostCh(), sess: sess, log: g.log})
	f.epoch, f.gt = c.epoch, c.gate
	g.lost.expect(c.epoch, tp, id)
	g.mu.Lock()
	if old := g.feeds[tp]; old != nil {
		// Cannot happen: a partition is revoked or lost before it is
		// assigned again. Should it, the old claim is dropped first.
		g.mu.Unlock()
		g.endClaims([]TopicPartition{tp}, endLost)
		g.mu.Lock()
	}
	g.feeds[tp] = f
	f.pauses = g.pauses
	g.mu.Unlock()
	// A partition paused when an earlier claim of it ended would never be
	// fetched again.
	f.pauses.set(tp, false)
	return c, f
}

// onRevoked implements kgo's OnPartitionsRevoked: the revoked partitions'
// claims hand over (drain, final commit) before the client lets them go.
func (g *franzGroup) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	g.endClaims(flatten(revoked), endRevoked)
}

// onLost implements kgo's OnPartitionsLost: the member is out of the group
// (its session expired, or it was fenced), so its claims are dropped
// without a commit, and the session ends.
func (g *franzGroup) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	// First: the client joins again (a new member epoch, under the consumer
	// protocol the same member id) only once this returns, and nothing the
	// lost claims marked may be committed in that membership.
	g.losses.Add(1)
	g.mu.Lock()
	sess := g.sess
	g.mu.Unlock()
	if sess != nil {
		sess.lose()
	}
	g.endClaims(flatten(lost), endLost)
	g.endSession()
	if g.txn != nil {
		g.txn.commitSoon() // the lost claims' outputs leave the open transaction
	}
}

func flatten(m map[string][]int32) []TopicPartition {
	var tps []TopicPartition
	for topic, ps := range m {
		for _, p := range ps {
			tps = append(tps, TopicPartition{Topic: topic, Partition: p})
		}
	}
	return tps
}

// ownedNow returns the partitions with a claim.
func (g *franzGroup) ownedNow() []TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	tps := make([]TopicPartition, 0, len(g.feeds))
	for tp := range g.feeds {
		tps = append(tps, tp)
	}
	return tps
}

// endClaims ends the claims of tps as end says (revoked: handed over; lost:
// dropped) and waits until each has returned; a killed side's claims return
// at once. A claim that another call is ending already (a stop hands every
// partition over while the consumer protocol's heartbeats go on, so the
// group may revoke one meanwhile) is waited for too: the client lets a
// partition go, and the group gives it to another member, only once its
// final commit (exactly once, its transaction) is made.
func (g *franzGroup) endClaims(tps []TopicPartition, end claimEnd) {
	var ending, others []*franzFeed
	g.mu.Lock()
	for _, tp := range tps {
		delete(g.assigned, tp)
		if f := g.feeds[tp]; f != nil {
			delete(g.feeds, tp)
			g.ending[tp] = f
			ending = append(ending, f)
		} else if f := g.ending[tp]; f != nil {
			others = append(others, f)
		}
	}
	g.mu.Unlock()
	for _, f := range ending {
		if end == endLost {
			f.lose()
		} else {
			f.revoke()
		}
	}
	for _, f := range others {
		if end == endLost {
			f.lose() // its handover's commit would not be the member's any more
		}
	}
	for _, f := range ending {
		<-f.returned
		g.mu.Lock()
		if g.ending[f.tp] == f {
			delete(g.ending, f.tp)
		}
		if g.sess != nil {
			g.sess.forget(f.tp)
		}
		g.mu.Unlock()
	}
	for _, f := range others {
		<-f.returned
	}
}

// requestCommit implements kafkaSide: the committer flushes the offsets
// marked on sess.
func (g *franzGroup) requestCommit(sess groupSession) { g.commits.request(sess) }

// client returns the connected client, nil before.
func (g *franzGroup) client() *kgo.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cl
}

// deadLetter implements kafkaSide: the client's producer writes the records
// (it never blocks here: MaxBufferedRecords holds the whole pipeline).
func (g *franzGroup) deadLetter(fs []recordFailure) {
	cl := g.client()
	for _, f := range fs {
		if cl == nil || g.dlqTopic == "" {
			g.deadLettered(f.rec, errNoDeadLetterProducer)
			continue
		}
		rec := f.rec
		key, value, headers := deadLetter(f, time.Now(), g.dlqLimit, func(k string, v []byte) kgo.RecordHeader {
			return kgo.RecordHeader{Key: k, Value: v}
		})
		cl.Produce(context.Background(), &kgo.Record{Topic: g.dlqTopic, Key: key, Value: value, Headers: headers},
			func(_ *kgo.Record, err error) { g.deadLettered(rec, err) })
	}
}

// franzBufferedRecords is what the client's producer may hold: the whole
// pipeline's dead letters, and its outputs (a record with outputs keeps its
// fetch credit until they are written), so that producing never blocks.
func franzBufferedRecords(c config.Consumer) int {
	n := c.Concurrency + c.MaxBuffered
	if c.Output.Enabled() {
		n *= 1 + c.Output.MaxPerRecord
	}
	return max(n, 10_000)
}

// transact implements kafkaSide: the transaction loop's next transaction
// holds the marks and the records' outputs.
func (g *franzGroup) transact(sess groupSession, offsets []partitionOffset, recs []*envelope) {
	s, ok := sess.(*franzSession)
	if !ok || s.txn == nil {
		dropOutputs(recs)
		g.send(&transactionFailed{err: errNoOutputProducer})
		return
	}
	s.txn.transact(s, offsets, recs)
}

// startTxn makes the transactional producer and its loop, retrying like
// connect until the side stops; the producer fences its predecessors
// before the member joins.
func (g *franzGroup) startTxn(member *kgo.Client) error {
	for failures := 1; ; failures++ {
		t, err := g.dialTxn(member)
		if err == nil {
			g.txnProd = t
			g.txn = newTxnLoop(t, g.txnID, g.claimAlive, g.send, g.stats, g.log)
			return nil
		}
		d := g.retry.Delay(failures, rand.Float64())
		g.log.Warn().Err(err).Stringer("retry_in", d).Msg("cannot open the transactional producer; retrying")
		if !g.sleep(d) {
			return err
		}
	}
}

// dialTxn makes the transactional producer's client and fences the
// transactional id's earlier producers.
func (g *franzGroup) dialTxn(member *kgo.Client) (*franzTxn, error) {
	sec, err := g.net.Franz()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(slices.Concat(g.txnOpts, sec, []kgo.Opt{kgo.WithLogger(franzLogger{log: g.log})})...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(g.killCtx)
	t := &franzTxn{cl: cl, ctx: ctx, cancel: cancel, groupID: g.groupID, txnID: g.txnID, instanceID: g.instanceID,
		dlqTopic: g.dlqTopic, dlqLimit: g.dlqLimit, member: member.GroupMetadata, alive: g.claimAlive, tell: g.send, log: g.log}
	ictx, icancel := context.WithTimeout(g.ctx, dialWait+txnTimeout)
	defer icancel()
	if err := t.init(ictx); err != nil {
		t.close()
		return nil, fmt.Errorf("initializing transactional id %q: %w", g.txnID, err)
	}
	return t, nil
}

// claimAlive reports whether the claim of epoch still runs (its final
// commit included) under the member it began with, the member having lost
// nothing since (see kafkaGroup's, and franzLife).
func (g *franzGroup) claimAlive(epoch uint64) bool {
	v, ok := g.claimLives.Load(epoch)
	if !ok {
		return false
	}
	cl := g.client()
	if cl == nil {
		return false
	}
	memberID, _ := cl.GroupMetadata()
	return v.(franzLife).alive(memberID, g.losses.Load())
}

// produceOutputs implements kafkaSide: the client's producer writes them
// (idempotent, acks from all in-sync replicas, in order per partition); the
// last acknowledgement of a record's outputs sends it back.
func (g *franzGroup) produceOutputs(recs []*envelope) {
	cl := g.client()
	if cl == nil {
		g.send(&outputsWritten{failed: recs[0], err: errNoOutputProducer})
		return
	}
	for _, rec := range recs {
		rec.outLeft.Store(int32(len(rec.outputs)))
		for _, o := range rec.outputs {
			r := &kgo.Record{Topic: o.Topic, Key: o.Key, Value: o.Value}
			for _, h := range o.Headers {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				switch {
				case err != nil:
					if rec.outLeft.Swap(-1) > 0 { // its first failure
						g.send(&outputsWritten{failed: rec, err: err})
					}
				case rec.outLeft.Add(-1) == 0:
					g.outAcks.add(rec)
				}
			})
		}
	}
}

// outputAcks batches the records whose outputs are all acknowledged into
// outputsWritten messages: the client's promises run one record at a time,
// and a message each cost the proxy and the orchestrator a round per record
// (as sarama's acks goroutine, one message for whatever is ready).
type outputAcks struct {
	mu      sync.Mutex
	written []*envelope
	wake    chan struct{} // capacity 1
	once    sync.Once
}

func (a *outputAcks) init() { a.once.Do(func() { a.wake = make(chan struct{}, 1) }) }

// add queues rec, written.
func (a *outputAcks) add(rec *envelope) {
	a.init()
	a.mu.Lock()
	first := len(a.written) == 0
	a.written = append(a.written, rec)
	a.mu.Unlock()
	if first {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// run sends what was queued, in batches of at most maxOutputsBatch, until
// done is closed; then what is left.
func (a *outputAcks) run(send func(any), done <-chan struct{}) {
	a.init()
	flush := func() {
		a.mu.Lock()
		batch := a.written
		a.written = nil
		a.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), maxOutputsBatch)
			send(&outputsWritten{written: batch[:n:n]})
			batch = batch[n:]
		}
	}
	for {
		select {
		case <-a.wake:
			flush()
		case <-done:
			flush()
			return
		}
	}
}

// refreshWatermarks implements kafkaSide: the refresh goroutine asks, one
// request at a time; a request that comes while it is busy is dropped.
func (g *franzGroup) refreshWatermarks(q []partitionHWM) {
	select {
	case g.hwmReq <- q:
	default:
	}
}

// offsetsAt implements kafkaSide: the refresh goroutine asks.
func (g *franzGroup) offsetsAt(q []partitionHWM) {
	g.atReq <- q // capacity 1, and one request at a time
}

// watermarks is the refresh goroutine: it answers one request at a time
// until the side stops.
func (g *franzGroup) watermarks(cl *kgo.Client) {
	for {
		select {
		case q := <-g.hwmReq:
			marks, err := latestOffsetsFranz(g.ctx, cl, q)
			if g.ctx.Err() != nil {
				return
			}
			g.send(&watermarksRefreshed{marks: marks, err: err})
		case q := <-g.atReq:
			marks, err := offsetsAtTime(q, func(q []partitionHWM) ([]partitionHWM, error) { return latestOffsetsFranz(g.ctx, cl, q) })
			if g.ctx.Err() != nil {
				return
			}
			g.send(&offsetsFound{marks: marks, err: err})
		case <-g.ctx.Done():
			return
		}
	}
}

// latestOffsetsFranz asks the partitions' leaders for their latest offsets
// (the client sends one ListOffsets per leader).
func latestOffsetsFranz(ctx context.Context, cl *kgo.Client, q []partitionHWM) ([]partitionHWM, error) {
	ctx, cancel := context.WithTimeout(ctx, dialWait)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, p := range q {
		i, ok := byTopic[p.tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.tp.Topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = p.tp.Topic
			req.Topics = append(req.Topics, t)
		}
		part := kmsg.NewListOffsetsRequestTopicPartition()
		part.Partition = p.tp.Partition
		part.Timestamp = p.listAt()
		part.CurrentLeaderEpoch = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, part)
	}
	latest := map[TopicPartition]int64{}
	var errs []error
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", shard.Meta.NodeID, shard.Err))
			continue
		}
		resp := shard.Resp.(*kmsg.ListOffsetsResponse)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := TopicPartition{Topic: t.Topic, Partition: p.Partition}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", tp, err))
					continue
				}
				latest[tp] = p.Offset
			}
		}
	}
	var out []partitionHWM
	for _, p := range q {
		if off, ok := latest[p.tp]; ok {
			p.hwm = off
			out = append(out, p)
		}
	}
	return out, errors.Join(errs...)
}

// topicID returns the id of topic as the brokers have it now (zero when
// unknown, logged), as kafkaAux.topicID.
func (g *franzGroup) topicID(cl *kgo.Client, topic string) topicID {
	return g.idLookups.get(topic, time.Now, func() topicID { return g.readTopicID(cl, topic) })
}

// readTopicID reads topic's id from the brokers.
func (g *franzGroup) readTopicID(cl *kgo.Client, topic string) topicID {
	ctx, cancel := context.WithTimeout(g.killCtx, dialWait)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		g.log.Warn().Err(err).Str("topic", topic).Msg("reading the topic's id; not skipping records finished before a commit landed")
		return topicID{}
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic && t.ErrorCode == 0 {
			g.mu.Lock()
			if g.topicIDs == nil {
				g.topicIDs = make(map[string]topicID)
			}
			g.topicIDs[topic] = topicID(t.TopicID)
			g.mu.Unlock()
			return topicID(t.TopicID)
		}
	}
	return topicID{}
}

// rememberLost implements kafkaSide (lostClaims).
func (g *franzGroup) rememberLost(tp TopicPartition, epoch uint64, fc finalCommit) {
	if g.txnID != "" { // exactly once: see newFranzClaim
		g.lost.forget(epoch)
		return
	}
	g.lost.rememberLost(g.released, tp, epoch, fc)
}

// franzLogger passes the client's warnings and errors to turbo's log. Of
// its informational messages it watches two: the client falling back to
// the classic protocol when the brokers turn the consumer protocol down,
// and a partition's committed offset held by a transaction still open
// (heldNotice).
type franzLogger struct {
	log      zerolog.Logger
	fallback func()      // nil: the classic protocol was asked for
	held     *heldNotice // nil: not the group's client
}

func (l franzLogger) Level() kgo.LogLevel {
	if l.fallback != nil || l.held != nil {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

// fallbackMsg starts the message of kgo falling back to the classic
// protocol (consumer_group_848.go).
const fallbackMsg = "falling back to standard consumer group management"

// heldMsg starts kgo's message when it fetches a newly assigned
// partition's committed offset again in a second (consumer_group.go).
const heldMsg = "fetch offsets failed with retryable partition error"

// heldEvery is the least time between two warnings of heldNotice.
const heldEvery = 10 * time.Second

// heldNotice warns, at most every heldEvery, that a partition waits for its
// committed offset because a transaction holding offsets of the group is
// still open (UNSTABLE_OFFSET_COMMIT: the client asks again every second,
// with no bound, as the protocol has it): an operator sees why the
// partition does not start, and that it starts once the transaction ends.
type heldNotice struct {
	mu   sync.Mutex
	last time.Time
}

// due reports whether a warning is due now, and notes it.
func (h *heldNotice) due(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.last.IsZero() && now.Sub(h.last) < heldEvery {
		return false
	}
	h.last = now
	return true
}

// warnHeld warns of a partition whose committed offset a transaction holds,
// when kgo's keyvals say so and a warning is due.
func (l franzLogger) warnHeld(keyvals []any) {
	var topic any
	var partition any
	held := false
	for i := 0; i+1 < len(keyvals); i += 2 {
		switch keyvals[i] {
		case "topic":
			topic = keyvals[i+1]
		case "partition":
			partition = keyvals[i+1]
		case "err":
			err, _ := keyvals[i+1].(error)
			held = errors.Is(err, kerr.UnstableOffsetCommit)
		}
	}
	if !held || !l.held.due(time.Now()) {
		return
	}
	l.log.Warn().Str("partition", fmt.Sprintf("%v/%v", topic, partition)).
		Msg("the partition waits for its committed offset: a transaction holding offsets of the group is still open (UNSTABLE_OFFSET_COMMIT); it starts once that transaction commits, aborts or times out")
}

func (l franzLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level > kgo.LogLevelWarn {
		switch {
		case l.fallback != nil && strings.HasPrefix(msg, fallbackMsg):
			l.fallback()
		case l.held != nil && strings.HasPrefix(msg, heldMsg):
			l.warnHeld(keyvals)
		}
		return
	}
	ev := l.log.Warn()
	if level == kgo.LogLevelError {
		ev = l.log.Error()
	}
	ev = ev.Str("component", "franz-go")
	for i := 0; i+1 < len(keyvals); i += 2 {
		key := fmt.Sprint(keyvals[i])
		if err, ok := keyvals[i+1].(error); ok {
			ev = ev.AnErr(key, err)
			continue
		}
		ev = ev.Interface(key, keyvals[i+1])
	}
	ev.Msg(msg)
}
