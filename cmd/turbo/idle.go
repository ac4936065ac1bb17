package main

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
)

// idleCheckInterval is how often --exit-on-idle compares the groups'
// committed offsets with their targets.
const idleCheckInterval = 200 * time.Millisecond

// waitIdle returns nil once every consumer group has committed, on every
// partition of its topics, the end offset the partition had when waitIdle
// started (empty partitions count as done). It judges the group's committed
// offsets on the broker, so it holds whichever member did the work.
func waitIdle(ctx context.Context, k config.Kafka, consumers []config.Consumer, log zerolog.Logger) error {
	scfg := sarama.NewConfig()
	scfg.Version, _ = sarama.ParseKafkaVersion(k.Version)
	scfg.ClientID = k.ClientID + "-idle"
	var admin sarama.ClusterAdmin
	var client sarama.Client
	for {
		var err error
		if client, err = sarama.NewClient(k.Brokers, scfg); err == nil {
			if admin, err = sarama.NewClusterAdminFromClient(client); err == nil {
				break
			}
			client.Close()
		}
		log.Warn().Err(err).Msg("exit-on-idle: cannot reach Kafka; retrying")
		if !sleepCtx(ctx, time.Second) {
			return ctx.Err()
		}
	}
	defer admin.Close() // closes the client too

	type target struct {
		group   string
		topic   string
		part    int32
		end     int64
		settled bool
	}
	var targets []*target
	for _, c := range consumers {
		for _, topic := range c.Topics {
			parts, err := client.Partitions(topic)
			if err != nil {
				return fmt.Errorf("exit-on-idle: partitions of %s: %w", topic, err)
			}
			for _, p := range parts {
				end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
				if err != nil {
					return fmt.Errorf("exit-on-idle: end offset of %s/%d: %w", topic, p, err)
				}
				start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
				if err != nil {
					return fmt.Errorf("exit-on-idle: start offset of %s/%d: %w", topic, p, err)
				}
				targets = append(targets, &target{group: c.Group, topic: topic, part: p, end: end, settled: end <= start})
			}
		}
	}
	t := time.NewTicker(idleCheckInterval)
	defer t.Stop()
	for {
		// One request per group per check, for its unsettled partitions.
		byGroup := map[string]map[string][]int32{}
		for _, tg := range targets {
			if !tg.settled {
				if byGroup[tg.group] == nil {
					byGroup[tg.group] = map[string][]int32{}
				}
				byGroup[tg.group][tg.topic] = append(byGroup[tg.group][tg.topic], tg.part)
			}
		}
		committed := map[string]*sarama.OffsetFetchResponse{}
		for group, parts := range byGroup {
			if resp, err := admin.ListConsumerGroupOffsets(group, parts); err == nil {
				committed[group] = resp
			}
		}
		pending := 0
		for _, tg := range targets {
			if tg.settled {
				continue
			}
			if resp := committed[tg.group]; resp != nil {
				if b := resp.GetBlock(tg.topic, tg.part); b != nil && b.Err == sarama.ErrNoError && b.Offset >= tg.end {
					tg.settled = true
					continue
				}
			}
			pending++
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
