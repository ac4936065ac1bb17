package actors_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// gather scrapes one consumer's collector the way /metrics does.
func gather(t *testing.T, c *actors.Consumer) scrape.Metrics {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c.Collector()); err != nil {
		t.Fatalf("registering the collector: %v", err)
	}
	m, err := scrape.Gather(reg)
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	return m
}

// The metrics follow the records: the counters match the ledger, a blocked
// record shows as a growing oldest-unfinished age on its partition alone,
// and every partition's lag reaches 0 once everything is committed.
func TestMetricsFollowTheRecords(t *testing.T) {
	t.Parallel()
	const records = 400
	r := newRun(t, 4, records, 40)
	ledger := testkit.NewLedger(0)
	release := make(chan struct{})
	var blockOnce sync.Once
	blocked := make(chan *actors.Record, 1)
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Partition == 2 && rec.Offset == 10 {
			blockOnce.Do(func() { blocked <- rec })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return ledger.Handle(ctx, rec)
	})
	cc := r.consumer("metrics", func(c *config.Consumer) { c.Concurrency = 8 })
	c, err := actors.New(actors.Options{
		Consumer: cc, Kafka: testkit.Kafka(t, r.brokers), ShutdownTimeout: 10 * time.Second, Handler: h,
		Logger: testkit.Logger(t), Restart: fastRestart, Metrics: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, c) })

	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the record to block (partition 2, offset 10) never ran")
	}
	p2 := map[string]string{"consumer": "metrics", "topic": r.topic, "partition": "2"}
	age := func() float64 {
		return gather(t, c).Must(t, "turbo_partition_oldest_unfinished_age_seconds", p2)
	}
	testkit.Eventually(t, 30*time.Second, "partition 2's oldest unfinished record to be over 1 s old", func() bool { return age() > 1 })
	first := age()
	testkit.Eventually(t, 30*time.Second, "partition 2's oldest unfinished age to grow", func() bool { return age() > first+0.5 })
	// Everything else finishes: the other partitions have no unfinished record.
	testkit.Eventually(t, 30*time.Second, "every record but partition 2's to finish", func() bool {
		fams := gather(t, c)
		for _, p := range []string{"0", "1", "3"} {
			labels := map[string]string{"topic": r.topic, "partition": p}
			if v, ok := fams.Value("turbo_partition_oldest_unfinished_age_seconds", labels); !ok || v != 0 {
				return false
			}
			if v, ok := fams.Value("turbo_partition_lag", labels); !ok || v != 0 {
				return false
			}
		}
		return true
	})
	if got := gather(t, c).Must(t, "turbo_partition_in_flight_records", p2); got != 1 {
		t.Errorf("partition 2 has %v records in flight, want the blocked one", got)
	}
	if st := partition(c, r.topic, 2); st.OldestUnfinished.IsZero() || st.OldestUnfinishedOffset != 10 || st.Committed > 10 {
		t.Errorf("partition 2 = %+v: want the unfinished record at offset 10 and a commit no further than it", st)
	}
	if st := partition(c, r.topic, 0); st.OldestUnfinishedOffset != -1 {
		t.Errorf("partition 0 = %+v: want no unfinished record (offset -1)", st)
	}

	close(release)
	r.waitCommitted(cc.Group, 60*time.Second)
	testkit.Eventually(t, 30*time.Second, "every partition's lag and unfinished age to reach 0", func() bool {
		fams := gather(t, c)
		for _, p := range []string{"0", "1", "2", "3"} {
			labels := map[string]string{"topic": r.topic, "partition": p}
			if v, ok := fams.Value("turbo_partition_lag", labels); !ok || v != 0 {
				return false
			}
			if v, ok := fams.Value("turbo_partition_oldest_unfinished_age_seconds", labels); !ok || v != 0 {
				return false
			}
		}
		return true
	})
	fams := gather(t, c)
	rep := ledger.Report()
	checkClean(t, rep, records)
	labels := map[string]string{"consumer": "metrics"}
	if got := fams.Must(t, "turbo_records_processed_total", labels); got != float64(rep.Distinct) {
		t.Errorf("turbo_records_processed_total = %v, want the ledger's %d", got, rep.Distinct)
	}
	if got := fams.Must(t, "turbo_handler_duration_seconds", labels); got != records {
		t.Errorf("turbo_handler_duration_seconds counted %v attempts, want %d", got, records)
	}
	if got := fams.Must(t, "turbo_buffer_wait_seconds", labels); got != records {
		t.Errorf("turbo_buffer_wait_seconds counted %v records, want %d", got, records)
	}
	if got := fams.Must(t, "turbo_commits_total", labels); got < 1 || fams.Must(t, "turbo_commit_duration_seconds", labels) < 1 {
		t.Errorf("turbo_commits_total = %v and no commit timed, want commits", got)
	}
	if got := fams.Must(t, "turbo_partitions_assigned_total", labels); got != 4 {
		t.Errorf("turbo_partitions_assigned_total = %v, want 4", got)
	}
	if got := fams.Must(t, "turbo_consumer_ready", labels); got != 1 {
		t.Errorf("turbo_consumer_ready = %v, want 1", got)
	}
	for _, p := range c.Partitions() {
		if p.HighWatermark != p.Committed || p.Lag != 0 {
			t.Errorf("partition %v: committed %d, high watermark %d, lag %d: want committed at the high watermark", p.TopicPartition, p.Committed, p.HighWatermark, p.Lag)
		}
	}
	problems, err := testutil.CollectAndLint(c.Collector())
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	if live := c.Live(); !live.OK {
		t.Errorf("Live() = %+v, want OK", live)
	}
}

func partition(c *actors.Consumer, topic string, p int32) actors.PartitionStats {
	for _, st := range c.Partitions() {
		if st.Topic == topic && st.Partition == p {
			return st
		}
	}
	return actors.PartitionStats{}
}

// Without Options.Metrics there are no histograms, and the rest is there.
func TestMetricsWithoutHistograms(t *testing.T) {
	t.Parallel()
	r := newRun(t, 2, 20, 5)
	ledger := testkit.NewLedger(0)
	c := r.start(r.consumer("plain", nil), ledger)
	r.waitCommitted("g-"+r.topic, 30*time.Second)
	fams := gather(t, c)
	for name := range fams.Families {
		if strings.HasSuffix(name, "_seconds") && !strings.Contains(name, "oldest_unfinished") {
			t.Errorf("histogram %s present without Options.Metrics", name)
		}
	}
	if got := fams.Must(t, "turbo_records_processed_total", nil); got != 20 {
		t.Errorf("turbo_records_processed_total = %v, want 20", got)
	}
	if got := fams.Must(t, "turbo_kafka_connection_errors_total", map[string]string{"kind": "unreachable"}); got != 0 {
		t.Errorf("unreachable connection errors = %v, want 0", got)
	}
}
