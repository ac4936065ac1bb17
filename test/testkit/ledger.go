package testkit

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
)

// Ledger is a handler that records every delivery and judges the guarantees:
// two records with the same key never run at once (Overlaps), a key's records
// run in offset order (OrderViolations), and each record is handled once
// (Duplicates, Handled). It also measures the peak number of records running
// at once.
//
// Records handled through HandleAs (or the Endpoint, by URL path) are also
// judged for ownership (OwnershipOverlaps, see OwnershipJudge): two members
// handling records of one partition at once.
//
// Order is judged so that it holds across restarts and handovers, where a
// record may legitimately come again: a record breaks its key's order when
// it starts while an earlier record of the key has started but never
// finished (failed, cancelled, or its process killed), or when it starts for
// the first time after a later record of the key already ran.
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

	mu       sync.Mutex
	running  map[string]bool
	keys     map[string]*keyOrder
	handled  map[string]int // "topic/partition@offset" → successful runs
	inFlight int
	peak     int
	overlaps int
	order    int
	dups     int
	total    int
	own      ownership
	members  map[string]bool // every member judged for ownership
	changed  chan struct{}
}

// NewLedger returns a ledger whose records take work each.
func NewLedger(work time.Duration) *Ledger {
	return &Ledger{
		Work:    work,
		running: map[string]bool{},
		keys:    map[string]*keyOrder{},
		handled: map[string]int{},
		changed: make(chan struct{}, 1),
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
	return l.HandleAs(ctx, rec, "")
}

// HandleAs is Handle for records handled by member (a process, a consumer):
// a record begun while another member handles a record of its partition is
// an ownership overlap. "" is not judged for ownership.
func (l *Ledger) HandleAs(ctx context.Context, rec *actors.Record, member string) error {
	k := ledgerKey(rec)
	if l.UnitOf != nil {
		k = l.UnitOf(rec)
	}
	l.mu.Lock()
	if l.running[k] {
		l.overlaps++
	}
	l.running[k] = true
	ko := l.keys[k]
	if ko == nil {
		ko = &keyOrder{maxStarted: -1, unfinished: map[int64]bool{}}
		l.keys[k] = ko
	}
	id := fmt.Sprintf("%s@%d", rec.TP(), rec.Offset)
	if !ko.start(rec.Offset, l.handled[id] > 0 || ko.unfinished[rec.Offset]) {
		l.order++
	}
	l.inFlight++
	l.peak = max(l.peak, l.inFlight)
	tp := rec.TP().String()
	if member != "" {
		l.own.begin(tp, member)
		if l.members == nil {
			l.members = map[string]bool{}
		}
		l.members[member] = true
	}
	l.mu.Unlock()

	err := l.work(ctx, rec)

	l.mu.Lock()
	if member != "" {
		l.own.end(tp, member)
	}
	l.running[k] = false
	l.inFlight--
	if err == nil {
		delete(ko.unfinished, rec.Offset)
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
	// OwnershipOverlaps counts records begun by one member while another
	// handled a record of the same partition (HandleAs and the Endpoint's
	// labelled URLs only); OwnershipExamples names the first few.
	OwnershipOverlaps int
	OwnershipExamples []string
	// Members counts the members judged for ownership (0: none was named).
	Members int
}

// Violations is the verdict on the guarantees turbo never breaks: nil, or
// the same-key overlaps, order violations and ownership overlaps seen.
func (r Report) Violations() error {
	if r.Overlaps == 0 && r.OrderViolations == 0 && r.OwnershipOverlaps == 0 {
		return nil
	}
	return fmt.Errorf("%d same-key overlaps, %d order violations, %d ownership overlaps %v; want 0 of each",
		r.Overlaps, r.OrderViolations, r.OwnershipOverlaps, r.OwnershipExamples)
}

// Report returns the ledger's figures so far.
func (l *Ledger) Report() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Report{Distinct: len(l.handled), Total: l.total, Duplicates: l.dups, Overlaps: l.overlaps, OrderViolations: l.order, Peak: l.peak,
		OwnershipOverlaps: l.own.overlaps, OwnershipExamples: append([]string(nil), l.own.examples...), Members: len(l.members)}
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

// keyOrder is what the ledger knows of one key's deliveries.
type keyOrder struct {
	maxStarted int64          // highest offset ever started
	unfinished map[int64]bool // offsets started and never finished
}

// start records that offset starts (seen: it started before) and reports
// whether that keeps the key's order.
func (o *keyOrder) start(offset int64, seen bool) bool {
	ok := seen || offset > o.maxStarted // a first delivery comes after every earlier one
	for u := range o.unfinished {
		ok = ok && u >= offset // nothing earlier may be left unfinished
	}
	o.unfinished[offset] = true
	o.maxStarted = max(o.maxStarted, offset)
	return ok
}

// peerKey keys the connecting process's member name in a request's context.
type peerKey struct{}

// Endpoint serves the ledger over HTTP for the test, as the target of
// turbo's http handler: every record any turbo process posts there is
// handled (and judged) by the ledger, so one ledger judges across processes.
// A request whose client vanished (a killed process) ends the record's run
// unfinished. It returns the URL. A caller that posts to URL + "/<member>"
// is judged for ownership as that member; any other as the process that
// opened the connection ("pid:<pid>"), found once per connection.
func (l *Ledger) Endpoint(t testing.TB) string {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p, _ := strconv.Atoi(req.Header.Get("Kafka-Partition"))
		off, _ := strconv.ParseInt(req.Header.Get("Kafka-Offset"), 10, 64)
		key, _ := base64.StdEncoding.DecodeString(req.Header.Get("Kafka-Key"))
		rec := &actors.Record{Topic: req.Header.Get("Kafka-Topic"), Partition: int32(p), Offset: off, Key: key}
		member := strings.TrimPrefix(req.URL.Path, "/")
		if member == "" {
			member, _ = req.Context().Value(peerKey{}).(string)
		}
		if err := l.HandleAs(req.Context(), rec, member); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if pid := peerPID(c.RemoteAddr().String(), c.LocalAddr().String()); pid != 0 {
			return context.WithValue(ctx, peerKey{}, "pid:"+strconv.Itoa(pid))
		}
		return ctx
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
