package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/config"
)

// cmdProduce writes keyed demo records.
// produceFlags are turbo produce's flags.
type produceFlags struct {
	brokers     listFlag
	config      string
	topic       string
	count, keys int
	rate        float64
}

func cmdProduce(ctx context.Context, f *produceFlags, stdout, stderr io.Writer) error {
	opts := embedded.ProduceOptions{Brokers: f.brokers, Topic: f.topic, Count: f.count, Keys: f.keys, Rate: f.rate}
	// The kafka section comes from --config, else from the TURBO_KAFKA_*
	// environment alone (TLS and SASL as `turbo run` would read them).
	var k config.Kafka
	var log = newLogger(config.Default().Log, stderr)
	if f.config != "" {
		cfg, err := config.Load(f.config, os.Environ())
		if err != nil {
			return err
		}
		if cfg.Kafka.IsEmbedded() && len(f.brokers) == 0 {
			return fmt.Errorf("%w: --config %s names the embedded broker, which lives inside a turbo run: give --brokers", errUsage, f.config)
		}
		k, log = cfg.Kafka, newLogger(cfg.Log, stderr)
		if len(f.brokers) == 0 {
			opts.Brokers = k.Brokers
		}
		opts.Version = k.Version
	} else {
		var err error
		if k, err = config.KafkaFromEnv(os.Environ()); err != nil {
			return err
		}
	}
	// The brokers written to are the ones the refusals are explained for
	// (kafkanet probes them): --brokers, else the configuration's.
	k.Brokers = opts.Brokers
	kn := kafkanet.New(k, log)
	kn.Warn()
	opts.Secure = kn.Apply
	opts.Franz, opts.FranzSecure = k.Client == config.ClientFranz, kn.Franz
	switch {
	case len(opts.Brokers) == 0:
		return fmt.Errorf("%w: --brokers or --config is required", errUsage)
	case f.topic == "":
		return fmt.Errorf("%w: --topic is required", errUsage)
	case f.count <= 0:
		return fmt.Errorf("%w: --count must be > 0", errUsage)
	case f.keys <= 0:
		return fmt.Errorf("%w: --keys must be > 0", errUsage)
	case f.rate < 0:
		return fmt.Errorf("%w: --rate must be >= 0", errUsage)
	}
	start := time.Now()
	err := embedded.Produce(ctx, opts)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted by a signal before all %d records were written to %s", f.count, f.topic)
	}
	if r := kn.Explain(err); r != nil {
		return r
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "turbo produce: wrote %d records over %d keys to %s in %s\n", f.count, f.keys, f.topic, time.Since(start).Round(time.Millisecond))
	return nil
}
