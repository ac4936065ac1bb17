package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/test/testkit"
)

// topics: ["/regex/"]: the topics matching when turbo starts are consumed,
// a matching topic created later is consumed within metadata_refresh (plus
// the group's rejoin), and neither the dead-letter topic, an internal
// ("__") topic nor one --exclude-topics names is ever consumed, though
// each matches the pattern.
func TestTopicPatternsFollowNewTopics(t *testing.T) {
	t.Parallel()
	const records, refresh = 100, 500 * time.Millisecond
	base := testkit.TopicName("pattern")
	early, late, excluded := base+".early", base+".late", base+".excluded"
	dlq, internal := base+".dlq", "__"+base+".internal"
	addr := testkit.Cluster(t, 2, early, dlq)
	testkit.CreateTopics(t, addr, 2, internal)
	for _, topic := range []string{early, dlq, internal} {
		testkit.ProduceWithBinary(t, addr, topic, records, 10)
	}
	ledger := testkit.NewLedger(0)
	// Offsets start again in every topic: a key's order is judged within
	// each topic (the ledger's default judges a key across all).
	ledger.UnitOf = func(rec *actors.Record) string { return rec.Topic + "/" + string(rec.Key) }
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: pattern
    group: %s
    topics: ["/.*%s.*/"]
    metadata_refresh: %s
    on_failure: dlq
    dlq_topic: %s
    commit_interval: 100ms
    handler: {type: http, url: %q, timeout: 30s}
log: {level: info, format: json}
`, addr, base, regexp.QuoteMeta(base), refresh, dlq, ledger.Endpoint(t)))
	run := testkit.Start(t, nil, "run", "--config", cfg, "--exclude-topics", excluded)

	byTopic := func() map[string]int {
		out := map[string]int{}
		for name := range ledger.Handled() {
			topic, _, _ := strings.Cut(name, "/")
			out[topic]++
		}
		return out
	}
	testkit.Eventually(t, time.Minute, "the records of the topic that matched at start", func() bool { return byTopic()[early] == records })

	testkit.CreateTopics(t, addr, 2, late, excluded)
	created := time.Now()
	testkit.ProduceWithBinary(t, addr, late, records, 10)
	testkit.ProduceWithBinary(t, addr, excluded, records, 10)
	testkit.Eventually(t, 30*time.Second, "the records of the topic created after the start", func() bool { return byTopic()[late] == records })
	pickedUp := time.Since(created)

	// Three more refreshes: still nothing from the topics no pattern may match.
	testkit.Holds(t, 3*refresh, "nothing consumed from the dead-letter, internal or excluded topics", func() error {
		got := byTopic()
		for _, topic := range []string{dlq, internal, excluded} {
			if got[topic] != 0 {
				return fmt.Errorf("%d records of %s consumed", got[topic], topic)
			}
		}
		return nil
	})
	rep := ledger.Report()
	if rep.Duplicates != 0 || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Fatalf("%d duplicates, %d overlaps, %d order violations (%v)", rep.Duplicates, rep.Overlaps, rep.OrderViolations, rep.Examples)
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	t.Logf("FIGURES topic-pattern broker=%s metadata_refresh=%s new-topic-consumed-in=%s (from its creation to its last record handled)",
		brokerKind(), refresh, pickedUp.Round(time.Millisecond))
}

// New matching topics while records run: each changes the subscription,
// and the member joins its group again with the new topics. That is a
// handover, like any rebalance — running records finish, what finished is
// committed — never a lost session that drops every partition (which ran
// records twice: 31 duplicates in 10,181 with a new topic every 0.3 s).
func TestANewMatchingTopicIsAHandoverNotALoss(t *testing.T) {
	t.Parallel()
	const records, extra, newTopics, refresh = 2000, 50, 4, 500 * time.Millisecond
	base := testkit.TopicName("resub")
	addr := testkit.Cluster(t, 2, base+".a")
	testkit.ProduceWithBinary(t, addr, base+".a", records, 50)
	ledger := testkit.NewLedger(10 * time.Millisecond)
	ledger.UnitOf = func(rec *actors.Record) string { return rec.Topic + "/" + string(rec.Key) }
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: resub
    group: %s
    topics: ["/%s\\..*/"]
    metadata_refresh: %s
    concurrency: 8
    commit_interval: 100ms
    handler: {type: http, url: %q, timeout: 30s}
log: {level: info, format: json}
`, addr, base, regexp.QuoteMeta(base), refresh, ledger.Endpoint(t)))
	var stderr testkit.Buffer
	run := testkit.StartWith(t, nil, &stderr, "run", "--config", cfg)
	testkit.Eventually(t, time.Minute, "the first records handled", func() bool { return ledger.Report().Distinct > 0 })
	for i := range newTopics {
		topic := fmt.Sprintf("%s.new%d", base, i)
		testkit.CreateTopics(t, addr, 2, topic)
		testkit.ProduceWithBinary(t, addr, topic, extra, 10)
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("a record of %s handled (the subscription took it in)", topic), func() bool {
			for name := range ledger.Handled() {
				if strings.HasPrefix(name, topic+"/") {
					return true
				}
			}
			return false
		})
	}
	midway := ledger.Report().Distinct
	testkit.Eventually(t, 2*time.Minute, "every record handled", func() bool { return ledger.Report().Distinct == records+newTopics*extra })
	if midway >= records {
		t.Errorf("the base topic was all handled (%d) before the last subscription change: nothing ran across the changes", midway)
	}
	rep := ledger.Report()
	lost := strings.Count(stderr.String(), "consumer group session lost")
	if n := strings.Count(stderr.String(), "the topics matching the patterns changed"); n == 0 {
		t.Error("no subscription change was logged: the test did not test what it is about")
	}
	if lost != 0 || rep.Duplicates != 0 || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Errorf("%d sessions lost, %d duplicates, %d overlaps, %d order violations across %d subscription changes; want 0 (%v)",
			lost, rep.Duplicates, rep.Overlaps, rep.OrderViolations, newTopics, rep.Examples)
		for line := range strings.Lines(stderr.String()) {
			if strings.Contains(line, "session lost") || strings.Contains(line, "matching the patterns changed") || strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) || strings.Contains(line, "revoked") || strings.Contains(line, "released") {
				t.Log(strings.TrimSpace(line))
			}
		}
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	t.Logf("FIGURES resubscribe broker=%s records=%d changes=%d sessions_lost=%d duplicates=%d (handled when the last change came: %d)",
		brokerKind(), rep.Distinct, newTopics, lost, rep.Duplicates, midway)
}

// max_partitions: a pattern over it when turbo starts ends the run at once
// with exit 1 and one line naming the count and the key; under it, a topic
// a pattern matches later that would take it over is left out — the
// consumer goes on with what it has, and an error names the topic.
func TestMaxPartitionsBoundsAPattern(t *testing.T) {
	t.Parallel()
	base := testkit.TopicName("breadth")
	addr := testkit.Cluster(t, 4, base+".a", base+".b")
	testkit.ProduceWithBinary(t, addr, base+".a", 100, 10)
	testkit.ProduceWithBinary(t, addr, base+".b", 100, 10) // the embedded broker makes a topic when it is first written
	config := func(max int, endpoint string) string {
		return testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: breadth
    group: %s-%d
    topics: ["/%s\\..*/"]
    metadata_refresh: 200ms
    max_partitions: %d
    handler: {type: http, url: %q, timeout: 30s}
log: {level: info, format: json}
`, addr, base, max, regexp.QuoteMeta(base), max, endpoint))
	}

	// 8 partitions match; the cap is 6.
	var stderr testkit.Buffer
	began := time.Now()
	refused := testkit.StartWith(t, nil, &stderr, "run", "--config", config(6, "http://127.0.0.1:9/unused"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the refused run's output:\n%s", stderr.String())
		}
	})
	if code := refused.Wait(t, time.Minute); code != 1 {
		t.Errorf("a subscription of 8 partitions under max_partitions 6: exit %d, want 1", code)
	}
	if want := "the subscription covers 8 partitions of 2 topics, more than max_partitions 6"; !strings.Contains(stderr.String(), want) {
		t.Errorf("the output does not say %q:\n%s", want, stderr.String())
	}
	t.Logf("FIGURES max-partitions refused after %s", time.Since(began).Round(time.Millisecond))

	// 8 partitions match, the cap is 10: a third topic of 4 is left out.
	ledger := testkit.NewLedger(0)
	ledger.UnitOf = func(rec *actors.Record) string { return rec.Topic + "/" + string(rec.Key) }
	var runErr testkit.Buffer
	run := testkit.StartWith(t, nil, &runErr, "run", "--config", config(10, ledger.Endpoint(t)))
	testkit.Eventually(t, time.Minute, "the two topics' records", func() bool { return ledger.Report().Distinct == 200 })
	testkit.CreateTopics(t, addr, 4, base+".c")
	testkit.ProduceWithBinary(t, addr, base+".c", 50, 10)
	testkit.Eventually(t, 30*time.Second, "an error naming the topic left out", func() bool {
		return strings.Contains(runErr.String(), "cover more partitions than max_partitions") && strings.Contains(runErr.String(), base+".c")
	})
	testkit.Holds(t, time.Second, "nothing of the topic left out consumed", func() error {
		for name := range ledger.Handled() {
			if strings.HasPrefix(name, base+".c/") {
				return fmt.Errorf("%s was consumed", name)
			}
		}
		return nil
	})
	if n := strings.Count(runErr.String(), "cover more partitions than max_partitions"); n != 1 {
		t.Errorf("%d error lines for one refused set over several refreshes, want 1", n)
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
}
