//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// A configuration without a handler section — a file cut short by an
// editor, a config tool or kubectl cp — is refused: at start-up (exit 2,
// naming consumers[0].handler) and on SIGHUP (the running configuration
// goes on, nothing is lost while the file is cut); a reload that changes
// the handler type says so at warn level.
func TestAConfigurationCutShortIsRefused(t *testing.T) {
	t.Parallel()
	const records, keys = 3_000, 100
	topic := testkit.TopicName("cutshort")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, keys)
	ledger := testkit.NewLedger(2 * time.Millisecond)
	url := ledger.Endpoint(t)
	whole := reloadConfig(addr, topic, url, 4, false)
	cut := whole[:strings.Index(whole, "    handler:")]
	if strings.Contains(cut, "handler") {
		t.Fatalf("the cut file still has a handler:\n%s", cut)
	}

	// At start-up.
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := exec.CommandContext(ctx, testkit.Binary(t), "run", "--config", testkit.WriteConfig(t, cut))
	check.Stdout, check.Stderr = &out, &out
	err := check.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out.String(), "consumers[0].handler") {
		t.Fatalf("turbo run with the cut file: %v (within %s), want exit 2 naming consumers[0].handler:\n%.2000s", err, time.Minute, out.String())
	}

	// On SIGHUP, while records flow: the cut file is refused, the whole
	// one goes on, and every record reaches the handler.
	path := testkit.WriteConfig(t, whole)
	var stderr testkit.Buffer
	run, live := testkit.StartHTTP(t, nil, &stderr, "run", "--config", path)
	testkit.Eventually(t, time.Minute, "a tenth of the records handled", func() bool { return ledger.Report().Distinct >= records/10 })
	hupRefused(t, run, live, path, cut, "consumers[0].handler")
	if err := os.WriteFile(path, []byte(whole), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Minute, "every record handled", func() bool { return ledger.Report().Distinct == records })
	rep := ledger.Report()
	if rep.Distinct != records || rep.Lost != 0 {
		t.Fatalf("%d of %d records reached the handler, %d lost", rep.Distinct, records, rep.Lost)
	}

	// A reload to another handler type is applied, and said at warn level.
	if err := os.WriteFile(path, []byte(strings.Replace(whole, fmt.Sprintf("{type: http, url: %q, timeout: 30s}", url), "{type: noop}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	run.Signal(t, syscall.SIGHUP)
	testkit.Eventually(t, 30*time.Second, "/status to show the reload to noop", func() bool {
		s := getStatus(t, live)
		return s.Config != nil && s.Config.Reloads == 1
	})
	warned := regexp.MustCompile(`"level":"warn".*"consumer":"orders".*"old":"http".*"new":"noop".*handler type changes`)
	if !warned.MatchString(stderr.String()) {
		t.Fatalf("no warning of the handler type's change in the log:\n%s", stderr.String())
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d after SIGTERM", code)
	}
	for p, off := range testkit.CommittedOffsets(t, []string{addr}, topic, topic) {
		if off < 0 {
			t.Fatalf("partition %d: nothing committed", p)
		}
	}
	t.Logf("FIGURES cut-config broker=%s records=%d handled=%d lost=%d", brokerKind(), records, rep.Distinct, rep.Lost)
}

// --exit-on-idle when one consumer's topic pattern matches another
// consumer's dead-letter topic, which holds records: that topic is never
// read (a pattern never matches a dead-letter topic), so it is not waited
// for either; turbo run and turbo swarm exit 0 once the rest is committed.
func TestExitOnIdleLeavesOutDeadLetterTopicsAPatternMatches(t *testing.T) {
	t.Parallel()
	const records = 50
	base := testkit.TopicName("idledlq")
	matched, dlq, other := base+".in", base+".dlq", base+"-b"
	addr := testkit.Cluster(t, 2, matched, dlq, other)
	for _, topic := range []string{matched, dlq, other} {
		testkit.ProduceWithBinary(t, addr, topic, records, 10)
	}
	config := func(groups string) string {
		return testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: a
    group: %s-a
    topics: ["/%s\\..*/"]
    commit_interval: 100ms
    handler: {type: noop}
  - name: b
    group: %s-b
    topics: [%s]
    on_failure: dlq
    dlq_topic: %s
    commit_interval: 100ms
    handler: {type: noop}
swarm: {node_report_interval: 200ms, node_report_timeout: 5s, supervision_interval: 100ms}
shutdown_timeout: 10s
log: {level: info, format: json}
`, addr, groups, regexp.QuoteMeta(base), groups, other, dlq))
	}
	for _, mode := range [][]string{{"run"}, {"swarm", "--nodes", "2"}} {
		t.Run(mode[0], func(t *testing.T) {
			groups := base + "-" + mode[0] // each mode's groups start from the beginning
			p := testkit.Start(t, nil, append(mode, "--config", config(groups), "--exit-on-idle")...)
			if code := p.Wait(t, 90*time.Second); code != 0 {
				t.Fatalf("turbo %s --exit-on-idle exited %d, want 0", mode[0], code)
			}
			took := p.Exited.Sub(p.Started)
			for _, c := range []struct{ group, topic string }{{groups + "-a", matched}, {groups + "-b", other}} {
				for part, off := range testkit.CommittedOffsets(t, []string{addr}, c.group, c.topic) {
					if off < 0 {
						t.Fatalf("%s: %s/%d: nothing committed", c.group, c.topic, part)
					}
				}
			}
			for part, off := range testkit.CommittedOffsets(t, []string{addr}, groups+"-a", dlq) {
				if off >= 0 {
					t.Fatalf("group %s-a committed %d on the dead-letter topic's partition %d: it read it", groups, off, part)
				}
			}
			t.Logf("FIGURES exit-on-idle-dlq-pattern mode=%s broker=%s exited-after=%s", mode[0], brokerKind(), took.Round(10*time.Millisecond))
		})
	}
}
