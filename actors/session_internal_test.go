package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
)

func TestSessionLiveness(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	const timeout = 10 * time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	commitErr := &sarama.ConsumerError{Topic: "t", Partition: 3, Err: sarama.ErrUnknownMemberId}
	for _, tc := range []struct {
		name  string
		steps func(l *sessionLiveness) error
		lost  bool
	}{
		{"answered heartbeats keep it alive", func(l *sessionLiveness) error {
			for s := time.Second; s < 60*time.Second; s += time.Second {
				l.probed(at(s), nil)
				if err := l.tick(at(s + 500*time.Millisecond)); err != nil {
					return err
				}
			}
			return nil
		}, false},
		{"REBALANCE_IN_PROGRESS is proof, not loss", func(l *sessionLiveness) error {
			for s := time.Second; s < 60*time.Second; s += time.Second {
				l.probed(at(s), sarama.ErrRebalanceInProgress)
				l.commitFailed(sarama.ErrRebalanceInProgress)
			}
			return l.tick(at(60 * time.Second))
		}, false},
		{"silence for a session timeout", func(l *sessionLiveness) error {
			l.probed(at(2*time.Second), nil)
			if err := l.tick(at(2*time.Second + timeout - time.Millisecond)); err != nil {
				return err
			}
			return l.tick(at(2*time.Second + timeout))
		}, true},
		{"failed probes are silence", func(l *sessionLiveness) error {
			for s := time.Second; s <= timeout; s += time.Second {
				l.probed(at(s), sarama.ErrOutOfBrokers)
			}
			return l.tick(at(timeout))
		}, true},
		{"a probe's ILLEGAL_GENERATION proves the member is known (a join in progress)", func(l *sessionLiveness) error {
			for s := time.Second; s < 30*time.Second; s += time.Second {
				l.probed(at(s), sarama.ErrIllegalGeneration)
			}
			return l.tick(at(30 * time.Second))
		}, false},
		{"a late answer proves only from when it was sent", func(l *sessionLiveness) error {
			l.probed(at(5*time.Second), nil)
			l.probed(at(time.Second), nil) // older, answered later
			return l.tick(at(5*time.Second + timeout))
		}, true},
		{"heartbeat answered UNKNOWN_MEMBER_ID", func(l *sessionLiveness) error {
			return l.probed(at(time.Second), sarama.ErrUnknownMemberId)
		}, true},
		{"heartbeat answered FENCED_INSTANCE_ID", func(l *sessionLiveness) error {
			return l.probed(at(time.Second), sarama.ErrFencedInstancedId)
		}, true},
		{"commit refused: unknown member", func(l *sessionLiveness) error { return l.commitFailed(commitErr) }, true},
		{"commit refused: illegal generation", func(l *sessionLiveness) error { return l.commitFailed(sarama.ErrIllegalGeneration) }, true},
		{"other commit errors are not loss", func(l *sessionLiveness) error {
			l.commitFailed(sarama.ErrOffsetMetadataTooLarge)
			return l.commitFailed(sarama.ErrNotCoordinatorForConsumer)
		}, false},
		{"sarama's session ended by a refused heartbeat", func(l *sessionLiveness) error {
			return l.sessionEnded(sarama.ErrIllegalGeneration, false)
		}, true},
		{"sarama's session ended by a failed rejoin", func(l *sessionLiveness) error {
			return l.sessionEnded(context.Canceled, false)
		}, true},
		{"leaving ends the session on purpose", func(l *sessionLiveness) error {
			return l.sessionEnded(context.Canceled, true)
		}, false},
		{"lost stays lost", func(l *sessionLiveness) error {
			l.commitFailed(sarama.ErrUnknownMemberId)
			l.probed(at(time.Second), nil)
			return l.tick(at(2 * time.Second))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newSessionLiveness(timeout, t0)
			err := tc.steps(l)
			if got := err != nil; got != tc.lost {
				t.Fatalf("lost = %v (%v), want %v", got, err, tc.lost)
			}
			if err != nil && !errors.Is(err, ErrSessionLost) {
				t.Fatalf("%v does not wrap ErrSessionLost", err)
			}
			if !errors.Is(l.err(), err) && l.err() != err {
				t.Fatalf("err() = %v, want %v", l.err(), err)
			}
		})
	}
}

// fakeSession is the little of a sarama session a sessionWatch logs.
type fakeSession struct{ sarama.ConsumerGroupSession }

func (fakeSession) MemberID() string    { return "m-1" }
func (fakeSession) GenerationID() int32 { return 7 }

// TestSessionWatchSaysLostAtOnce: the watch's judgement reaches readiness
// the moment it is made (the stats leave the session), not when sarama ends
// the session, which takes minutes with the coordinator silent; once only.
func TestSessionWatchSaysLostAtOnce(t *testing.T) {
	t.Parallel()
	cfg := sarama.NewConfig()
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	stats := &consumerStats{}
	stats.reached.Store(true)
	stats.sessionStarted()
	if !readiness(stats.Snapshot()).OK {
		t.Fatal("readiness not OK in a session")
	}
	w := newSessionWatch(nil, cfg, "g", fakeSession{}, nil, zerolog.Nop())
	calls := 0
	w.onLost = func() { calls++; stats.sessionEnded() }
	w.judge(func(l *sessionLiveness) error { return l.tick(time.Now().Add(5 * time.Second)) })
	if calls != 0 || !stats.Snapshot().InSession {
		t.Fatalf("5 s of a 10 s session's silence: onLost called %d times, in session %v; want 0 and true", calls, stats.Snapshot().InSession)
	}
	w.judge(func(l *sessionLiveness) error { return l.tick(time.Now().Add(11 * time.Second)) })
	w.commitFailed(sarama.ErrUnknownMemberId)
	if calls != 1 || stats.Snapshot().InSession {
		t.Fatalf("silence past the session timeout: onLost called %d times, in session %v; want 1 and false", calls, stats.Snapshot().InSession)
	}
	if ready := readiness(stats.Snapshot()); ready.OK {
		t.Fatal("readiness OK with the session judged lost")
	}
}

// TestSessionCauseSeesTheResubscription: sarama, woken by the Done channel
// of the context its session runs under, may end the session with a plain
// cancel before that context's cause reaches the session's own context
// (cancelling closes Done before it walks the children). The session's end
// must still read as a resubscription, not a loss.
func TestSessionCauseSeesTheResubscription(t *testing.T) {
	t.Parallel()
	sub, cancelSub := context.WithCancelCause(context.Background())
	under := context.WithValue(sub, subscriptionKey{}, sub)
	sess, cancelSess := context.WithCancelCause(under)

	cancelSess(nil) // sarama's release, first
	if got := sessionCause(sess); !errors.Is(got, context.Canceled) {
		t.Fatalf("session ended by sarama alone: cause %v; want context.Canceled", got)
	}
	cancelSub(errResubscribed) // turbo's, reaching the session too late
	if got := sessionCause(sess); !errors.Is(got, errResubscribed) {
		t.Fatalf("session ended by sarama as the subscription ended: cause %v; want errResubscribed", got)
	}

	// A session ended on its own (a refused heartbeat) keeps its cause.
	sub2, cancelSub2 := context.WithCancelCause(context.Background())
	defer cancelSub2(nil)
	sess2, cancelSess2 := context.WithCancelCause(context.WithValue(sub2, subscriptionKey{}, sub2))
	cancelSess2(sarama.ErrIllegalGeneration)
	if got := sessionCause(sess2); !errors.Is(got, sarama.ErrIllegalGeneration) {
		t.Fatalf("session ended by a refused heartbeat: cause %v; want ErrIllegalGeneration", got)
	}
	// Without a subscription (named topics) the session's own cause.
	sess3, cancelSess3 := context.WithCancelCause(context.Background())
	cancelSess3(sarama.ErrUnknownMemberId)
	if got := sessionCause(sess3); !errors.Is(got, sarama.ErrUnknownMemberId) {
		t.Fatalf("session without a subscription: cause %v; want ErrUnknownMemberId", got)
	}
}
