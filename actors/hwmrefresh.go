package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// A partition's high watermark reaches the proxy with each batch its claim
// reads (claimFetched). A partition not read — its consumer or the
// partition paused, its credits used up behind a stuck key, or simply
// caught up — sends none, and its lag would stay what the last fetch saw:
// 0 for a paused consumer with 300 records waiting, 127 for a partition
// stuck behind a key with 2,003 waiting. So every watermarkRefresh the
// proxy asks its side for the latest offsets of the partitions that sent
// no batch for that long (kafkaSide.refreshWatermarks); the side asks the
// brokers off the actor, one ListOffsets request per leader, one refresh
// at a time, and answers with watermarksRefreshed.

// watermarkRefresh is how often the high watermarks of partitions not read
// are refreshed, and how long a partition may go without a batch before it
// counts as not read. The console polls every second and Prometheus
// scrapes every 15 s or more: 5 s keeps a stalled partition's lag within a
// few seconds of the truth for both, for at most one request per leader
// broker every 5 s, and only while some partition is not read.
const watermarkRefresh = 5 * time.Second

// minWatermarkRefresh bounds the interval from below (tests shorten it): a
// partition being read reports its high watermark with every batch, and a
// fetch waits up to fetchMaxWait on the broker for records, so below that
// a partition that is read would be taken for one that is not, and asked
// about again and again.
const minWatermarkRefresh = fetchMaxWait

// refreshInterval is the interval to use for a configured one (0: the
// default).
func refreshInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return watermarkRefresh
	}
	return max(d, minWatermarkRefresh)
}

// partitionHWM is one assignment's high watermark: what the proxy asks for
// (hwm unset) and what the side answers.
type partitionHWM struct {
	tp    TopicPartition
	epoch uint64
	hwm   int64
	at    time.Time // offsetsAt: the time asked about; zero: the latest offset
}

// listAt is what a ListOffsets request asks of p: its offset at p.at, or
// its latest (-1, sarama.OffsetNewest).
func (p partitionHWM) listAt() int64 {
	if p.at.IsZero() {
		return -1
	}
	return p.at.UnixMilli()
}

// staleWatermarks lists the owned partitions that sent no batch since
// before now − every (or none yet), those still being revoked aside.
func staleWatermarks(parts map[TopicPartition]*ownedPartition, now time.Time, every time.Duration) []partitionHWM {
	var out []partitionHWM
	for tp, hp := range parts {
		if hp.ending == nil && now.Sub(hp.fetchedAt) >= every {
			out = append(out, partitionHWM{tp: tp, epoch: hp.epoch})
		}
	}
	return out
}

// applyWatermarks moves the high watermarks of the partitions whose
// assignment the answer is about forward (a refresh answered late, or a
// batch fetched before it, never takes one back), and returns those that
// moved.
func applyWatermarks(parts map[TopicPartition]*ownedPartition, marks []partitionHWM) (moved []*ownedPartition) {
	for _, m := range marks {
		if hp := parts[m.tp]; hp != nil && hp.epoch == m.epoch && m.hwm > hp.hwm {
			hp.hwm = m.hwm
			hp.gate.watch.hwm.Store(m.hwm)
			moved = append(moved, hp)
		}
	}
	return moved
}

// watermarks is the aux connection's refresh goroutine: it answers one
// request at a time (refreshWatermarks drops those that come meanwhile)
// until quit.
func (a *kafkaAux) watermarks() {
	for {
		select {
		case q := <-a.hwmReq:
			marks, err := a.latestOffsets(q)
			select {
			case <-a.quit: // the proxy is going away
				return
			default:
			}
			a.send(&watermarksRefreshed{marks: marks, err: err})
		case q := <-a.atReq:
			marks, err := offsetsAtTime(q, a.latestOffsets)
			select {
			case <-a.quit:
				return
			default:
			}
			a.send(&offsetsFound{marks: marks, err: err})
		case <-a.quit:
			return
		}
	}
}

// leaderAsks is one ListOffsets request to a leader broker, and the
// partitions it asks about.
type leaderAsks[P any] struct {
	b    *sarama.Broker
	req  *sarama.OffsetRequest
	asks []P
}

// offsetRequests groups ps by their leader broker (leader), one request
// (newReq) per leader asking for each partition's offset at(p); a
// partition whose leader is not known goes to failed.
func offsetRequests[P any](ps []P, tp func(P) TopicPartition, at func(P) int64, leader func(string, int32) (*sarama.Broker, error),
	newReq func() *sarama.OffsetRequest, failed func(P, error)) []*leaderAsks[P] {
	var leaders []*leaderAsks[P]
	byID := map[int32]*leaderAsks[P]{}
	for _, p := range ps {
		t := tp(p)
		b, err := leader(t.Topic, t.Partition)
		if err != nil {
			failed(p, err)
			continue
		}
		l := byID[b.ID()]
		if l == nil {
			l = &leaderAsks[P]{b: b, req: newReq()}
			byID[b.ID()] = l
			leaders = append(leaders, l)
		}
		l.req.AddBlock(t.Topic, t.Partition, at(p), 1)
		l.asks = append(l.asks, p)
	}
	return leaders
}

// refreshWatermarks hands q to the refresh goroutine unless it is busy: a
// refresh is under way, and the proxy asks again at its next tick.
func (a *kafkaAux) refreshWatermarks(q []partitionHWM) {
	select {
	case a.hwmReq <- q:
	default:
	}
}

// latestOffsets asks the leaders of q's partitions for their latest offset
// (the high watermark; the last stable offset under read_committed, as the
// consumer reads), one ListOffsets request per leader broker. It returns
// what it learnt, and an error naming what failed.
func (a *kafkaAux) latestOffsets(q []partitionHWM) ([]partitionHWM, error) {
	var errs []error
	leaders := offsetRequests(q, func(p partitionHWM) TopicPartition { return p.tp }, partitionHWM.listAt,
		a.client.Leader, func() *sarama.OffsetRequest {
			req := sarama.NewOffsetRequest(a.version)
			req.IsolationLevel = a.isolation
			return req
		}, func(p partitionHWM, err error) { errs = append(errs, fmt.Errorf("%s: leader: %w", p.tp, err)) })
	var out []partitionHWM
	moved := map[string]bool{} // topics whose leaders changed
	defer func() {
		for topic := range moved {
			_ = a.client.RefreshMetadata(topic) // the next refresh asks the new leaders
		}
	}()
	for _, l := range leaders {
		select {
		case <-a.quit:
			return out, errors.Join(errs...)
		default:
		}
		resp, err := l.b.GetAvailableOffsets(l.req)
		if err != nil {
			_ = l.b.Close() // as sarama's own GetOffset: the next request opens it anew
			errs = append(errs, fmt.Errorf("broker %d: %w", l.b.ID(), err))
			continue
		}
		for _, p := range l.asks {
			block := resp.GetBlock(p.tp.Topic, p.tp.Partition)
			switch {
			case block == nil:
				errs = append(errs, fmt.Errorf("%s: %w", p.tp, sarama.ErrIncompleteResponse))
			case !errors.Is(block.Err, sarama.ErrNoError):
				if errors.Is(block.Err, sarama.ErrNotLeaderForPartition) || errors.Is(block.Err, sarama.ErrLeaderNotAvailable) ||
					errors.Is(block.Err, sarama.ErrUnknownTopicOrPartition) {
					moved[p.tp.Topic] = true
				}
				errs = append(errs, fmt.Errorf("%s: %w", p.tp, block.Err))
			case len(block.Offsets) != 1:
				errs = append(errs, fmt.Errorf("%s: %w", p.tp, sarama.ErrIncompleteResponse))
			default:
				p.hwm = block.Offsets[0]
				out = append(out, p)
			}
		}
	}
	return out, errors.Join(errs...)
}
