package harness

import (
	"testing"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/config"
)

// The judge of the ordering guarantee must be able to fail: a correct tree
// never gives it anything to find.
func TestRecorderFindsOverlapsAndOrderViolations(t *testing.T) {
	cluster := memkafka.New()
	tp := memkafka.TopicPartition{Topic: "orders", Partition: 0}
	cluster.Assign(tp)
	member := cluster.Join([]string{"orders"})
	member.Acquire()
	var r recorder
	r.init(config.OrderingKey, cluster)
	rec := func(offset int64, key string) *actors.Record {
		return &actors.Record{Topic: "orders", Partition: 0, Offset: offset, Key: []byte(key)}
	}

	a, b := rec(5, "k1"), rec(6, "k1")
	i, ua := r.begin(a)
	j, ub := r.begin(b) // k1 twice at once
	r.end(i, ua, a, nil)
	r.end(j, ub, b, nil)
	if len(r.violations) != 1 {
		t.Fatalf("violations %q, want the overlap of k1", r.violations)
	}

	c := rec(3, "k1") // below 6, same assignment
	i, uc := r.begin(c)
	r.end(i, uc, c, nil)
	if len(r.violations) != 2 {
		t.Fatalf("violations %q, want offset 3 after 6 too", r.violations)
	}

	// A new assignment reads again from the committed offset: going back
	// is then allowed. So are retries (the same offset) and other keys.
	member.Release(tp)
	member.Acquire()
	for _, x := range []*actors.Record{rec(2, "k1"), rec(2, "k1"), rec(1, "k2")} {
		i, u := r.begin(x)
		r.end(i, u, x, nil)
	}
	if len(r.violations) != 2 {
		t.Fatalf("violations %q, want no more", r.violations)
	}
}
