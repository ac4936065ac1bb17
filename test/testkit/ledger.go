package testkit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
)

// Ledger is a handler that records every delivery and judges the guarantees:
// two records with the same key never run at once (Overlaps), a key's records
// start in offset order (OrderViolations), and each record is handled once
// (Duplicates, Handled). It also measures the peak number of records running
// at once.
type Ledger struct {
	// Work is how long each record takes (its context cancels it early).
	Work time.Duration
	// Fail, when set, is called before the work; a non-nil error fails the
	// record.
	Fail func(rec *actors.Record) error
	// UnitOf names what must never run twice at once and must start in
	// offset order; the default is the key (the partition for records
	// without one), as under `ordering: key`.
	UnitOf func(rec *actors.Record) string

	mu        sync.Mutex
	running   map[string]bool
	lastStart map[string]int64 // key → offset of the last record started
	handled   map[string]int   // "topic/partition@offset" → successful runs
	inFlight  int
	peak      int
	overlaps  int
	order     int
	dups      int
	total     int
	changed   chan struct{}
}

// NewLedger returns a ledger whose records take work each.
func NewLedger(work time.Duration) *Ledger {
	return &Ledger{
		Work:      work,
		running:   map[string]bool{},
		lastStart: map[string]int64{},
		handled:   map[string]int{},
		changed:   make(chan struct{}, 1),
	}
}

// ByPartition is a UnitOf for `ordering: partition`.
func ByPartition(rec *actors.Record) string { return "partition:" + rec.TP().String() }

func ledgerKey(rec *actors.Record) string {
	if rec.Key == nil {
		return fmt.Sprintf("partition:%s", rec.TP())
	}
	return "key:" + string(rec.Key)
}

// Handle implements actors.Handler.
func (l *Ledger) Handle(ctx context.Context, rec *actors.Record) error {
	k := ledgerKey(rec)
	if l.UnitOf != nil {
		k = l.UnitOf(rec)
	}
	l.mu.Lock()
	if l.running[k] {
		l.overlaps++
	}
	l.running[k] = true
	if last, ok := l.lastStart[k]; ok && rec.Offset <= last {
		l.order++
	}
	l.lastStart[k] = rec.Offset
	l.inFlight++
	l.peak = max(l.peak, l.inFlight)
	l.mu.Unlock()

	err := l.work(ctx, rec)

	l.mu.Lock()
	l.running[k] = false
	l.inFlight--
	if err == nil {
		id := fmt.Sprintf("%s@%d", rec.TP(), rec.Offset)
		l.handled[id]++
		if l.handled[id] > 1 {
			l.dups++
		}
		l.total++
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return err
}

func (l *Ledger) work(ctx context.Context, rec *actors.Record) error {
	if l.Fail != nil {
		if err := l.Fail(rec); err != nil {
			return err
		}
	}
	return handlers.Sleep(l.Work).Handle(ctx, rec)
}

// Report is a copy of the ledger's judgement.
type Report struct {
	Distinct        int // distinct records handled successfully
	Total           int // successful runs, duplicates included
	Duplicates      int
	Overlaps        int
	OrderViolations int
	Peak            int
}

// Report returns the ledger's figures so far.
func (l *Ledger) Report() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Report{Distinct: len(l.handled), Total: l.total, Duplicates: l.dups, Overlaps: l.overlaps, OrderViolations: l.order, Peak: l.peak}
}

// Handled returns the set of records handled successfully ("topic/p@offset").
func (l *Ledger) Handled() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.handled))
	for k, v := range l.handled {
		out[k] = v
	}
	return out
}

// ForgetOrder resets the order bookkeeping: after a restart, records of a key
// legitimately start again from the committed offset.
func (l *Ledger) ForgetOrder() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.lastStart)
}
