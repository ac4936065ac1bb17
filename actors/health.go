package actors

import (
	"fmt"
	"time"

	"github.com/turbokafka/turbo/actors/health"
)

// Check is a health verdict with the reason for a failing one.
type Check struct {
	OK     bool
	Reason string // why not, when !OK
}

// pingTimeout bounds how long Live waits for the tree's control loop.
const pingTimeout = 2 * time.Second

// Live reports whether the consumer is alive: its actor tree's control loop
// answers within 2 s, and no handler has run longer than max_handler_time
// plus shutdown_timeout (the time it had to notice its cancellation) — a
// handler that ignores its context holds its runner, and its key, for good.
// It is what a liveness probe asks: a dead consumer is restarted.
func (c *Consumer) Live() Check {
	if chk := stuckHandler(time.Now(), c.stats.Snapshot(), c.maxHandler, c.shutdown); !chk.OK {
		return chk
	}
	if _, err := c.sys.Root.RequestFuture(c.pid, &pingTree{}, pingTimeout).Result(); err != nil {
		select {
		case <-c.stopped:
			return Check{Reason: "the consumer has stopped"}
		default:
		}
		return Check{Reason: fmt.Sprintf("the actor tree did not answer within %s", pingTimeout)}
	}
	return Check{OK: true}
}

// stuckHandler fails when a handler has run for longer than maxHandler plus
// grace; maxHandler 0 (unlimited) never does.
// The rule is health.StuckHandler, which a swarm node's report shares.
func stuckHandler(now time.Time, s Snapshot, maxHandler, grace time.Duration) Check {
	if ran, stuck := health.StuckHandler(now, s.Oldest, maxHandler, grace); stuck {
		return Check{Reason: health.StuckReason(ran, maxHandler, grace)}
	}
	return Check{OK: true}
}

// Ready reports whether the consumer is consuming: it is in a consumer
// group session (it joined its group, and Kafka answers its heartbeats) and
// Kafka does not refuse its connection. It is what a readiness probe asks.
func (c *Consumer) Ready() Check { return readiness(c.stats.Snapshot()) }

func readiness(s Snapshot) Check {
	switch {
	case s.KafkaError != "":
		return Check{Reason: "Kafka refuses the connection: " + s.KafkaError}
	case !s.Reached:
		return Check{Reason: "connecting to Kafka"}
	case !s.InSession:
		return Check{Reason: "not in a consumer group session: joining, rebalancing, or Kafka is unreachable"}
	}
	return Check{OK: true}
}
