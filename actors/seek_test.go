package actors_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// TestSeekReplaysAndPassesOver: on two partitions handled and committed,
// a seek back on one handles its range again, once, and nothing of the
// other; a seek forward passes over records never handled; a seek to a
// time lands on the first record at or after it. Each new position is
// committed with the metadata cleared, no restart is counted, and what
// this process does not own is reported, not moved.
func TestSeekReplaysAndPassesOver(t *testing.T) {
	for _, ordering := range []config.Ordering{config.OrderingKey, config.OrderingPartition, config.OrderingUnordered} {
		t.Run(string(ordering), func(t *testing.T) {
			t.Parallel()
			c := harness.Consumer("seek", "t")
			c.Ordering = ordering
			c.Concurrency = 4
			hs := harness.New(t, harness.Config{Consumer: c}, nil)
			base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
			stamped := func(p int32, from int64, n int) []harness.Record {
				recs := harness.Seq("t", p, from, n, 7)
				for i := range recs {
					recs[i].Timestamp = base.Add(time.Duration(recs[i].Offset) * time.Second)
				}
				return recs
			}
			hs.Feed(stamped(0, 0, 100)...)
			hs.Feed(stamped(1, 0, 100)...)
			hs.Assign("t", 0, 1)
			hs.AwaitHandled(200)
			hs.AwaitAllCommitted()

			// Back: t/0 from 40.
			res, err := hs.Seek(actors.SeekTo{Topic: "t", Partitions: []int32{0, 9}, Offset: 40})
			if err != nil {
				t.Fatal(err)
			}
			want := []actors.SeekMove{{TopicPartition: actors.TopicPartition{Topic: "t", Partition: 0}, From: 100, To: 40}}
			if !slices.Equal(res.Moved, want) || len(res.NotOwned) != 1 || res.NotOwned[0].Partition != 9 {
				t.Fatalf("Seek = %+v (%s), want t/0 moved 100→40 and t/9 not owned", res, res)
			}
			hs.Await("t/0 handled again from 40", func() bool { return hs.TimesHandled("t", 0, 99) == 2 })
			hs.AwaitAllCommitted()
			for off := int64(0); off < 100; off++ {
				wantN := 1
				if off >= 40 {
					wantN = 2
				}
				if n := hs.TimesHandled("t", 0, off); n != wantN {
					t.Fatalf("t/0@%d handled %d times after the seek back to 40, want %d", off, n, wantN)
				}
				if n := hs.TimesHandled("t", 1, off); n != 1 {
					t.Fatalf("t/1@%d handled %d times: the seek of t/0 must not replay t/1", off, n)
				}
			}

			// Forward: t/1 passes over 120..159 of the records fed next.
			hs.Pause(actors.TopicPartition{Topic: "t", Partition: 1})
			// The pause reaches the coordinator by the path a skip takes:
			// once a skip is answered, no record of t/1 starts any more.
			if r, err := hs.Skip("t", 1, -1); err != nil || r.Found {
				t.Fatalf("Skip(t/1@-1) = %+v, %v", r, err)
			}
			hs.Feed(stamped(1, 100, 100)...)
			res, err = hs.Seek(actors.SeekTo{Topic: "t", Partitions: []int32{1}, Offset: 160})
			if err != nil || len(res.Moved) != 1 || res.Moved[0].To != 160 {
				t.Fatalf("Seek forward = %+v, %v", res, err)
			}
			hs.Resume(actors.TopicPartition{Topic: "t", Partition: 1})
			hs.AwaitCommitted("t", 1, 200)
			for off := int64(100); off < 200; off++ {
				wantN := 1
				if off < 160 {
					wantN = 0
				}
				if n := hs.TimesHandled("t", 1, off); n != wantN {
					t.Fatalf("t/1@%d handled %d times after the seek forward to 160, want %d", off, n, wantN)
				}
			}

			// By time: every partition of t to the record stamped base+70s
			// (t/1 has none that recent left before 200: it lands on 70 too).
			res, err = hs.Seek(actors.SeekTo{Topic: "t", Time: base.Add(70*time.Second - time.Millisecond)})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Moved) != 2 || res.Moved[0].To != 70 || res.Moved[1].To != 70 {
				t.Fatalf("Seek by time = %+v, want both partitions at 70", res)
			}
			hs.Await("t/0@70 handled a third time", func() bool { return hs.TimesHandled("t", 0, 99) == 3 })
			hs.AwaitAllCommitted()
			if n := hs.TimesHandled("t", 0, 69); n != 2 {
				t.Fatalf("t/0@69 handled %d times, want 2 (the seek to 40, not the one to 70)", n)
			}
			if n := hs.TimesHandled("t", 0, 39); n != 1 {
				t.Fatalf("t/0@39 handled %d times, want 1", n)
			}
			if n := hs.TimesHandled("t", 1, 150); n != 1 {
				t.Fatalf("t/1@150 handled %d times after the seek by time to 70, want 1", n)
			}
			if got := hs.Committed("t", 1); got.Offset != 200 || got.Finished != nil {
				t.Fatalf("t/1 committed %+v, want 200 with no finished ranges", got)
			}
			if s := hs.Stats(); s.Restarts != 0 || s.Seeks != 4 {
				t.Fatalf("stats: %d restarts, %d seeks; want 0 restarts (a seek is not a failure) and 4 partitions moved", s.Restarts, s.Seeks)
			}

			// A time after every record: the end.
			res, err = hs.Seek(actors.SeekTo{Topic: "t", Partitions: []int32{0}, Time: base.Add(time.Hour)})
			if err != nil || len(res.Moved) != 1 || res.Moved[0].To != 100 {
				t.Fatalf("Seek to a time after every record = %+v, %v; want t/0 at its end, 100", res, err)
			}
			// Refusals. Until the restart is done a seek is refused as
			// under way, then t/0 is not owned for a moment: the seek
			// beyond the end is asked until t/0 is owned again.
			var last error
			hs.Await("a seek beyond the end refused as such", func() bool {
				_, last = hs.Seek(actors.SeekTo{Topic: "t", Partitions: []int32{0}, Offset: 5000})
				return errors.Is(last, actors.ErrSeekRefused) && strings.Contains(last.Error(), "beyond the end of t/0 (100)")
			})
			res, err = hs.Seek(actors.SeekTo{Topic: "other"})
			if err != nil || len(res.Moved) != 0 || fmt.Sprint(res.NotOwned) == "[]" {
				t.Fatalf("a seek of a topic not owned = %+v, %v; want it reported not owned", res, err)
			}
		})
	}
}

// TestSeekRefusedUnderExactlyOnce: with output.exactly_once a seek would
// commit outside the transactions, so it is refused, saying what to do,
// and nothing moves.
func TestSeekRefusedUnderExactlyOnce(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("seek-eos", "t")
	c.Output.ExactlyOnce = true
	c.Output.TransactionalID = "seek-eos"
	c.Output.Topic = "out"
	hs := harness.New(t, harness.Config{Consumer: c}, nil)
	hs.Feed(harness.Seq("t", 0, 0, 20, 2)...)
	hs.Assign("t", 0)
	hs.AwaitHandled(20)
	hs.AwaitAllCommitted()
	_, err := hs.Seek(actors.SeekTo{Topic: "t", Partitions: []int32{0}, Offset: 0})
	if !errors.Is(err, actors.ErrSeekRefused) || !strings.Contains(err.Error(), "output.exactly_once") || !strings.Contains(err.Error(), "reset its offsets") {
		t.Fatalf("a seek under exactly once: %v, want it refused, naming output.exactly_once and what to do", err)
	}
	if s := hs.Stats(); s.Seeks != 0 || hs.TimesHandled("t", 0, 0) != 1 {
		t.Fatalf("after the refused seek: %d seeks, t/0@0 handled %d times; want 0 and 1", s.Seeks, hs.TimesHandled("t", 0, 0))
	}
}
