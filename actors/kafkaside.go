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
// and the rest of the tree without a broker. Both share their lifecycle
// (sideLife) and their claims (claim.go: batch assembly, credit return,
// handover and loss); each feeds its claims records its own way (claimFeed). The proxy calls the side once
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
