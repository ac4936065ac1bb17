package kafkanet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit/pki"
	"github.com/twmb/franz-go/pkg/kfake"
)

const testSecret = "pa55-w0rd-of-the-test"

// files is a CA, a broker certificate and client certificates on disk.
type files struct {
	ca, otherCA             *pki.CA
	caFile, otherCAFile     string
	server                  tls.Certificate
	clientCert, clientKey   string
	strangerCert, strangerK string
}

func newFiles(t *testing.T) files {
	t.Helper()
	dir := t.TempDir()
	f := files{ca: pki.TestCA(t, "turbo test CA"), otherCA: pki.TestCA(t, "someone else's CA")}
	f.caFile = pki.Write(t, dir, "ca.pem", f.ca.PEM)
	f.otherCAFile = pki.Write(t, dir, "other-ca.pem", f.otherCA.PEM)
	srv := f.ca.TestIssue(t, pki.Options{CommonName: "broker", Hosts: []string{"127.0.0.1", "localhost"}})
	var err error
	if f.server, err = tls.X509KeyPair(srv.Cert, srv.Key); err != nil {
		t.Fatal(err)
	}
	c := f.ca.TestIssue(t, pki.Options{CommonName: "turbo", Format: pki.EC})
	f.clientCert, f.clientKey = pki.Write(t, dir, "client.pem", c.Cert), pki.Write(t, dir, "client-key.pem", c.Key)
	s := f.otherCA.TestIssue(t, pki.Options{CommonName: "stranger"})
	f.strangerCert, f.strangerK = pki.Write(t, dir, "stranger.pem", s.Cert), pki.Write(t, dir, "stranger-key.pem", s.Key)
	return f
}

func (f files) serverTLS(requireClient bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{f.server}, MinVersion: tls.VersionTLS12}
	if requireClient {
		pool := x509.NewCertPool()
		pool.AddCert(f.ca.Cert)
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c
}

func cluster(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, "t")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// connect applies k to a fresh sarama configuration and makes a client.
func connect(t *testing.T, k config.Kafka) (*Net, error) {
	t.Helper()
	n := New(k, zerolog.Nop())
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout = 5*time.Second, 5*time.Second
	cfg.Metadata.Retry.Max = 0
	if err := n.Apply(cfg); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("sarama refuses the configuration: %v", err)
	}
	client, err := sarama.NewClient(k.Brokers, cfg)
	if err == nil {
		defer client.Close()
		_, err = client.Partitions("t")
	}
	return n, err
}

// Every mechanism kfake speaks, over TLS and with a client certificate:
// the client connects and reads metadata.
func TestConnects(t *testing.T) {
	f := newFiles(t)
	pwFile := pki.Write(t, t.TempDir(), "pw", []byte(testSecret+"\n"))
	for _, tc := range []struct {
		name string
		opts []kfake.Opt
		k    config.Kafka
	}{
		{"tls", []kfake.Opt{kfake.TLS(f.serverTLS(false))},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile}}},
		{"mtls", []kfake.Opt{kfake.TLS(f.serverTLS(true))},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile, CertFile: f.clientCert, KeyFile: f.clientKey}}},
		{"plain over tls", []kfake.Opt{kfake.TLS(f.serverTLS(false)), kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", testSecret)},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile}, SASL: config.SASL{Mechanism: config.SASLPlain, Username: "alice", Password: testSecret}}},
		{"scram-sha-256 with a password file", []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "bob", testSecret)},
			config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: "bob", PasswordFile: pwFile}}},
		{"scram-sha-512 over mtls", []kfake.Opt{kfake.TLS(f.serverTLS(true)), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "carol", testSecret)},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile, CertFile: f.clientCert, KeyFile: f.clientKey}, SASL: config.SASL{Mechanism: config.SASLScramSHA512, Username: "carol", Password: testSecret}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.k.Brokers = cluster(t, tc.opts...)
			if _, err := connect(t, tc.k); err != nil {
				t.Fatalf("connecting with %s: %v", tc.name, err)
			}
		})
	}
}

// Each mistake a user makes is explained in one line naming its cause.
func TestRefusalsAreExplained(t *testing.T) {
	f := newFiles(t)
	for _, tc := range []struct {
		name string
		opts []kfake.Opt
		k    config.Kafka
		want string
	}{
		{"unknown CA", []kfake.Opt{kfake.TLS(f.serverTLS(false))},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.otherCAFile}},
			`TLS: the broker's certificate (subject "broker", issuer "turbo test CA") is signed by an authority turbo does not trust: set kafka.tls.ca_file to the CA that signed it (it is ` + f.otherCAFile + ")"},
		{"wrong server name", []kfake.Opt{kfake.TLS(f.serverTLS(false))},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile, ServerName: "kafka.example.com"}},
			`TLS: the broker's certificate is not valid for "kafka.example.com" (it is valid for localhost, 127.0.0.1): connect by a name the certificate holds, or set kafka.tls.server_name`},
		{"no client certificate for mtls", []kfake.Opt{kfake.TLS(f.serverTLS(true))},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile}},
			"TLS: the broker requires a client certificate (mTLS): set kafka.tls.cert_file and kafka.tls.key_file (it answered: certificate required)"},
		{"client certificate of another CA", []kfake.Opt{kfake.TLS(f.serverTLS(true))},
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile, CertFile: f.strangerCert, KeyFile: f.strangerK}},
			"TLS: the broker refused turbo's client certificate (unknown certificate authority): the broker must trust the CA that signed kafka.tls.cert_file"},
		{"tls against plaintext", nil,
			config.Kafka{TLS: config.TLS{Enabled: true, CAFile: f.caFile}},
			"does not speak TLS: kafka.tls.enabled is true, but the listener is PLAINTEXT or SASL_PLAINTEXT (turn TLS off, or use the TLS listener's port)"},
		{"plaintext against tls", []kfake.Opt{kfake.TLS(f.serverTLS(false))},
			config.Kafka{},
			"speaks TLS, but kafka.tls.enabled is false (an SSL or SASL_SSL listener: set kafka.tls.enabled, and kafka.sasl for SASL_SSL)"},
		{"no sasl against sasl", []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "bob", testSecret)},
			config.Kafka{},
			"wants SASL authentication (it offers PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), but kafka.sasl.mechanism is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.k.Brokers = cluster(t, tc.opts...)
			n, err := connect(t, tc.k)
			if err == nil {
				t.Fatal("connected; want a refusal")
			}
			r := n.Explain(err)
			if r == nil {
				t.Fatalf("Explain(%v) = nil, want a refusal", err)
			}
			if !strings.Contains(r.Error(), tc.want) {
				t.Errorf("explained as\n  %s\nwant it to contain\n  %s\n(client error: %v)", r, tc.want, err)
			}
			if !errors.Is(r, ErrRefused) || !errors.Is(r, err) {
				t.Errorf("the refusal wraps neither ErrRefused nor the client's error")
			}
		})
	}
}

// An unreachable broker is an outage, not a refusal: it is retried.
func TestUnreachableIsNotARefusal(t *testing.T) {
	k := config.Kafka{Brokers: []string{"127.0.0.1:1"}}
	n, err := connect(t, k)
	if err == nil {
		t.Fatal("connected to port 1")
	}
	if r := n.Explain(err); r != nil {
		t.Errorf("Explain(%v) = %q: an unreachable broker is not a refusal", err, r)
	}
}
