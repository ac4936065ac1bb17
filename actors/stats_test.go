package actors

import (
	"reflect"
	"testing"
)

// Add sums every counter and gauge: a field added to Snapshot but not to
// Add would read zero in a multi-consumer process's totals.
func TestSnapshotAddSumsEveryCount(t *testing.T) {
	t.Parallel()
	var a, b Snapshot
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
	for i := range va.NumField() {
		if va.Field(i).Kind() == reflect.Int64 {
			va.Field(i).SetInt(int64(i + 1))
			vb.Field(i).SetInt(int64(100 * (i + 1)))
		}
	}
	sum := reflect.ValueOf(a.Add(b))
	for i := range sum.NumField() {
		if f := sum.Type().Field(i); f.Type.Kind() == reflect.Int64 {
			if got, want := sum.Field(i).Int(), int64(101*(i+1)); got != want {
				t.Errorf("Add: %s = %d, want %d", f.Name, got, want)
			}
		}
	}
}

// A partition claimed again after its session was lost starts below what
// the first claim marked (that claim's last commit never landed): the
// records marked again are counted once.
func TestCommittedCountsEachRecordOnce(t *testing.T) {
	t.Parallel()
	var s consumerStats
	a, b := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	s.countCommitted(a, -1, 120)  // the first claim, from the start
	s.countCommitted(b, 40, 50)   // another partition, claimed at 40
	s.countCommitted(a, 100, 150) // claimed again at the broker's 100: 100-119 counted already
	s.countCommitted(a, 150, 150) // nothing new
	if got, want := s.Snapshot().Committed, int64(120+10+30); got != want {
		t.Fatalf("Committed = %d, want %d (each record once)", got, want)
	}
}
