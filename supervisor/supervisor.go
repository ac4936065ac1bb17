package supervisor

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
)

// Options configure a Supervisor.
type Options struct {
	// Swarm is the swarm section; Swarm.Nodes processes run.
	Swarm config.Swarm
	// ShutdownTimeout is how long a node has between SIGTERM and SIGKILL.
	ShutdownTimeout time.Duration
	// Path is the node executable; empty means this program (nodes are
	// re-executed copies of it: Go cannot fork without exec).
	Path string
	// Args are the node's arguments, without the program name.
	Args []string
	// Env is the nodes' base environment; nil means this process's.
	Env []string
	// Stdout and Stderr are the nodes' outputs; nil means this process's.
	Stdout, Stderr *os.File
	Log            zerolog.Logger
	Hooks          Hooks
}

// Errors of Run.
var (
	// ErrRestartBudget: more than max_restarts restarts in restart_window;
	// every node was stopped.
	ErrRestartBudget = errors.New("supervisor: restart budget exhausted")
	// ErrUnclean: on shutdown, a node had to be killed or exited non-zero.
	ErrUnclean = errors.New("supervisor: not every node stopped cleanly")
)

// Supervisor runs Swarm.Nodes node processes and keeps them healthy.
type Supervisor struct {
	o        Options
	kill     chan struct{}
	killOnce sync.Once
	view     atomic.Pointer[view]
	socket   atomic.Value // string: the health socket's path, once listening
}

// view is what the control loop last published, for the liveness endpoint
// and Status.
type view struct {
	at      time.Time
	nodes   []NodeStatus
	healthy bool
}

// New checks the options and the system; it starts nothing.
func New(o Options) (*Supervisor, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if o.Swarm.Nodes < 1 {
		return nil, fmt.Errorf("supervisor: %d nodes", o.Swarm.Nodes)
	}
	if o.Path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("supervisor: cannot find this program to start nodes: %w", err)
		}
		o.Path = exe
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	return &Supervisor{o: o, kill: make(chan struct{})}, nil
}

// Kill stops every node at once with SIGKILL (a second signal to the
// supervisor); Run then returns ErrUnclean.
func (s *Supervisor) Kill() { s.killOnce.Do(func() { close(s.kill) }) }

// Status returns the node slots as last published by the control loop.
func (s *Supervisor) Status() []NodeStatus {
	if v := s.view.Load(); v != nil {
		return slices.Clone(v.nodes)
	}
	return nil
}

// Healthy reports whether the control loop runs and every node reported in
// time (GET /healthz).
func (s *Supervisor) Healthy() bool {
	v := s.view.Load()
	return v != nil && v.healthy && time.Since(v.at) <= 3*s.o.Swarm.SupervisionInterval+time.Second
}

// Socket returns the health socket's path once Run listens ("" before).
func (s *Supervisor) Socket() string {
	p, _ := s.socket.Load().(string)
	return p
}
