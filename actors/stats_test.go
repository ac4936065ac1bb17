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
