package actors

import (
	"errors"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
)

// sessionWatch is the shell around one sarama session's sessionLiveness: it
// feeds it the answers to its own heartbeats (the probe), the commit errors
// (from kafkaGroup's error drain), the session's end and the time, and
// closes lost the moment it judges the session lost. Every claim of the
// session selects on lost and then drops its partition without a handover
// (kafkaGroup.lose).
//
// Why its own heartbeats: sarama's are invisible (their successes are not
// reported at all, and their failures only after Metadata.Retry.Max further
// tries of Net.ReadTimeout each — minutes with turbo's read timeout), and
// sarama does not send them at all while it waits in a JoinGroup or
// SyncGroup. The probe sends one per heartbeat interval on a connection of
// its own, with a short read timeout, using the session's member id and
// generation. An answered heartbeat is the proof of the session Kafka
// itself uses, and it is harmless to send: it only keeps the member's
// session alive, which is what a member that sends it is.
//
// It also keeps members alive on kfake (the embedded broker) while they
// wait in a JoinGroup: kfake expires a member whose JoinGroup is parked
// once its session timeout passes without a heartbeat, and drops the parked
// request unanswered, where Kafka keeps members that wait in a join (see
// the note on the embedded broker in test/README.md).
type sessionWatch struct {
	client   sarama.Client // the group's: to find the coordinator
	cfg      *sarama.Config
	groupID  string
	sess     sarama.ConsumerGroupSession
	interval time.Duration
	log      zerolog.Logger
	probes   *sync.WaitGroup // kafkaGroup's: a probe in flight may outlive the watch, not the group

	mu       sync.Mutex
	live     *sessionLiveness
	lost     chan struct{} // closed once the session is judged lost
	stopCh   chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when run has returned

	conn *sarama.Broker // the probe's connection, used by one probe at a time

	// onLost, when set, is called once, the moment the session is judged
	// lost (under mu: it must not call back): readiness must not wait for
	// sarama to notice, which takes minutes when the coordinator is silent.
	onLost func()
}

// probeInterval is the least time between two of the watch's own
// heartbeats: sarama's (every 250 ms) are what tell a member of a
// rebalance; the watch's judge the session's life, which a second's
// resolution does against a 10 s session timeout.
const probeInterval = time.Second

func newSessionWatch(client sarama.Client, cfg *sarama.Config, groupID string, sess sarama.ConsumerGroupSession,
	probes *sync.WaitGroup, log zerolog.Logger) *sessionWatch {
	pc := *cfg
	// An answer later than this is no proof; the silence rule counts the
	// session timeout from the last answered one.
	pc.Net.ReadTimeout = max(2*cfg.Consumer.Group.Heartbeat.Interval, cfg.Consumer.Group.Session.Timeout/3)
	return &sessionWatch{
		client: client, cfg: &pc, groupID: groupID, sess: sess, probes: probes, log: log,
		interval: max(cfg.Consumer.Group.Heartbeat.Interval, probeInterval),
		live:     newSessionLiveness(cfg.Consumer.Group.Session.Timeout, time.Now()),
		lost:     make(chan struct{}),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// judge applies one input to the liveness and closes lost when it says so.
func (w *sessionWatch) judge(f func(*sessionLiveness) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	was := w.live.err()
	if err := f(w.live); err != nil && was == nil {
		w.log.Warn().Err(err).Str("member", w.sess.MemberID()).Int32("generation", w.sess.GenerationID()).
			Msg("consumer group session lost: dropping every partition without a handover, then rejoining")
		close(w.lost)
		if w.onLost != nil {
			w.onLost()
		}
	}
}

// reason is why the session was lost, nil while it is alive.
func (w *sessionWatch) reason() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live.err()
}

func (w *sessionWatch) commitFailed(err error) {
	w.judge(func(l *sessionLiveness) error { return l.commitFailed(err) })
}

func (w *sessionWatch) sessionEnded(cause error, leaving bool) {
	w.judge(func(l *sessionLiveness) error { return l.sessionEnded(cause, leaving) })
}

// stop ends the watch; it does not wait for a probe in flight (its read
// timeout bounds it, and kafkaGroup waits for it before it returns).
func (w *sessionWatch) stop() {
	w.stopOnce.Do(func() { close(w.stopCh) })
	<-w.done
}

type probeAnswer struct {
	sent time.Time
	err  error
}

// run ticks: each tick judges the silence and sends a probe unless one is
// still out.
func (w *sessionWatch) run() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	answers := make(chan probeAnswer, 1)
	out := false
	for {
		select {
		case a := <-answers:
			out = false
			w.judge(func(l *sessionLiveness) error { return l.probed(a.sent, a.err) })
		case now := <-t.C:
			w.judge(func(l *sessionLiveness) error { return l.tick(now) })
			if !out {
				out = true
				w.probes.Go(func() {
					sent := time.Now()
					answers <- probeAnswer{sent: sent, err: w.probe()} // buffered: one probe out at a time
				})
			}
		case <-w.stopCh:
			w.probes.Go(func() {
				if out {
					<-answers // the probe in flight uses conn
				}
				w.closeConn()
			})
			return
		}
	}
}

// probe sends one heartbeat for the session and returns the broker's error
// (nil for none).
func (w *sessionWatch) probe() error {
	coord, err := w.client.Coordinator(w.groupID)
	if err != nil {
		return err
	}
	if w.conn == nil || w.conn.Addr() != coord.Addr() {
		w.closeConn()
		b := sarama.NewBroker(coord.Addr())
		if err := b.Open(w.cfg); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
			return err
		}
		w.conn = b
	}
	resp, err := w.conn.Heartbeat(heartbeatRequest(w.cfg, w.groupID, w.sess.MemberID(), w.sess.GenerationID()))
	if err != nil {
		w.closeConn() // a timed-out connection may answer out of turn later
		return err
	}
	if errors.Is(resp.Err, sarama.ErrNoError) {
		return nil
	}
	return resp.Err
}

func (w *sessionWatch) closeConn() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// heartbeatRequest is sarama's own (consumerGroup.heartbeatRequest, which
// is unexported): the same versions for the same configuration.
func heartbeatRequest(cfg *sarama.Config, groupID, memberID string, generation int32) *sarama.HeartbeatRequest {
	req := &sarama.HeartbeatRequest{GroupId: groupID, MemberId: memberID, GenerationId: generation}
	if cfg.Version.IsAtLeast(sarama.V0_11_0_0) {
		req.Version = 1
	}
	if cfg.Version.IsAtLeast(sarama.V2_0_0_0) {
		req.Version = 2
	}
	if cfg.Version.IsAtLeast(sarama.V2_3_0_0) {
		req.Version = 3
		if id := cfg.Consumer.Group.InstanceId; id != "" {
			req.GroupInstanceId = &id
		}
		if cfg.Version.IsAtLeast(sarama.V2_4_0_0) {
			req.Version = 4
		}
	}
	return req
}
