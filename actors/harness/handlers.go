package harness

import (
	"context"
	"sync"

	"github.com/turbokafka/turbo/actors"
)

// Match selects records for a scripted handler.
type Match func(rec *actors.Record) bool

// At matches one record.
func At(topic string, partition int32, offset int64) Match {
	return func(rec *actors.Record) bool {
		return rec.Topic == topic && rec.Partition == partition && rec.Offset == offset
	}
}

// Key matches the records with a key.
func Key(key string) Match {
	return func(rec *actors.Record) bool { return rec.Key != nil && string(rec.Key) == key }
}

// Any matches every record.
func Any(*actors.Record) bool { return true }

// Fail scripts failures: a call for a record match selects fails with
// fail(attempt), attempt being 1 for the record's first call through this
// handler, 2 for the next (retries, restarts and redeliveries alike); when
// fail returns nil, or for records match does not select, the call goes on
// to next (nil: success). fail may also panic, as a broken handler would.
func Fail(match Match, fail func(attempt int) error, next actors.Handler) actors.Handler {
	var mu sync.Mutex
	attempts := map[recordKey]int{}
	return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if match(rec) {
			mu.Lock()
			k := recordKey{rec.Topic, rec.Partition, rec.Offset}
			attempts[k]++
			n := attempts[k]
			mu.Unlock()
			if err := fail(n); err != nil {
				return err
			}
		}
		if next == nil {
			return nil
		}
		return next.Handle(ctx, rec)
	})
}

type recordKey struct {
	topic     string
	partition int32
	offset    int64
}

// FailTimes makes the first n calls of every record match selects fail with
// err (wrap actors.ErrPermanent in it to skip the retries); later calls go
// on to next (nil: success).
func FailTimes(match Match, n int, err error, next actors.Handler) actors.Handler {
	return Fail(match, func(attempt int) error {
		if attempt <= n {
			return err
		}
		return nil
	}, next)
}

// Block holds the calls of the records match selects until release is
// closed, then goes on to next (nil: success). A blocked call whose context
// is cancelled (a teardown, max_handler_time, a lost partition) returns the
// context's error, as a well-behaved handler does.
func Block(match Match, release <-chan struct{}, next actors.Handler) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if match(rec) {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if next == nil {
			return nil
		}
		return next.Handle(ctx, rec)
	})
}
