package actors

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// ctxSession is the little of a sarama session a feed's idle wait reads.
type ctxSession struct {
	sarama.ConsumerGroupSession
	ctx context.Context
}

func (s ctxSession) Context() context.Context { return s.ctx }

// A claim without credits, on a member holding `assigned` partitions, with
// a record in sarama's channel: what one idle wait does with it.
func idleWithARecordWaiting(t *testing.T, assigned int) (f *saramaFeed, took time.Duration) {
	t.Helper()
	g := &kafkaGroup{stats: &consumerStats{}}
	g.abort = make(chan struct{})
	g.stats.assigned.Store(int64(assigned))
	msgs := make(chan *sarama.ConsumerMessage, 64)
	msgs <- &sarama.ConsumerMessage{Topic: "t", Offset: 7}
	gt := newGate(0, 1<<20) // no record credits; bytes to spare
	f = &saramaFeed{g: g, sess: ctxSession{ctx: context.Background()}, msgs: msgs, tp: TopicPartition{Topic: "t"}, gt: gt}
	f.starved = time.NewTimer(time.Hour)
	f.starved.Stop()
	start := time.Now()
	if end := f.idle(gt); end != readOn {
		t.Fatalf("idle ended the claim (%v) with nothing ending it", end)
	}
	return f, time.Since(start)
}

// From pauseOnArrivalFrom partitions, a starved claim takes what sarama
// delivers at once and pauses (a full channel would hold sarama's fetch loop
// for every partition of the broker); below, it leaves the record in the
// channel and pauses only after pauseAfter (pausing every partition at once
// makes sarama nap).
func TestSaramaFeedStarvedTakesDeliveriesAtManyPartitions(t *testing.T) {
	f, took := idleWithARecordWaiting(t, pauseOnArrivalFrom)
	if !f.flow.isPaused() || f.flow.readAheadLen() != 1 || len(f.msgs) != 0 {
		t.Errorf("%d partitions: after one idle wait paused=%v, read ahead %d, %d left in the channel; want paused, the record read ahead",
			pauseOnArrivalFrom, f.flow.isPaused(), f.flow.readAheadLen(), len(f.msgs))
	}
	if took >= pauseAfter {
		t.Errorf("%d partitions: the idle wait took %s, want it to end with the record's arrival, before pauseAfter (%s)", pauseOnArrivalFrom, took, pauseAfter)
	}

	f, took = idleWithARecordWaiting(t, pauseOnArrivalFrom-1)
	if !f.flow.isPaused() || f.flow.readAheadLen() != 0 || len(f.msgs) != 1 {
		t.Errorf("%d partitions: after one idle wait paused=%v, read ahead %d, %d left in the channel; want paused after pauseAfter, the record still in the channel",
			pauseOnArrivalFrom-1, f.flow.isPaused(), f.flow.readAheadLen(), len(f.msgs))
	}
	if took < pauseAfter {
		t.Errorf("%d partitions: the idle wait took %s, want pauseAfter (%s)", pauseOnArrivalFrom-1, took, pauseAfter)
	}
}
