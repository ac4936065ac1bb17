package actors

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/kafkanet"
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
