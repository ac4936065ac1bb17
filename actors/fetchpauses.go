package actors

import "sync"

// fetchPauses pauses and resumes partitions in a franz-go client in batches.
// Each of the client's PauseFetchPartitions and ResumeFetchPartitions calls
// copies its whole set of paused partitions, so a call per partition costs
// time in proportion to the partitions paused: at 4,096 partitions, each
// paused once when credits ran short and resumed once, the copying took more
// CPU than the rest of turbo's work together.
//
// A caller records what it wants for its partition and returns. Whichever
// caller finds no batch being applied applies every wish pending, then the
// ones that came in meanwhile, until none is left; the others' wishes ride
// along. The last wish for a partition wins, and wishes are applied in the
// order they were made: a wish recorded after a batch was taken goes into the
// next batch, which is applied after it. So once the last call has returned
// and the batches in progress are applied, the client holds the last wish of
// every partition.
type fetchPauses struct {
	pause, resume func(map[string][]int32) // the client's

	mu       sync.Mutex
	pending  map[TopicPartition]bool // true: pause
	spare    map[TopicPartition]bool // the last batch's map, cleared, for the next
	applying bool
}

func newFetchPauses(pause, resume func(map[string][]int32)) *fetchPauses {
	return &fetchPauses{pause: pause, resume: resume, pending: make(map[TopicPartition]bool), spare: make(map[TopicPartition]bool)}
}

// set records that tp should be paused (or resumed) in the client, and, if no
// other caller is applying a batch, applies it with everything else pending.
func (p *fetchPauses) set(tp TopicPartition, paused bool) {
	p.mu.Lock()
	p.pending[tp] = paused
	if p.applying {
		p.mu.Unlock()
		return
	}
	p.applying = true
	for len(p.pending) > 0 {
		batch := p.pending
		p.pending, p.spare = p.spare, nil
		p.mu.Unlock()
		p.apply(batch)
		clear(batch)
		p.mu.Lock()
		p.spare = batch
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
