package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// lines parses what the server wrote.
func lines(t *testing.T, out *testkit.Buffer) []line {
	t.Helper()
	var ls []line
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		ls = append(ls, l)
	}
	return ls
}

// TestExampleThroughTheGRPCHandler: turbo's gRPC handler against the
// example: records one by one and in a batch are written out in order; an
// empty value is refused for good, and in a batch its key's later record is
// left for turbo to send again; the server stops gracefully.
func TestExampleThroughTheGRPCHandler(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out testkit.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, &out, 0) }()
	h, err := handlers.NewGRPC(config.Handler{Type: config.HandlerGRPC, Target: ln.Addr().String(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	if err := h.Handle(context.Background(), &actors.Record{Topic: "t", Offset: 1, Key: []byte("a"), Value: []byte("one")}); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if err := h.Handle(context.Background(), &actors.Record{Topic: "t", Offset: 2, Key: []byte("a")}); !errors.Is(err, actors.ErrPermanent) {
		t.Fatalf("an empty value: %v, want a permanent failure", err)
	}
	res := h.HandleBatch(context.Background(), []*actors.Record{
		{Topic: "t", Offset: 3, Key: []byte("b"), Value: []byte("three")},
		{Topic: "t", Offset: 4, Key: []byte("c")},
		{Topic: "t", Offset: 5, Key: []byte("c"), Value: []byte("five")},
		{Topic: "t", Offset: 6, Key: []byte("b"), Value: []byte("six")},
	})
	if res.Err != nil || len(res.Failed) != 1 || !errors.Is(res.Failed[1], actors.ErrPermanent) {
		t.Fatalf("batch: %+v, want index 1 failed for good", res)
	}
	var offsets []int64
	for _, l := range lines(t, &out) {
		offsets = append(offsets, l.Offset)
	}
	if want := []int64{1, 3, 6}; len(offsets) != len(want) || offsets[0] != 1 || offsets[1] != 3 || offsets[2] != 6 {
		t.Fatalf("written offsets %v, want %v (5 waits behind the failed 4)", offsets, want)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop within 15 s")
	}
}

// TestExamplePushesBack: above -max-in-flight, calls are refused with
// RESOURCE_EXHAUSTED and a retry push-back, which turbo reads as
// back-pressure with a Retry-After.
func TestExamplePushesBack(t *testing.T) {
	s := &service{out: json.NewEncoder(&bytes.Buffer{}), maxInFlight: 1}
	s.inFlight.Store(1) // one call under way
	if _, err := s.admit(context.Background()); err == nil {
		t.Fatal("a second call was admitted over -max-in-flight 1")
	}
	if s.inFlight.Load() != 1 {
		t.Fatalf("in flight %d after a refusal, want 1", s.inFlight.Load())
	}
}
