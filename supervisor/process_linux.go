package supervisor

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Supported reports whether this system can run a swarm: Linux with pidfds
// that can be waited on (waitid P_PIDFD, kernel 5.4 or later).
func Supported() error {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open is not available (Linux 5.4 or later is required): %w", err)
	}
	defer unix.Close(fd)
	var info unix.Siginfo
	// Waiting on a pidfd of a process that is not our child fails with
	// ECHILD where P_PIDFD is known, and with EINVAL before Linux 5.4.
	err = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
	if errors.Is(err, unix.EINVAL) {
		return errors.New("waitid(P_PIDFD) is not available (Linux 5.4 or later is required)")
	}
	return nil
}

// ownResourceErr reports whether err means the supervisor ran out of its
// own resources — descriptors (EMFILE, ENFILE), processes or threads
// (EAGAIN from fork), memory (ENOMEM) — rather than anything about the
// node: a later start may work, and the node is not to blame for it.
func ownResourceErr(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// process is a node process held through its pidfd: the supervisor waits on
// it (through the runtime's poller, so an exit wakes it at once), signals
// through it (no PID-reuse race), and reaps through it. Exactly one goroutine
// calls wait.
type process struct {
	pid   int
	pidfd *os.File
}

// exitStatus is how a node process ended.
type exitStatus struct {
	code   int            // exit code, or -1 when killed by a signal
	signal syscall.Signal // the signal that killed it, if any
}

func (e exitStatus) clean() bool { return e.code == 0 }

func (e exitStatus) String() string {
	if e.signal != 0 {
		return "killed by " + unix.SignalName(e.signal) // "SIGKILL", not "killed"
	}
	return fmt.Sprintf("exit code %d", e.code)
}

// stoppedBeforeStart tells a node that the supervisor's SIGTERM reached
// before it could handle it from one that failed: killed by SIGTERM
// while stopping, without a hello. A node handles SIGTERM from its very
// first instructions on and says hello only after, before it consumes
// anything; one that dies of SIGTERM got it while the Go runtime was still
// starting (the first ~15 ms), so nothing was lost. Before, a signal to the
// swarm in its first milliseconds made it exit 1, "not every node stopped
// cleanly".
func stoppedBeforeStart(sl *slot, st exitStatus) bool {
	return sl.state == slotStopping && !sl.killed && st.signal == syscall.SIGTERM && sl.lastSeen.IsZero()
}

// signal sends sig through the pidfd. A process already reaped cannot be
// signalled, which is the point: its PID may belong to someone else now.
func (p *process) signal(sig syscall.Signal) error {
	rc, err := p.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	return serr
}

// wait blocks until the process exits, reaps it and closes the pidfd.
func (p *process) wait() (exitStatus, error) {
	defer p.pidfd.Close()
	rc, err := p.pidfd.SyscallConn()
	if err != nil {
		return exitStatus{}, err
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		// WNOWAIT: only learn that it exited; reaping is below.
		var info unix.Siginfo
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(werr, unix.EAGAIN) || (werr == nil && info.Signo == 0) {
			return false // still running: park until the pidfd becomes readable
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return exitStatus{}, err
	}
	// The process is a zombie, so its PID cannot have been reused: reaping
	// by PID reaps exactly it, and gives the exit status in a portable form.
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(p.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return exitStatus{}, err
	}
	if ws.Signaled() {
		return exitStatus{code: -1, signal: ws.Signal()}, nil
	}
	return exitStatus{code: ws.ExitStatus()}, nil
}

// spawner starts node processes from one goroutine locked to its OS thread
// for the supervisor's whole life: Pdeathsig fires when the thread that
// forked a child ends, not the process (Go issue 27505).
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	path    string
	argv    []string
	env     []string
	files   []uintptr
	started func(pid int) // runs as soon as the process exists
	reply   chan spawnResult
}

type spawnResult struct {
	proc *process
	err  error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	defer close(s.done)
	runtime.LockOSThread()
	// Never unlocked: the thread ends with this goroutine, after the last
	// node has been reaped.
	for req := range s.reqs {
		p, err := forkExec(req)
		if err == nil {
			req.started(p.pid)
		}
		req.reply <- spawnResult{proc: p, err: err}
	}
}

func forkExec(req spawnReq) (*process, error) {
	pidfd := -1
	pid, err := syscall.ForkExec(req.path, req.argv, &syscall.ProcAttr{
		Env:   req.env,
		Files: req.files,
		Sys: &syscall.SysProcAttr{
			Setpgid:   true, // a terminal's ^C reaches the supervisor only, which stops the nodes in order
			Pdeathsig: syscall.SIGTERM,
			PidFD:     &pidfd,
		},
	})
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return nil, fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	// A non-blocking fd is registered with the runtime's poller, so wait
	// parks a goroutine instead of a thread.
	return &process{pid: pid, pidfd: os.NewFile(uintptr(pidfd), fmt.Sprintf("pidfd:%d", pid))}, nil
}

// start runs a node process; the caller must wait for it. started runs
// with its PID before start returns.
func (s *spawner) start(path string, argv, env []string, files []uintptr, started func(pid int)) (*process, error) {
	reply := make(chan spawnResult, 1)
	s.reqs <- spawnReq{path: path, argv: argv, env: env, files: files, started: started, reply: reply}
	r := <-reply
	return r.proc, r.err
}

// stop ends the spawner's thread; call it after every node has been reaped.
func (s *spawner) stop() {
	close(s.reqs)
	<-s.done
}
