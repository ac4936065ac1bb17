package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/handlerpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// GRPC calls the RecordHandler service of proto/handler.proto: Handle per
// record, HandleBatch per batch (batch.max_records above 1), each call with
// the handler's timeout as its deadline and handler.headers as metadata.
//
// Status codes: OK is success; UNAVAILABLE and RESOURCE_EXHAUSTED are
// retryable push-back (actors.ErrBackpressure: concurrency_mode adaptive
// cuts its limit), and honour the server's retry push-back
// (grpc-retry-pushback-ms) like an HTTP Retry-After; DEADLINE_EXCEEDED,
// ABORTED, INTERNAL, UNKNOWN and CANCELLED (by the server) are retryable;
// every other code — INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE,
// NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, UNAUTHENTICATED,
// UNIMPLEMENTED, DATA_LOSS — is permanent (wraps actors.ErrPermanent).
type GRPC struct {
	target  string
	timeout time.Duration
	conn    *grpc.ClientConn
	client  handlerpb.RecordHandlerClient
	headers []*staticHeader
	outputs bool // handler.response: outputs
}

// NewGRPC connects lazily to h.Target (gRPC dials on the first call and
// keeps reconnecting): over TLS when h.TLS is set, in plaintext otherwise.
func NewGRPC(h config.Handler) (*GRPC, error) {
	hs, err := newStaticHeaders(h.Headers)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if h.TLS.IsSet() {
		tc, err := h.TLS.ClientConfig("handler.tls")
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(h.Target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("%w: handler.target: %w", config.ErrInvalid, err)
	}
	return &GRPC{target: h.Target, timeout: h.Timeout, conn: conn, client: handlerpb.NewRecordHandlerClient(conn), headers: hs,
		outputs: h.Response == config.ResponseOutputs}, nil
}

// Close closes the connection.
func (g *GRPC) Close() error { return g.conn.Close() }

// Handle implements actors.Handler.
func (g *GRPC) Handle(ctx context.Context, rec *actors.Record) error {
	ctx, cancel, err := g.callContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var trailer metadata.MD
	res, err := g.client.Handle(ctx, toProto(rec), grpc.Trailer(&trailer))
	if err != nil || !g.outputs || len(res.GetOutputs()) == 0 {
		return g.failure(err, trailer)
	}
	outs := make([]actors.Output, len(res.GetOutputs()))
	for i, o := range res.GetOutputs() {
		outs[i] = fromProtoOutput(o)
	}
	return actors.Emit(ctx, rec, outs...)
}

// fromProtoOutput is an output as the service sent it.
func fromProtoOutput(o *handlerpb.Output) actors.Output {
	out := actors.Output{Topic: o.GetTopic(), Key: o.Key, Value: o.Value}
	for _, h := range o.GetHeaders() {
		out.Headers = append(out.Headers, actors.Header{Key: h.GetKey(), Value: h.GetValue()})
	}
	return out
}

// HandleBatch implements actors.BatchHandler.
func (g *GRPC) HandleBatch(ctx context.Context, recs []*actors.Record) actors.BatchResult {
	ctx, cancel, err := g.callContext(ctx)
	if err != nil {
		return actors.BatchFailed(err)
	}
	defer cancel()
	b := &handlerpb.Batch{Records: make([]*handlerpb.Record, len(recs))}
	for i, rec := range recs {
		b.Records[i] = toProto(rec)
	}
	var trailer metadata.MD
	res, err := g.client.HandleBatch(ctx, b, grpc.Trailer(&trailer))
	if err != nil {
		return actors.BatchFailed(g.failure(err, trailer))
	}
	var out actors.BatchResult
	for _, f := range res.GetFailed() {
		i := int(f.GetIndex())
		if i < 0 || i >= len(recs) {
			continue
		}
		if out.Failed == nil {
			out.Failed = make(map[int]error, len(res.GetFailed()))
		}
		err := fmt.Errorf("handlers: grpc %s: %s/%d@%d failed: %s", g.target, recs[i].Topic, recs[i].Partition, recs[i].Offset, truncated(f.GetError(), 512))
		if !f.GetRetryable() {
			err = errors.Join(err, actors.ErrPermanent)
		}
		out.Failed[i] = err
	}
	if g.outputs && len(res.GetOutputs()) > 0 {
		return g.emitBatch(ctx, recs, res.GetOutputs(), out)
	}
	return out
}

// emitBatch emits a batch's outputs, each for the record its index names;
// an index outside the batch fails the whole batch for good (the service
// handled the records, and where that output belongs is unknown).
func (g *GRPC) emitBatch(ctx context.Context, recs []*actors.Record, outputs []*handlerpb.Output, out actors.BatchResult) actors.BatchResult {
	byRec := make(map[int][]actors.Output)
	for n, o := range outputs {
		i := int(o.GetIndex())
		if i < 0 || i >= len(recs) {
			return actors.BatchFailed(fmt.Errorf("%w (grpc %s): output %d: index %d is outside the batch of %d: %w", ErrBadOutputs, g.target, n, i, len(recs), actors.ErrPermanent))
		}
		byRec[i] = append(byRec[i], fromProtoOutput(o))
	}
	for i, outs := range byRec {
		if out.Failed[i] != nil {
			continue // its outputs are dropped
		}
		if err := actors.Emit(ctx, recs[i], outs...); err != nil {
			if out.Failed == nil {
				out.Failed = make(map[int]error)
			}
			out.Failed[i] = err
		}
	}
	return out
}

// callContext is the call's context: the deadline, and the static headers
// as metadata (a header file gone bad fails the call, retryably).
func (g *GRPC) callContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if len(g.headers) > 0 {
		h := http.Header{}
		now := time.Now()
		for _, sh := range g.headers {
			if err := sh.set(h, now); err != nil {
				return nil, nil, err
			}
		}
		md := metadata.MD{}
		for k, v := range h {
			md[strings.ToLower(k)] = v
		}
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	if g.timeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, g.timeout)
		return ctx, cancel, nil
	}
	return ctx, func() {}, nil
}

// GRPCStatusError is the failure of a call answered with a status other
// than OK.
type GRPCStatusError struct {
	Code    codes.Code
	Message string
}

func (e *GRPCStatusError) Error() string {
	return fmt.Sprintf("handlers: grpc status %s: %s", e.Code, truncated(e.Message, 512))
}

// Unwrap makes permanent codes match actors.ErrPermanent.
func (e *GRPCStatusError) Unwrap() error {
	if RetryableCode(e.Code) {
		return nil
	}
	return actors.ErrPermanent
}

// Is makes UNAVAILABLE and RESOURCE_EXHAUSTED match actors.ErrBackpressure.
func (e *GRPCStatusError) Is(target error) bool {
	return target == actors.ErrBackpressure && (e.Code == codes.Unavailable || e.Code == codes.ResourceExhausted)
}

// RetryableCode reports whether a failed call may succeed on another attempt.
func RetryableCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Aborted,
		codes.Internal, codes.Unknown, codes.Canceled:
		return true
	}
	return false
}

// failure turns a call's error into the record's: nil for OK; a status with
// its code, and the server's retry push-back as a Retry-After.
func (g *GRPC) failure(err error, trailer metadata.MD) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("handlers: grpc %s: %w", g.target, err)
	}
	serr := &GRPCStatusError{Code: st.Code(), Message: st.Message()}
	if v := trailer.Get("grpc-retry-pushback-ms"); len(v) == 1 && RetryableCode(serr.Code) {
		if ms, perr := strconv.ParseInt(v[0], 10, 64); perr == nil && ms >= 0 {
			return actors.RetryAfter(time.Duration(min(ms, int64(maxRetryAfter/time.Millisecond)))*time.Millisecond, fmt.Errorf("handlers: grpc %s: %w", g.target, serr))
		}
	}
	return fmt.Errorf("handlers: grpc %s: %w", g.target, serr)
}

// toProto is the record as the protocol carries it.
func toProto(rec *actors.Record) *handlerpb.Record {
	p := &handlerpb.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, TimestampMs: rec.Timestamp.UnixMilli(),
		Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		p.Headers = append(p.Headers, &handlerpb.Header{Key: h.Key, Value: h.Value})
	}
	return p
}
