package actors

import (
	"sync"
	"testing"
	"time"
)

// roundsSession is a groupSession whose Commit takes what is marked, once
// release lets the first one through.
type roundsSession struct {
	mu        sync.Mutex
	marked    map[int32]bool
	committed map[int32]bool
	commits   int
	entered   chan struct{} // the first Commit has begun
	release   chan struct{} // lets the first Commit finish
}

func (s *roundsSession) MarkOffset(_ string, p int32, _ int64, _ string) {
	s.mu.Lock()
	s.marked[p] = true
	s.mu.Unlock()
}
func (s *roundsSession) ResetOffset(string, int32, int64, string) {}
func (s *roundsSession) Commit() {
	s.mu.Lock()
	s.commits++
	first := s.commits == 1
	snapshot := make([]int32, 0, len(s.marked))
	for p := range s.marked {
		snapshot = append(snapshot, p)
	}
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.release
	}
	s.mu.Lock()
	for _, p := range snapshot {
		s.committed[p] = true
	}
	s.mu.Unlock()
}

// 512 claims handing over while a commit is under way: each returns only
// once its mark is committed, and they share two commits, not 512.
func TestCommitRoundsCoalesceHandovers(t *testing.T) {
	t.Parallel()
	var r commitRounds
	s := &roundsSession{marked: map[int32]bool{}, committed: map[int32]bool{}, entered: make(chan struct{}), release: make(chan struct{})}
	var wg sync.WaitGroup
	s.MarkOffset("t", 0, 1, "")
	wg.Go(func() { r.commit(s) }) // the first round: it blocks in Commit
	<-s.entered
	errs := make(chan string, 512)
	for p := int32(1); p <= 512; p++ {
		wg.Go(func() {
			s.MarkOffset("t", p, 1, "")
			r.commit(s)
			s.mu.Lock()
			ok := s.committed[p]
			s.mu.Unlock()
			if !ok {
				errs <- "a claim's commit returned before its mark was committed"
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.queue)
		r.mu.Unlock()
		if n == 512 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, %d of 512 claims wait for the next round", n)
		}
		time.Sleep(time.Millisecond)
	}
	close(s.release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if s.commits != 2 {
		t.Fatalf("%d commits for 513 handovers, want 2: the one under way and one round for the 512 that waited", s.commits)
	}
}
