package embedded

import (
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keepalive works around two bugs of kfake's classic consumer groups
// (franz-go pkg/kfake groups.go, v0.0.0-20260918054303-01f206a7e32c) that
// left a group rejoining for minutes, or a dead member holding partitions
// for good, when a member died while others joined:
//
//  1. A member whose connection dies while its first JoinGroup is parked
//     never gets a session timer: handleJoin → addMemberAndRebalance calls
//     stopPending, which stops the pending member's timer, and starts none;
//     the only other place that starts one is updateHeartbeat, which reply
//     calls only when the response reached the client. So the dead member
//     stays in the group — with partitions, once the leader synced — until
//     a later rebalance times it out at the rebalance timeout (60 s and
//     more with turbo), or forever if none comes. Kafka schedules every
//     member's heartbeat expiration when it joins.
//  2. A member's session timer keeps running while it waits in JoinGroup or
//     SyncGroup (clients send no heartbeats then), and when it fires,
//     updateMemberAndRebalance → removeMember drops the member with its
//     parked request unanswered: the client waits out its read timeout
//     (65 s and more with turbo) and then has to join from scratch. Kafka
//     keeps members that wait in a join or sync alive, and answers a member
//     it removes.
//
// It observes JoinGroup, SyncGroup and Heartbeat requests (it changes none)
// and sends heartbeats of its own to the broker: one for every member that
// joined a round, with the round's generation (seen in the round's first
// SyncGroup), which gives a member that died in its JoinGroup the session
// timer it lacks (1); and one a second for every member waiting in
// SyncGroup while it is seen alive — turbo's members send a heartbeat probe
// every heartbeat interval even then (actors.sessionWatch) —, which keeps
// it from being dropped while the group waits for a dead leader (2). Bug 2
// in JoinGroup is avoided by the probe itself, whose heartbeats kfake
// accepts while it prepares a rebalance.
type keepalive struct {
	addr string
	quit chan struct{}
	done chan struct{}

	mu     sync.Mutex
	joined map[string]map[string]bool // group → members that joined since the round's first SyncGroup
	once   map[memberKey]int32        // members to heartbeat once, at this generation
	parked map[memberKey]*parkedSync  // members waiting in SyncGroup
	ours   map[memberKey]int          // heartbeats of ours on their way (not the member's own)
	conn   *sarama.Broker             // used by run only
}

type memberKey struct{ group, member string }

type parkedSync struct {
	generation int32
	seen       time.Time // the member's last request of its own
}

// aliveFor is how long a member waiting in SyncGroup is kept alive after
// its last request of its own: a few of its probes' intervals.
const aliveFor = 3 * time.Second

func startKeepalive(c *kfake.Cluster, addr string) *keepalive {
	k := &keepalive{addr: addr, quit: make(chan struct{}), done: make(chan struct{}),
		joined: map[string]map[string]bool{}, once: map[memberKey]int32{}, parked: map[memberKey]*parkedSync{}, ours: map[memberKey]int{}}
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat} {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			k.observe(req)
			return nil, nil, false // kfake handles it as usual
		})
	}
	go k.run()
	return k
}

func (k *keepalive) observe(req kmsg.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		if r.MemberID == "" {
			return
		}
		delete(k.parked, memberKey{r.Group, r.MemberID})
		if k.joined[r.Group] == nil {
			k.joined[r.Group] = map[string]bool{}
		}
		k.joined[r.Group][r.MemberID] = true
	case *kmsg.SyncGroupRequest:
		for m := range k.joined[r.Group] {
			k.once[memberKey{r.Group, m}] = r.Generation
		}
		delete(k.joined, r.Group)
		k.parked[memberKey{r.Group, r.MemberID}] = &parkedSync{generation: r.Generation, seen: time.Now()}
	case *kmsg.HeartbeatRequest:
		key := memberKey{r.Group, r.MemberID}
		if k.ours[key] > 0 {
			if k.ours[key]--; k.ours[key] == 0 {
				delete(k.ours, key)
			}
			return
		}
		if p := k.parked[key]; p != nil {
			if r.Generation >= p.generation {
				delete(k.parked, key) // its sync was answered: it heartbeats by itself
			} else {
				p.seen = time.Now() // a probe with the generation it is leaving
			}
		}
	}
}

func (k *keepalive) run() {
	defer close(k.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			k.beat()
		case <-k.quit:
			if k.conn != nil {
				_ = k.conn.Close()
			}
			return
		}
	}
}

// beat sends the heartbeats due; their answers do not matter.
func (k *keepalive) beat() {
	var due []*sarama.HeartbeatRequest
	k.mu.Lock()
	defer func() { // what was not sent is not on its way
		k.mu.Lock()
		for _, req := range due {
			key := memberKey{req.GroupId, req.MemberId}
			if k.ours[key]--; k.ours[key] <= 0 {
				delete(k.ours, key)
			}
		}
		k.mu.Unlock()
	}()
	for key, gen := range k.once {
		due = append(due, heartbeat(key, gen))
	}
	clear(k.once)
	for key, p := range k.parked {
		if time.Since(p.seen) > aliveFor {
			delete(k.parked, key) // gone quiet: let kfake expire it
			continue
		}
		due = append(due, heartbeat(key, p.generation))
	}
	for _, req := range due {
		k.ours[memberKey{req.GroupId, req.MemberId}]++
	}
	k.mu.Unlock()
	for len(due) > 0 {
		req := due[0]
		if k.conn == nil {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V3_6_0_0
			cfg.ClientID = "turbo-embedded-keepalive"
			cfg.Net.ReadTimeout = time.Second
			b := sarama.NewBroker(k.addr)
			if err := b.Open(cfg); err != nil {
				return
			}
			k.conn = b
		}
		// Once the broker read it, observe has counted it off.
		if _, err := k.conn.Heartbeat(req); err != nil {
			_ = k.conn.Close()
			k.conn = nil
			return
		}
		due = due[1:]
	}
}

func heartbeat(key memberKey, generation int32) *sarama.HeartbeatRequest {
	return &sarama.HeartbeatRequest{Version: 4, GroupId: key.group, MemberId: key.member, GenerationId: generation}
}

// stop ends run and waits for it.
func (k *keepalive) stop() {
	select {
	case <-k.quit:
	default:
		close(k.quit)
	}
	<-k.done
}
