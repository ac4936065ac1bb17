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
	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
)

// Options configure a Supervisor.
type Options struct {
	// Swarm is the swarm section; Swarm.Nodes processes run.
	Swarm config.Swarm
	// HTTP is the listener serving every node's metrics and status, the
	// supervisor's own metrics, /healthz, /readyz and the console; an
	// empty Listen opens no port, and the nodes then send neither metrics
	// nor status (EnvObserve).
	HTTP config.HTTP
	// ShutdownTimeout is how long a node has between SIGTERM and SIGKILL.
	ShutdownTimeout time.Duration
	// Args are the node's arguments, without the program name: nodes are
	// re-executed copies of this program (Go cannot fork without exec).
	Args []string
	// Env is the nodes' base environment; nil means this process's.
	Env []string
	// ExitOnIdle stops the swarm, exit 0, once a node reports that the
	// group has committed everything its topics held (turbo swarm
	// --exit-on-idle).
	ExitOnIdle bool
	// Reload asks for a rolling restart (SIGHUP): when Validate accepts the
	// configuration as it is now, the nodes are restarted one at a time,
	// each once the one before is back and ready, and read it as they
	// start. Nil: no reloads.
	Reload <-chan struct{}
	// Validate checks the configuration the nodes would read; nil accepts.
	Validate func() error
	// Stdout and Stderr are the nodes' outputs; nil means this process's.
	Stdout, Stderr *os.File
	Log            zerolog.Logger

	// hooks observe the events the supervisor logs (this package's tests).
	hooks hooks
	// reloadReadTimeout replaces ReloadReadTimeout (this package's tests).
	reloadReadTimeout time.Duration
}

// ReloadReadTimeout bounds how long a SIGHUP waits for Validate (which
// reads the configuration file): a reload that takes longer is refused,
// and the nodes keep running what they read.
const ReloadReadTimeout = 10 * time.Second

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
	exe      string // this program, which the nodes run
	kill     chan struct{}
	killOnce sync.Once
	view     atomic.Pointer[view]
	socket   atomic.Value // string: the health socket's path, once listening
	httpAddr atomic.Value // string: http.listen's bound address, once listening
	// badReports logs node reports whose metrics or status do not decode.
	badReports *badReports
	// config is the life of the configuration (reloads), for /status.
	config atomic.Pointer[web.ConfigState]
}

// view is what the control loop last published, for the HTTP listener
// and Status. It is never changed once published: handlers read it without
// a lock, and never wait for the control loop.
type view struct {
	at      time.Time
	nodes   []NodeStatus
	obs     []nodeView // by node index, like nodes
	healthy bool
	// why is the first reason the swarm is not healthy ("" when it is).
	why        string
	stopping   bool
	budgetLeft int // restarts left in the window (restartBudget.remaining)
}

// nodeView is what the HTTP listener needs of a node slot beyond its
// NodeStatus.
type nodeView struct {
	state slotState
	// report is the last report of the node's current process; nil
	// before its first, and once the process is gone (a dead node's
	// metrics are not served as if it ran).
	report     *swarmpb.Report
	restartsBy [numCauses]int
	// silent says why the node is overdue (no report within
	// node_report_timeout: frozen, stopped or starved); "" when it is not.
	// Its last report, however ready, no longer speaks for it.
	silent string
}

// New checks the options and the system; it starts nothing.
func New(o Options) (*Supervisor, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if o.Swarm.Nodes < 1 {
		return nil, fmt.Errorf("supervisor: %d nodes", o.Swarm.Nodes)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("supervisor: cannot find this program to start nodes: %w", err)
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
	return &Supervisor{o: o, exe: exe, kill: make(chan struct{}), badReports: &badReports{log: o.Log}}, nil
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
func (s *Supervisor) Healthy() bool { return s.live(time.Now()).OK }

// Live is Healthy with the reason when not (GET /healthz).
func (s *Supervisor) Live() web.Check { return s.live(time.Now()) }

// Ready reports whether every node runs and says it is ready, or names the
// first that is not (GET /readyz).
func (s *Supervisor) Ready() web.Check { return readyCheck(s.view.Load()) }

// HTTPAddr returns the address http.listen is bound to once Run listens
// ("" before, and when it is not set): the port, when it was 0.
func (s *Supervisor) HTTPAddr() string {
	a, _ := s.httpAddr.Load().(string)
	return a
}

// Socket returns the health socket's path once Run listens ("" before).
func (s *Supervisor) Socket() string {
	p, _ := s.socket.Load().(string)
	return p
}
