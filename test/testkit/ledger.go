package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
)

// Ledger records every delivery of records and judges turbo's guarantees on
// them. Deliveries reach it as a handler in the test's process (Handle,
// HandleAs), or over HTTP from turbo's http handler in any process
// (ServeHTTP, Endpoint), so one ledger judges across processes, handovers,
// restarts and redeliveries.
//
// A record is known by one of two identities:
//   - the records the ledger produced itself (Produce) carry their identity
//     in their value: key "k<i>", value "k<i>:<seq>:<id>" (seq counts the
//     key's records from 0, id is unique). The ledger knows every earlier
//     record of their key, and which ones the broker acknowledged, so it can
//     also tell lost records and a producer that reordered;
//   - any other record is known by its topic, partition and offset, and
//     only from its deliveries: the ledger knows the records it saw.
//
// The verdicts (Report, Report.Err):
//   - overlaps: a delivery began while another delivery of the same unit (its
//     key; the partition for records without one; UnitOf's answer if set)
//     was running;
//   - order violations: a record began while an earlier record of its unit
//     had not yet finished at least once, or (known by offset only) a record
//     began for the first time after a later one of its unit had begun. This
//     needs no notion of who held the partition, so it holds across
//     handovers: redelivering finished records is fine, skipping ahead of an
//     unfinished one is not;
//   - ownership overlaps: a delivery began while another member (a label: a
//     process, a consumer) was handling a record of its partition (see
//     OwnershipJudge); deliveries without a member are not judged;
//   - duplicates: successful deliveries beyond the first of each record;
//   - lost (produced records): acknowledged by the broker and never finished;
//   - produce disorder: the broker acknowledged a record at a lower offset
//     than an earlier record of its key (a premise of the order verdict);
//   - unknown: deliveries to a ledger that produces of values it did not
//     produce (a mixed-up topic), or whose value and key disagree.
//
// A delivery finishes when its work completed and its caller was still
// there: one whose context was cancelled (the process posting it was
// killed, say) did not finish. The verdict is recorded before the answer is
// given, so the caller cannot start the key's next record before the ledger
// knows this one finished.
type Ledger struct {
	// requests counts the HTTP requests served (ServeHTTP).
	requests atomic.Int64
	// Work is how long each delivery takes (its context cuts it short).
	Work time.Duration
	// Fail, when set, is called before the work; a non-nil error fails the
	// delivery.
	Fail func(rec *actors.Record) error
	// UnitOf names what must never run twice at once and must start in
	// offset order, for records known by offset; the default is the key
	// (the partition for records without one), as under `ordering: key`.
	UnitOf func(rec *actors.Record) string

	opts   LedgerOptions
	prefix string // of produced records' ids: tells this ledger's records from any other's

	mu       sync.Mutex
	rng      *mrand.Rand            // failure injection
	produced map[string]*lrecord    // by id
	byOffset map[string]*lrecord    // records known by offset, by "topic/partition@offset"
	units    map[string]*ledgerUnit // by unit name
	nextID   int64
	changed  chan struct{} // closed and replaced at every change
	suspects []orderSuspect
	examples []string // the first few overlaps and order violations, for the report

	sent, acked, notProduced int
	finished                 int // distinct acknowledged produced records finished at least once
	distinct                 int // distinct records finished at least once
	total                    int // successful deliveries
	deliveries, failed       int
	injected, unknown        int
	overlaps, duplicates     int
	order                    int // order violations of records known by offset (produced ones: suspects)
	inFlight, peak           int
	firstBegin, lastBegin    time.Time // of the deliveries of its own records
	own                      ownership
	members                  map[string]bool // every member judged for ownership
	produceDisorder          int
	running                  map[string]int // label → deliveries running
	byLabel                  map[string]int // label → successful deliveries
}

// LedgerOptions configure a ledger beyond its Work (NewLedgerWith).
type LedgerOptions struct {
	// Work is how long each delivery takes.
	Work time.Duration
	// FailFirst is the fraction (0..1) of records whose first delivery
	// fails at once, without work (over HTTP: answered 500), so that the
	// consumer's retries run.
	FailFirst float64
	// Seed seeds the failure injection.
	Seed uint64
}

// lrecord is what the ledger knows of one record.
type lrecord struct {
	id        string // produced: "<prefix>.<n>"; else "topic/partition@offset"
	unit      string
	topic     string
	partition int32 // -1 until the broker acknowledged a produced record
	offset    int64
	state     lstate
	// Produced records only.
	key string
	seq int
	// Both.
	begun    int // deliveries begun
	finishes int // deliveries finished
	// abandoned: known by offset, and never to finish (Abandon): it no
	// longer holds its unit's order.
	abandoned bool
}

type lstate uint8

const (
	lSeen        lstate = iota // known from a delivery (not produced by the ledger)
	lSent                      // handed to the producer, no answer yet
	lAcked                     // acknowledged by the broker
	lNotProduced               // the producer gave up on it: never required
)

func (r *lrecord) ownRecord() bool { return r.state != lSeen }

// name is how Handled names a record: by offset once it has one.
func (r *lrecord) name() string {
	if r.partition < 0 {
		return r.id
	}
	return r.topic + "/" + strconv.FormatInt(int64(r.partition), 10) + "@" + strconv.FormatInt(r.offset, 10)
}

// ledgerUnit is what the ledger knows of one unit's deliveries.
type ledgerUnit struct {
	running int
	// Produced records of the unit (a key), by seq; seqs[:prefix] all
	// finished or not produced.
	seqs   []*lrecord
	prefix int
	// Records known by offset.
	order keyOrder
}

// orderSuspect is a delivery of a produced record that began while earlier
// records of its key had not finished. It is a violation unless every one
// of them turns out never to have been produced (decided once the producer
// stopped).
type orderSuspect struct {
	rec     *lrecord
	waiting []*lrecord
}

// NewLedger returns a ledger whose deliveries take work each.
func NewLedger(work time.Duration) *Ledger { return NewLedgerWith(LedgerOptions{Work: work}) }

// NewLedgerWith returns an empty ledger configured by o.
func NewLedgerWith(o LedgerOptions) *Ledger {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &Ledger{
		Work:     o.Work,
		opts:     o,
		prefix:   hex.EncodeToString(b),
		rng:      mrand.New(mrand.NewPCG(o.Seed, 0x6b65796c)),
		produced: map[string]*lrecord{},
		byOffset: map[string]*lrecord{},
		units:    map[string]*ledgerUnit{},
		changed:  make(chan struct{}),
		running:  map[string]int{},
		byLabel:  map[string]int{},
		members:  map[string]bool{},
	}
}

const maxExamples = 10

// ByPartition is a UnitOf for `ordering: partition`.
func ByPartition(rec *actors.Record) string { return "partition:" + rec.TP().String() }

func ledgerKey(rec *actors.Record) string {
	if rec.Key == nil {
		return fmt.Sprintf("partition:%s", rec.TP())
	}
	return "key:" + string(rec.Key)
}

func (l *Ledger) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *Ledger) unitLocked(name string) *ledgerUnit {
	u := l.units[name]
	if u == nil {
		u = &ledgerUnit{order: keyOrder{maxStarted: -1, unfinished: map[int64]bool{}}}
		l.units[name] = u
	}
	return u
}

func (l *Ledger) exampleLocked(format string, args ...any) {
	if len(l.examples) < maxExamples {
		l.examples = append(l.examples, fmt.Sprintf(format, args...))
	}
}

// Handle implements actors.Handler.
func (l *Ledger) Handle(ctx context.Context, rec *actors.Record) error {
	return l.HandleAs(ctx, rec, "")
}

// HandleAs is Handle for records handled by member (a process, a consumer):
// a record begun while another member handles a record of its partition is
// an ownership overlap. "" is not judged for ownership.
func (l *Ledger) HandleAs(ctx context.Context, rec *actors.Record, member string) error {
	d := l.begin(rec, member, rec.Key != nil)
	if d == nil {
		return nil
	}
	return d.run(ctx, rec, false)
}

// begin records that a delivery of rec began: as the ledger's own record
// if its value is one, else by its offset. It returns nil for a value of
// the ledger's whose key is not rec's (checkKey): such a delivery is not
// judged (nor ever finished), only counted as unknown.
func (l *Ledger) begin(rec *actors.Record, member string, checkKey bool) *Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.ownLocked(rec.Value); ok {
		if checkKey && string(rec.Key) != r.key {
			l.unknown++
			l.notifyLocked()
			return nil
		}
		return l.beginLocked(r, member)
	}
	if l.sent > 0 {
		l.unknown++ // a producing ledger consumes only its own records
	}
	id := rec.TP().String() + "@" + strconv.FormatInt(rec.Offset, 10)
	r := l.byOffset[id]
	if r == nil {
		unit := ledgerKey(rec)
		if l.UnitOf != nil {
			unit = l.UnitOf(rec)
		}
		r = &lrecord{id: id, unit: unit, topic: rec.Topic, partition: rec.Partition, offset: rec.Offset, state: lSeen}
		l.byOffset[id] = r
	}
	return l.beginLocked(r, member)
}

// ownLocked finds the produced record a value names.
func (l *Ledger) ownLocked(value []byte) (*lrecord, bool) {
	if len(l.produced) == 0 {
		return nil, false
	}
	parts := strings.SplitN(string(value), ":", 3)
	if len(parts) != 3 {
		return nil, false
	}
	r := l.produced[parts[2]]
	if r == nil || parts[0] != r.key || parts[1] != strconv.Itoa(r.seq) {
		return nil, false
	}
	return r, true
}

// Delivery is one delivery under way; End it exactly once.
type Delivery struct {
	l     *Ledger
	rec   *lrecord // nil for an unknown value
	unit  string   // "" when not judged for overlaps
	label string
	tp    string // the record's topic-partition, "" if not judged for ownership
	first bool   // the record's first delivery
}

// Begin records that a delivery of value (a value this ledger produced)
// began; label says where from (e.g. a process's name). An unknown value is
// counted, judged for overlaps by the key it names, and otherwise ignored.
func (l *Ledger) Begin(value []byte, label string) *Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.ownLocked(value); ok {
		return l.beginLocked(r, label)
	}
	l.deliveries++
	l.running[label]++
	l.unknown++
	d := &Delivery{l: l, label: label}
	if parts := strings.SplitN(string(value), ":", 3); len(parts) == 3 { // still judge overlaps by the key it names
		d.unit = "key:" + parts[0]
		l.unitLocked(d.unit).running++
	}
	l.notifyLocked()
	return d
}

func (l *Ledger) beginLocked(r *lrecord, label string) *Delivery {
	l.lastBegin = time.Now()
	if l.firstBegin.IsZero() {
		l.firstBegin = l.lastBegin
	}
	l.deliveries++
	l.running[label]++
	l.inFlight++
	l.peak = max(l.peak, l.inFlight)
	d := &Delivery{l: l, rec: r, unit: r.unit, label: label}
	u := l.unitLocked(r.unit)
	if u.running > 0 {
		l.overlaps++
		l.exampleLocked("overlap: %s (%s) began at %q while %d delivery(ies) of its unit ran", r.id, r.unit, label, u.running)
	}
	u.running++
	if label != "" && r.partition >= 0 {
		d.tp = r.topic + "/" + strconv.FormatInt(int64(r.partition), 10)
		l.own.begin(d.tp, label)
		l.members[label] = true
	}
	if r.ownRecord() {
		l.judgeSeqLocked(u, r)
	} else if r.abandoned {
		// never to finish: its attempts are not judged for order
	} else if !u.order.start(r.offset, r.begun > 0) {
		l.order++
		l.exampleLocked("order: %s (%s) began before an earlier record of its unit had finished, or after a later one began", r.id, r.unit)
	}
	r.begun++
	d.first = r.begun == 1
	l.notifyLocked()
	return d
}

// judgeSeqLocked notes a produced record that begins while earlier records
// of its key had not finished once: a violation unless none of those was
// produced (known only once the producer answered; see Report).
func (l *Ledger) judgeSeqLocked(u *ledgerUnit, r *lrecord) {
	for u.prefix < len(u.seqs) && (u.seqs[u.prefix].finishes > 0 || u.seqs[u.prefix].state == lNotProduced) {
		u.prefix++
	}
	var waiting []*lrecord
	for _, e := range u.seqs[min(u.prefix, r.seq):r.seq] { // none below the prefix
		if e.finishes == 0 && e.state != lNotProduced {
			waiting = append(waiting, e)
		}
	}
	if len(waiting) > 0 {
		l.suspects = append(l.suspects, orderSuspect{rec: r, waiting: waiting})
	}
}

// run does the delivery's work (injected failure, Fail, Work) and ends it.
// With needCaller (over HTTP) a delivery whose context ended meanwhile did
// not finish even if its work did: the caller vanished and never learns of
// a success. In the test's process a handler's success counts as such.
func (d *Delivery) run(ctx context.Context, rec *actors.Record, needCaller bool) error {
	if d.first && d.l.inject() {
		d.End(false)
		return errInjected
	}
	err := d.l.work(ctx, rec)
	if err == nil && needCaller && ctx.Err() != nil {
		err = ctx.Err()
	}
	d.End(err == nil) // before answering: see Ledger
	return err
}

// errInjected fails the first deliveries LedgerOptions.FailFirst picks.
var errInjected = errors.New("ledger: injected failure")

func (l *Ledger) work(ctx context.Context, rec *actors.Record) error {
	if l.Fail != nil {
		if err := l.Fail(rec); err != nil {
			return err
		}
	}
	return handlers.Sleep(l.Work).Handle(ctx, rec)
}

func (l *Ledger) inject() bool {
	if l.opts.FailFirst <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rng.Float64() >= l.opts.FailFirst {
		return false
	}
	l.injected++
	return true
}

// End records the delivery's outcome: finished means the work completed and
// the caller is to be told so.
func (d *Delivery) End(finished bool) {
	l := d.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[d.label]--
	if d.unit != "" {
		l.units[d.unit].running--
	}
	if d.tp != "" {
		l.own.end(d.tp, d.label)
	}
	if r := d.rec; r != nil {
		l.inFlight--
		if finished {
			r.finishes++
			l.byLabel[d.label]++
			l.total++
			if r.finishes == 1 {
				l.distinct++
				if r.state == lAcked {
					l.finished++
				}
			}
			if r.finishes > 1 {
				l.duplicates++
			}
			if !r.ownRecord() {
				delete(l.units[r.unit].order.unfinished, r.offset)
			}
		}
	}
	if !finished {
		l.failed++
	}
	l.notifyLocked()
}

// Abandon tells the ledger that the record at offset of topic/partition,
// known by offset and delivered before, will never finish (its operator
// skipped it): the later records of its unit may start without it, and its
// own deliveries are no longer judged for order. It reports whether the
// ledger knew the record.
func (l *Ledger) Abandon(topic string, partition int32, offset int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byOffset[actors.TopicPartition{Topic: topic, Partition: partition}.String()+"@"+strconv.FormatInt(offset, 10)]
	if r == nil {
		return false
	}
	r.abandoned = true
	delete(l.unitLocked(r.unit).order.unfinished, offset)
	l.notifyLocked()
	return true
}

// keyOrder is what the ledger knows of the order of one unit's records
// known by offset.
type keyOrder struct {
	maxStarted int64          // highest offset ever started
	unfinished map[int64]bool // offsets started and never finished
}

// start records that offset starts (seen: it started before) and reports
// whether that keeps the unit's order.
func (o *keyOrder) start(offset int64, seen bool) bool {
	ok := seen || offset > o.maxStarted // a first delivery comes after every earlier one
	for u := range o.unfinished {
		ok = ok && u >= offset // nothing earlier may be left unfinished
	}
	o.unfinished[offset] = true
	o.maxStarted = max(o.maxStarted, offset)
	return ok
}

// Report is a copy of the ledger's verdicts and counters.
type Report struct {
	Distinct       int // distinct records finished at least once
	Total          int // successful deliveries, duplicates included
	Peak           int // the most deliveries running at once
	Sent           int // produced records handed to the producer
	Produced       int // produced records acknowledged by the broker
	NotProduced    int // given up by the producer
	Finished       int // distinct produced records finished at least once
	Lost           int // produced, not (yet) finished once
	Deliveries     int // deliveries begun, every attempt included
	FailedAttempts int // deliveries that did not finish (failed, injected, cancelled)
	Injected       int // first deliveries failed on purpose
	Unknown        int // deliveries not judged as a record of this ledger's (see Ledger)
	Overlaps       int
	// OwnershipOverlaps counts deliveries that began while another member
	// handled a record of the same partition: two members holding one
	// partition at once. OwnershipExamples names the first few.
	OwnershipOverlaps int
	OwnershipExamples []string
	// Members counts the members judged for ownership (0: none was named).
	Members         int
	OrderViolations int
	Duplicates      int     // successful deliveries beyond the first per record
	DuplicatePct    float64 // Duplicates per produced record, in percent
	// ProduceDisorder counts records the broker acknowledged at a lower
	// offset than an earlier record of their key: a premise of the order
	// verdict (it would blame the consumer for the producer's reordering).
	ProduceDisorder int
	// FirstBegin and LastBegin are when the first and the last delivery of
	// the ledger's records began (zero: none did).
	FirstBegin, LastBegin time.Time
	ByLabel               map[string]int // successful deliveries per label
	Examples              []string       // the first few violations and lost records
}

// Progress is the cheap part of the report, for waiting on.
type Progress struct {
	Produced, Finished, Pending int
	Running                     map[string]int // label → deliveries running now
	Done                        map[string]int // label → successful deliveries so far
}

// Changed returns a channel closed at the ledger's next change.
func (l *Ledger) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Progress returns the counters cheap enough to check at every change.
func (l *Ledger) Progress() Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Progress{Produced: l.acked, Finished: l.finished, Pending: l.sent - l.acked - l.notProduced, Running: map[string]int{}, Done: map[string]int{}}
	for k, v := range l.running {
		if v > 0 {
			p.Running[k] = v
		}
	}
	for k, v := range l.byLabel {
		p.Done[k] = v
	}
	return p
}

// Await waits until cond holds for the ledger's progress, checking at every
// change; it fails with what it waited for and the last progress when ctx
// ends first.
func (l *Ledger) Await(ctx context.Context, what string, cond func(Progress) bool) error {
	for {
		ch := l.Changed()
		p := l.Progress()
		if cond(p) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("ledger: waiting for %s: %w (produced %d, finished %d, pending acks %d, running %v)",
				what, context.Cause(ctx), p.Produced, p.Finished, p.Pending, p.Running)
		}
	}
}

// AwaitAllFinished waits until every record produced so far finished at
// least once and no record awaits its acknowledgement: stop the producer
// first.
func (l *Ledger) AwaitAllFinished(ctx context.Context) error {
	return l.Await(ctx, "every produced record to finish at least once", func(p Progress) bool {
		return p.Pending == 0 && p.Finished == p.Produced
	})
}

// Report returns the verdicts so far. Lost and the order of produced records
// are final only once the producer stopped and the consumers drained.
func (l *Ledger) Report() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	rep := Report{
		Distinct: l.distinct, Total: l.total, Peak: l.peak,
		Sent: l.sent, Produced: l.acked, NotProduced: l.notProduced, Finished: l.finished,
		Deliveries: l.deliveries, FailedAttempts: l.failed, Injected: l.injected, Unknown: l.unknown,
		Overlaps: l.overlaps, OwnershipOverlaps: l.own.overlaps, OwnershipExamples: append([]string(nil), l.own.examples...),
		Members: len(l.members), OrderViolations: l.order, Duplicates: l.duplicates, ProduceDisorder: l.produceDisorder,
		FirstBegin: l.firstBegin, LastBegin: l.lastBegin,
		ByLabel: map[string]int{}, Examples: append(append([]string(nil), l.examples...), l.own.examples...),
	}
	for k, v := range l.byLabel {
		rep.ByLabel[k] = v
	}
	for _, s := range l.suspects {
		for _, e := range s.waiting {
			if e.state != lNotProduced {
				rep.OrderViolations++
				if len(rep.Examples) < maxExamples {
					rep.Examples = append(rep.Examples, fmt.Sprintf("order: %s seq %d (%s) began before seq %d (%s) had finished once",
						s.rec.key, s.rec.seq, s.rec.id, e.seq, e.id))
				}
				break
			}
		}
	}
	var lost []*lrecord
	for _, r := range l.produced {
		if r.state == lAcked && r.finishes == 0 {
			lost = append(lost, r)
		}
	}
	rep.Lost = len(lost)
	sort.Slice(lost, func(i, j int) bool {
		if lost[i].partition != lost[j].partition {
			return lost[i].partition < lost[j].partition
		}
		return lost[i].offset < lost[j].offset
	})
	for _, r := range lost {
		if len(rep.Examples) >= maxExamples {
			break
		}
		rep.Examples = append(rep.Examples, fmt.Sprintf("lost: %s seq %d (%s) at partition %d offset %d, %d deliveries begun",
			r.key, r.seq, r.id, r.partition, r.offset, r.begun))
	}
	if l.acked > 0 {
		rep.DuplicatePct = 100 * float64(l.duplicates) / float64(l.acked)
	}
	return rep
}

// Handled returns the records finished at least once, by name
// ("topic/partition@offset"), with how many times each finished.
func (l *Ledger) Handled() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, m := range []map[string]*lrecord{l.byOffset, l.produced} {
		for _, r := range m {
			if r.finishes > 0 {
				out[r.name()] += r.finishes
			}
		}
	}
	return out
}

// Err returns an error listing every broken guarantee (lost records, order
// violations, overlaps of a unit, overlaps of a partition's owners, records
// reordered by the producer, unknown values), or nil.
func (r Report) Err() error {
	var errs []error
	for _, c := range []struct {
		n    int
		what string
	}{
		{r.Lost, "lost records"}, {r.OrderViolations, "order violations"}, {r.Overlaps, "overlaps"},
		{r.OwnershipOverlaps, "ownership overlaps (two members handling one partition at once)"},
		{r.ProduceDisorder, "records the producer reordered"}, {r.Unknown, "deliveries of unknown values"},
	} {
		if c.n != 0 {
			errs = append(errs, fmt.Errorf("%d %s", c.n, c.what))
		}
	}
	if errs == nil {
		return nil
	}
	return fmt.Errorf("ledger: %w; examples:\n  %s", errors.Join(errs...), strings.Join(r.Examples, "\n  "))
}
