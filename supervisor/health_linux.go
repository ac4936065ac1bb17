package supervisor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"golang.org/x/sys/unix"
)

// healthServer is the supervisor's end of the health protocol: a unix stream
// socket in a fresh private directory that accepts only connections whose
// peer is one of the live nodes, and turns their frames into events.
type healthServer struct {
	dir    string
	path   string
	ln     *net.UnixListener
	log    zerolog.Logger
	events chan<- event
	quit   <-chan struct{} // closed when the control loop stops listening
	hello  time.Duration   // how long a new connection has to say hello

	mu      sync.Mutex
	nodes   map[int]int // live node pid → index
	conns   map[int]net.Conn
	wmu     sync.Mutex                // one frame written at a time (Start, Command)
	pending map[uint64]pendingCommand // commands sent, by id, until answered
	nextID  uint64
	wg      sync.WaitGroup
}

func listenHealth(log zerolog.Logger, events chan<- event, quit <-chan struct{}, hello time.Duration) (*healthServer, error) {
	dir, err := os.MkdirTemp("", "turbo-swarm-")
	if err != nil {
		return nil, fmt.Errorf("health socket directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("health socket directory: %w", err)
	}
	path := filepath.Join(dir, "health.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("health socket: %w", err)
	}
	h := &healthServer{
		dir: dir, path: path, ln: ln, log: log, events: events, quit: quit, hello: hello,
		nodes: map[int]int{}, conns: map[int]net.Conn{}, pending: map[uint64]pendingCommand{},
	}
	h.wg.Add(1)
	go h.accept()
	return h, nil
}

// admit and forget keep the set of PIDs allowed to connect; forget also
// closes the connection of a node that has been reaped.
func (h *healthServer) admit(pid, index int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodes[pid] = index
}

func (h *healthServer) forget(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.nodes, pid)
	if c := h.conns[pid]; c != nil {
		c.Close()
		delete(h.conns, pid)
	}
}

// close stops accepting, closes every connection, waits for every goroutine
// and removes the directory.
func (h *healthServer) close() {
	h.ln.Close()
	h.mu.Lock()
	for pid, c := range h.conns {
		c.Close()
		delete(h.conns, pid)
	}
	h.mu.Unlock()
	h.wg.Wait()
	os.RemoveAll(h.dir)
}

func (h *healthServer) accept() {
	defer h.wg.Done()
	failures := 0
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil && !errors.Is(err, net.ErrClosed) && ownResourceErr(err) {
			// Out of descriptors (or memory) for a moment: the connection
			// waits in the queue. Giving up here would leave every node
			// started later without a way to report, hence judged silent.
			failures++
			if failures == 1 {
				h.log.Error().Err(err).Func(fdFields).
					Msg("health socket cannot accept: the supervisor is out of descriptors; retrying")
			}
			if !h.pause(acceptRetryDelay(failures)) {
				return
			}
			continue
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				h.log.Error().Err(err).Msg("health socket accept failed; no more reports")
			}
			return
		}
		if failures > 0 {
			h.log.Info().Int("failures", failures).Msg("health socket accepting again")
			failures = 0
		}
		pid, err := peerPID(c)
		if err != nil {
			h.log.Warn().Err(err).Msg("health connection refused: no peer credentials")
			c.Close()
			continue
		}
		h.mu.Lock()
		index, ok := h.nodes[pid]
		if ok && h.conns[pid] == nil {
			h.conns[pid] = c
		} else {
			ok = false
		}
		h.mu.Unlock()
		if !ok {
			h.log.Warn().Str("event", "swarm.manager.refused").Int("pid", pid).Msg("health connection refused: the peer is not a node, or already connected")
			c.Close()
			continue
		}
		h.wg.Add(1)
		go h.serve(c, pid, index)
	}
}

// acceptRetryDelay doubles from 5 ms to 1 s, as net/http's Serve does
// after a temporary accept error.
func acceptRetryDelay(failures int) time.Duration {
	return min(5*time.Millisecond<<min(failures-1, 8), time.Second)
}

// pause waits d, or until the control loop stops (false).
func (h *healthServer) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-h.quit:
		return false
	}
}

func peerPID(c *net.UnixConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// serve reads one node's frames: a hello first (naming the same PID the
// kernel vouches for), then reports. Anything else closes this connection
// only.
func (h *healthServer) serve(c *net.UnixConn, pid, index int) {
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		if h.conns[pid] == c {
			delete(h.conns, pid)
		}
		h.mu.Unlock()
		c.Close()
	}()
	log := h.log.With().Int("node", index).Int("pid", pid).Logger()
	fr := newFrameReader(c)
	c.SetReadDeadline(time.Now().Add(h.hello))
	f, err := fr.next()
	if err != nil {
		log.Warn().Err(err).Msg("health connection closed before its hello")
		return
	}
	hello := f.GetHello()
	if hello == nil || int(hello.Pid) != pid || int(hello.Index) != index {
		log.Warn().Str("event", "swarm.manager.refused").Interface("hello", f).Msg("health connection closed: the hello does not match the node")
		return
	}
	c.SetReadDeadline(time.Time{})
	if !h.send(event{kind: evHello, pid: pid, index: index, version: hello.Version}) {
		return
	}
	for {
		f, err := fr.next()
		if err != nil {
			if errors.Is(err, ErrBadFrame) {
				log.Warn().Err(err).Msg("health connection closed: malformed frame")
			} else if err != io.EOF && !errors.Is(err, net.ErrClosed) {
				log.Debug().Err(err).Msg("health connection ended")
			}
			return
		}
		if cr := f.GetCommandResult(); cr != nil {
			h.answered(pid, cr)
			continue
		}
		r := f.GetReport()
		if r == nil {
			log.Warn().Msg("health connection closed: a second hello")
			return
		}
		if !h.send(event{kind: evReport, pid: pid, index: index, report: r}) {
			return
		}
	}
}

// errNotConnected: a node has no health connection (it closed it, or was
// reaped).
var errNotConnected = errors.New("the node has no health connection")

// startWriteTimeout bounds writing a Start frame.
const startWriteTimeout = time.Second

// start sends node pid its Start frame, the only frame the supervisor
// writes. It runs on the control loop, which must not block: the frame is
// two bytes into a socket buffer that nothing else on this side writes to,
// so the write returns at once, and startWriteTimeout bounds it anyway.
// The connection's serve goroutine reads meanwhile, and a concurrent close
// (forget) makes the write fail.
func (h *healthServer) start(pid int) error {
	h.mu.Lock()
	c := h.conns[pid]
	h.mu.Unlock()
	if c == nil {
		return errNotConnected
	}
	return h.write(c, &swarmpb.Frame{Body: &swarmpb.Frame_Start{Start: &swarmpb.Start{}}}, startWriteTimeout)
}

func (h *healthServer) write(c net.Conn, f *swarmpb.Frame, wait time.Duration) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if err := c.SetWriteDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	return writeFrame(c, f)
}

// connected lists the nodes with a health connection now: pid → index.
func (h *healthServer) connected() map[int]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int]int, len(h.conns))
	for pid := range h.conns {
		out[pid] = h.nodes[pid]
	}
	return out
}

// errNoAnswer: a node did not answer a command in time.
var errNoAnswer = errors.New("the node did not answer in time")

// command sends node pid a control command (web.Command as JSON) and
// waits, at most wait, for its answer. It runs on an HTTP handler's
// goroutine, never the control loop.
func (h *healthServer) command(pid int, cmd []byte, wait time.Duration) (*swarmpb.CommandResult, error) {
	h.mu.Lock()
	c := h.conns[pid]
	h.nextID++
	id := h.nextID
	reply := make(chan *swarmpb.CommandResult, 1)
	h.pending[id] = pendingCommand{pid: pid, reply: reply}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.pending, id)
		h.mu.Unlock()
	}()
	if c == nil {
		return nil, errNotConnected
	}
	if err := h.write(c, &swarmpb.Frame{Body: &swarmpb.Frame_Command{Command: &swarmpb.Command{Id: id, Json: cmd}}}, commandWriteTimeout); err != nil {
		return nil, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-reply:
		return r, nil
	case <-t.C:
		return nil, errNoAnswer
	case <-h.quit:
		return nil, errNotConnected
	}
}

// pendingCommand is a command sent to node pid, waiting for its answer.
type pendingCommand struct {
	pid   int
	reply chan *swarmpb.CommandResult
}

// answered hands node pid's answer to the command waiting for it; one no
// longer waited for (it timed out), or sent to another node, is dropped.
func (h *healthServer) answered(pid int, r *swarmpb.CommandResult) {
	h.mu.Lock()
	p, ok := h.pending[r.GetId()]
	h.mu.Unlock()
	if ok && p.pid == pid {
		select {
		case p.reply <- r:
		default:
		}
	}
}

func (h *healthServer) send(e event) bool {
	select {
	case h.events <- e:
		return true
	case <-h.quit:
		return false
	}
}
