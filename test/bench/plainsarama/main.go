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
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap brokers, comma-separated (required)")
	topic := flag.String("topic", "", "topic to consume (required)")
	group := flag.String("group", "", "consumer group (required)")
	work := flag.Duration("work", 0, "simulated work per record (a sleep; 0: none)")
	commitInterval := flag.Duration("commit-interval", time.Second, "auto-commit interval")
	flag.Parse()
	if *brokers == "" || *topic == "" || *group == "" {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := consume(ctx, strings.Split(*brokers, ","), *topic, *group, *work, *commitInterval); err != nil {
		fmt.Fprintln(os.Stderr, "plainsarama:", err)
		os.Exit(1)
	}
}

func consume(ctx context.Context, brokers []string, topic, group string, work, commitInterval time.Duration) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "plainsarama"
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = commitInterval
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	cg, err := sarama.NewConsumerGroup(brokers, group, cfg)
	if err != nil {
		return err
	}
	h := handler{work: work}
	// Consume returns at every rebalance; it is called again until stopped.
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) && ctx.Err() == nil {
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
		if err := simulate(sess.Context(), h.work); err != nil {
			return nil // the session ends (rebalance or shutdown): what is marked gets committed
		}
		sess.MarkMessage(msg, "")
	}
	return nil
}

// simulate is the simulated work, the same as turbo's `handler.type: sleep`
// (actors/handlers.Sleep): a timer, cut short when the context is cancelled.
func simulate(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
