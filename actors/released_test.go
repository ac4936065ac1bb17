package actors

import (
	"slices"
	"testing"

	"github.com/turbokafka/turbo/actors/offsetmeta"
)

func TestReleasedAtAddsWhatTheBrokerDoesNotKnow(t *testing.T) {
	tp := TopicPartition{Topic: "t", Partition: 3}
	meta, _, err := offsetmeta.Encode(100, []offsetmeta.Range{{From: 105, To: 109}}, 4000)
	if err != nil {
		t.Fatal(err)
	}
	var r releasedAt
	r.remember(tp, finalCommit{offset: 100, meta: meta, ok: true})
	r.remember(TopicPartition{Topic: "t", Partition: 4}, finalCommit{offset: 7, ok: false}) // nothing to commit: not remembered

	for _, tc := range []struct {
		name      string
		tp        TopicPartition
		committed int64
		broker    []offsetmeta.Range
		want      []offsetmeta.Range
	}{
		{"the final commit never landed", tp, 60, nil, []offsetmeta.Range{{From: 60, To: 99}, {From: 105, To: 109}}},
		{"merged with the broker's metadata", tp, 60, []offsetmeta.Range{{From: 62, To: 64}, {From: 120, To: 121}},
			[]offsetmeta.Range{{From: 60, To: 99}, {From: 105, To: 109}, {From: 120, To: 121}}},
		{"the broker is as far", tp, 100, []offsetmeta.Range{{From: 105, To: 109}}, []offsetmeta.Range{{From: 105, To: 109}}},
		{"another owner committed further", tp, 150, nil, nil},
		{"no commit on the broker", tp, -1, nil, nil},
		{"a partition never released", TopicPartition{Topic: "t", Partition: 9}, 0, nil, nil},
		{"a release with nothing to commit", TopicPartition{Topic: "t", Partition: 4}, 0, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.finished(tc.tp, tc.committed, tc.broker); !slices.Equal(got, tc.want) {
				t.Errorf("finished(%v, %d, %v) = %v, want %v", tc.tp, tc.committed, tc.broker, got, tc.want)
			}
		})
	}
}

func TestUnionRanges(t *testing.T) {
	got := unionRanges([]offsetmeta.Range{{From: 10, To: 12}, {From: 0, To: 3}, {From: 4, To: 5}, {From: 11, To: 20}, {From: 30, To: 30}})
	want := []offsetmeta.Range{{From: 0, To: 5}, {From: 10, To: 20}, {From: 30, To: 30}}
	if !slices.Equal(got, want) {
		t.Errorf("unionRanges = %v, want %v", got, want)
	}
}
