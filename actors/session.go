package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// memberGone reports whether a broker's answer says this member (in its
// generation) is no longer in the group, or has been replaced: whatever it
// holds belongs to someone else now.
func memberGone(err error) bool {
	return errors.Is(err, sarama.ErrUnknownMemberId) ||
		errors.Is(err, sarama.ErrIllegalGeneration) ||
		errors.Is(err, sarama.ErrFencedInstancedId)
}

// sessionLiveness judges whether a member can still prove its group
// session, from the answers it gets and the time that passes (given, never
// read: it is pure). It is the rule of Kafka's Java client, which calls
// onPartitionsLost rather than onPartitionsRevoked when it finds out that
// its session ended, and the rule turbo needs once a member has handled
// partitions the broker had already given to another:
//
//   - an answer that the member is unknown, of an old generation, or fenced
//     (to a heartbeat, a commit, a join) means the partitions are lost;
//   - REBALANCE_IN_PROGRESS is normal: the member is known and current (and
//     so is a probe's ILLEGAL_GENERATION, see probed);
//   - no proof (an answered heartbeat) for a whole session timeout means
//     the broker has expired the member by now, whatever it failed to say.
//
// Once lost, it stays lost: a session is not revived, the member joins
// again under a new one.
type sessionLiveness struct {
	timeout time.Duration // the group's session timeout
	proven  time.Time     // when the last proof was sent
	lost    error         // nil while alive; the reason, wrapping ErrSessionLost
}

func newSessionLiveness(timeout time.Duration, start time.Time) *sessionLiveness {
	return &sessionLiveness{timeout: timeout, proven: start}
}

// probed takes the answer to a heartbeat sent at sent. The proof dates from
// the sending: the broker may have counted the session from then on only.
//
// A probe's ILLEGAL_GENERATION is proof too, not loss: the broker checks
// the member before the generation (Kafka's GroupCoordinator, and kfake),
// so the member is in the group; and the prober reads the generation sarama
// has stored, which lags behind a join in progress (sarama stores the new
// one only after SyncGroup) — a member waiting in a SyncGroup for a slow or
// dead leader would otherwise be judged silent. sarama's own heartbeats,
// which it serializes with its joins, judge the generation: their
// ILLEGAL_GENERATION ends its session (sessionEnded), a heartbeat interval
// later at most.
func (l *sessionLiveness) probed(sent time.Time, err error) error {
	switch {
	case l.lost != nil:
	case err == nil, errors.Is(err, sarama.ErrRebalanceInProgress), errors.Is(err, sarama.ErrIllegalGeneration):
		if sent.After(l.proven) {
			l.proven = sent
		}
	case memberGone(err):
		l.lost = fmt.Errorf("%w: heartbeat refused: %w", ErrSessionLost, err)
	}
	return l.lost
}

// commitFailed takes a commit's error: one that says the member is gone
// means the partitions are lost (the commit itself was refused, and the next
// owner starts from the last committed offset).
func (l *sessionLiveness) commitFailed(err error) error {
	if l.lost == nil && memberGone(err) {
		l.lost = fmt.Errorf("%w: commit refused: %w", ErrSessionLost, err)
	}
	return l.lost
}

// sessionEnded takes the end of sarama's session while the member is not
// leaving (leaving ends it on purpose). With cooperative rebalancing a
// revocation never ends the session — only the revoked claims — so an end
// the member did not ask for is always a loss of the session: its heartbeat
// was refused (cause UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED), its
// heartbeats failed until sarama gave up, or a rejoin failed; the cause
// says which.
func (l *sessionLiveness) sessionEnded(cause error, leaving bool) error {
	if l.lost == nil && !leaving {
		l.lost = fmt.Errorf("%w: the group session ended: %w", ErrSessionLost, cause)
	}
	return l.lost
}

// tick judges the silence: no proof since a session timeout before now.
func (l *sessionLiveness) tick(now time.Time) error {
	if l.lost == nil && now.Sub(l.proven) >= l.timeout {
		l.lost = fmt.Errorf("%w: no heartbeat answered for %v (the session timeout)", ErrSessionLost, now.Sub(l.proven).Round(time.Millisecond))
	}
	return l.lost
}

// err is the reason the session was lost, nil while it is alive.
func (l *sessionLiveness) err() error { return l.lost }
