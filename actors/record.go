package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Record is one Kafka record as turbo hands it to a Handler. It is turbo's own
// type, so handlers do not depend on the Kafka client library.
//
// A handler must treat the record as read-only, its fields and its bytes:
// the consumer reads the same Record (for the watermark, a retry, the
// dead-letter topic) while and after the handler runs. A handler that keeps
// it keeps it read-only. Ordering never depends on it: the scheduler keys
// records by a private copy of the key's bytes.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte // nil when the record has no key
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// envelope is a record as the pipeline carries it: the Record and what the
// actors keep about it. A handler sees only the Record.
type envelope struct {
	Record
	// epoch identifies the assignment of the partition this record was
	// fetched under. A partition that is revoked and assigned again gets a new
	// epoch, so completions of the old assignment can never move the new
	// assignment's watermark.
	epoch uint64
	// unit is what the ordering strategy serializes the record on (its key,
	// its partition, or "" when unordered), set once by the coordinator;
	// the claim puts a private copy of the key's bytes there first
	// (keyArena), which is the unit under key ordering.
	unit string
	// gate is the fetch-credit gate of the record's partition assignment:
	// the coordinator returns the record's credit to it the moment the
	// record finishes, without a round trip through the tree.
	gate *gate
	// size is what the record counts against max_buffered_bytes (recordSize).
	size int64
	// ctx is the context of the record's assignment in the coordinator: it
	// is cancelled when the partition is gone (a revocation that expired).
	ctx context.Context
	// attempts counts the handler runs that failed so far.
	attempts int
	// outOfFiles counts those of them that failed because the process ran
	// out of file descriptors: they do not count against max_attempts.
	outOfFiles int
	// arrived is when the record reached the tree (unix ns), for the
	// buffer-wait histogram.
	arrived int64
	// outputs are what the handler emitted for it (Emit) in the attempt
	// that succeeded; outputErr is why Emit rejected one, which fails the
	// attempt. outLeft counts the outputs not yet acknowledged while the
	// Kafka side writes them (its producer's goroutines count it down).
	outputs   []Output
	outputErr error
	outLeft   atomic.Int32
	// deadErr is why a record goes to the dead-letter topic inside a
	// transaction (output.exactly_once): there its dead letter is written
	// like an output, with the outputs of the commit that passes it.
	deadErr error
	// inherited marks a record that an earlier owner of the partition
	// already finished (read from the commit metadata): it is tracked for
	// the watermark but never run again.
	inherited bool
	// skip: its operator skipped it (Consumer.Skip). A runner that reaches
	// it runs no handler; whatever an attempt already running ends with, it
	// is not retried: it is dead-lettered or skipped (coordinator.failed).
	skip atomic.Bool
}

// recordSize is the bytes of a record that count against
// max_buffered_bytes: its key, value and headers.
func recordSize(rec *Record) int64 {
	n := len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// TP returns the partition the record belongs to.
func (r *Record) TP() TopicPartition { return TopicPartition{Topic: r.Topic, Partition: r.Partition} }

// Handler processes one record. Returning an error (or panicking) fails the
// record; the context is cancelled when the consumer is torn down, and a
// handler is expected to return promptly then.
type Handler interface {
	Handle(ctx context.Context, rec *Record) error
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, rec *Record) error

// Handle calls f(ctx, rec).
func (f HandlerFunc) Handle(ctx context.Context, rec *Record) error { return f(ctx, rec) }
