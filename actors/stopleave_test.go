package actors_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupWatch counts, from a moment on, the group requests the embedded
// broker receives: joins and heartbeats of either protocol, and syncs.
type groupWatch struct {
	counting            atomic.Bool
	joins, beats, syncs atomic.Int32
	cluster             *kfake.Cluster
}

func watchGroup(cluster *kfake.Cluster) *groupWatch {
	w := &groupWatch{cluster: cluster}
	count := func(n *atomic.Int32) func(kmsg.Request) (kmsg.Response, error, bool) {
		return func(kmsg.Request) (kmsg.Response, error, bool) {
			cluster.KeepControl()
			if w.counting.Load() {
				n.Add(1)
			}
			return nil, nil, false
		}
	}
	cluster.ControlKey(int16(kmsg.JoinGroup), count(&w.joins))
	cluster.ControlKey(int16(kmsg.SyncGroup), count(&w.syncs))
	cluster.ControlKey(int16(kmsg.Heartbeat), count(&w.beats))
	cluster.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), count(&w.beats))
	return w
}

// from starts the counts at zero.
func (w *groupWatch) from() {
	w.joins.Store(0)
	w.beats.Store(0)
	w.syncs.Store(0)
	w.counting.Store(true)
}

// groupPartitions and groupRecords size the topic of leaveCluster.
const groupPartitions, groupRecords = 6, 6000

// leaveCluster is an embedded broker with topic (groupPartitions, holding
// groupRecords records of distinct keys) for a test that watches its group
// requests, with the consumer protocol's heartbeat every 250 ms as the
// classic protocol's (turbo dev's broker does the same).
func leaveCluster(t *testing.T, topic string) (*kfake.Cluster, []string, *groupWatch) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(groupPartitions, topic),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "250"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	testkit.Produce(t, brokers, topic, groupRecords, groupRecords)
	return cluster, brokers, watchGroup(cluster)
}

// groupMember starts member ("a", "b") of the group g-<topic> on side,
// one record at a time in partition order, committing every 100 ms, with
// handler h (nil: 5 ms of work per record); it is stopped at the test's end.
func groupMember(t *testing.T, brokers []string, topic, member string, side testkit.Side, shutdown time.Duration, h actors.Handler) *actors.Consumer {
	t.Helper()
	if h == nil {
		h = fiveMillis
	}
	c := config.DefaultConsumer("member-" + member)
	c.Group, c.Topics = "g-"+topic, []string{topic}
	c.Concurrency, c.Ordering = 1, config.OrderingPartition
	c.CommitInterval = 100 * time.Millisecond
	k := config.Default().Kafka
	k.Brokers, k.Client, k.GroupProtocol = brokers, side.Client, side.Protocol
	k.ClientID = "member-" + member
	cons, err := actors.New(actors.Options{
		Consumer: c, Kafka: k, ShutdownTimeout: shutdown, Handler: h,
		Logger: testkit.Logger(t).With().Str("member", member).Logger(), Restart: fastRestart,
	})
	if err != nil {
		t.Fatalf("starting member %s: %v", member, err)
	}
	t.Cleanup(func() { stop(t, cons) })
	return cons
}

// fiveMillis is 5 ms of work per record.
var fiveMillis = actors.HandlerFunc(func(ctx context.Context, _ *actors.Record) error {
	select {
	case <-time.After(5 * time.Millisecond):
	case <-ctx.Done():
	}
	return ctx.Err()
})

// A member that stops while another leaves the group hands its partitions
// over in the generation it holds, as a sarama session ends: it neither
// joins the group's next generation under its final commits — a commit of
// the old one would be refused there, and what it finished run again (a
// two-node swarm stopped under load met it on the franz-go side) — nor
// takes on the partitions the other gave up. Every side, on an embedded
// broker whose group requests the test counts.
func TestAStoppingMemberKeepsItsGenerationWhileAnotherLeaves(t *testing.T) {
	t.Parallel()
	for _, side := range testkit.AllSides() {
		t.Run(side.String(), func(t *testing.T) {
			t.Parallel()
			stoppingMemberKeepsItsGeneration(t, side)
		})
	}
}

func stoppingMemberKeepsItsGeneration(t *testing.T, side testkit.Side) {
	const partitions = groupPartitions
	topic := testkit.TopicName("t-leave")
	_, brokers, watch := leaveCluster(t, topic)

	// b's handler blocks on its first record once hold is set, until
	// release: b's stop drains meanwhile.
	var hold atomic.Bool
	blocked := make(chan *actors.Record, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	held := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if hold.Load() {
			select {
			case blocked <- rec:
				<-release
				return nil
			default:
			}
		}
		return fiveMillis(ctx, rec)
	})
	start := func(member string, h actors.Handler) *actors.Consumer {
		return groupMember(t, brokers, topic, member, side, 20*time.Second, h)
	}
	a := start("a", nil)
	testkit.Eventually(t, 30*time.Second, "member a to hold every partition", func() bool { return a.Stats().Assigned == partitions })
	b := start("b", held)
	testkit.Eventually(t, 60*time.Second, "both members to hold partitions and b to handle records", func() bool {
		sa, sb := a.Stats(), b.Stats()
		return sa.Assigned > 1 && sb.Assigned > 1 && sa.Assigned+sb.Assigned == partitions && sb.Processed > 0
	})
	hold.Store(true)
	var rec *actors.Record
	select {
	case rec = <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("no record of member b's reached its handler in 30 s after hold")
	}
	before := b.Stats()

	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop(context.Background()) }()
	// Member a leaves while b drains: the group begins a new generation.
	// b holds more than the held record's partition: one of the others
	// released shows its drain has begun.
	testkit.Eventually(t, 10*time.Second, "member b's drain to release a partition it is not running a record of", func() bool {
		return b.Stats().Released > before.Released
	})
	stop(t, a)
	watch.from()
	// Only b is left to send group requests. Three heartbeats of b's prove
	// it heard of the new generation and kept its own: a member that
	// joins the new one sends a JoinGroup after the first (classic), or
	// takes a's partitions on in its answer (consumer protocol).
	testkit.Eventually(t, 30*time.Second, "member b to heartbeat three times, or to join again, after a left", func() bool {
		return watch.beats.Load() >= 3 || watch.joins.Load() > 0
	})
	if n := watch.joins.Load(); n != 0 {
		t.Errorf("member b sent %d JoinGroup requests while it drained: it joined the generation after the one its final commits name", n)
	}
	if g := b.Stats().Gained; g != before.Gained {
		t.Errorf("member b gained %d partitions while it drained, want none", g-before.Gained)
	}
	releaseOnce.Do(func() { close(release) })
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("member b's Stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("member b's Stop did not return in 30 s after its record was released")
	}
	if n := b.Stats().CommitErrs; n != 0 {
		t.Errorf("Kafka refused %d of member b's commits, want none", n)
	}
	// Partition order and one record at a time: everything before the held
	// record of its partition was finished, and it was too.
	if got := testkit.CommittedOffsets(t, brokers, "g-"+topic, topic)[rec.Partition]; got != rec.Offset+1 {
		t.Errorf("partition %d committed at %d after b's stop, want %d (its record at %d finished in the drain)", rec.Partition, got, rec.Offset+1, rec.Offset)
	}
	t.Logf("FIGURES stop-while-another-leaves side=%s: heartbeats=%d joins=%d syncs=%d while b drained", side, watch.beats.Load(), watch.joins.Load(), watch.syncs.Load())
}

// A commit refused because the group moved to a new generation while it
// was under way (the member learns of the rebalance from a heartbeat,
// after it sent the commit) is sent again once the member is in the new
// generation: the partitions it kept across the cooperative rebalance were
// nobody else's meanwhile. The test's broker refuses one of member a's
// commits as stale; a second member's join then moves the group on. The
// franz-go side under the classic protocol (sarama ends its session before
// it joins again; under the consumer protocol a member keeps its epoch
// until it has handed its partitions over).
func TestACommitOvertakenByARebalanceIsSentAgain(t *testing.T) {
	t.Parallel()
	const partitions = groupPartitions
	topic := testkit.TopicName("t-overtaken")
	cluster, brokers, watch := leaveCluster(t, topic)

	var arm atomic.Bool
	var wasRefused atomic.Bool
	var refused atomic.Int32 // the generation of the refused commit
	var after atomic.Int32   // commits of a newer generation since
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if arm.CompareAndSwap(true, false) {
			refused.Store(r.Generation)
			wasRefused.Store(true)
			return refuseCommit(r, kerr.IllegalGeneration.Code), nil, true
		}
		if wasRefused.Load() && r.Generation > refused.Load() {
			after.Add(1)
		}
		return nil, nil, false
	})

	classic := testkit.Side{Client: config.ClientFranz, Protocol: config.GroupClassic}
	start := func(member string) *actors.Consumer {
		return groupMember(t, brokers, topic, member, classic, 10*time.Second, nil)
	}
	a := start("a")
	testkit.Eventually(t, 30*time.Second, "member a to hold every partition and commit", func() bool {
		s := a.Stats()
		return s.Assigned == partitions && s.Committed > 0
	})
	arm.Store(true)
	testkit.Eventually(t, 30*time.Second, "a commit of member a's refused as stale", wasRefused.Load)
	watch.from()
	b := start("b")
	testkit.Eventually(t, 30*time.Second, "member a to commit in a newer generation than the refused commit's", func() bool { return after.Load() > 0 })
	if n := a.Stats().CommitErrs; n != 0 {
		t.Errorf("member a counted %d refused commits, want 0: the stale commit was not sent again in the new generation", n)
	}
	testkit.Eventually(t, 60*time.Second, "both members to hold partitions", func() bool {
		sa, sb := a.Stats(), b.Stats()
		return sa.Assigned > 0 && sb.Assigned > 0 && sa.Assigned+sb.Assigned == partitions
	})
	if n := a.Stats().CommitErrs + b.Stats().CommitErrs; n != 0 {
		t.Errorf("%d refused commits across the handover, want 0", n)
	}
	t.Logf("FIGURES commit-overtaken: refused in generation %d; %d commits in newer ones; %d joins, %d syncs", refused.Load(), after.Load(), watch.joins.Load(), watch.syncs.Load())
}

// refuseCommit answers every partition of r with code.
func refuseCommit(r *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
