package chaos

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

const (
	rebPartitions  = 8
	rebBacklog     = 4000 // records waiting when member A starts (about what still waits at each handover, thousands, far above the rebRate the test asks for: the members barely outrun the trickle)
	rebKeys        = 300
	rebRate        = 200 // records per second on top, until the kill
	rebWork        = 5 * time.Millisecond
	rebConcurrency = 4
	rebStepWait    = time.Minute // bounds each step (joins take a rebalance; the kill a session timeout)
	rebDrain       = 2 * time.Minute
)

// TestRebalancesUnderLoad takes one group through every kind of handover
// while it has a backlog: member A alone; B joins; C joins; B leaves
// (SIGTERM); C is killed (SIGKILL) in the middle of deliveries, and A takes
// its partitions after C's session times out. Per-key order holds across
// every handover, nothing is lost, and the duplicates (all from the kill)
// are reported.
func TestRebalancesUnderLoad(t *testing.T) {
	t.Parallel() // its own topic, group and members
	testkit.EachSide(t, rebalancesUnderLoad)
}

func rebalancesUnderLoad(t *testing.T, _ testkit.Side) {
	began := time.Now()
	topic, group := testkit.TopicName("rebalance"), testkit.TopicName("rebalance-group")
	brokers := []string{testkit.Cluster(t, rebPartitions, topic)} // on the embedded broker, `turbo dev` (a plain build)
	ledger := testkit.NewLedgerWith(testkit.LedgerOptions{Work: rebWork})
	srv := httptest.NewServer(ledger)
	t.Cleanup(srv.Close)
	ms := newMembers(t, groupSpec{brokers: brokers, group: group, topic: topic, url: srv.URL, concurrency: rebConcurrency})

	backlog := ledger.Produce(t, brokers, topic, testkit.ProducerOptions{Keys: rebKeys, Count: rebBacklog, Seed: 1})
	select {
	case <-backlog.Done():
	case <-time.After(2 * time.Minute):
		t.Fatalf("the backlog of %d records was not acknowledged within 2 minutes: %+v", rebBacklog, ledger.Progress())
	}
	if err := backlog.Err(); err != nil {
		t.Fatal(err)
	}
	trickle := ledger.Produce(t, brokers, topic, testkit.ProducerOptions{Keys: rebKeys, Rate: rebRate, Seed: 2})

	// loaded fails the test unless records are still waiting: each handover
	// must happen under load.
	loaded := func(step string) int {
		t.Helper()
		p := ledger.Progress()
		waiting := p.Produced - p.Finished
		if waiting < rebRate {
			t.Fatalf("%s: only %d records waiting: the handover would not be under load", step, waiting)
		}
		t.Logf("%s: %d records waiting, %d finished, partitions held: %s", step, waiting, p.Finished, ms.holding())
		return waiting
	}
	heldBy := func(mm ...*member) int {
		n := 0
		for _, m := range mm {
			n += ms.held(m)
		}
		return n
	}

	a := ms.start()
	ms.await(ledger, rebStepWait, "A holding all 8 partitions and 10% of the backlog finished", func(p testkit.Progress) bool {
		return ms.held(a) == rebPartitions && p.Finished >= rebBacklog/10
	})
	atJoinB := loaded("B joins")
	b := ms.start()
	ms.await(ledger, rebStepWait, "B holding partitions and finishing records, A and B holding all 8", func(p testkit.Progress) bool {
		return ms.held(b) > 0 && p.Done[b.name] >= 100 && heldBy(a, b) == rebPartitions
	})
	atJoinC := loaded("C joins")
	c := ms.start()
	ms.await(ledger, rebStepWait, "C holding partitions and finishing records, A, B and C holding all 8", func(p testkit.Progress) bool {
		return ms.held(c) > 0 && p.Done[c.name] >= 100 && heldBy(a, b, c) == rebPartitions
	})
	atLeaveB := loaded("B leaves")
	ms.stop(b)
	doneA, doneC := ledger.Progress().Done[a.name], ledger.Progress().Done[c.name]
	ms.await(ledger, rebStepWait, "A and C holding all 8 partitions and both finishing more records", func(p testkit.Progress) bool {
		return heldBy(a, c) == rebPartitions && p.Done[a.name] >= doneA+100 && p.Done[c.name] >= doneC+100
	})
	ms.await(ledger, rebStepWait, "C in the middle of a delivery", func(p testkit.Progress) bool { return p.Running[c.name] > 0 })
	atKillC := loaded("C is killed")
	ms.kill(c)
	ms.await(ledger, rebStepWait, "A holding all 8 partitions again (C's session timed out)", func(testkit.Progress) bool {
		return ms.held(a) == rebPartitions
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := trickle.Stop(ctx); err != nil {
		t.Fatalf("stopping the producer: %v", err)
	}
	drainStarted := time.Now()
	drainErr := ms.drain(ledger, brokers, rebPartitions, rebDrain)
	drained := time.Since(drainStarted)
	if drainErr == nil {
		ms.stop(a)
		// A graceful stop must not move a commit back.
		checkCommittedToTheEnd(t, brokers, group, topic)
	}

	rep := ledger.Report()
	assigned, released, failures := ms.counts()
	line := fmt.Sprintf("REBALANCE: records=%d keys=%d waiting_at: join_b=%d join_c=%d leave_b=%d kill_c=%d partition_moves=%d (assigned=%d released=%d) tree_failures=%d "+
		"lost=%d order_violations=%d overlaps=%d duplicates=%d (%.2f%%) delivered_by=%v broker=%s drain=%s total=%s",
		rep.Produced, rebKeys, atJoinB, atJoinC, atLeaveB, atKillC, assigned-rebPartitions, assigned, released, failures,
		rep.Lost, rep.OrderViolations, rep.Overlaps, rep.Duplicates, rep.DuplicatePct, rep.ByLabel,
		brokerKind(), drained.Round(time.Millisecond), time.Since(began).Round(time.Second))
	t.Log(line)
	fmt.Println(line)
	if drainErr != nil {
		t.Errorf("draining: %v", drainErr)
	}
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	if rep.NotProduced != 0 {
		t.Errorf("%d records were not acknowledged by the broker", rep.NotProduced)
	}
}
