package actors

import (
	"cmp"
	"slices"
	"sync"

	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// releasedAt remembers, per partition, the final watermark (and its
// metadata) at which this consumer group's member last released it. When
// the member claims the partition again, what it finished before is known
// without the broker: that matters when the release's final commit never
// reached the broker — a broker restart ends the session while records
// still finish, and none of those commits lands — so the broker's committed
// offset lags what this member really finished. Those records are then
// inherited (skipped, yet counted for the watermark) instead of run again.
//
// Only what this member itself finished is remembered, so skipping it never
// loses a record whoever held the partition meanwhile. The memory lives as
// long as the member's group (a tree restart forgets it) and is consulted
// only when the broker's committed offset lies below it.
type releasedAt struct {
	mu    sync.Mutex
	final map[TopicPartition]finalCommit
}

// remember records that tp was released at fc.
func (r *releasedAt) remember(tp TopicPartition, fc finalCommit) {
	if !fc.ok || fc.offset < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final == nil {
		r.final = make(map[TopicPartition]finalCommit)
	}
	r.final[tp] = fc
}

// finished returns the offsets at or above committed (where a new claim of
// tp starts reading; negative when the group has no commit) known to be
// finished: broker's ranges (from the committed metadata) and what this
// member had finished when it last released tp, merged, sorted and
// disjoint.
func (r *releasedAt) finished(tp TopicPartition, committed int64, broker []offsetmeta.Range) []offsetmeta.Range {
	r.mu.Lock()
	fc, ok := r.final[tp]
	r.mu.Unlock()
	if !ok || committed < 0 || fc.offset <= committed {
		return broker // the broker knows as much, or more
	}
	out := slices.Clone(broker)
	out = append(out, offsetmeta.Range{From: committed, To: fc.offset - 1})
	if mine, err := offsetmeta.Decode(fc.offset, fc.meta); err == nil {
		out = append(out, mine...)
	}
	return unionRanges(out)
}

// unionRanges sorts rs and merges overlapping and adjacent ranges.
func unionRanges(rs []offsetmeta.Range) []offsetmeta.Range {
	slices.SortFunc(rs, func(a, b offsetmeta.Range) int { return cmp.Compare(a.From, b.From) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.From <= out[n-1].To+1 {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	return out
}
