package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit"
)

// SIGKILL in the middle of a pipeline that writes outputs: turbo run with
// an http handler answering each record (partition p, offset o) with
// o%3 outputs "p/o/i" keyed like it, killed with SIGKILL once transactions
// (or commits) have gone through and records are in flight, then run again
// to the end. Read committed, the output topic holds every output exactly
// once with output.exactly_once; at least once (killed with outputs above
// the committed watermarks, see kill9Outputs), the same crash writes some
// twice (which shows the ledger can see a duplicate).
func TestKill9ExactlyOnceOutputs(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, kill9ExactlyOnceOutputs)
}

func kill9ExactlyOnceOutputs(t *testing.T, _ testkit.Side) {
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
//
// At least once, the control runs without commit metadata, so that every
// record above a partition's committed watermark runs again after the
// crash; it is killed once the output topic holds outputs of such records
// (50 more than the records below the watermarks call for), which the
// second run then writes again.
func kill9Outputs(t *testing.T, addr, in, out string, exactlyOnce bool) testkit.OutputVerdict {
	t.Helper()
	var handled atomic.Int64
	srv := testkit.OutputEndpoint(&handled, time.Millisecond) // records stay in flight when the kill lands
	defer srv.Close()
	group := "g-" + out
	extra := "shutdown_timeout: 5s\nlog: {level: warn, format: json}"
	if !exactlyOnce {
		extra = "    commit_metadata_bytes: 0\n" + extra
	}
	cfg := testkit.PipelineConfig(t, addr, group, in, srv.URL, out, fmt.Sprintf("exactly_once: %t", exactlyOnce), 32, extra)
	run := testkit.Start(t, nil, "run", "--config", cfg)
	outputs := func(off int64) int64 { return off % 3 }
	testkit.Eventually(t, 60*time.Second, "the first run to handle 1,000 records and commit some (at least once: and to write outputs above the commit)", func() bool {
		if handled.Load() < 1000 {
			return false
		}
		var sum, below int64
		for _, off := range testkit.CommittedOffsets(t, []string{addr}, group, in) {
			sum += max(off, 0)
			for o := range max(off, 0) {
				below += outputs(o)
			}
		}
		if sum == 0 {
			return false
		}
		if exactlyOnce {
			return true
		}
		var written int64
		for _, end := range testkit.EndOffsets(t, []string{addr}, out) {
			written += end
		}
		return written >= below+50
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
	want := testkit.ExpectedOutputs(t, []string{addr}, in, func(off int64) int { return int(outputs(off)) })
	return testkit.JudgeOutputs(t, want, testkit.ReadCommitted(t, []string{addr}, out, 60*time.Second))
}

// The zombie: two members write outputs exactly once; one is stopped with
// SIGSTOP in the middle of its work, past its session, so that the other
// takes its partitions and runs again what the stopped one had not
// committed; then SIGCONT. The resumed member's open transaction holds
// outputs of those records: its commit carries its old generation, the
// group refuses it, and the transaction is aborted, not committed. Read
// committed, every output is there once.
func TestZombieTransactionIsFenced(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, zombieTransactionIsFenced)
}

func zombieTransactionIsFenced(t *testing.T, side testkit.Side) {
	in, out := testkit.TopicName("zombie-in"), testkit.TopicName("zombie-out")
	addr := testkit.Cluster(t, 4, in, out)
	testkit.ProduceWithBinary(t, addr, in, 4000, 100)
	group := "g-" + out
	member := func(name string) (*testkit.Proc, string, *atomic.Int64) {
		var handled atomic.Int64
		srv := testkit.OutputEndpoint(&handled, 2*time.Millisecond)
		t.Cleanup(srv.Close)
		cfg := testkit.PipelineConfig(t, addr, group, in, srv.URL, out, "exactly_once: true, transactional_id: zombie-"+name, 16,
			"shutdown_timeout: 5s\nlog: {level: info, format: json}\nhttp: {listen: \"127.0.0.1:0\"}")
		p, live := testkit.StartHTTPBinary(t, testkit.TransactionalBinary(t, side.Client), nil, nil, "run", "--config", cfg)
		return p, "http://" + live, &handled
	}
	a, aLive, aHandled := member("a")
	testkit.Eventually(t, 60*time.Second, "the first member to handle 500 records", func() bool { return aHandled.Load() >= 500 })
	b, bLive, bHandled := member("b")
	testkit.Eventually(t, 60*time.Second, "both members to hold two partitions each", func() bool {
		return pipeStatus(t, aLive).AssignedPartitions == 2 && pipeStatus(t, bLive).AssignedPartitions == 2
	})
	if err := syscall.Kill(a.Cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := aHandled.Load()
	testkit.Eventually(t, 60*time.Second, "the running member to take every partition (the stopped one's session expired)", func() bool {
		return pipeStatus(t, bLive).AssignedPartitions == 4
	})
	if err := syscall.Kill(a.Cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the resumed member's transaction to be refused and aborted", func() bool {
		return pipeStatus(t, aLive).TransactionsAborted > 0
	})
	testkit.AwaitCommittedEnd(t, []string{addr}, group, in, 120*time.Second)
	for _, p := range []*testkit.Proc{a, b} {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.Wait(t, 30*time.Second)
	}
	want := testkit.ExpectedOutputs(t, []string{addr}, in, func(off int64) int { return int(off % 3) })
	v := testkit.JudgeOutputs(t, want, testkit.ReadCommitted(t, []string{addr}, out, 60*time.Second))
	t.Logf("FIGURES zombie exactly once: %s; the stopped member had handled %d, the other %d, in all %d",
		v, stopped, bHandled.Load(), aHandled.Load()+bHandled.Load())
	if v.Missing != 0 || v.Duplicated != 0 || v.Disorder != 0 || v.Foreign != 0 {
		t.Errorf("exactly once with a zombie: %s", v)
	}
}

// pipeStatus is what a turbo run's /status (at base, http://host:port) says
// of its one consumer.
func pipeStatus(t *testing.T, base string) web.Consumer {
	t.Helper()
	s := getStatus(t, strings.TrimPrefix(base, "http://"))
	if len(s.Consumers) != 1 {
		t.Fatalf("/status of %s: %d consumers, want 1", base, len(s.Consumers))
	}
	return s.Consumers[0]
}

// A swarm node killed (SIGKILL) while a two-node swarm writes outputs
// exactly once: each node has a transactional id of its own (turbo-<group>
// with -n<index>), the same one after its restart, so the replacement
// aborts what the killed node left open at once. Read committed, every
// output is there once.
func TestSwarmNodeKilledExactlyOnce(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, swarmNodeKilledExactlyOnce)
}

func swarmNodeKilledExactlyOnce(t *testing.T, side testkit.Side) {
	in, out := testkit.TopicName("eos-swarm-in"), testkit.TopicName("eos-swarm-out")
	addr := testkit.Cluster(t, 8, in, out)
	testkit.ProduceWithBinary(t, addr, in, 4000, 100)
	var handled atomic.Int64
	srv := testkit.OutputEndpoint(&handled, 2*time.Millisecond)
	defer srv.Close()
	two, err := os.ReadFile(swarmConfig(t, addr, in, srv.URL, ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testkit.WriteConfig(t, strings.Replace(string(two),
		fmt.Sprintf("handler: {type: http, url: %q, timeout: 30s}", srv.URL),
		fmt.Sprintf("ordering: key\n    handler: {type: http, url: %q, timeout: 30s, response: outputs, encoding: utf8}\n    output: {topic: %s, exactly_once: true}", srv.URL, out), 1))
	sw, live := testkit.StartHTTPBinary(t, testkit.TransactionalBinary(t, side.Client), nil, nil, "swarm", "--config", cfg)
	var before swarmStatus
	testkit.Eventually(t, 90*time.Second, "both nodes running, holding partitions, and 1,000 records handled", func() bool {
		before = readStatus(t, live)
		return len(before.Nodes) == 2 && before.Nodes[0].Assigned > 0 && before.Nodes[1].Assigned > 0 && handled.Load() >= 1000
	})
	killed := before.Nodes[1]
	if err := syscall.Kill(killed.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "node 1 replaced and holding partitions", func() bool {
		n := readStatus(t, live).Nodes
		return len(n) == 2 && n[1].PID != killed.PID && n[1].State == "running" && n[1].Assigned > 0
	})
	group := in // swarmConfig's group is the topic's name
	testkit.AwaitCommittedEnd(t, []string{addr}, group, in, 120*time.Second)
	if err := sw.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := sw.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("turbo swarm exited %d after SIGTERM, want 0", code)
	}
	want := testkit.ExpectedOutputs(t, []string{addr}, in, func(off int64) int { return int(off % 3) })
	v := testkit.JudgeOutputs(t, want, testkit.ReadCommitted(t, []string{addr}, out, 60*time.Second))
	t.Logf("FIGURES swarm node killed, exactly once: %s; %d records handled in all", v, handled.Load())
	if v.Missing != 0 || v.Duplicated != 0 || v.Disorder != 0 || v.Foreign != 0 {
		t.Errorf("exactly once with a swarm node killed: %s", v)
	}
}
