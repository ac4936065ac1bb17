package testkit

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// The environment of a secured broker: the names kafka.sh start writes into
// $STATE/env (`kafka.sh env STATE` prints it) and `make test-kafka` exports.
const (
	KafkaVersionEnv           = "TURBO_TEST_KAFKA_VERSION"
	SASLSSLBrokersEnv         = "TURBO_TEST_SASL_SSL_BROKERS"
	SSLBrokersEnv             = "TURBO_TEST_SSL_BROKERS"
	TLSDirEnv                 = "TURBO_TEST_TLS_DIR"
	SCRAM256UserEnv           = "TURBO_TEST_SCRAM256_USER"
	SCRAM256PasswordEnv       = "TURBO_TEST_SCRAM256_PASSWORD"
	SCRAM512UserEnv           = "TURBO_TEST_SCRAM512_USER"
	SCRAM512PasswordEnv       = "TURBO_TEST_SCRAM512_PASSWORD"
	PlainUserEnv              = "TURBO_TEST_PLAIN_USER"
	PlainPasswordEnv          = "TURBO_TEST_PLAIN_PASSWORD"
	OAuthTokenURLEnv          = "TURBO_TEST_OAUTH_TOKEN_URL"
	OAuthClientIDEnv          = "TURBO_TEST_OAUTH_CLIENT_ID"
	OAuthClientSecretFileEnv  = "TURBO_TEST_OAUTH_CLIENT_SECRET_FILE"
	OAuthStatsURLEnv          = "TURBO_TEST_OAUTH_STATS_URL"
	securedEnvHint            = "start a broker with test/kafka/kafka.sh start STATE and export its settings: set -a; . STATE/env; set +a"
	oauthTokenRequestTimeout  = 10 * time.Second
	maxTokenResponseBodyBytes = 1 << 20
)

// The files of TURBO_TEST_TLS_DIR (written by test/kafka/pki), all PEM.
const (
	TLSCAFile               = "ca.pem"                 // signed the broker's and the good clients' certificates
	TLSClientFile           = "client.pem"             // a client of the CA, RSA
	TLSClientKeyFile        = "client-key.pem"         // its key, PKCS#8
	TLSClientKeyPKCS1File   = "client-key-pkcs1.pem"   // the same key, PKCS#1
	TLSClientECFile         = "client-ec.pem"          // a client of the CA, EC
	TLSClientECKeyFile      = "client-ec-key.pem"      // its key, SEC 1
	TLSOtherCAFile          = "other-ca.pem"           // an unrelated CA
	TLSOtherClientFile      = "other-client.pem"       // a client of the other CA
	TLSOtherClientKeyFile   = "other-client-key.pem"   // its key, PKCS#8
	TLSExpiredClientFile    = "expired-client.pem"     // a client of the CA, expired
	TLSExpiredClientKeyFile = "expired-client-key.pem" // its key, PKCS#8
)

// ErrNoSecuredBroker is returned by SecuredFromEnv when the environment does
// not describe a secured broker.
var ErrNoSecuredBroker = errors.New("testkit: no secured broker in the environment")

// Credentials are a SASL user and its password.
type Credentials struct {
	User, Password string
}

// OAuthClient is the client-credentials client of the broker's token issuer
// (test/kafka/oidc).
type OAuthClient struct {
	TokenURL string
	ClientID string
	// ClientSecretFile holds the secret; the issuer re-reads it on every
	// request, so a test may rotate it.
	ClientSecretFile string
	// StatsURL serves {"tokens_issued":N,"refused":M,"jwks_served":K}.
	StatsURL string
}

// Secured describes the broker kafka.sh starts with its secured listeners:
// PLAINTEXT, SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER;
// server-authenticated TLS) and SSL (client certificate required).
type Secured struct {
	Brokers        []string // PLAINTEXT (TURBO_TEST_BROKERS)
	KafkaVersion   string   // e.g. 3.9.2 or 4.4.0
	SASLSSLBrokers []string
	SSLBrokers     []string
	TLSDir         string // the TLS*File files
	SCRAM256       Credentials
	SCRAM512       Credentials
	Plain          Credentials
	OAuth          OAuthClient
}

// SecuredFromEnv reads Secured from the environment. Its error wraps
// ErrNoSecuredBroker and names every variable that is unset or empty.
func SecuredFromEnv() (Secured, error) {
	var missing []string
	get := func(name string) string {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			missing = append(missing, name)
		}
		return v
	}
	list := func(name string) []string {
		var out []string
		for _, b := range strings.Split(get(name), ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, b)
			}
		}
		return out
	}
	s := Secured{
		Brokers:        list(BrokersEnv),
		KafkaVersion:   get(KafkaVersionEnv),
		SASLSSLBrokers: list(SASLSSLBrokersEnv),
		SSLBrokers:     list(SSLBrokersEnv),
		TLSDir:         get(TLSDirEnv),
		SCRAM256:       Credentials{User: get(SCRAM256UserEnv), Password: get(SCRAM256PasswordEnv)},
		SCRAM512:       Credentials{User: get(SCRAM512UserEnv), Password: get(SCRAM512PasswordEnv)},
		Plain:          Credentials{User: get(PlainUserEnv), Password: get(PlainPasswordEnv)},
		OAuth: OAuthClient{
			TokenURL:         get(OAuthTokenURLEnv),
			ClientID:         get(OAuthClientIDEnv),
			ClientSecretFile: get(OAuthClientSecretFileEnv),
			StatsURL:         get(OAuthStatsURLEnv),
		},
	}
	if len(missing) > 0 {
		return Secured{}, fmt.Errorf("%w: %s not set (%s)", ErrNoSecuredBroker, strings.Join(missing, ", "), securedEnvHint)
	}
	return s, nil
}

// TLSFile returns the path of one of the TLS*File files.
func (s Secured) TLSFile(name string) string {
	return filepath.Join(s.TLSDir, name)
}

// Mechanism names how a client authenticates to the secured broker.
type Mechanism string

// The mechanisms of the SASL_SSL listener, and mTLS for the SSL one.
const (
	MechanismPlain       Mechanism = "PLAIN"
	MechanismSCRAMSHA256 Mechanism = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 Mechanism = "SCRAM-SHA-512"
	MechanismOAuthBearer Mechanism = "OAUTHBEARER"
	MechanismMTLS        Mechanism = "mTLS"
)

// SaramaConfig returns a plain sarama configuration that reaches the broker
// with mechanism m, set up by hand with sarama's own TLS and SASL fields, and
// the brokers of the listener it is for. Tests change its fields to make a
// client the broker must refuse. It is for tests of the broker itself; turbo
// configures its clients from config.Kafka.
func (s Secured) SaramaConfig(m Mechanism) (*sarama.Config, []string, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "turbo-testkit"
	cfg.Net.TLS.Enable = true
	if m == MechanismMTLS {
		tlsCfg, err := ClientTLS(s.TLSFile(TLSCAFile), s.TLSFile(TLSClientFile), s.TLSFile(TLSClientKeyFile))
		if err != nil {
			return nil, nil, err
		}
		cfg.Net.TLS.Config = tlsCfg
		return cfg, s.SSLBrokers, nil
	}
	tlsCfg, err := ClientTLS(s.TLSFile(TLSCAFile), "", "")
	if err != nil {
		return nil, nil, err
	}
	cfg.Net.TLS.Config = tlsCfg
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLMechanism(m)
	switch m {
	case MechanismPlain:
		cfg.Net.SASL.User, cfg.Net.SASL.Password = s.Plain.User, s.Plain.Password
	case MechanismSCRAMSHA256:
		cfg.Net.SASL.User, cfg.Net.SASL.Password = s.SCRAM256.User, s.SCRAM256.Password
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha256.New} }
	case MechanismSCRAMSHA512:
		cfg.Net.SASL.User, cfg.Net.SASL.Password = s.SCRAM512.User, s.SCRAM512.Password
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha512.New} }
	case MechanismOAuthBearer:
		cfg.Net.SASL.TokenProvider = &TokenSource{Client: s.OAuth}
	default:
		return nil, nil, fmt.Errorf("testkit: unknown mechanism %q", m)
	}
	return cfg, s.SASLSSLBrokers, nil
}

// ClientTLS returns a TLS client configuration trusting the CAs of caFile
// and, when certFile is not empty, presenting that certificate with the key
// of keyFile (PEM: PKCS#1, PKCS#8 or EC).
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("testkit: CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("testkit: no certificate in %s", caFile)
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("testkit: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// scramClient is sarama's SCRAMClient over github.com/xdg-go/scram, as in
// sarama's examples.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return fmt.Errorf("testkit: SCRAM client: %w", err)
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) {
	return c.conv.Step(challenge)
}

func (c *scramClient) Done() bool {
	return c.conv.Done()
}

// TokenSource is a sarama.AccessTokenProvider that gets a new token from the
// issuer's token endpoint (OAuth 2.0 client credentials, client by HTTP
// Basic) on every call: sarama calls it at each (re-)authentication. Its
// errors name the endpoint and the status, never the secret.
type TokenSource struct {
	Client OAuthClient
}

// Token implements sarama.AccessTokenProvider.
func (ts *TokenSource) Token() (*sarama.AccessToken, error) {
	secret, err := os.ReadFile(ts.Client.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("testkit: OAuth client secret: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), oauthTokenRequestTimeout)
	defer cancel()
	form := url.Values{"grant_type": {"client_credentials"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.Client.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("testkit: token request to %s: %w", ts.Client.TokenURL, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(ts.Client.ClientID), url.QueryEscape(strings.TrimSpace(string(secret))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("testkit: token request to %s: %w", ts.Client.TokenURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponseBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("testkit: token response of %s: %w", ts.Client.TokenURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("testkit: token endpoint %s: HTTP %d", ts.Client.TokenURL, resp.StatusCode)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil {
		return nil, fmt.Errorf("testkit: token response of %s: %w", ts.Client.TokenURL, err)
	}
	if tok.AccessToken == "" {
		return nil, fmt.Errorf("testkit: token response of %s has no access_token", ts.Client.TokenURL)
	}
	return &sarama.AccessToken{Token: tok.AccessToken}, nil
}

// OAuthStats is the token issuer's /stats document.
type OAuthStats struct {
	TokensIssued int64 `json:"tokens_issued"`
	Refused      int64 `json:"refused"`
	JWKSServed   int64 `json:"jwks_served"`
}

// Stats fetches the token issuer's counters.
func (c OAuthClient) Stats() (OAuthStats, error) {
	var s OAuthStats
	ctx, cancel := context.WithTimeout(context.Background(), oauthTokenRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.StatsURL, nil)
	if err != nil {
		return s, fmt.Errorf("testkit: %s: %w", c.StatsURL, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("testkit: %s: %w", c.StatsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("testkit: %s: HTTP %d", c.StatsURL, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTokenResponseBodyBytes)).Decode(&s); err != nil {
		return s, fmt.Errorf("testkit: %s: %w", c.StatsURL, err)
	}
	return s, nil
}
