package supervisor

import (
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

func TestPauseDetector(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := pauseDetector{interval: time.Second}
	if d := p.wake(t0); d != 0 {
		t.Fatalf("first wake: missed %s, want 0", d)
	}
	now := t0
	for i := range 10 { // ticks, some late by up to the slack
		now = now.Add(time.Second + time.Duration(i)*100*time.Millisecond)
		if d := p.wake(now); d != 0 {
			t.Fatalf("a wake %s after the previous: missed %s, want 0", time.Second+time.Duration(i)*100*time.Millisecond, d)
		}
	}
	now = now.Add(15 * time.Second) // SIGSTOP for 15 s, then SIGCONT
	if d := p.wake(now); d != 14*time.Second {
		t.Errorf("a wake 15 s after the previous (interval 1 s): missed %s, want 14s", d)
	}
	if d := p.wake(now.Add(time.Second)); d != 0 {
		t.Errorf("the tick after the pause: missed %s, want 0", d)
	}

	// A tiny interval still tolerates pauseSlackFloor of jitter.
	q := pauseDetector{interval: time.Millisecond}
	q.wake(t0)
	if d := q.wake(t0.Add(200 * time.Millisecond)); d != 0 {
		t.Errorf("interval 1 ms, a wake 200 ms late: missed %s, want 0 (jitter)", d)
	}
	if d := q.wake(t0.Add(200*time.Millisecond + 2*time.Second)); d != 2*time.Second-time.Millisecond {
		t.Errorf("interval 1 ms, a 2 s gap: missed %s, want 1.999s", d)
	}
}

// The rule end to end on a slot, with time as an input: a node that
// reported just before the supervisor was stopped for 15 s is not silent
// when it continues, and one that really stays silent is judged once the
// supervisor has run for node_report_timeout.
func TestSlotSilenceExcludesSupervisorPause(t *testing.T) {
	cfg := config.DefaultSwarm() // report timeout 60 s, supervision 1 s
	cfg.NodeReportTimeout = 10 * time.Second
	t0 := time.Unix(1000, 0)
	s := &slot{state: slotRunning, started: t0}
	s.heard(t0)
	p := pauseDetector{interval: cfg.SupervisionInterval}
	p.wake(t0)
	now := t0.Add(15 * time.Second) // the supervisor was stopped
	s.forgive(p.wake(now))
	if st, d := s.judge(now, cfg); st != swarmpb.Status_STATUS_OK {
		t.Fatalf("right after a 15 s pause of the supervisor: %v %q, want OK", st, d)
	}
	if why, _ := silenceVerdict(s.index, s.silence(now), cfg); why != "" {
		t.Errorf("right after a 15 s pause of the supervisor: %q, want no verdict", why)
	}
	// The node stays silent while the supervisor runs: judged after 10 s of
	// the supervisor's running time.
	for i := 1; i <= 8; i++ {
		now = now.Add(time.Second)
		s.forgive(p.wake(now))
		if st, _ := s.judge(now, cfg); st != swarmpb.Status_STATUS_OK {
			t.Fatalf("%d s of running time after the pause: %v, want OK", i+1, st)
		}
	}
	now = now.Add(2 * time.Second)
	s.forgive(p.wake(now)) // 2 s: within interval + slack, not a pause
	if st, d := s.judge(now, cfg); st != swarmpb.Status_STATUS_SILENT {
		t.Errorf("11 s of running time without a report: %v %q, want SILENT", st, d)
	}
	s.heard(now)
	if got := s.silence(now); got != 0 {
		t.Errorf("silence right after a report: %s, want 0", got)
	}
}

// A node's silence: under one and a half report intervals, nothing; past
// that, not ready (a report is missing) but still live; past
// node_report_timeout, overdue.
func TestSilenceVerdict(t *testing.T) {
	cfg := config.DefaultSwarm() // reports every 10 s, timeout 60 s
	for _, c := range []struct {
		silence     time.Duration
		want        string
		wantOverdue bool
	}{
		{0, "", false},
		{15 * time.Second, "", false},
		{15*time.Second + time.Millisecond, "node 2 has not reported for 15.001s (it reports every 10s; it is replaced after node_report_timeout 1m0s)", false},
		{20 * time.Second, "node 2 has not reported for 20s (it reports every 10s; it is replaced after node_report_timeout 1m0s)", false},
		{61 * time.Second, "node 2 has not reported for 1m1s (node_report_timeout 1m0s)", true},
	} {
		why, overdue := silenceVerdict(2, c.silence, cfg)
		if why != c.want || overdue != c.wantOverdue {
			t.Errorf("silence %s: %q, overdue %v; want %q, %v", c.silence, why, overdue, c.want, c.wantOverdue)
		}
	}
}
