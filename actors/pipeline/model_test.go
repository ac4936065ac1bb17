package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/turbokafka/turbo/actors/internal/modeltest"
)

// The model test drives a Pipeline with random operations — adds, dispatch,
// runners claiming and finishing records (some failing), stealChecks,
// retries firing, dead-letter answers, revocations, drops, a halt, flushes —
// and keeps beside it a naive ledger: the state of every record, updated
// from what the harness did and what the Pipeline returned. After every
// operation the Pipeline's counts must match the ledger's; at every claim
// the ordering must hold; at the end every record must have left exactly
// once and every revoked partition drained exactly once.

// state is a record's state in the ledger.
type state int

const (
	waiting  state = iota // in the scheduler (or given back to it)
	queued                // in a runner's batch, not claimed
	running               // claimed by its runner
	finished              // finished by its runner, not yet accounted for
	parked                // failed, waiting for its retry timer
	ready                 // retry due, not yet dispatched
	dead                  // failed, reported for the dead-letter topic
	gone                  // left: see how
)

// how a record left.
type how int

const (
	notGone    how = iota
	doneOK         // reported in Done (success or skipped)
	lostHow        // its partition was dropped while it ran
	escalated      // reported in Failed; its unit stays pinned
	deadAcked      // the dead-letter topic took it
	deadFailed     // the dead-letter topic failed it; its unit stays pinned
	dropped        // dropped with its partition, or at the halt
	notRunBack     // not its leaving: a handler call did not run it (ErrNotRun), and it went back
)

type rec struct {
	id        int // add order
	unit      string
	epoch     uint64
	offset    int64
	st        state
	how       how
	verdict   Verdict // what Judge answers for its current failure
	failed    bool    // its current attempt failed
	notRun    bool    // its handler call failed an earlier record of its unit: not run
	freed     int     // times it was in Out.Free
	discarded int     // times it was in Out.Dropped
	batch     *Batch[*rec]
	index     int // its index in batch
}

// through reports whether r no longer holds back later records of its unit.
func (r *rec) through() bool {
	switch r.st {
	case gone:
		return r.how == doneOK || r.how == lostHow || r.how == dropped || r.how == deadAcked
	case finished:
		return !r.notRun && (!r.failed || r.verdict == Finished || r.verdict == Lost)
	}
	return false
}

// live reports whether the Pipeline still counts r in its assignment.
func (r *rec) live() bool { return r.st != gone }

type harness struct {
	t              testing.TB
	p              *Pipeline[*rec]
	recs           []*rec         // every record added, by id
	live           []*rec         // every record not gone, and some gone since the last check
	goneHeld       map[string]int // pins of records gone for good, by unit
	perEpoch       []int          // check's scratch: live records by epoch
	held           map[string]int // check's scratch: pins the ledger expects
	epochs         map[uint64]*epochState
	runners        map[int]*runnerState // by runner id, busy ones
	armed          map[*rec]bool        // retry timers armed and not cancelled
	deadOut        []*rec               // reported dead, not yet answered
	halted         bool
	nextEp         uint64
	spawnedMax     int // runners made so far (as the adapter would have)
	offsets        map[uint64]int64
	quota          int             // what is left of the last SetQuota (-1: none)
	notRunBack     int             // records a handler call did not run, accounted for
	everHeld       map[uint64]bool // epochs held (paused) at some point
	dispatchedOver bool            // a batch was given out beyond the limit (SetLimit)
}

type epochState struct {
	revoked, dropped, drained bool
}

type runnerState struct {
	b        *Batch[*rec]
	claimed  int
	current  []*rec // claimed, not finished: one handler call's records
	stop     bool   // a failure, or Claim said no: report Ran next
	reported bool
}

type hooks struct{ h *harness }

func (hooks) Unit(r *rec) string  { return r.unit }
func (hooks) Epoch(r *rec) uint64 { return r.epoch }
func (hooks) Offset(r *rec) int64 { return r.offset }
func (k hooks) Judge(r *rec, err error) Verdict {
	if err == nil {
		k.h.t.Fatalf("record %d judged without an error", r.id)
	}
	if k.h.epochs[r.epoch].dropped {
		return Lost
	}
	return r.verdict
}

var errFailed = errors.New("handler failed")

func newHarness(t testing.TB, runners, maxRun int) *harness {
	h := &harness{t: t, goneHeld: map[string]int{}, epochs: map[uint64]*epochState{}, runners: map[int]*runnerState{},
		armed: map[*rec]bool{}, offsets: map[uint64]int64{}, quota: -1, everHeld: map[uint64]bool{}}
	h.p = New[*rec](hooks{h}, runners, maxRun)
	return h
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf(format, args...)
}

// add adds n records of epoch to the Pipeline and the ledger.
func (h *harness) add(epoch uint64, units []string, pick func(int) int, n int) {
	if h.epochs[epoch] == nil {
		h.epochs[epoch] = &epochState{}
	}
	var batch []*rec
	for range n {
		r := &rec{id: len(h.recs), unit: units[pick(len(units))], epoch: epoch, offset: h.offsets[epoch]}
		h.offsets[epoch]++
		batch = append(batch, r)
		if !h.halted {
			h.recs = append(h.recs, r)
			h.live = append(h.live, r)
		}
	}
	h.p.Add(epoch, batch)
}

// apply checks and applies what the last operation left in Out, then the
// ledger's invariants. (No t.Helper: it runs after every operation, and
// the stack walk it costs was a tenth of the package's time.)
func (h *harness) apply() {
	out := h.p.Out()
	for _, r := range out.Free {
		r.freed++
		if r.freed > 1 {
			h.fatalf("record %d freed %d times", r.id, r.freed)
		}
	}
	for _, r := range out.Dropped {
		r.discarded++
		if r.discarded > 1 || r.freed > 0 {
			h.fatalf("record %d in Dropped %d times, freed %d times", r.id, r.discarded, r.freed)
		}
	}
	for _, f := range out.Park {
		if f.Err == nil || h.armed[f.Rec] {
			h.fatalf("record %d parked twice or without an error", f.Rec.id)
		}
		h.armed[f.Rec] = true
	}
	for _, r := range out.Unpark {
		if !h.armed[r] {
			h.fatalf("record %d unparked without a timer", r.id)
		}
		delete(h.armed, r)
	}
	h.sync()
	if len(out.Runs) > 0 && len(h.runners)+len(out.Runs) > h.p.limit {
		h.dispatchedOver = true
	}
	given := 0
	for _, run := range out.Runs {
		given += run.Batch.Len()
	}
	if h.quota >= 0 {
		if given > h.quota {
			h.fatalf("%d records given out with a quota of %d", given, h.quota)
		}
		h.quota -= given
		if p := h.p.Quota(); p != h.quota {
			h.fatalf("Quota() = %d after %d given out, want %d", p, given, h.quota)
		}
	}
	for _, run := range out.Runs {
		if rs := h.runners[run.Runner]; rs != nil {
			h.fatalf("runner %d got a batch while busy", run.Runner)
		}
		if run.Spawn != (run.Runner == h.spawnedMax) {
			h.fatalf("runner %d: Spawn=%v with %d runners made", run.Runner, run.Spawn, h.spawnedMax)
		}
		if run.Spawn {
			h.spawnedMax++
		}
		if run.Batch.Len() == 0 {
			h.fatalf("empty batch for runner %d", run.Runner)
		}
		for i, r := range run.Batch.records {
			if r.st != waiting && r.st != ready {
				h.fatalf("record %d dispatched in state %d", r.id, r.st)
			}
			if h.p.Held(r.epoch) {
				h.fatalf("record %d dispatched while its partition (epoch %d) is held", r.id, r.epoch)
			}
			if r.unit != "" {
				h.checkNotElsewhere(r, run.Batch)
			}
			r.st, r.batch, r.index = queued, run.Batch, i
		}
		h.runners[run.Runner] = &runnerState{b: run.Batch}
	}
	h.p.Reset()
	h.check()
}

// checkNotElsewhere fails when r's unit has a record in another batch that
// the Pipeline has not accounted for yet.
func (h *harness) checkNotElsewhere(r *rec, mine *Batch[*rec]) {
	for id, rs := range h.runners {
		b := rs.b
		if b == mine {
			continue
		}
		for _, o := range b.records[b.seen:b.limit] {
			if o.unit == r.unit {
				h.fatalf("unit %q dispatched while runner %d has record %d of it", r.unit, id, o.id)
			}
		}
	}
}

// sync brings the ledger up to date with what the Pipeline did inside an
// operation: tails taken back, finished records accounted for, drops.
func (h *harness) sync() {
	for _, rs := range h.runners {
		b := rs.b
		if n := int(b.next.Load()); n >= b.Len() && b.limit < b.Len() {
			for _, r := range b.records[b.limit:] {
				if r.st == queued && r.batch == b {
					r.st = waiting
				}
			}
		}
	}
	for _, r := range h.live {
		if r.st == finished && r.batch != nil && r.index < r.batch.seen {
			h.accounted(r)
		}
	}
	if h.halted { // nothing waits after a halt: Ran drops the tails at once
		h.dropRecs(func(*rec) bool { return true })
	}
}

// accounted applies the verdict to a finished record the Pipeline harvested.
func (h *harness) accounted(r *rec) {
	v := Finished
	if r.failed {
		v = r.verdict
		if h.epochs[r.epoch].dropped || (v == Retry && h.halted) {
			v = Lost
		}
	}
	r.batch = nil
	if r.notRun { // back in the scheduler, or dropped with its partition
		r.notRun = false
		h.notRunBack++
		r.st = waiting
		if h.halted || h.epochs[r.epoch].dropped {
			r.st, r.how = gone, dropped
		}
		return
	}
	switch v {
	case Finished:
		r.st, r.how = gone, doneOK
	case Lost:
		r.st, r.how = gone, lostHow
	case Escalate:
		r.st, r.how = gone, escalated
	case Retry:
		r.st = parked
		if !h.armed[r] {
			h.fatalf("record %d parked without a timer", r.id)
		}
	case DeadLetter:
		r.st = dead
	}
}

// dropWaiting marks as dropped the records the Pipeline must have dropped:
// those of an epoch matching drop that wait, parked or ready.
func (h *harness) dropRecs(drop func(r *rec) bool) {
	for _, r := range h.live {
		if (r.st == waiting || r.st == parked || r.st == ready) && drop(r) {
			r.st, r.how = gone, dropped
		}
	}
}

// compact takes the records gone since the last check out of h.live (a
// gone record never changes again), keeping the pins they hold for good: the
// checks then cost what is live, not every record of the run.
func (h *harness) compact() {
	live := h.live[:0]
	for _, r := range h.live {
		switch {
		case r.st != gone:
			live = append(live, r)
		case r.how == escalated || r.how == deadFailed:
			h.goneHeld[r.unit]++
		}
	}
	clear(h.live[len(live):])
	h.live = live
}

// check compares the Pipeline's counts with the ledger's.
func (h *harness) check() {
	h.compact()
	var nWaiting, nReady, nParked, nFlight int
	// Scratch reused from check to check: it runs after every operation.
	perEpoch := slices.Grow(h.perEpoch[:0], int(h.nextEp)+1)[:h.nextEp+1] // epochs are 1…nextEp
	clear(perEpoch)
	h.perEpoch = perEpoch
	if h.held == nil {
		h.held = map[string]int{}
	}
	held := h.held
	clear(held)
	maps.Copy(held, h.goneHeld)
	for _, r := range h.live {
		switch r.st {
		case waiting:
			nWaiting++
		case ready:
			nReady++
		case parked:
			nParked++
			held[r.unit]++
		case dead:
			held[r.unit]++
		case queued, running, finished:
			nFlight++
		case gone:
			if r.how == escalated || r.how == deadFailed {
				held[r.unit]++
			}
		}
		if r.live() {
			perEpoch[r.epoch]++
		}
	}
	delete(held, "")
	if got := h.p.Waiting(); got != nWaiting {
		h.fatalf("Waiting() = %d, ledger has %d waiting", got, nWaiting)
	}
	heldReady := 0
	for _, a := range h.p.parts {
		heldReady += len(a.ready)
	}
	if len(h.p.ready)+heldReady != nReady || len(h.p.parked) != nParked {
		for r := range h.p.parked {
			h.t.Logf("parked: record %d state %d how %d failed %v verdict %d epoch %d %+v", r.id, r.st, r.how, r.failed, r.verdict, r.epoch, h.epochs[r.epoch])
		}
		h.fatalf("ready %d parked %d, ledger has %d and %d", len(h.p.ready), len(h.p.parked), nReady, nParked)
	}
	if h.p.InFlight() != nFlight {
		h.fatalf("InFlight() = %d, ledger has %d in batches", h.p.InFlight(), nFlight)
	}
	for epoch, a := range h.p.parts {
		if epoch > h.nextEp {
			h.fatalf("epoch %d: the Pipeline has it, the ledger never added it", epoch)
		}
		if a.records != perEpoch[epoch] {
			h.fatalf("epoch %d: %d records counted, ledger has %d", epoch, a.records, perEpoch[epoch])
		}
	}
	for epoch, n := range perEpoch {
		if n > 0 && h.p.parts[uint64(epoch)] == nil {
			h.fatalf("epoch %d: %d records live but the Pipeline forgot it", epoch, n)
		}
	}
	if len(held) != len(h.p.pinned) {
		h.fatalf("pinned = %v, ledger pins %v", h.p.pinned, held)
	}
	for u, n := range held {
		if h.p.pinned[u] != n {
			h.fatalf("pinned[%q] = %d, ledger pins %d", u, h.p.pinned[u], n)
		}
	}
	if h.p.Busy() != len(h.runners) {
		h.fatalf("Busy() = %d, %d runners have a batch", h.p.Busy(), len(h.runners))
	}
	if h.dispatchedOver {
		h.fatalf("a batch went to a runner with %d busy, at the limit %d", h.p.Busy(), h.p.limit)
	}
	if h.p.Runners() > h.p.max {
		h.fatalf("%d runners made, at most %d", h.p.Runners(), h.p.max)
	}
}

// claimCheck is the ordering invariant, at the moment r starts: every
// record of its unit added before it is through, or claimed before it for
// the same handler call (call), and none after it is running.
func (h *harness) claimCheck(r *rec, call []*rec) {
	if r.unit == "" {
		return
	}
	for _, o := range h.live { // a gone record is through and not running
		if o == r || o.unit != r.unit {
			continue
		}
		// A held partition's records yield to its unit's records of other
		// partitions (a key spans partitions; Kafka orders none across).
		yielded := o.epoch != r.epoch && h.everHeld[o.epoch]
		if o.id < r.id && !o.through() && !slices.Contains(call, o) && !yielded {
			h.fatalf("record %d of unit %q started before earlier record %d (state %d, how %d)", r.id, r.unit, o.id, o.st, o.how)
		}
		// Within one handler call records run one after the other: a held
		// partition's record may follow a younger one of another there.
		sequential := slices.Contains(call, o) && o.epoch != r.epoch && h.everHeld[r.epoch]
		if o.id > r.id && o.st == running && !sequential {
			h.fatalf("record %d of unit %q started while later record %d runs", r.id, r.unit, o.id)
		}
	}
}

// verdicts is what Judge answers for a failure, by outcome.
var verdicts = []Verdict{Retry, Retry, Retry, Finished, DeadLetter, DeadLetter, Escalate, Retry}

// step advances runner id by one move: finish the records of its current
// handler call, report the batch, or claim records for a handler call: one,
// as Handle takes them, or up to four, as HandleBatch does.
func (h *harness) step(id int, outcome int) {
	rs := h.runners[id]
	switch {
	case len(rs.current) == 1 && outcome%5 != 0:
		r := rs.current[0]
		rs.current = rs.current[:0]
		r.st = finished
		r.failed = outcome%4 == 0 // a quarter fail
		var err error
		if r.failed {
			err = errFailed
			r.verdict = verdicts[outcome/4%8]
			rs.stop = true // the records after a failure are taken back
		}
		rs.b.Finish(r.index, err)
	case len(rs.current) > 0: // a handler call's batch, finished at once
		errs := make([]error, len(rs.current))
		failedUnits := map[string]bool{}
		for i, r := range rs.current {
			r.st = finished
			o := (outcome >> i) * 7 // an outcome per record
			switch {
			case r.unit != "" && failedUnits[r.unit]:
				r.notRun, errs[i] = true, ErrNotRun
			case o%3 == 0:
				r.failed, r.verdict, errs[i] = true, verdicts[o/3%8], errFailed
				failedUnits[r.unit] = true
			default:
				r.failed = false
			}
			if errs[i] != nil {
				rs.stop = true
			}
		}
		rs.b.FinishRange(rs.current[0].index, errs)
		rs.current = rs.current[:0]
	case rs.stop:
		delete(h.runners, id)
		// The tail it left goes back; read before Ran, which reuses the batch.
		var tail []*rec
		for _, r := range rs.b.records[rs.claimed:] {
			if r.st == queued && r.batch == rs.b {
				tail = append(tail, r)
			}
		}
		if n := h.p.Ran(id); n != rs.claimed { // it finished every record it claimed
			h.fatalf("Ran(%d) = %d finished, want %d", id, n, rs.claimed)
		}
		for _, r := range tail {
			r.st = waiting
		}
		h.apply()
		return
	default:
		for range 1 + outcome%4 {
			if peek, ok := rs.b.Peek(); ok && peek != rs.b.Item(int(rs.b.next.Load())) {
				h.fatalf("runner %d: Peek gave record %d, not the next one", id, peek.id)
			}
			i, ok := rs.b.Claim()
			if !ok {
				if len(rs.current) == 0 {
					rs.stop = true
				}
				return
			}
			rs.claimed = i + 1
			r := rs.b.Item(i)
			if r.st != queued || r.index != i {
				h.fatalf("runner %d claimed record %d in state %d", id, r.id, r.st)
			}
			h.claimCheck(r, rs.current)
			r.st = running
			rs.current = append(rs.current, r)
		}
	}
}

// flush checks a Flush report against the ledger.
func (h *harness) flush(reported map[*rec]bool) {
	f := h.p.Flush()
	seen := func(r *rec, want how, what string) {
		if reported[r] {
			h.fatalf("record %d reported twice (%s)", r.id, what)
		}
		reported[r] = true
		if r.st != gone || r.how != want {
			h.fatalf("record %d reported %s in state %d how %d", r.id, what, r.st, r.how)
		}
	}
	for _, r := range f.Done {
		seen(r, doneOK, "done")
	}
	for _, x := range f.Failed {
		seen(x.Rec, escalated, "failed")
	}
	for _, x := range f.Dead {
		if reported[x.Rec] || x.Rec.st != dead {
			h.fatalf("record %d reported dead twice or in state %d", x.Rec.id, x.Rec.st)
		}
		reported[x.Rec] = true
		h.deadOut = append(h.deadOut, x.Rec)
	}
	for _, epoch := range f.Drained {
		e := h.epochs[epoch]
		if e == nil || e.drained || !(e.revoked || e.dropped) {
			h.fatalf("epoch %d drained twice or without a revocation", epoch)
		}
		e.drained = true
		for _, r := range h.recs {
			if r.epoch != epoch {
				continue
			}
			if r.live() {
				h.fatalf("epoch %d drained with record %d in state %d", epoch, r.id, r.st)
			}
			if (r.how == doneOK || r.how == escalated) && !reported[r] {
				h.fatalf("epoch %d drained before record %d was reported", epoch, r.id)
			}
		}
	}
}

// revoke applies the naive drop rule of a revocation: after the tails come
// back, every unstarted record is dropped with the retries — with
// finishGaps, only those above the highest offset started or finished and
// those behind a retry.
func (h *harness) revoke(epoch uint64, finishGaps bool) {
	e := h.epochs[epoch]
	known := h.p.Known(epoch)
	if got := h.p.Revoke(epoch, finishGaps); got != known {
		h.fatalf("Revoke(%d) = %v, Known said %v", epoch, got, known)
	}
	if !known {
		return
	}
	e.revoked = true
	h.stealAllLedger()
	high := int64(-1)
	blocked := map[string]bool{}
	for _, r := range h.recs {
		if r.epoch != epoch || !finishGaps {
			continue
		}
		switch {
		case r.st == running || r.st == finished || (r.st == gone && r.how != dropped):
			high = max(high, r.offset)
		case (r.st == parked || r.st == ready) && r.unit != "":
			blocked[r.unit] = true
		}
	}
	h.dropRecs(func(r *rec) bool {
		return r.epoch == epoch && (r.st != waiting || r.offset > high || (r.unit != "" && blocked[r.unit]))
	})
}

// stealAllLedger: every unclaimed record in a batch is back in the scheduler.
func (h *harness) stealAllLedger() {
	for _, rs := range h.runners {
		for _, r := range rs.b.records {
			if r.st == queued && r.batch == rs.b {
				r.st = waiting
			}
		}
	}
}

func (h *harness) drop(epoch uint64) {
	known := h.p.Known(epoch)
	if got := h.p.Drop(epoch); got != known {
		h.fatalf("Drop(%d) = %v, Known said %v", epoch, got, known)
	}
	if !known {
		return
	}
	h.epochs[epoch].dropped = true
	h.stealAllLedger()
	h.dropRecs(func(r *rec) bool { return r.epoch == epoch })
}

func (h *harness) halt() {
	h.p.Halt()
	h.halted = true
	h.stealAllLedger()
	h.dropRecs(func(*rec) bool { return true })
}

// runModel drives a Pipeline with the choices src makes.
func runModel(t testing.TB, src modeltest.Source, nUnits, runners, maxRun int) map[how]int {
	h := newHarness(t, runners, maxRun)
	units := []string{""}
	for i := 1; i <= nUnits; i++ {
		units = append(units, "u"+strconv.Itoa(i))
	}
	reported := map[*rec]bool{}
	epochs := []uint64{}
	next := func(n int) int { v, _ := src.Intn(n); return v }
	for {
		op, ok := src.Intn(32)
		if !ok {
			break
		}
		arg, ok := src.Intn(256)
		if !ok {
			break
		}
		if traceOps {
			t.Logf("op %d arg %d runners %v", op, arg, h.traceRunners())
		}
		switch {
		case op < 6: // add to a live epoch, or a new one
			if len(epochs) == 0 || arg%8 == 0 {
				h.nextEp++
				epochs = append(epochs, h.nextEp)
			}
			epoch := epochs[arg%len(epochs)]
			if e := h.epochs[epoch]; e != nil && (e.revoked || e.dropped) {
				break // a revoked assignment gets no more records
			}
			h.add(epoch, units, next, 1+arg%6)
			h.apply()
			h.p.Dispatch()
		case op < 8:
			h.p.Dispatch()
		case op < 20: // a runner moves
			if id, ok := h.anyRunner(arg); ok {
				h.step(id, next(256))
				if _, still := h.runners[id]; !still {
					h.p.Dispatch()
				}
			}
		case op < 22: // stealCheck
			h.p.Age()
			h.apply()
			h.p.Dispatch()
		case op < 24: // a retry timer fires (or one that was cancelled)
			if r := h.anyArmed(arg); r != nil {
				delete(h.armed, r)
				want := r.st == parked
				if got := h.p.RetryDue(r); got != want {
					h.fatalf("RetryDue(%d) = %v in state %d", r.id, got, r.st)
				}
				if want {
					r.st = ready
				}
				h.apply()
				h.p.Dispatch()
			}
		case op < 25: // the dead-letter topic answers
			if len(h.deadOut) > 0 {
				k := 1 + arg%len(h.deadOut)
				var acked, failed []*rec
				for i, r := range h.deadOut[:k] {
					r.st = gone
					if (arg>>i)&3 == 3 {
						r.how = deadFailed
						failed = append(failed, r)
					} else {
						r.how = deadAcked
						acked = append(acked, r)
					}
				}
				h.deadOut = h.deadOut[k:]
				h.p.DeadLettered(acked, failed)
				h.apply()
				h.p.Dispatch()
			}
		case op < 27:
			h.flush(reported)
		case op == 27 && arg%4 == 0 && len(epochs) > 0:
			h.revoke(epochs[arg%len(epochs)], arg&8 != 0)
			h.apply()
			h.p.Dispatch()
		case op == 28 && arg%8 == 0 && len(epochs) > 0:
			h.drop(epochs[arg%len(epochs)])
			h.apply()
			h.p.Dispatch()
		case op == 29 && arg == 0:
			h.halt()
		case op == 29 && len(epochs) > 0: // a partition paused or resumed
			if e := epochs[arg%len(epochs)]; arg%3 == 0 {
				h.p.Release(e)
			} else {
				h.p.Hold(e)
				h.everHeld[e] = true
			}
			h.apply()
			h.p.Dispatch()
		case op == 30 && arg%2 == 0:
			h.p.SetBatchSize(1 + arg%8)
		case op == 30: // an adaptive concurrency limit moves
			h.p.SetLimit(1 + arg%(runners+1))
			h.p.Dispatch()
		case op == 31: // a rate limit's tokens, or a pause: -1 (none) to 6
			h.quota = arg%8 - 1
			h.p.SetQuota(h.quota)
			h.apply()
			h.p.Dispatch()
		}
		h.apply()
	}
	h.finish(epochs, reported)
	left := map[how]int{}
	for _, r := range h.recs {
		left[r.how]++
	}
	for _, e := range h.epochs {
		if e.drained {
			left[notGone]++ // counts drained epochs here
		}
	}
	left[notRunBack] = h.notRunBack
	return left
}

// finish runs everything out: a halt if some unit can never go on (the
// tree would restart), every partition revoked, runners run to the end,
// retries fired, dead letters acknowledged; then every record must have
// left exactly once and every partition drained exactly once.
func (h *harness) finish(epochs []uint64, reported map[*rec]bool) {
	h.quota = -1
	h.p.SetQuota(-1) // tokens come, in the end
	h.haltIfStuck()
	for _, epoch := range epochs {
		if e := h.epochs[epoch]; e != nil && !e.revoked && !e.dropped {
			h.revoke(epoch, epoch%2 == 0)
			h.apply()
		}
	}
	for round := 0; ; round++ {
		if round > 100000 {
			h.fatalf("the pipeline does not quiesce")
		}
		if traceOps {
			h.t.Logf("finish round %d: runners %v", round, h.traceRunners())
		}
		h.p.Dispatch()
		h.apply()
		h.flush(reported)
		moved := false
		for id := range h.runners {
			h.step(id, 1) // success
			moved = true
			break
		}
		for r := range h.armed {
			delete(h.armed, r)
			if h.p.RetryDue(r) {
				r.st = ready
			}
			moved = true
			break
		}
		if len(h.deadOut) > 0 {
			for _, r := range h.deadOut {
				r.st, r.how = gone, deadAcked
			}
			h.p.DeadLettered(h.deadOut, nil)
			h.deadOut = nil
			moved = true
		}
		h.apply()
		h.haltIfStuck()
		if !moved {
			break
		}
	}
	h.flush(reported)
	for _, r := range h.recs {
		if r.st != gone {
			for _, o := range h.recs {
				h.t.Logf("record %d unit %q epoch %d offset %d state %d how %d", o.id, o.unit, o.epoch, o.offset, o.st, o.how)
			}
			h.fatalf("record %d never left (state %d)", r.id, r.st)
		}
		if released := r.how != dropped; released != (r.freed == 1) || released == (r.discarded == 1) {
			h.fatalf("record %d left (how %d) freed %d times, in Dropped %d times", r.id, r.how, r.freed, r.discarded)
		}
		if (r.how == doneOK || r.how == escalated) != reported[r] && r.how != deadAcked && r.how != deadFailed {
			h.fatalf("record %d left (how %d), reported %v", r.id, r.how, reported[r])
		}
	}
	for epoch, e := range h.epochs {
		if h.p.Known(epoch) {
			h.fatalf("epoch %d still known after it drained", epoch)
		}
		if !e.drained && h.everAdded(epoch) {
			h.fatalf("epoch %d never drained", epoch)
		}
	}
	if h.p.Busy() != 0 || h.p.InFlight() != 0 || h.p.Waiting() != 0 || h.p.Pending() {
		h.fatalf("pipeline not empty: busy %d in flight %d waiting %d", h.p.Busy(), h.p.InFlight(), h.p.Waiting())
	}
}

// haltIfStuck halts, as the orchestrator would, once a unit is pinned for good
// (a record escalated, or the dead-letter topic failed it): the tree
// restarts.
func (h *harness) haltIfStuck() {
	if h.halted {
		return
	}
	for _, r := range h.recs {
		if r.how == escalated || r.how == deadFailed {
			h.halt()
			h.apply()
			return
		}
	}
}

func (h *harness) everAdded(epoch uint64) bool {
	return slices.ContainsFunc(h.recs, func(r *rec) bool { return r.epoch == epoch })
}

func (h *harness) anyRunner(arg int) (int, bool) {
	if len(h.runners) == 0 {
		return 0, false
	}
	ids := make([]int, 0, len(h.runners))
	for id := range h.runners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids[arg%len(ids)], true
}

func (h *harness) anyArmed(arg int) *rec {
	if len(h.armed) == 0 {
		return nil
	}
	rs := make([]*rec, 0, len(h.armed))
	for r := range h.armed {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *rec) int { return a.id - b.id })
	return rs[arg%len(rs)]
}

// The seeds differ from run to run (each run explores new ones rather than
// repeating the same): PIPE_MODEL_SEED=<the first logged> runs the same
// seeds again (modeltest.Seeds).
func TestModelRandom(t *testing.T) {
	seeds := 120
	if testing.Short() {
		seeds = 40
	}
	total := map[how]int{}
	modeltest.Seeds(t, "PIPE_MODEL_SEED", seeds, func(seed int64) {
		r := rand.New(rand.NewSource(seed))
		for k, n := range runModel(t, modeltest.Rand(r, 2*2000), 1+int(seed%6), 1+int(seed%5), 1+int(seed%4)) {
			total[k] += n
		}
	})
	// The runs must reach every way of leaving, or the invariants above
	// were checked on too little.
	t.Logf("records left: %v (notGone counts drained partitions)", total)
	for k := notGone; k <= notRunBack; k++ {
		if total[k] == 0 {
			t.Errorf("no run reached outcome %d: the operations are too tame", k)
		}
	}
}

func FuzzPipeline(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0, 5, 0, 1, 8, 0, 12, 0, 12, 0, 12, 0, 26, 0})
	f.Add([]byte{3, 1, 2, 0, 3, 0, 7, 1, 0, 12, 0, 12, 0, 12, 0, 12, 0, 20, 0, 22, 0, 27, 0})
	// Found by the fuzzer: a record escalates while the run is being
	// finished; the records behind its unit wait for the halt.
	f.Add([]byte("110A02A2200010000008"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 3 {
			return
		}
		// The ledger is quadratic: long inputs would only slow the fuzzer.
		ops = ops[:min(len(ops), 2048)]
		runModel(t, modeltest.Bytes(ops[3:]), 1+int(ops[0])%8, 1+int(ops[1])%6, 1+int(ops[2])%5)
	})
}

// traceOps logs every operation and the runners' batches: PIPE_TRACE=1 go
// test -run 'TestModelRandom/^13$' ./actors/pipeline/ shows how a seed fails.
var traceOps = os.Getenv("PIPE_TRACE") != ""

func (h *harness) traceRunners() string {
	var s string
	for id, rs := range h.runners {
		s += fmt.Sprintf(" r%d[seen %d lim %d claimed %d:", id, rs.b.seen, rs.b.limit, rs.claimed)
		for _, r := range rs.b.records {
			s += fmt.Sprintf(" %d%s/%d", r.id, r.unit, r.st)
		}
		s += "]"
	}
	return s + fmt.Sprintf(" pinned %v", h.p.pinned)
}
