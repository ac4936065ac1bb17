package actors

import "sync"

// fetchPauses pauses and resumes partitions in a franz-go client in batches.
// Each of the client's PauseFetchPartitions and ResumeFetchPartitions calls
// copies its whole set of paused partitions, so a call per partition costs
// time in proportion to the partitions paused: at 4,096 partitions, each
// paused once when credits ran short and resumed once, the copying took more
// CPU than the rest of turbo's work together.
//
// A caller records what it wants for its partition. Whichever caller finds
// no batch being applied applies every wish pending, then the ones that came
// in meanwhile, until none is left; the others' wishes ride along, and each
// of them waits until the batch holding its wish has reached the client. So
// when set returns, the client holds that wish (or a later one for the same
// partition): a pause is in effect before the poll loop that asked for it
// polls again. The last wish for a partition wins, and batches are applied in
// the order they were taken.
type fetchPauses struct {
	pause, resume func(map[string][]int32) // the client's

	mu       sync.Mutex
	applied  sync.Cond               // on mu: a batch reached the client
	pending  map[TopicPartition]bool // true: pause
	spare    map[TopicPartition]bool // the last batch's map, cleared, for the next
	applying bool
	taken    uint64 // batches taken from pending
	done     uint64 // batches applied; batches are applied in the order taken
}

func newFetchPauses(pause, resume func(map[string][]int32)) *fetchPauses {
	p := &fetchPauses{pause: pause, resume: resume, pending: make(map[TopicPartition]bool), spare: make(map[TopicPartition]bool)}
	p.applied.L = &p.mu
	return p
}

// set pauses (or resumes) tp in the client: if another caller is applying a
// batch, it waits for the next batch, which holds its wish, to be applied;
// otherwise it applies that batch, and the ones after it, itself.
func (p *fetchPauses) set(tp TopicPartition, paused bool) {
	p.mu.Lock()
	p.pending[tp] = paused
	mine := p.taken + 1 // the next batch taken holds this wish
	if p.applying {
		for p.done < mine {
			p.applied.Wait()
		}
		p.mu.Unlock()
		return
	}
	p.applying = true
	for len(p.pending) > 0 {
		batch := p.pending
		p.pending, p.spare = p.spare, nil
		p.taken++
		p.mu.Unlock()
		p.apply(batch)
		clear(batch)
		p.mu.Lock()
		p.spare = batch
		p.done = p.taken
		p.applied.Broadcast()
	}
	p.applying = false
	p.mu.Unlock()
}

// apply makes one call for the pauses of batch and one for its resumes.
func (p *fetchPauses) apply(batch map[TopicPartition]bool) {
	var pause, resume map[string][]int32
	for tp, paused := range batch {
		m := &resume
		if paused {
			m = &pause
		}
		if *m == nil {
			*m = make(map[string][]int32)
		}
		(*m)[tp.Topic] = append((*m)[tp.Topic], tp.Partition)
	}
	if pause != nil {
		p.pause(pause)
	}
	if resume != nil {
		p.resume(resume)
	}
}
