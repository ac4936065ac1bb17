package actors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// The output ledger on Kafka, on every side: each record emits offset%3
// outputs keyed by its key, and the tree restarts once mid-run (a handler
// failure under on_failure: fail). Once everything is committed, every
// output is in the output topic (none missing: the commit never passed a
// record whose outputs were not acknowledged), the first occurrences of a
// key's outputs are in its records' order, and duplicates (at least once:
// the restart runs again what finished uncommitted) are counted.
func TestOutputsOnKafka(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, func(t *testing.T, _ testkit.Side) {
		const records, keys = 1200, 40
		topic := testkit.TopicName("t-out-in")
		out := testkit.TopicName("t-out")
		brokers := testkit.Broker(t, 4, topic, out)
		testkit.Produce(t, brokers, topic, records, keys)
		r := &run{t: t, brokers: brokers, topic: topic}
		var failed atomic.Bool
		h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
			if rec.Partition == 0 && rec.Offset == 100 && !failed.Swap(true) {
				return fmt.Errorf("once, to restart the tree: %w", actors.ErrPermanent)
			}
			for i := range int(rec.Offset % 3) {
				v := fmt.Sprintf("%d/%d/%d", rec.Partition, rec.Offset, i)
				if err := actors.Emit(ctx, rec, actors.Output{Key: rec.Key, Value: []byte(v)}); err != nil {
					return err
				}
			}
			return nil
		})
		c := r.consumer("out", func(c *config.Consumer) {
			c.Concurrency = 16
			c.Output.Topic = out
		})
		cons := r.start(c, h)
		r.waitCommitted(c.Group, 90*time.Second)

		want := testkit.ExpectedOutputs(t, brokers, topic, func(off int64) int { return int(off % 3) })
		var total int
		for _, end := range testkit.EndOffsets(t, brokers, out) {
			total += int(end)
		}
		v := testkit.JudgeOutputs(t, want, testkit.ReadTopic(t, brokers, out, total, 30*time.Second))
		t.Logf("FIGURES output ledger (at least once): %s; %d restart(s)", v, cons.Stats().Restarts)
		if v.Missing > 0 || v.Disorder > 0 || v.Foreign > 0 {
			t.Errorf("at least once: %s", v)
		}
		s := cons.Stats()
		if s.Restarts < 1 {
			t.Errorf("no restart: the ledger did not cross one")
		}
		if s.Outputs < int64(len(want)) || s.OutputErrors != 0 {
			t.Errorf("stats: %d outputs acknowledged, %d errors; want at least %d, 0", s.Outputs, s.OutputErrors, len(want))
		}
		if !errors.Is(actors.Emit(context.Background(), nil), actors.ErrNoOutput) {
			t.Errorf("Emit outside a handler call did not fail with ErrNoOutput")
		}
	})
}

// An output as large as output.max_bytes allows (its default, just under
// 1 MiB) is written, at least once and exactly once, on every side.
func TestLargestOutputIsWritten(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, func(t *testing.T, side testkit.Side) {
		for _, exactlyOnce := range []bool{false, true} {
			t.Run(fmt.Sprintf("exactly-once=%t", exactlyOnce), func(t *testing.T) {
				topic, out := testkit.TopicName("t-big-in"), testkit.TopicName("t-big-out")
				brokers := testkit.Broker(t, 1, topic, out)
				testkit.Produce(t, brokers, topic, 2, 1)
				value := bytes.Repeat([]byte("v"), int(config.DefaultOutputBytes)-64)
				h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
					return actors.Emit(ctx, rec, actors.Output{Key: []byte("k"), Value: value})
				})
				e := newEOSRun(t, side, brokers, topic, out, func(c *config.Consumer) {
					c.Output.ExactlyOnce = exactlyOnce
					if !exactlyOnce {
						c.Output.TransactionalID = ""
					}
				})
				got, s := e.runToEnd(h, out)
				if len(got) != 2 || s.OutputErrors != 0 || s.Restarts != 0 {
					t.Errorf("%d outputs of %d bytes read, %d output errors, %d restarts; want 2, 0, 0", len(got), len(value), s.OutputErrors, s.Restarts)
				}
			})
		}
	})
}

// The exactly-once ledger on Kafka (output.exactly_once), on every side:
// each record emits offset%3 outputs keyed by its key; mid-run the tree
// restarts once (a handler failure: the open transaction is aborted), and a
// second member joins (a second batch is written then) and later leaves
// (two rebalances, with revoked partitions' final commits in transactions). A read_committed reader of
// the output topic then finds every output exactly once, in key order.
func TestExactlyOnceOnKafka(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, exactlyOnceLedger)
}

func exactlyOnceLedger(t *testing.T, side testkit.Side) {
	const records, keys = 1600, 40
	topic := testkit.TopicName("t-eos-in")
	out := testkit.TopicName("t-eos-out")
	brokers := testkit.Broker(t, 4, topic, out)
	testkit.Produce(t, brokers, topic, records, keys)
	var failed atomic.Bool
	var handled atomic.Int64
	h := emitting(func(rec *actors.Record) error {
		handled.Add(1)
		if rec.Partition == 0 && rec.Offset == 100 && !failed.Swap(true) {
			return fmt.Errorf("once, to restart the tree: %w", actors.ErrPermanent)
		}
		return nil
	})
	e := newEOSRun(t, side, brokers, topic, out, nil)
	a := e.start("a", h)
	testkit.Eventually(t, 60*time.Second, "the first member to handle 400 records", func() bool { return handled.Load() >= 400 })
	b := e.start("b", h)
	testkit.Eventually(t, 60*time.Second, "the second member to get partitions", func() bool { return b.Stats().Assigned > 0 })
	// The first member may have finished the partitions it handed over:
	// more records, so that the second one writes outputs of its own.
	testkit.Produce(t, brokers, topic, records, keys)
	testkit.Eventually(t, 60*time.Second, "the second member to write outputs", func() bool { return b.Stats().Outputs > 0 })
	stop(t, b)
	e.waitCommitted()
	stop(t, a)

	v := testkit.JudgeOutputs(t, e.want(nil), testkit.ReadCommitted(t, brokers, out, 30*time.Second))
	sa, sb := a.Stats(), b.Stats()
	t.Logf("FIGURES exactly-once ledger (rebalances, a restart): %s; restarts %d; transactions %d committed, %d aborted",
		v, sa.Restarts+sb.Restarts, sa.Transactions+sb.Transactions, sa.TransactionsAborted+sb.TransactionsAborted)
	if v.Missing != 0 || v.Duplicated != 0 || v.Disorder != 0 || v.Foreign != 0 {
		t.Errorf("exactly once: %s", v)
	}
	if sa.Restarts < 1 {
		t.Errorf("no restart: the ledger did not cross one")
	}
	if sb.Transactions < 1 {
		t.Errorf("the second member committed no transaction")
	}
}

// Exactly once, a dead letter joins the transaction of the commit that
// passes its record: read committed, the dead-letter topic holds it once,
// and the failed record's outputs (its failed attempts emitted some) none.
func TestExactlyOnceDeadLetters(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, exactlyOnceDeadLetters)
}

func exactlyOnceDeadLetters(t *testing.T, side testkit.Side) {
	const records = 300
	topic := testkit.TopicName("t-eosdl-in")
	out := testkit.TopicName("t-eosdl-out")
	dlq := testkit.TopicName("t-eosdl-dlq")
	brokers := testkit.Broker(t, 2, topic, out, dlq)
	testkit.Produce(t, brokers, topic, records, 10)
	h := emitting(func(rec *actors.Record) error {
		if rec.Offset == 10 || rec.Offset == 11 {
			return fmt.Errorf("dead-lettered in a transaction: %w", actors.ErrPermanent)
		}
		return nil
	})
	e := newEOSRun(t, side, brokers, topic, out, func(c *config.Consumer) {
		c.OnFailure = config.OnFailureDLQ
		c.DLQTopic = dlq
	})
	cons := e.start("a", h)
	e.waitCommitted()
	stop(t, cons)
	var deadRecs []string
	for p := range testkit.EndOffsets(t, brokers, topic) {
		for _, off := range []int64{10, 11} {
			deadRecs = append(deadRecs, fmt.Sprintf("%d/%d/", p, off))
		}
	}
	v := testkit.JudgeOutputs(t, e.want(deadRecs), testkit.ReadCommitted(t, brokers, out, 30*time.Second))
	dead := testkit.ReadCommitted(t, brokers, dlq, 30*time.Second)
	s := cons.Stats()
	t.Logf("FIGURES exactly-once ledger (dead letters): %s; %d dead letters read, %d counted; transactions %d", v, len(dead), s.Dead, s.Transactions)
	if v.Missing != 0 || v.Duplicated != 0 || v.Disorder != 0 || v.Foreign != 0 {
		t.Errorf("exactly once: %s", v)
	}
	if len(dead) != len(deadRecs) || s.Dead != int64(len(deadRecs)) {
		t.Errorf("%d dead letters read committed and %d counted, want %d", len(dead), s.Dead, len(deadRecs))
	}
}

// emitting is the ledgers' handler: fail decides first (an error fails the
// attempt, after its outputs were emitted), then the record emits
// offset%3 outputs "p/o/i" keyed by its key.
func emitting(fail func(rec *actors.Record) error) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		for i := range int(rec.Offset % 3) {
			v := fmt.Sprintf("%d/%d/%d", rec.Partition, rec.Offset, i)
			if err := actors.Emit(ctx, rec, actors.Output{Key: rec.Key, Value: []byte(v)}); err != nil {
				return err
			}
		}
		return fail(rec)
	})
}

// eosRun is an exactly-once consumer's configuration on a test's brokers.
type eosRun struct {
	t       *testing.T
	brokers []string
	in      string
	c       config.Consumer
	k       config.Kafka
}

func newEOSRun(t *testing.T, side testkit.Side, brokers []string, in, out string, mod func(*config.Consumer)) *eosRun {
	r := &run{t: t, brokers: brokers, topic: in}
	c := r.consumer("eos", func(c *config.Consumer) {
		c.Concurrency = 16
		c.Output.Topic = out
		c.Output.ExactlyOnce = true
		c.Output.TransactionalID = "turbo-test-" + in
		if mod != nil {
			mod(c)
		}
	})
	k := testkit.Kafka(t, brokers)
	k.Client, k.GroupProtocol = side.Client, side.Protocol
	return &eosRun{t: t, brokers: brokers, in: in, c: c, k: k}
}

// start starts a member; members need transactional ids of their own.
func (e *eosRun) start(name string, h actors.Handler) *actors.Consumer {
	e.t.Helper()
	c := e.c
	if c.Output.ExactlyOnce {
		c.Output.TransactionalID += "-" + name
	}
	cons, err := actors.New(actors.Options{Consumer: c, Kafka: e.k, ShutdownTimeout: 10 * time.Second, Handler: h,
		Logger: testkit.Logger(e.t).With().Str("member", name).Logger(), Restart: fastRestart})
	if err != nil {
		e.t.Fatalf("starting member %s: %v", name, err)
	}
	e.t.Cleanup(func() { stop(e.t, cons) })
	return cons
}

// runToEnd runs member a with h until everything is committed, stops it,
// and reads topic (read committed).
func (e *eosRun) runToEnd(h actors.Handler, topic string) ([]*sarama.ConsumerMessage, actors.Snapshot) {
	e.t.Helper()
	cons := e.start("a", h)
	e.waitCommitted()
	stop(e.t, cons)
	return testkit.ReadCommitted(e.t, e.brokers, topic, 30*time.Second), cons.Stats()
}

func (e *eosRun) waitCommitted() {
	e.t.Helper()
	(&run{t: e.t, brokers: e.brokers, topic: e.in}).waitCommitted(e.c.Group, 90*time.Second)
}

// want is every output the input records call for, less those of the
// records named by the prefixes ("p/o/") that never succeed.
func (e *eosRun) want(never []string) map[string]bool {
	want := testkit.ExpectedOutputs(e.t, e.brokers, e.in, func(off int64) int { return int(off % 3) })
	for v := range want {
		for _, p := range never {
			if strings.HasPrefix(v, p) {
				delete(want, v)
			}
		}
	}
	return want
}

// A failed record too large for a dead letter (the producers take
// 1,000,000 bytes, or about 1 MiB with outputs; here a ~1 MiB record whose
// error text is long) is dead-lettered without its value, at least once
// (without outputs) and exactly once, on every side: the dead letter names
// the value's size, keeps the key, where the record came from and the
// error, and the tree does not restart (a dead letter refused for its size
// was refused again after every restart, forever).
func TestOversizedRecordIsDeadLetteredWithoutItsValue(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, func(t *testing.T, side testkit.Side) {
		for _, exactlyOnce := range []bool{false, true} {
			t.Run(fmt.Sprintf("exactly-once=%t", exactlyOnce), func(t *testing.T) {
				topic, out, dlq := testkit.TopicName("t-huge-in"), testkit.TopicName("t-huge-out"), testkit.TopicName("t-huge-dlq")
				brokers := testkit.Broker(t, 1, topic, out, dlq)
				testkit.Produce(t, brokers, topic, 3, 1)
				testkit.ProduceSized(t, brokers, topic, 1, 1, testkit.MaxRecordValue)
				testkit.Produce(t, brokers, topic, 3, 1)
				why := strings.Repeat("the downstream refused it; ", 120) // 3,240 bytes
				h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
					if len(rec.Value) > 1000 {
						return fmt.Errorf("%s: %w", why, actors.ErrPermanent)
					}
					if exactlyOnce {
						return actors.Emit(ctx, rec, actors.Output{Key: rec.Key, Value: rec.Value})
					}
					return nil
				})
				e := newEOSRun(t, side, brokers, topic, out, func(c *config.Consumer) {
					c.OnFailure = config.OnFailureDLQ
					c.DLQTopic = dlq
					if !exactlyOnce {
						c.Output.Topic, c.Output.ExactlyOnce, c.Output.TransactionalID = "", false, ""
					}
				})
				dead, s := e.runToEnd(h, dlq)
				if len(dead) != 1 || s.Dead != 1 || s.Restarts != 0 {
					t.Fatalf("%d dead letters read, %d counted, %d restarts; want 1, 1, 0", len(dead), s.Dead, s.Restarts)
				}
				d := dead[0]
				hs := map[string]string{}
				for _, rh := range d.Headers {
					hs[string(rh.Key)] = string(rh.Value)
				}
				if len(d.Value) != 0 || string(d.Key) != "key-0" || hs["turbo-value-dropped"] != strconv.Itoa(testkit.MaxRecordValue) ||
					hs["turbo-original-offset"] != "3" || hs["turbo-original-topic"] != topic || !strings.Contains(hs["turbo-error"], why) {
					t.Errorf("dead letter: key %q, %d value bytes, headers %.300v; want key-0, none, turbo-value-dropped %d, offset 3 of %s and the error",
						d.Key, len(d.Value), hs, testkit.MaxRecordValue, topic)
				}
			})
		}
	})
}
