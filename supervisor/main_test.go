package supervisor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
)

// envFakeNode makes the test binary a fake node (TestMain): a real process
// speaking the real protocol through Join, behaving as the mode says.
const envFakeNode = "TURBO_TEST_FAKE_NODE"

// envHelperSupervisor makes the test binary a supervisor process of its own
// (TestMain), for tests that must act on the supervisor as a process:
// SIGSTOP it, lower its file limit. Its nodes are fake nodes (envFakeNode).
const envHelperSupervisor = "TURBO_TEST_HELPER_SUPERVISOR"

// helperSupervisor runs the helper supervisor (set where it exists: Linux).
var helperSupervisor func(mode string) int

func TestMain(m *testing.M) {
	if mode := os.Getenv(envFakeNode); mode != "" {
		os.Exit(fakeNode(mode))
	}
	if mode := os.Getenv(envHelperSupervisor); mode != "" && helperSupervisor != nil {
		os.Exit(helperSupervisor(mode))
	}
	os.Exit(m.Run())
}

// fakeNode modes:
//
//	ok       report OK until SIGTERM or the supervisor is gone, exit 0
//	exit     exit 1 at once, before joining
//	brief    join, then exit 0 after 50 ms
//	alloc    join, then hold 200 MiB of touched memory
//	garbage  say hello on a raw connection, send garbage, then join properly
//	slow     handle no signal for 5 s (a runtime still starting), then as ok
//	observe  as ok, and when the supervisor sets EnvObserve, reports ready
//	         with metrics (Go collector and turbo_test_reports_total) and a
//	         status document with one consumer
//	gated    as ok, after waiting for its start (Link.AwaitStart, bound
//	         gatedBound); reports how it started (Processed, a gatedOutcome)
//	         and when (LastPollUnixNano). The last node of the first start
//	         joins envLateJoin late.
//
// envLateJoin is how long the last node of a swarm's first start waits
// before joining, in mode gated (a time.Duration string).
const envLateJoin = "TURBO_TEST_LATE_JOIN"

// gatedBound is a gated fake node's bound on its wait for its start: far
// above what the tests wait, so that only a Start frame ends it in time.
const gatedBound = time.Minute

// gatedOutcome is how a fake node in mode gated started, in its reports'
// Processed.
type gatedOutcome int64

const (
	gatedWaiting  gatedOutcome = iota // still waiting
	gatedByFrame                      // asked to wait, started by the Start frame
	gatedByBound                      // asked to wait, started when its bound passed
	gatedNotAsked                     // not asked to wait (a restart): started at once
)

// observedReport is the report function of a fake node in mode observe:
// what a `turbo run` node sends when the supervisor serves http.listen.
func observedReport(index int) func() *swarmpb.Report {
	reg := prometheus.NewRegistry()
	reports := prometheus.NewCounter(prometheus.CounterOpts{Name: "turbo_test_reports_total", Help: "Reports sent."})
	reg.MustRegister(collectors.NewGoCollector(), reports)
	return func() *swarmpb.Report {
		reports.Inc()
		fams, err := reg.Gather()
		if err != nil {
			panic(err) // a fixed set of collectors that always gathers
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, metricsFormat)
		for _, f := range fams {
			if err := enc.Encode(f); err != nil {
				panic(err)
			}
		}
		doc, err := json.Marshal(web.Status{Mode: web.ModeRun, Consumers: []web.Consumer{{
			Name: "orders", Group: "g", Processed: int64(index), AssignedPartitions: 1,
			Partitions: []web.Partition{{Topic: "t", Partition: int32(index), Committed: 7, HighWatermark: 9, Lag: 2}},
		}}})
		if err != nil {
			panic(err)
		}
		return &swarmpb.Report{RssBytes: selfRSS(), Ready: true, Metrics: buf.Bytes(), StatusJson: doc}
	}
}

func fakeNode(mode string) int {
	n, ok, err := NodeFromEnv(os.LookupEnv)
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "fake node without a supervisor:", err)
		return 3
	}
	if mode == "exit" {
		return 1
	}
	if mode == "slow" {
		time.Sleep(5 * time.Second)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if mode == "garbage" {
		c, err := net.Dial("unix", n.Socket)
		if err != nil {
			return 4
		}
		writeFrame(c, &swarmpb.Frame{Body: &swarmpb.Frame_Hello{Hello: &swarmpb.Hello{Index: uint32(n.Index), Pid: int32(os.Getpid())}}})
		c.Write([]byte{0x05, 0xff, 0xff, 0xff, 0xff, 0xff})
		// Until the supervisor closes it (it may send a Start first).
		io.Copy(io.Discard, c)
		c.Close()
	}
	if late, _ := time.ParseDuration(os.Getenv(envLateJoin)); mode == "gated" && n.AwaitStart && n.Index == n.Nodes-1 {
		time.Sleep(late) // the late join is what is under test
	}
	var held atomic.Int64
	report := func() *swarmpb.Report { return &swarmpb.Report{RssBytes: selfRSS(), Processed: held.Load()} }
	if mode == "observe" && n.Observe {
		report = observedReport(n.Index)
	}
	var outcome, startedAt atomic.Int64
	if mode == "gated" {
		report = func() *swarmpb.Report {
			return &swarmpb.Report{RssBytes: selfRSS(), Processed: outcome.Load(), LastPollUnixNano: startedAt.Load()}
		}
	}
	link, err := n.Join(NodeOptions{
		Version:  "test",
		Interval: 100 * time.Millisecond,
		Report:   report,
		Log:      zerolog.Nop(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	defer link.Close()
	switch mode {
	case "gated":
		o := gatedNotAsked
		if n.AwaitStart {
			o = gatedByBound
			if link.AwaitStart(nil, gatedBound) {
				o = gatedByFrame
			}
		}
		startedAt.Store(time.Now().UnixNano())
		outcome.Store(int64(o))
	case "brief":
		time.Sleep(50 * time.Millisecond)
		return 0
	case "alloc":
		hold := make([]byte, 200<<20)
		for i := 0; i < len(hold); i += 4096 {
			hold[i] = 1
		}
		held.Store(int64(len(hold)))
		defer runtime.KeepAlive(hold)
	}
	select {
	case <-term:
	case <-link.Lost():
	}
	return 0
}
