package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/turbokafka/turbo/actors/embedded"
)

// cmdProduce writes keyed demo records.
func cmdProduce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("produce", stderr)
	var brokers listFlag
	fs.Var(&brokers, "brokers", "bootstrap brokers, comma-separated (required)")
	topic := fs.String("topic", "", "topic to write to (required)")
	count := fs.Int("count", 0, "number of records (required, > 0)")
	keys := fs.Int("keys", 100, "number of distinct keys")
	rate := fs.Float64("rate", 0, "records per second (0: as fast as possible)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case len(brokers) == 0:
		return fmt.Errorf("%w: --brokers is required", errUsage)
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
	err := embedded.Produce(ctx, embedded.ProduceOptions{Brokers: brokers, Topic: *topic, Count: *count, Keys: *keys, Rate: *rate})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "turbo produce: wrote %d records over %d keys to %s in %s\n", *count, *keys, *topic, time.Since(start).Round(time.Millisecond))
	return nil
}
