package actors

import (
	"slices"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/offsetmeta"
)

func TestReleasedAtAddsWhatTheBrokerDoesNotKnow(t *testing.T) {
	t.Parallel()
	tp := TopicPartition{Topic: "t", Partition: 3}
	meta, _, err := offsetmeta.Encode(100, []offsetmeta.Range{{From: 105, To: 109}}, 4000)
	if err != nil {
		t.Fatal(err)
	}
	topic, other, unknown := topicID{1}, topicID{2}, topicID{}
	var r releasedAt
	r.remember(tp, topic, finalCommit{offset: 100, meta: meta, ok: true})
	r.remember(TopicPartition{Topic: "t", Partition: 4}, topic, finalCommit{offset: 7, ok: false}) // nothing to commit: not remembered
	noID := TopicPartition{Topic: "u", Partition: 0}
	r.remember(noID, unknown, finalCommit{offset: 50, ok: true}) // a broker before Kafka 2.8

	mine := []offsetmeta.Range{{From: 60, To: 99}, {From: 105, To: 109}}
	for _, tc := range []struct {
		name      string
		tp        TopicPartition
		id        topicID
		committed int64
		broker    []offsetmeta.Range
		want      []offsetmeta.Range
	}{
		{"the final commit never landed", tp, topic, 60, nil, mine},
		{"merged with the broker's metadata", tp, topic, 60, []offsetmeta.Range{{From: 62, To: 64}, {From: 120, To: 121}},
			[]offsetmeta.Range{{From: 60, To: 99}, {From: 105, To: 109}, {From: 120, To: 121}}},
		{"the broker is as far", tp, topic, 100, []offsetmeta.Range{{From: 105, To: 109}}, []offsetmeta.Range{{From: 105, To: 109}}},
		{"another owner committed further", tp, topic, 150, nil, nil},
		// No commit ever landed (a broker stopping refuses commits before it
		// closes its connections): the claim starts at the initial offset,
		// and the member had finished everything below 100 and 105–109.
		{"no commit on the broker (oldest)", tp, topic, -2, nil, []offsetmeta.Range{{From: 0, To: 99}, {From: 105, To: 109}}},
		{"no commit on the broker (newest)", tp, topic, -1, nil, []offsetmeta.Range{{From: 0, To: 99}, {From: 105, To: 109}}},
		{"no commit, the topic's id unknown now", tp, unknown, -2, nil, nil},
		{"no commit, the topic's id unknown then", noID, topic, -2, nil, nil},
		{"a commit, the topic's id unknown", noID, unknown, 20, nil, []offsetmeta.Range{{From: 20, To: 49}}},
		{"the topic was created again", tp, other, -2, nil, nil},
		{"the topic was created again and committed", tp, other, 60, []offsetmeta.Range{{From: 62, To: 64}}, []offsetmeta.Range{{From: 62, To: 64}}},
		{"a partition never released", TopicPartition{Topic: "t", Partition: 9}, topic, 0, nil, nil},
		{"a release with nothing to commit", TopicPartition{Topic: "t", Partition: 4}, topic, 0, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.finished(tc.tp, tc.id, tc.committed, tc.broker); !slices.Equal(got, tc.want) {
				t.Errorf("finished(%v, %v, %d, %v) = %v, want %v", tc.tp, tc.id, tc.committed, tc.broker, got, tc.want)
			}
		})
	}
}

func TestUnionRanges(t *testing.T) {
	t.Parallel()
	got := unionRanges([]offsetmeta.Range{{From: 10, To: 12}, {From: 0, To: 3}, {From: 4, To: 5}, {From: 11, To: 20}, {From: 30, To: 30}})
	want := []offsetmeta.Range{{From: 0, To: 5}, {From: 10, To: 20}, {From: 30, To: 30}}
	if !slices.Equal(got, want) {
		t.Errorf("unionRanges = %v, want %v", got, want)
	}
}

// A lost claim's final watermark can arrive after a later claim of the
// same partition was released (rememberLost): the higher watermark of the
// same topic stays; a new topic id replaces it whatever its offset.
func TestReleasedAtKeepsTheHigherWatermark(t *testing.T) {
	t.Parallel()
	tp := TopicPartition{Topic: "t", Partition: 0}
	topic, recreated := topicID{1}, topicID{2}
	var r releasedAt
	r.remember(tp, topic, finalCommit{offset: 200, ok: true})
	r.remember(tp, topic, finalCommit{offset: 120, ok: true}) // late, lower
	if got := r.finished(tp, topic, 100, nil); !slices.Equal(got, []offsetmeta.Range{{From: 100, To: 199}}) {
		t.Errorf("after a late lower watermark: %v, want [{100 199}]", got)
	}
	r.remember(tp, topic, finalCommit{offset: 250, ok: true})
	if got := r.finished(tp, topic, 100, nil); !slices.Equal(got, []offsetmeta.Range{{From: 100, To: 249}}) {
		t.Errorf("after a higher watermark: %v, want [{100 249}]", got)
	}
	r.remember(tp, recreated, finalCommit{offset: 10, ok: true})
	if got := r.finished(tp, recreated, 5, nil); !slices.Equal(got, []offsetmeta.Range{{From: 5, To: 9}}) {
		t.Errorf("after the topic was created again: %v, want [{5 9}]", got)
	}
}

// Each generation of a tree that restarts over one record that never
// succeeds releases the partition at the same watermark, having read only
// part of what the last one finished when it halts: what the member
// finished is the union of what every release said, not the last one
// (TestRestartKeepsWhatTheTreeFinishedWhenCommitsFail once ran 34 records
// again when a release with less replaced one with more).
func TestReleasedAtKeepsWhatEveryReleaseFinished(t *testing.T) {
	t.Parallel()
	tp := TopicPartition{Topic: "t", Partition: 0}
	topic := topicID{1}
	enc := func(committed int64, rs ...offsetmeta.Range) string {
		meta, _, err := offsetmeta.Encode(committed, rs, 4000)
		if err != nil {
			t.Fatal(err)
		}
		return meta
	}
	var r releasedAt
	r.remember(tp, topic, finalCommit{offset: 50, meta: enc(50, offsetmeta.Range{From: 51, To: 94}), ok: true})
	r.remember(tp, topic, finalCommit{offset: 50, meta: enc(50, offsetmeta.Range{From: 51, To: 60}), ok: true})
	want := []offsetmeta.Range{{From: 0, To: 49}, {From: 51, To: 94}}
	if got := r.finished(tp, topic, -2, nil); !slices.Equal(got, want) {
		t.Errorf("after a release that had read less: %v, want %v", got, want)
	}
	// A higher watermark keeps the earlier ranges above it, and a lower one
	// arriving late takes nothing away.
	r.remember(tp, topic, finalCommit{offset: 70, meta: enc(70, offsetmeta.Range{From: 96, To: 97}), ok: true})
	r.remember(tp, topic, finalCommit{offset: 40, ok: true})
	want = []offsetmeta.Range{{From: 0, To: 94}, {From: 96, To: 97}}
	if got := r.finished(tp, topic, -2, nil); !slices.Equal(got, want) {
		t.Errorf("after a higher watermark and a late lower one: %v, want %v", got, want)
	}
}

// A lost claim's final watermark is remembered once, under the topic id its
// claim read; a claim that ended without being lost leaves nothing to take.
func TestLostClaimsRememberTheFinalWatermarkOnce(t *testing.T) {
	t.Parallel()
	tp := TopicPartition{Topic: "t", Partition: 1}
	topic := topicID{7}
	var r releasedAt
	var l lostClaims
	l.expect(1, tp, topic)
	l.expect(2, tp, topic)
	l.forget(2)
	l.rememberLost(&r, tp, 2, finalCommit{offset: 500, ok: true}) // ended, not lost: ignored
	if got := r.finished(tp, topic, 10, nil); got != nil {
		t.Fatalf("a claim forgotten as not lost was remembered: %v", got)
	}
	l.rememberLost(&r, tp, 1, finalCommit{offset: 40, ok: true})
	if got, want := r.finished(tp, topic, 10, nil), []offsetmeta.Range{{From: 10, To: 39}}; !slices.Equal(got, want) {
		t.Fatalf("after the lost claim's final watermark 40: finished = %v, want %v", got, want)
	}
	l.rememberLost(&r, tp, 1, finalCommit{offset: 90, ok: true}) // taken already
	if got, want := r.finished(tp, topic, 10, nil), []offsetmeta.Range{{From: 10, To: 39}}; !slices.Equal(got, want) {
		t.Fatalf("a second final watermark of the same lost claim was taken: finished = %v, want %v", got, want)
	}
}

// A new claim of a partition waits until the partition's lost claim gave
// back its final watermark (settled), and then knows all it finished; a
// lost claim of another partition does not hold it; a final watermark that
// never comes holds it only until the timeout, and a stop ends the wait.
func TestNewClaimWaitsForTheLostClaimsFinalWatermark(t *testing.T) {
	t.Parallel()
	tp, other := TopicPartition{Topic: "t", Partition: 1}, TopicPartition{Topic: "t", Partition: 2}
	topic := topicID{7}
	var r releasedAt
	var l lostClaims
	l.expect(1, tp, topic)
	l.expect(2, other, topic)                                // lost too, its final watermark never comes
	r.remember(tp, topic, finalCommit{offset: 20, ok: true}) // what lose knew at once

	settled := make(chan bool, 1)
	go func() { settled <- l.settled(tp, time.Minute, nil) }()
	select {
	case <-settled:
		t.Fatal("a new claim started while the partition's lost claim still held what it finished")
	case <-time.After(50 * time.Millisecond): // it must still be waiting: nothing to await but time
	}
	l.rememberLost(&r, tp, 1, finalCommit{offset: 60, ok: true})
	select {
	case ok := <-settled:
		if !ok {
			t.Fatal("settled = false after the final watermark came")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the final watermark came, and the new claim still waited after 10 s")
	}
	if got, want := r.finished(tp, topic, 10, nil), []offsetmeta.Range{{From: 10, To: 59}}; !slices.Equal(got, want) {
		t.Fatalf("the new claim knows %v finished, want %v (the lost claim's final watermark)", got, want)
	}

	begun := time.Now()
	if l.settled(other, 100*time.Millisecond, nil) {
		t.Fatal("settled = true for a partition whose lost claim never gave back its watermark")
	}
	if waited := time.Since(begun); waited < 100*time.Millisecond {
		t.Fatalf("gave up after %v, before the 100 ms timeout", waited)
	}
	stop := make(chan struct{})
	close(stop)
	if l.settled(other, time.Minute, stop) {
		t.Fatal("settled = true when told to stop")
	}
}
