package testkit

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/proto/handlerpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ledgerService serves a Ledger as turbo's RecordHandler: a failed
// delivery is answered UNAVAILABLE; in a batch, as a retryable failure of
// its index (a record after a failed one of its unit is skipped, as over
// HTTP).
type ledgerService struct {
	handlerpb.UnimplementedRecordHandlerServer
	l *Ledger
}

func fromProto(r *handlerpb.Record) *actors.Record {
	rec := &actors.Record{Topic: r.GetTopic(), Partition: r.GetPartition(), Offset: r.GetOffset(), Key: r.Key, Value: r.Value,
		Timestamp: time.UnixMilli(r.GetTimestampMs())}
	for _, h := range r.GetHeaders() {
		rec.Headers = append(rec.Headers, actors.Header{Key: h.GetKey(), Value: h.GetValue()})
	}
	return rec
}

func (s ledgerService) Handle(ctx context.Context, r *handlerpb.Record) (*handlerpb.Result, error) {
	s.l.requests.Add(1)
	rec := fromProto(r)
	d := s.l.begin(rec, "", rec.Key != nil)
	if d == nil {
		return &handlerpb.Result{}, nil
	}
	if err := d.run(ctx, rec, true); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &handlerpb.Result{}, nil
}

func (s ledgerService) HandleBatch(ctx context.Context, b *handlerpb.Batch) (*handlerpb.BatchResult, error) {
	s.l.requests.Add(1)
	recs := make([]*actors.Record, len(b.GetRecords()))
	for i, r := range b.GetRecords() {
		recs[i] = fromProto(r)
	}
	errs, gone := s.l.handleBatch(ctx, recs, "")
	if gone {
		return nil, status.Error(codes.Canceled, "the caller went away")
	}
	res := &handlerpb.BatchResult{}
	for i, err := range errs {
		if err != nil {
			res.Failed = append(res.Failed, &handlerpb.Failure{Index: int32(i), Retryable: true, Error: err.Error()})
		}
	}
	return res, nil
}

// GRPCEndpoint serves the ledger as a RecordHandler (proto/handler.proto)
// on a random loopback port until the test ends, and returns its target.
// Deliveries are not judged for ownership.
func (l *Ledger) GRPCEndpoint(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	handlerpb.RegisterRecordHandlerServer(srv, ledgerService{l: l})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return ln.Addr().String()
}
