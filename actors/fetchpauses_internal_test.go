package actors

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// pausingClient stands in for a franz-go client's paused set.
type pausingClient struct {
	mu             sync.Mutex
	paused         map[TopicPartition]bool
	pauses, resume int           // calls
	hold           chan struct{} // if set, the first call waits for it to close
	entered        chan struct{} // closed when the first call has begun
	once           sync.Once
}

func (c *pausingClient) call(m map[string][]int32, paused bool) {
	if c.hold != nil {
		c.once.Do(func() { close(c.entered); <-c.hold })
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if paused {
		c.pauses++
	} else {
		c.resume++
	}
	for topic, ps := range m {
		for _, p := range ps {
			c.paused[TopicPartition{Topic: topic, Partition: p}] = paused
		}
	}
}

func newPausingClient() (*pausingClient, *fetchPauses) {
	c := &pausingClient{paused: make(map[TopicPartition]bool)}
	return c, newFetchPauses(func(m map[string][]int32) { c.call(m, true) }, func(m map[string][]int32) { c.call(m, false) })
}

// Whatever the interleaving, once every caller has returned the client holds
// each partition's last wish.
func TestFetchPausesEndAtTheLastWish(t *testing.T) {
	for seed := range uint64(50) {
		c, p := newPausingClient()
		const callers, perCaller = 8, 16
		want := make([]map[TopicPartition]bool, callers)
		var wg sync.WaitGroup
		for g := range callers {
			want[g] = make(map[TopicPartition]bool)
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			wg.Go(func() {
				// Each caller owns its partitions, as a feed owns its own.
				for range 500 {
					tp := TopicPartition{Topic: fmt.Sprintf("t%d", r.IntN(3)), Partition: int32(g*perCaller + r.IntN(perCaller))}
					paused := r.IntN(2) == 0
					p.set(tp, paused)
					want[g][tp] = paused
				}
			})
		}
		wg.Wait()
		for g := range callers {
			for tp, paused := range want[g] {
				if c.paused[tp] != paused {
					t.Fatalf("seed %d: %s: the client has paused=%v, the last wish was %v", seed, tp, c.paused[tp], paused)
				}
			}
		}
		if p.applying || len(p.pending) != 0 {
			t.Fatalf("seed %d: after every caller returned: applying=%v, %d wishes pending", seed, p.applying, len(p.pending))
		}
	}
}

// Wishes made while a batch is being applied ride along in one call each
// for the pauses and the resumes, whoever made them, and none of their
// callers returns before its wish has reached the client.
func TestFetchPausesBatchWhileApplying(t *testing.T) {
	c, p := newPausingClient()
	c.hold, c.entered = make(chan struct{}), make(chan struct{})
	first := make(chan struct{})
	go func() {
		defer close(first)
		p.set(TopicPartition{Topic: "t", Partition: 0}, true)
	}()
	select {
	case <-c.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10 s for the first wish's batch to reach the client")
	}
	const wishes = 1000
	early := make(chan string, wishes)
	var wg sync.WaitGroup
	for i := 1; i <= wishes; i++ {
		wg.Go(func() {
			tp := TopicPartition{Topic: "t", Partition: int32(i)}
			p.set(tp, i%2 == 0) // waits: a batch is being applied
			c.mu.Lock()
			got, ok := c.paused[tp]
			c.mu.Unlock()
			if !ok || got != (i%2 == 0) {
				early <- fmt.Sprintf("partition %d: set returned with the client at paused=%v (known: %v), wished %v", i, got, ok, i%2 == 0)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.pending)
		p.mu.Unlock()
		if n == wishes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %d wishes to be pending while the first batch is applied; %d are", wishes, n)
		}
		time.Sleep(time.Millisecond)
	}
	close(c.hold)
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10 s for the caller applying the batches to return")
	}
	wg.Wait()
	close(early)
	for msg := range early {
		t.Error(msg)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pauses != 2 || c.resume != 1 {
		t.Fatalf("%d wishes made %d pause and %d resume calls, want 2 and 1 (the first wish, then the rest in one batch)", wishes+1, c.pauses, c.resume)
	}
}
