package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// SeekTo is where Seek moves partitions: an offset, or the first record at
// or after a time (Kafka's ListOffsets by timestamp; the partition's end
// when no record is that recent).
type SeekTo struct {
	// Topic names the partitions to move.
	Topic string
	// Partitions to move; none: every partition of Topic this process owns.
	Partitions []int32
	// Offset to read from next (at most the partition's end), when Time is
	// zero.
	Offset int64
	// Time, when set, picks each partition's offset instead.
	Time time.Time
}

// SeekResult is what Seek did.
type SeekResult struct {
	// Moved: the partitions moved, each from where its commit stood to
	// where it reads next.
	Moved []SeekMove
	// NotOwned: partitions asked for that this process does not own (in a
	// group, another member does: ask it). Partition -1: none of the
	// topic's, when no partition was named.
	NotOwned []TopicPartition
}

// SeekMove is one partition moved.
type SeekMove struct {
	TopicPartition
	From int64 // the committed watermark when the seek began (-1: none yet)
	To   int64
}

func (r SeekResult) String() string {
	var b strings.Builder
	for i, m := range r.Moved {
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case m.From < 0:
			fmt.Fprintf(&b, "%s moves to %d", m.TopicPartition, m.To)
		case m.To < m.From:
			fmt.Fprintf(&b, "%s moves back from %d to %d (%d records handled again)", m.TopicPartition, m.From, m.To, m.From-m.To)
		default:
			fmt.Fprintf(&b, "%s moves from %d to %d (%d records passed over)", m.TopicPartition, m.From, m.To, m.To-m.From)
		}
	}
	if len(r.Moved) > 0 {
		b.WriteString(": the new positions are committed (metadata cleared) as the consumer's tree restarts and reads them again")
	}
	if len(r.NotOwned) > 0 {
		if len(r.Moved) > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "not owned by this process: %s", joinTPs(r.NotOwned))
	}
	return b.String()
}

func joinTPs(tps []TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tp.String()
		if tp.Partition < 0 {
			s[i] = tp.Topic + " (none of its partitions)"
		}
	}
	return strings.Join(s, ", ")
}

// Errors of Seek.
var (
	// ErrSeekTimeout: Seek had no answer in time (the tree restarting or
	// stopping, or Kafka slow to answer a lookup by time).
	ErrSeekTimeout = errors.New("actors: the consumer did not answer the seek (its tree may be restarting): try again")
	// ErrSeekRefused: the seek was refused; the error says why.
	ErrSeekRefused = errors.New("actors: seek refused")
	// ErrSeekBusy: a seek is under way (the tree restarts to apply it), or
	// the consumer is restarting or stopping: try again.
	ErrSeekBusy = errors.New("actors: a seek is under way, or the consumer is restarting: try again")
)

// errNotConnected: the side has no connection to Kafka yet.
var errNotConnected = errors.New("not connected to Kafka yet")

// seekAnswerTimeout bounds Seek's wait: a lookup by time is one ListOffsets
// request per leader broker, bounded by dialWait.
const seekAnswerTimeout = dialWait + 5*time.Second

// Seek moves partitions this process owns to an offset, or to a time, to
// process records again (back) or pass over them (forward). What is
// buffered for them is dropped and the records running finish; the new
// position is committed with the commit metadata cleared, so that whoever
// owns the partition next (this process or another member) reads from it;
// the consumer's tree then restarts, which the group sees as this member
// leaving and joining again, and reads on from there. The other partitions
// commit what finished, as at any restart. One seek at a time; a partition
// this process does not own is reported in NotOwned and left alone (in a
// group, its owner must be asked). Under output.exactly_once it is refused:
// reset the group's offsets with the group stopped.
func (c *Consumer) Seek(ctx context.Context, to SeekTo) (SeekResult, error) {
	if to.Topic == "" {
		return SeekResult{}, fmt.Errorf("%w: a topic is needed", ErrSeekRefused)
	}
	if to.Time.IsZero() && to.Offset < 0 {
		return SeekResult{}, fmt.Errorf("%w: offset %d is below 0", ErrSeekRefused, to.Offset)
	}
	reply := make(chan seekAnswer, 1)
	select {
	case <-c.stopped:
		return SeekResult{}, ErrSeekTimeout
	default:
		c.sys.Root.Send(c.pid, &seekPartitions{to: to, reply: reply})
	}
	ctx, cancel := context.WithTimeout(ctx, seekAnswerTimeout)
	defer cancel()
	select {
	case a := <-reply:
		if a.err == nil && len(a.res.Moved) > 0 {
			c.log.Warn().Str("seek", a.res.String()).Msg("partitions moved by their operator")
		}
		return a.res, a.err
	case <-ctx.Done():
		return SeekResult{}, ErrSeekTimeout
	case <-c.stopped:
		return SeekResult{}, ErrSeekTimeout
	}
}

// seekPartitions (Consumer → restarter → orchestrator → client proxy):
// Seek's request, answered on reply (buffered), once.
type seekPartitions struct {
	to    SeekTo
	reply chan<- seekAnswer
}

type seekAnswer struct {
	res SeekResult
	err error
}

// offsetsFound (side → client proxy) answers kafkaSide.offsetsAt.
type offsetsFound struct {
	marks []partitionHWM
	err   error
}

// reclaimTree (client proxy → orchestrator → restarter): partitions were
// moved; the tree is to be restarted, without counting a failure, so that
// it reads them from their new positions.
type reclaimTree struct {
	gen int
}

// seeking is the client proxy's seek under way, while its side looks the
// offsets up.
type seeking struct {
	req *seekPartitions
	res SeekResult
}

// handleSeek starts a seek: it judges the request and asks the side for
// the owned partitions' offsets at the time, or for their ends (which an
// offset must not pass); applySeek takes the answer.
func (p *clientProxy) handleSeek(c actor.Context, m *seekPartitions) {
	refuse := func(format string, a ...any) {
		m.reply <- seekAnswer{err: fmt.Errorf("%w: "+format, append([]any{ErrSeekRefused}, a...)...)}
	}
	switch {
	case p.exactlyOnce:
		refuse("under output.exactly_once a seek would commit outside the transactions; stop the group and reset its offsets")
		return
	case p.stopping || p.seek != nil || len(p.seeks) > 0:
		m.reply <- seekAnswer{err: ErrSeekBusy}
		return
	}
	var res SeekResult
	var owned []partitionHWM
	if len(m.to.Partitions) == 0 {
		for tp, hp := range p.parts {
			if tp.Topic == m.to.Topic && hp.ending == nil {
				owned = append(owned, partitionHWM{tp: tp, epoch: hp.epoch, at: m.to.Time})
			}
		}
		if len(owned) == 0 {
			res.NotOwned = []TopicPartition{{Topic: m.to.Topic, Partition: -1}}
		}
	}
	for _, n := range m.to.Partitions {
		tp := TopicPartition{Topic: m.to.Topic, Partition: n}
		if hp := p.parts[tp]; hp != nil && hp.ending == nil {
			owned = append(owned, partitionHWM{tp: tp, epoch: hp.epoch, at: m.to.Time})
		} else {
			res.NotOwned = append(res.NotOwned, tp)
		}
	}
	if len(owned) == 0 {
		m.reply <- seekAnswer{res: res}
		return
	}
	// By time, the side looks the offsets up; to an offset, it looks the
	// partitions' ends up, which the offset must not pass.
	p.seek = &seeking{req: m, res: res}
	p.group.offsetsAt(owned)
}

// applySeek ends the lookup: each partition still owned by the same claim
// gets its new position (its final commit, finishRevocation), and the tree
// is asked to restart.
func (p *clientProxy) applySeek(c actor.Context, marks []partitionHWM, err error) {
	s := p.seek
	if s == nil {
		return
	}
	p.seek = nil
	to := s.req.to
	if err != nil {
		what := "the partitions' ends"
		if !to.Time.IsZero() {
			what = "the offsets at " + to.Time.Format(time.RFC3339)
		}
		s.req.reply <- seekAnswer{err: fmt.Errorf("%w: looking up %s: %w", ErrSeekRefused, what, err)}
		return
	}
	slices.SortFunc(marks, func(a, b partitionHWM) int { return compareTP(a.tp, b.tp) }) // the answer in partition order
	if to.Time.IsZero() {
		for i, mk := range marks { // each partition's end
			if to.Offset > mk.hwm {
				s.req.reply <- seekAnswer{err: fmt.Errorf("%w: offset %d is beyond the end of %s (%d)", ErrSeekRefused, to.Offset, mk.tp, mk.hwm)}
				return
			}
			marks[i].hwm = to.Offset
		}
	}
	if p.seeks == nil {
		p.seeks = make(map[TopicPartition]int64)
	}
	for _, mk := range marks {
		hp := p.parts[mk.tp]
		if hp == nil || hp.epoch != mk.epoch || hp.ending != nil || p.stopping {
			s.res.NotOwned = append(s.res.NotOwned, mk.tp) // revoked meanwhile
			continue
		}
		p.seeks[mk.tp] = mk.hwm
		from := hp.committed
		if from < 0 {
			from = hp.initial // nothing marked yet by this claim
		}
		s.res.Moved = append(s.res.Moved, SeekMove{TopicPartition: mk.tp, From: from, To: mk.hwm})
	}
	if len(s.res.Moved) > 0 {
		p.stats.seeks.Add(int64(len(s.res.Moved)))
		c.Send(c.Parent(), &reclaimTree{})
	}
	s.req.reply <- seekAnswer{res: s.res}
}

// seekFinal is the final commit of a revoked partition that was moved:
// its new position, with the metadata cleared.
func (p *clientProxy) seekFinal(tp TopicPartition, fc finalCommit) finalCommit {
	to, ok := p.seeks[tp]
	if !ok {
		return fc
	}
	delete(p.seeks, tp)
	return finalCommit{offset: to, ok: true, moved: true}
}

// offsetsAtTime looks q's partitions up by time with list (one ListOffsets
// request per leader), then the end of those without a record that
// recent, which Kafka answers with -1. It fails unless every partition got
// an offset: a seek moves all it was asked to, or none.
func offsetsAtTime(q []partitionHWM, list func([]partitionHWM) ([]partitionHWM, error)) ([]partitionHWM, error) {
	got, err := list(q)
	if err != nil {
		return nil, err
	}
	var out, ends []partitionHWM
	for _, p := range got {
		if p.hwm < 0 {
			p.at = time.Time{}
			ends = append(ends, p)
		} else {
			out = append(out, p)
		}
	}
	if len(ends) > 0 {
		e, err := list(ends)
		if err != nil {
			return nil, err
		}
		out = append(out, e...)
	}
	if len(out) != len(q) {
		return nil, fmt.Errorf("%d of %d partitions answered", len(out), len(q))
	}
	return out, nil
}
