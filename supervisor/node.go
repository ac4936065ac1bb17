package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

// The environment a supervisor gives its nodes. The names begin with
// config.EnvNodePrefix, outside the configuration's namespace: a node hands
// its whole environment to config.Load.
const (
	EnvSocket = config.EnvNodePrefix + "SOCKET" // the health socket's path
	EnvIndex  = config.EnvNodePrefix + "INDEX"  // the node's slot, 0..nodes-1
	EnvNodes  = config.EnvNodePrefix + "COUNT"  // how many nodes the swarm runs
	// EnvExitOnIdle is "1" with turbo swarm --exit-on-idle: the node judges
	// when the group has committed what the topics held and says so in its
	// reports (Report.idle), and goes on until the supervisor stops it.
	EnvExitOnIdle = config.EnvNodePrefix + "EXIT_ON_IDLE"
	// EnvObserve is "1" when the supervisor serves http.listen: the node
	// then puts its metrics and its /status document in its reports
	// (without it, a report stays a few hundred bytes).
	EnvObserve = config.EnvNodePrefix + "OBSERVE"
	// EnvAwaitStart is "1" for a node of the swarm's first start: its
	// consumers join their groups once the supervisor's Start frame comes
	// (Link.AwaitStart). A node started later (a restart) does not get it
	// and starts at once.
	EnvAwaitStart = config.EnvNodePrefix + "AWAIT_START"
)

// Node is a node's identity and orders, given by its supervisor in its
// environment (NodeFromEnv).
type Node struct {
	Index  int
	Nodes  int // the swarm's size: a node's share of a consumer-wide limit
	Socket string
	// ExitOnIdle: see EnvExitOnIdle.
	ExitOnIdle bool
	// Observe: see EnvObserve.
	Observe bool
	// AwaitStart: see EnvAwaitStart.
	AwaitStart bool
}

// NodeFromEnv returns the node identity when this process was started by a
// supervisor (ok false otherwise).
func NodeFromEnv(lookup func(string) (string, bool)) (n Node, ok bool, err error) {
	sock, ok := lookup(EnvSocket)
	if !ok || sock == "" {
		return Node{}, false, nil
	}
	idx, _ := lookup(EnvIndex)
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return Node{}, false, fmt.Errorf("%s=%q is not a node index", EnvIndex, idx)
	}
	count, _ := lookup(EnvNodes)
	nodes, err := strconv.Atoi(count)
	if err != nil || nodes <= i {
		return Node{}, false, fmt.Errorf("%s=%q is not a swarm size above node index %d", EnvNodes, count, i)
	}
	set := func(name string) bool { v, _ := lookup(name); return v == "1" }
	return Node{
		Index: i, Nodes: nodes, Socket: sock,
		ExitOnIdle: set(EnvExitOnIdle), Observe: set(EnvObserve), AwaitStart: set(EnvAwaitStart),
	}, true, nil
}

// nodeEnviron is the environment of node n: base without any variable under
// config.EnvNodePrefix (the supervisor's own environment says nothing to
// its nodes), and n in the form NodeFromEnv reads.
func nodeEnviron(base []string, n Node) []string {
	env := slices.DeleteFunc(slices.Clone(base), func(kv string) bool { return strings.HasPrefix(kv, config.EnvNodePrefix) })
	env = append(env,
		EnvSocket+"="+n.Socket,
		EnvIndex+"="+strconv.Itoa(n.Index),
		EnvNodes+"="+strconv.Itoa(n.Nodes),
	)
	if n.ExitOnIdle {
		env = append(env, EnvExitOnIdle+"=1")
	}
	if n.Observe {
		env = append(env, EnvObserve+"=1")
	}
	if n.AwaitStart {
		env = append(env, EnvAwaitStart+"=1")
	}
	return env
}

// NodeOptions configure a node's link to its supervisor.
type NodeOptions struct {
	Version  string
	Interval time.Duration          // swarm.node_report_interval
	Report   func() *swarmpb.Report // the node's current health; called on the reporting goroutine
	// Command carries out a control command the supervisor routed to this
	// node (a supervisor/web.Command as JSON) and says how it went. It is
	// called on a goroutine of its own, at most maxNodeCommands at once;
	// nil: the node takes no commands (each is answered FAILED).
	Command func(json []byte) (swarmpb.CommandOutcome, string)
	Log     zerolog.Logger
}

// maxNodeCommands bounds the commands a node carries out at once; more are
// answered BUSY.
const maxNodeCommands = 4

// Link is a node's connection to its supervisor. It reports on its own
// goroutine, independent of message processing, and reads the supervisor's
// frames on another: it notices when the supervisor is gone (EOF), even if
// it was SIGKILLed, and when it says start (AwaitStart).
type Link struct {
	conn       net.Conn
	wmu        sync.Mutex    // one frame written at a time: reports and command results
	commands   chan struct{} // a slot per command being carried out (maxNodeCommands)
	awaitStart bool          // Node.AwaitStart
	started    chan struct{} // closed by the reader on the Start frame
	lost       chan struct{}
	stop       chan struct{}
	closeOnce  sync.Once
	wg         sync.WaitGroup
}

// Join connects to the supervisor, says hello, and starts reporting every
// o.Interval (the first report at once) and reading what the supervisor
// sends. Close stops both.
func (n Node) Join(o NodeOptions) (*Link, error) {
	conn, err := net.DialTimeout("unix", n.Socket, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("swarm node %d: cannot reach the supervisor: %w", n.Index, err)
	}
	hello := &swarmpb.Frame{Body: &swarmpb.Frame_Hello{Hello: &swarmpb.Hello{
		Index: uint32(n.Index), Pid: int32(os.Getpid()), Version: o.Version,
	}}}
	if err := writeFrame(conn, hello); err != nil {
		conn.Close()
		return nil, fmt.Errorf("swarm node %d: hello: %w", n.Index, err)
	}
	l := &Link{conn: conn, awaitStart: n.AwaitStart, started: make(chan struct{}), lost: make(chan struct{}), stop: make(chan struct{}),
		commands: make(chan struct{}, maxNodeCommands)}
	l.wg.Add(2)
	go l.read(o)
	go l.report(o)
	o.Log.Info().Str("event", "swarm.node.after_fork").Msg("joined the swarm")
	return l, nil
}

// Lost is closed when the supervisor is gone: the node must stop.
func (l *Link) Lost() <-chan struct{} { return l.lost }

// AwaitStart waits, at most max, until the supervisor says start: once
// every node of the swarm's first start has said hello, so that the nodes
// join their consumer groups together. A node that joined alone would take
// every partition, start their records, and a moment later (its next
// heartbeat) hand most of them over, draining what it had started first:
// seconds lost at every swarm start. It returns true at once for a node
// the supervisor did not ask to wait (a restart: Node.AwaitStart false),
// and false when max passed, done was closed or the supervisor is gone
// first. Any number of callers may wait (one per consumer).
func (l *Link) AwaitStart(done <-chan struct{}, max time.Duration) bool {
	if !l.awaitStart {
		return true
	}
	bound := time.NewTimer(max)
	defer bound.Stop()
	select {
	case <-l.started:
		return true
	case <-bound.C:
	case <-done:
	case <-l.lost:
	}
	// A Start that came meanwhile still counts.
	select {
	case <-l.started:
		return true
	default:
		return false
	}
}

// Close stops reporting and reading, and disconnects; it waits for the
// link's goroutines. A second Close does nothing.
func (l *Link) Close() {
	l.closeOnce.Do(func() {
		close(l.stop)
		l.conn.Close()
	})
	l.wg.Wait()
}

// read reads the supervisor's frames until the connection ends: then, unless
// Close ended it, the supervisor is gone (it closed the connection or died)
// and lost is closed. A malformed frame ends the link too: what follows it
// cannot be read, and a supervisor that sends one is broken.
func (l *Link) read(o NodeOptions) {
	defer l.wg.Done()
	log := o.Log
	fr := newFrameReader(l.conn)
	for {
		f, err := fr.next()
		if errors.Is(err, ErrBadFrame) {
			log.Error().Err(err).Msg("the supervisor sent a malformed frame: leaving the swarm")
		}
		if err != nil {
			break
		}
		switch f.Body.(type) {
		case *swarmpb.Frame_Start:
			select {
			case <-l.started: // a second Start changes nothing
			default:
				close(l.started)
			}
		case *swarmpb.Frame_Command:
			l.command(o, f.GetCommand())
		default:
			log.Warn().Str("frame", fmt.Sprintf("%T", f.Body)).Msg("the supervisor sent a frame a node does not expect: ignored")
		}
	}
	select {
	case <-l.stop:
	default:
		close(l.lost)
	}
}

// commandWriteTimeout bounds writing a command's answer.
const commandWriteTimeout = 5 * time.Second

// command carries out a command on a goroutine of its own, so that the
// reader goes on reading (a seek may take seconds), and answers it.
func (l *Link) command(o NodeOptions, c *swarmpb.Command) {
	answer := func(out swarmpb.CommandOutcome, res string) {
		f := &swarmpb.Frame{Body: &swarmpb.Frame_CommandResult{CommandResult: &swarmpb.CommandResult{Id: c.GetId(), Outcome: out, Result: res}}}
		if err := l.write(f, commandWriteTimeout); err != nil && !errors.Is(err, net.ErrClosed) {
			o.Log.Warn().Err(err).Msg("the answer to a control command was not sent")
		}
	}
	if o.Command == nil {
		answer(swarmpb.CommandOutcome_COMMAND_OUTCOME_FAILED, "this node takes no control commands")
		return
	}
	select {
	case l.commands <- struct{}{}:
	default:
		answer(swarmpb.CommandOutcome_COMMAND_OUTCOME_BUSY, fmt.Sprintf("the node is carrying out %d commands already", maxNodeCommands))
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() { <-l.commands }()
		answer(o.Command(c.GetJson()))
	}()
}

// write sends one frame, bounded by wait.
func (l *Link) write(f *swarmpb.Frame, wait time.Duration) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.conn.SetWriteDeadline(time.Now().Add(wait))
	return writeFrame(l.conn, f)
}

func (l *Link) report(o NodeOptions) {
	defer l.wg.Done()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		f := &swarmpb.Frame{Body: &swarmpb.Frame_Report{Report: o.Report()}}
		if err := l.write(f, o.Interval); err != nil {
			if !errors.Is(err, net.ErrClosed) {
				o.Log.Warn().Err(err).Msg("health report not sent")
			}
		}
		select {
		case <-l.stop:
			return
		case <-l.lost:
			return
		case <-t.C:
		}
	}
}

// SelfMemory is this process's resident set size and Go heap in use, for
// its reports (0 where a figure cannot be read).
func SelfMemory() (rss, heap uint64) { return selfRSS(), heapBytes() }

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func selfRSS() uint64 {
	rss, err := residentBytes(os.Getpid())
	if err != nil {
		return 0
	}
	return rss
}
