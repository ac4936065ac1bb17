package main

import (
	"fmt"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/health"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

// A swarm node judges itself from its actor trees' stats here, next to the
// code that runs it, so that the supervisor package never links Kafka or the
// actor system: it only carries the verdict (a swarmpb.Report).

// consumerHealth is what a node's report is built from, per consumer.
type consumerHealth struct {
	stats          actors.Snapshot
	maxHandlerTime time.Duration // 0: handlers may run for ever
}

// pollStallFloor is the shortest time out of a group session that counts as
// a stalled poll: Kafka's default max.poll.interval.ms. Joining a group
// legitimately takes up to the rebalance timeout (sarama: 60 s), so a
// shorter threshold would restart healthy nodes waiting for a rebalance.
const pollStallFloor = 5 * time.Minute

// healthLimits are the thresholds a node judges itself by.
type healthLimits struct {
	// pollStall: not in a group session for longer than this is
	// STATUS_POLL_STALLED (a node uses the larger of
	// swarm.node_report_timeout and pollStallFloor).
	pollStall time.Duration
	// grace is added to max_handler_time before a handler counts as stuck:
	// it had that long to notice its cancellation (shutdown_timeout).
	grace time.Duration
}

// buildReport judges a node from its consumers' stats: polling stalled, then
// a stuck handler; memory is the supervisor's to judge (the caller fills in
// the node's own figures).
func buildReport(now, started time.Time, consumers []consumerHealth, lim healthLimits) *swarmpb.Report {
	r := &swarmpb.Report{}
	for _, c := range consumers {
		s := c.stats
		r.Processed += s.Processed
		r.InFlight += s.InFlight
		r.Buffered += s.Buffered
		r.AssignedPartitions += s.Assigned
		r.Lag += s.Lag
		r.PartitionMoves += s.Moves
		if r.KafkaError == "" {
			r.KafkaError = s.KafkaError
		}
		poll := s.LastPoll
		if poll.IsZero() {
			poll = started
		}
		if r.LastPollUnixNano == 0 || poll.UnixNano() < r.LastPollUnixNano {
			r.LastPollUnixNano = poll.UnixNano()
		}
		if r.Status != swarmpb.Status_STATUS_OK {
			continue
		}
		if stalled := now.Sub(poll); stalled > lim.pollStall {
			r.Status, r.Detail = swarmpb.Status_STATUS_POLL_STALLED, fmt.Sprintf("not polling Kafka for %s", stalled.Round(time.Second))
		} else if ran, stuck := health.StuckHandler(now, s.Oldest, c.maxHandlerTime, lim.grace); stuck {
			r.Status, r.Detail = swarmpb.Status_STATUS_HANDLER_STUCK, health.StuckReason(ran, c.maxHandlerTime, lim.grace)
		}
	}
	return r
}
