package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Claims that start together share one lookup of their topic's id; an id is
// reused while fresh and read again after, and an unknown one is never kept.
func TestTopicIDsShareALookup(t *testing.T) {
	t.Parallel()
	var c topicIDs
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var looks atomic.Int32
	release := make(chan struct{})
	id := topicID{1}
	look := func() topicID {
		looks.Add(1)
		<-release
		return id
	}

	// 64 claims at once: one lookup, every claim gets its answer.
	var wg sync.WaitGroup
	got := make([]topicID, 64)
	for i := range got {
		wg.Go(func() { got[i] = c.get("t", now, look) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for looks.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no lookup started within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := looks.Load(); n != 1 {
		t.Fatalf("%d lookups for 64 claims starting together, want 1", n)
	}
	for i, g := range got {
		if g != id {
			t.Fatalf("claim %d got %x, want %x", i, g, id)
		}
	}

	// Fresh: reused. Stale: read again (and another topic is its own).
	clock.Add(int64(topicIDFresh - time.Millisecond))
	c.get("t", now, look)
	if n := looks.Load(); n != 1 {
		t.Fatalf("a fresh id was read again (%d lookups)", n)
	}
	c.get("u", now, look)
	clock.Add(int64(time.Millisecond))
	id = topicID{2}
	if g := c.get("t", now, look); g != id || looks.Load() != 3 {
		t.Fatalf("after %s: got %x after %d lookups, want %x read again (3 lookups)", topicIDFresh, g, looks.Load(), id)
	}

	// Unknown (a failed lookup) is not kept.
	id = topicID{}
	clock.Add(int64(topicIDFresh))
	c.get("t", now, look)
	id = topicID{3}
	if g := c.get("t", now, look); g != id || looks.Load() != 5 {
		t.Fatalf("after an unknown id: got %x after %d lookups, want %x from a new lookup (5)", g, looks.Load(), id)
	}
}
