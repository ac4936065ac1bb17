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
// devFlags are turbo dev's flags.
type devFlags struct {
	listen, dataDir string
	partitions      int
}

func cmdDev(ctx context.Context, f *devFlags, stdout io.Writer) error {
	if f.partitions < 1 || f.partitions > config.MaxEmbeddedPartitions {
		return fmt.Errorf("%w: --partitions must be between 1 and %d (got %d)", errUsage, config.MaxEmbeddedPartitions, f.partitions)
	}
	b, err := embedded.Start(embedded.Options{Listen: f.listen, DataDir: f.dataDir, Partitions: f.partitions})
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(stdout, "turbo dev: Kafka-protocol broker listening on %s (Ctrl-C to stop)\n", b.Addrs()[0])
	<-ctx.Done()
	return nil
}
