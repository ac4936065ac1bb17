// Package sdnotify speaks systemd's notification protocol (sd_notify(3))
// for a service of Type=notify: READY=1 once the service works, STATUS= a
// line for `systemctl status`, STOPPING=1 when it begins to stop, and
// WATCHDOG=1 pings while it is healthy, so that systemd restarts a hung
// process (WatchdogSec=). Messages are datagrams on the unix socket named
// by $NOTIFY_SOCKET; without it (not under systemd) nothing is sent.
package sdnotify

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The environment systemd sets for a notify service.
const (
	SocketEnv      = "NOTIFY_SOCKET"
	WatchdogEnv    = "WATCHDOG_USEC"
	WatchdogPIDEnv = "WATCHDOG_PID"
)

// sendTimeout bounds one send: a socket whose reader is stuck must not
// hold up the service (a datagram send blocks on a full buffer).
const sendTimeout = 100 * time.Millisecond

// Notifier sends to systemd. A nil *Notifier sends nothing.
type Notifier struct {
	conn     *net.UnixConn
	watchdog time.Duration // how often to ping: half of WatchdogSec; 0: no watchdog
}

// FromEnv returns the Notifier the environment asks for (getenv reads it,
// pid is this process's), or nil when NOTIFY_SOCKET is not set. The
// watchdog is on when WATCHDOG_USEC is set and WATCHDOG_PID, if set, names
// this process.
func FromEnv(getenv func(string) string, pid int) (*Notifier, error) {
	path := getenv(SocketEnv)
	if path == "" {
		return nil, nil
	}
	if path[0] == '@' { // an abstract socket
		path = "\x00" + path[1:]
	} else if path[0] != '/' {
		return nil, fmt.Errorf("%s=%q: want an absolute path or @abstract name", SocketEnv, path)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SocketEnv, err)
	}
	n := &Notifier{conn: conn}
	if us := getenv(WatchdogEnv); us != "" {
		v, err := strconv.ParseInt(us, 10, 64)
		if err != nil || v <= 0 {
			conn.Close()
			return nil, fmt.Errorf("%s=%q: want a positive number of microseconds", WatchdogEnv, us)
		}
		if p := getenv(WatchdogPIDEnv); p == "" || p == strconv.Itoa(pid) {
			n.watchdog = time.Duration(v) * time.Microsecond / 2
		}
	}
	return n, nil
}

// Watchdog is how often the service must ping (half of WatchdogSec), 0
// when systemd watches nothing.
func (n *Notifier) Watchdog() time.Duration {
	if n == nil {
		return 0
	}
	return n.watchdog
}

// Send sends the assignments (READY=1, STATUS=…) as one message.
func (n *Notifier) Send(assignments ...string) error {
	if n == nil {
		return nil
	}
	msg := strings.Join(assignments, "\n")
	if err := n.conn.SetWriteDeadline(time.Now().Add(sendTimeout)); err != nil {
		return err
	}
	_, err := n.conn.Write([]byte(msg))
	return err
}

// Close closes the socket.
func (n *Notifier) Close() error {
	if n == nil {
		return nil
	}
	return n.conn.Close()
}

// Service is what Run asks the service, at every tick.
type Service struct {
	// Ready reports whether the service works (READY=1 goes once, the
	// first time it does).
	Ready func() bool
	// Live returns nil while the service is healthy; an error stops the
	// watchdog pings, so systemd restarts it after WatchdogSec.
	Live func() error
	// Status is the STATUS= line.
	Status func() string
}

// Run reports s until ctx ends: every tick (and every half watchdog when
// that is shorter) the status, READY=1 once, and WATCHDOG=1 while live. It
// then sends STOPPING=1. Send errors are returned by none of it: systemd
// going away must not stop the service; onErr hears of each (it may be nil).
func (n *Notifier) Run(ctx context.Context, tick time.Duration, s Service, onErr func(error)) {
	if n == nil {
		return
	}
	if w := n.watchdog; w > 0 && w < tick {
		tick = w
	}
	report := func(err error) {
		if err != nil && onErr != nil {
			onErr(err)
		}
	}
	ready := false
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		msg := []string{"STATUS=" + s.Status()}
		if !ready && s.Ready() {
			ready = true
			msg = append(msg, "READY=1")
		}
		if n.watchdog > 0 {
			if err := s.Live(); err == nil {
				msg = append(msg, "WATCHDOG=1")
			} else {
				msg[0] = "STATUS=not live: " + err.Error()
			}
		}
		report(n.Send(msg...))
		select {
		case <-ctx.Done():
			report(n.Send("STOPPING=1", "STATUS=stopping"))
			return
		case <-t.C:
		}
	}
}

// StripEnv returns env without the notification variables: for child
// processes, which must not speak for the service.
func StripEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == SocketEnv || k == WatchdogEnv || k == WatchdogPIDEnv {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Pid is this process's id, for FromEnv.
func Pid() int { return os.Getpid() }
