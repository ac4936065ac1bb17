package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestReplayOverHTTP: on a real `turbo run`, with every record handled and
// committed, POST /consumers/{name}/seek
//   - to a time between two produced batches lands each partition on the
//     first record of the second batch: that batch is handled again, once,
//     and the first is not;
//   - to an offset moves one partition back: its records from there are
//     handled once more, the other partition's are not;
//   - to a partition this process does not own answers 409.
//
// Each time the group's commit ends at the partitions' ends again.
func TestReplayOverHTTP(t *testing.T) {
	t.Parallel()
	const batch = 200
	topic := testkit.TopicName("replay")
	addr := testkit.Cluster(t, 2, topic)
	brokers := []string{addr}
	testkit.ProduceWithBinary(t, addr, topic, batch, 20)
	ledger := testkit.NewLedger(0)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: replay
    group: %s
    topics: [%s]
    commit_interval: 100ms
    handler: {type: http, url: %q, timeout: 30s}
http: {listen: "127.0.0.1:0", control: true}
log: {level: info, format: json}
`, addr, topic, topic, ledger.Endpoint(t)))
	var stderr testkit.Buffer
	run, listen := testkit.StartHTTP(t, nil, &stderr, "run", "--config", cfg)
	base := "http://" + listen
	testkit.Eventually(t, time.Minute, "the first batch handled", func() bool { return ledger.Report().Distinct == batch })
	testkit.AwaitCommittedEnd(t, brokers, topic, topic, time.Minute)
	firstEnds := testkit.EndOffsets(t, brokers, topic)

	// The second batch's timestamps (the producer's clock, this machine's)
	// are after between.
	between := time.Now()
	testkit.Eventually(t, time.Second, "the clock to pass the seek's time", func() bool { return time.Since(between) > 5*time.Millisecond })
	testkit.ProduceWithBinary(t, addr, topic, batch, 20)
	testkit.Eventually(t, time.Minute, "the second batch handled", func() bool { return ledger.Report().Distinct == 2*batch })
	testkit.AwaitCommittedEnd(t, brokers, topic, topic, time.Minute)
	ends := testkit.EndOffsets(t, brokers, topic)

	expect := func(what string, want func(p int32, off int64) int) {
		t.Helper()
		awaitTimesHandled(t, ledger, topic, ends, what, want)
		testkit.AwaitCommittedEnd(t, brokers, topic, topic, time.Minute)
	}

	code, a := postJSON(t, base+"/consumers/replay/seek", fmt.Sprintf(`{"topic":%q,"time":%q}`, topic, between.UTC().Format(time.RFC3339Nano)))
	if code != http.StatusOK || !a.OK || !strings.Contains(a.Reason, "moves back") {
		t.Fatalf("seek to a time: %d %+v", code, a)
	}
	for p, end := range firstEnds {
		if want := fmt.Sprintf("%s/%d moves back from %d to %d", topic, p, ends[p], end); !strings.Contains(a.Reason, want) {
			t.Fatalf("seek to a time answered %q, want it to say %q", a.Reason, want)
		}
	}
	expect("the second batch handled twice, the first once", func(p int32, off int64) int {
		if off >= firstEnds[p] {
			return 2
		}
		return 1
	})

	back := firstEnds[0] - 10
	code, a = postJSON(t, base+"/consumers/replay/seek", fmt.Sprintf(`{"topic":%q,"partition":0,"offset":%d}`, topic, back))
	if code != http.StatusOK || !a.OK || !strings.Contains(a.Reason, fmt.Sprintf("moves back from %d to %d", ends[0], back)) {
		t.Fatalf("seek to an offset: %d %+v", code, a)
	}
	expect("partition 0 handled again from the offset", func(p int32, off int64) int {
		n := 1
		if off >= firstEnds[p] {
			n = 2
		}
		if p == 0 && off >= back {
			n++
		}
		return n
	})

	testkit.Eventually(t, time.Minute, "a seek of a partition not owned answered 409", func() bool {
		code, a := postJSON(t, base+"/consumers/replay/seek", fmt.Sprintf(`{"topic":%q,"partition":7,"offset":0}`, topic))
		return code == http.StatusConflict && strings.Contains(a.Reason, "not owned by this process")
	})
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	if rep := ledger.Report(); rep.Overlaps != 0 {
		t.Fatalf("%d overlaps of a key's records (%v)", rep.Overlaps, rep.Examples)
	}
	t.Logf("FIGURES replay broker=%s first-batch-ends=%v ends=%v", brokerKind(), firstEnds, ends)
}

// awaitTimesHandled waits until every record of topic below ends has been
// handled want(partition, offset) times, as the ledger counts.
func awaitTimesHandled(t *testing.T, ledger *testkit.Ledger, topic string, ends map[int32]int64, what string, want func(p int32, off int64) int) {
	t.Helper()
	testkit.Eventually(t, 2*time.Minute, what, func() bool {
		handled := ledger.Handled()
		for p, end := range ends {
			for off := int64(0); off < end; off++ {
				if handled[fmt.Sprintf("%s/%d@%d", topic, p, off)] != want(p, off) {
					return false
				}
			}
		}
		return true
	})
}

// postJSON posts a control command and returns the status and the answer;
// a 503 (the consumer busy restarting) is asked again.
func postJSON(t *testing.T, url, body string) (int, web.Answer) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		req, err := http.NewRequest("POST", url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var a web.Answer
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return resp.StatusCode, a
		}
		time.Sleep(50 * time.Millisecond)
	}
}
