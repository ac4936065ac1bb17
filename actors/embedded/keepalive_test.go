package embedded

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// raw is one client connection speaking the group protocol by hand, so the
// test decides exactly when a member joins, syncs and dies.
type raw struct {
	t    *testing.T
	b    *sarama.Broker
	conn net.Conn // to cut it under a request in flight (Broker.Close waits for it)
}

type dialer struct{ conn *net.Conn }

func (d dialer) Dial(network, addr string) (net.Conn, error) {
	c, err := net.Dial(network, addr)
	*d.conn = c
	return c, err
}

func dial(t *testing.T, addr string) *raw {
	t.Helper()
	r := &raw{t: t}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.ReadTimeout = 30 * time.Second
	cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, dialer{&r.conn}
	b := sarama.NewBroker(addr)
	if err := b.Open(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connected(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	r.b = b
	return r
}

const sessionMs = 6000 // kfake's minimum

func (r *raw) join(group, member string) (*sarama.JoinGroupResponse, error) {
	req := &sarama.JoinGroupRequest{Version: 5, GroupId: group, MemberId: member, SessionTimeout: sessionMs,
		RebalanceTimeout: 60000, ProtocolType: "consumer"}
	req.AddGroupProtocol("range", []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	return r.b.JoinGroup(req)
}

// member joins group as a new member (the two-step join of v4+) and returns
// its member id and the join's answer; the second JoinGroup may park.
func (r *raw) member(group string) string {
	r.t.Helper()
	resp, err := r.join(group, "")
	if err != nil || !errors.Is(resp.Err, sarama.ErrMemberIdRequired) {
		r.t.Fatalf("first JoinGroup: %v %v", err, resp)
	}
	return resp.MemberId
}

func (r *raw) sync(group, member string, gen int32, assign map[string][]byte) {
	r.t.Helper()
	req := &sarama.SyncGroupRequest{Version: 3, GroupId: group, MemberId: member, GenerationId: gen}
	for m, a := range assign {
		req.AddGroupAssignment(m, a)
	}
	resp, err := r.b.SyncGroup(req)
	if err != nil || !errors.Is(resp.Err, sarama.ErrNoError) {
		r.t.Fatalf("SyncGroup: %v %v", err, resp)
	}
}

func (r *raw) heartbeat(group, member string, gen int32) error {
	resp, err := r.b.Heartbeat(&sarama.HeartbeatRequest{Version: 4, GroupId: group, MemberId: member, GenerationId: gen})
	if err != nil {
		return err
	}
	return resp.Err
}

func members(t *testing.T, admin *raw, group string) int {
	t.Helper()
	resp, err := admin.b.DescribeGroups(&sarama.DescribeGroupsRequest{Version: 4, Groups: []string{group}})
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("DescribeGroups: %v %v", err, resp)
	}
	return len(resp.Groups[0].Members)
}

// kfake bug 1 (see keepalive): a member that dies while its first JoinGroup
// is parked gets no session timer, and stays in the group — with
// partitions, once the leader synced. The keepalive gives it one: it is
// expired a session timeout later.
func TestMemberDeadInItsFirstJoinIsExpired(t *testing.T) {
	b, err := Start(Options{Partitions: 2, Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	addr := b.Addrs()[0]
	const group = "g"
	a := dial(t, addr)
	idA := a.member(group)
	resp, err := a.join(group, idA)
	if err != nil || !errors.Is(resp.Err, sarama.ErrNoError) {
		t.Fatalf("a's JoinGroup: %v %v", err, resp)
	}
	a.sync(group, idA, resp.GenerationId, map[string][]byte{idA: nil})

	// b joins; its second JoinGroup parks (the group waits for a to rejoin),
	// and b dies there.
	bConn := dial(t, addr)
	idB := bConn.member(group)
	parked := make(chan struct{})
	go func() {
		defer close(parked)
		_, _ = bConn.join(group, idB) // fails when the connection closes
	}()
	if err := waitFor(10*time.Second, func() bool {
		return errors.Is(a.heartbeat(group, idA, resp.GenerationId), sarama.ErrRebalanceInProgress)
	}); err != nil {
		t.Fatal("the group never started a rebalance for b's join")
	}
	_ = bConn.conn.Close() // b dies
	<-parked

	// a rejoins: the round completes with the dead b in it.
	resp2, err := a.join(group, idA)
	if err != nil || !errors.Is(resp2.Err, sarama.ErrNoError) {
		t.Fatalf("a's rejoin: %v %v", err, resp2)
	}
	a.sync(group, idA, resp2.GenerationId, map[string][]byte{idA: nil, idB: nil})
	dead := time.Now()
	admin := dial(t, addr)
	if n := members(t, admin, group); n != 2 {
		t.Fatalf("%d members after the round, want 2 (a and the dead b)", n)
	}
	// a stays alive (heartbeating at its generation, then rejoining the
	// rebalance b's expiry starts); b must be gone within a session timeout
	// and some slack, not at the next rebalance's timeout (60 s) or never.
	gen := resp2.GenerationId
	err = waitFor(3*sessionMs*time.Millisecond, func() bool {
		if errors.Is(a.heartbeat(group, idA, gen), sarama.ErrRebalanceInProgress) {
			if r, err := a.join(group, idA); err == nil && errors.Is(r.Err, sarama.ErrNoError) {
				gen = r.GenerationId
				a.sync(group, idA, gen, map[string][]byte{idA: nil})
			}
		}
		return members(t, admin, group) == 1
	})
	t.Logf("the dead member was %s after the round that included it", map[bool]string{true: "still in the group " + time.Since(dead).Round(time.Second).String(), false: "expired " + time.Since(dead).Round(100*time.Millisecond).String()}[err != nil])
	if err != nil {
		t.Fatalf("the member that died in its first JoinGroup was never expired")
	}
}

// waitFor polls cond every 200 ms (each poll is a round trip to the broker)
// until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}
