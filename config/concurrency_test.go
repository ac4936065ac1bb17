package config

import "testing"

// TestConcurrencyModeLoads: fixed by default; adaptive with its floor.
func TestConcurrencyModeLoads(t *testing.T) {
	c, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil)), noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cc := c.Consumers[0]; cc.Adaptive() || cc.MinConcurrency() != 1 {
		t.Fatalf("left out: adaptive %v min %d, want fixed and 1", cc.Adaptive(), cc.MinConcurrency())
	}
	c, err = Load(writeConfig(t, "app.yaml", oneConsumer([]string{"concurrency: 400", "concurrency_mode: adaptive", "concurrency_min: 4"})), noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cc := c.Consumers[0]; !cc.Adaptive() || cc.MinConcurrency() != 4 || cc.Concurrency != 400 {
		t.Fatalf("adaptive 4..400: got adaptive %v min %d max %d", cc.Adaptive(), cc.MinConcurrency(), cc.Concurrency)
	}
}

// TestConcurrencyModeRefused: the errors name the key and the value.
func TestConcurrencyModeRefused(t *testing.T) {
	tests := []struct {
		name    string
		lines   []string
		wantKey string
		wantIn  []string
	}{
		{"unknown mode", []string{"concurrency_mode: auto"}, "consumers[0].concurrency_mode", []string{"fixed, adaptive", `"auto"`}},
		{"floor above the limit", []string{"concurrency: 8", "concurrency_mode: adaptive", "concurrency_min: 9"}, "consumers[0].concurrency_min", []string{"got 9"}},
		{"floor without adaptive", []string{"concurrency_min: 2"}, "consumers[0].concurrency_min", []string{"needs consumers[0].concurrency_mode: adaptive"}},
		{"negative floor", []string{"concurrency_mode: adaptive", "concurrency_min: -1"}, "consumers[0].concurrency_min", []string{"got -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c.Consumers[0])
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}
}
