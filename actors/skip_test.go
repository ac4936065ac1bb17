package actors_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// TestSkipAPoisonRecord: a record that fails every attempt pins its key (a
// retry every 100 ms, up to 1,000 attempts). Skipping it, in each ordering
// and with and without a dead-letter topic, ends its retries at once: it
// does not run again, it is counted skipped or dead-lettered exactly once
// (with ErrSkipped), the records behind it go on, and the committed offset
// passes it. Skipping it again finds it gone.
func TestSkipAPoisonRecord(t *testing.T) {
	t.Parallel()
	for _, ordering := range []config.Ordering{config.OrderingKey, config.OrderingPartition, config.OrderingUnordered} {
		for _, dlq := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dlq=%v", ordering, dlq), func(t *testing.T) {
				t.Parallel()
				c := harness.Consumer("skip", "t")
				c.Ordering = ordering
				c.Retry.MaxAttempts = 1000
				c.Retry.InitialBackoff, c.Retry.MaxBackoff = 100*time.Millisecond, 100*time.Millisecond
				if dlq {
					c.OnFailure, c.DLQTopic = config.OnFailureDLQ, "t-dlq"
				}
				poison := errors.New("poison")
				hs := harness.New(t, harness.Config{Consumer: c}, harness.FailTimes(harness.At("t", 0, 3), math.MaxInt, poison, nil))
				hs.Feed(harness.Seq("t", 0, 0, 20, 2)...) // two keys: @3's key holds half the records
				hs.Assign("t", 0)
				hs.Await("the poison record to fail twice", func() bool { return hs.Attempts("t", 0, 3) >= 2 })
				res, err := hs.Skip("t", 0, 3)
				if err != nil || !res.Found || res.Where != "parked" || res.DeadLetter != dlq || res.Again {
					t.Fatalf("Skip = %+v, %v; want found parked, dead letter %v", res, err, dlq)
				}
				if !strings.Contains(res.String(), "t/0@3 was waiting for a retry") {
					t.Fatalf("Skip says %q", res)
				}
				attempts := hs.Attempts("t", 0, 3)
				hs.AwaitHandled(19)
				hs.AwaitCommitted("t", 0, 20)
				if n := hs.Attempts("t", 0, 3); n != attempts {
					t.Fatalf("the skipped record ran again: %d attempts, %d at the skip", n, attempts)
				}
				skipped, dead := hs.Stats().Skipped, hs.DeadLetters()
				if dlq {
					if len(dead) != 1 || !deadOffset(dead[0], "3") || skipped != 0 {
						t.Fatalf("%d dead letters (%+v), %d skipped; want @3 dead-lettered once", len(dead), dead, skipped)
					}
					if e, _ := dead[0].Header("turbo-error"); !strings.Contains(string(e), actors.ErrSkipped.Error()) {
						t.Fatalf("the dead letter's error is %q, want %q", e, actors.ErrSkipped)
					}
				} else if skipped != 1 || len(dead) != 0 {
					t.Fatalf("%d skipped, %d dead letters; want 1 skipped", skipped, len(dead))
				}
				if again, err := hs.Skip("t", 0, 3); err != nil || again.Found {
					t.Fatalf("Skip again after it finished = %+v, %v; want not found", again, err)
				}
			})
		}
	}
}

// deadOffset reports whether a dead letter names the original offset off.
func deadOffset(d harness.Record, off string) bool {
	v, ok := d.Header("turbo-original-offset")
	return ok && string(v) == off
}

// TestSkipARunningRecord: a record whose handler runs when it is skipped
// is not cancelled; when its handler fails, it is not retried but skipped,
// and the records behind it go on.
func TestSkipARunningRecord(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("skip-running", "t")
	c.Retry.MaxAttempts = 1000
	release := make(chan struct{})
	h := harness.Block(harness.At("t", 0, 1), release, harness.FailTimes(harness.At("t", 0, 1), math.MaxInt, errors.New("stuck, then failed"), nil))
	hs := harness.New(t, harness.Config{Consumer: c}, h)
	hs.Feed(harness.Seq("t", 0, 0, 10, 1)...) // one key: everything waits behind @1
	hs.Assign("t", 0)
	hs.AwaitStarted("t", 0, 1)
	res, err := hs.Skip("t", 0, 1)
	if err != nil || !res.Found || res.Where != "running" {
		t.Fatalf("Skip = %+v, %v; want found running", res, err)
	}
	close(release)
	hs.AwaitHandled(9)
	hs.AwaitCommitted("t", 0, 10)
	if n := hs.Attempts("t", 0, 1); n != 1 {
		t.Fatalf("the skipped record ran %d times, want once", n)
	}
	if s := hs.Stats().Skipped; s != 1 {
		t.Fatalf("%d skipped, want 1", s)
	}
	if res, err := hs.Skip("t", 0, 99); err != nil || res.Found {
		t.Fatalf("Skip of an offset never fetched = %+v, %v; want not found", res, err)
	}
}

// TestSkipCancelsARunningCall: under max_handler_time, skipping a record
// whose handler runs cancels the handler's context at once (long before
// max_handler_time), and the record is skipped, not retried.
func TestSkipCancelsARunningCall(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("skip-cancel", "t")
	c.Retry.MaxAttempts = 1000
	c.MaxHandlerTime = 10 * time.Minute
	hang := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Offset == 1 {
			<-ctx.Done() // a call that never returns by itself
			return ctx.Err()
		}
		return nil
	})
	hs := harness.New(t, harness.Config{Consumer: c}, hang)
	hs.Feed(harness.Seq("t", 0, 0, 10, 1)...)
	hs.Assign("t", 0)
	hs.AwaitStarted("t", 0, 1)
	res, err := hs.Skip("t", 0, 1)
	if err != nil || !res.Found || res.Where != "running" || !res.Cancelled {
		t.Fatalf("Skip = %+v, %v; want found running, cancelled", res, err)
	}
	hs.AwaitHandled(9)
	hs.AwaitCommitted("t", 0, 10)
	if n, s := hs.Attempts("t", 0, 1), hs.Stats().Skipped; n != 1 || s != 1 {
		t.Fatalf("%d attempts, %d skipped; want 1 and 1", n, s)
	}
}
