package testkit

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/turbokafka/turbo/config"
)

// Side is one Kafka side turbo runs on: the client library and the group
// protocol (kafka.client, kafka.group_protocol).
type Side struct {
	Client   config.KafkaClient
	Protocol config.GroupProtocol
}

// String names the side as TURBO_TEST_SIDES and the subtests do:
// sarama, franz-go, franz-go-consumer.
func (s Side) String() string {
	if s.Protocol == config.GroupConsumer {
		return string(s.Client) + "-consumer"
	}
	return string(s.Client)
}

var allSides = []Side{
	{config.ClientSarama, config.GroupClassic},
	{config.ClientFranz, config.GroupClassic},
	{config.ClientFranz, config.GroupConsumer},
}

// AllSides returns every side, whatever the environment lists: for a
// test on an embedded broker of its own, where a side costs seconds.
func AllSides() []Side { return slices.Clone(allSides) }

// Sides returns the sides the side tests run on. TURBO_KAFKA_CLIENT (with
// TURBO_KAFKA_GROUP_PROTOCOL) set in the environment puts a whole suite on
// one side; else TURBO_TEST_SIDES lists them (comma-separated names, see
// Side.String); else every side the broker offers: all three on the
// embedded broker and on Kafka 4, sarama and franz-go before (the consumer
// protocol needs Kafka 4.0).
func Sides(t testing.TB) []Side {
	t.Helper()
	if c := os.Getenv("TURBO_KAFKA_CLIENT"); c != "" {
		p := os.Getenv("TURBO_KAFKA_GROUP_PROTOCOL")
		if p == "" {
			p = string(config.GroupClassic)
		}
		return []Side{{config.KafkaClient(c), config.GroupProtocol(p)}}
	}
	if list := os.Getenv("TURBO_TEST_SIDES"); list != "" {
		sides, err := parseSides(list)
		if err != nil {
			t.Fatalf("TURBO_TEST_SIDES: %v", err)
		}
		return sides
	}
	if v := os.Getenv("TURBO_TEST_KAFKA_VERSION"); v != "" && !strings.HasPrefix(v, "4.") {
		return allSides[:2]
	}
	return allSides
}

// parseSides reads a comma-separated list of side names.
func parseSides(list string) ([]Side, error) {
	var sides []Side
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(allSides, func(s Side) bool { return s.String() == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown side %q (want sarama, franz-go or franz-go-consumer)", name)
		}
		sides = append(sides, allSides[i])
	}
	return sides, nil
}

// EachSide runs f once per side of Sides, as parallel subtests named after
// the sides: the turbo processes they start (Start, Command) and their
// in-process consumers (Kafka) use that side.
func EachSide(t *testing.T, f func(t *testing.T, side Side)) {
	t.Helper()
	for _, side := range Sides(t) {
		t.Run(side.String(), func(t *testing.T) {
			t.Parallel()
			Setenv(t, "TURBO_KAFKA_CLIENT", string(side.Client))
			Setenv(t, "TURBO_KAFKA_GROUP_PROTOCOL", string(side.Protocol))
			f(t, side)
		})
	}
}
