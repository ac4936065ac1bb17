package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor"
	"github.com/turbokafka/turbo/supervisor/web"
)

// runFlags are turbo run's flags.
type runFlags struct {
	config     string
	sel        *selection
	exitOnIdle bool
}

func cmdRun(ctx context.Context, f *runFlags, stdout, stderr io.Writer) error {
	cfg, err := loadSelected(f.config, f.sel)
	if err != nil {
		return err
	}
	node, err := nodeFromEnv(cfg)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	if node != nil {
		log = log.With().Int("node", node.node.Index).Logger()
	}
	reportDroppedLines(stderr, cfg.Log, func(c zerolog.Context) zerolog.Context {
		if node != nil {
			c = c.Int("node", node.node.Index)
		}
		return c
	})
	useSaramaLogger(log.With().Str("component", "sarama").Logger())
	return run(ctx, cfg, runOptions{exitOnIdle: f.exitOnIdle, stdout: stdout, stderr: stderr, log: log, node: node})
}

type runOptions struct {
	exitOnIdle bool
	stdout     io.Writer
	stderr     io.Writer
	log        zerolog.Logger
	node       *nodeRun // set when a swarm supervisor started this process
}

// run starts every configured consumer and stops them in order when ctx ends
// (a signal) or, with exitOnIdle, when everything the topics held at start is
// committed.
func run(ctx context.Context, cfg *config.Config, o runOptions) error {
	log := o.log
	kafka := cfg.Kafka
	if kafka.IsEmbedded() {
		b, err := startEmbedded(ctx, cfg, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil // a signal while seeding: nothing started, a clean stop
			}
			return err
		}
		defer b.Close()
		kafka.Brokers = b.Addrs()
	}

	// Metrics, health and status: served on http.listen by a process of its
	// own; a swarm node reports them to its supervisor instead, when the
	// supervisor serves them (it asks through supervisor.ObserveEnv): the
	// nodes would all want the same port.
	obs := newObserver()
	observe := cfg.HTTP.Listen != ""
	if n := o.node; n != nil {
		observe = os.Getenv(supervisor.ObserveEnv) == "1"
		n.obs, n.observe, n.log = obs, observe, log
	} else if observe {
		var ctl web.Controller // nil: the control routes answer 403
		if cfg.HTTP.Control {
			ctl = obs
		}
		srv, err := web.Start(web.Options{Addr: cfg.HTTP.Listen, Key: "http.listen", Gatherer: obs.reg, Source: obs, Control: ctl, Log: log})
		if err != nil {
			return err
		}
		defer srv.Stop()
	}

	// A node joins its supervisor before consuming: the join's hook is where
	// user code creates its connections, and from here on the node reports.
	var lost <-chan struct{}
	if n := o.node; n != nil {
		link, err := n.node.Join(supervisor.NodeOptions{
			Version: version, Interval: cfg.Swarm.NodeReportInterval, Report: n.report, Log: log,
		})
		if err != nil {
			return err
		}
		defer link.Close()
		lost = link.Lost()
	}

	tp, stopTracing, tracingErr := startTracing(cfg.Tracing, log)
	if tracingErr != nil {
		return tracingErr
	}
	defer stopTracing() // after stopAll below: the last attempts' spans are queued by then
	var consumers []*actors.Consumer
	var closers []io.Closer // handlers that hold connections (grpc): closed once their consumers stopped
	stopAll := func() error {
		// shutdown_timeout is a hard bound: each Stop returns within it.
		stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		errs := make([]error, len(consumers))
		var wg sync.WaitGroup
		for i, c := range consumers {
			wg.Go(func() { errs[i] = c.Stop(stopCtx) })
		}
		wg.Wait()
		for _, c := range closers {
			_ = c.Close() // a second stopAll finds them closed already
		}
		return errors.Join(errs...)
	}
	for _, cc := range cfg.Consumers {
		h, err := handlers.New(cc.Handler, cc.Concurrency, o.stdout)
		if c, ok := h.(io.Closer); ok && err == nil {
			closers = append(closers, c)
		}
		if err == nil {
			var c *actors.Consumer
			c, err = actors.New(actors.Options{
				Consumer: cc, Kafka: kafka, ShutdownTimeout: cfg.ShutdownTimeout, Handler: h, Logger: log, Metrics: observe,
				TracerProvider: tp,
			})
			if err == nil {
				consumers = append(consumers, c)
				err = obs.add(c, cc)
			}
			if err == nil {
				if o.node != nil {
					o.node.add(c)
				}
				continue
			}
		}
		return errors.Join(err, stopAll())
	}
	log.Info().Int("consumers", len(consumers)).Strs("brokers", kafka.Brokers).Msg("turbo running")

	start := time.Now()
	idle := make(chan error, 1)
	var bg sync.WaitGroup
	watchCtx, stopWatching := context.WithCancel(ctx)
	if o.exitOnIdle {
		bg.Go(func() {
			if err := waitIdle(watchCtx, kafka, cfg.Consumers, log); watchCtx.Err() == nil {
				idle <- err
			}
		})
	} else if n := o.node; n != nil && os.Getenv(supervisor.EnvExitOnIdle) == "1" {
		// turbo swarm --exit-on-idle: the node judges, its supervisor stops
		// the swarm; a node that cannot judge says why and goes on.
		bg.Go(func() {
			switch err := waitIdle(watchCtx, kafka, cfg.Consumers, log); {
			case err == nil:
				log.Info().Msg("the group committed everything its topics held: telling the supervisor (--exit-on-idle)")
				n.idle.Store(true)
			case watchCtx.Err() == nil:
				log.Error().Err(err).Msg("--exit-on-idle cannot judge progress; this node goes on until the swarm stops")
			}
		})
	}
	status := newStatus(o.stderr, log, consumers, o.node == nil)
	bg.Go(func() { status.run(watchCtx) })
	if o.node == nil { // a swarm's supervisor speaks for its nodes
		if n := startNotifier(log); n != nil {
			defer n.Close()
			bg.Go(func() { n.Run(watchCtx, notifyTick, runService(consumers, status), notifyErrs(log)) })
		}
	}
	// A consumer that Kafka refuses at start-up (a wrong password, an
	// untrusted certificate) ends the run: retrying will not cure it.
	refused := make(chan error, len(consumers))
	for _, c := range consumers {
		bg.Go(func() {
			select {
			case <-c.Failed():
				refused <- fmt.Errorf("consumer %s: %w", c.Name(), c.Err())
			case <-watchCtx.Done():
			}
		})
	}

	var idleErr, stopErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("stopping: signal received")
	case stopErr = <-refused:
		log.Error().Err(stopErr).Msg("stopping: Kafka refuses the connection")
	case <-lost:
		log.Warn().Msg("stopping: the swarm supervisor is gone")
		stopErr = errSupervisorGone
	case idleErr = <-idle:
		if idleErr != nil {
			log.Error().Err(idleErr).Msg("stopping: --exit-on-idle cannot judge progress")
		} else {
			log.Info().Msg("stopping: everything consumed and committed")
		}
	}
	// Stop the consumers first: the watchers end with watchCtx, and the idle
	// watcher's Kafka calls have short timeouts, but nothing waits for them
	// before the consumers are stopped.
	stopWatching()
	obs.stop()
	err := stopAll()
	bg.Wait()
	status.summary(time.Since(start))
	if errors.Is(stopErr, kafkanet.ErrRefused) {
		// The cause first: what the stop says after it follows from it.
		return errors.Join(stopErr, err)
	}
	if err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	if idleErr != nil {
		return fmt.Errorf("--exit-on-idle: %w", idleErr)
	}
	return stopErr
}

func startEmbedded(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*embedded.Broker, error) {
	var topics []string
	for _, c := range cfg.Consumers {
		topics = append(topics, c.Topics...)
	}
	e := cfg.Kafka.Embedded
	b, err := embedded.Start(embedded.Options{Partitions: e.Partitions, Topics: topics})
	if err != nil {
		return nil, err
	}
	log.Info().Strs("address", b.Addrs()).Int("partitions", e.Partitions).Msg("embedded broker started")
	if e.Seed.Records > 0 {
		t := time.Now()
		err := embedded.Produce(ctx, embedded.ProduceOptions{
			Brokers: b.Addrs(), Topic: e.Seed.Topic, Count: e.Seed.Records, Keys: e.Seed.Keys, Version: cfg.Kafka.Version,
		})
		if err != nil {
			b.Close()
			return nil, err
		}
		log.Info().Int("records", e.Seed.Records).Int("keys", e.Seed.Keys).Str("topic", e.Seed.Topic).
			Str("took", time.Since(t).String()).Msg("seeded demo records")
	}
	return b, nil
}

// reportDroppedLines makes the process's stderr sink (when w is one) say in
// the log's own format (log's, with its fields) how many lines it dropped,
// once its output moves again.
func reportDroppedLines(w io.Writer, l config.Log, fields func(zerolog.Context) zerolog.Context) {
	if s, ok := w.(*logSink); ok {
		s.SetNotice(func(n, total int64) []byte {
			var b bytes.Buffer
			log := fields(newLogger(l, &b).With()).Logger()
			log.Warn().Int64("dropped_lines", n).Int64("dropped_total", total).
				Msg("standard error was not read fast enough: log lines were dropped")
			return b.Bytes()
		})
	}
}

func newLogger(l config.Log, w io.Writer) zerolog.Logger {
	if s, ok := w.(*logSink); ok {
		// turbo's own lines on this stderr (exit summary and error, signal
		// notices) follow the log's format; the live line is off in JSON.
		s.setJSON(l.Format == config.LogJSON)
	}
	level, err := zerolog.ParseLevel(string(l.Level))
	if err != nil {
		level = zerolog.InfoLevel
	}
	out := w
	if l.Format == config.LogConsole {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	timeFormatOnce.Do(func() { zerolog.TimeFieldFormat = time.RFC3339Nano })
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// timeFormatOnce sets zerolog's process-wide time format once: loggers
// made later (a second in-process run, in tests) read it meanwhile.
var timeFormatOnce sync.Once

// saramaLogger routes sarama's chatter to debug level, on the logger of the
// latest run: sarama.Logger is a process-wide variable its goroutines read
// without synchronisation, so it is set once and what it writes to is
// swapped atomically (a second in-process run, in tests, raced with the
// first one's closing clients).
type saramaLogger struct {
	log atomic.Pointer[zerolog.Logger]
}

var (
	saramaLog     saramaLogger
	saramaLogOnce sync.Once
)

func useSaramaLogger(l zerolog.Logger) {
	saramaLog.log.Store(&l)
	saramaLogOnce.Do(func() { sarama.Logger = &saramaLog })
}

func (s *saramaLogger) Print(v ...any)                 { s.log.Load().Debug().Msg(fmt.Sprint(v...)) }
func (s *saramaLogger) Printf(format string, v ...any) { s.log.Load().Debug().Msgf(format, v...) }
func (s *saramaLogger) Println(v ...any)               { s.log.Load().Debug().Msg(fmt.Sprint(v...)) }

// loadSelected loads the --config file (environment overrides included) and
// applies the consumer and topic filters.
func loadSelected(path string, sel *selection) (*config.Config, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: --config is required", errUsage)
	}
	cfg, err := config.Load(path, configEnviron(os.Environ()))
	if err != nil {
		return nil, err
	}
	if err := sel.apply(cfg); err != nil {
		return nil, err
	}
	// What sarama would refuse is a configuration error too, reported now
	// rather than retried as "cannot reach Kafka".
	if err := actors.CheckKafka(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// configEnviron is environ without the variables a swarm supervisor sets
// for its nodes: they share the TURBO_SWARM_ prefix with configuration keys
// but are not keys, and config.Load refuses what names no key.
func configEnviron(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case supervisor.EnvSocket, supervisor.EnvIndex, supervisor.EnvNodes, supervisor.ObserveEnv, supervisor.EnvExitOnIdle:
		default:
			out = append(out, kv)
		}
	}
	return out
}
