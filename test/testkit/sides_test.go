package testkit

import (
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/turbokafka/turbo/config"
)

func TestParseSides(t *testing.T) {
	got, err := parseSides("sarama, franz-go-consumer")
	want := []Side{{config.ClientSarama, config.GroupClassic}, {config.ClientFranz, config.GroupConsumer}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("parseSides = %v, %v; want %v", got, err, want)
	}
	if _, err := parseSides("sarama,kip848"); err == nil {
		t.Fatal("parseSides accepted an unknown side")
	}
}

// EachSide's subtests see their side: in the environment of the processes
// they start, and in their in-process kafka section.
func TestEachSideSetsTheSide(t *testing.T) {
	if os.Getenv("TURBO_KAFKA_CLIENT") != "" || os.Getenv("TURBO_TEST_SIDES") != "" {
		t.Setenv("TURBO_KAFKA_CLIENT", "")
		t.Setenv("TURBO_TEST_SIDES", "")
	}
	t.Setenv("TURBO_TEST_KAFKA_VERSION", "")
	var (
		mu   sync.Mutex
		seen []string
	)
	t.Run("all", func(t *testing.T) {
		EachSide(t, func(t *testing.T, side Side) {
			k := Kafka(t, []string{"127.0.0.1:1"})
			if k.Client != side.Client || k.GroupProtocol != side.Protocol {
				t.Errorf("side %s: kafka section has client %s, protocol %s", side, k.Client, k.GroupProtocol)
			}
			env := childEnvOf(t)
			if !slices.Contains(env, "TURBO_KAFKA_CLIENT="+string(side.Client)) {
				t.Errorf("side %s: the children's environment lacks its client", side)
			}
			mu.Lock()
			seen = append(seen, side.String()) // the subtests end before "all" returns
			mu.Unlock()
		})
	})
	slices.Sort(seen)
	if want := []string{"franz-go", "franz-go-consumer", "sarama"}; !slices.Equal(seen, want) {
		t.Fatalf("sides run: %v, want %v", seen, want)
	}
}
