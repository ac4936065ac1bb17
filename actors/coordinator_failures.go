package actors

import (
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/turbokafka/turbo/actors/pipeline"
	"github.com/turbokafka/turbo/config"
)

// failed applies the failure policy to a record whose attempt failed, and
// tells the pipeline what becomes of it. Under Retry and DeadLetter the
// pipeline keeps the record's unit pinned (parked for a retry, or waiting for
// the dead-letter topic's acknowledgement).
func (co *coordinator) failed(rec *envelope, err error) pipeline.Verdict {
	if rec.skip.Load() {
		return co.skipped(rec, err)
	}
	rec.attempts++
	co.stats.failed.Add(1)
	if outOfFiles(err) {
		rec.outOfFiles++
		if co.stats.noFiles.Add(1) == 1 {
			reportOutOfFiles(co.log, err, co.runners)
		}
	}
	switch co.policy.judge(err, rec.attempts-rec.outOfFiles, co.ctx.Err() != nil) {
	case verdictRetry:
		return pipeline.Retry // park arms its timer
	case verdictDeadLetter:
		return pipeline.DeadLetter
	case verdictSkip:
		co.stats.skipped.Add(1)
		co.log.Warn().Err(err).Str("topic", rec.Topic).Int32("partition", rec.Partition).Int64("offset", rec.Offset).
			Int("attempts", rec.attempts).Msg("handler failed; skipping the record")
		return pipeline.Finished // a skipped failure goes where a success goes: done
	default:
		return pipeline.Escalate
	}
}

// skipped is the verdict on a record its operator skipped, whatever its
// last attempt ended with (ErrSkipped when none ran, else the handler's
// error, which its dead letter then carries): not retried, but
// dead-lettered when the consumer has a dead-letter topic, else skipped
// and counted.
func (co *coordinator) skipped(rec *envelope, err error) pipeline.Verdict {
	log := co.log.Warn().Err(err).Str("topic", rec.Topic).Int32("partition", rec.Partition).Int64("offset", rec.Offset).Int("attempts", rec.attempts)
	if co.policy.onFailure == config.OnFailureDLQ {
		log.Msg("skipped by its operator: to the dead-letter topic")
		return pipeline.DeadLetter
	}
	co.stats.skipped.Add(1)
	log.Msg("skipped by its operator")
	return pipeline.Finished
}

// park arms the retry timer of a record the pipeline parked: retryDue makes
// it ready again (unless its partition went meanwhile, which cancels it).
func (co *coordinator) park(c actor.Context, rec *envelope, err error) {
	delay := co.policy.retryDelay(rec.attempts, rand.Float64(), err)
	co.parked[rec] = co.timers.SendOnce(delay, c.Self(), &retryDue{rec: rec})
	co.stats.retries.Add(1)
	co.log.Debug().Err(err).Str("topic", rec.Topic).Int32("partition", rec.Partition).Int64("offset", rec.Offset).
		Int("attempt", rec.attempts).Stringer("retry_in", delay).Msg("handler failed; retrying")
}
