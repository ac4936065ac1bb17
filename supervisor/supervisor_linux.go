package supervisor

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
)

type eventKind int

const (
	evExit eventKind = iota
	evHello
	evReport
	evStarted
)

type event struct {
	kind    eventKind
	index   int
	pid     int
	exit    exitStatus
	err     error // evExit: waiting failed; evStarted: starting failed
	proc    *process
	version string
	report  *swarmpb.Report
}

// run is one Run's state, owned by the control loop goroutine.
type run struct {
	*Supervisor
	cfg      config.Swarm
	log      zerolog.Logger
	slots    []*slot
	budget   restartBudget
	pause    pauseDetector
	events   chan event
	quit     chan struct{}
	health   *healthServer
	spawner  *spawner
	waiters  sync.WaitGroup
	devnull  *os.File
	stopping bool  // shutting down: nothing starts again
	result   error // what Run returns
	roll     rolling
	config   web.ConfigState
	// gateOpen: every node of the first start said hello, or gateBy
	// passed; nodes started before are asked to wait for their Start
	// frame (Link.AwaitStart), which they get once it is open.
	gateOpen bool
	gateBy   time.Time
}

// Run starts the nodes and supervises them until ctx is cancelled (then it
// stops every node: TERM, and KILL after ShutdownTimeout), Kill is called, or
// the restart budget runs out. It returns nil when every node stopped
// cleanly, ErrUnclean or ErrRestartBudget otherwise. Run waits for every
// process it started and every goroutine it owns.
func (s *Supervisor) Run(ctx context.Context) error {
	r := &run{
		Supervisor: s,
		cfg:        s.o.Swarm,
		log:        s.o.Log,
		budget:     restartBudget{max: s.o.Swarm.MaxRestarts, window: s.o.Swarm.RestartWindow},
		pause:      pauseDetector{interval: s.o.Swarm.SupervisionInterval},
		events:     make(chan event, 4*s.o.Swarm.Nodes),
		quit:       make(chan struct{}),
	}
	var err error
	if r.devnull, err = os.Open(os.DevNull); err != nil {
		return err
	}
	defer r.devnull.Close()
	if r.health, err = listenHealth(r.log, r.events, r.quit, r.cfg.NodeReportTimeout); err != nil {
		return err
	}
	s.socket.Store(r.health.path)
	lim := web.Limits{MaxConns: maxHTTPConns}
	if soft, open := fdUsage(); open >= 0 {
		lim.MaxConns = httpConnCap(soft, open, r.cfg.Nodes)
		if s.o.HTTP.Listen != "" && lim.MaxConns < maxHTTPConns {
			r.log.Warn().Uint64("open_files_limit", soft).Int("open_files", open).Int("nodes", r.cfg.Nodes).Int("max_connections", lim.MaxConns).
				Msg("the open-files limit is tight: http.listen holds fewer connections, to keep descriptors for node restarts")
		}
	}
	tc, err := s.o.HTTP.ServerTLS()
	if err != nil {
		r.health.close()
		return err
	}
	var ctl web.Controller
	if s.o.HTTP.Control {
		ctl = nodeRouter{r.health}
	}
	srv, err := web.Start(web.Options{
		Addr: s.o.HTTP.Listen, Key: "http.listen", Gatherer: s.gatherer(), Source: httpSource{s}, Limits: lim, TLS: tc, Log: r.log,
		Control: ctl, ControlTokenFile: s.o.HTTP.ControlTokenFile,
	})
	if err != nil {
		r.health.close()
		return err
	}
	s.httpAddr.Store(srv.Addr())
	r.spawner = newSpawner()
	now := time.Now()
	r.config.LoadedAt = now
	s.config.Store(&web.ConfigState{LoadedAt: now})
	r.roll.current = -1
	for i := range r.cfg.Nodes {
		r.slots = append(r.slots, &slot{index: i, startAt: now})
	}
	// One node has no one to wait for.
	r.gateOpen, r.gateBy = r.cfg.Nodes == 1, now.Add(r.cfg.NodeReportTimeout)
	r.log.Info().Int("nodes", r.cfg.Nodes).Str("socket", r.health.path).Msg("swarm starting")
	r.loop(ctx)
	close(r.quit)
	r.health.close()
	r.waiters.Wait()
	r.spawner.stop()
	srv.Stop()
	r.log.Info().AnErr("result", r.result).Msg("swarm stopped")
	return r.result
}

func (r *run) loop(ctx context.Context) {
	tick := time.NewTicker(r.cfg.SupervisionInterval)
	defer tick.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	done := ctx.Done()
	// Local, like done: set to nil once seen (a closed channel is always
	// ready). Not r.kill, which is the Supervisor's own field: the run
	// embeds it, and writing through the embedding would change Kill's
	// channel under it.
	kill := r.kill
	reload := r.o.Reload
	// Validate reads the configuration: off the loop, so that a read that
	// blocks (a hung file system) holds up neither supervision nor a stop.
	// One at a time; its goroutine ends with the read (one blocked in the
	// kernel cannot be interrupted, and the swarm does not wait for it).
	validated := make(chan error, 1)
	validating := false
	readWait := cmp.Or(r.o.reloadReadTimeout, ReloadReadTimeout)
	var readDeadline <-chan time.Time // while a read runs, until its deadline
	var readTimer *time.Timer
	defer func() {
		if readTimer != nil {
			readTimer.Stop()
		}
	}()
	for {
		now := time.Now()
		r.startDue(now)
		r.rollOn(now)
		r.killOverdue(now)
		if r.stopping && r.allGone() {
			r.publish(time.Now())
			return
		}
		wake.Reset(r.nextWake(now))
		// Observed before and after every wait, so that the loop's own
		// work (a fork) and its waits are both measured.
		r.noticePause(time.Now())
		select {
		case <-done:
			done = nil
			r.log.Info().Msg("swarm stopping: signal")
			r.stopAll(time.Now(), nil)
		case <-kill:
			kill = nil
			r.killAll()
		case <-reload:
			switch v := r.o.Validate; {
			case validating:
				r.log.Warn().Msg("SIGHUP: the configuration is still being read for the last one; this one adds nothing")
			case v == nil:
				r.reload(time.Now(), nil)
			default:
				validating = true
				readTimer = time.NewTimer(readWait)
				readDeadline = readTimer.C
				go func() { validated <- v() }()
			}
		case <-readDeadline:
			readDeadline = nil
			r.reload(time.Now(), fmt.Errorf("reading the configuration did not finish within %s (a hung file system?)", readWait))
		case err := <-validated:
			validating = false
			if readDeadline == nil { // given up on already
				r.log.Warn().Msg("SIGHUP: the configuration read that timed out has returned; send SIGHUP again to reload")
				break
			}
			readTimer.Stop()
			readDeadline = nil
			r.reload(time.Now(), err)
		case e := <-r.events:
			r.noticePause(time.Now())
			r.handle(time.Now(), e)
		case <-tick.C:
			r.noticePause(time.Now())
			r.supervise(time.Now())
		case <-wake.C:
		}
	}
}

// noticePause runs on every wake of the loop, before anything is judged: a
// gap in which the supervisor itself did not run is not the nodes' silence
// (their reports wait unread on the socket meanwhile), so every node is
// forgiven it.
func (r *run) noticePause(now time.Time) {
	missed := r.pause.wake(now)
	if missed <= 0 {
		return
	}
	r.log.Warn().Str("event", "swarm.manager.paused").Stringer("missed", missed).Stringer("supervision_interval", r.cfg.SupervisionInterval).
		Msg("the supervisor did not run for a while (stopped, frozen or starved): that time does not count as node silence")
	for _, sl := range r.slots {
		sl.forgive(missed)
	}
}

// nextWake is how long until the next start or kill deadline.
func (r *run) nextWake(now time.Time) time.Duration {
	next := now.Add(time.Hour)
	for _, sl := range r.slots {
		switch {
		case sl.state == slotWaiting && !r.stopping && sl.startAt.Before(next):
			next = sl.startAt
		case sl.state == slotStopping && !sl.killed && sl.killAt.Before(next):
			next = sl.killAt
		}
	}
	return max(next.Sub(now), 0)
}

func (r *run) allGone() bool {
	for _, sl := range r.slots {
		if sl.proc != nil {
			return false
		}
	}
	return true
}

// startDue starts every waiting slot whose time has come.
func (r *run) startDue(now time.Time) {
	if r.stopping {
		return
	}
	for _, sl := range r.slots {
		if sl.state == slotWaiting && !sl.startAt.After(now) {
			r.start(now, sl)
		}
	}
}

func (r *run) start(now time.Time, sl *slot) {
	r.log.Info().Str("event", "swarm.manager.before_fork").Int("node", sl.index).Msg("starting node")
	env := nodeEnviron(r.o.Env, Node{
		Index: sl.index, Nodes: r.cfg.Nodes, Socket: r.health.path, ExitOnIdle: r.o.ExitOnIdle,
		// Metrics and status make a report up to maxFrame instead of 200
		// bytes: nodes send them only when someone serves them.
		Observe:    r.o.HTTP.Listen != "",
		AwaitStart: !r.gateOpen,
	})
	if lim := r.cfg.MemoryLimit; lim > 0 && !hasEnv(r.o.Env, "GOMEMLIMIT") {
		// The GC pushes back a little under the limit the supervisor
		// enforces, so a node near it slows down before it is restarted.
		env = append(env, "GOMEMLIMIT="+strconv.FormatInt(int64(lim)*9/10, 10))
	}
	files := []uintptr{r.devnull.Fd(), r.o.Stdout.Fd(), r.o.Stderr.Fd()}
	p, err := r.spawner.start(r.exe, append([]string{r.exe}, r.o.Args...), env, files, func(pid int) { r.health.admit(pid, sl.index) })
	if err != nil && ownResourceErr(err) {
		r.startLater(now, sl, err)
		return
	}
	if err != nil {
		r.log.Error().Err(err).Int("node", sl.index).Msg("node did not start")
		sl.lastExit = "did not start: " + err.Error()
		r.exited(now, sl)
		return
	}
	sl.startFails = 0
	sl.proc, sl.pid, sl.state, sl.started = p, p.pid, slotStarting, now
	sl.missed = 0
	sl.lastSeen, sl.report, sl.status, sl.detail, sl.memOver, sl.killed = time.Time{}, nil, swarmpb.Status_STATUS_OK, "", 0, false
	sl.stopCause = causeExit
	sl.awaitsStart = !r.gateOpen
	r.waiters.Add(1)
	go func() {
		defer r.waiters.Done()
		st, err := p.wait()
		e := event{kind: evExit, index: sl.index, pid: p.pid, exit: st, err: err}
		// The loop always receives exits: it runs until every node is gone.
		r.events <- e
	}()
	r.log.Info().Str("event", "swarm.manager.after_fork").Int("node", sl.index).Int("pid", p.pid).Int("restarts", sl.restarts).Msg("node started")
	if h := r.o.hooks.AfterFork; h != nil {
		h(sl.index, p.pid)
	}
}

// startLater handles a start that failed for want of the supervisor's own
// resources (ownResourceErr): the node is not to blame, so it does not count
// against max_restarts — measured before, a crowd of idle liveness
// connections plus one node kill made every restart fail with EMFILE, used
// up max_restarts and stopped the whole swarm. The slot keeps waiting and
// is tried again with a growing delay; each failure is logged loudly with
// the descriptor figures, since an operator must fix the cause.
func (r *run) startLater(now time.Time, sl *slot, err error) {
	sl.startFails++
	delay := startRetryDelay(sl.startFails)
	sl.startAt = now.Add(delay)
	sl.lastExit = "did not start (the supervisor is out of resources; retrying): " + err.Error()
	r.log.Error().Err(err).Str("event", "swarm.manager.start_failed").Int("node", sl.index).Int("attempt", sl.startFails).
		Stringer("retry_in", delay).Func(fdFields).
		Msg("node did not start: the supervisor itself is out of resources (open files, processes or memory); " +
			"retrying, not counted against max_restarts; raise `ulimit -n` or find what holds the supervisor's descriptors")
}

func hasEnv(env []string, name string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

func (r *run) handle(now time.Time, e event) {
	sl := r.slots[e.index]
	if sl.proc == nil || sl.pid != e.pid {
		return // about a process already gone
	}
	switch e.kind {
	case evExit:
		r.health.forget(e.pid)
		sl.proc = nil
		if e.err != nil {
			sl.lastExit = "wait failed: " + e.err.Error()
		} else {
			sl.lastExit = e.exit.String()
		}
		clean := e.err == nil && (e.exit.clean() || stoppedBeforeStart(sl, e.exit))
		if r.stopping && !clean && r.result == nil {
			r.result = ErrUnclean
		}
		lvl := r.log.Warn()
		if clean && (r.stopping || sl.stopCause == causeReload) {
			lvl = r.log.Info()
		}
		lvl.Int("node", sl.index).Int("pid", e.pid).Str("exit", sl.lastExit).Msg("node exited")
		r.exited(now, sl)
	case evHello:
		sl.heard(now)
		if sl.state == slotStarting {
			sl.state = slotRunning
		}
		r.log.Info().Int("node", sl.index).Int("pid", e.pid).Str("version", e.version).Msg("node joined")
		r.openGate(now)
		r.release(sl)
	case evReport:
		sl.heard(now)
		sl.report = e.report
		if sl.state == slotStarting {
			sl.state = slotRunning
		}
		if sl.state == slotRunning {
			sl.status, sl.detail = e.report.Status, e.report.Detail
			if e.report.Status != swarmpb.Status_STATUS_OK {
				r.stop(now, sl, e.report.Status, e.report.Detail)
			}
		}
		if r.o.ExitOnIdle && e.report.Idle && !r.stopping {
			r.log.Info().Int("node", sl.index).Msg("swarm stopping: the group committed everything its topics held (--exit-on-idle)")
			r.stopAll(now, nil)
		}
	}
}

// exited decides what follows a node's exit: a restart after
// node_restart_timeout within the budget, or the end of the swarm.
func (r *run) exited(now time.Time, sl *slot) {
	sl.state, sl.pid = slotWaiting, 0
	if r.stopping {
		return
	}
	if sl.stopCause == causeReload {
		sl.restarted()
		sl.startAt = now // at once: the swarm is a node short meanwhile
		return
	}
	if !r.budget.allow(now) {
		r.log.Error().Int("node", sl.index).Int("max_restarts", r.cfg.MaxRestarts).Stringer("restart_window", r.cfg.RestartWindow).
			Msg("restart budget exhausted: stopping the swarm")
		r.stopAll(now, ErrRestartBudget)
		return
	}
	sl.restarted()
	sl.startAt = now.Add(r.cfg.NodeRestartTimeout)
}

// openGate opens the start gate once every node has said hello, or when
// gateBy has passed (a node that cannot start must not hold the others),
// and lets go the nodes that joined.
func (r *run) openGate(now time.Time) {
	if r.gateOpen {
		return
	}
	waiting := 0
	for _, sl := range r.slots {
		if sl.state != slotRunning {
			waiting++
		}
	}
	if waiting > 0 && now.Before(r.gateBy) {
		return
	}
	r.gateOpen = true
	if waiting == 0 {
		r.log.Info().Msg("every node joined: they join their consumer groups together")
	} else {
		r.log.Warn().Int("not_yet_joined", waiting).Stringer("node_report_timeout", r.cfg.NodeReportTimeout).
			Msg("not every node joined within node_report_timeout: those that did join their consumer groups now")
	}
	for _, sl := range r.slots {
		r.release(sl)
	}
}

// release sends a node waiting for its start the Start frame, once the gate
// is open and the node has said hello (it has a connection to send it on).
func (r *run) release(sl *slot) {
	if !r.gateOpen || !sl.awaitsStart || sl.state != slotRunning {
		return
	}
	sl.awaitsStart = false
	if err := r.health.start(sl.pid); err != nil {
		r.log.Warn().Err(err).Int("node", sl.index).Int("pid", sl.pid).
			Msg("start frame not sent: the node starts when its wait ends (node_report_timeout)")
	}
}

// supervise is the periodic check: memory from /proc, silence, reports.
func (r *run) supervise(now time.Time) {
	r.openGate(now)
	for _, sl := range r.slots {
		if sl.proc == nil {
			continue
		}
		if rss, err := residentBytes(sl.pid); err == nil {
			sl.sampleMemory(rss, r.cfg.MemoryLimit)
		}
		if sl.state != slotStarting && sl.state != slotRunning {
			continue
		}
		if st, detail := sl.judge(now, r.cfg); st != swarmpb.Status_STATUS_OK {
			sl.status, sl.detail = st, detail
			r.stop(now, sl, st, detail)
		}
	}
	nodes := r.publish(now)
	r.log.Debug().Str("event", "swarm.manager.control").Int("nodes", len(nodes)).Msg("supervision")
	if h := r.o.hooks.Control; h != nil {
		h(nodes)
	}
}

func (r *run) publish(now time.Time) []NodeStatus {
	v := &view{at: now, healthy: true, stopping: r.stopping, budgetLeft: r.budget.remaining(now)}
	for _, sl := range r.slots {
		v.nodes = append(v.nodes, sl.snapshot(now))
		nv := nodeView{state: sl.state, restartsBy: sl.restartsBy}
		if sl.proc != nil {
			nv.report = sl.report // never changed once received: shared, not copied
		}
		if sl.state == slotRunning || sl.state == slotStarting {
			why, overdue := silenceVerdict(sl.index, sl.silence(now), r.cfg)
			nv.silent = why
			if overdue && v.healthy {
				v.healthy, v.why = false, why
			}
		}
		v.obs = append(v.obs, nv)
	}
	if r.stopping {
		v.healthy, v.why = false, "the swarm is stopping"
	}
	r.view.Store(v)
	return v.nodes
}

// stop asks a node to stop: SIGTERM, then SIGCONT so that a stopped process
// acts on it; SIGKILL follows at killAt.
func (r *run) stop(now time.Time, sl *slot, status swarmpb.Status, detail string) {
	if sl.proc == nil || sl.state == slotStopping {
		return
	}
	lvl := r.log.Warn()
	if status == swarmpb.Status_STATUS_OK {
		lvl = r.log.Info() // a shutdown, not a failure
	}
	lvl.Str("event", "swarm.manager.stopping").Int("node", sl.index).Int("pid", sl.pid).
		Int32("status", int32(status)).Str("status_name", status.String()).Str("detail", detail).Msg("stopping node")
	if h := r.o.hooks.Stopping; h != nil {
		h(sl.index, sl.pid, status, detail)
	}
	if status != swarmpb.Status_STATUS_OK {
		sl.stopCause = causeOf(status)
	}
	sl.state, sl.killAt = slotStopping, now.Add(r.o.ShutdownTimeout)
	if err := sl.proc.signal(syscall.SIGTERM); err != nil {
		r.log.Warn().Err(err).Int("node", sl.index).Msg("SIGTERM failed")
	}
	_ = sl.proc.signal(syscall.SIGCONT)
}

// stopAll stops every node and starts nothing more; cause, if not nil,
// becomes Run's result.
func (r *run) stopAll(now time.Time, cause error) {
	if cause != nil && r.result == nil {
		r.result = cause
	}
	r.stopping = true
	for _, sl := range r.slots {
		r.stop(now, sl, swarmpb.Status_STATUS_OK, "swarm shutdown")
	}
}

func (r *run) killOverdue(now time.Time) {
	for _, sl := range r.slots {
		if sl.state == slotStopping && sl.proc != nil && !sl.killed && !now.Before(sl.killAt) {
			r.terminate(sl)
		}
	}
}

func (r *run) killAll() {
	r.log.Warn().Msg("swarm killing every node: second signal")
	if r.result == nil {
		r.result = ErrUnclean
	}
	r.stopping = true
	for _, sl := range r.slots {
		if sl.proc != nil {
			r.terminate(sl)
		}
	}
}

func (r *run) terminate(sl *slot) {
	r.log.Warn().Str("event", "swarm.manager.terminating").Int("node", sl.index).Int("pid", sl.pid).Msg("killing node")
	if h := r.o.hooks.Terminating; h != nil {
		h(sl.index, sl.pid)
	}
	if err := sl.proc.signal(syscall.SIGKILL); err != nil {
		r.log.Warn().Err(err).Int("node", sl.index).Msg("SIGKILL failed")
	}
	if r.stopping && r.result == nil {
		r.result = ErrUnclean
	}
	sl.state, sl.killed = slotStopping, true // the exit event follows
}

// rolling is a rolling restart in progress: the nodes still to restart, and
// the one restarted last, until it is back.
type rolling struct {
	pending []int
	current int // the node restarted last, until it is running and ready; -1: none
}

// reload handles SIGHUP once the configuration was checked (invalid: what
// Validate said): when it validates, every node is restarted, one at a
// time (rollOn); otherwise the nodes keep running what they read, and the
// refusal is logged and shown in /status.
func (r *run) reload(now time.Time, invalid error) {
	if r.stopping {
		return
	}
	if invalid != nil {
		r.config.Refused++
		r.config.LastError = invalid.Error()
		r.publishConfig()
		r.log.Error().Err(invalid).Msg("SIGHUP: the configuration was not reloaded; the nodes keep running the one they read")
		return
	}
	r.config.Reloads++
	r.config.LoadedAt = now
	r.publishConfig()
	r.roll.pending = r.roll.pending[:0]
	for i := range r.slots {
		r.roll.pending = append(r.roll.pending, i)
	}
	r.log.Info().Int("nodes", len(r.slots)).Msg("SIGHUP: the configuration is valid: restarting the nodes one at a time")
	r.rollOn(now)
}

func (r *run) publishConfig() {
	c := r.config
	r.Supervisor.config.Store(&c)
}

// rollOn moves a rolling restart on: once the node restarted last is
// running again and reports ready (back in its groups), the next one is
// stopped gracefully; its restart follows at once and does not count
// against max_restarts.
func (r *run) rollOn(now time.Time) {
	if r.stopping {
		return
	}
	if i := r.roll.current; i >= 0 {
		sl := r.slots[i]
		if sl.state != slotRunning || sl.report == nil || !sl.report.Ready {
			return
		}
		r.roll.current = -1
		r.log.Info().Int("node", i).Int("pid", sl.pid).Msg("reload: node back and ready")
		if len(r.roll.pending) == 0 {
			r.log.Info().Msg("reload done: every node runs the configuration read at its start")
		}
	}
	if len(r.roll.pending) == 0 {
		return
	}
	i := r.roll.pending[0]
	r.roll.pending = r.roll.pending[1:]
	r.roll.current = i
	sl := r.slots[i]
	if sl.proc == nil || sl.state == slotStopping {
		return // starting again anyway: it reads the configuration as it is now
	}
	sl.stopCause = causeReload
	r.stop(now, sl, swarmpb.Status_STATUS_OK, "configuration reload")
}
