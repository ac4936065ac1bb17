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
func cmdProduce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("produce", stderr)
	var brokers listFlag
	fs.Var(&brokers, "brokers", "bootstrap brokers, comma-separated (required without --config)")
	cfgPath := fs.String("config", "", "take the brokers, version, TLS and SASL from this configuration `file`'s kafka section")
	topic := fs.String("topic", "", "topic to write to (required)")
	count := fs.Int("count", 0, "number of records (required, > 0)")
	keys := fs.Int("keys", 100, "number of distinct keys")
	rate := fs.Float64("rate", 0, "records per second (0: as fast as possible)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	opts := embedded.ProduceOptions{Brokers: brokers, Topic: *topic, Count: *count, Keys: *keys, Rate: *rate}
	// The kafka section comes from --config, else from the TURBO_KAFKA_*
	// environment alone (TLS and SASL as `turbo run` would read them).
	var k config.Kafka
	var log = newLogger(config.Default().Log, stderr)
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath, configEnviron(os.Environ()))
		if err != nil {
			return err
		}
		if cfg.Kafka.IsEmbedded() && len(brokers) == 0 {
			return fmt.Errorf("%w: --config %s names the embedded broker, which lives inside a turbo run: give --brokers", errUsage, *cfgPath)
		}
		k, log = cfg.Kafka, newLogger(cfg.Log, stderr)
		if len(brokers) == 0 {
			opts.Brokers = k.Brokers
		}
		opts.Version = k.Version
	} else {
		var err error
		if k, err = config.KafkaFromEnv(os.Environ()); err != nil {
			return err
		}
	}
	kn := kafkanet.New(k, log)
	kn.Warn()
	opts.Secure = kn.Apply
	switch {
	case len(opts.Brokers) == 0:
		return fmt.Errorf("%w: --brokers or --config is required", errUsage)
	case *topic == "":
		return fmt.Errorf("%w: --topic is required", errUsage)
	case *count <= 0:
		return fmt.Errorf("%w: --count must be > 0", errUsage)
	case *keys <= 0:
		return fmt.Errorf("%w: --keys must be > 0", errUsage)
	case *rate < 0:
		return fmt.Errorf("%w: --rate must be >= 0", errUsage)
	}
	start := time.Now()
	err := embedded.Produce(ctx, opts)
	if r := kn.Explain(err); r != nil {
		return r
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "turbo produce: wrote %d records over %d keys to %s in %s\n", *count, *keys, *topic, time.Since(start).Round(time.Millisecond))
	return nil
}
