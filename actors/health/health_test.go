package health

import (
	"testing"
	"time"
)

func TestStuckHandler(t *testing.T) {
	now := time.Unix(10_000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, c := range []struct {
		name       string
		oldest     time.Time
		max, grace time.Duration
		wantRan    time.Duration
		wantStuck  bool
	}{
		{"no handler runs", time.Time{}, time.Second, time.Second, 0, false},
		{"unlimited handlers are never stuck", ago(time.Hour), 0, time.Second, 0, false},
		{"a negative limit is unlimited", ago(time.Hour), -time.Second, 0, 0, false},
		{"within max_handler_time", ago(500 * time.Millisecond), time.Second, time.Second, 500 * time.Millisecond, false},
		{"past max_handler_time, within grace", ago(1900 * time.Millisecond), time.Second, time.Second, 1900 * time.Millisecond, false},
		{"exactly max_handler_time + grace", ago(2 * time.Second), time.Second, time.Second, 2 * time.Second, false},
		{"just past max_handler_time + grace", ago(2*time.Second + time.Nanosecond), time.Second, time.Second, 2*time.Second + time.Nanosecond, true},
		{"no grace", ago(1100 * time.Millisecond), time.Second, 0, 1100 * time.Millisecond, true},
		{"started after now (clock skew between reads)", now.Add(time.Second), time.Second, 0, -time.Second, false},
	} {
		ran, stuck := StuckHandler(now, c.oldest, c.max, c.grace)
		if ran != c.wantRan || stuck != c.wantStuck {
			t.Errorf("%s: StuckHandler(oldest %v ago, max %v, grace %v) = %v, %v; want %v, %v",
				c.name, now.Sub(c.oldest), c.max, c.grace, ran, stuck, c.wantRan, c.wantStuck)
		}
	}
}
