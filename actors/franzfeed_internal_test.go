package actors

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition paused for want of byte credits resumes only once its claim has
// taken everything queued, as on the sarama side (resuming earlier only
// fetches what cannot run, and a partition stuck behind a key would flap
// between paused and fetching); one paused for the queue's high mark
// resumes at the low mark, so that the next fetch arrives in time.
func TestFranzFeedResumesAsItsPauseSays(t *testing.T) {
	queued := func(n int) []*kgo.Record {
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Offset: int64(i), Value: []byte("v")}
		}
		return rs
	}
	drain := func(f *franzFeed) (resumedAfter int) {
		for taken := 1; ; taken++ {
			_, ok, resume := f.take(true)
			if resume {
				return taken
			}
			if !ok {
				return -1
			}
		}
	}

	marks := marksFor(maxPartitionFetch)
	outOfBytes := &franzFeed{queue: queued(100), bytes: 100, paused: true, marks: marks}
	if got := drain(outOfBytes); got != 100 {
		t.Errorf("paused out of bytes with 100 queued: resumed after %d taken, want 100 (the last)", got)
	}

	n := marks.low + 500
	full := &franzFeed{queue: queued(n), bytes: int64(n), paused: true, full: true, marks: marks}
	if got := drain(full); got != 500 {
		t.Errorf("paused at the high mark with %d queued: resumed after %d taken, want 500 (down to the low mark, %d)", n, got, marks.low)
	}
	if full.paused || full.full {
		t.Errorf("resumed feed still paused=%v full=%v", full.paused, full.full)
	}

	unread := &franzFeed{queue: queued(1), bytes: 1, paused: true, marks: marks}
	unread.back = &kgo.Record{Offset: 99, Value: []byte("v")}
	unread.bytes++
	if _, _, resume := unread.take(true); resume {
		t.Error("feed paused out of bytes resumed with a record still queued")
	}
	if _, _, resume := unread.take(true); !resume {
		t.Error("feed paused out of bytes not resumed once its queue was empty")
	}
}

// A stop hands every partition over while the consumer protocol's
// heartbeats go on, so the group may revoke a partition whose handover is
// under way. The revocation must wait for that claim's return (its final
// commit, exactly once its transaction): returning at once lets the client
// give the partition up, and its next owner start below the commit still
// to come, running those records (and writing their outputs) again.
func TestRevocationWaitsForAHandoverUnderWay(t *testing.T) {
	for _, end := range []claimEnd{endRevoked, endLost} {
		synctest.Test(t, func(t *testing.T) {
			tp := TopicPartition{Topic: "t", Partition: 2}
			f := &franzFeed{tp: tp, revoked: make(chan struct{}), lost: make(chan struct{}), returned: make(chan struct{})}
			g := &franzGroup{feeds: map[TopicPartition]*franzFeed{tp: f}, ending: map[TopicPartition]*franzFeed{},
				assigned: map[TopicPartition]bool{}}
			f.g = g

			stopped := make(chan struct{})
			go func() { g.endClaims(g.ownedNow(), endRevoked); close(stopped) }() // the stop's handover
			synctest.Wait()
			select {
			case <-f.revoked:
			default:
				t.Error("the stop did not revoke the claim")
			}

			revoked := make(chan struct{})
			go func() { g.endClaims([]TopicPartition{tp}, end); close(revoked) }() // the group's callback
			synctest.Wait()
			select {
			case <-revoked:
				t.Errorf("end %v of a partition whose handover is under way returned before its claim did", end)
			default:
			}
			select {
			case <-f.lost:
				if end != endLost {
					t.Error("a revocation dropped the claim handing over")
				}
			default:
				if end == endLost {
					t.Error("a loss left the claim handing over to commit")
				}
			}

			close(f.returned) // the claim's final commit is made
			synctest.Wait()
			for what, ch := range map[string]chan struct{}{"the stop": stopped, "the group's callback": revoked} {
				select {
				case <-ch:
				default:
					t.Errorf("%s still waits after the claim returned", what)
				}
			}
			if len(g.ending) != 0 || len(g.feeds) != 0 {
				t.Errorf("%d claims still ending, %d feeds, after every claim returned", len(g.ending), len(g.feeds))
			}
		})
	}
}

// A partition whose committed offset a transaction still holds
// (UNSTABLE_OFFSET_COMMIT: kgo asks again every second, logging at info)
// is said in turbo's log at warn level, naming the partition, at most once
// every heldEvery; kgo's other informational messages stay out.
func TestFranzLoggerSaysWhatHoldsAPartition(t *testing.T) {
	var out bytes.Buffer
	l := franzLogger{log: zerolog.New(&out), held: &heldNotice{}}
	if l.Level() != kgo.LogLevelInfo {
		t.Fatalf("level %v: kgo would not pass its informational messages", l.Level())
	}
	held := []any{"group", "g", "topic", "orders", "partition", int32(2), "err", kerr.UnstableOffsetCommit}
	l.Log(kgo.LogLevelInfo, heldMsg+", waiting 1s and retrying", held...)
	l.Log(kgo.LogLevelInfo, heldMsg+", waiting 1s and retrying", held...)
	l.Log(kgo.LogLevelInfo, heldMsg+", waiting 1s and retrying", "topic", "orders", "partition", int32(3), "err", kerr.UnknownTopicID)
	l.Log(kgo.LogLevelInfo, "assigning partitions", "group", "g")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level":"warn"`) || !strings.Contains(lines[0], `"partition":"orders/2"`) ||
		!strings.Contains(lines[0], "UNSTABLE_OFFSET_COMMIT") {
		t.Fatalf("logged %q, want one warning naming orders/2 and UNSTABLE_OFFSET_COMMIT", out.String())
	}
	if !l.held.due(time.Now().Add(heldEvery)) {
		t.Error("no warning due a heldEvery after the last one")
	}
}

// Exactly once, a claim's marks and outputs commit only in the membership
// it ran in. Under the consumer protocol a zombie (its session expired
// while it was stopped) is fenced and joins again with the same member id
// and a new member epoch: its claims ended with the loss, so they must not
// be alive in the new membership, or the transaction under way would commit
// their outputs with the new epoch, after another member took their
// partitions.
func TestAClaimIsNotAliveAfterItsMemberLostItsPartitions(t *testing.T) {
	life := franzLife{memberID: "m-1", losses: 2}
	for _, c := range []struct {
		name     string
		memberID string
		losses   uint64
		want     bool
	}{
		{"the same membership", "m-1", 2, true},
		{"fenced and joined again with the same member id (a zombie)", "m-1", 3, false},
		{"joined again with a new member id", "m-2", 2, false},
		{"out of the group", "", 2, false},
	} {
		if got := life.alive(c.memberID, c.losses); got != c.want {
			t.Errorf("%s: alive = %v, want %v", c.name, got, c.want)
		}
	}
}

// A commit must not hold the session's lock while it takes the group's:
// endClaims holds the group's while it forgets a partition in the session,
// and at 4,096 partitions a stop's commits and its ending claims met there
// and stopped each other until shutdown_timeout. Here the group's lock is
// held throughout, as endClaims holds it: the commit must take its marks
// and let go of the session, so that forget goes through.
func TestCommitLetsGoOfTheSessionBeforeTakingTheGroup(t *testing.T) {
	killed, kill := context.WithCancel(context.Background())
	kill() // the request itself fails at once: what is tested is the locking
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g := &franzGroup{groupID: "g", killCtx: killed}
	tp := TopicPartition{Topic: "t", Partition: 3}
	s := &franzSession{g: g, marks: map[TopicPartition]franzMark{tp: {offset: 7, dirty: true}}}

	g.mu.Lock()
	done := make(chan error, 1)
	go func() {
		_, err := s.commitOnce(cl, "member", 1, time.Now().Add(time.Second))
		done <- err
	}()
	taken := false
	for deadline := time.Now().Add(5 * time.Second); !taken && time.Now().Before(deadline); {
		if s.mu.TryLock() {
			taken = !s.marks[tp].dirty
			s.mu.Unlock()
		}
		if !taken {
			time.Sleep(time.Millisecond)
		}
	}
	if !taken {
		g.mu.Unlock()
		t.Fatal("timed out after 5s waiting for the commit to take its marks and let go of the session while the group's lock is held")
	}
	s.forget(tp) // endClaims, still holding the group's lock
	g.mu.Unlock()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a commit to no broker with its context cancelled succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timed out after 5s waiting for the commit to return once the group's lock was free")
	}
	if _, ok := s.marks[tp]; ok {
		t.Error("the partition forgotten during the commit was marked again by its failure")
	}
}
