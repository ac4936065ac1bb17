// Package embedded runs an in-process Kafka-protocol broker (franz-go's kfake)
// for `turbo run` with `kafka.brokers: [embedded]`, for `turbo dev`, and for
// tests that need a real wire protocol without a JVM; and it writes demo
// records.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configure an embedded broker.
type Options struct {
	// Listen is the address to listen on; "" means 127.0.0.1 on a free port.
	Listen string
	// DataDir persists the broker's data there; "" keeps it in memory.
	DataDir string
	// Partitions is the partition count of auto-created topics (default 8).
	Partitions int
	// Topics are created up front with Partitions partitions each.
	Topics []string
}

// Broker is a running embedded broker.
type Broker struct {
	cluster   *kfake.Cluster
	keepalive *keepalive // works around kfake's group bugs (see keepalive)
}

// Start starts a single-node broker that auto-creates topics.
func Start(o Options) (*Broker, error) {
	if o.Partitions <= 0 {
		o.Partitions = 8
	}
	listen := o.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("embedded: listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded: listen port %q: %w", portStr, err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(o.Partitions),
		// The consumer group protocol (KIP-848) takes its heartbeat
		// interval and session timeout from the broker: what turbo gives
		// the classic protocol (250 ms, 10 s) rather than Kafka's 5 s and
		// 45 s, so that a member learns of a moved partition as soon, and a
		// killed one is noticed as soon, on either protocol.
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.heartbeat.interval.ms": "250",
			"group.consumer.session.timeout.ms":    "10000",
		}),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			// kfake listens on 127.0.0.1; honour the host asked for.
			return net.Listen(network, net.JoinHostPort(host, portStr))
		}),
	}
	if len(o.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(o.Partitions), o.Topics...))
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: starting broker on %s: %w", listen, err)
	}
	return &Broker{cluster: c, keepalive: startKeepalive(c, c.ListenAddrs()[0])}, nil
}

// Addrs returns the broker's bootstrap addresses.
func (b *Broker) Addrs() []string { return b.cluster.ListenAddrs() }

// Close stops the broker. It is idempotent.
func (b *Broker) Close() {
	if b != nil && b.cluster != nil {
		if b.keepalive != nil {
			b.keepalive.stop()
		}
		b.cluster.Close()
	}
}

// ErrNoRecords is returned by Produce when asked for no records.
var ErrNoRecords = errors.New("embedded: nothing to produce")
