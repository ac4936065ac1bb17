// Command plainsarama is the benchmark's "plain sarama" peer: what people
// write today without turbo. A sarama consumer group (cooperative-sticky),
// one goroutine per claimed partition handling its records one after the
// other, marking each, and sarama's auto-commit sending the marks.
//
//	plainsarama --brokers HOST:PORT[,..] --topic T --group G [--work 20ms] [--commit-interval 100ms]
//
// It consumes until SIGINT or SIGTERM, then closes the group (which commits
// the last marks) and exits 0. The benchmark (test/bench) watches the group's
// committed offsets from outside, as it does for every peer. It links sarama
// only, not turbo, so its memory and CPU are sarama's own.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/IBM/sarama"
	"github.com/turbokafka/turbo/actors/handlers/sleep"
	"github.com/turbokafka/turbo/test/bench/plainpeer"
)

func main() { plainpeer.Main("plainsarama", consume) }

func consume(ctx context.Context, a plainpeer.Args) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "plainsarama"
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = a.CommitInterval
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	cg, err := sarama.NewConsumerGroup(a.Brokers, a.Group, cfg)
	if err != nil {
		return err
	}
	h := handler{work: a.Work}
	// Consume returns at every rebalance; it is called again until stopped.
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{a.Topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) && ctx.Err() == nil {
			_ = cg.Close()
			return err
		}
	}
	return cg.Close()
}

type handler struct{ work time.Duration }

func (handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim handles one partition's records in order, one at a time.
func (h handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		if err := sleep.For(sess.Context(), h.work); err != nil {
			return nil // the session ends (rebalance or shutdown): what is marked gets committed
		}
		sess.MarkMessage(msg, "")
	}
	return nil
}
