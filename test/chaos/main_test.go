// Package chaos shows turbo's promises — no loss, order per key, bounded
// duplicates, clean restarts — on real `turbo run` processes of one group
// while members are killed, restarted, added and removed, on the embedded
// broker or, with TURBO_TEST_BROKERS, on a real Kafka.
package chaos

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

const (
	// SoakEnv sets how long TestChaosSoak makes chaos (a Go duration),
	// like the -soak flag.
	SoakEnv = "TURBO_SOAK"
	// SeedEnv replays a run: the seed printed in its figures line.
	SeedEnv = "TURBO_CHAOS_SEED"
	// defaultSoak keeps `make test` and `make test-kafka` bounded.
	defaultSoak = 60 * time.Second
)

var (
	soak = flag.Duration("soak", envDuration(SoakEnv, defaultSoak), "how long TestChaosSoak makes chaos (or $"+SoakEnv+")")
	seed = flag.Uint64("seed", envUint(SeedEnv), "the chaos seed; 0 picks one (or $"+SeedEnv+")")
)

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "chaos: $%s=%q is not a positive duration\n", name, v)
			os.Exit(2)
		}
		return d
	}
	return def
}

func envUint(name string) uint64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: $%s=%q is not a seed\n", name, v)
			os.Exit(2)
		}
		return n
	}
	return 0
}

func TestMain(m *testing.M) {
	flag.Parse()
	testkit.Main(m)
}
