package actors

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition paused for want of credits resumes only once its claim has
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
	starved := &franzFeed{queue: queued(100), bytes: 100, paused: true, marks: marks}
	if got := drain(starved); got != 100 {
		t.Errorf("starved with 100 queued: resumed after %d taken, want 100 (the last)", got)
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
		t.Error("starved feed resumed with a record still queued")
	}
	if _, _, resume := unread.take(true); !resume {
		t.Error("starved feed not resumed once its queue was empty")
	}
}
