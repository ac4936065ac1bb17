package main

import (
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor"
)

func TestBuildReport(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lim := healthLimits{pollStall: time.Minute, grace: 30 * time.Second}
	ok := consumerHealth{stats: actors.Snapshot{Processed: 5, InFlight: 2, Assigned: 3, Lag: 7, Moves: 3, LastPoll: t0}}
	r := buildReport(t0, t0, []consumerHealth{ok, ok}, lim)
	if r.Status != swarmpb.Status_STATUS_OK || r.Processed != 10 || r.InFlight != 4 || r.AssignedPartitions != 6 || r.Lag != 14 || r.PartitionMoves != 6 {
		t.Errorf("report %v: want OK and the sums of both consumers", r)
	}
	refused := ok
	refused.stats.KafkaError = "the broker refused user \"u\""
	if r := buildReport(t0, t0, []consumerHealth{ok, refused}, lim); r.KafkaError != refused.stats.KafkaError || r.Status != swarmpb.Status_STATUS_OK {
		t.Errorf("report %v: want kafka_error %q carried to the supervisor (no restart: a restart cannot cure it)", r, refused.stats.KafkaError)
	}
	neverPolled := consumerHealth{}
	if r := buildReport(t0.Add(61*time.Second), t0, []consumerHealth{ok, neverPolled}, lim); r.Status != swarmpb.Status_STATUS_POLL_STALLED {
		t.Errorf("a consumer that never polled in 61 s: %v, want POLL_STALLED", r.Status)
	}
	stuck := ok
	stuck.maxHandlerTime = 10 * time.Second
	stuck.stats.LastPoll = t0.Add(45 * time.Second)
	stuck.stats.Oldest = t0
	if r := buildReport(t0.Add(39*time.Second), t0, []consumerHealth{stuck}, lim); r.Status != swarmpb.Status_STATUS_OK {
		t.Errorf("a handler within max_handler_time + grace: %v, want OK", r.Status)
	}
	if r := buildReport(t0.Add(41*time.Second), t0, []consumerHealth{stuck}, lim); r.Status != swarmpb.Status_STATUS_HANDLER_STUCK ||
		r.Detail != "a handler has run for 41s, ignoring its cancellation (max_handler_time 10s, shutdown_timeout 30s)" {
		t.Errorf("a handler past max_handler_time + grace: %v %q, want HANDLER_STUCK saying how long it ran", r.Status, r.Detail)
	}
	stuck.maxHandlerTime = 0
	if r := buildReport(t0.Add(time.Hour), t0.Add(time.Hour), []consumerHealth{stuck}, healthLimits{pollStall: 2 * time.Hour}); r.Status != swarmpb.Status_STATUS_OK {
		t.Errorf("no max_handler_time: %v, want OK however long a handler runs", r.Status)
	}
	if r := buildReport(t0, t0, nil, lim); r.Status != swarmpb.Status_STATUS_OK || r.LastPollUnixNano != 0 || strings.TrimSpace(r.Detail) != "" {
		t.Errorf("no consumers: %v, want an OK, empty report", r)
	}
}

// TestNodeTakesItsShareOfTheRate: rate.limit is the whole consumer's; each
// of a swarm's nodes runs an equal share of it (and of its burst).
func TestNodeTakesItsShareOfTheRate(t *testing.T) {
	t.Setenv(supervisor.EnvSocket, "/tmp/none")
	t.Setenv(supervisor.EnvIndex, "1")
	t.Setenv(supervisor.EnvNodes, "4")
	cfg := config.Default()
	a, b := config.DefaultConsumer("a"), config.DefaultConsumer("b")
	a.Rate = config.Rate{Limit: 200, Burst: 40}
	cfg.Consumers = []config.Consumer{a, b}
	n, err := nodeFromEnv(&cfg)
	if err != nil || n == nil {
		t.Fatalf("nodeFromEnv = %v, %v", n, err)
	}
	if got := cfg.Consumers[0].Rate; got != (config.Rate{Limit: 50, Burst: 10}) {
		t.Errorf("node's rate = %+v, want limit 50 burst 10 (a quarter)", got)
	}
	if got := cfg.Consumers[1].Rate; got != (config.Rate{}) {
		t.Errorf("a consumer without a limit got %+v", got)
	}
}
