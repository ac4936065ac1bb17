// Command grpc-handler is an example of the service a gRPC handler calls
// (handler.type: grpc): it implements RecordHandler of proto/handler.proto,
// writes every record it handles to stdout as a JSON line, and shows how to
// answer: an empty value is refused for good (INVALID_ARGUMENT), and with
// -max-in-flight it pushes back (RESOURCE_EXHAUSTED with a retry push-back)
// when more calls than that arrive at once, which a consumer in
// concurrency_mode adaptive follows.
//
//	go run ./examples/grpc-handler -listen 127.0.0.1:50051
//	# app.yaml: handler: {type: grpc, target: "127.0.0.1:50051", timeout: 5s}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/proto/handlerpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// service handles records by writing them out, one JSON line each.
type service struct {
	handlerpb.UnimplementedRecordHandlerServer
	mu          sync.Mutex
	out         *json.Encoder
	maxInFlight int64 // 0: no limit
	inFlight    atomic.Int64
}

// line is what the service writes for a record.
type line struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key,omitempty"`
	Value     string `json:"value"`
}

// handle is the work on one record: here, writing it out.
func (s *service) handle(r *handlerpb.Record) error {
	if len(r.GetValue()) == 0 {
		return status.Error(codes.InvalidArgument, "an empty value cannot be handled")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.out.Encode(line{Topic: r.GetTopic(), Partition: r.GetPartition(), Offset: r.GetOffset(), Key: string(r.GetKey()), Value: string(r.GetValue())}); err != nil {
		return status.Error(codes.Unavailable, "cannot write: "+err.Error())
	}
	return nil
}

// admit pushes back when more than maxInFlight calls are under way.
func (s *service) admit(ctx context.Context) (release func(), err error) {
	n := s.inFlight.Add(1)
	if s.maxInFlight > 0 && n > s.maxInFlight {
		s.inFlight.Add(-1)
		_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", "100"))
		return nil, status.Error(codes.ResourceExhausted, "too many calls at once")
	}
	return func() { s.inFlight.Add(-1) }, nil
}

func (s *service) Handle(ctx context.Context, r *handlerpb.Record) (*handlerpb.Result, error) {
	release, err := s.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := s.handle(r); err != nil {
		return nil, err
	}
	return &handlerpb.Result{}, nil
}

// HandleBatch handles the records in order; a failed record is reported by
// index, and the records of its key after it are left alone (turbo counts
// them as not run and sends them again after the failed one).
func (s *service) HandleBatch(ctx context.Context, b *handlerpb.Batch) (*handlerpb.BatchResult, error) {
	release, err := s.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	res := &handlerpb.BatchResult{}
	failedKeys := map[string]bool{}
	for i, r := range b.GetRecords() {
		if failedKeys[string(r.GetKey())] {
			continue
		}
		if err := s.handle(r); err != nil {
			failedKeys[string(r.GetKey())] = true
			st, _ := status.FromError(err)
			res.Failed = append(res.Failed, &handlerpb.Failure{Index: int32(i), Retryable: st.Code() != codes.InvalidArgument, Error: st.Message()})
		}
	}
	return res, nil
}

// serve serves the service on ln until ctx ends, then stops gracefully
// (calls under way finish, for at most 10 s).
func serve(ctx context.Context, ln net.Listener, out io.Writer, maxInFlight int64) error {
	srv := grpc.NewServer()
	handlerpb.RegisterRecordHandlerServer(srv, &service{out: json.NewEncoder(out), maxInFlight: maxInFlight})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		srv.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:50051", "address to serve RecordHandler on")
	maxInFlight := flag.Int64("max-in-flight", 0, "push back (RESOURCE_EXHAUSTED) above this many calls at once; 0: never")
	flag.Parse()
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error().Err(err).Msg("cannot listen")
		os.Exit(1)
	}
	log.Info().Str("listen", ln.Addr().String()).Msg("serving RecordHandler")
	if err := serve(ctx, ln, os.Stdout, *maxInFlight); err != nil {
		log.Error().Err(err).Msg("serving failed")
		os.Exit(1)
	}
}
