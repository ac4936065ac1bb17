package actors

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// kafkaSide is the client proxy's Kafka side: whatever talks to the cluster,
// with the goroutines that does. The proxy actor keeps the logic — budget
// sharing through the gates, the revocation handshake, commit batching,
// dead-letter bookkeeping — and the side reads each held partition within
// its gate's credits and reports by messages (sessionStarted, claimStarted,
// claimFetched, claimEnding, groupStopped, deadLetterWritten).
//
// kafkaGroup (sarama) is the side of every consumer; memGroup (an in-memory
// cluster) is the side of test/harness, so that its tests run the real proxy
// and the rest of the tree without a broker. The proxy calls the side once
// per commit or dead-letter batch, never per record: records reach the proxy
// in claimFetched batches either way.
type kafkaSide interface {
	// start joins the group; the side reports through send.
	start(send func(msg any))
	// stop leaves gracefully: every held partition goes through the
	// revocation handshake (drain, final commit), then groupStopped.
	stop()
	// kill leaves at once, without handshakes. It returns a channel closed
	// once every goroutine of the side has returned, nil if start was never
	// called.
	kill() <-chan struct{}
	// requestCommit flushes the offsets marked on sess without blocking the
	// proxy.
	requestCommit(sess groupSession)
	// deadLetter writes records to the dead-letter topic; every outcome
	// comes back as a deadLetterWritten.
	deadLetter(fs []recordFailure)
	// rememberLost takes the final watermark of a claim that was lost
	// (claimLost), known only once its cancelled records returned: what it
	// finished, never committed, to skip if the partition comes back.
	rememberLost(tp TopicPartition, epoch uint64, fc finalCommit)
}

// groupSession is what the proxy and the claims need of a consumer-group
// session: marking offsets (with metadata) and committing them.
type groupSession interface {
	MarkOffset(topic string, partition int32, offset int64, metadata string)
	ResetOffset(topic string, partition int32, offset int64, metadata string)
	Commit()
}

var (
	_ kafkaSide    = (*kafkaGroup)(nil)
	_ kafkaSide    = (*memGroup)(nil)
	_ groupSession = (sarama.ConsumerGroupSession)(nil)
	_ groupSession = (*memSession)(nil)
)

// handOver is a claim's end of the revocation handshake, shared by both
// sides: it tells the proxy (claimEnding), waits for the partition's final
// watermark — bounded by wait, and cut short by abort — and commits it
// before the claim lets the partition go. It returns that final watermark
// (ok false when there was none, or no answer).
//
// A session lost meanwhile (lost closed) ends the handshake without a
// commit: the partition is dropped as lost (claimLost).
func handOver(send func(any), abort, lost <-chan struct{}, wait time.Duration, log zerolog.Logger, sess groupSession, tp TopicPartition, epoch uint64) finalCommit {
	reply := make(chan finalCommit, 1)
	send(&claimEnding{tp: tp, epoch: epoch, reply: reply})
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case fc := <-reply:
		if fc.ok {
			// MarkOffset only moves forward; ResetOffset then sets the
			// metadata even when the offset is the one already marked.
			sess.MarkOffset(tp.Topic, tp.Partition, fc.offset, fc.meta)
			sess.ResetOffset(tp.Topic, tp.Partition, fc.offset, fc.meta)
		}
		sess.Commit()
		return fc
	case <-lost:
		return dropLost(send, abort, tp, epoch)
	case <-abort:
	case <-t.C:
		log.Error().Str("partition", tp.String()).Msg("revocation handshake timed out; releasing without a final commit")
	}
	return finalCommit{}
}

// lostReplyWait bounds a lost claim's wait for the proxy's answer (the
// proxy answers at once; a tree being torn down may not).
const lostReplyWait = time.Second

// dropLost is a claim's end of a loss: it tells the proxy, and returns the
// last watermark the proxy marked for the partition (ok false if none, or
// no answer): what this member finished, never committed.
func dropLost(send func(any), abort <-chan struct{}, tp TopicPartition, epoch uint64) finalCommit {
	reply := make(chan finalCommit, 1)
	send(&claimLost{tp: tp, epoch: epoch, reply: reply})
	t := time.NewTimer(lostReplyWait)
	defer t.Stop()
	select {
	case fc := <-reply:
		return fc
	case <-abort:
	case <-t.C:
	}
	return finalCommit{}
}

// finishedIn returns the offsets above committed that an earlier owner of tp
// finished, per the committed metadata. Metadata turbo did not write, or
// cannot read, is ignored with one warning (per warned).
func finishedIn(tp TopicPartition, committed int64, meta string, warned *sync.Once, log zerolog.Logger) []offsetmeta.Range {
	if committed < 0 || meta == "" {
		return nil
	}
	ranges, err := offsetmeta.Decode(committed, meta)
	if err != nil && !errors.Is(err, offsetmeta.ErrStale) {
		warned.Do(func() {
			log.Warn().Err(err).Str("partition", tp.String()).Msg("ignoring commit metadata turbo cannot read (warned once)")
		})
		return nil
	}
	return ranges
}

// originHeaders are the headers a dead letter carries beyond the record's
// own: where it came from and why it failed.
func originHeaders(f recordFailure, at time.Time) [6]Header {
	rec := f.rec
	return [6]Header{
		{Key: "turbo-original-topic", Value: []byte(rec.Topic)},
		{Key: "turbo-original-partition", Value: []byte(strconv.FormatInt(int64(rec.Partition), 10))},
		{Key: "turbo-original-offset", Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		{Key: "turbo-error", Value: []byte(fmt.Sprint(f.err))},
		{Key: "turbo-attempts", Value: []byte(strconv.Itoa(rec.attempts))},
		{Key: "turbo-failed-at", Value: []byte(at.UTC().Format(time.RFC3339Nano))},
	}
}
