//go:build kafka

package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// broker is a Kafka broker of this test's own (kafka.sh), which it may
// restart without disturbing the tests that share `make test-kafka`'s.
type broker struct {
	t     *testing.T
	state string
	addr  string
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	b := &broker{t: t, state: t.TempDir()}
	b.addr = b.script("start")
	t.Cleanup(func() { b.script("stop") })
	return b
}

// script runs kafka.sh with args and the broker's state dir, and returns
// what it printed on stdout (the address, for start and restart).
func (b *broker) script(cmd string, args ...string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	c := exec.CommandContext(ctx, "bash", append([]string{"kafka.sh", cmd, b.state}, args...)...)
	// A JVM started while the shared brokers start beside it, on two
	// cores, took over a minute to answer (kafka.sh waits 60 s by default);
	// within the 3 minutes above.
	c.Env = append(os.Environ(), "TURBO_KAFKA_START_TIMEOUT=150")
	c.Stdout, c.Stderr = &out, &errs
	if err := c.Run(); err != nil {
		b.t.Fatalf("kafka.sh %s: %v\n%s", cmd, err, errs.String())
	}
	b.t.Logf("kafka.sh %s: %s", cmd, strings.TrimSpace(errs.String()))
	return strings.TrimSpace(out.String())
}

// A broker restart mid-run, graceful and then a crash, with records in
// flight: turbo reconnects by itself and carries on with the records
// produced after each restart; nothing is lost, per-key order and
// exclusivity hold, and the run ends with everything committed.
func TestBrokerRestartMidRun(t *testing.T) {
	t.Parallel() // on a broker of its own
	const batch, keys, concurrency = 3000, 200, 16
	b := startBroker(t)
	topic := testkit.TopicName("restart")
	testkit.CreateTopics(t, b.addr, 8, topic)
	testkit.ProduceWithBinary(t, b.addr, topic, batch, keys)

	ledger := testkit.NewLedger(20 * time.Millisecond) // a batch takes 16 runners about 4 s
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: %d
    commit_interval: 200ms
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: 10s
log: {level: warn, format: json}
`, b.addr, topic, topic, concurrency, ledger.Endpoint(t)))
	run := testkit.Start(t, nil, "run", "--config", cfg)

	produced := batch
	var resumed []time.Duration
	restarts := []bool{false, true} // SIGTERM, then SIGKILL
	for _, kill := range restarts {
		testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("a third of the %d records handled", produced), func() bool {
			return ledger.Report().Distinct >= produced-batch*2/3
		})
		var args []string
		if kill {
			args = append(args, "--kill")
		}
		began := time.Now()
		b.script("restart", args...)
		// Records that exist only after the restart show that turbo
		// reconnected, not merely drained what it had fetched before.
		testkit.ProduceWithBinary(t, b.addr, topic, batch, keys)
		produced += batch
		testkit.Eventually(t, 2*time.Minute, "records produced after the restart handled", func() bool {
			return ledger.Report().Distinct > produced-batch
		})
		resumed = append(resumed, time.Since(began))
	}
	testkit.Eventually(t, 3*time.Minute, "every record handled", func() bool { return ledger.Report().Distinct == produced })
	testkit.Eventually(t, time.Minute, "every record committed", func() bool {
		var sum int64
		for _, off := range testkit.CommittedOffsets(t, []string{b.addr}, topic, topic) {
			sum += max(off, 0)
		}
		return sum == int64(produced)
	})
	if err := run.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := run.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("turbo run exited %d after SIGTERM, want 0", code)
	}
	rep := ledger.Report()
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	// Records finished during an outage cannot be committed; a member skips
	// what it had finished when a partition comes back (releasedAt), also
	// when no commit of the partition had landed at all before the broker
	// went away. Before that case was handled, 3 of 6 runs under CPU load
	// ran one partition again from offset 0 (136 to 360 records; likely the
	// cause of the 435 once seen under the full suite). What may still run
	// twice is at most what was running at a restart: concurrency records
	// each.
	if limit := len(restarts) * concurrency; rep.Duplicates > limit {
		t.Errorf("%d records handled twice, want at most %d (%d restarts × concurrency %d): %s",
			rep.Duplicates, limit, len(restarts), concurrency, duplicateRanges(ledger.Handled()))
	}
	t.Logf("duplicates by partition: %s", duplicateRanges(ledger.Handled()))
	t.Logf("FIGURES broker-restart records=%d lost=0 duplicates=%d (%.2f%%) overlaps=%d order_violations=%d; restart (SIGTERM, then SIGKILL) to new records handled: %v",
		rep.Distinct, rep.Duplicates, 100*float64(rep.Duplicates)/float64(produced), rep.Overlaps, rep.OrderViolations, resumed)
}

// duplicateRanges describes the records handled more than once, per
// partition, as offset ranges ("p3: 120-135 (16)").
func duplicateRanges(handled map[string]int) string {
	byPart := map[string][]int64{}
	for id, n := range handled {
		if n < 2 {
			continue
		}
		at := strings.LastIndexByte(id, '@')
		off, err := strconv.ParseInt(id[at+1:], 10, 64)
		if err != nil {
			continue
		}
		byPart[id[:at]] = append(byPart[id[:at]], off)
	}
	parts := slices.Sorted(maps.Keys(byPart))
	var b strings.Builder
	for _, p := range parts {
		offs := byPart[p]
		slices.Sort(offs)
		fmt.Fprintf(&b, "%s:", p)
		for i := 0; i < len(offs); {
			j := i
			for j+1 < len(offs) && offs[j+1] == offs[j]+1 {
				j++
			}
			if i == j {
				fmt.Fprintf(&b, " %d", offs[i])
			} else {
				fmt.Fprintf(&b, " %d-%d", offs[i], offs[j])
			}
			i = j + 1
		}
		fmt.Fprintf(&b, " (%d); ", len(offs))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// A broker killed (SIGKILL) and restarted mid-run while turbo writes
// outputs exactly once: transactions under way when the
// broker goes away are aborted, turbo reconnects and writes them again, and
// a read_committed reader of the output topic finds every input's outputs
// once, in key order.
func TestBrokerRestartExactlyOnce(t *testing.T) {
	t.Parallel() // on a broker of its own
	const batch, keys = 3000, 200
	b := startBroker(t)
	in, out := testkit.TopicName("restart-eos-in"), testkit.TopicName("restart-eos-out")
	testkit.CreateTopics(t, b.addr, 8, in, out)
	testkit.ProduceWithBinary(t, b.addr, in, batch, keys)
	var handled atomic.Int64
	srv := testkit.OutputEndpoint(&handled, 5*time.Millisecond)
	defer srv.Close()
	// At info level: should the run stall after the crash, its log says
	// where (connected, partitions assigned, the status every 10 s).
	cfg := testkit.PipelineConfig(t, b.addr, in, in, srv.URL, out, "exactly_once: true", 16,
		"shutdown_timeout: 10s\nlog: {level: info, format: json}")
	run := testkit.StartBinary(t, testkit.TransactionalBinary(t, config.KafkaClient(os.Getenv("TURBO_KAFKA_CLIENT"))), nil, nil, "run", "--config", cfg)
	produced := int64(batch)
	testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("a third of the %d records handled", produced), func() bool {
		return handled.Load() >= produced/3
	})
	b.script("restart", "--kill") // a crash: transactions under way are left open
	testkit.ProduceWithBinary(t, b.addr, in, batch, keys)
	produced += batch
	testkit.Eventually(t, 3*time.Minute, "every record committed", func() bool {
		var sum int64
		for _, off := range testkit.CommittedOffsets(t, []string{b.addr}, in, in) {
			sum += max(off, 0)
		}
		return sum == produced
	})
	if err := run.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := run.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("turbo run exited %d after SIGTERM, want 0", code)
	}
	want := testkit.ExpectedOutputs(t, []string{b.addr}, in, func(off int64) int { return int(off % 3) })
	v := testkit.JudgeOutputs(t, want, testkit.ReadCommitted(t, []string{b.addr}, out, time.Minute))
	t.Logf("FIGURES broker-restart exactly once: %s; %d records handled for %d produced", v, handled.Load(), produced)
	if v.Missing != 0 || v.Duplicated != 0 || v.Disorder != 0 || v.Foreign != 0 {
		t.Errorf("exactly once across broker restarts: %s", v)
	}
}
