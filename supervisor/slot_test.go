package supervisor

import (
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

func TestSlotJudge(t *testing.T) {
	cfg := config.DefaultSwarm()
	cfg.MemoryLimit = 100 * config.MiB
	t0 := time.Unix(1000, 0)
	fresh := func() *slot { return &slot{state: slotRunning, started: t0, lastSeen: t0} }

	if st, _ := fresh().judge(t0.Add(59*time.Second), cfg); st != swarmpb.Status_STATUS_OK {
		t.Errorf("59 s after a report: %v, want OK", st)
	}
	if st, d := fresh().judge(t0.Add(61*time.Second), cfg); st != swarmpb.Status_STATUS_SILENT || !strings.Contains(d, "no report") {
		t.Errorf("61 s after a report: %v %q, want SILENT", st, d)
	}
	starting := &slot{state: slotStarting, started: t0}
	if st, _ := starting.judge(t0.Add(61*time.Second), cfg); st != swarmpb.Status_STATUS_SILENT {
		t.Errorf("a node that never said hello in 61 s: %v, want SILENT", st)
	}

	s := fresh()
	for i := range memorySamples {
		if st, _ := s.judge(t0, cfg); st != swarmpb.Status_STATUS_OK {
			t.Fatalf("after %d samples over the limit: %v, want OK", i, st)
		}
		s.sampleMemory(200<<20, cfg.MemoryLimit)
	}
	if st, _ := s.judge(t0, cfg); st != swarmpb.Status_STATUS_MEMORY {
		t.Errorf("after %d samples over the limit: %v, want MEMORY", memorySamples, st)
	}
	s.sampleMemory(50<<20, cfg.MemoryLimit)
	if st, _ := s.judge(t0, cfg); st != swarmpb.Status_STATUS_OK {
		t.Errorf("a sample under the limit resets: %v, want OK", st)
	}

	s.report = &swarmpb.Report{Status: swarmpb.Status_STATUS_HANDLER_STUCK, Detail: "stuck"}
	if st, d := s.judge(t0, cfg); st != swarmpb.Status_STATUS_HANDLER_STUCK || d != "stuck" {
		t.Errorf("the node's own status: %v %q, want HANDLER_STUCK", st, d)
	}
}

func TestBuildReport(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lim := HealthLimits{PollStall: time.Minute, Grace: 30 * time.Second}
	ok := ConsumerHealth{Stats: actors.Snapshot{Processed: 5, InFlight: 2, Assigned: 3, Lag: 7, Moves: 3, LastPoll: t0}}
	r := BuildReport(t0, t0, []ConsumerHealth{ok, ok}, lim)
	if r.Status != swarmpb.Status_STATUS_OK || r.Processed != 10 || r.InFlight != 4 || r.AssignedPartitions != 6 || r.Lag != 14 || r.PartitionMoves != 6 {
		t.Errorf("report %v: want OK and the sums of both consumers", r)
	}
	refused := ok
	refused.Stats.KafkaError = "the broker refused user \"u\""
	if r := BuildReport(t0, t0, []ConsumerHealth{ok, refused}, lim); r.KafkaError != refused.Stats.KafkaError || r.Status != swarmpb.Status_STATUS_OK {
		t.Errorf("report %v: want kafka_error %q carried to the supervisor (no restart: a restart cannot cure it)", r, refused.Stats.KafkaError)
	}
	neverPolled := ConsumerHealth{}
	if r := BuildReport(t0.Add(61*time.Second), t0, []ConsumerHealth{ok, neverPolled}, lim); r.Status != swarmpb.Status_STATUS_POLL_STALLED {
		t.Errorf("a consumer that never polled in 61 s: %v, want POLL_STALLED", r.Status)
	}
	stuck := ok
	stuck.MaxHandlerTime = 10 * time.Second
	stuck.Stats.LastPoll = t0.Add(45 * time.Second)
	stuck.Stats.Oldest = t0
	if r := BuildReport(t0.Add(39*time.Second), t0, []ConsumerHealth{stuck}, lim); r.Status != swarmpb.Status_STATUS_OK {
		t.Errorf("a handler within max_handler_time + grace: %v, want OK", r.Status)
	}
	if r := BuildReport(t0.Add(41*time.Second), t0, []ConsumerHealth{stuck}, lim); r.Status != swarmpb.Status_STATUS_HANDLER_STUCK {
		t.Errorf("a handler past max_handler_time + grace: %v, want HANDLER_STUCK", r.Status)
	}
	stuck.MaxHandlerTime = 0
	if r := BuildReport(t0.Add(time.Hour), t0.Add(time.Hour), []ConsumerHealth{stuck}, HealthLimits{PollStall: 2 * time.Hour}); r.Status != swarmpb.Status_STATUS_OK {
		t.Errorf("no max_handler_time: %v, want OK however long a handler runs", r.Status)
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS([]byte("Name:\tturbo\nVmPeak:\t  9 kB\nVmRSS:\t   12345 kB\nThreads: 3\n"))
	if err != nil || got != 12345*1024 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 12345*1024)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS: lots kB\n", "VmRSS: 12 MB\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("parseVmRSS(%q) succeeded", bad)
		}
	}
}
