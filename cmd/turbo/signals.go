package main

import (
	"io"
	"os"
	"syscall"
	"time"
)

// stopSignals ask turbo to stop gracefully, in every mode: SIGINT (^C),
// SIGTERM (kill, Kubernetes, systemd) and SIGQUIT (the stop signal of some
// process managers; a goroutine dump is SIGABRT's job). SIGHUP reloads the
// configuration of turbo run and turbo swarm (the convention of daemons,
// and systemd's ExecReload); it stops the other commands gracefully.
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalVerdict is what one signal means, given the ones before it.
type signalVerdict int

const (
	stopGracefully  signalVerdict = iota + 1 // the first request: stop in order
	alreadyStopping                          // the same request again: nothing more to do
	stopNow                                  // a second request: exit (a swarm: kill every node) at once
	reload                                   // SIGHUP: read the configuration again and apply it
	ignored                                  // SIGHUP in a swarm node: its supervisor reloads the swarm
)

// signalPolicy counts stop requests. The first signal stops gracefully; any
// later one means "now" — except SIGTERM in a swarm node, which never
// escalates. A node gets SIGTERM from its supervisor (which escalates with
// SIGKILL after shutdown_timeout, not with a second SIGTERM) and from
// Pdeathsig when its supervisor dies — and Linux sends the parent-death
// signal once per supervisor thread that exits while being the node's
// parent, so one SIGKILL of the supervisor reached each node as several
// SIGTERMs: nodes exited through "second signal, exiting now" with 136 of
// 280 finished records committed. Repeated SIGTERMs are one request; an
// operator who wants a node gone at once sends SIGINT, SIGQUIT or SIGKILL.
type signalPolicy struct {
	node     bool // this process is a swarm node
	reloads  bool // the command reloads on SIGHUP (turbo run and turbo swarm)
	stopping bool
}

func (p *signalPolicy) judge(sig os.Signal) signalVerdict {
	switch {
	case sig == syscall.SIGHUP && p.node:
		// The supervisor restarts its nodes one at a time on its own
		// SIGHUP; one that reaches a node (a terminal's hang-up sent to
		// the whole process group) must not stop it.
		return ignored
	case sig == syscall.SIGHUP && p.reloads && p.stopping:
		return alreadyStopping
	case sig == syscall.SIGHUP && p.reloads:
		return reload
	case !p.stopping:
		p.stopping = true
		return stopGracefully
	case p.node && sig == syscall.SIGTERM:
		return alreadyStopping
	default:
		return stopNow
	}
}

// exitFlushWait bounds how long queued standard error output may delay an
// exit: what a blocked stderr still holds then is lost, the exit is not.
const exitFlushWait = 150 * time.Millisecond

// exitNow ends the process at once (a second signal), giving what is
// queued for stderr a short, bounded chance.
func exitNow(stderr io.Writer, code int) {
	if s, ok := stderr.(*logSink); ok {
		s.Close(exitFlushWait)
	}
	os.Exit(code)
}
