package actors

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/actors/watermark"
)

func TestArrivalsGiveTheOldestUnfinishedRecordsArrival(t *testing.T) {
	t.Parallel()
	ms := int64(time.Millisecond)
	var a arrivals
	a.add(0, 1000*ms)  // offsets 0..9
	a.add(10, 1050*ms) // within the grain: merged into the previous entry
	a.add(20, 1200*ms) // offsets 20..
	a.add(40, 5000*ms) // offsets 40..
	for _, c := range []struct {
		off, want int64
	}{
		{0, 1000 * ms}, {15, 1000 * ms}, {20, 1200 * ms}, {39, 1200 * ms}, {40, 5000 * ms}, {1 << 40, 5000 * ms},
	} {
		if got := a.oldest(c.off); got != c.want {
			t.Errorf("oldest(%d) = %d ms, want %d ms", c.off, got/ms, c.want/ms)
		}
	}
	// Passed entries are gone: an offset below them is no longer covered.
	if got := a.oldest(0); got != 0 {
		t.Errorf("oldest(0) after passing it = %d ms, want 0 (no entry left covers it)", got/ms)
	}
	// Many entries passed are dropped from the slice, not only skipped.
	var b arrivals
	for i := range int64(1000) {
		b.add(i*10, i*arrivalGrain)
	}
	if got := b.oldest(9990); got != 999*arrivalGrain {
		t.Errorf("oldest(9990) = %d, want %d", got, 999*arrivalGrain)
	}
	if len(b.q) > 2 {
		t.Errorf("%d entries kept after passing 999 of 1000, want them dropped", len(b.q))
	}
	var empty arrivals
	if got := empty.oldest(5); got != 0 {
		t.Errorf("oldest of nothing = %d, want 0", got)
	}
}

func TestReadinessSaysWhy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    Snapshot
		ok   bool
		want string
	}{
		{Snapshot{}, false, "connecting to Kafka"},
		{Snapshot{Reached: true}, false, "not in a consumer group session"},
		{Snapshot{Reached: true, InSession: true, KafkaError: "the broker refused user \"x\""}, false, "Kafka refuses the connection: the broker refused"},
		{Snapshot{KafkaError: "TLS: no"}, false, "Kafka refuses the connection: TLS: no"},
		{Snapshot{Reached: true, InSession: true}, true, ""},
	} {
		got := readiness(c.s)
		if got.OK != c.ok || !strings.Contains(got.Reason, c.want) {
			t.Errorf("readiness(%+v) = %+v, want ok=%v reason containing %q", c.s, got, c.ok, c.want)
		}
	}
}

func TestStuckHandlerAfterMaxHandlerTimePlusGrace(t *testing.T) {
	t.Parallel()
	now := time.Now()
	running := func(d time.Duration) Snapshot { return Snapshot{Oldest: now.Add(-d)} }
	for _, c := range []struct {
		s       Snapshot
		max, gr time.Duration
		ok      bool
	}{
		{Snapshot{}, time.Second, time.Second, true},
		{running(time.Hour), 0, time.Second, true}, // unlimited handlers are never stuck
		{running(1900 * time.Millisecond), time.Second, time.Second, true},
		{running(2100 * time.Millisecond), time.Second, time.Second, false},
	} {
		got := stuckHandler(now, c.s, c.max, c.gr)
		if got.OK != c.ok || (!c.ok && !strings.Contains(got.Reason, "max_handler_time 1s")) {
			t.Errorf("stuckHandler(oldest %v ago, max %v, grace %v) = %+v, want ok=%v", now.Sub(c.s.Oldest), c.max, c.gr, got, c.ok)
		}
	}
}

func TestRefusalKinds(t *testing.T) {
	t.Parallel()
	err := errors.New("x")
	for _, c := range []struct {
		r    *kafkanet.Refusal
		want string
	}{
		{nil, "unreachable"},
		{&kafkanet.Refusal{Cause: "TLS: the broker's certificate is signed by an authority turbo does not trust", Err: err}, "tls"},
		{&kafkanet.Refusal{Cause: "the broker refused user \"u\" (SASL PLAIN)", Err: err}, "auth"},
		{&kafkanet.Refusal{Cause: "kafka.sasl.password_file: no such file", Err: err}, "config"},
	} {
		if got := connErrorKindNames[refusalKind(c.r)]; got != c.want {
			t.Errorf("refusalKind(%v) = %s, want %s", c.r, got, c.want)
		}
	}
}

// The age shown for a partition's oldest unfinished record counts from when
// it arrived or, if later, from when it became the oldest: a record that
// waited behind others in a backlog holds nothing until they finish, while
// one that holds the committed offset keeps ageing.
func TestOldestCountsFromWhenTheRecordHeldTheCommit(t *testing.T) {
	t.Parallel()
	sec := int64(time.Second)
	g := newGate(10, 1000)
	p := &partitionWatermark{tracker: watermark.New(), gate: g}
	p.arrivals.add(0, 100*sec) // offsets 0..4 arrive at 100 s
	for off := int64(0); off < 5; off++ {
		if err := p.tracker.Track(off); err != nil {
			t.Fatal(err)
		}
		p.last = off
	}
	clock := func(at int64) func() int64 { return func() int64 { return at * sec } }
	shown := func(at int64) (off, since int64) {
		p.showOldest(clock(at))
		return g.watch.oldestAt.Load(), g.watch.oldest.Load() / sec
	}
	if off, since := shown(101); off != 0 || since != 101 {
		t.Errorf("offset 0 first seen oldest at 101 s: shown %d since %d s, want 0 since 101 s", off, since)
	}
	// Offsets 0..2 finish at 130 s: offset 3 waited in the backlog since
	// 100 s, but holds the commit only from 130 s.
	for off := int64(0); off < 3; off++ {
		if err := p.tracker.Done(off); err != nil {
			t.Fatal(err)
		}
	}
	if off, since := shown(130); off != 3 || since != 130 {
		t.Errorf("offset 3 oldest from 130 s: shown %d since %d s, want 3 since 130 s (not its arrival at 100 s)", off, since)
	}
	// Nothing finishes: offset 3 keeps its start, so its age grows.
	if off, since := shown(400); off != 3 || since != 130 {
		t.Errorf("offset 3 still oldest at 400 s: shown %d since %d s, want 3 since 130 s", off, since)
	}
	// A record that arrives after the one before it finished counts from
	// its arrival.
	for off := int64(3); off < 5; off++ {
		if err := p.tracker.Done(off); err != nil {
			t.Fatal(err)
		}
	}
	if off, _ := shown(500); off != -1 {
		t.Errorf("everything finished: shown offset %d, want -1", off)
	}
	p.arrivals.add(5, 600*sec)
	if err := p.tracker.Track(5); err != nil {
		t.Fatal(err)
	}
	p.last = 5
	if off, since := shown(550); off != 5 || since != 600 {
		t.Errorf("offset 5 arrived at 600 s: shown %d since %d s, want 5 since 600 s", off, since)
	}
}
