package actors

import (
	"errors"
	"testing"
	"time"
)

// TestOffsetsAtTime: partitions with a record at or after the time keep
// its offset; those Kafka answers -1 for (none that recent) are asked
// again for their end; a partition left unanswered, or a failed request,
// fails the whole lookup.
func TestOffsetsAtTime(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	q := []partitionHWM{{tp: TopicPartition{"t", 0}, at: at}, {tp: TopicPartition{"t", 1}, at: at}}
	var asked [][]partitionHWM
	list := func(q []partitionHWM) ([]partitionHWM, error) {
		asked = append(asked, q)
		out := make([]partitionHWM, len(q))
		for i, p := range q {
			switch {
			case !p.at.IsZero() && p.tp.Partition == 0:
				p.hwm = 42
			case !p.at.IsZero():
				p.hwm = -1 // no record that recent
			default:
				p.hwm = 900 // the end
			}
			out[i] = p
		}
		return out, nil
	}
	got, err := offsetsAtTime(q, list)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].hwm != 42 || got[1].hwm != 900 || got[1].tp.Partition != 1 {
		t.Fatalf("offsetsAtTime = %+v, want t/0 at 42 and t/1 at its end 900", got)
	}
	if len(asked) != 2 || len(asked[1]) != 1 || !asked[1][0].at.IsZero() || asked[1][0].listAt() != -1 {
		t.Fatalf("asked %+v: want the end of t/1 asked for (timestamp -1) after the lookup by time", asked)
	}
	if q[0].listAt() != at.UnixMilli() {
		t.Fatalf("listAt = %d, want %d", q[0].listAt(), at.UnixMilli())
	}

	boom := errors.New("broker 1: timeout")
	if _, err := offsetsAtTime(q, func([]partitionHWM) ([]partitionHWM, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed lookup: %v, want %v", err, boom)
	}
	if _, err := offsetsAtTime(q, func(q []partitionHWM) ([]partitionHWM, error) { return q[:1], nil }); err == nil {
		t.Fatal("a lookup that answered 1 of 2 partitions succeeded")
	}
}

// TestReleasedAtSeekReplaces: a release moved back by a seek replaces what
// was remembered of the partition, so that the records above the new
// position are handled again when it comes back, where releases otherwise
// add up.
func TestReleasedAtSeekReplaces(t *testing.T) {
	var r releasedAt
	tp := TopicPartition{"t", 0}
	id := topicID{1}
	r.remember(tp, id, finalCommit{offset: 100, ok: true})
	r.remember(tp, id, finalCommit{offset: 60, ok: true})
	if got := r.final[tp].offset; got != 100 {
		t.Fatalf("after releases at 100 then 60: %d, want 100 (they add up)", got)
	}
	r.remember(tp, id, finalCommit{offset: 40, ok: true, moved: true})
	if got := r.final[tp]; got.offset != 40 || len(got.ranges) != 0 {
		t.Fatalf("after a seek back to 40: %+v, want 40 and no ranges", got)
	}
}
