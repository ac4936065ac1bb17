package config

import (
	"testing"
	"time"
)

// TestBatchLoads: the batch block as a file gives it; one record per call
// when it is left out.
func TestBatchLoads(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  Batch
	}{
		{"left out: one record per call", nil, Batch{MaxRecords: 1}},
		{"records only", []string{"batch: {max_records: 100}"}, Batch{MaxRecords: 100}},
		{"every field", []string{"batch:", "  max_records: 50", "  max_wait: 20ms", "  max_bytes: 1MiB"}, Batch{MaxRecords: 50, MaxWait: 20 * time.Millisecond, MaxBytes: MiB}},
		{"highest", []string{"max_buffered: 10000", "batch: {max_records: 10000, max_wait: 10s}"}, Batch{MaxRecords: MaxBatchRecords, MaxWait: MaxBatchWait}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := c.Consumers[0].Batch; got != tt.want {
				t.Fatalf("batch = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBatchRefused: every value out of bounds is an error naming its key and
// what was given.
func TestBatchRefused(t *testing.T) {
	tests := []struct {
		name    string
		lines   []string
		wantKey string
		wantIn  []string
	}{
		{"negative", []string{"batch: {max_records: -1}"}, "consumers[0].batch.max_records", []string{"got -1"}},
		{"too many", []string{"max_buffered: 20000", "batch: {max_records: 10001}"}, "consumers[0].batch.max_records", []string{"got 10001"}},
		{"cannot fill", []string{"concurrency: 4", "max_buffered: 10", "batch: {max_records: 15}"}, "consumers[0].batch.max_records", []string{"is 15, above concurrency + max_buffered (14)"}},
		{"wait too long", []string{"batch: {max_records: 10, max_wait: 11s}"}, "consumers[0].batch.max_wait", []string{"got 11s"}},
		{"wait too short", []string{"batch: {max_records: 10, max_wait: 10us}"}, "consumers[0].batch.max_wait", []string{"got 10µs"}},
		{"wait without a batch", []string{"batch: {max_wait: 1s}"}, "consumers[0].batch.max_wait", []string{"needs consumers[0].batch.max_records above 1"}},
		{"negative bytes", []string{"batch: {max_records: 10, max_bytes: -1}"}, "consumers[0].batch.max_bytes", nil},
		{"bare wait", []string{"batch: {max_records: 10, max_wait: 5}"}, "consumers[0].batch.max_wait", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c.Consumers[0].Batch)
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}
}
