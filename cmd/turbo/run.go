package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/turbokafka/turbo/actors/control"
	"io"
	"os"
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
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/term"
)

// runFlags are turbo run's flags.
type runFlags struct {
	config     string
	sel        *selection
	exitOnIdle bool
}

func cmdRun(ctx context.Context, f *runFlags, reload <-chan struct{}, stdout, stderr io.Writer) error {
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
	o := runOptions{exitOnIdle: f.exitOnIdle, stdout: stdout, stderr: stderr, log: log, node: node}
	if node == nil { // a node's supervisor restarts it to reload
		o.reload, o.reread = reload, func() (*config.Config, error) { return loadSelected(f.config, f.sel) }
	}
	return run(ctx, cfg, o)
}

type runOptions struct {
	exitOnIdle bool
	stdout     io.Writer
	stderr     io.Writer
	log        zerolog.Logger
	node       *nodeRun // set when a swarm supervisor started this process

	// reload asks for the configuration to be read again (SIGHUP), and
	// reread reads it; nil for a swarm node, whose supervisor restarts it
	// instead.
	reload <-chan struct{}
	reread func() (*config.Config, error)
}

// run starts every configured consumer and stops them in order when ctx ends
// (a signal) or, with exitOnIdle, when everything the topics held at start is
// committed. A reload that validates replaces the consumers: the old ones
// stop gracefully (what finished is committed), the new ones start; the
// listener, the embedded broker and the tracing exporter stay.
func run(ctx context.Context, cfg *config.Config, o runOptions) error {
	log := o.log
	var embeddedAddrs []string
	if cfg.Kafka.IsEmbedded() {
		b, err := startEmbedded(ctx, cfg, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil // a signal while seeding: nothing started, a clean stop
			}
			return err
		}
		defer b.Close()
		embeddedAddrs = b.Addrs()
	}

	// Metrics, health and status: served on http.listen by a process of its
	// own; a swarm node reports them to its supervisor instead, when the
	// supervisor serves them (it asks through supervisor.EnvObserve): the
	// nodes would all want the same port.
	obs := newObserver()
	observe := cfg.HTTP.Listen != ""
	if n := o.node; n != nil {
		observe = n.node.Observe
		n.obs, n.observe, n.log = obs, observe, log
	} else if observe {
		var ctl web.Controller // nil: the control routes answer 403
		if cfg.HTTP.Control {
			ctl = control.Consumers(obs.running)
		}
		tc, err := cfg.HTTP.ServerTLS()
		if err != nil {
			return err
		}
		srv, err := web.Start(web.Options{Addr: cfg.HTTP.Listen, Key: "http.listen", Gatherer: obs.reg, Source: obs,
			Control: ctl, ControlTokenFile: cfg.HTTP.ControlTokenFile, TLS: tc, Log: log})
		if err != nil {
			return err
		}
		defer srv.Stop()
	}

	// A node joins its supervisor before consuming: the join's hook is where
	// user code creates its connections, and from here on the node reports.
	var lost <-chan struct{}
	var joinGate func(done <-chan struct{})
	if n := o.node; n != nil {
		link, err := n.node.Join(supervisor.NodeOptions{
			Version: version, Interval: cfg.Swarm.NodeReportInterval, Report: n.report, Log: log,
			Command: control.Consumers(obs.running).Node,
		})
		if err != nil {
			return err
		}
		defer link.Close()
		lost = link.Lost()
		// The consumers join their groups with the other nodes'.
		bound := cfg.Swarm.NodeReportTimeout
		joinGate = func(done <-chan struct{}) {
			if link.AwaitStart(done, bound) {
				return
			}
			select {
			case <-done:
			case <-lost:
			default:
				log.Warn().Stringer("node_report_timeout", bound).Msg("the swarm's nodes did not all start in time: joining the group anyway")
			}
		}
	}

	tp, stopTracing, tracingErr := startTracing(cfg.Tracing, log)
	if tracingErr != nil {
		return tracingErr
	}
	defer stopTracing() // after the consumers stopped: the last attempts' spans are queued by then

	start := time.Now()
	status := newStatus(o.stderr, log, o.node == nil)
	var bg sync.WaitGroup
	statusCtx, stopStatus := context.WithCancel(context.Background())
	bg.Go(func() { status.run(statusCtx) })
	var gen atomic.Pointer[consumerSet] // what systemd hears about
	if o.node == nil {                  // a swarm's supervisor speaks for its nodes
		if n := startNotifier(log); n != nil {
			defer n.Close()
			bg.Go(func() { n.Run(statusCtx, notifyTick, runService(&gen, status), notifyErrs(log)) })
		}
	}
	defer func() {
		stopStatus()
		bg.Wait()
		// The summary is the run's last line. sarama closes a client's
		// broker connections on goroutines of its own after Close returns
		// (safeAsyncClose), and each says so at debug level: those lines
		// would follow it.
		useSaramaLogger(zerolog.Nop())
		status.summary(time.Since(start))
	}()

	obs.loaded(time.Now())
	var pauses map[string]pauseState // what the operator paused, carried over a reload
	for {
		kafka := cfg.Kafka
		if kafka.IsEmbedded() {
			kafka.Brokers = embeddedAddrs
		}
		g := &consumerSet{cfg: cfg, kafka: kafka, o: o, obs: obs, tp: tp, lost: lost, metrics: observe, joinGate: joinGate, pauses: pauses}
		if err := g.start(); err != nil {
			return err
		}
		gen.Store(g)
		status.set(g.consumers)
		next, err := g.serve(ctx, embeddedAddrs != nil)
		status.retire(g.consumers)
		if next == nil {
			return err
		}
		cfg = next
		pauses = pausesOf(g.consumers, cfg, log)
		obs.loaded(time.Now())
		log.Info().Int("consumers", len(cfg.Consumers)).Msg("configuration reloaded: starting the consumers again")
	}
}

// consumerSet is one configuration's consumers: the whole run, or the time
// between two reloads.
type consumerSet struct {
	cfg   *config.Config
	kafka config.Kafka // cfg.Kafka with the embedded broker's address
	o     runOptions
	obs   *observer
	tp    trace.TracerProvider
	lost  <-chan struct{}
	// metrics: the consumers keep their histograms (someone serves them)
	metrics bool
	// joinGate: a swarm node's consumers join their groups with the other
	// nodes' (supervisor.Link.AwaitStart)
	joinGate func(done <-chan struct{})

	// pauses: the consumers (by name) that start paused, as the ones they
	// replace were
	pauses map[string]pauseState

	consumers []*actors.Consumer
	closers   []io.Closer // handlers that hold connections (grpc): closed once their consumers stopped
}

// pauseState is what an operator paused of a consumer: the whole of it, or
// partitions.
type pauseState struct {
	paused     bool
	partitions []actors.TopicPartition
	topics     []string
}

func (p pauseState) any() bool { return p.paused || len(p.partitions) > 0 || len(p.topics) > 0 }

// pausesOf reads the pauses of consumers that stopped for a reload, for
// the consumers of next that bear their names; a paused consumer that next
// no longer has is logged (its pause ends with it).
func pausesOf(consumers []*actors.Consumer, next *config.Config, log zerolog.Logger) map[string]pauseState {
	kept := make(map[string]bool, len(next.Consumers))
	for _, cc := range next.Consumers {
		kept[cc.Name] = true
	}
	out := map[string]pauseState{}
	for _, c := range consumers {
		p := pauseState{paused: c.Paused(), partitions: c.PausedPartitions(), topics: c.PausedTopics()}
		if !p.any() {
			continue
		}
		if !kept[c.Name()] {
			log.Warn().Str("consumer", c.Name()).Msg("SIGHUP: a paused consumer is no longer in the configuration; its pause ends with it")
			continue
		}
		out[c.Name()] = p
	}
	return out
}

// start creates and starts every consumer; on an error it stops those it
// started.
func (g *consumerSet) start() error {
	for _, cc := range g.cfg.Consumers {
		h, err := handlers.New(cc.Handler, cc.Concurrency, g.o.stdout)
		if c, ok := h.(io.Closer); ok && err == nil {
			g.closers = append(g.closers, c)
		}
		if err == nil {
			var c *actors.Consumer
			p := g.pauses[cc.Name]
			if p.any() {
				g.o.log.Info().Str("consumer", cc.Name).Bool("paused", p.paused).Int("paused_partitions", len(p.partitions)).Strs("paused_topics", p.topics).
					Msg("SIGHUP: the consumer was paused before the reload and stays so; resume it to go on")
			}
			c, err = actors.New(actors.Options{
				Consumer: cc, Kafka: g.kafka, ShutdownTimeout: g.cfg.ShutdownTimeout, Handler: h, Logger: g.o.log, Metrics: g.metrics,
				TracerProvider: g.tp, JoinGate: g.joinGate, Paused: p.paused, PausedPartitions: p.partitions, PausedTopics: p.topics,
			})
			if err == nil {
				g.consumers = append(g.consumers, c)
				err = g.obs.add(c, cc)
			}
			if err == nil {
				if g.o.node != nil {
					g.o.node.add(c)
				}
				continue
			}
		}
		return errors.Join(err, g.stop())
	}
	g.o.log.Info().Int("consumers", len(g.consumers)).Strs("brokers", g.kafka.Brokers).
		Str("client", string(g.kafka.Client)).Str("group_protocol", string(g.kafka.GroupProtocol)).Msg("turbo running")
	return nil
}

// stop stops every consumer; shutdown_timeout is a hard bound: each Stop
// returns within it. A second call finds them stopped already.
func (g *consumerSet) stop() error {
	stopCtx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	errs := make([]error, len(g.consumers))
	var wg sync.WaitGroup
	for i, c := range g.consumers {
		wg.Go(func() { errs[i] = c.Stop(stopCtx) })
	}
	wg.Wait()
	for _, c := range g.closers {
		_ = c.Close()
	}
	return errors.Join(errs...)
}

// serve runs the consumer set until it ends: it returns the next
// configuration after a reload that validated (the consumers stopped
// gracefully, nil error), or nil and the run's result.
func (g *consumerSet) serve(ctx context.Context, embedded bool) (*config.Config, error) {
	log, o := g.o.log, g.o
	idle := make(chan error, 1)
	var bg sync.WaitGroup
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer func() {
		stopWatching()
		bg.Wait()
	}()
	if o.exitOnIdle {
		bg.Go(func() {
			if err := actors.WaitCaughtUp(watchCtx, g.kafka, g.cfg.Consumers, log); watchCtx.Err() == nil {
				idle <- err
			}
		})
	} else if n := o.node; n != nil && n.node.ExitOnIdle {
		// turbo swarm --exit-on-idle: the node judges, its supervisor stops
		// the swarm; a node that cannot judge says why and goes on.
		bg.Go(func() {
			switch err := actors.WaitCaughtUp(watchCtx, g.kafka, g.cfg.Consumers, log); {
			case err == nil:
				log.Info().Msg("the group committed everything its topics held: telling the supervisor (--exit-on-idle)")
				n.idle.Store(true)
			case watchCtx.Err() == nil:
				log.Error().Err(err).Msg("--exit-on-idle cannot judge progress; this node goes on until the swarm stops")
			}
		})
	}
	// A consumer that Kafka refuses at start-up (a wrong password, an
	// untrusted certificate) ends the run: retrying will not cure it.
	refused := make(chan error, len(g.consumers))
	for _, c := range g.consumers {
		bg.Go(func() {
			select {
			case <-c.Failed():
				refused <- fmt.Errorf("consumer %s: %w", c.Name(), c.Err())
			case <-watchCtx.Done():
			}
		})
	}

	var idleErr, stopErr error
	var next *config.Config
	// A SIGHUP reads the configuration off this loop: a read that blocks (a
	// hung network mount) must not hold up a stop. One read at a time; one
	// that outlives reloadReadTimeout is given up on (its goroutine ends
	// with the read: a read blocked in the kernel cannot be interrupted,
	// and the process does not wait for it to exit).
	var reading chan reloadRead
	var readDeadline <-chan time.Time
	var readTimer *time.Timer
	defer func() {
		if readTimer != nil {
			readTimer.Stop()
		}
	}()
wait:
	for {
		select {
		case <-ctx.Done():
			log.Info().Msg("stopping: signal received")
		case stopErr = <-refused:
			log.Error().Err(stopErr).Msg("stopping: a consumer gave up")
		case <-g.lost:
			log.Warn().Msg("stopping: the swarm supervisor is gone")
			stopErr = errSupervisorGone
		case idleErr = <-idle:
			if idleErr != nil {
				log.Error().Err(idleErr).Msg("stopping: --exit-on-idle cannot judge progress")
			} else {
				log.Info().Msg("stopping: everything consumed and committed")
			}
		case <-o.reload:
			if reading != nil {
				log.Warn().Msg("SIGHUP: the configuration is still being read for the last one; this one adds nothing")
				continue
			}
			reading = make(chan reloadRead, 1)
			go func(into chan<- reloadRead) {
				cfg, err := o.reread()
				into <- reloadRead{cfg, err}
			}(reading)
			readTimer = time.NewTimer(reloadReadTimeout)
			readDeadline = readTimer.C
			continue
		case <-readDeadline:
			readDeadline = nil
			err := fmt.Errorf("%w: reading the configuration did not finish within %s (a hung file system?)", config.ErrInvalid, reloadReadTimeout)
			g.obs.refused(err)
			log.Error().Err(err).Msg("SIGHUP: the configuration was not reloaded; the one loaded before keeps running")
			continue
		case r := <-reading:
			reading = nil
			if readDeadline == nil { // given up on already
				log.Warn().Msg("SIGHUP: the configuration read that timed out has returned; send SIGHUP again to reload")
				continue
			}
			readTimer.Stop()
			readDeadline = nil
			cfg, err := r.cfg, r.err
			if err == nil {
				err = reloadable(cfg, embedded)
			}
			if err != nil {
				g.obs.refused(err)
				log.Error().Err(err).Msg("SIGHUP: the configuration was not reloaded; the one loaded before keeps running")
				continue
			}
			for _, section := range config.RestartOnly(g.cfg, cfg) {
				log.Warn().Str("section", section).Msg("SIGHUP: this section takes effect when the process restarts; the rest of the configuration is reloaded")
			}
			for _, ch := range config.HandlerChanges(g.cfg, cfg) {
				log.Warn().Str("consumer", ch.Consumer).Str("old", string(ch.Old)).Str("new", string(ch.New)).
					Msg("SIGHUP: the consumer's handler type changes: " + string(ch.Old) + " → " + string(ch.New))
			}
			log.Info().Msg("SIGHUP: reloading the configuration: stopping the consumers gracefully")
			next = cfg
		}
		break wait
	}
	// Stop the consumers first: the watchers end with watchCtx, and the idle
	// watcher's Kafka calls have short timeouts, but nothing waits for them
	// before the consumers are stopped.
	stopWatching()
	if next != nil {
		g.obs.reloading()
	} else {
		g.obs.stop()
	}
	err := g.stop()
	bg.Wait()
	g.obs.retire()
	switch {
	case errors.Is(stopErr, kafkanet.ErrRefused):
		// The cause first: what the stop says after it follows from it.
		return nil, errors.Join(stopErr, err)
	case err != nil:
		return nil, fmt.Errorf("stopping: %w", err)
	case idleErr != nil:
		return nil, fmt.Errorf("--exit-on-idle: %w", idleErr)
	}
	return next, stopErr
}

// reloadReadTimeout bounds how long a SIGHUP waits for the configuration
// file to be read and checked; a reload that takes longer is refused. (A
// variable for the tests.)
var reloadReadTimeout = 10 * time.Second

// reloadRead is what reading the configuration again gave.
type reloadRead struct {
	cfg *config.Config
	err error
}

// reloadable refuses a reload that cannot be applied without a restart of
// the process: a switch to or from the embedded broker (its records live in
// this process).
func reloadable(cfg *config.Config, embedded bool) error {
	if cfg.Kafka.IsEmbedded() != embedded {
		return fmt.Errorf("%w: kafka.brokers: switching to or from the embedded broker needs a restart of turbo", config.ErrInvalid)
	}
	return nil
}

func startEmbedded(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*embedded.Broker, error) {
	var topics []string
	for _, c := range cfg.Consumers {
		for _, t := range c.Topics {
			if !config.IsTopicPattern(t) {
				topics = append(topics, t)
			}
		}
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
			Franz: cfg.Kafka.Client == config.ClientFranz,
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
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !colours(w, os.Getenv("NO_COLOR"))}
	}
	timeFormatOnce.Do(func() { zerolog.TimeFieldFormat = time.RFC3339Nano })
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// colours reports whether console log lines written to w may carry ANSI
// colour codes: only on a terminal (the process's standard error sink over
// one), never in a file or a pipe (`make run > log`), and never when
// NO_COLOR is set to anything but the empty string (no-color.org).
func colours(w io.Writer, noColor string) bool {
	if noColor != "" {
		return false
	}
	sink, ok := w.(*logSink)
	if !ok {
		return false
	}
	f, ok := sink.Underlying().(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// timeFormatOnce sets zerolog's process-wide time format once: loggers
// made later (a second in-process run, in tests) read it meanwhile.
var timeFormatOnce sync.Once

// saramaLogger routes sarama's chatter to debug level, on the logger of the
// latest run: sarama.Logger is a process-wide variable its goroutines read
// without synchronisation, so it is set once and what it writes to is
// swapped (a second in-process run, in tests, raced with the first one's
// closing clients). A swap waits for the lines being written with the
// logger it replaces: once it returns, none of them can follow (the exit
// summary is a run's last line).
type saramaLogger struct {
	mu  sync.RWMutex
	log zerolog.Logger
}

var (
	saramaLog     saramaLogger
	saramaLogOnce sync.Once
)

func useSaramaLogger(l zerolog.Logger) {
	saramaLog.mu.Lock()
	saramaLog.log = l
	saramaLog.mu.Unlock()
	saramaLogOnce.Do(func() { sarama.Logger = &saramaLog })
}

func (s *saramaLogger) write(msg func() string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.log.Debug(); e.Enabled() {
		e.Msg(msg())
	}
}

func (s *saramaLogger) Print(v ...any) { s.write(func() string { return fmt.Sprint(v...) }) }
func (s *saramaLogger) Printf(format string, v ...any) {
	s.write(func() string { return fmt.Sprintf(format, v...) })
}
func (s *saramaLogger) Println(v ...any) { s.write(func() string { return fmt.Sprint(v...) }) }

// loadSelected loads the --config file (environment overrides included) and
// applies the consumer and topic filters.
func loadSelected(path string, sel *selection) (*config.Config, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: --config is required", errUsage)
	}
	cfg, err := config.Load(path, os.Environ())
	if err != nil {
		return nil, err
	}
	if err := sel.apply(cfg); err != nil {
		return nil, err
	}
	// The handlers are the configuration's: an output block only they
	// could use, and do not, is refused.
	if err := handlers.CheckOutputs(cfg); err != nil {
		return nil, err
	}
	// What sarama would refuse is a configuration error too, reported now
	// rather than retried as "cannot reach Kafka".
	if err := actors.CheckKafka(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}
