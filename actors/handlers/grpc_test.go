package handlers

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/handlerpb"
	"github.com/turbokafka/turbo/test/testkit/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeService answers with err (and trailer), and keeps what it got.
type fakeService struct {
	handlerpb.UnimplementedRecordHandlerServer
	mu      sync.Mutex
	got     []*handlerpb.Record
	md      metadata.MD
	err     error
	trailer metadata.MD
	failed  []*handlerpb.Failure
}

func (s *fakeService) Handle(ctx context.Context, r *handlerpb.Record) (*handlerpb.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
	s.md, _ = metadata.FromIncomingContext(ctx)
	if s.trailer != nil {
		_ = grpc.SetTrailer(ctx, s.trailer)
	}
	return &handlerpb.Result{}, s.err
}

func (s *fakeService) HandleBatch(ctx context.Context, b *handlerpb.Batch) (*handlerpb.BatchResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, b.GetRecords()...)
	if s.err != nil {
		return nil, s.err
	}
	return &handlerpb.BatchResult{Failed: s.failed}, nil
}

// serve runs svc on a random port and returns its address.
func serve(t *testing.T, svc handlerpb.RecordHandlerServer, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	handlerpb.RegisterRecordHandlerServer(srv, svc)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return ln.Addr().String()
}

func newGRPC(t *testing.T, h config.Handler) *GRPC {
	t.Helper()
	h.Type = config.HandlerGRPC
	if h.Timeout == 0 {
		h.Timeout = 5 * time.Second
	}
	g, err := NewGRPC(h)
	if err != nil {
		t.Fatalf("NewGRPC: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestGRPCHandle: a record arrives whole (a missing key stays missing, an
// empty one empty), with the static headers as metadata.
func TestGRPCHandle(t *testing.T) {
	svc := &fakeService{}
	g := newGRPC(t, config.Handler{Target: serve(t, svc), Headers: []config.HTTPHeader{{Name: "Authorization", Prefix: "Bearer ", Value: config.Secret("t0ken")}}})
	ts := time.UnixMilli(1_763_000_000_123)
	for _, rec := range []*actors.Record{
		{Topic: "orders", Partition: 3, Offset: 7, Timestamp: ts, Key: []byte("k"), Value: []byte("v"), Headers: []actors.Header{{Key: "h", Value: []byte("x")}}},
		{Topic: "orders", Partition: 3, Offset: 8, Key: []byte{}, Value: nil},
		{Topic: "orders", Partition: 3, Offset: 9},
	} {
		if err := g.Handle(context.Background(), rec); err != nil {
			t.Fatalf("Handle: %v", err)
		}
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	first := svc.got[0]
	if first.GetTopic() != "orders" || first.GetPartition() != 3 || first.GetOffset() != 7 || first.GetTimestampMs() != ts.UnixMilli() ||
		string(first.GetKey()) != "k" || string(first.GetValue()) != "v" || len(first.GetHeaders()) != 1 || first.GetHeaders()[0].GetKey() != "h" {
		t.Fatalf("first record arrived as %v", first)
	}
	if svc.got[1].Key == nil || len(svc.got[1].Key) != 0 || svc.got[1].Value != nil {
		t.Fatalf("an empty key must arrive empty and a tombstone without a value: %v", svc.got[1])
	}
	if svc.got[2].Key != nil {
		t.Fatalf("a record without a key arrived with one: %v", svc.got[2])
	}
	if a := svc.md.Get("authorization"); len(a) != 1 || a[0] != "Bearer t0ken" {
		t.Fatalf("authorization metadata %v", a)
	}
}

// TestGRPCStatusMapping: each code is retryable, permanent or push-back as
// documented; a retry push-back in the trailer becomes a Retry-After.
func TestGRPCStatusMapping(t *testing.T) {
	retryable := map[codes.Code]bool{codes.Unavailable: true, codes.ResourceExhausted: true, codes.DeadlineExceeded: true,
		codes.Aborted: true, codes.Internal: true, codes.Unknown: true, codes.Canceled: true}
	pushback := map[codes.Code]bool{codes.Unavailable: true, codes.ResourceExhausted: true}
	svc := &fakeService{}
	g := newGRPC(t, config.Handler{Target: serve(t, svc)})
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		svc.mu.Lock()
		svc.err = status.Error(c, "no: "+c.String())
		svc.mu.Unlock()
		err := g.Handle(context.Background(), &actors.Record{Topic: "t"})
		var se *GRPCStatusError
		if !errors.As(err, &se) || se.Code != c {
			t.Fatalf("%s: %v, want a GRPCStatusError with its code", c, err)
		}
		if errors.Is(err, actors.ErrPermanent) == retryable[c] {
			t.Fatalf("%s: permanent %v, want retryable %v", c, errors.Is(err, actors.ErrPermanent), retryable[c])
		}
		if errors.Is(err, actors.ErrBackpressure) != pushback[c] {
			t.Fatalf("%s: push-back %v, want %v", c, !pushback[c], pushback[c])
		}
	}
	svc.mu.Lock()
	svc.err, svc.trailer = status.Error(codes.ResourceExhausted, "slow down"), metadata.Pairs("grpc-retry-pushback-ms", "1500")
	svc.mu.Unlock()
	err := g.Handle(context.Background(), &actors.Record{Topic: "t"})
	var ra *actors.RetryAfterError
	if !errors.As(err, &ra) || ra.Delay != 1500*time.Millisecond || !errors.Is(err, actors.ErrBackpressure) {
		t.Fatalf("RESOURCE_EXHAUSTED with push-back 1500 ms: %v", err)
	}
}

// TestGRPCHandleBatch: failures by index, retryable or permanent; an index
// outside the batch is ignored; a status fails the whole batch.
func TestGRPCHandleBatch(t *testing.T) {
	svc := &fakeService{failed: []*handlerpb.Failure{{Index: 1, Retryable: true, Error: "busy"}, {Index: 2, Error: "bad"}, {Index: 9}}}
	g := newGRPC(t, config.Handler{Target: serve(t, svc)})
	recs := []*actors.Record{{Topic: "t", Offset: 0}, {Topic: "t", Offset: 1}, {Topic: "t", Offset: 2}}
	res := g.HandleBatch(context.Background(), recs)
	if res.Err != nil || len(res.Failed) != 2 || errors.Is(res.Failed[1], actors.ErrPermanent) || !errors.Is(res.Failed[2], actors.ErrPermanent) {
		t.Fatalf("result %+v: want 1 retryable and 2 permanent", res)
	}
	svc.mu.Lock()
	svc.err = status.Error(codes.Unavailable, "down")
	svc.mu.Unlock()
	if res := g.HandleBatch(context.Background(), recs); !errors.Is(res.Err, actors.ErrBackpressure) {
		t.Fatalf("UNAVAILABLE: %+v, want the whole batch failed with push-back", res)
	}
}

// TestGRPCOverMTLS: with handler.tls, the call goes over TLS with the
// client certificate to a server that requires it.
func TestGRPCOverMTLS(t *testing.T) {
	ca := pki.TestCA(t, "grpc-ca")
	svc := &fakeService{}
	addr := serve(t, svc, grpc.Creds(credentials.NewTLS(ca.TestServerTLS(t, "svc", "127.0.0.1"))))
	dir := t.TempDir()
	mine := ca.TestIssue(t, pki.Options{CommonName: "turbo"})
	g := newGRPC(t, config.Handler{Target: addr, TLS: config.TLS{CAFile: pki.Write(t, dir, "ca.pem", ca.PEM),
		CertFile: pki.Write(t, dir, "c.pem", mine.Cert), KeyFile: pki.Write(t, dir, "c.key", mine.Key)}})
	if err := g.Handle(context.Background(), &actors.Record{Topic: "t"}); err != nil {
		t.Fatalf("Handle over mTLS: %v", err)
	}
	plain := newGRPC(t, config.Handler{Target: addr, Timeout: time.Second})
	if err := plain.Handle(context.Background(), &actors.Record{Topic: "t"}); err == nil || errors.Is(err, actors.ErrPermanent) {
		t.Fatalf("a plaintext call to a TLS server: %v, want a retryable failure", err)
	}
}
