//go:build kafka

package kafka_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/turbokafka/turbo/test/testkit"
)

const (
	// securedRecords are produced and read back over each mechanism.
	securedRecords = 100
	// roundTripTimeout bounds reading them back.
	roundTripTimeout = 30 * time.Second
	// refusalTimeout bounds how long a refused client may take to fail:
	// the broker's answer, not a timeout, must end it.
	refusalTimeout = 20 * time.Second
	// netTimeout is every sarama network timeout here.
	netTimeout = 10 * time.Second
)

// Every mechanism of the secured listeners carries records: 100 produced to
// a fresh topic and read back in order with plain sarama, over SASL_SSL
// (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER) and over SSL with a
// client certificate.
func TestSecuredRoundTrip(t *testing.T) {
	t.Parallel() // topics of its own
	s := securedEnv(t)
	t.Logf("Kafka %s: SASL_SSL %v, SSL %v", s.KafkaVersion, s.SASLSSLBrokers, s.SSLBrokers)
	for _, m := range []testkit.Mechanism{
		testkit.MechanismSCRAMSHA256, testkit.MechanismSCRAMSHA512, testkit.MechanismPlain,
		testkit.MechanismMTLS, testkit.MechanismOAuthBearer,
	} {
		t.Run(string(m), func(t *testing.T) {
			cfg, brokers := securedConfig(t, s, m)
			client := newClient(t, brokers, cfg)
			topic := createTopic(t, client, testkit.TopicName("secured-"+string(m)))
			produce(t, client, topic, 0, securedRecords)
			readBack(t, client, topic, securedRecords)
		})
	}
	// Client certificates in the other encodings a client meets.
	t.Run("mTLS-EC-key", func(t *testing.T) {
		cfg, brokers := securedConfig(t, s, testkit.MechanismMTLS)
		cfg.Net.TLS.Config = clientTLS(t, s, testkit.TLSCAFile, testkit.TLSClientECFile, testkit.TLSClientECKeyFile)
		client := newClient(t, brokers, cfg)
		topic := createTopic(t, client, testkit.TopicName("secured-mtls-ec"))
		produce(t, client, topic, 0, 10)
		readBack(t, client, topic, 10)
	})
	t.Run("mTLS-PKCS1-key", func(t *testing.T) {
		cfg, brokers := securedConfig(t, s, testkit.MechanismMTLS)
		cfg.Net.TLS.Config = clientTLS(t, s, testkit.TLSCAFile, testkit.TLSClientFile, testkit.TLSClientKeyPKCS1File)
		client := newClient(t, brokers, cfg)
		topic := createTopic(t, client, testkit.TopicName("secured-mtls-pkcs1"))
		produce(t, client, topic, 0, 10)
		readBack(t, client, topic, 10)
	})
}

// OAUTHBEARER sessions outlive their tokens: the broker ends each session
// when its token expires (connections.max.reauth.ms), so a client that keeps
// producing for longer than a token's lifetime must get new tokens, and every
// record still arrives.
func TestSecuredOAuthTokenRenewal(t *testing.T) {
	t.Parallel() // topics of its own
	s := securedEnv(t)
	source := &testkit.TokenSource{Client: s.OAuth}
	tok, err := source.Token()
	if err != nil {
		t.Fatal(err)
	}
	lifetime := tokenLifetime(t, tok.Token)
	t.Logf("tokens live %s", lifetime)

	cfg, brokers := securedConfig(t, s, testkit.MechanismOAuthBearer)
	client := newClient(t, brokers, cfg)
	topic := createTopic(t, client, testkit.TopicName("secured-oauth-renewal"))
	before := oauthStats(t, s)
	// One record every 500 ms, until the first session's token has expired
	// and a little more.
	span := lifetime + 3*time.Second
	sent := 0
	for start := time.Now(); time.Since(start) < span; sent++ {
		produce(t, client, topic, sent, 1)
		time.Sleep(500 * time.Millisecond) // the pace of the records, not a wait for a condition
	}
	after := oauthStats(t, s)
	readBack(t, client, topic, sent)
	if after.TokensIssued <= before.TokensIssued {
		t.Errorf("the issuer issued %d tokens before and %d after %s of producing: want new tokens once the first expired",
			before.TokensIssued, after.TokensIssued, span)
	}
	t.Logf("%d records over %s; tokens issued %d -> %d, JWKS served %d -> %d",
		sent, span, before.TokensIssued, after.TokensIssued, before.JWKSServed, after.JWKSServed)
}

// The secured listeners refuse what they must, each within a bounded time
// and with an error that says why (and never holds a password).
func TestSecuredRefusals(t *testing.T) {
	t.Parallel() // topics of its own
	s := securedEnv(t)
	otherCA := clientTLS(t, s, testkit.TLSOtherCAFile, "", "")
	cases := []struct {
		name string
		mech testkit.Mechanism
		// change makes the client one the broker refuses.
		change func(cfg *sarama.Config)
		// want judges the error.
		want func(err error) bool
		what string
	}{{
		name: "SCRAM-SHA-512/wrong-password",
		mech: testkit.MechanismSCRAMSHA512,
		change: func(cfg *sarama.Config) {
			cfg.Net.SASL.Password = "wrong-" + s.SCRAM512.Password
		},
		want: func(err error) bool { return errors.Is(err, sarama.ErrSASLAuthenticationFailed) },
		what: "ErrSASLAuthenticationFailed",
	}, {
		name: "SCRAM-SHA-256/wrong-password",
		mech: testkit.MechanismSCRAMSHA256,
		change: func(cfg *sarama.Config) {
			cfg.Net.SASL.Password = "wrong-" + s.SCRAM256.Password
		},
		want: func(err error) bool { return errors.Is(err, sarama.ErrSASLAuthenticationFailed) },
		what: "ErrSASLAuthenticationFailed",
	}, {
		name: "PLAIN/wrong-password",
		mech: testkit.MechanismPlain,
		change: func(cfg *sarama.Config) {
			cfg.Net.SASL.Password = "wrong-" + s.Plain.Password
		},
		want: func(err error) bool { return errors.Is(err, sarama.ErrSASLAuthenticationFailed) },
		what: "ErrSASLAuthenticationFailed",
	}, {
		name: "SASL_SSL/wrong-CA",
		mech: testkit.MechanismSCRAMSHA512,
		change: func(cfg *sarama.Config) {
			cfg.Net.TLS.Config = otherCA
		},
		want: func(err error) bool {
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &unknown)
		},
		what: "x509.UnknownAuthorityError",
	}, {
		name: "SSL/wrong-CA",
		mech: testkit.MechanismMTLS,
		change: func(cfg *sarama.Config) {
			cfg.Net.TLS.Config.RootCAs = otherCA.RootCAs
		},
		want: func(err error) bool {
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &unknown)
		},
		what: "x509.UnknownAuthorityError",
	}, {
		name: "SSL/client-cert-of-other-CA",
		mech: testkit.MechanismMTLS,
		change: func(cfg *sarama.Config) {
			cfg.Net.TLS.Config = clientTLS(t, s, testkit.TLSCAFile, testkit.TLSOtherClientFile, testkit.TLSOtherClientKeyFile)
		},
		want: tlsAlert,
		what: "a TLS alert from the broker",
	}, {
		name: "SSL/expired-client-cert",
		mech: testkit.MechanismMTLS,
		change: func(cfg *sarama.Config) {
			cfg.Net.TLS.Config = clientTLS(t, s, testkit.TLSCAFile, testkit.TLSExpiredClientFile, testkit.TLSExpiredClientKeyFile)
		},
		want: tlsAlert,
		what: "a TLS alert from the broker",
	}, {
		name: "SSL/no-client-cert",
		mech: testkit.MechanismMTLS,
		change: func(cfg *sarama.Config) {
			cfg.Net.TLS.Config.Certificates = nil
		},
		want: tlsAlert,
		what: "a TLS alert from the broker",
	}}
	secrets := []string{s.SCRAM256.Password, s.SCRAM512.Password, s.Plain.Password}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, brokers := securedConfig(t, s, c.mech)
			c.change(cfg)
			start := time.Now()
			client, err := sarama.NewClient(brokers, cfg)
			took := time.Since(start)
			if err == nil {
				client.Close()
				t.Fatalf("the broker accepted the client (%s)", c.name)
			}
			t.Logf("refused after %s: %v", took.Round(time.Millisecond), err)
			if !c.want(err) {
				t.Errorf("error %q: want %s", err, c.what)
			}
			if took > refusalTimeout {
				t.Errorf("the refusal took %s, more than %s", took, refusalTimeout)
			}
			for _, secret := range append(secrets, cfg.Net.SASL.Password) {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("the error holds a password")
				}
			}
		})
	}
}

// tlsAlert tells whether err carries an alert the broker sent during the
// TLS handshake: crypto/tls reports one as a *net.OpError "remote error"
// (its alert type is not exported). With TLS 1.3 the client counts the
// handshake done before the broker has judged its certificate, so the
// verdict arrives at the first read.
func tlsAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

func securedEnv(t *testing.T) testkit.Secured {
	t.Helper()
	s, err := testkit.SecuredFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// securedConfig is testkit's configuration for m, with short timeouts and
// no retries: a refusal must come back quickly and a hang must fail.
func securedConfig(t *testing.T, s testkit.Secured, m testkit.Mechanism) (*sarama.Config, []string) {
	t.Helper()
	cfg, brokers, err := s.SaramaConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = netTimeout, netTimeout, netTimeout
	cfg.Metadata.Retry.Max = 0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 3
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	return cfg, brokers
}

func clientTLS(t *testing.T, s testkit.Secured, ca, cert, key string) *tls.Config {
	t.Helper()
	certPath, keyPath := "", ""
	if cert != "" {
		certPath, keyPath = s.TLSFile(cert), s.TLSFile(key)
	}
	cfg, err := testkit.ClientTLS(s.TLSFile(ca), certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newClient(t *testing.T, brokers []string, cfg *sarama.Config) sarama.Client {
	t.Helper()
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatalf("connecting to %v: %v", brokers, err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// createTopic creates topic with one partition over client, waits for its
// leader, and deletes it when the test ends.
func createTopic(t *testing.T, client sarama.Client, topic string) string {
	t.Helper()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	// Not admin.Close: that would close the client, which the test owns.
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	t.Cleanup(func() {
		if err := admin.DeleteTopic(topic); err != nil {
			t.Logf("deleting %s: %v", topic, err)
		}
	})
	testkit.Eventually(t, roundTripTimeout, "a leader for "+topic, func() bool {
		if client.RefreshMetadata(topic) != nil {
			return false
		}
		leader, err := client.Leader(topic, 0)
		return err == nil && leader != nil
	})
	return topic
}

// produce sends records first..first+n-1 of topic, waiting for each batch's
// acknowledgement.
func produce(t *testing.T, client sarama.Client, topic string, first, n int) {
	t.Helper()
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close() // leaves the client open
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(first + i)), Value: sarama.StringEncoder(value(first + i))}
	}
	if err := producer.SendMessages(msgs); err != nil {
		t.Fatalf("producing %d records to %s: %v", n, topic, err)
	}
}

func value(i int) string { return fmt.Sprintf("secured-record-%d", i) }

// readBack reads partition 0 of topic from the start and checks that it
// holds records 0..n-1 in order.
func readBack(t *testing.T, client sarama.Client, topic string, n int) {
	t.Helper()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close() // leaves the client open
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("consuming %s: %v", topic, err)
	}
	defer pc.Close()
	deadline := time.NewTimer(roundTripTimeout)
	defer deadline.Stop()
	for i := 0; i < n; i++ {
		select {
		case m := <-pc.Messages():
			if string(m.Value) != value(i) || m.Offset != int64(i) {
				t.Fatalf("record at offset %d is %q, want %q at offset %d", m.Offset, m.Value, value(i), i)
			}
		case err := <-pc.Errors():
			t.Fatalf("consuming %s: %v", topic, err)
		case <-deadline.C:
			t.Fatalf("read %d of %d records of %s within %s", i, n, topic, roundTripTimeout)
		}
	}
}

// tokenLifetime is exp - iat of a JWT (not verified: the broker does that).
func tokenLifetime(t *testing.T, jwt string) time.Duration {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("the token is not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("the token's payload: %v", err)
	}
	var claims struct{ Exp, Iat int64 }
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatalf("the token's claims: %v", err)
	}
	if claims.Exp <= claims.Iat {
		t.Fatalf("the token's exp %d is not after its iat %d", claims.Exp, claims.Iat)
	}
	return time.Duration(claims.Exp-claims.Iat) * time.Second
}

func oauthStats(t *testing.T, s testkit.Secured) testkit.OAuthStats {
	t.Helper()
	st, err := s.OAuth.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}
