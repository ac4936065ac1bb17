// Package handlers holds turbo's built-in record handlers, chosen by
// `handler.type` in the configuration: http, grpc, copy, noop, log, sleep
// and hash.
package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers/sleep"
	"github.com/turbokafka/turbo/config"
)

// New builds the handler a consumer's configuration asks for. concurrency
// sizes the http handler's connection pool; out receives the log handler's
// lines.
func New(h config.Handler, concurrency int, out io.Writer) (actors.Handler, error) {
	switch h.Type {
	case config.HandlerNoop:
		return Noop(), nil
	case config.HandlerLog:
		return NewLog(out), nil
	case config.HandlerSleep:
		return Sleep(h.Duration), nil
	case config.HandlerHTTP:
		hh, err := NewHTTPWith(h.URL, h.Timeout, concurrency, h.Headers)
		if err != nil {
			return nil, err // not a nil *HTTP in a non-nil Handler
		}
		hh.encoding = h.Encoding
		hh.outputs = h.Response == config.ResponseOutputs
		if h.TLS.IsSet() {
			tc, err := h.TLS.ClientConfig("handler.tls")
			if err != nil {
				return nil, err
			}
			hh.client.Transport.(*http.Transport).TLSClientConfig = tc
		}
		return hh, nil
	case config.HandlerGRPC:
		g, err := NewGRPC(h)
		if err != nil {
			return nil, err
		}
		return g, nil
	case config.HandlerHash:
		return Hash(h.Bytes), nil
	case config.HandlerCopy:
		return Copy(), nil
	default:
		return nil, fmt.Errorf("%w: handler.type: unknown %q", config.ErrInvalid, h.Type)
	}
}

// CheckOutputs refuses a configuration in which a consumer has an output
// block that its handler, built from the configuration by New, would never
// use: only http and grpc handlers with response: outputs write outputs (a
// Go handler does with actors.Emit, but a configuration cannot name one).
// The error wraps config.ErrInvalid and names the key.
func CheckOutputs(cfg *config.Config) error {
	for i, c := range cfg.Consumers {
		if c.Output.Enabled() && c.Handler.Type != config.HandlerHTTP && c.Handler.Type != config.HandlerGRPC && c.Handler.Type != config.HandlerCopy {
			return fmt.Errorf("%w: consumers[%d].output: the %s handler writes no outputs (copy does, and an http or grpc handler with handler.response: outputs)",
				config.ErrInvalid, i, c.Handler.Type)
		}
	}
	return nil
}

// Copy writes each record — key, value and headers — to the consumer's
// output.topic (actors.Emit): a topic copied, or re-partitioned by key.
func Copy() actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		return actors.Emit(ctx, rec, actors.Output{Key: rec.Key, Value: rec.Value, Headers: rec.Headers})
	})
}

// Noop does nothing: it measures the pipeline's own ceiling.
func Noop() actors.Handler {
	return actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil })
}

// Sleep simulates work of a fixed duration (demos and benchmarks); it returns
// early with the context's error when cancelled.
func Sleep(d time.Duration) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, _ *actors.Record) error {
		return sleep.For(ctx, d)
	})
}

// Log writes one JSON line per record.
type Log struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewLog returns a Log handler writing to out.
func NewLog(out io.Writer) *Log { return &Log{enc: json.NewEncoder(out)} }

type logLine struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp time.Time         `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     string            `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
}

// Handle implements actors.Handler.
func (l *Log) Handle(_ context.Context, rec *actors.Record) error {
	line := logLine{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Value: string(rec.Value)}
	if rec.Key != nil {
		k := string(rec.Key)
		line.Key = &k
	}
	if len(rec.Headers) > 0 {
		line.Headers = make(map[string]string, len(rec.Headers))
		for _, h := range rec.Headers {
			line.Headers[h.Key] = string(h.Value)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.enc.Encode(&line); err != nil {
		return fmt.Errorf("handlers: log: %w", err)
	}
	return nil
}
