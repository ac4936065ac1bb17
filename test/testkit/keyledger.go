package testkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// KeyLedger judges deliveries by record identity rather than by offset, so
// that its verdicts hold across processes, handovers, restarts and
// redeliveries: every record it produces (KeyLedger.Produce) is written as
// key "k<i>" with the value "k<i>:<seq>:<id>" (seq counts the key's records
// from 0, id is unique), and every delivery — a POST of turbo's http handler
// from any process, through ServeHTTP — is recorded from its begin to its
// end.
//
// The verdicts (KeyReport):
//   - lost: produced and acknowledged by the broker, and never finished once;
//   - order violations: a delivery of a key's record began while an earlier
//     record of that key (a lower seq, acknowledged) had not yet finished at
//     least once. This rule needs no notion of who held the partition, so it
//     stays valid across handovers and redeliveries: redelivering finished
//     records is fine, skipping ahead of an unfinished one is not;
//   - overlaps: a delivery of a key began while another delivery of the same
//     key was running;
//   - ownership overlaps: a delivery of a partition's record began while
//     another label (process) was handling a record of that partition (see
//     OwnershipJudge). Only records whose acknowledgement (and so partition)
//     is known when their delivery begins are judged: in practice all of
//     them, as consumers read what the broker already acknowledged;
//   - duplicates: successful deliveries beyond the first of each record.
//
// A delivery finishes when its work completed and the caller was still
// there: one whose request context was cancelled (the process posting it was
// killed, say) did not finish. The verdict is recorded before the answer is
// written, so the caller cannot start the key's next record before the
// ledger knows this one finished.
type KeyLedger struct {
	opts   KeyLedgerOptions
	prefix string // of record ids: tells this ledger's records from any other's

	mu       sync.Mutex
	rng      *mrand.Rand // failure injection
	records  map[string]*klRecord
	keys     map[string]*klKey
	nextID   int64
	changed  chan struct{} // closed and replaced at every change
	suspects []orderSuspect
	examples []string // the first few overlaps, for the report

	sent, acked, notProduced int
	finished                 int // distinct acknowledged records finished at least once
	deliveries, failed       int
	injected, unknown        int
	overlaps, duplicates     int
	own                      ownership
	produceDisorder          int
	running                  map[string]int // label (the URL's last path element) → deliveries running
	byLabel                  map[string]int // label → successful deliveries
}

// KeyLedgerOptions configure how the ledger's endpoint behaves.
type KeyLedgerOptions struct {
	// Work is how long each delivery takes before it is answered (the
	// request's context cuts it short).
	Work time.Duration
	// FailFirst is the fraction (0..1) of records whose first delivery is
	// answered 500 without work, so that the consumer's retries run.
	FailFirst float64
	// Seed seeds the failure injection.
	Seed uint64
}

type klRecord struct {
	id        string
	key       string
	topic     string
	seq       int
	state     klState
	partition int32
	offset    int64
	begun     int // deliveries begun
	finishes  int // deliveries finished
}

type klState uint8

const (
	klSent        klState = iota // handed to the producer, no answer yet
	klAcked                      // acknowledged by the broker
	klNotProduced                // the producer gave up on it: never required
)

type klKey struct {
	running int
	seqs    []*klRecord // by seq
	prefix  int         // seqs[:prefix] all finished or not produced
}

// orderSuspect is a delivery that began while earlier records of its key had
// not finished. It is a violation unless every one of them turns out never
// to have been produced (decided once the producer stopped).
type orderSuspect struct {
	rec     *klRecord
	waiting []*klRecord
}

// KeyReport is a copy of the ledger's verdicts and counters.
type KeyReport struct {
	Sent           int // handed to the producer
	Produced       int // acknowledged by the broker
	NotProduced    int // given up by the producer
	Finished       int // distinct produced records finished at least once
	Lost           int // produced, not (yet) finished once
	Deliveries     int // deliveries begun, every attempt included
	FailedAttempts int // deliveries that did not finish (injected, cancelled)
	Injected       int // first deliveries answered 500 on purpose
	Unknown        int // deliveries of values this ledger did not produce
	Overlaps       int
	// OwnershipOverlaps counts deliveries that began while another label
	// handled a record of the same partition: two members holding one
	// partition at once.
	OwnershipOverlaps int
	OrderViolations   int
	Duplicates        int     // successful deliveries beyond the first per record
	DuplicatePct      float64 // Duplicates per produced record, in percent
	// ProduceDisorder counts records the broker acknowledged at a lower
	// offset than an earlier record of their key: a premise of the order
	// verdict (it would blame the consumer for the producer's reordering).
	ProduceDisorder int
	ByLabel         map[string]int // successful deliveries per endpoint label
	Examples        []string       // the first few violations, lost records
}

// Progress is the cheap part of the report, for waiting on.
type Progress struct {
	Produced, Finished, Pending int
	Running                     map[string]int // label → deliveries running now
	Done                        map[string]int // label → successful deliveries so far
}

// NewKeyLedger returns an empty ledger.
func NewKeyLedger(o KeyLedgerOptions) *KeyLedger {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &KeyLedger{
		opts:    o,
		prefix:  hex.EncodeToString(b),
		rng:     mrand.New(mrand.NewPCG(o.Seed, 0x6b65796c)),
		records: map[string]*klRecord{},
		keys:    map[string]*klKey{},
		changed: make(chan struct{}),
		running: map[string]int{},
		byLabel: map[string]int{},
	}
}

const maxExamples = 10

func (l *KeyLedger) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *KeyLedger) keyLocked(key string) *klKey {
	k := l.keys[key]
	if k == nil {
		k = &klKey{}
		l.keys[key] = k
	}
	return k
}

// newRecord registers the next record of key (before it is sent) and
// returns its key and value.
func (l *KeyLedger) newRecord(topic, key string) *klRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keyLocked(key)
	r := &klRecord{id: l.prefix + "." + strconv.FormatInt(l.nextID, 10), key: key, topic: topic, seq: len(k.seqs), partition: -1, offset: -1}
	l.nextID++
	k.seqs = append(k.seqs, r)
	l.records[r.id] = r
	l.sent++
	return r
}

func (r *klRecord) value() []byte {
	return []byte(r.key + ":" + strconv.Itoa(r.seq) + ":" + r.id)
}

// ack records the broker's acknowledgement of a record.
func (l *KeyLedger) ack(r *klRecord, partition int32, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.state, r.partition, r.offset = klAcked, partition, offset
	l.acked++
	if r.finishes > 0 {
		l.finished++
	}
	if r.seq > 0 {
		if prev := l.keys[r.key].seqs[r.seq-1]; prev.state == klAcked && prev.partition == partition && prev.offset > offset {
			l.produceDisorder++
		}
	}
	l.notifyLocked()
}

// giveUp records that the producer failed to write a record.
func (l *KeyLedger) giveUp(r *klRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.state = klNotProduced
	l.notProduced++
	l.notifyLocked()
}

// withdraw takes back a record registered but never handed to the producer
// (the producer was stopped first): not a failure of the broker, and never
// required. It was counted as one (a Stop while the producer's input was
// full failed TestRebalancesUnderLoad with "1 records were not
// acknowledged").
func (l *KeyLedger) withdraw(r *klRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.state = klNotProduced
	l.sent--
	l.notifyLocked()
}

// KeyDelivery is one delivery under way; End it exactly once.
type KeyDelivery struct {
	l     *KeyLedger
	rec   *klRecord // nil for an unknown value
	key   string
	label string
	tp    string // the record's topic-partition, "" if not judged for ownership
	first bool   // the record's first delivery
}

// Begin records that a delivery of value (a value this ledger produced)
// began; label says where from (e.g. a process's name). An unknown value is
// counted and otherwise ignored.
func (l *KeyLedger) Begin(value []byte, label string) *KeyDelivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries++
	l.running[label]++
	d := &KeyDelivery{l: l, label: label}
	parts := strings.SplitN(string(value), ":", 3)
	var r *klRecord
	if len(parts) == 3 {
		r = l.records[parts[2]]
	}
	if r == nil || parts[0] != r.key || parts[1] != strconv.Itoa(r.seq) {
		l.unknown++
		if len(parts) == 3 { // still judge overlaps by the key it names
			d.key = parts[0]
			l.keyLocked(d.key).running++
		}
		l.notifyLocked()
		return d
	}
	d.rec, d.key = r, r.key
	k := l.keys[r.key]
	if k.running > 0 {
		l.overlaps++
		l.exampleLocked("overlap: %s seq %d (%s) began at %s while %d delivery(ies) of its key ran", r.key, r.seq, r.id, label, k.running)
	}
	k.running++
	if r.state == klAcked {
		d.tp = r.topic + "/" + strconv.FormatInt(int64(r.partition), 10)
		l.own.begin(d.tp, label)
	}
	for k.prefix < len(k.seqs) && (k.seqs[k.prefix].finishes > 0 || k.seqs[k.prefix].state == klNotProduced) {
		k.prefix++
	}
	var waiting []*klRecord
	for _, e := range k.seqs[min(k.prefix, r.seq):r.seq] { // none below the prefix
		if e.finishes == 0 && e.state != klNotProduced {
			waiting = append(waiting, e)
		}
	}
	if len(waiting) > 0 {
		l.suspects = append(l.suspects, orderSuspect{rec: r, waiting: waiting})
	}
	r.begun++
	d.first = r.begun == 1
	l.notifyLocked()
	return d
}

// End records the delivery's outcome: finished means the work completed and
// the caller is to be told so.
func (d *KeyDelivery) End(finished bool) {
	l := d.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[d.label]--
	if d.key != "" {
		l.keys[d.key].running--
	}
	if d.tp != "" {
		l.own.end(d.tp, d.label)
	}
	if r := d.rec; r != nil {
		if finished {
			r.finishes++
			l.byLabel[d.label]++
			if r.finishes == 1 && r.state == klAcked {
				l.finished++
			}
			if r.finishes > 1 {
				l.duplicates++
			}
		}
	}
	if !finished {
		l.failed++
	}
	l.notifyLocked()
}

func (l *KeyLedger) exampleLocked(format string, args ...any) {
	if len(l.examples) < maxExamples {
		l.examples = append(l.examples, fmt.Sprintf(format, args...))
	}
}

// ServeHTTP is the endpoint for turbo's http handler: the body is the
// record's value, Kafka-Key its key (base64); the last element of the URL's
// path labels the caller (give each process its own URL). It answers 204
// after Work, or 500 for an injected failure.
func (l *KeyLedger) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Reading the whole body first also lets the server notice at once a
	// caller that goes away (its request context is then cancelled).
	value, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if hk := req.Header.Get("Kafka-Key"); hk != "" {
		if key, err := base64.StdEncoding.DecodeString(hk); err != nil || !bytes.HasPrefix(value, append(key, ':')) {
			// Not judged (and never finished): counted as unknown.
			l.mu.Lock()
			l.unknown++
			l.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	d := l.Begin(value, path.Base(req.URL.Path))
	if d.first && l.inject() {
		d.End(false)
		http.Error(w, "keyledger: injected failure", http.StatusInternalServerError)
		return
	}
	if l.opts.Work > 0 {
		tm := time.NewTimer(l.opts.Work)
		select {
		case <-tm.C:
		case <-req.Context().Done():
			tm.Stop()
		}
	}
	if req.Context().Err() != nil {
		d.End(false) // the caller vanished: it never learns of a success
		return
	}
	d.End(true) // before answering: see KeyLedger
	w.WriteHeader(http.StatusNoContent)
}

func (l *KeyLedger) inject() bool {
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

// Changed returns a channel closed at the ledger's next change.
func (l *KeyLedger) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Progress returns the counters cheap enough to check at every change.
func (l *KeyLedger) Progress() Progress {
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
func (l *KeyLedger) Await(ctx context.Context, what string, cond func(Progress) bool) error {
	for {
		ch := l.Changed()
		p := l.Progress()
		if cond(p) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("keyledger: waiting for %s: %w (produced %d, finished %d, pending acks %d, running %v)",
				what, context.Cause(ctx), p.Produced, p.Finished, p.Pending, p.Running)
		}
	}
}

// AwaitAllFinished waits until every record produced so far finished at
// least once and no record awaits its acknowledgement: stop the producer
// first.
func (l *KeyLedger) AwaitAllFinished(ctx context.Context) error {
	return l.Await(ctx, "every produced record to finish at least once", func(p Progress) bool {
		return p.Pending == 0 && p.Finished == p.Produced
	})
}

// Report returns the verdicts so far. Lost and order violations are final
// only once the producer stopped and the consumers drained.
func (l *KeyLedger) Report() KeyReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	rep := KeyReport{
		Sent: l.sent, Produced: l.acked, NotProduced: l.notProduced, Finished: l.finished,
		Deliveries: l.deliveries, FailedAttempts: l.failed, Injected: l.injected, Unknown: l.unknown,
		Overlaps: l.overlaps, OwnershipOverlaps: l.own.overlaps, Duplicates: l.duplicates, ProduceDisorder: l.produceDisorder,
		ByLabel: map[string]int{}, Examples: append(append([]string(nil), l.examples...), l.own.examples...),
	}
	for k, v := range l.byLabel {
		rep.ByLabel[k] = v
	}
	for _, s := range l.suspects {
		for _, e := range s.waiting {
			if e.state != klNotProduced {
				rep.OrderViolations++
				if len(rep.Examples) < maxExamples {
					rep.Examples = append(rep.Examples, fmt.Sprintf("order: %s seq %d (%s) began before seq %d (%s) had finished once",
						s.rec.key, s.rec.seq, s.rec.id, e.seq, e.id))
				}
				break
			}
		}
	}
	var lost []*klRecord
	for _, r := range l.records {
		if r.state == klAcked && r.finishes == 0 {
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

// Err returns an error listing every broken guarantee (lost records, order
// violations, overlaps of a key, overlaps of a partition's owners, records
// reordered by the producer, unknown values), or nil.
func (r KeyReport) Err() error {
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
	return fmt.Errorf("keyledger: %w; examples:\n  %s", errors.Join(errs...), strings.Join(r.Examples, "\n  "))
}

// KeyProducerOptions describe what KeyLedger.Produce writes.
type KeyProducerOptions struct {
	// Keys is the number of keys ("k0"…), each record's key drawn at
	// random (seeded); 100 if not positive.
	Keys int
	// Rate is in records per second; 0 means as fast as the broker takes
	// them.
	Rate float64
	// Count is the number of records in all; 0 means until Stop.
	Count int
	// Seed seeds the choice of keys.
	Seed uint64
}

// KeyProducer writes a ledger's records in the background. Only what the
// broker acknowledged counts as produced.
type KeyProducer struct {
	l        *KeyLedger
	p        sarama.AsyncProducer
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // the send loop ended and every answer is in
	sendDone chan struct{}

	mu  sync.Mutex
	err error // the first record the producer gave up on
}

// Produce starts writing records to topic, each registered with the ledger
// before it is sent. The producer is idempotent with one request in flight,
// so a key's records land in the order of their sequence numbers (the order
// verdict relies on it, and KeyReport.ProduceDisorder checks it). It stops
// at Stop, when Count records were written, or when the test ends.
func (l *KeyLedger) Produce(t testing.TB, brokers []string, topic string, o KeyProducerOptions) *KeyProducer {
	t.Helper()
	if o.Keys <= 0 {
		o.Keys = 100
	}
	cfg := ClientConfig(t)
	cfg.ClientID = "turbo-keyledger"
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	p, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		t.Fatalf("keyledger: producer for %s on %v: %v", topic, brokers, err)
	}
	kp := &KeyProducer{l: l, p: p, stop: make(chan struct{}), done: make(chan struct{}), sendDone: make(chan struct{})}
	go kp.answers()
	go kp.send(topic, o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := kp.Stop(ctx); err != nil && ctx.Err() != nil {
			t.Errorf("keyledger: stopping the producer at the end of the test: %v", err)
		}
	})
	return kp
}

// paceTick is how often a rate-limited producer tops up what it is due.
const paceTick = 10 * time.Millisecond

func (kp *KeyProducer) send(topic string, o KeyProducerOptions) {
	defer close(kp.sendDone)
	defer kp.p.AsyncClose() // flushes, then closes Successes and Errors: answers returns
	rng := mrand.New(mrand.NewPCG(o.Seed, 0x70726f64))
	start := time.Now()
	var tick <-chan time.Time
	if o.Rate > 0 {
		tk := time.NewTicker(paceTick)
		defer tk.Stop()
		tick = tk.C
	}
	for n := 0; o.Count == 0 || n < o.Count; {
		if o.Rate > 0 && float64(n) >= o.Rate*time.Since(start).Seconds() {
			select {
			case <-tick:
				continue
			case <-kp.stop:
				return
			}
		}
		r := kp.l.newRecord(topic, "k"+strconv.Itoa(rng.IntN(o.Keys)))
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.key), Value: sarama.ByteEncoder(r.value()), Metadata: r}
		select {
		case kp.p.Input() <- msg:
			n++
		case <-kp.stop:
			kp.l.withdraw(r) // registered, never sent
			return
		}
	}
}

func (kp *KeyProducer) answers() {
	defer close(kp.done)
	succ, errs := kp.p.Successes(), kp.p.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			kp.l.ack(m.Metadata.(*klRecord), m.Partition, m.Offset)
		case e, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			kp.l.giveUp(e.Msg.Metadata.(*klRecord))
			kp.mu.Lock()
			if kp.err == nil {
				kp.err = fmt.Errorf("keyledger: producing %s: %w", e.Msg.Value, e.Err)
			}
			kp.mu.Unlock()
		}
	}
}

// Done is closed once the producer stopped and every record it sent was
// answered (after Count records, or after Stop).
func (kp *KeyProducer) Done() <-chan struct{} { return kp.done }

// Stop stops sending and waits until every record sent was answered; it
// returns the first produce error, or ctx's error if the answers do not come
// in time. It is idempotent.
func (kp *KeyProducer) Stop(ctx context.Context) error {
	kp.stopOnce.Do(func() { close(kp.stop) })
	select {
	case <-kp.done:
	case <-ctx.Done():
		return fmt.Errorf("keyledger: waiting for the producer's last answers: %w", ctx.Err())
	}
	return kp.Err()
}

// Err returns the first produce error so far.
func (kp *KeyProducer) Err() error {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return kp.err
}
