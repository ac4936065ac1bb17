// Package kafkanet is how every Kafka connection turbo makes is secured:
// TLS (with client certificates for mTLS) and SASL (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512 and OAUTHBEARER with the OAuth 2.0 client-credentials flow),
// applied to a sarama configuration from config.Kafka; and how a refused
// connection is explained in one line that names its cause.
//
// The consumer group, its second client (commit metadata, dead letters),
// the session probe, the --exit-on-idle watcher and `turbo produce` all
// take their settings from Apply, so one kafka section secures them all.
package kafkanet

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/xdg-go/scram"
)

// Net secures the Kafka connections of one consumer (or tool) for its whole
// life: its OAUTHBEARER token is shared by all the clients Apply
// configures, and by every restart of the consumer's tree. It starts no
// goroutine; the zero value is not usable: use New.
type Net struct {
	k      config.Kafka
	log    zerolog.Logger
	tokens *tokenProvider // nil unless OAUTHBEARER
}

// New returns a Net for k's security settings, which config.Validate has
// checked; Apply reports what cannot be read when it is used.
func New(k config.Kafka, log zerolog.Logger) *Net {
	n := &Net{k: k, log: log}
	if k.SASL.Mechanism == config.SASLOAuthBearer {
		n.tokens = newTokenProvider(k.SASL.OAuth, log)
	}
	return n
}

// Warn logs, once per call, what in the settings weakens security: call it
// once at start.
func (n *Net) Warn() {
	if n.k.TLS.Enabled && n.k.TLS.InsecureSkipVerify {
		n.log.Warn().Msg("kafka.tls.insecure_skip_verify is true: the brokers' certificates are not checked, so anyone on the path can read and change the traffic")
	}
	if !n.k.TLS.Enabled && n.k.SASL.Mechanism != config.SASLNone {
		what := "credentials"
		if n.k.SASL.Mechanism == config.SASLPlain {
			what = "password"
		} else if n.k.SASL.Mechanism == config.SASLOAuthBearer {
			what = "token"
		}
		n.log.Warn().Str("mechanism", string(n.k.SASL.Mechanism)).Msgf("SASL without TLS: the %s and every record cross the network unencrypted (set kafka.tls.enabled unless the network is trusted)", what)
	}
}

// Apply sets cfg's TLS and SASL settings. It reads the CA bundle and the
// PLAIN or SCRAM password now (call it for each new client, so a rotated
// file is picked up); the client certificate, the SCRAM password and the
// OAuth client secret are read again at every connection or token.
func (n *Net) Apply(cfg *sarama.Config) error {
	if n.k.TLS.Enabled {
		tc, err := n.tlsConfig()
		if err != nil {
			return err
		}
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tc
	}
	s := n.k.SASL
	if s.Mechanism == config.SASLNone {
		return nil
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Handshake = true
	cfg.Net.SASL.Version = sarama.SASLHandshakeV1
	switch s.Mechanism {
	case config.SASLOAuthBearer:
		cfg.Net.SASL.Mechanism = sarama.SASLTypeOAuth
		cfg.Net.SASL.TokenProvider = n.tokens
		return nil
	case config.SASLPlain:
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case config.SASLScramSHA256:
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = n.scramClient(scram.SHA256)
	case config.SASLScramSHA512:
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = n.scramClient(scram.SHA512)
	default:
		return fmt.Errorf("kafka.sasl.mechanism: unknown mechanism %q", s.Mechanism)
	}
	pw, err := s.PasswordValue()
	if err != nil {
		return fmt.Errorf("kafka.sasl.password_file: %w", err)
	}
	cfg.Net.SASL.User = s.Username
	cfg.Net.SASL.Password = pw
	return nil
}

func (n *Net) tlsConfig() (*tls.Config, error) { return n.k.TLS.ClientConfig("kafka.tls") }

// scramClient returns sarama's generator of SCRAM conversations, backed by
// github.com/xdg-go/scram. The password is read at every conversation (each
// new connection), so a rotated password_file needs no restart.
func (n *Net) scramClient(hash scram.HashGeneratorFcn) func() sarama.SCRAMClient {
	return func() sarama.SCRAMClient {
		return &scramClient{hash: hash, password: n.k.SASL.PasswordValue}
	}
}

type scramClient struct {
	hash     scram.HashGeneratorFcn
	password func() (string, error)
	conv     *scram.ClientConversation
}

func (c *scramClient) Begin(user, _, authzID string) error {
	pw, err := c.password()
	if err != nil {
		return fmt.Errorf("kafka.sasl.password_file: %w", err)
	}
	client, err := c.hash.NewClient(user, pw, authzID)
	if err != nil {
		// SASLprep refuses some characters; the message names the rule,
		// not the password.
		return fmt.Errorf("SCRAM: %w", err)
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

// dialTimeout bounds the probes of Diagnose.
const dialTimeout = 5 * time.Second
