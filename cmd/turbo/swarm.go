package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor"
	"github.com/turbokafka/turbo/supervisor/sdnotify"
)

// version is reported by nodes in their hello.
const version = "0.1.0"

// cmdSwarm runs the supervisor: it re-executes this binary as `turbo run`
// once per node and keeps the nodes healthy. It never connects to Kafka.
func cmdSwarm(ctx context.Context, args []string, stderr io.Writer, onSecondSignal func(func())) error {
	fs := newFlags("swarm", stderr)
	cfgPath := fs.String("config", "", "configuration `file` (.yaml, .json or .toml)")
	nodes := fs.Int("nodes", 0, "node processes to run (overrides swarm.nodes)")
	exitOnIdle := fs.Bool("exit-on-idle", false, "stop the swarm, exit 0, once the groups committed everything their topics held at start")
	sel := addSelectionFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadSelected(*cfgPath, sel)
	if err != nil {
		return err
	}
	nodesSet := false
	fs.Visit(func(f *flag.Flag) { nodesSet = nodesSet || f.Name == "nodes" })
	if nodesSet {
		if *nodes < 1 || *nodes > config.MaxNodes {
			return fmt.Errorf("%w: --nodes must be between 1 and %d (got %d)", errUsage, config.MaxNodes, *nodes)
		}
		cfg.Swarm.Nodes = *nodes
	}
	if cfg.Kafka.IsEmbedded() {
		return fmt.Errorf("%w: kafka.brokers: [%s] would start a separate broker in every node; a swarm needs a shared Kafka (e.g. `turbo dev`)",
			config.ErrInvalid, config.EmbeddedBroker)
	}
	if cfg.HTTP.Control {
		return fmt.Errorf("%w: http.control: pausing consumers is not available with turbo swarm yet (turbo run has it)", config.ErrInvalid)
	}
	if err := supervisor.Supported(); err != nil {
		return fmt.Errorf("%w: %w (turbo run works here)", errUsage, err)
	}
	log := newLogger(cfg.Log, stderr).With().Str("component", "swarm").Logger()
	reportDroppedLines(stderr, cfg.Log, func(c zerolog.Context) zerolog.Context { return c.Str("component", "swarm") })
	sup, err := supervisor.New(supervisor.Options{
		Swarm:           cfg.Swarm,
		HTTP:            cfg.HTTP,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Args:            append([]string{"run", "--config", *cfgPath}, sel.args()...),
		Log:             log,
		// Nodes do not speak to systemd: the supervisor does, for all.
		Env:        sdnotify.StripEnv(os.Environ()),
		ExitOnIdle: *exitOnIdle,
	})
	if err != nil {
		return err
	}
	onSecondSignal(sup.Kill)
	n := startNotifier(log)
	if n == nil {
		return sup.Run(ctx)
	}
	defer n.Close()
	notifyCtx, stopNotify := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { n.Run(notifyCtx, notifyTick, swarmService(sup), notifyErrs(log)) })
	err = sup.Run(ctx)
	stopNotify() // STOPPING=1 when the supervisor stopped by itself; at the signal otherwise
	wg.Wait()
	return err
}
