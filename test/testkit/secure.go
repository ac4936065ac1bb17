package testkit

import (
	"os"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/config"
)

// The test clients (admin, producers, readers) reach the broker with the
// same TURBO_KAFKA_* variables the turbo processes under test read, so a
// whole suite runs over TLS and SASL by setting them, e.g. `make test-kafka`
// running test/e2e over SASL_SSL with SCRAM.
var (
	envNetOnce sync.Once
	envNet     *kafkanet.Net
	envNetErr  error
)

// clientNet returns the security settings of the environment.
func clientNet(t testing.TB) *kafkanet.Net {
	t.Helper()
	envNetOnce.Do(func() {
		var k config.Kafka
		if k, envNetErr = config.KafkaFromEnv(os.Environ()); envNetErr == nil {
			envNet = kafkanet.New(k, zerolog.Nop())
		}
	})
	if envNetErr != nil {
		t.Fatalf("the TURBO_KAFKA_* variables: %v", envNetErr)
	}
	return envNet
}

// ClientConfig returns a sarama configuration for test clients: the protocol
// version turbo speaks by default, secured as the environment says.
func ClientConfig(t testing.TB) *sarama.Config {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	if err := clientNet(t).Apply(cfg); err != nil {
		t.Fatalf("securing a test client: %v", err)
	}
	return cfg
}

// SecureProducer returns what embedded.ProduceOptions.Secure needs.
func SecureProducer(t testing.TB) func(*sarama.Config) error { return clientNet(t).Apply }

// Kafka returns the default kafka section for brokers, secured as the
// TURBO_KAFKA_* environment says (with what Setenv added for t: the side of
// EachSide): what a test's in-process consumer uses so that it runs over
// TLS and SASL, or on another Kafka side, when the suite does.
func Kafka(t testing.TB, brokers []string) config.Kafka {
	t.Helper()
	k, err := config.KafkaFromEnv(append(os.Environ(), addedFor(t)...))
	if err != nil {
		t.Fatalf("the TURBO_KAFKA_* variables: %v", err)
	}
	k.Brokers = brokers
	return k
}
