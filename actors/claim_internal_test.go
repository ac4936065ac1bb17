package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/config"
)

// sliceFeed is a claimFeed over a slice, for the claim's own rules.
type sliceFeed struct {
	recs      []Record
	hidden    bool   // ready says 0: records arrive while the batch is assembled
	afterNext func() // called after every record next returns
	end       claimEnd
	endedWith claimEnd
}

func (f *sliceFeed) idle(*gate) claimEnd { return f.end }
func (f *sliceFeed) first(int) (Record, claimEnd) {
	if len(f.recs) == 0 {
		return Record{}, f.end
	}
	m := f.recs[0]
	f.recs = f.recs[1:]
	return m, readOn
}
func (f *sliceFeed) next() (Record, bool) {
	if len(f.recs) == 0 {
		return Record{}, false
	}
	m := f.recs[0]
	f.recs = f.recs[1:]
	if f.afterNext != nil {
		f.afterNext()
	}
	return m, true
}
func (f *sliceFeed) ready() int {
	if f.hidden {
		return 0
	}
	return len(f.recs)
}
func (f *sliceFeed) backlog() int                      { return f.ready() }
func (f *sliceFeed) unread(m Record)                   { f.recs = append([]Record{m}, f.recs...) }
func (f *sliceFeed) hwm() int64                        { return 100 }
func (f *sliceFeed) batched() claimEnd                 { return readOn }
func (f *sliceFeed) fill(rec *Record, m Record)        { *rec = m }
func (f *sliceFeed) ended(end claimEnd, _ finalCommit) { f.endedWith = end }

func tenRecords() []Record {
	recs := make([]Record, 10)
	for i := range recs {
		recs[i] = Record{Topic: "t", Offset: int64(i), Value: make([]byte, 100)}
	}
	return recs
}

// TestAssembleBatch: the batch stops at the credits taken or once the bytes
// of records that will run reach the room; inherited records cost no bytes.
func TestAssembleBatch(t *testing.T) {
	t.Parallel()
	var l sideLife
	l.begin(func(any) {})
	c := l.newClaim(claimSpec{tp: TopicPartition{Topic: "t"}, finished: []offsetmeta.Range{{From: 2, To: 4}}, maxBatch: 10})
	recs := tenRecords()
	f := &sliceFeed{recs: recs[1:]}
	batch, inherited, used := assemble(c, claimFeed[Record](f), recs[0], 8, 250)
	// 0 and 1 (200 bytes), 2–4 inherited (free), 5 brings it to 300 ≥ 250.
	if len(batch) != 6 || inherited != 3 || used != 300 {
		t.Fatalf("batch of %d, %d inherited, %d bytes; want 6, 3, 300", len(batch), inherited, used)
	}
	for i, r := range batch {
		if r.Offset != int64(i) || r.epoch != c.epoch || r.gate != c.gate || r.size != 100 || r.inherited != (i >= 2 && i <= 4) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	f = &sliceFeed{recs: recs[7:]}
	if batch, _, used = assemble(c, claimFeed[Record](f), recs[6], 2, 1000); len(batch) != 2 || used != 200 {
		t.Fatalf("batch of %d (%d bytes); want 2 (the credits taken), 200", len(batch), used)
	}
	// Records the feed did not count as ready get more slabs: each its own
	// envelope, in order.
	recs = tenRecords()
	f = &sliceFeed{recs: recs[1:], hidden: true}
	batch, _, _ = assemble(c, claimFeed[Record](f), recs[0], 10, 1<<20)
	seen := map[*envelope]bool{}
	for i, r := range batch {
		if r.Offset != int64(i) || seen[r] {
			t.Fatalf("record %d: offset %d, shared with an earlier one: %v", i, r.Offset, seen[r])
		}
		seen[r] = true
	}
	if len(batch) != 10 {
		t.Fatalf("batch of %d, want all 10", len(batch))
	}
}

// TestKeyArena: each key's copy equals it and stays put when the key's bytes
// change or later keys are copied; keys share chunks (a thousand 8-byte
// keys cost two allocations, not a thousand) and a key too large for a
// chunk gets its own copy.
func TestKeyArena(t *testing.T) {
	var a keyArena
	keys := make([][]byte, 1000)
	copies := make([]string, len(keys))
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%04d", i)
	}
	// AllocsPerRun runs it twice and counts the second: 8,000 bytes of keys,
	// at most two new chunks whatever the first run left.
	allocs := testing.AllocsPerRun(1, func() {
		for i, k := range keys {
			copies[i] = a.copy(k)
		}
	})
	if allocs > 2 {
		t.Fatalf("1,000 keys of 8 bytes took %.0f allocations, want at most 2 (4 KiB chunks)", allocs)
	}
	for i := range keys {
		keys[i][0] = 'X' // the handler's slice changes; the copy must not
	}
	for i, c := range copies {
		if want := fmt.Sprintf("key-%04d", i); c != want {
			t.Fatalf("copy %d = %q, want %q", i, c, want)
		}
	}
	big := make([]byte, keyChunk)
	big[0] = 'b'
	c := a.copy(big)
	if len(c) != keyChunk || c[0] != 'b' {
		t.Fatalf("large key copied as %d bytes starting %q", len(c), c[:1])
	}
	big[0] = 'X'
	if c[0] != 'b' {
		t.Fatal("a large key's copy changed with the key")
	}
	if got := a.copy(nil); got != "" {
		t.Fatalf("nil key copied as %q", got)
	}
	// A claim with a few keys holds a small chunk: the chunks start at
	// firstKeyChunk and double up to keyChunk.
	var few keyArena
	for i := range 20 {
		few.copy(fmt.Appendf(nil, "key-%04d", i))
	}
	if c := cap(few.chunk); c > firstKeyChunk {
		t.Fatalf("20 keys of 8 bytes hold a chunk of %d bytes, want at most %d", c, firstKeyChunk)
	}
	for i := range 600 {
		few.copy(fmt.Appendf(nil, "key-%04d", i))
	}
	if c := cap(few.chunk); c != keyChunk {
		t.Fatalf("after 4,960 bytes of keys the chunk is %d bytes, want %d (doubled up to it)", c, keyChunk)
	}
}

// TestClaimLostMidBatch: once the partition is lost, not one more record of
// it goes to the proxy, every credit taken comes back, and the claim ends
// as lost.
func TestClaimLostMidBatch(t *testing.T) {
	t.Parallel()
	var l sideLife
	sent := make(chan any, 16)
	l.begin(func(m any) { sent <- m })
	lost := make(chan struct{})
	c := l.newClaim(claimSpec{tp: TopicPartition{Topic: "t"}, maxBatch: 10, lost: lost})
	c.gate.resize(8, 1<<20)
	f := &sliceFeed{recs: tenRecords(), afterNext: func() {
		select {
		case <-lost:
		default:
			close(lost)
		}
	}}
	go func() {
		m := <-sent
		cl, ok := m.(*claimLost)
		if !ok {
			t.Errorf("sent %T; want *claimLost", m)
			return
		}
		cl.reply <- finalCommit{}
	}()
	runClaim(c, claimFeed[Record](f))
	if f.endedWith != endLost {
		t.Fatalf("claim ended with %d; want endLost", f.endedWith)
	}
	if n, room := c.gate.take(10, 0); n != 8 || room != 1<<20 {
		t.Fatalf("gate has %d credits, %d bytes; want all 8 and 1 MiB back", n, room)
	}
	if n := c.gate.inPipeline(); n != 0 {
		t.Fatalf("%d records in the pipeline; want none (the lost batch never went on)", n)
	}
	if got := l.batches.Load(); got != 0 {
		t.Fatalf("%d batches sent; want none", got)
	}
}

// sideRun is what a scenario needs of one side.
type sideRun struct {
	side    kafkaSide
	life    *sideLife
	produce func(t *testing.T, values [][]byte)
	// commit commits offset with metadata for the group, before the side starts.
	commit func(t *testing.T, offset int64, meta string)
	// committed is the group's committed offset after the side stopped.
	committed func(t *testing.T) int64
}

const (
	claimTestRecords  = 10
	claimTestCapacity = 8
	claimTestValue    = 100
	claimTestBytes    = 250 // two and a half records
)

// TestBothSidesShareTheClaim runs one claim-level scenario — inherited
// records, a byte budget, a revocation handover — through the in-memory and
// the sarama (embedded broker) sides, acting as the proxy. Both must deliver
// the same records with the same rules, and every batch must have come from
// runClaim (the sides' batch counters).
func TestBothSidesShareTheClaim(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "sarama"} {
		t.Run(name, func(t *testing.T) {
			var r sideRun
			if name == "memory" {
				r = memSideRun(t)
			} else {
				r = saramaSideRun(t)
			}
			values := make([][]byte, claimTestRecords)
			for i := range values {
				values[i] = []byte(fmt.Sprintf("%0*d", claimTestValue, i))
			}
			r.produce(t, values)
			meta, _, err := offsetmeta.Encode(0, []offsetmeta.Range{{From: 2, To: 4}}, 4000)
			if err != nil {
				t.Fatal(err)
			}
			r.commit(t, 0, meta)
			runClaimScenario(t, r)
		})
	}
}

func runClaimScenario(t *testing.T, r sideRun) {
	sent := make(chan any, 1024)
	r.side.start(func(m any) { sent <- m })
	stopped := false
	defer func() {
		if !stopped {
			if done := r.side.kill(); done != nil {
				<-done
			}
		}
	}()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	var (
		next     int64 // the next offset expected
		batches  int64
		gt       *gate
		epoch    uint64
		stopping bool
	)
	for {
		var m any
		select {
		case m = <-sent:
		case <-deadline.C:
			t.Fatalf("waited 30 s for the side's messages; at offset %d, %d batches", next, batches)
		}
		switch m := m.(type) {
		case *sessionStarted:
		case *claimStarted:
			gt, epoch = m.gate, m.epoch
			gt.resize(claimTestCapacity, claimTestBytes)
		case *claimFetched:
			batches++
			if len(m.records) > claimTestCapacity {
				t.Fatalf("batch of %d records; capacity %d", len(m.records), claimTestCapacity)
			}
			var used, last int64
			inherited := 0
			for _, rec := range m.records {
				if rec.Offset != next || rec.epoch != epoch || rec.gate != gt || rec.size != claimTestValue {
					t.Fatalf("record %+v; want offset %d of epoch %d, %d bytes", rec, next, epoch, claimTestValue)
				}
				if want := next >= 2 && next <= 4; rec.inherited != want {
					t.Fatalf("offset %d inherited %v; want %v", next, rec.inherited, want)
				}
				if rec.inherited {
					inherited++
				} else {
					used += rec.size
					last = rec.size
				}
				next++
			}
			if inherited != m.inherited || used-last >= claimTestBytes {
				t.Fatalf("batch %d: %d inherited (says %d), %d bytes: over the room of %d", batches, inherited, m.inherited, used, claimTestBytes)
			}
			// The records run at once: they leave the pipeline (the
			// inherited ones never entered it).
			gt.release(len(m.records)-m.inherited, used)
			if next == claimTestRecords && !stopping {
				stopping = true
				r.side.stop()
			}
		case *claimEnding:
			m.reply <- finalCommit{offset: next, ok: true}
		case *groupStopped:
			stopped = true
			t.Logf("%d batches, all assembled by runClaim", batches)
			if got := r.life.batches.Load(); got != batches {
				t.Fatalf("runClaim assembled %d batches; the proxy got %d", got, batches)
			}
			if next != claimTestRecords {
				t.Fatalf("stopped at offset %d; want %d", next, claimTestRecords)
			}
			if n := gt.inPipeline(); n != 0 {
				t.Fatalf("%d records in the pipeline once all were released; want 0 (inherited ones never enter it)", n)
			}
			if got := r.committed(t); got != claimTestRecords {
				t.Fatalf("committed %d after the handover; want %d", got, claimTestRecords)
			}
			return
		default:
			t.Fatalf("unexpected %T", m)
		}
	}
}

func memSideRun(t *testing.T) sideRun {
	cluster := memkafka.New()
	tp := memkafka.TopicPartition{Topic: "t"}
	topics, _ := config.Consumer{Topics: []string{"t"}}.Subscription()
	g := &memGroup{cluster: cluster, topics: topics, maxBatch: maxFetchBatch, revokeWait: 10 * time.Second,
		readMeta: true, stats: &consumerStats{}, log: zerolog.New(zerolog.NewTestWriter(t))}
	return sideRun{
		side: g, life: &g.sideLife,
		produce: func(t *testing.T, values [][]byte) {
			for i, v := range values {
				if err := cluster.Produce(memkafka.Record{Topic: "t", Offset: int64(i), Value: v}); err != nil {
					t.Fatal(err)
				}
			}
		},
		commit: func(t *testing.T, offset int64, meta string) {
			m := cluster.Join([]string{"t"})
			cluster.Assign(tp)
			m.Acquire()
			if !m.Commit(tp, offset, meta) {
				t.Fatal("commit refused")
			}
			m.Release(tp)
			m.Leave()
			// Revoked by stop: the session ends once the claim is handed over.
		},
		committed: func(*testing.T) int64 { return cluster.Partition(tp).Committed },
	}
}

func saramaSideRun(t *testing.T) sideRun {
	b, err := embedded.Start(embedded.Options{Partitions: 1, Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cfg := config.Default()
	cfg.Kafka.Brokers = b.Addrs()
	consumer := config.DefaultConsumer("claim-test")
	consumer.Topics = []string{"t"}
	log := zerolog.New(zerolog.NewTestWriter(t))
	g := &kafkaGroup{
		released: &releasedAt{}, partCap: newPartitionCap(consumer.PartitionCap(), log), brokers: b.Addrs(), groupID: consumer.Group, topics: mustSubscription(t, consumer), refresh: consumer.MetadataRefresh,
		cfg: saramaConfig(cfg.Kafka, consumer, time.Second), net: kafkanet.New(cfg.Kafka, log), log: log,
		retry:    backoff.Policy{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2},
		maxBatch: maxFetchBatch, revokeWait: 10 * time.Second, readMeta: true, auxQueue: 16, stats: &consumerStats{},
	}
	client := func(t *testing.T) sarama.Client {
		sc := sarama.NewConfig()
		sc.Version = g.cfg.Version
		sc.Producer.Return.Successes = true
		c, err := sarama.NewClient(b.Addrs(), sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return sideRun{
		side: g, life: &g.sideLife,
		produce: func(t *testing.T, values [][]byte) {
			p, err := sarama.NewSyncProducerFromClient(client(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for _, v := range values {
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "t", Partition: 0, Value: sarama.ByteEncoder(v)}); err != nil {
					t.Fatal(err)
				}
			}
		},
		commit: func(t *testing.T, offset int64, meta string) {
			// A simple (generation -1) commit: the group has no member yet.
			c := client(t)
			coord, err := c.Coordinator(g.groupID)
			if err != nil {
				t.Fatal(err)
			}
			req := &sarama.OffsetCommitRequest{ConsumerGroup: g.groupID, ConsumerGroupGeneration: -1, Version: 2}
			req.AddBlock("t", 0, offset, 0, meta)
			resp, err := coord.CommitOffset(req)
			if err != nil {
				t.Fatal(err)
			}
			if kerr := resp.Errors["t"][0]; kerr != sarama.ErrNoError {
				t.Fatalf("commit: %v", kerr)
			}
		},
		committed: func(t *testing.T) int64 {
			admin, err := sarama.NewClusterAdminFromClient(client(t))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := admin.ListConsumerGroupOffsets(g.groupID, map[string][]int32{"t": {0}})
			if err != nil {
				t.Fatal(err)
			}
			blk := resp.GetBlock("t", 0)
			if blk == nil {
				t.Fatal("no committed offset")
			}
			return blk.Offset
		},
	}
}

func mustSubscription(t *testing.T, c config.Consumer) config.Subscription {
	t.Helper()
	s, err := c.Subscription()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
