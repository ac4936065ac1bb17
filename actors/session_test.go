package actors_test

import (
	"context"
	"fmt"
	"strings"
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

// These tests reproduce the most serious finding of a review: the broker gave a
// member's partitions to another member without the member noticing, and it
// went on handling them. kfake's request interception plays the broker that
// dropped member a: from the moment the test says so ("gone"), a's own
// member id is refused everywhere it can be (JoinGroup, SyncGroup), its
// requests no longer reach kfake (which so expires it after the session
// timeout and gives its partitions to b), and a learns of it only through
// the one path each test leaves open: the answer to its offset commits, or
// the answer to its heartbeats.

// lossPath is the one path through which the dropped member can learn.
type lossPath int

const (
	viaCommit    lossPath = iota // commits answered UNKNOWN_MEMBER_ID, heartbeats faked as fine
	viaHeartbeat                 // heartbeats answered UNKNOWN_MEMBER_ID, commits faked as fine
)

// dropper is the control functions' state.
type dropper struct {
	prefix string // member ids of the member to drop start with it (kfake: client id + "-")
	path   lossPath

	mu     sync.Mutex
	member string    // the member id to drop, learned from its heartbeats
	gone   bool      // dropping
	lossAt time.Time // when the first refusal was answered
}

func (d *dropper) install(c *kfake.Cluster) {
	for _, key := range []kmsg.Key{kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.JoinGroup, kmsg.SyncGroup} {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			return d.control(req)
		})
	}
}

// control answers the dropped member's requests, and lets every other
// request through to kfake.
func (d *dropper) control(req kmsg.Request) (kmsg.Response, error, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.HeartbeatRequest:
		if d.member == "" && strings.HasPrefix(r.MemberID, d.prefix) {
			d.member = r.MemberID
		}
		if !d.gone || r.MemberID != d.member {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		if d.path == viaHeartbeat {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			d.noteLoss()
		}
		return resp, nil, true
	case *kmsg.OffsetCommitRequest:
		if !d.gone || r.MemberID != d.member {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		code := int16(0)
		if d.path == viaCommit {
			code = kerr.UnknownMemberID.Code
			d.noteLoss()
		}
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	case *kmsg.JoinGroupRequest:
		if !d.gone || r.MemberID != d.member {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	case *kmsg.SyncGroupRequest:
		if !d.gone || r.MemberID != d.member {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	default:
		return nil, nil, false
	}
}

func (d *dropper) noteLoss() {
	if d.lossAt.IsZero() {
		d.lossAt = time.Now()
	}
}

func (d *dropper) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gone = true
}

func (d *dropper) loss() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lossAt
}

func (d *dropper) known() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.member != ""
}

// span is one handler run.
type span struct {
	member     string
	partition  int32
	start, end time.Time
}

// spans records every handler run of both members, and feeds the ledger
// that judges ownership across them.
type spans struct {
	ledger *testkit.Ledger
	slowA  atomic.Bool // member a's records take slowWork more
	mu     sync.Mutex
	all    []*span
}

// slowWork is how long member a's records take around the loss: far beyond
// lossBound, so a member that lets them run to their end is caught.
const slowWork = 3 * time.Second

func (s *spans) handler(member string) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		sp := &span{member: member, partition: rec.Partition, start: time.Now()}
		s.mu.Lock()
		s.all = append(s.all, sp)
		s.mu.Unlock()
		err := error(nil)
		if member == "member-a" && s.slowA.Load() {
			err = handlerSleep(ctx, slowWork)
		}
		if err == nil {
			err = s.ledger.HandleAs(ctx, rec, member)
		}
		s.mu.Lock()
		sp.end = time.Now()
		s.mu.Unlock()
		return err
	})
}

// afterLoss measures what member did with the partitions in lost after the
// loss: how many records it started more than grace after it, and how long
// after it its last run of them ended (or would still be running).
func (s *spans) afterLoss(member string, lost map[int32]bool, at time.Time, grace, window time.Duration) (started int, lastEnd time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.all {
		if sp.member != member || !lost[sp.partition] {
			continue
		}
		if sp.start.After(at.Add(grace)) && sp.start.Before(at.Add(window)) {
			started++
		}
		if sp.start.Before(at.Add(window)) {
			end := sp.end
			if end.IsZero() {
				end = time.Now()
			}
			lastEnd = max(lastEnd, end.Sub(at))
		}
	}
	return started, lastEnd
}

// lossBound is how soon after the broker's refusal a member must have
// stopped every record of its lost partitions: the answer's way from the
// wire to the claims (a commit's or heartbeat's answer, one actor hop), with
// room for a loaded machine under -race. Records take far longer (work).
const lossBound = time.Second

func testSessionLoss(t *testing.T, path lossPath) {
	const partitions, records, keys = 4, 6000, 600
	topic := testkit.TopicName("t-" + strings.ReplaceAll(t.Name(), "/", "."))
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	testkit.Produce(t, brokers, topic, records, keys)
	d := &dropper{prefix: "member-a-", path: path}
	d.install(cluster)

	rs := &spans{ledger: testkit.NewLedger(5 * time.Millisecond)}
	group := "g-" + topic
	start := func(name string) *actors.Consumer {
		c := config.DefaultConsumer(name)
		c.Group, c.Topics, c.Concurrency = group, []string{topic}, 4
		c.CommitInterval = 100 * time.Millisecond
		k := config.Default().Kafka
		k.Brokers, k.ClientID = brokers, name
		cons, err := actors.New(actors.Options{
			Consumer: c, Kafka: k, ShutdownTimeout: 10 * time.Second, Handler: rs.handler(name),
			Logger: testkit.Logger(t).With().Str("member", name).Logger(), Restart: fastRestart,
		})
		if err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		t.Cleanup(func() { stop(t, cons) })
		return cons
	}
	a := start("member-a")
	testkit.Eventually(t, 60*time.Second, "member a to hold every partition", func() bool { return a.Stats().Assigned == partitions && d.known() })
	b := start("member-b")
	testkit.Eventually(t, 60*time.Second, "the two members to share the partitions", func() bool {
		sa, sb := a.Stats().Assigned, b.Stats().Assigned
		return sa > 0 && sb > 0 && sa+sb == partitions
	})
	// Whatever a holds now is what the broker will give to b.
	split := time.Now()
	held := map[int32]bool{}
	testkit.Eventually(t, 30*time.Second, "member a to run records of each of its partitions", func() bool {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		clear(held)
		for _, sp := range rs.all {
			if sp.member == "member-a" && sp.start.After(split) {
				held[sp.partition] = true
			}
		}
		return int64(len(held)) == a.Stats().Assigned
	})
	rs.slowA.Store(true)
	d.drop()
	testkit.Eventually(t, 30*time.Second, "the broker to refuse member a", func() bool { return !d.loss().IsZero() })
	lossAt := d.loss()
	// kfake expires a's old member a session timeout (10 s) after its last
	// request reached it; until then nobody may own those partitions but a
	// does not know it does not (from the refusal on).
	window := 8 * time.Second
	testkit.Eventually(t, 30*time.Second, "the loss window to pass", func() bool { return time.Since(lossAt) > window })
	started, lastEnd := rs.afterLoss("member-a", held, lossAt, 100*time.Millisecond, window)
	rs.slowA.Store(false)
	t.Logf("after the refusal, member a started %d records of the %d partitions it had lost (more than 100 ms after it), and its last run of them ended %v after it",
		started, len(held), lastEnd.Round(time.Millisecond))
	if started != 0 {
		t.Errorf("member a started %d records of partitions it no longer owned", started)
	}
	if lastEnd > lossBound {
		t.Errorf("member a ran records of its lost partitions until %v after the refusal, want within %v", lastEnd.Round(time.Millisecond), lossBound)
	}
	// Whoever holds the partitions later, every record is handled, and never
	// by two members at once.
	testkit.Eventually(t, 120*time.Second, fmt.Sprintf("all %d records handled", records), func() bool { return rs.ledger.Report().Distinct == records })
	rep := rs.ledger.Report()
	if rep.OwnershipOverlaps != 0 {
		t.Errorf("%d ownership overlaps: %v", rep.OwnershipOverlaps, rep.OwnershipExamples)
	}
	t.Logf("%d records, %d runs, %d duplicates, %d ownership overlaps", rep.Distinct, rep.Total, rep.Duplicates, rep.OwnershipOverlaps)
}

// A member the broker dropped has lost its partitions: it cancels what runs
// at once and starts nothing more of them, rather than draining them as for
// a revocation (its commits would be refused, and the new owner starts from
// the last committed offset anyway). It learns so from a heartbeat answered
// UNKNOWN_MEMBER_ID, or — when its heartbeats seem fine, because the broker
// dropped it without telling it, as kfake did — from its first commit
// refused.
func TestDroppedMemberStopsItsLostPartitionsAtOnce(t *testing.T) {
	// Timed (no record of a lost partition may start later than 100 ms after the refusal): it runs alone, after the rest (the Makefile's TIMED); its two cases run side by side.
	for _, c := range []struct {
		name string
		path lossPath
	}{{"heartbeat refused", viaHeartbeat}, {"commit refused", viaCommit}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testSessionLoss(t, c.path)
		})
	}
}
