package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/handlers/sleep"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/config"
)

// caughtUpCheckInterval is how often WaitCaughtUp compares the groups'
// committed offsets with their targets.
const caughtUpCheckInterval = 200 * time.Millisecond

// WaitCaughtUp returns nil once every consumer's group has committed, on
// every partition of the topics it reads, the end offset the partition had
// when WaitCaughtUp started (empty partitions count as done): what `turbo
// run --exit-on-idle` waits for. The topics are what the consumer's group
// subscribes to — its names, and what its patterns match now, never a
// dead-letter topic or an excluded one (the same lookup the group makes).
// It judges the groups' committed offsets on the brokers, so it holds
// whichever member did the work: a process that runs none of the consumers
// can wait too. It returns ctx's error when ctx ends first, and an error
// when the topics' end offsets cannot be read after a few attempts.
func WaitCaughtUp(ctx context.Context, k config.Kafka, consumers []config.Consumer, log zerolog.Logger) error {
	scfg := sarama.NewConfig()
	scfg.Version, _ = sarama.ParseKafkaVersion(k.Version)
	scfg.ClientID = k.ClientID + "-caught-up"
	// Short timeouts: a call in flight when turbo stops must not hold the
	// exit for sarama's default 30 s per attempt.
	scfg.Net.DialTimeout, scfg.Net.ReadTimeout, scfg.Net.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	scfg.Metadata.Retry.Max = 1
	scfg.Admin.Timeout = 5 * time.Second
	kn := kafkanet.New(k, log)
	var admin sarama.ClusterAdmin
	var client sarama.Client
	for {
		err := kn.Apply(scfg)
		if err == nil {
			client, err = sarama.NewClient(k.Brokers, scfg)
		}
		if err == nil {
			if admin, err = sarama.NewClusterAdminFromClient(client); err == nil {
				break
			}
			client.Close()
		}
		log.Warn().Err(err).Msg("waiting to catch up: cannot reach Kafka; retrying")
		if err := sleep.For(ctx, time.Second); err != nil {
			return err
		}
	}
	defer admin.Close() // closes the client too

	// The ends to reach; a topic just created may not have a leader yet, so
	// a few failures are retried before giving up.
	var targets []*target
	for attempt := 1; ; attempt++ {
		var err error
		if targets, err = idleTargets(client, consumers); err == nil {
			break
		}
		if attempt == 5 {
			return err
		}
		log.Warn().Err(err).Msg("waiting to catch up: reading the partitions' end offsets; retrying")
		if err := sleep.For(ctx, time.Second); err != nil {
			return err
		}
	}
	// A group that starts at the newest offset and has committed nothing
	// has nothing to do on that partition.
	for _, c := range consumers {
		if c.InitialOffset != config.OffsetNewest {
			continue
		}
		parts := map[string][]int32{}
		for _, tg := range targets {
			if tg.group == c.Group {
				parts[tg.topic] = append(parts[tg.topic], tg.part)
			}
		}
		resp, err := admin.ListConsumerGroupOffsets(c.Group, parts)
		if err != nil && !errors.Is(err, sarama.ErrGroupIDNotFound) {
			return fmt.Errorf("committed offsets of %s: %w", c.Group, err)
		}
		for _, tg := range targets {
			if tg.group != c.Group {
				continue
			}
			if resp == nil {
				tg.settled = true
			} else if b := resp.GetBlock(tg.topic, tg.part); b == nil || b.Offset < 0 {
				tg.settled = true
			}
		}
	}
	t := time.NewTicker(caughtUpCheckInterval)
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

// target is a partition's end offset at start, which its group's committed
// offset must reach.
type target struct {
	group   string
	topic   string
	part    int32
	end     int64
	settled bool
}

// listOffsets asks the leaders of tps for their offsets at (sarama's
// OffsetNewest or OffsetOldest), one ListOffsets request per leader broker
// rather than a round trip per partition (at 4,096 partitions, 8,192 of
// them before --exit-on-idle could start waiting). Any partition whose
// offset is not learnt is an error naming it.
func listOffsets(client sarama.Client, tps []TopicPartition, at int64) (map[TopicPartition]int64, error) {
	var unknown error
	leaders := offsetRequests(tps, func(tp TopicPartition) TopicPartition { return tp }, func(TopicPartition) int64 { return at },
		client.Leader, func() *sarama.OffsetRequest { return sarama.NewOffsetRequest(client.Config().Version) },
		func(tp TopicPartition, err error) {
			if unknown == nil {
				unknown = fmt.Errorf("%s: leader: %w", tp, err)
			}
		})
	if unknown != nil {
		return nil, unknown
	}
	out := make(map[TopicPartition]int64, len(tps))
	for _, l := range leaders {
		resp, err := l.b.GetAvailableOffsets(l.req)
		if err != nil {
			_ = l.b.Close() // as sarama's own GetOffset: the next request opens it anew
			return nil, fmt.Errorf("broker %d: %w", l.b.ID(), err)
		}
		for _, tp := range l.asks {
			block := resp.GetBlock(tp.Topic, tp.Partition)
			switch {
			case block == nil || (errors.Is(block.Err, sarama.ErrNoError) && len(block.Offsets) != 1):
				return nil, fmt.Errorf("%s: %w", tp, sarama.ErrIncompleteResponse)
			case !errors.Is(block.Err, sarama.ErrNoError):
				if errors.Is(block.Err, sarama.ErrNotLeaderForPartition) || errors.Is(block.Err, sarama.ErrLeaderNotAvailable) {
					_ = client.RefreshMetadata(tp.Topic) // the next attempt asks the new leader
				}
				return nil, fmt.Errorf("%s: %w", tp, block.Err)
			}
			out[tp] = block.Offsets[0]
		}
	}
	return out, nil
}

func idleTargets(client sarama.Client, consumers []config.Consumer) ([]*target, error) {
	var targets []*target
	for _, c := range consumers {
		sub, err := c.Subscription()
		if err != nil {
			return nil, err
		}
		// What the patterns match now: a topic created later is not what
		// the topics held at start.
		topics, err := topicsRead(client, sub)
		if err != nil {
			return nil, fmt.Errorf("listing the topics: %w", err)
		}
		var tps []TopicPartition
		for _, topic := range topics {
			parts, err := client.Partitions(topic)
			if err != nil {
				return nil, fmt.Errorf("partitions of %s: %w", topic, err)
			}
			for _, p := range parts {
				tps = append(tps, TopicPartition{Topic: topic, Partition: p})
			}
		}
		ends, err := listOffsets(client, tps, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("end offsets: %w", err)
		}
		starts, err := listOffsets(client, tps, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("start offsets: %w", err)
		}
		for _, tp := range tps {
			targets = append(targets, &target{group: c.Group, topic: tp.Topic, part: tp.Partition, end: ends[tp], settled: ends[tp] <= starts[tp]})
		}
	}
	return targets, nil
}
