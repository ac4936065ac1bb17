package testkit

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// OwnershipJudge judges the promise that matters most across members: two
// members never handle records of one partition at the same time. A member
// that goes on with partitions the broker gave to another member (it missed
// that its session ended) breaks it even when no two records of one key
// meet, and a correct handover never does: under cooperative rebalancing the
// old owner lets a partition go only once its running records finished, and
// the new owner starts after that.
//
// It is judged on handler intervals — a delivery's begin to its end — not on
// fetches: a member may have read records of a partition it is about to lose,
// as long as it does not run them. It needs no clock, only the order of
// Begin and End calls, so its verdict does not depend on timing.
type OwnershipJudge struct {
	mu sync.Mutex
	o  ownership
}

// NewOwnershipJudge returns a judge with nothing running.
func NewOwnershipJudge() *OwnershipJudge { return &OwnershipJudge{} }

// Begin records that member began handling a record of partition (any
// string naming a topic-partition); call the returned func when the handler
// ended, whatever its outcome.
func (j *OwnershipJudge) Begin(partition, member string) (end func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.o.begin(partition, member)
	var once sync.Once
	return func() {
		once.Do(func() {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.o.end(partition, member)
		})
	}
}

// Overlaps returns how many deliveries began while another member was
// handling a record of the same partition, and the first few of them.
func (j *OwnershipJudge) Overlaps() (int, []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.o.overlaps, append([]string(nil), j.o.examples...)
}

// ownership is the judge's state, kept under its owner's lock (the
// Ledger's, or OwnershipJudge's).
type ownership struct {
	running  map[string]map[string]int // partition → member → deliveries running
	overlaps int
	examples []string
}

func (o *ownership) begin(partition, member string) {
	if o.running == nil {
		o.running = map[string]map[string]int{}
	}
	ms := o.running[partition]
	if ms == nil {
		ms = map[string]int{}
		o.running[partition] = ms
	}
	var others []string
	for m, n := range ms {
		if m != member && n > 0 {
			others = append(others, fmt.Sprintf("%s (%d running)", m, n))
		}
	}
	if len(others) > 0 {
		o.overlaps++
		if len(o.examples) < maxExamples {
			sort.Strings(others)
			o.examples = append(o.examples, fmt.Sprintf("ownership overlap: %s began a record of partition %s while %s handled records of it",
				member, partition, strings.Join(others, ", ")))
		}
	}
	ms[member]++
}

func (o *ownership) end(partition, member string) {
	ms := o.running[partition]
	if ms == nil {
		return
	}
	if ms[member]--; ms[member] <= 0 {
		delete(ms, member)
	}
	if len(ms) == 0 {
		delete(o.running, partition)
	}
}
