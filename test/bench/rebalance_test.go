package bench

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// BenchmarkRebalanceCost: what a member joining and then leaving costs the
// records in flight, under the classic group protocol (cooperative-sticky,
// on both Kafka sides) and the consumer protocol (KIP-848, franz-go side).
// 16 partitions, 1,000 keys, key ordering, an http handler to an endpoint
// taking 10 ms that notes when it answers, concurrency 16 per member.
// Member A starts; once a quarter of the records are answered member B
// joins; once half are, B stops (SIGTERM, a graceful leave); the run ends
// when the group has committed everything. Reported: the longest time no
// record was answered from B's start to the end of B's leave plus a second
// (the group's stall), and the wall time. Brokers before Kafka 4.0 have no
// consumer protocol: its row says so.
func BenchmarkRebalanceCost(b *testing.B) {
	const work, conc, parts = 10 * time.Millisecond, 16, 16
	n := 16_000
	if scaleName() == "quick" {
		n = 8_000
	}
	bro := brokers(b)
	j := newTopicWith(b, bro, "rebalance", topicSpec{records: n, partitions: parts, keyOf: uniformKeys(1000)})
	j.concurrency, j.work = conc, work
	scenario := fmt.Sprintf("rebalance cost: %s records, 16 partitions, http handler of 10 ms, concurrency %d a member; B joins at a quarter, leaves at half",
		thousands(float64(n)), conc)
	variants := []struct {
		name string
		env  []string
	}{
		{"turbo key, classic protocol", nil},
		{"turbo franz-go key, classic protocol", []string{"TURBO_KAFKA_CLIENT=franz-go"}},
		{"turbo franz-go key, consumer protocol", []string{"TURBO_KAFKA_CLIENT=franz-go", "TURBO_KAFKA_GROUP_PROTOCOL=consumer"}},
	}
	for range b.N {
		stalls := map[string]time.Duration{}
		for _, v := range variants {
			if !selected(v.name) {
				record(result{Scenario: scenario, Peer: v.name, Note: "n/a (not selected by TURBO_BENCH_PEERS)"})
				continue
			}
			if strings.Contains(v.name, "consumer protocol") && strings.HasPrefix(os.Getenv("TURBO_TEST_KAFKA_VERSION"), "3.") {
				record(result{Scenario: scenario, Peer: v.name, Note: "n/a (Kafka " + os.Getenv("TURBO_TEST_KAFKA_VERSION") + " has no consumer protocol)"})
				continue
			}
			stall, wall := rebalanceRun(b, j, v.name, v.env)
			stalls[v.name] = stall
			record(result{Scenario: scenario, Peer: fmt.Sprintf("%s: longest stall %s", v.name, stall.Round(time.Millisecond)),
				Records: int64(n), Seconds: wall.Seconds(), PerSec: float64(n) / wall.Seconds()})
		}
		classic, consumer := stalls[variants[1].name], stalls[variants[2].name]
		judge("rebalance: the consumer protocol's longest stall ≤ the classic protocol's (franz-go side)", classic > 0 && consumer > 0,
			consumer <= classic, "%s against %s", consumer.Round(time.Millisecond), classic.Round(time.Millisecond))
	}
}

// longestGap is the longest time between consecutive answers (or from
// from to the first) within from..to, of a downstream that notes them.
func (d *downstream) longestGap(from, to time.Time) time.Duration {
	d.mu.Lock()
	at := slices.Clone(d.answered)
	d.mu.Unlock()
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	var gap time.Duration
	last := from
	for _, t := range at {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		gap = max(gap, t.Sub(last))
		last = t
	}
	return max(gap, to.Sub(last))
}

// rebalanceRun runs one variant: A, then B joining and leaving, until the
// group has committed the topic; it returns the longest stall around B and
// the wall time.
func rebalanceRun(b *testing.B, j job, name string, env []string) (stall, wall time.Duration) {
	b.Helper()
	ep := &downstream{work: j.work, noteAnswers: true}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	j.url = srv.URL
	group := fmt.Sprintf("bench-rebalance-%d", time.Now().UnixNano())
	cfg := turboConfig(b, j, group, config.OrderingKey, j.concurrency)
	w := watchGroup(b, j.brokers, group, j.topic, j.ends)
	defer w.close()
	start := func(member string) *exec.Cmd {
		cmd := exec.Command(testkit.PerfBinary(b), "run", "--config", cfg)
		cmd.Env = append(os.Environ(), env...)
		logf := peerLog(b, name+"-"+member)
		b.Cleanup(func() { logf.Close() })
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			b.Fatalf("%s: starting member %s: %v", name, member, err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	await := func(what string, limit time.Duration, ok func() bool) {
		deadline := time.Now().Add(limit)
		for !ok() {
			if time.Now().After(deadline) {
				b.Fatalf("%s: %s not within %s", name, what, limit)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	n := j.records
	began := time.Now()
	a := start("a")
	await("a quarter of the records answered", 2*time.Minute, func() bool { return int(ep.requests.Load()) >= n/4 })
	joined := time.Now()
	bm := start("b")
	await("half of the records answered", 2*time.Minute, func() bool { return int(ep.requests.Load()) >= n/2 })
	_ = bm.Process.Signal(syscall.SIGTERM)
	exited := make(chan struct{})
	go func() { _ = bm.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(time.Minute):
		b.Fatalf("%s: member b still running a minute after SIGTERM", name)
	}
	left := time.Now()
	await("every record committed", 5*time.Minute, func() bool { _, all := w.committed(b); return all })
	wall = time.Since(began)
	_ = a.Process.Signal(syscall.SIGTERM)
	end := left.Add(time.Second)
	if now := time.Now(); now.Before(end) {
		end = now
	}
	stall = ep.longestGap(joined, end)
	return stall, wall
}
