package actors_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/pki"
	"github.com/twmb/franz-go/pkg/kfake"
)

const secureSecret = "the-consumers-password-9f2c"

// syncBuffer is a log sink the test reads while the consumer writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secureCluster is a kfake broker with mTLS and SCRAM-SHA-512, and the
// kafka section that reaches it.
func secureCluster(t *testing.T, topic string) config.Kafka {
	t.Helper()
	dir := t.TempDir()
	ca := pki.NewCA(t, "test CA")
	srv := ca.Issue(t, pki.Options{CommonName: "broker", Hosts: []string{"127.0.0.1"}})
	cert, err := tls.X509KeyPair(srv.Cert, srv.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "turbo", secureSecret))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	client := ca.Issue(t, pki.Options{CommonName: "turbo", Format: pki.PKCS1})
	k := config.Default().Kafka
	k.Brokers = cluster.ListenAddrs()
	k.TLS = config.TLS{Enabled: true, CAFile: pki.Write(t, dir, "ca.pem", ca.PEM),
		CertFile: pki.Write(t, dir, "client.pem", client.Cert), KeyFile: pki.Write(t, dir, "client-key.pem", client.Key)}
	k.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "turbo", PasswordFile: pki.Write(t, dir, "pw", []byte(secureSecret+"\n"))}
	return k
}

// A consumer over mTLS and SCRAM-SHA-512 handles and commits everything,
// and its logs never show the password.
func TestConsumerOverMTLSAndSCRAM(t *testing.T) {
	const topic, records = "secure", 400
	k := secureCluster(t, topic)
	var logs syncBuffer
	log := zerolog.New(&logs)
	kn, err := kafkanet.New(k, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := embedded.Produce(context.Background(), embedded.ProduceOptions{Brokers: k.Brokers, Topic: topic, Count: records, Keys: 20, Version: k.Version, Secure: kn.Apply}); err != nil {
		t.Fatalf("producing over mTLS + SCRAM: %v", err)
	}
	c := config.DefaultConsumer("secure")
	c.Topics = []string{topic}
	var handled atomic.Int64
	cons, err := actors.Start(actors.NewSystem(log), actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 5 * time.Second, Logger: log,
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
	const topic = "refused"
	k := secureCluster(t, topic)
	other := pki.NewCA(t, "another CA")
	k.TLS.CAFile = pki.Write(t, t.TempDir(), "other-ca.pem", other.PEM)
	var logs syncBuffer
	log := zerolog.New(&logs)
	c := config.DefaultConsumer("refused")
	c.Topics = []string{topic}
	began := time.Now()
	cons, err := actors.Start(actors.NewSystem(log), actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 2 * time.Second, Logger: log,
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
