package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"math/rand/v2"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// kafkaSide is the client proxy's Kafka side: whatever talks to the cluster,
// with the goroutines that does. The proxy actor keeps the logic — budget
// sharing through the gates, the revocation handshake, commit batching,
// dead-letter bookkeeping — and the side reads each owned partition within
// its gate's credits and reports by messages (sessionStarted, claimStarted,
// claimFetched, claimEnding, groupStopped, deadLetterWritten).
//
// kafkaGroup (sarama) is the side of every consumer; memGroup (an in-memory
// cluster) is the side of actors/harness, so that its tests run the real proxy
// and the rest of the tree without a broker. Both share their lifecycle
// (sideLife) and their claims (claim.go: batch assembly, credit return,
// handover and loss); each feeds its claims records its own way (claimFeed). The proxy calls the side once
// per commit or dead-letter batch, and once per high watermark refresh,
// never per record: records reach the proxy in claimFetched batches either
// way.
type kafkaSide interface {
	// start joins the group; the side reports through send.
	start(send func(msg any))
	// stop leaves gracefully: every owned partition goes through the
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
	// produceOutputs writes the records' outputs, in order; every record
	// comes back in an outputsWritten once all its outputs are acknowledged,
	// or with the error of one that could not be written.
	produceOutputs(recs []*envelope)
	// transact (output.exactly_once) records, as one step, offsets to
	// commit on sess and the records whose outputs (or dead letters) the
	// commit passes: the next commit of sess is a transaction that holds
	// them all, or none if it fails (transactionFailed). Each record comes
	// back in an outputsWritten once its outputs are acknowledged.
	transact(sess groupSession, offsets []partitionOffset, recs []*envelope)
	// rememberLost takes the final watermark of a claim that was lost
	// (claimLost), known only once its cancelled records returned: what it
	// finished, never committed, to skip if the partition comes back.
	rememberLost(tp TopicPartition, epoch uint64, fc finalCommit)
	// refreshWatermarks asks, without blocking the proxy, for the latest
	// offsets of partitions that are not being read (hwmrefresh.go); the
	// answer comes back as a watermarksRefreshed. A side that cannot ask
	// now (not connected yet, or a refresh still under way) drops the
	// request: the proxy asks again at its next tick.
	refreshWatermarks(q []partitionHWM)
	// offsetsAt asks, without blocking the proxy, for the offset of each
	// of q's partitions at its time (at): its first record at or after
	// it, else its end; with at zero, its end. The answer comes back as
	// one offsetsFound. The proxy asks again only once answered.
	offsetsAt(q []partitionHWM)
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

// sideLife is the lifecycle both Kafka sides share (kafkaGroup, memGroup):
// the proxy's send, a context cancelled to leave gracefully, an abort
// channel closed to leave at once, and done, closed once the side's session
// goroutine has returned. Its methods implement kafkaSide's stop and kill.
type sideLife struct {
	send      func(msg any) // delivers to the proxy actor
	ctx       context.Context
	cancel    context.CancelFunc
	abort     chan struct{} // closed to leave at once, without handshakes
	abortOnce sync.Once
	done      chan struct{} // closed when the side's session goroutine has returned
	epochs    atomic.Uint64 // claim epochs: one per claim, never reused
	batches   atomic.Int64  // batches assembled by runClaim (tests check both sides go through it)
	held      *atomic.Bool  // Consumer.Pause: the claims' gates give no credits
	commits   commitRounds  // the claims' final commits, coalesced
}

// begin readies the lifecycle; the side then starts its session goroutine,
// which closes done when it returns.
func (l *sideLife) begin(send func(msg any)) {
	l.send = send
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.abort = make(chan struct{})
	l.done = make(chan struct{})
}

// stop leaves gracefully: every claim goes through the revocation handshake
// (drain, final commit) before its partition is let go.
func (l *sideLife) stop() { l.cancel() }

// kill leaves at once: claims return without handshakes or commits. It
// returns done, nil if the side was never started.
func (l *sideLife) kill() <-chan struct{} {
	if l.done == nil {
		return nil
	}
	l.abortOnce.Do(func() { close(l.abort) })
	l.cancel()
	return l.done
}

// sleep waits d unless the side is stopped first; it reports whether to go
// on.
func (l *sideLife) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.ctx.Done():
		return false
	}
}

// committer runs a side's blocking commits off the proxy actor, so that the
// actor keeps forwarding records while a commit is on the wire: one at a
// time, each flushing every offset marked by then.
type committer struct {
	req   chan groupSession // capacity 1: a request already queued flushes later marks too
	stop  chan struct{}
	stats *consumerStats
}

func newCommitter(stats *consumerStats) *committer {
	return &committer{req: make(chan groupSession, 1), stop: make(chan struct{}), stats: stats}
}

// run commits until stop is closed.
func (c *committer) run() {
	for {
		select {
		case sess := <-c.req:
			start := time.Now()
			sess.Commit()
			c.stats.observeCommit(start)
		case <-c.stop:
			return
		}
	}
}

// request asks for the offsets marked on sess to be committed; it never
// blocks.
func (c *committer) request(sess groupSession) {
	select {
	case c.req <- sess:
	default:
	}
}

// dialing is what connecting to Kafka needs of a side (connectRetrying).
type dialing struct {
	life    *sideLife
	brokers []string
	net     *kafkanet.Net
	stats   *consumerStats
	log     zerolog.Logger
	retry   backoff.Policy
}

// fatalDial marks a dial error that retrying cannot cure and that is not
// a refusal of the connection (kafka.group_protocol asking for what the
// brokers lack): the consumer gives up at once.
type fatalDial interface {
	error
	fatalDial()
}

// connectRetrying calls dial until it succeeds, retrying with backoff
// while Kafka is unreachable; it gives up when the side is stopped, at a
// fatalDial error, or when Kafka refuses every one of the first
// startupRefusals attempts of a consumer that never reached it (a
// configuration mistake: wrong password, wrong CA, TLS or SASL on the
// wrong listener), which the consumer reports through Failed. A refusal
// later in a run (a rotated password) is retried like an outage, and shows
// in the stats meanwhile. Both Kafka sides connect through it.
func connectRetrying[C any](d dialing, dial func() (C, error)) (C, error) {
	var zero C
	refusals := 0
	for failures := 1; ; failures++ {
		c, err := dial()
		if err == nil {
			d.stats.reached.Store(true)
			d.stats.setKafkaError("")
			if failures > 1 {
				d.log.Info().Strs("brokers", d.brokers).Msg("connected to Kafka")
			}
			return c, nil
		}
		var fatal fatalDial
		if errors.As(err, &fatal) {
			d.log.Error().Str("cause", fatal.Error()).Strs("brokers", d.brokers).Msg(fatal.Error() + "; giving up")
			d.stats.setKafkaError(fatal.Error())
			d.stats.giveUp(fatal)
			return zero, err
		}
		wait := d.retry.Delay(failures, rand.Float64())
		r := d.net.Explain(err)
		d.stats.connError(refusalKind(r))
		if r == nil {
			refusals = 0
			d.log.Warn().Err(err).Strs("brokers", d.brokers).Stringer("retry_in", wait).Msg("cannot reach Kafka; retrying")
		} else {
			refusals++
			d.stats.setKafkaError(r.Cause)
			if !d.stats.reached.Load() && refusals >= startupRefusals {
				d.log.Error().Str("cause", r.Cause).Int("attempts", refusals).Strs("brokers", d.brokers).
					Msg("Kafka refuses the connection: " + r.Cause + "; giving up (a configuration mistake does not fix itself)")
				d.stats.giveUp(r)
				return zero, r
			}
			d.log.Error().Str("cause", r.Cause).Strs("brokers", d.brokers).Stringer("retry_in", wait).
				Msg("Kafka refuses the connection: " + r.Cause + "; retrying")
		}
		if !d.life.sleep(wait) {
			return zero, d.life.ctx.Err()
		}
	}
}

// startupRefusals is how many refused attempts in a row end a consumer that
// never reached Kafka.
const startupRefusals = 3

// aborted reports whether the side was killed.
func (l *sideLife) aborted() bool {
	select {
	case <-l.abort:
		return true
	default:
		return false
	}
}

// sessionStarted tells the proxy of a new group session.
func (l *sideLife) sessionStarted(sess groupSession) { l.send(&sessionStarted{sess: sess}) }

// stopped tells the proxy the side has left the group (err: how closing it
// went), after its last claim ended.
func (l *sideLife) stopped(err error) { l.send(&groupStopped{err: err}) }

// deadLettered tells the proxy how writing rec to the dead-letter topic went.
func (l *sideLife) deadLettered(rec *envelope, err error) {
	l.send(&deadLetterWritten{rec: rec, err: err})
}

// errNoDeadLetterProducer is a dead letter's outcome when the consumer has
// no dead-letter topic, or its producer is not connected.
var errNoDeadLetterProducer = errors.New("actors: no dead-letter producer")

// errNoOutputProducer is an output's outcome when the Kafka side has no
// producer for it (not connected).
var errNoOutputProducer = errors.New("actors: no output producer")

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

// deadLetter is what a side writes to the dead-letter topic for a failed
// record: its key, value and headers, then where it came from and why it
// failed (turbo-original-topic, -partition, -offset, turbo-error,
// turbo-attempts, turbo-failed-at), in the side's own header type (made by
// mk).
//
// A dead letter weighs at most limit bytes (deadLetterLimit): one the
// producers or the brokers refuse for its size would be refused again
// after every restart of the tree, which runs the record again, forever. So
// the error text is cut to maxDeadLetterError bytes, and a dead letter
// still too large leaves out the record's value (turbo-value-dropped: its
// size), then its headers (turbo-headers-dropped: how many), then its key
// (turbo-key-dropped: its size). The record itself stays in its topic, at
// turbo-original-offset, for as long as the topic's retention keeps it.
func deadLetter[H any](f recordFailure, at time.Time, limit int, mk func(key string, value []byte) H) (key, value []byte, headers []H) {
	rec := f.rec
	errText := fmt.Sprint(f.err)
	if len(errText) > maxDeadLetterError {
		cut := maxDeadLetterError
		for cut > 0 && !utf8.RuneStart(errText[cut]) {
			cut-- // not inside a character
		}
		errText = errText[:cut] + "…"
	}
	turbo := [][2]string{
		{"turbo-original-topic", rec.Topic},
		{"turbo-original-partition", strconv.FormatInt(int64(rec.Partition), 10)},
		{"turbo-original-offset", strconv.FormatInt(rec.Offset, 10)},
		{"turbo-error", errText},
		{"turbo-attempts", strconv.Itoa(rec.attempts)},
		{"turbo-failed-at", at.UTC().Format(time.RFC3339Nano)},
	}
	key, value, own := rec.Key, rec.Value, rec.Headers
	var dropped [][2]string
	size := func() int {
		n := len(key) + len(value)
		for _, h := range own {
			n += len(h.Key) + len(h.Value) + headerOverhead
		}
		for _, h := range append(turbo, dropped...) {
			n += len(h[0]) + len(h[1]) + headerOverhead
		}
		return n
	}
	if size() > limit && value != nil {
		dropped = append(dropped, [2]string{"turbo-value-dropped", strconv.Itoa(len(value))})
		value = nil
	}
	if size() > limit && len(own) > 0 {
		dropped = append(dropped, [2]string{"turbo-headers-dropped", strconv.Itoa(len(own))})
		own = nil
	}
	if size() > limit && key != nil {
		dropped = append(dropped, [2]string{"turbo-key-dropped", strconv.Itoa(len(key))})
		key = nil
	}
	headers = make([]H, 0, len(own)+len(turbo)+len(dropped))
	for _, h := range own {
		headers = append(headers, mk(h.Key, h.Value))
	}
	for _, h := range append(turbo, dropped...) {
		headers = append(headers, mk(h[0], []byte(h[1])))
	}
	return key, value, headers
}

// maxDeadLetterError bounds the error text a dead letter carries
// (turbo-error).
const maxDeadLetterError = 4096

// headerOverhead is what a record header costs besides its key and value
// (sarama counts two varints of at most 5 bytes).
const headerOverhead = 10

// deadLetterLimit is the most a dead letter's key, value and headers may
// weigh: what both sides' producers accept (sarama's MaxMessageBytes,
// franz-go's ProducerBatchMaxBytes: 1,000,000 bytes, or output.max_bytes
// and its framing when more), less room for the record's and its batch's
// framing (sarama counts 36 bytes, a batch of one takes about 80).
func deadLetterLimit(outputBytes int) int { return max(1_000_000, outputBytes+4096) - 128 }
