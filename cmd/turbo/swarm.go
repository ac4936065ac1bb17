package main

import (
	"context"
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
// swarmFlags are turbo swarm's flags.
type swarmFlags struct {
	config     string
	nodes      int
	nodesSet   bool // --nodes was given
	exitOnIdle bool
	sel        *selection
}

func cmdSwarm(ctx context.Context, f *swarmFlags, reload <-chan struct{}, stderr io.Writer, onSecondSignal func(func())) error {
	cfg, err := loadSelected(f.config, f.sel)
	if err != nil {
		return err
	}
	if f.nodesSet {
		if f.nodes < 1 || f.nodes > config.MaxNodes {
			return fmt.Errorf("%w: --nodes must be between 1 and %d (got %d)", errUsage, config.MaxNodes, f.nodes)
		}
		cfg.Swarm.Nodes = f.nodes
	}
	if err := swarmChecks(cfg); err != nil {
		return err
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
		Args:            append([]string{"run", "--config", f.config}, f.sel.args()...),
		Log:             log,
		// Nodes do not speak to systemd: the supervisor does, for all.
		Env:        sdnotify.StripEnv(os.Environ()),
		ExitOnIdle: f.exitOnIdle,
		Reload:     reload,
		// What a node will read when it starts again: refused here, the
		// nodes keep running.
		Validate: func() error {
			next, err := loadSelected(f.config, f.sel)
			if err == nil {
				err = swarmChecks(next)
			}
			if err != nil {
				return err
			}
			for _, section := range config.RestartOnly(cfg, next) {
				if section == "swarm" || section == "http" {
					log.Warn().Str("section", section).Msg("SIGHUP: this section is the supervisor's and takes effect when turbo swarm restarts; the nodes read the rest")
				}
			}
			for _, ch := range config.HandlerChanges(cfg, next) {
				log.Warn().Str("consumer", ch.Consumer).Str("old", string(ch.Old)).Str("new", string(ch.New)).
					Msg("SIGHUP: the consumer's handler type changes: " + string(ch.Old) + " → " + string(ch.New))
			}
			return nil
		},
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

// swarmChecks refuses what a swarm cannot run.
func swarmChecks(cfg *config.Config) error {
	if cfg.Kafka.IsEmbedded() {
		return fmt.Errorf("%w: kafka.brokers: [%s] would start a separate broker in every node; a swarm needs a shared Kafka (e.g. `turbo dev`)",
			config.ErrInvalid, config.EmbeddedBroker)
	}
	return nil
}
