package actors

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/turbokafka/turbo/actors/backoff"
)

// restarter owns one consumer's tree. On any failure it tears the
// whole tree down — cancelling the running handlers and waiting for them,
// bounded by shutdown_timeout — and starts a new generation after an
// exponential backoff with jitter. A new generation is a clean slate: new
// actors with new mailboxes, a new consumer group session, new watermarks.
//
// Before a failed generation goes, what it finished is committed, unless an
// actor itself failed (its bookkeeping is then suspect): the tree halts (no
// record starts any more), every partition is revoked the way a graceful
// stop revokes it — its cancelled handlers return, its watermark and commit
// metadata are committed — and only then are the actors stopped. Without
// that, a record failing for good soon after each assignment made a restart
// loop that never committed anything and handled the healthy records again
// after every restart (0 of 400 committed in 120 s).
//
// protoactor's restart directive would keep the failed actor's mailbox, so the
// restarter never restarts an actor: it stops the orchestrator and spawns a new one
// when the old one has terminated.
type restarter struct {
	spec    *treeSpec
	policy  backoff.Policy
	self    *actor.PID
	timers  *scheduler.TimerScheduler
	stopped chan struct{} // closed in Stopped: the Consumer waits on it

	state      backoff.State
	gen        int
	child      *actor.PID
	cancel     context.CancelFunc
	startedAt  time.Time
	stopping   bool // the child was told to stop; Terminated not seen yet
	resigning  bool // a failed generation commits what it finished before it stops
	reclaiming bool // resigning for a seek (reclaimTree): no failure, the next generation starts at once
	drain      *drainTree
	expired    bool // the drain ran out of time: torn down without its final commits
	abandoned  int  // generations given up on: a handler never returned
	cancelT    []scheduler.CancelFunc
}

func (s *restarter) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *treeFailed:
		switch {
		case m.gen != s.gen:
		case errors.Is(m.err, errDrainTimeout):
			s.drainExpired(c)
		default:
			s.fail(c, m)
		}
	case *actor.Terminated:
		if s.child != nil && m.Who.Equal(s.child) {
			s.childGone(c)
		}
	case *restartTree:
		if m.gen == s.gen+1 && s.child == nil && s.drain == nil {
			s.startGeneration(c)
		}
	case *abandonWait:
		if m.gen == s.gen && s.stopping {
			s.spec.log.Error().Int("generation", s.gen).
				Msg("handlers did not return after cancellation; abandoning them and going on")
			s.abandoned++
			s.childGone(c)
		}
	case *drainTree:
		s.handleDrain(c, m)
	case *pingTree:
		if s.child != nil && !s.stopping {
			c.Forward(s.child)
		} else {
			c.Respond(&treePong{})
		}
	case *controlChanged:
		if s.child != nil && !s.stopping {
			c.Forward(s.child) // a generation started later reads the flag itself
		}
	case *skipRecord:
		if s.child != nil && !s.stopping {
			c.Forward(s.child) // else unanswered: Skip says the tree did not answer
		}
	case *seekPartitions:
		if s.child != nil && !s.stopping && !s.resigning && s.drain == nil {
			c.Forward(s.child)
		} else {
			m.reply <- seekAnswer{err: ErrSeekBusy}
		}
	case *reclaimTree:
		if m.gen == s.gen {
			s.reclaim(c)
		}
	case *treeDrained:
		if m.gen == s.gen && s.child != nil && !s.stopping {
			s.stopChild(c)
		}
	case *actor.Started:
		s.self = c.Self()
		s.timers = scheduler.NewTimerScheduler(c)
		s.startGeneration(c)
	case *actor.Stopping:
		for _, cancel := range s.cancelT {
			cancel()
		}
		if s.cancel != nil {
			s.cancel()
		}
	case *actor.Stopped:
		close(s.stopped)
	case *actor.Restarting:
	default:
		unexpected(c)
	}
}

// HandleFailure implements actor.SupervisorStrategy for the orchestrator: any
// failure escalated from the tree (a panic in an actor) restarts the tree. It
// runs on the restarter's own mailbox, so it may use the restarter's state;
// it only forwards, to keep one path for every failure.
func (s *restarter) HandleFailure(sys *actor.ActorSystem, _ actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	if s.child == nil || !child.Equal(s.child) {
		return
	}
	sys.Root.Send(s.self, &treeFailed{gen: s.gen, err: &FailureError{Reason: reason}})
}

func (s *restarter) startGeneration(c actor.Context) {
	s.gen++
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	o := &orchestrator{spec: s.spec, gen: s.gen, ctx: ctx}
	s.child = c.Spawn(s.spec.props(o, actor.WithSupervisor(escalate)))
	s.startedAt = time.Now()
	s.spec.log.Debug().Int("generation", s.gen).Msg("consumer tree started")
}

func (s *restarter) fail(c actor.Context, m *treeFailed) {
	if s.stopping || s.child == nil {
		return
	}
	if s.resigning {
		// The commit before the restart ran out of time, or an actor
		// failed meanwhile: stop without it (and restart after a backoff,
		// a seek's restart included).
		s.reclaiming = false
		s.spec.log.Error().Err(m.err).Int("generation", s.gen).Msg("consumer tree failed while committing before its restart; stopping it")
		s.stopChild(c)
		return
	}
	s.spec.stats.restarts.Add(1)
	s.cancel() // running handlers see their context cancelled
	if !m.commit {
		s.spec.log.Error().Err(m.err).Int("generation", s.gen).Msg("consumer tree failed; stopping it")
		s.stopChild(c)
		return
	}
	s.spec.log.Error().Err(m.err).Int("generation", s.gen).Msg("consumer tree failed; committing what finished, then restarting it")
	s.resigning = true
	c.Send(s.child, &startDrain{halt: true})
	if s.drain == nil { // a drain in progress has its own bound
		s.cancelT = append(s.cancelT, s.timers.SendOnce(s.spec.shutdownTimeout+drainGrace, s.self, &treeFailed{gen: s.gen, err: errResignTimeout}))
	}
}

// reclaim restarts the tree after a seek: no record starts any more, the
// running ones finish (they are not cancelled: nothing failed), every
// partition is revoked with its final commit — a moved one's new position —
// and the next generation starts at once, without a backoff or a restart
// counted, and reads from there.
func (s *restarter) reclaim(c actor.Context) {
	if s.stopping || s.resigning || s.drain != nil || s.child == nil {
		return
	}
	s.spec.log.Info().Int("generation", s.gen).Msg("restarting the consumer tree to read moved partitions from their new positions")
	s.resigning, s.reclaiming = true, true
	c.Send(s.child, &startDrain{halt: true})
	s.cancelT = append(s.cancelT, s.timers.SendOnce(s.spec.shutdownTimeout+drainGrace, s.self, &treeFailed{gen: s.gen, err: errResignTimeout}))
}

var errResignTimeout = errors.New("actors: committing before the restart did not finish within shutdown_timeout")

// stopChild stops the tree and bounds the wait for it: a handler that ignores
// its cancelled context would otherwise hold the consumer forever. During a
// drain the handlers have had shutdown_timeout already, so the wait is short.
func (s *restarter) stopChild(c actor.Context) {
	s.stopping = true
	// Whatever still runs now (after a drain: records of revocations that
	// expired) is cancelled, so cooperative handlers end at once.
	s.cancel()
	c.Stop(s.child)
	wait := s.spec.shutdownTimeout
	switch {
	case s.drain != nil:
		wait = newStopBudget(s.spec.shutdownTimeout).abandon
	case s.resigning:
		wait = drainGrace
	}
	s.cancelT = append(s.cancelT, s.timers.SendOnce(wait, s.self, &abandonWait{gen: s.gen}))
}

// drainExpired ends a drain that ran out of time: the handlers still
// running are cancelled and the tree stopped, without counting a restart
// (none follows).
func (s *restarter) drainExpired(c actor.Context) {
	if s.drain == nil || s.stopping || s.child == nil {
		return
	}
	s.expired = s.drainFailed()
	if s.expired {
		s.spec.log.Error().Err(errDrainTimeout).Int64("partitions", s.spec.stats.assigned.Load()).Bool("kafka_reached", s.spec.stats.reached.Load()).
			Msg("stopping without the final commits")
	} else {
		s.spec.log.Warn().Err(errDrainTimeout).
			Msg("every partition was released, but the consumer group did not return (a rebalance in progress); stopping it")
	}
	s.stopChild(c)
}

// drainFailed judges a drain that ran out of time: it failed (the stop
// exits 1) when a partition was still owned, whose finished records may not
// be committed, or when Kafka never answered at all, so nothing this
// process was asked to do happened. It did not when every partition had
// been released — each one's final watermark was handed to its claim to
// commit — and the group's goroutine merely had not returned yet: a member
// stuck in a JoinGroup holds nothing, and sarama cannot leave before the
// join is answered (seen in the chaos soak, when another member was killed
// during the rebalance).
func (s *restarter) drainFailed() bool {
	return s.spec.stats.assigned.Load() > 0 || !s.spec.stats.reached.Load()
}

// drainGrace bounds the teardown's wait for the consumer group's goroutine
// (twice stopBudget.groupCloseWait at most).
const drainGrace = time.Second

func (s *restarter) childGone(c actor.Context) {
	reclaim := s.reclaiming
	s.stopping = false
	s.resigning, s.reclaiming = false, false
	s.child = nil
	s.cancel()
	for _, cancel := range s.cancelT {
		cancel()
	}
	s.cancelT = s.cancelT[:0]
	if s.drain != nil {
		s.drain.done <- drainResult{abandoned: s.abandoned, expired: s.expired}
		return
	}
	if reclaim {
		s.startGeneration(c)
		return
	}
	var delay time.Duration
	s.state, delay = s.policy.Next(s.state, time.Since(s.startedAt), rand.Float64())
	s.spec.log.Warn().Stringer("restart_in", delay).Int("failures", s.state.Failures).Msg("restarting the consumer tree")
	s.cancelT = append(s.cancelT, s.timers.SendOnce(delay, s.self, &restartTree{gen: s.gen + 1}))
}

func (s *restarter) handleDrain(c actor.Context, m *drainTree) {
	if s.drain != nil {
		return
	}
	s.drain = m
	switch {
	case s.child == nil: // between generations: nothing runs
		for _, cancel := range s.cancelT {
			cancel()
		}
		m.done <- drainResult{abandoned: s.abandoned}
	case s.stopping, s.resigning: // already tearing down (and bounded); childGone answers
	default:
		c.Send(s.child, &startDrain{})
		// The drain is bounded too, within shutdown_timeout (stopBudget):
		// past its deadline the handlers are cancelled and the tree stopped.
		s.cancelT = append(s.cancelT, s.timers.SendOnce(newStopBudget(s.spec.shutdownTimeout).drain, s.self, &treeFailed{gen: s.gen, err: errDrainTimeout}))
	}
}
