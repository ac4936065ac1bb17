//go:build cluster

// Package cluster_test runs turbo against a three-node Kafka cluster
// (test/kafka/kafka.sh's cluster mode) through the cluster's events: a
// partition leader killed, the group coordinator killed, rolling restarts.
// A ledger judges every run: nothing lost, per-key order and exclusivity
// kept, every record committed; duplicates are bounded by what was in flight
// at each event, and reported with the throughput before, during and after
// it. Run by `make test-kafka-cluster`.
package cluster_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/test/testkit"
)

const (
	partitions  = 8
	keys        = 400
	concurrency = 32
	// work is each record's handler time: 32 runners do about 1,600
	// records a second, so that a run lasts through an event.
	work = 20 * time.Millisecond
	// batch is the records produced at the start, during an event and
	// after it.
	batch = 12_000
)

// scenario is one run through a cluster event.
type scenario struct {
	c      *testkit.KafkaCluster
	topic  string
	ledger *testkit.Ledger
	run    *testkit.Proc
	rate   *rateLog
	events []event
	listen string    // turbo's HTTP address
	ready  *readyLog // /readyz's answers, when watched
}

// event is a disruption and when it began and ended.
type event struct {
	what       string
	began, end time.Time
}

// start produces the first batch and starts turbo (run, or a swarm of
// nodes when nodes > 1) consuming it, bootstrapping from the cluster's
// nodes.
func start(t *testing.T, name string, nodes int) *scenario {
	t.Helper()
	c := testkit.ThreeNodes(t)
	return startVia(t, name, nodes, c, c.Brokers)
}

// writeConfig writes the configuration of the suite's consumer: group and
// topic named topic, the ledger at url its handler, extra more of its keys
// (YAML lines indented as its keys).
func writeConfig(t *testing.T, brokers []string, topic, url, extra string) string {
	return testkit.WriteConfig(t, fmt.Sprintf(`
http: {listen: "127.0.0.1:0"}
kafka:
  brokers: [%q, %q, %q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: %d
    commit_interval: 200ms
    handler: {type: http, url: %q, timeout: 30s}
%s
shutdown_timeout: 10s
log: {level: info, format: json}
`, brokers[0], brokers[1], brokers[2], topic, topic, concurrency, url, extra))
}

// handlerTime is the handler's time per record of the scenarios started
// now: work, unless a test sets it for its run (the tests of this package
// share a cluster, so they never run in parallel).
var handlerTime = work

// startVia is start, turbo bootstrapping from brokers (the proxies of
// testkit.Faults, or the nodes) and serving its HTTP endpoints.
func startVia(t *testing.T, name string, nodes int, c *testkit.KafkaCluster, brokers []string) *scenario {
	t.Helper()
	s := &scenario{c: c, topic: testkit.TopicName(name)}
	testkit.Cluster(t, partitions, s.topic)
	testkit.ProduceWithBinary(t, s.c.Brokers[0], s.topic, batch, keys)
	s.ledger = testkit.NewLedger(handlerTime)
	cfg := writeConfig(t, brokers, s.topic, s.ledger.Endpoint(t), "")
	args := []string{"run", "--config", cfg}
	if nodes > 1 {
		args = []string{"swarm", "--nodes", fmt.Sprint(nodes), "--config", cfg}
	}
	s.run, s.listen = testkit.StartHTTP(t, nil, nil, args...)
	s.rate = watchRate(t, func() int { return s.ledger.Report().Distinct })
	return s
}

// produce writes another batch (acknowledged by two in-sync replicas).
func (s *scenario) produce(t *testing.T) {
	t.Helper()
	testkit.ProduceWithBinary(t, s.c.Brokers[0]+","+s.c.Brokers[1]+","+s.c.Brokers[2], s.topic, batch, keys)
}

// handled waits until n distinct records were handled.
func (s *scenario) handled(t *testing.T, n int, why string) {
	t.Helper()
	testkit.Eventually(t, 3*time.Minute, fmt.Sprintf("%d records handled (%s)", n, why), func() bool {
		return s.ledger.Report().Distinct >= n
	})
}

// finish waits for every one of produced records to be handled and
// committed, stops turbo, and judges the ledger: duplicates at most
// concurrency per event (what was in flight).
func (s *scenario) finish(t *testing.T, produced int) {
	t.Helper()
	s.handled(t, produced, "all of them")
	testkit.Eventually(t, time.Minute, "every record committed", func() bool {
		var sum int64
		for _, off := range testkit.CommittedOffsets(t, s.c.Brokers, s.topic, s.topic) {
			sum += max(off, 0)
		}
		return sum == int64(produced)
	})
	end := time.Now()
	if s.ready != nil {
		s.ready.stop() // what it says while turbo stops is not the event's
	}
	s.run.Signal(t, syscall.SIGTERM)
	if code := s.run.Wait(t, time.Minute); code != 0 {
		t.Errorf("turbo exited %d after SIGTERM, want 0", code)
	}
	rep := s.ledger.Report()
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	if rep.Distinct != produced {
		t.Errorf("%d distinct records handled, want the %d produced", rep.Distinct, produced)
	}
	if limit := len(s.events) * concurrency; rep.Duplicates > limit {
		t.Errorf("%d records handled twice, want at most %d (%d events × concurrency %d)", rep.Duplicates, limit, len(s.events), concurrency)
	}
	t.Logf("FIGURES cluster-%s records=%d lost=0 duplicates=%d order_violations=%d overlaps=%d", t.Name(), produced, rep.Duplicates, rep.OrderViolations, rep.Overlaps)
	// The rate before the first event is the run's undisturbed rate: the
	// one each event's rates compare with.
	var before float64
	if len(s.events) > 0 {
		before = s.rate.between(s.events[0].began.Add(-5*time.Second), s.events[0].began)
	}
	for _, e := range s.events {
		after := e.end.Add(10 * time.Second)
		if after.After(end) {
			after = end
		}
		t.Logf("FIGURES cluster-%s event=%q lasted=%s records/s undisturbed=%.0f during=%.0f after=%.0f full-speed-again=%s after it",
			t.Name(), e.what, e.end.Sub(e.began).Round(100*time.Millisecond), before,
			s.rate.between(e.began, e.end), s.rate.between(e.end, after),
			s.rate.recovered(e.end, end, 0.8*before))
	}
	if s.ready != nil {
		t.Logf("FIGURES cluster-%s readiness: %s", t.Name(), s.ready.transitions())
	}
}

// TestLeaderKilledUnderLoad: kill -9 of the node that leads partition 0 (and
// about a third of the others) while records are handled, records produced
// while it is down (to the new leaders), then it comes back: nothing lost,
// order kept, everything committed.
func TestLeaderKilledUnderLoad(t *testing.T) {
	killUnderLoad(t, "leader-kill", "leader of partition 0", func(s *scenario) int32 { return s.c.Leader(t, s.topic, 0) })
}

// TestLeaderKilledUnderAFastHandler is TestLeaderKilledUnderLoad with a
// handler that answers at once (a no-op behind HTTP, so that the ledger
// still judges): the read-ahead, not the handler, is what waits.
func TestLeaderKilledUnderAFastHandler(t *testing.T) {
	handlerTime = 0
	defer func() { handlerTime = work }()
	killUnderLoad(t, "leader-kill-fast", "leader of partition 0", func(s *scenario) int32 { return s.c.Leader(t, s.topic, 0) })
}

// TestCoordinatorKilledUnderLoad: kill -9 of the node that coordinates the
// group while records are handled and committed: the group finds its new
// coordinator, nothing is lost, everything is committed.
func TestCoordinatorKilledUnderLoad(t *testing.T) {
	killUnderLoad(t, "coordinator-kill", "the group coordinator", func(s *scenario) int32 { return s.c.Coordinator(t, s.topic) })
}

// killUnderLoad kills the node role names (the group is named as the topic)
// a third of the way through a batch, waits until role moved to another
// node, produces a batch there, and brings the node back once a third of it
// was handled.
func killUnderLoad(t *testing.T, name, role string, holder func(*scenario) int32) {
	s := start(t, name, 1)
	s.handled(t, batch/3, "before the kill")
	victim := holder(s)
	e := event{what: fmt.Sprintf("kill -9 of node %d, %s", victim, role), began: time.Now()}
	s.c.Down(t, victim, true)
	testkit.Eventually(t, time.Minute, "another node to be "+role, func() bool { return holder(s) != victim })
	s.produce(t)
	s.handled(t, batch+batch/3, "with another node as "+role)
	s.c.Up(t, victim)
	e.end = time.Now()
	s.events = append(s.events, e)
	s.produce(t)
	s.finish(t, 3*batch)
}

// TestRollingRestartsUnderASwarm: every node restarted in turn (SIGTERM,
// back, every replica in sync again, the next), twice, while a swarm of
// three turbo nodes consumes.
func TestRollingRestartsUnderASwarm(t *testing.T) {
	s := start(t, "rolling", 3)
	s.handled(t, batch/4, "before the first restart")
	produced := batch
	for round := 1; round <= 2; round++ {
		for id := int32(1); id <= 3; id++ {
			s.produce(t) // records to handle through the restart
			produced += batch
			e := event{what: fmt.Sprintf("round %d: restart of node %d", round, id), began: time.Now()}
			s.c.Down(t, id, false)
			s.c.Up(t, id)
			testkit.Eventually(t, 2*time.Minute, "every replica in sync after the restart", func() bool {
				return s.c.InSync(t, s.topic) && s.c.InSync(t, "__consumer_offsets")
			})
			e.end = time.Now()
			s.events = append(s.events, e)
		}
	}
	s.produce(t) // records to show the rate after the last restart
	s.finish(t, produced+batch)
}

// rateLog samples a count of handled records four times a second, for
// records/s over any span of the run.
type rateLog struct {
	mu      sync.Mutex
	at      []time.Time
	count   []int
	stop    chan struct{}
	stopped sync.WaitGroup
}

func watchRate(t *testing.T, count func() int) *rateLog {
	r := &rateLog{stop: make(chan struct{})}
	r.stopped.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			r.mu.Lock()
			r.at, r.count = append(r.at, time.Now()), append(r.count, count())
			r.mu.Unlock()
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() {
		close(r.stop)
		r.stopped.Wait()
	})
	return r
}

// between is the records/s from one sample to another (the samples nearest
// from and to).
func (r *rateLog) between(from, to time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, j := r.index(from), r.index(to)
	if j <= i {
		return 0
	}
	return float64(r.count[j]-r.count[i]) / r.at[j].Sub(r.at[i]).Seconds()
}

// recovered is how long after began the rate over a second first reached
// want (before end); "never" if it did not.
func (r *rateLog) recovered(began, end time.Time, want float64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := r.index(began); i < len(r.at) && r.at[i].Before(end); i++ {
		j := r.index(r.at[i].Add(time.Second))
		if j > i && float64(r.count[j]-r.count[i])/r.at[j].Sub(r.at[i]).Seconds() >= want {
			return r.at[i].Sub(began).Round(100 * time.Millisecond).String()
		}
	}
	return "never"
}

// index is the sample nearest at and not before it (the last sample if
// none).
func (r *rateLog) index(at time.Time) int {
	i, _ := slices.BinarySearchFunc(r.at, at, func(a, b time.Time) int { return a.Compare(b) })
	return min(i, len(r.at)-1)
}

// TestPartitionedFromTheCoordinator: turbo reaches the cluster only through
// proxies; the path to the group coordinator's node goes silent both ways
// for longer than the session timeout (10 s), then heals. Readiness says so
// while it lasts; nothing is lost, nothing is handled by two sessions at
// once, everything is committed once the path is back.
func TestPartitionedFromTheCoordinator(t *testing.T) {
	c := testkit.ThreeNodes(t)
	f := testkit.ProxyCluster(t)
	s := startVia(t, "partition", 1, c, f.Brokers)
	s.handled(t, batch/3, "before the cut")
	victim := s.c.Coordinator(t, s.topic)
	ready := s.watchReady(t)
	e := event{what: fmt.Sprintf("turbo cut off from node %d, the group coordinator, for 15 s", victim), began: time.Now()}
	f.Cut(t, victim)
	testkit.Eventually(t, 30*time.Second, "/readyz to say the consumer is out of its session", func() bool { return !ready.now() })
	time.Sleep(15*time.Second - time.Since(e.began)) // the cut's length is the scenario
	f.Clear()
	testkit.Eventually(t, 2*time.Minute, "/readyz to say ready again once the path is back", ready.now)
	e.end = time.Now()
	s.events = append(s.events, e)
	s.produce(t)
	s.finish(t, 2*batch)
}

// TestSlowNetwork: 200 ms ± 50 of latency on every path to every node for a
// minute, then a bandwidth cap (64 KiB/s from each node) for 20 s: records
// go through slower, none is lost, and readiness stays true (turbo is
// consuming, slowly) — it says when it is not.
func TestSlowNetwork(t *testing.T) {
	c := testkit.ThreeNodes(t)
	f := testkit.ProxyCluster(t)
	s := startVia(t, "slow", 1, c, f.Brokers)
	s.handled(t, batch/4, "before the latency")
	s.watchReady(t)
	s.produce(t) // records to handle through each fault
	e := event{what: "200 ms ± 50 of latency both ways, every node, 1 min", began: time.Now()}
	for _, stream := range []string{"upstream", "downstream"} {
		f.Add(t, testkit.Toxic{Name: "latency-" + stream, Type: "latency", Stream: stream,
			Attributes: map[string]any{"latency": 200, "jitter": 50}})
	}
	time.Sleep(time.Minute) // the fault's length is the scenario
	f.Clear()
	e.end = time.Now()
	s.events = append(s.events, e)
	s.produce(t)
	e = event{what: "64 KiB/s from every node, 20 s", began: time.Now()}
	f.Add(t, testkit.Toxic{Name: "bandwidth", Type: "bandwidth", Stream: "downstream", Attributes: map[string]any{"rate": 64}})
	time.Sleep(20 * time.Second)
	f.Clear()
	e.end = time.Now()
	s.events = append(s.events, e)
	if r := s.ready.transitions(); r != "ready throughout" {
		t.Errorf("readiness changed while turbo went on consuming through a slow network: %s", r)
	}
	s.finish(t, 3*batch)
}

// readyLog samples turbo's /readyz four times a second, until stop.
type readyLog struct {
	mu      sync.Mutex
	last    bool
	changes []string
	began   time.Time
	stop    func()
}

func (s *scenario) watchReady(t *testing.T) *readyLog {
	r := &readyLog{last: true, began: time.Now()}
	s.ready = r
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	r.stop = func() {
		once.Do(func() { close(stop) })
		wg.Wait()
	}
	client := &http.Client{Timeout: time.Second}
	wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			ok := false
			if resp, err := client.Get("http://" + s.listen + "/readyz"); err == nil {
				ok = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
			r.mu.Lock()
			if ok != r.last {
				r.last = ok
				r.changes = append(r.changes, fmt.Sprintf("%s at +%s", map[bool]string{true: "ready", false: "not ready"}[ok], time.Since(r.began).Round(100*time.Millisecond)))
			}
			r.mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(r.stop)
	return r
}

// now is the last answer of /readyz.
func (r *readyLog) now() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *readyLog) transitions() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.changes) == 0 {
		return "ready throughout"
	}
	return fmt.Sprint(r.changes)
}

// TestDeadLettersThroughALeaderKill: every fifth record fails for good and
// goes to the dead-letter topic, whose partition 0's leader (and so about a
// third of its partitions' leaders) is killed mid-run: every failed record
// is in the dead-letter topic exactly once, every other record handled,
// everything committed.
func TestDeadLettersThroughALeaderKill(t *testing.T) {
	c := testkit.ThreeNodes(t)
	topic, dlq := testkit.TopicName("dlq-source"), testkit.TopicName("dlq")
	testkit.Cluster(t, partitions, topic, dlq)
	testkit.ProduceWithBinary(t, c.Brokers[0], topic, batch, keys)
	ledger := testkit.NewLedger(work)
	ledger.Fail = func(rec *actors.Record) error {
		if rec.Offset%5 == 0 {
			return errors.New("fails for good")
		}
		return nil
	}
	cfg := writeConfig(t, c.Brokers, topic, ledger.Endpoint(t), fmt.Sprintf(`    on_failure: dlq
    dlq_topic: %s
    retry: {max_attempts: 1}`, dlq))
	run := testkit.Start(t, nil, "run", "--config", cfg)
	failing := 0
	for _, end := range testkit.EndOffsets(t, c.Brokers, topic) {
		failing += int((end + 4) / 5) // offsets 0, 5, 10, … below end
	}
	testkit.Eventually(t, 3*time.Minute, "a third of the records handled", func() bool { return ledger.Report().Distinct >= (batch-failing)/3 })
	victim := c.Leader(t, dlq, 0)
	c.Down(t, victim, true)
	testkit.Eventually(t, time.Minute, "a new leader of the dead-letter topic's partition 0", func() bool { return c.Leader(t, dlq, 0) != victim })
	testkit.Eventually(t, 3*time.Minute, "every record that does not fail handled", func() bool { return ledger.Report().Distinct == batch-failing })
	c.Up(t, victim)
	testkit.Eventually(t, time.Minute, "every record committed", func() bool {
		var sum int64
		for _, off := range testkit.CommittedOffsets(t, c.Brokers, topic, topic) {
			sum += max(off, 0)
		}
		return sum == batch
	})
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Errorf("turbo exited %d after SIGTERM, want 0", code)
	}
	written := 0 // every record the dead-letter topic holds, twice-written ones too
	for _, end := range testkit.EndOffsets(t, c.Brokers, dlq) {
		written += int(end)
	}
	seen := map[string]int{}
	for _, m := range testkit.ReadTopic(t, c.Brokers, dlq, written, time.Minute) {
		var at string
		for _, h := range m.Headers {
			if string(h.Key) == "turbo-original-partition" || string(h.Key) == "turbo-original-offset" {
				at += string(h.Value) + "@"
			}
		}
		seen[at]++
	}
	doubled := written - len(seen)
	if len(seen) != failing || doubled != 0 {
		t.Errorf("the dead-letter topic holds %d distinct records (%d written twice) of the %d that failed; want each once", len(seen), doubled, failing)
	}
	// The ledger's order verdict does not apply: a dead-lettered record
	// never finishes in it, and the records of its key after it rightly go
	// on. Exclusivity does, and the bound on records run twice.
	rep := ledger.Report()
	if rep.Overlaps != 0 || rep.Duplicates > concurrency {
		t.Errorf("%d overlaps, %d records handled twice; want 0 and at most %d (one event × concurrency): %v", rep.Overlaps, rep.Duplicates, concurrency, rep.Examples)
	}
	t.Logf("FIGURES cluster-%s records=%d dead-lettered=%d distinct=%d written-twice=%d handled-twice=%d, node %d (leader of the dead-letter topic's partition 0) killed mid-run",
		t.Name(), batch, written, len(seen), doubled, rep.Duplicates, victim)
}
