package main

import (
	"context"
	"fmt"
	"io"

	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/config"
)

// cmdDev runs the embedded broker alone, for local development and for
// several turbo processes to share.
func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev", stderr)
	listen := fs.String("listen", "127.0.0.1:9092", "address to listen on")
	dataDir := fs.String("data-dir", "", "persist the broker's data in this `directory` (default: in memory)")
	partitions := fs.Int("partitions", 8, "partitions of auto-created topics")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *partitions < 1 || *partitions > config.MaxEmbeddedPartitions {
		return fmt.Errorf("%w: --partitions must be between 1 and %d (got %d)", errUsage, config.MaxEmbeddedPartitions, *partitions)
	}
	b, err := embedded.Start(embedded.Options{Listen: *listen, DataDir: *dataDir, Partitions: *partitions})
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(stdout, "turbo dev: Kafka-protocol broker listening on %s (Ctrl-C to stop)\n", b.Addrs()[0])
	<-ctx.Done()
	return nil
}
