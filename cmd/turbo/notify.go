package main

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/supervisor"
	"github.com/turbokafka/turbo/supervisor/sdnotify"
)

// notifyTick is how often systemd hears the status (more often when its
// watchdog asks for it).
const notifyTick = 5 * time.Second

// startNotifier returns the systemd notifier when turbo runs as a
// Type=notify service, nil otherwise (and when $NOTIFY_SOCKET is unusable,
// which is logged: the service runs on, and systemd says it timed out).
func startNotifier(log zerolog.Logger) *sdnotify.Notifier {
	n, err := sdnotify.FromEnv(os.Getenv, os.Getpid())
	if err != nil {
		log.Warn().Err(err).Msg("systemd notification is off")
		return nil
	}
	if n != nil {
		log.Info().Stringer("watchdog", n.Watchdog()).Msg("reporting to systemd (sd_notify)")
	}
	return n
}

// notifyErrs logs the first failed send and every tenth after it: systemd
// gone away is worth a line, not a line per tick.
func notifyErrs(log zerolog.Logger) func(error) {
	var n atomic.Int64
	return func(err error) {
		if c := n.Add(1); c == 1 || c%10 == 0 {
			log.Warn().Err(err).Int64("failures", c).Msg("cannot notify systemd")
		}
	}
}

// runService is what turbo run tells systemd: ready once every consumer is
// in its group, live while every consumer is (GET /healthz), and the live
// status line.
func runService(gen *atomic.Pointer[consumerSet], s *status) sdnotify.Service {
	consumers := func() []*actors.Consumer {
		if g := gen.Load(); g != nil {
			return g.consumers
		}
		return nil
	}
	return sdnotify.Service{
		Ready: func() bool {
			for _, c := range consumers() {
				if !c.Ready().OK {
					return false
				}
			}
			return true
		},
		Live: func() error {
			for _, c := range consumers() {
				if chk := c.Live(); !chk.OK {
					return fmt.Errorf("consumer %s: %s", c.Name(), chk.Reason)
				}
			}
			return nil
		},
		Status: func() string {
			t := s.total()
			return fmt.Sprintf("%d consumers: processed %d, in flight %d, lag %d, partitions %d", len(consumers()), t.Processed, t.InFlight, t.Lag, t.Assigned)
		},
	}
}

// swarmService is what turbo swarm tells systemd: ready once every node is
// (GET /readyz), live while the supervisor's loop runs and every node
// reports in time (GET /healthz).
func swarmService(sup *supervisor.Supervisor) sdnotify.Service {
	return sdnotify.Service{
		Ready: func() bool { return sup.Ready().OK },
		Live: func() error {
			if chk := sup.Live(); !chk.OK {
				return errors.New(chk.Reason)
			}
			return nil
		},
		Status: func() string {
			nodes := sup.Status()
			running, processed := 0, int64(0)
			for _, n := range nodes {
				if n.State == "running" {
					running++
				}
				processed += n.Processed
			}
			return fmt.Sprintf("%d of %d nodes running: processed %d", running, len(nodes), processed)
		},
	}
}
