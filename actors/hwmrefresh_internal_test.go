package actors

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/watermark"
	"github.com/turbokafka/turbo/config"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Which partitions are asked about, and what an answer changes: only
// partitions without a batch for an interval (and not being revoked), only
// their current assignment, only forward.
func TestWatermarkRefreshRules(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tp := func(p int32) TopicPartition { return TopicPartition{Topic: "t", Partition: p} }
	part := func(epoch uint64, fetched time.Time, hwm int64) *ownedPartition {
		g := newGate(1, 1)
		g.watch.hwm.Store(hwm)
		return &ownedPartition{epoch: epoch, gate: g, hwm: hwm, fetchedAt: fetched}
	}
	parts := map[TopicPartition]*ownedPartition{
		tp(0): part(1, now.Add(-time.Second), 10),         // read a second ago
		tp(1): part(2, now.Add(-6*time.Second), 20),       // not read for 6 s
		tp(2): part(3, time.Time{}, -1),                   // never read
		tp(3): part(4, now.Add(-time.Minute), 30),         // being revoked
		tp(4): part(5, now.Add(-5*time.Second), 40),       // exactly an interval
		tp(5): part(6, now.Add(-10*time.Millisecond), 50), // read just now
	}
	parts[tp(3)].ending = make(chan finalCommit, 1)
	q := staleWatermarks(parts, now, 5*time.Second)
	slices.SortFunc(q, func(a, b partitionHWM) int { return int(a.tp.Partition - b.tp.Partition) })
	want := []partitionHWM{{tp: tp(1), epoch: 2}, {tp: tp(2), epoch: 3}, {tp: tp(4), epoch: 5}}
	if !slices.Equal(q, want) {
		t.Fatalf("stale = %+v, want %+v", q, want)
	}

	if len(applyWatermarks(parts, []partitionHWM{{tp: tp(1), epoch: 1, hwm: 99}, {tp: tp(7), epoch: 1, hwm: 99}})) != 0 {
		t.Error("an answer for an earlier assignment, or a partition not owned, moved a high watermark")
	}
	if len(applyWatermarks(parts, []partitionHWM{{tp: tp(1), epoch: 2, hwm: 15}, {tp: tp(4), epoch: 5, hwm: 40}})) != 0 {
		t.Error("an answer at or below the known high watermark moved it")
	}
	if len(applyWatermarks(parts, []partitionHWM{{tp: tp(1), epoch: 2, hwm: 25}, {tp: tp(2), epoch: 3, hwm: 7}})) != 2 {
		t.Error("a higher high watermark was not applied")
	}
	for p, want := range map[int32]int64{1: 25, 2: 7, 4: 40} {
		if hp := parts[tp(p)]; hp.hwm != want || hp.gate.watch.hwm.Load() != want {
			t.Errorf("partition %d: hwm %d, shown %d, want %d", p, hp.hwm, hp.gate.watch.hwm.Load(), want)
		}
	}
}

// The refresh interval has a floor (fetchMaxWait) and a default.
func TestRefreshInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want time.Duration }{
		{0, watermarkRefresh}, {-time.Second, watermarkRefresh}, {time.Millisecond, minWatermarkRefresh},
		{time.Second, time.Second},
	} {
		if got := refreshInterval(c.in); got != c.want {
			t.Errorf("refreshInterval(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// A failing refresh is counted every time and logged once per streak.
func TestWatermarkRefreshFailuresLoggedOncePerStreak(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := &clientProxy{stats: &consumerStats{}, log: zerolog.New(&buf), parts: map[TopicPartition]*ownedPartition{}}
	boom := errors.New("boom")
	for _, err := range []error{boom, boom, boom, nil, nil, boom} {
		p.handleWatermarks(&watermarksRefreshed{err: err})
	}
	if n := p.stats.Snapshot().WatermarkErrs; n != 4 {
		t.Errorf("WatermarkErrs = %d, want 4", n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var levels []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"level":"warn"`):
			levels = append(levels, "warn")
		case strings.Contains(l, `"level":"info"`):
			levels = append(levels, "info")
		}
	}
	if !slices.Equal(levels, []string{"warn", "info", "warn"}) {
		t.Errorf("logged %v, want a warning per streak and a note when it works again:\n%s", levels, buf.String())
	}
}

// drained compares the committable offset with the high watermark: a
// refreshed one above the last record read makes the partition not drained
// (records wait to be read) until those records are read and finished —
// then it is drained again; nothing else (what is committed) depends on it.
func TestDrainedFollowsARefreshedHighWatermark(t *testing.T) {
	t.Parallel()
	g := newGate(10, 1000)
	p := &partitionWatermark{tracker: watermark.New(), gate: g}
	for off := int64(0); off < 5; off++ {
		if err := p.tracker.Track(off); err != nil {
			t.Fatal(err)
		}
		if err := p.tracker.Done(off); err != nil {
			t.Fatal(err)
		}
	}
	g.watch.hwm.Store(5) // the last fetch
	if !p.drained() {
		t.Fatal("not drained with every record up to the high watermark finished")
	}
	g.watch.hwm.Store(8) // refreshed: 5–7 arrived, not read yet
	if p.drained() {
		t.Fatal("drained with records 5–7 not read")
	}
	for off := int64(5); off < 8; off++ {
		_ = p.tracker.Track(off)
		_ = p.tracker.Done(off)
	}
	if !p.drained() {
		t.Fatal("not drained once 5–7 finished")
	}
}

// latestOffsets asks each leader broker once for all its partitions, at
// the consumer's isolation level, and answers what it could when a
// partition cannot be asked about.
func TestLatestOffsetsOneRequestPerLeader(t *testing.T) {
	t.Parallel()
	const topic = "hwm"
	cluster, brokers := threeBrokers(t, topic, 9, 500)
	var mu sync.Mutex
	var asked []*kmsg.ListOffsetsRequest
	cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		mu.Lock()
		asked = append(asked, req.(*kmsg.ListOffsetsRequest))
		mu.Unlock()
		return nil, nil, false
	})

	cfg := config.Default()
	cfg.Kafka.Brokers = brokers
	cc := config.DefaultConsumer("hwm")
	scfg := saramaConfig(cfg.Kafka, cc, time.Second)
	aux, err := newKafkaAux(brokers, scfg, auxOptions{groupID: "g", queue: 10, stats: &consumerStats{}}, func(any) {}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer aux.close()
	var q []partitionHWM
	for p := range int32(9) {
		q = append(q, partitionHWM{tp: TopicPartition{Topic: topic, Partition: p}, epoch: uint64(p)})
	}
	q = append(q, partitionHWM{tp: TopicPartition{Topic: topic, Partition: 99}, epoch: 99})
	marks, err := aux.latestOffsets(q)
	if err == nil || !strings.Contains(err.Error(), topic+"/99") {
		t.Errorf("err = %v, want one naming %s/99", err, topic)
	}

	// What the cluster says, through sarama's own one-partition GetOffset.
	client, err := sarama.NewClient(brokers, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	leaders := map[int32]bool{}
	var total int64
	for _, m := range marks {
		end, err := client.GetOffset(topic, m.tp.Partition, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if m.hwm != end || m.epoch != uint64(m.tp.Partition) {
			t.Errorf("%s: hwm %d epoch %d, want %d and %d", m.tp, m.hwm, m.epoch, end, m.tp.Partition)
		}
		b, err := client.Leader(topic, m.tp.Partition)
		if err != nil {
			t.Fatal(err)
		}
		leaders[b.ID()] = true
		total += m.hwm
	}
	if len(marks) != 9 || total != 500 {
		t.Errorf("%d partitions answered, %d records in all; want 9 and 500", len(marks), total)
	}
	mu.Lock()
	defer mu.Unlock()
	// asked also holds GetOffset's nine: the refresh's are the first.
	refresh := asked[:len(asked)-9]
	if len(refresh) != len(leaders) || len(leaders) < 2 {
		t.Errorf("%d ListOffsets requests for partitions led by %d brokers, want one per leader (and several leaders)", len(refresh), len(leaders))
	}
	for _, r := range refresh {
		if r.IsolationLevel != 0 {
			t.Errorf("isolation level %d, want 0 (read_uncommitted, as the consumer reads)", r.IsolationLevel)
		}
	}
}

// The consumer's lag is kept one partition at a time (relag, forget): after
// any sequence of batches, commits, refreshes and partitions leaving, it is
// the sum of every owned partition's lag, and each partition shows its own.
func TestLagIsTheSumOfThePartitionsLag(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 29))
	p := &clientProxy{stats: &consumerStats{}, log: zerolog.Nop(), parts: map[TopicPartition]*ownedPartition{}}
	tp := func(i int) TopicPartition { return TopicPartition{Topic: "t", Partition: int32(i)} }
	for step := range 5000 {
		i := rng.IntN(16)
		hp := p.parts[tp(i)]
		switch op := rng.IntN(5); {
		case hp == nil: // assigned, perhaps with a committed offset
			p.parts[tp(i)] = &ownedPartition{epoch: uint64(step), gate: newGate(1, 1), committed: -1, start: -1, initial: rng.Int64N(3) - 1, hwm: -1}
		case op == 0: // a batch: the high watermark moves, the first read sets start
			hp.hwm = max(hp.hwm, hp.committed, hp.start) + rng.Int64N(50)
			if hp.start < 0 {
				hp.start = max(0, hp.initial)
			}
			p.relag(hp)
		case op == 1: // a commit somewhere up to the high watermark
			if hp.hwm > 0 {
				p.handleCommit(&commitOffsets{offsets: []partitionOffset{{tp: tp(i), epoch: hp.epoch, offset: rng.Int64N(hp.hwm + 1)}}})
			}
		case op == 2: // a refresh
			p.handleWatermarks(&watermarksRefreshed{marks: []partitionHWM{{tp: tp(i), epoch: hp.epoch, hwm: hp.hwm + rng.Int64N(20)}}})
		case op == 3: // released
			p.forget(tp(i), hp)
		}
		var sum int64
		for ptp, hp := range p.parts {
			if got, want := hp.gate.watch.lag.Load(), hp.partLag(); got != want {
				t.Fatalf("step %d: %s shows lag %d, want %d", step, ptp, got, want)
			}
			sum += hp.partLag()
		}
		if got := p.stats.lag.Load(); got != sum {
			t.Fatalf("step %d: lag %d, the partitions' sum is %d", step, got, sum)
		}
	}
}

// threeBrokers starts a cluster of three brokers with topic over parts
// partitions (their leaders spread among the brokers), holding records.
func threeBrokers(t *testing.T, topic string, parts int32, records int) (*kfake.Cluster, []string) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(parts, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := embedded.Produce(ctx, embedded.ProduceOptions{Brokers: brokers, Topic: topic, Count: records, Keys: records / 10}); err != nil {
		t.Fatal(err)
	}
	return cluster, brokers
}
