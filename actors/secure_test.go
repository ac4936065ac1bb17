package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/pki"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const secureSecret = "the-consumers-password-9f2c"

// secureCluster is a kfake broker with mTLS and SCRAM-SHA-512, and the
// kafka section that reaches it.
func secureCluster(t *testing.T, topic string) config.Kafka {
	k, _ := secureClusterCtl(t, topic)
	return k
}

func secureClusterCtl(t *testing.T, topic string) (config.Kafka, *kfake.Cluster) {
	t.Helper()
	dir := t.TempDir()
	ca := pki.TestCA(t, "test CA")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic),
		kfake.TLS(ca.TestServerTLS(t, "broker", "127.0.0.1")),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "turbo", secureSecret))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	client := ca.TestIssue(t, pki.Options{CommonName: "turbo", Format: pki.PKCS1})
	k := config.Default().Kafka
	k.Brokers = cluster.ListenAddrs()
	k.TLS = config.TLS{Enabled: true, CAFile: pki.Write(t, dir, "ca.pem", ca.PEM),
		CertFile: pki.Write(t, dir, "client.pem", client.Cert), KeyFile: pki.Write(t, dir, "client-key.pem", client.Key)}
	k.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "turbo", PasswordFile: pki.Write(t, dir, "pw", []byte(secureSecret+"\n"))}
	return k, cluster
}

// A consumer over mTLS and SCRAM-SHA-512 handles and commits everything,
// and its logs never show the password.
func TestConsumerOverMTLSAndSCRAM(t *testing.T) {
	t.Parallel()
	const topic, records = "secure", 400
	k := secureCluster(t, topic)
	var logs testkit.Buffer
	log := zerolog.New(&logs)
	kn := kafkanet.New(k, log)
	if err := embedded.Produce(context.Background(), embedded.ProduceOptions{Brokers: k.Brokers, Topic: topic, Count: records, Keys: 20, Version: k.Version, Secure: kn.Apply}); err != nil {
		t.Fatalf("producing over mTLS + SCRAM: %v", err)
	}
	c := config.DefaultConsumer("secure")
	c.Topics = []string{topic}
	var handled atomic.Int64
	cons, err := actors.New(actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 5 * time.Second, Logger: log,
		Handler: actors.HandlerFunc(func(context.Context, *actors.Record) error { handled.Add(1); return nil })})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "every record handled and committed over mTLS + SCRAM", func() bool {
		return cons.Stats().Committed == records
	})
	if err := cons.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if h := handled.Load(); h < records {
		t.Errorf("handled %d of %d", h, records)
	}
	if strings.Contains(logs.String(), secureSecret) {
		t.Errorf("the logs show the password")
	}
	if s := cons.Stats(); s.KafkaError != "" {
		t.Errorf("KafkaError %q after a clean run", s.KafkaError)
	}
}

// A consumer that Kafka refuses at start-up (here: it does not trust the
// broker's CA) gives up after a few attempts, saying why, instead of
// retrying a configuration mistake forever.
func TestConsumerRefusedAtStartGivesUp(t *testing.T) {
	t.Parallel() // most of its time is spent waiting: for sessions, joins, handlers
	const topic = "refused"
	k := secureCluster(t, topic)
	other := pki.TestCA(t, "another CA")
	k.TLS.CAFile = pki.Write(t, t.TempDir(), "other-ca.pem", other.PEM)
	var logs testkit.Buffer
	log := zerolog.New(&logs)
	c := config.DefaultConsumer("refused")
	c.Topics = []string{topic}
	began := time.Now()
	cons, err := actors.New(actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 2 * time.Second, Logger: log,
		Handler: actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-cons.Failed():
	case <-time.After(30 * time.Second):
		t.Fatalf("the consumer still retries 30 s after start; logs:\n%s", logs.String())
	}
	took := time.Since(began)
	err = cons.Err()
	const want = `TLS: the broker's certificate (subject "broker", issuer "test CA") is signed by an authority turbo does not trust: set kafka.tls.ca_file to the CA that signed it`
	if !errors.Is(err, kafkanet.ErrRefused) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Err() = %v, want a refusal starting %q", err, want)
	}
	if s := cons.Stats(); !strings.HasPrefix(s.KafkaError, want) {
		t.Errorf("Stats().KafkaError = %q", s.KafkaError)
	}
	if n := strings.Count(logs.String(), `"message":"Kafka refuses the connection: TLS: the broker's certificate`); n != 3 {
		t.Errorf("%d log lines name the cause, want 3 (two retries and the last):\n%s", n, logs.String())
	}
	if err := cons.Stop(context.Background()); err != nil && !errors.Is(err, actors.ErrUncommitted) {
		t.Errorf("Stop after giving up: %v", err)
	}
	t.Logf("FIGURES refused at start: gave up after %s", took.Round(time.Millisecond))
}

// Kafka refusing a consumer that was running (its password rotated on the
// cluster first) is not fatal: it is retried with backoff, logged with its
// cause and shown in the stats (and so in the health reports) until the
// consumer is let in again, and then it carries on.
func TestRefusalLaterInARunIsRetriedAndShown(t *testing.T) {
	t.Parallel()
	const topic, records = "later", 200
	k, cluster := secureClusterCtl(t, topic)
	var refuse, drop atomic.Bool
	cluster.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		resp := req.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
	cluster.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if drop.CompareAndSwap(true, false) {
			return nil, errors.New("test: connection dropped"), true // closes the connection
		}
		return nil, nil, false
	})
	var logs testkit.Buffer
	log := zerolog.New(&logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the consumer's log:\n%s", logs.String())
		}
	})
	kn := kafkanet.New(k, log)
	produce := func() {
		t.Helper()
		if err := embedded.Produce(context.Background(), embedded.ProduceOptions{Brokers: k.Brokers, Topic: topic, Count: records, Keys: 20, Version: k.Version, Secure: kn.Apply}); err != nil {
			t.Fatalf("producing: %v", err)
		}
	}
	produce()
	c := config.DefaultConsumer("later")
	c.Topics = []string{topic}
	cons, err := actors.New(actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 5 * time.Second, Logger: log,
		Restart: backoff.Policy{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2},
		Handler: actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Stop(context.Background())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the consumer's stats: %+v", cons.Stats())
		}
	})
	testkit.Eventually(t, 60*time.Second, "the first records committed", func() bool { return cons.Stats().Committed == records })

	refuse.Store(true)
	drop.Store(true)
	const want = `the broker refused user "turbo" (SASL SCRAM-SHA-512)`
	testkit.Eventually(t, 60*time.Second, "the refusal shown in the stats", func() bool { return strings.HasPrefix(cons.Stats().KafkaError, want) })
	select {
	case <-cons.Failed():
		t.Fatalf("the consumer gave up on a refusal later in its run: %v", cons.Err())
	default:
	}
	refuse.Store(false)
	testkit.Eventually(t, 60*time.Second, "the refusal cleared once Kafka lets the consumer in", func() bool { return cons.Stats().KafkaError == "" })
	produce()
	testkit.Eventually(t, 60*time.Second, "the records produced after it committed", func() bool { return cons.Stats().Committed == 2*records })
	if n := strings.Count(logs.String(), `"message":"Kafka refuses the connection: the broker refused user`); n == 0 {
		t.Errorf("no log line names the refusal:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), secureSecret) {
		t.Errorf("the logs show the password")
	}
}
