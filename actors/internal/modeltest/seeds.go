package modeltest

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Seeds calls run with n seeds in a row. They are drawn afresh on every
// run, so that each run of a model test explores seeds the last did not
// rather than repeating the same: the first is logged, and env=<first> runs
// the same seeds again; a seed that fails is named, with the setting that
// starts from it.
func Seeds(t testing.TB, env string, n int, run func(seed int64)) {
	t.Helper()
	first := time.Now().UnixNano() % 1_000_000_000
	if v := os.Getenv(env); v != "" {
		var err error
		if first, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", env, v, err)
		}
	}
	t.Logf("seeds %d to %d (%s=%d runs them again)", first, first+int64(n)-1, env, first)
	for seed := first; seed < first+int64(n) && !t.Failed(); seed++ {
		func() {
			defer func() {
				if t.Failed() {
					t.Logf("failed at seed %d (%s=%d starts from it)", seed, env, seed)
				}
			}()
			run(seed)
		}()
	}
}
