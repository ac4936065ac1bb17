package actors_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// Half the offsets of a partition, picked at random, stuck (retried) while
// the others finish: hundreds of irregular gaps (a regular pattern, every
// second offset, compresses into a few bytes), far more than
// commit_metadata_bytes 64 holds.
// Commits keep landing, each within the budget; the consumer counts one
// overflow and how many finished offsets the metadata leaves out (a next
// owner would run them again); once the stuck records finish, nothing is
// left out.
func TestCommitMetadataOverflowIsCountedNotAStall(t *testing.T) {
	t.Parallel()
	const records = 2000
	var stuck atomic.Bool
	stuck.Store(true)
	rng := rand.New(rand.NewPCG(1, 2))
	held := make([]bool, records)
	for i := range held {
		held[i] = rng.IntN(2) == 0
	}
	c := harness.Consumer("meta-overflow", "t")
	c.Ordering = config.OrderingUnordered
	c.Concurrency = 32
	c.CommitMetadataBytes = 64
	c.Retry = config.Retry{MaxAttempts: 1_000_000, InitialBackoff: 250 * time.Millisecond, MaxBackoff: 250 * time.Millisecond}
	hs := harness.New(t, harness.Config{Consumer: c, Timeout: 30 * time.Second}, actors.HandlerFunc(func(_ context.Context, rec *actors.Record) error {
		if stuck.Load() && held[rec.Offset] {
			return errors.New("stuck")
		}
		return nil
	}))
	hs.Feed(harness.Seq("t", 0, 0, records, records)...)
	hs.Assign("t", 0)
	var seen actors.Snapshot // what the last look saw, for a wait that times out
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %d processed, %d retries, %d unrecorded, %d buffered", seen.Processed, seen.Retries, seen.MetaUnrecorded, seen.Buffered)
		}
	}()
	hs.Await("the metadata to overflow with half the records finished", func() bool {
		seen = hs.Stats()
		return seen.Processed >= 300 && seen.MetaUnrecorded >= seen.Processed/2
	})
	commit := hs.Committed("t", 0)
	if len(commit.Metadata) > 64 {
		t.Errorf("commit metadata of %d bytes, over commit_metadata_bytes 64", len(commit.Metadata))
	}
	if len(commit.Finished) == 0 {
		t.Error("the commit records no finished offset: the lowest should fit")
	}
	s := hs.Stats()
	if s.MetaOverflows != 1 {
		t.Errorf("%d overflows counted for one partition that kept overflowing, want 1", s.MetaOverflows)
	}
	t.Logf("while stuck: committed %d, metadata %d bytes holding %d ranges, %d finished offsets unrecorded", commit.Offset, len(commit.Metadata), len(commit.Finished), s.MetaUnrecorded)

	stuck.Store(false)
	hs.AwaitAllCommitted()
	hs.Await("nothing left unrecorded once every record finished", func() bool { return hs.Stats().MetaUnrecorded == 0 })
	if s := hs.Stats(); s.MetaOverflows != 1 || s.Processed != records {
		t.Errorf("after the release: %d overflows, %d processed; want 1 and %d", s.MetaOverflows, s.Processed, records)
	}
}
