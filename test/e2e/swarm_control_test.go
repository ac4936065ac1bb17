package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestCommandsRoutedInASwarm: `turbo swarm --nodes 3` with http.control
// takes the commands on its supervisor's listener and routes them over the
// health socket; each answer names the node that carried it out:
//   - skip of a record failing for good: done by the node that owns its
//     partition (as /status says), the rest of the records handled once;
//   - seek of a partition back to 0: done by its owner, and that partition
//     alone is handled again;
//   - pause of a partition: done on every node; its records produced
//     afterwards wait while the others' are handled, and resume lets them
//     through;
//   - retune: every node.
func TestCommandsRoutedInASwarm(t *testing.T) {
	t.Parallel()
	const records = 600
	topic := testkit.TopicName("swarm-control")
	addr := testkit.Cluster(t, 6, topic)
	brokers := []string{addr}
	testkit.ProduceWithBinary(t, addr, topic, records, 60)
	ledger := testkit.NewLedger(0)
	ledger.Fail = func(rec *actors.Record) error {
		if rec.Partition == 0 && rec.Offset == 5 {
			return errors.New("poison")
		}
		return nil
	}
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: 8
    commit_interval: 200ms
    retry: {max_attempts: 1000, initial_backoff: 200ms, max_backoff: 200ms}
    on_failure: skip
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: 8s
log: {level: info, format: json}
http: {listen: "127.0.0.1:0", control: true}
swarm:
  node_report_interval: 200ms
  node_report_timeout: 5s
  node_restart_timeout: 1s
  supervision_interval: 100ms
`, addr, topic, topic, ledger.Endpoint(t)))
	var stderr testkit.Buffer
	sw, listen := testkit.StartHTTP(t, nil, &stderr, "swarm", "--config", cfg, "--nodes", "3")
	base := "http://" + listen
	owners := func() map[int32]int {
		out := map[int32]int{}
		for _, c := range readStatus(t, listen).Consumers {
			for _, p := range c.Partitions {
				if c.Node != nil && p.Topic == topic {
					out[p.Partition] = *c.Node
				}
			}
		}
		return out
	}
	testkit.Eventually(t, 2*time.Minute, "the 6 partitions shared by the 3 nodes, and the poison record failing", func() bool {
		o := owners()
		nodes := map[int]bool{}
		for _, n := range o {
			nodes[n] = true
		}
		return len(o) == 6 && len(nodes) == 3 && ledger.Report().FailedAttempts >= 2
	})

	// Skip: the owner of partition 0 does it.
	owner := owners()[0]
	code, a := postJSON(t, base+"/consumers/orders/skip", fmt.Sprintf(`{"topic":%q,"partition":0,"offset":5}`, topic))
	if want := fmt.Sprintf("node %d: %s/0@5", owner, topic); code != http.StatusOK || !a.OK || !strings.HasPrefix(a.Reason, want) || strings.Contains(a.Reason, "; node") {
		t.Fatalf("skip: %d %+v, want 200 answered by node %d alone (%q)", code, a, owner, want)
	}
	if !ledger.Abandon(topic, 0, 5) {
		t.Fatal("the ledger never saw the poison record")
	}
	testkit.Eventually(t, 2*time.Minute, "every other record handled", func() bool { return ledger.Report().Distinct == records-1 })
	testkit.AwaitCommittedEnd(t, brokers, topic, topic, 2*time.Minute)

	// Seek: the owner of partition 1 moves it back to 0.
	ends := testkit.EndOffsets(t, brokers, topic)
	owner = owners()[1]
	code, a = postJSON(t, base+"/consumers/orders/seek", fmt.Sprintf(`{"topic":%q,"partition":1,"offset":0}`, topic))
	if want := fmt.Sprintf("node %d: %s/1 moves back from %d to 0", owner, topic, ends[1]); code != http.StatusOK || !a.OK || !strings.HasPrefix(a.Reason, want) {
		t.Fatalf("seek: %d %+v, want 200 answered by node %d (%q)", code, a, owner, want)
	}
	awaitTimesHandled(t, ledger, topic, ends, "partition 1 handled again, and nothing else", func(p int32, off int64) int {
		switch {
		case p == 1:
			return 2
		case p == 0 && off == 5: // skipped
			return 0
		}
		return 1
	})
	testkit.AwaitCommittedEnd(t, brokers, topic, topic, 2*time.Minute)

	// Pause partition 2 on every node, produce, and only it waits.
	code, a = postJSON(t, base+"/consumers/orders/pause", fmt.Sprintf(`{"topic":%q,"partition":2}`, topic))
	if code != http.StatusOK || !a.OK || !strings.Contains(a.Reason, "node 0: ") || !strings.Contains(a.Reason, "node 1: ") || !strings.Contains(a.Reason, "node 2: ") {
		t.Fatalf("pause: %d %+v, want 200 from nodes 0, 1 and 2", code, a)
	}
	before := ends[2]
	testkit.ProduceWithBinary(t, addr, topic, records, 60)
	ends = testkit.EndOffsets(t, brokers, topic)
	testkit.Eventually(t, 2*time.Minute, "every partition but 2 committed to its end", func() bool {
		c := testkit.CommittedOffsets(t, brokers, topic, topic)
		for p, end := range ends {
			if p != 2 && c[p] < end {
				return false
			}
		}
		return true
	})
	h := ledger.Handled()
	for off := before; off < ends[2]; off++ {
		if n := h[fmt.Sprintf("%s/2@%d", topic, off)]; n != 0 {
			t.Fatalf("%s/2@%d handled %d times while the partition was paused", topic, off, n)
		}
	}
	code, a = postJSON(t, base+"/consumers/orders/resume", fmt.Sprintf(`{"topic":%q,"partition":2}`, topic))
	if code != http.StatusOK || !a.OK {
		t.Fatalf("resume: %d %+v", code, a)
	}
	testkit.AwaitCommittedEnd(t, brokers, topic, topic, 2*time.Minute)

	code, a = postJSON(t, base+"/consumers/orders/retune", `{"concurrency":2}`)
	if code != http.StatusOK || !a.OK || strings.Count(a.Reason, "concurrency 2 (was 8)") != 3 {
		t.Fatalf("retune: %d %+v, want every node retuned from 8 to 2", code, a)
	}
	if code, a = postJSON(t, base+"/consumers/ghost/pause", ""); code != http.StatusNotFound {
		t.Fatalf("pause of a consumer no node runs: %d %+v, want 404", code, a)
	}
	sw.Signal(t, syscall.SIGTERM)
	if code := sw.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo swarm exited %d", code)
	}
	rep := ledger.Report()
	if rep.Distinct != 2*records-1 || rep.Overlaps != 0 {
		t.Fatalf("%d distinct records (want %d), %d overlaps (%v)", rep.Distinct, 2*records-1, rep.Overlaps, rep.Examples)
	}
	t.Logf("FIGURES swarm control broker=%s nodes=3 skip+seek+pause+retune routed; partition 2 held %d records while paused", brokerKind(), ends[2]-before)
}
