package actors

import (
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"
)

// failed applies the failure policy to a record whose attempt failed. Under
// verdictRetry and verdictDeadLetter the record stays held here (parked for a
// retry, or waiting for the dead-letter topic's acknowledgement).
func (co *coordinator) failed(c actor.Context, rec *Record, err error) verdict {
	rec.attempts++
	co.stats.failed.Add(1)
	if outOfFiles(err) {
		rec.outOfFiles++
		if co.stats.noFiles.Add(1) == 1 {
			reportOutOfFiles(co.log, err, co.runners)
		}
	}
	v := co.policy.judge(err, rec.attempts-rec.outOfFiles, co.ctx.Err() != nil)
	switch v {
	case verdictRetry:
		delay := co.policy.retryDelay(rec.attempts, rand.Float64(), err)
		co.hold(rec)
		co.parked[rec] = co.timers.SendOnce(delay, c.Self(), &retryDue{rec: rec})
		co.stats.retries.Add(1)
		co.log.Debug().Err(err).Str("topic", rec.Topic).Int32("partition", rec.Partition).Int64("offset", rec.Offset).
			Int("attempt", rec.attempts).Stringer("retry_in", delay).Msg("handler failed; retrying")
	case verdictDeadLetter:
		co.hold(rec)
		co.finished.dead = append(co.finished.dead, recordFailure{rec: rec, err: err})
	case verdictSkip:
		co.stats.skipped.Add(1)
		co.log.Warn().Err(err).Str("topic", rec.Topic).Int32("partition", rec.Partition).Int64("offset", rec.Offset).
			Int("attempts", rec.attempts).Msg("handler failed; skipping the record")
	}
	return v
}

// hold keeps a failed record's unit busy while the record waits.
func (co *coordinator) hold(rec *Record) {
	if rec.unit != "" {
		co.held[rec.unit]++
	}
}

// unhold ends a hold; the unit stays busy (the caller frees it or runs the
// record again).
func (co *coordinator) unhold(rec *Record) {
	if rec.unit == "" {
		return
	}
	if co.held[rec.unit]--; co.held[rec.unit] == 0 {
		delete(co.held, rec.unit)
	}
}

// handleRetryDue runs a parked record again, before any other record: it is
// the oldest of its key, and its key has waited for it.
func (co *coordinator) handleRetryDue(c actor.Context, m *retryDue) {
	if _, ok := co.parked[m.rec]; !ok {
		return // dropped with its partition meanwhile
	}
	delete(co.parked, m.rec)
	co.unhold(m.rec)
	co.ready = append(co.ready, m.rec)
	co.dispatch(c)
}

// handleDeadLettered completes records the dead-letter topic acknowledged,
// and lets go of those it failed: they are unfinished, and the tree is
// restarting (ErrDeadLetter), so their keys stay held; but their partitions
// must not wait for them to drain.
func (co *coordinator) handleDeadLettered(c actor.Context, m *deadLettered) {
	co.free = co.free[:0]
	for _, rec := range m.records {
		co.unhold(rec)
		co.done(rec.unit)
		co.release(rec)
	}
	for _, rec := range m.failed {
		co.release(rec)
	}
	returnCredits(co.free)
	co.scheduleFlush(c) // a revoked partition may be drained now
	co.dispatch(c)
}

// parkedUnits returns the units held by an assignment's records waiting for
// a retry.
func (co *coordinator) parkedUnits(epoch uint64) map[string]bool {
	units := map[string]bool{}
	for rec := range co.parked {
		if rec.epoch == epoch && rec.unit != "" {
			units[rec.unit] = true
		}
	}
	for _, rec := range co.ready {
		if rec.epoch == epoch && rec.unit != "" {
			units[rec.unit] = true
		}
	}
	return units
}

// dropParked gives up the retries of an assignment's parked records (its
// partition is going away: the next owner will run them from the watermark).
func (co *coordinator) dropParked(epoch uint64) {
	for rec, cancel := range co.parked {
		if rec.epoch != epoch {
			continue
		}
		cancel()
		delete(co.parked, rec)
		co.unhold(rec)
		co.done(rec.unit)
		co.parts[epoch].records--
	}
	for i := 0; i < len(co.ready); i++ {
		if rec := co.ready[i]; rec.epoch == epoch {
			co.done(rec.unit)
			co.parts[epoch].records--
			co.ready = append(co.ready[:i], co.ready[i+1:]...)
			i--
		}
	}
}
