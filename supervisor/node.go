package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

// The environment a supervisor gives its nodes.
const (
	EnvSocket = "TURBO_SWARM_SOCKET"     // the health socket's path
	EnvIndex  = "TURBO_SWARM_NODE_INDEX" // the node's slot, 0..nodes-1
)

// Node is a node's identity, given by its supervisor.
type Node struct {
	Index  int
	Socket string
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
	return Node{Index: i, Socket: sock}, true, nil
}

// NodeOptions configure a node's link to its supervisor.
type NodeOptions struct {
	Version  string
	Interval time.Duration          // swarm.node_report_interval
	Report   func() *swarmpb.Report // the node's current health; called on the reporting goroutine
	Log      zerolog.Logger
	Hooks    NodeHooks
}

// Link is a node's connection to its supervisor. It reports on its own
// goroutine, independent of message processing, and notices when the
// supervisor is gone (EOF), even if it was SIGKILLed.
type Link struct {
	conn      net.Conn
	lost      chan struct{}
	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Join connects to the supervisor, says hello, and starts reporting every
// o.Interval (the first report at once).
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
	l := &Link{conn: conn, lost: make(chan struct{}), stop: make(chan struct{})}
	l.wg.Add(2)
	go l.watch()
	go l.report(o)
	o.Log.Info().Str("event", "swarm.node.after_fork").Msg("joined the swarm")
	if o.Hooks.AfterFork != nil {
		o.Hooks.AfterFork(n.Index)
	}
	return l, nil
}

// Lost is closed when the supervisor is gone: the node must stop.
func (l *Link) Lost() <-chan struct{} { return l.lost }

// Close stops reporting and disconnects; it waits for the link's goroutines.
func (l *Link) Close() {
	l.closeOnce.Do(func() {
		close(l.stop)
		l.conn.Close()
	})
	l.wg.Wait()
}

// watch reads until the connection ends. The supervisor never writes, so
// any read result means it closed the connection or died.
func (l *Link) watch() {
	defer l.wg.Done()
	var b [1]byte
	l.conn.Read(b[:])
	select {
	case <-l.stop:
	default:
		close(l.lost)
	}
}

func (l *Link) report(o NodeOptions) {
	defer l.wg.Done()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		f := &swarmpb.Frame{Body: &swarmpb.Frame_Report{Report: o.Report()}}
		l.conn.SetWriteDeadline(time.Now().Add(o.Interval))
		if err := writeFrame(l.conn, f); err != nil {
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

// ConsumerHealth is what a node's report is built from, per consumer.
type ConsumerHealth struct {
	Stats          actors.Snapshot
	MaxHandlerTime time.Duration // 0: handlers may run for ever
}

// PollStallFloor is the shortest time out of a group session that counts as
// a stalled poll: Kafka's default max.poll.interval.ms. Joining a group
// legitimately takes up to the rebalance timeout (sarama: 60 s), so a
// shorter threshold would restart healthy nodes waiting for a rebalance.
const PollStallFloor = 5 * time.Minute

// HealthLimits are the thresholds a node judges itself by.
type HealthLimits struct {
	// PollStall: not in a group session for longer than this is
	// STATUS_POLL_STALLED (turbo uses the larger of
	// swarm.node_report_timeout and PollStallFloor).
	PollStall time.Duration
	// Grace is added to max_handler_time before a handler counts as stuck:
	// it had that long to notice its cancellation (shutdown_timeout).
	Grace time.Duration
}

// BuildReport judges a node from its consumers' stats: polling stalled, then
// a stuck handler; memory is the supervisor's to judge.
func BuildReport(now, started time.Time, consumers []ConsumerHealth, lim HealthLimits) *swarmpb.Report {
	r := &swarmpb.Report{RssBytes: selfRSS(), HeapBytes: heapBytes()}
	for _, c := range consumers {
		s := c.Stats
		r.Processed += s.Processed
		r.InFlight += s.InFlight
		r.Buffered += s.Buffered
		r.AssignedPartitions += s.Assigned
		r.Lag += s.Lag
		r.PartitionMoves += s.Moves
		if r.KafkaError == "" {
			r.KafkaError = s.KafkaError
		}
		poll := s.LastPoll
		if poll.IsZero() {
			poll = started
		}
		if r.LastPollUnixNano == 0 || poll.UnixNano() < r.LastPollUnixNano {
			r.LastPollUnixNano = poll.UnixNano()
		}
		if r.Status != swarmpb.Status_STATUS_OK {
			continue
		}
		if stalled := now.Sub(poll); stalled > lim.PollStall {
			r.Status, r.Detail = swarmpb.Status_STATUS_POLL_STALLED, fmt.Sprintf("not polling Kafka for %s", stalled.Round(time.Second))
		} else if c.MaxHandlerTime > 0 && !s.Oldest.IsZero() && now.Sub(s.Oldest) > c.MaxHandlerTime+lim.Grace {
			r.Status, r.Detail = swarmpb.Status_STATUS_HANDLER_STUCK,
				fmt.Sprintf("a handler has run for %s (max_handler_time %s)", now.Sub(s.Oldest).Round(time.Second), c.MaxHandlerTime)
		}
	}
	return r
}

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
