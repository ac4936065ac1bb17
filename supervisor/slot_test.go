package supervisor

import (
	"strings"
	"testing"
	"time"

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
