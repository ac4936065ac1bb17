// Package plainpeer is what the benchmark's plain-client peers
// (test/bench/plainsarama, test/bench/plainfranz) share: their command line
// and their simulated work. It links nothing but the standard library, so
// each peer's memory and CPU stay its client's own.
package plainpeer

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Args is a peer's command line:
//
//	NAME --brokers HOST:PORT[,..] --topic T --group G [--work 20ms] [--commit-interval 100ms]
type Args struct {
	Brokers        []string
	Topic, Group   string
	Work           time.Duration // simulated work per record; 0: none
	CommitInterval time.Duration
}

// Main parses the command line and runs consume until SIGINT or SIGTERM
// cancels its context; it exits 2 on a bad command line and 1 (saying why,
// as name) when consume fails.
func Main(name string, consume func(context.Context, Args) error) {
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
	err := consume(ctx, Args{Brokers: strings.Split(*brokers, ","), Topic: *topic, Group: *group, Work: *work, CommitInterval: *commitInterval})
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
