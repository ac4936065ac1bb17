package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// SIGKILL in the middle of a pipeline that writes outputs: turbo run with
// an http handler answering each record (partition p, offset o) with
// o%3 outputs "p/o/i" keyed like it, killed with SIGKILL once transactions
// (or commits) have gone through and records are in flight, then run again
// to the end. Read committed, the output topic holds every output exactly
// once with output.exactly_once; at least once, the same crash writes
// some twice (which shows the ledger can see a duplicate).
func TestKill9ExactlyOnceOutputs(t *testing.T) {
	t.Parallel()
	in, atLeast, exactly := testkit.TopicName("eos-kill-in"), testkit.TopicName("eos-kill-alo"), testkit.TopicName("eos-kill-eos")
	addr := testkit.Cluster(t, 4, in, atLeast, exactly)
	testkit.ProduceWithBinary(t, addr, in, 3000, 100)
	t.Run("exactly-once", func(t *testing.T) {
		t.Parallel()
		v := kill9Outputs(t, addr, in, exactly, true)
		t.Logf("FIGURES kill-9 exactly once: %s", v)
		if v.Missing != 0 || v.Duplicated != 0 || v.Disorder != 0 || v.Foreign != 0 {
			t.Errorf("exactly once across SIGKILL: %s", v)
		}
	})
	t.Run("at-least-once", func(t *testing.T) {
		t.Parallel()
		v := kill9Outputs(t, addr, in, atLeast, false)
		t.Logf("FIGURES kill-9 at least once: %s", v)
		if v.Missing != 0 || v.Foreign != 0 {
			t.Errorf("at least once across SIGKILL: %s", v)
		}
		if v.Duplicated == 0 {
			t.Errorf("no output written twice at least once across SIGKILL: the crash did not land between outputs and their commit")
		}
	})
}

// kill9Outputs runs the pipeline from in to out, kills it, runs it again to
// the end, and judges out read committed.
func kill9Outputs(t *testing.T, addr, in, out string, exactlyOnce bool) testkit.OutputVerdict {
	t.Helper()
	var handled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		time.Sleep(time.Millisecond) // records stay in flight when the kill lands
		key, _ := base64.StdEncoding.DecodeString(r.Header.Get("Kafka-Key"))
		p, o := r.Header.Get("Kafka-Partition"), r.Header.Get("Kafka-Offset")
		off, _ := strconv.ParseInt(o, 10, 64)
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i := range off % 3 {
			line, _ := json.Marshal(map[string]string{"key": string(key), "value": fmt.Sprintf("%s/%s/%d", p, o, i)})
			_, _ = w.Write(append(line, '\n'))
		}
	}))
	defer srv.Close()
	group := "g-" + out
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: pipe
    group: %s
    topics: [%s]
    ordering: key
    concurrency: 32
    commit_interval: 200ms
    handler: {type: http, url: %q, timeout: 30s, response: outputs, encoding: utf8}
    output: {topic: %s, exactly_once: %t}
shutdown_timeout: 5s
log: {level: warn, format: json}
`, addr, group, in, srv.URL, out, exactlyOnce))
	run := testkit.Start(t, nil, "run", "--config", cfg)
	// Kill once a third has been handled and something is committed.
	testkit.Eventually(t, 60*time.Second, "the first run to handle 1,000 records and commit some", func() bool {
		if handled.Load() < 1000 {
			return false
		}
		var sum int64
		for _, off := range testkit.CommittedOffsets(t, []string{addr}, group, in) {
			sum += max(off, 0)
		}
		return sum > 0
	})
	if err := run.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	run.Wait(t, 10*time.Second)
	first := handled.Load()
	again := testkit.Start(t, nil, "run", "--config", cfg, "--exit-on-idle")
	if code := again.Wait(t, 120*time.Second); code != 0 {
		t.Fatalf("the restarted turbo exited %d", code)
	}
	t.Logf("handled %d records before SIGKILL, %d in all", first, handled.Load())
	want := testkit.ExpectedOutputs(t, []string{addr}, in, func(off int64) int { return int(off % 3) })
	return testkit.JudgeOutputs(t, want, testkit.ReadCommitted(t, []string{addr}, out, 60*time.Second))
}
