//go:build kafka

package kafka_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// secured is the secured side of the broker `make test-kafka` starts.
type secured struct{ testkit.Secured }

func securedFromEnv(t *testing.T) secured {
	t.Helper()
	s, err := testkit.SecuredFromEnv()
	if err != nil {
		t.Fatalf("%v (run this through `make test-kafka`)", err)
	}
	return secured{s}
}

// The listeners' first addresses.
func (s secured) plain() string   { return s.Brokers[0] }
func (s secured) saslSSL() string { return s.SASLSSLBrokers[0] }
func (s secured) ssl() string     { return s.SSLBrokers[0] }

func (s secured) file(name string) string { return s.TLSFile(name) }

// secrets are every secret of the broker's users, and the wrong ones the
// tests try: none may appear in anything turbo prints.
func (s secured) secrets(t *testing.T, extra ...string) []string {
	t.Helper()
	client, err := os.ReadFile(s.OAuth.ClientSecretFile)
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{s.SCRAM512.Password, s.SCRAM256.Password, s.Plain.Password, strings.TrimSpace(string(client))}, extra...)
}

// noSecrets fails the test if out shows any of secrets.
func noSecrets(t *testing.T, what, out string, secrets []string) {
	t.Helper()
	for _, sec := range secrets {
		if sec != "" && strings.Contains(out, sec) {
			t.Errorf("%s shows a secret (%d characters long):\n%s", what, len(sec), out)
		}
	}
}

// Each mistake an operator makes connecting to a secured cluster ends
// `turbo run` within a bounded time with exit 1 (a configuration mistake a
// loaded file cannot show: exit 2) and one line naming the cause, and
// `turbo produce` with the same line; none prints a secret.
func TestSecuredMistakesEndTheRunWithTheirCause(t *testing.T) {
	t.Parallel() // topics of its own
	s := securedFromEnv(t)
	topic := testkit.TopicName("secured-mistakes")
	testkit.Cluster(t, 2, topic)
	const wrongPW = "not-the-password-7d1e"
	wrongSecret := filepath.Join(t.TempDir(), "wrong-secret")
	if err := os.WriteFile(wrongSecret, []byte("not-the-client-secret-91aa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := s.secrets(t, wrongPW, "not-the-client-secret-91aa")
	for _, tc := range []struct {
		name, kafka string
		code        int
		want        string
	}{
		{"wrong password", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q}
  sasl: {mechanism: SCRAM-SHA-512, username: %q, password: %q}`, s.saslSSL(), s.file("ca.pem"), s.SCRAM512.User, wrongPW),
			1, fmt.Sprintf(`the broker refused user %q (SASL SCRAM-SHA-512): wrong username or password, or a user the cluster does not know (kafka.sasl)`, s.SCRAM512.User)},
		{"wrong CA", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q}
  sasl: {mechanism: SCRAM-SHA-256, username: %q, password: %q}`, s.saslSSL(), s.file("other-ca.pem"), s.SCRAM256.User, s.SCRAM256.Password),
			1, `is signed by an authority turbo does not trust: set kafka.tls.ca_file to the CA that signed it`},
		{"client certificate from another CA", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}`, s.ssl(), s.file("ca.pem"), s.file("other-client.pem"), s.file("other-client-key.pem")),
			1, `TLS: the broker refused turbo's client certificate`},
		{"no client certificate for mTLS", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q}`, s.ssl(), s.file("ca.pem")),
			1, `TLS: the broker requires a client certificate (mTLS): set kafka.tls.cert_file and kafka.tls.key_file (it answered: bad certificate)`},
		{"expired client certificate", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}`, s.ssl(), s.file("ca.pem"), s.file("expired-client.pem"), s.file("expired-client-key.pem")),
			2, fmt.Sprintf(`config: kafka.tls.cert_file: the certificate in %s expired at`, s.file("expired-client.pem"))},
		{"SASL against a PLAINTEXT listener", fmt.Sprintf(`brokers: [%q]
  sasl: {mechanism: PLAIN, username: %q, password: %q}`, s.plain(), s.Plain.User, s.Plain.Password),
			1, fmt.Sprintf(`the broker's listener at %s does not expect SASL: kafka.sasl.mechanism is PLAIN, but the listener is PLAINTEXT or SSL`, s.plain())},
		{"plaintext against SASL_SSL", fmt.Sprintf(`brokers: [%q]`, s.saslSSL()),
			1, fmt.Sprintf(`the broker at %s speaks TLS, but kafka.tls.enabled is false`, s.saslSSL())},
		{"TLS without SASL against SASL_SSL", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q}`, s.saslSSL(), s.file("ca.pem")),
			1, fmt.Sprintf(`the broker at %s wants SASL authentication (it offers `, s.saslSSL())},
		{"TLS against PLAINTEXT", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q}`, s.plain(), s.file("ca.pem")),
			1, `kafka.tls.enabled is true, but the listener is PLAINTEXT or SASL_PLAINTEXT`},
		{"wrong OAuth client secret", fmt.Sprintf(`brokers: [%q]
  tls: {enabled: true, ca_file: %q}
  sasl:
    mechanism: OAUTHBEARER
    oauth: {token_url: %q, client_id: %q, client_secret_file: %q}`, s.saslSSL(), s.file("ca.pem"), s.OAuth.TokenURL, s.OAuth.ClientID, wrongSecret),
			1, fmt.Sprintf(`OAUTHBEARER: the token endpoint %s answered HTTP 401 invalid_client`, s.OAuth.TokenURL)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each mistake is a turbo run of its own that waits on the
			// broker's answers: together they take the longest one's time.
			t.Parallel()
			cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  %s
consumers:
  - name: secured
    group: %s
    topics: [%s]
    handler: {type: noop}
shutdown_timeout: 5s
log: {level: info, format: json}
`, tc.kafka, topic, topic))
			var stdout, stderr bytes.Buffer
			began := time.Now()
			run := testkit.StartWith(t, &stdout, &stderr, "run", "--config", cfg)
			code := run.Wait(t, 90*time.Second)
			took := time.Since(began)
			out := stdout.String() + stderr.String()
			if code != tc.code {
				t.Errorf("exit %d after %s, want %d; output:\n%s", code, took.Round(time.Millisecond), tc.code, out)
			}
			if !strings.Contains(readable(out), tc.want) {
				t.Errorf("the output does not say %q:\n%s", tc.want, out)
			}
			noSecrets(t, "the output", out, secrets)
			line := ""
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "turbo:") || strings.Contains(l, "giving up") || strings.HasPrefix(l, "config:") {
					line = l
				}
			}
			t.Logf("FIGURES secured-mistake %q: exit %d after %s; %s", tc.name, code, took.Round(time.Millisecond), line)

			// turbo produce, with the same kafka section, ends as the run
			// does, on the same side.
			var pout, perr bytes.Buffer
			began = time.Now()
			prod := testkit.StartWith(t, &pout, &perr, "produce", "--config", cfg, "--topic", topic, "--count", "1")
			pcode := prod.Wait(t, 90*time.Second)
			out = pout.String() + perr.String()
			if pcode != tc.code || !strings.Contains(readable(out), tc.want) {
				t.Errorf("turbo produce: exit %d after %s, want %d and %q; output:\n%s", pcode, time.Since(began).Round(time.Millisecond), tc.code, tc.want, out)
			}
			noSecrets(t, "turbo produce's output", out, secrets)
		})
	}
}

// turbo produce given --brokers and its security from the TURBO_KAFKA_*
// environment alone (no --config) explains a refusal as turbo run does: it
// probes the brokers it was given (it probed none, and said only "run out
// of available brokers").
func TestProduceByFlagsExplainsARefusal(t *testing.T) {
	t.Parallel()
	s := securedFromEnv(t)
	for _, tc := range []struct {
		name, brokers string
		env           [][2]string
		want          string
	}{
		{"SASL against a PLAINTEXT listener", s.plain(), [][2]string{{"TURBO_KAFKA_SASL_MECHANISM", "PLAIN"}, {"TURBO_KAFKA_SASL_USERNAME", s.Plain.User}, {"TURBO_KAFKA_SASL_PASSWORD", s.Plain.Password}},
			fmt.Sprintf(`the broker's listener at %s does not expect SASL`, s.plain())},
		{"TLS against PLAINTEXT", s.plain(), [][2]string{{"TURBO_KAFKA_TLS_ENABLED", "true"}, {"TURBO_KAFKA_TLS_CA_FILE", s.file("ca.pem")}},
			fmt.Sprintf(`the broker at %s does not speak TLS`, s.plain())},
		{"plaintext against SASL_SSL", s.saslSSL(), nil,
			fmt.Sprintf(`the broker at %s speaks TLS, but kafka.tls.enabled is false`, s.saslSSL())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, kv := range tc.env {
				testkit.Setenv(t, kv[0], kv[1])
			}
			var stdout, stderr bytes.Buffer
			began := time.Now()
			p := testkit.StartWith(t, &stdout, &stderr, "produce", "--brokers", tc.brokers, "--topic", testkit.TopicName("produce-flags"), "--count", "1")
			code := p.Wait(t, 90*time.Second)
			out := stdout.String() + stderr.String()
			if code != 1 || !strings.Contains(readable(out), tc.want) || strings.Contains(out, "embedded:") {
				t.Errorf("exit %d after %s, want 1 and %q; output:\n%s", code, time.Since(began).Round(time.Millisecond), tc.want, out)
			}
			noSecrets(t, "turbo produce's output", out, s.secrets(t))
		})
	}
}

// OAUTHBEARER for real: the broker validates the tokens against the JWKS of
// the test's issuer, whose tokens live 10 s; a run longer than several
// lifetimes keeps consuming because turbo fetches a new token before the
// old one expires and re-authenticates its connections (KIP-368). The
// ledger judges the run as any other.
func TestOAuthBearerRunOutlivesItsTokens(t *testing.T) {
	t.Parallel() // topics of its own
	s := securedFromEnv(t)
	topic := testkit.TopicName("oauth")
	testkit.Cluster(t, 4, topic)
	ledger := testkit.NewLedger(2 * time.Millisecond)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
  tls: {enabled: true, ca_file: %q}
  sasl:
    mechanism: OAUTHBEARER
    oauth: {token_url: %q, client_id: %q, client_secret_file: %q, scopes: [kafka]}
consumers:
  - name: oauth
    group: %s
    topics: [%s]
    concurrency: 8
    commit_interval: 200ms
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: 10s
log: {level: info, format: json}
`, s.saslSSL(), s.file("ca.pem"), s.OAuth.TokenURL, s.OAuth.ClientID, s.OAuth.ClientSecretFile, topic, topic, ledger.Endpoint(t)))
	before := tokensIssued(t, s.OAuth)
	var stdout, stderr bytes.Buffer
	run := testkit.StartWith(t, &stdout, &stderr, "run", "--config", cfg)
	const batches, batch, keys = 4, 500, 50
	began := time.Now()
	for i := 1; i <= batches; i++ {
		testkit.ProduceWithBinary(t, s.plain(), topic, batch, keys)
		testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("batch %d handled", i), func() bool { return ledger.Report().Distinct == i*batch })
		if i < batches {
			// The next batch goes to connections re-authenticated with a
			// new token: the issuer's tokens live 10 s, turbo replaces
			// them after 8.
			seen := tokensIssued(t, s.OAuth)
			testkit.Eventually(t, 30*time.Second, "turbo to fetch a new token", func() bool { return tokensIssued(t, s.OAuth) > seen })
		}
	}
	testkit.Eventually(t, time.Minute, "every record committed", func() bool {
		var sum int64
		for _, off := range testkit.CommittedOffsets(t, []string{s.plain()}, topic, topic) {
			sum += max(off, 0)
		}
		return sum == batches*batch
	})
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0:\n%s", code, stderr.String())
	}
	elapsed := time.Since(began)
	issued := tokensIssued(t, s.OAuth) - before
	if min := int64(elapsed/(10*time.Second)) + 1; issued < min {
		t.Errorf("%d tokens issued during a %s run of 10 s tokens, want at least %d: turbo did not refresh its token", issued, elapsed.Round(time.Second), min)
	}
	rep := ledger.Report()
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	if rep.Distinct != batches*batch {
		t.Errorf("%d of %d records handled", rep.Distinct, batches*batch)
	}
	noSecrets(t, "the output", stdout.String()+stderr.String(), s.secrets(t))
	t.Logf("FIGURES oauthbearer records=%d lost=%d duplicates=%d overlaps=%d order_violations=%d run=%s tokens_issued=%d",
		rep.Distinct, batches*batch-rep.Distinct, rep.Duplicates, rep.Overlaps, rep.OrderViolations, elapsed.Round(time.Second), issued)
}

func tokensIssued(t *testing.T, c testkit.OAuthClient) int64 {
	t.Helper()
	st, err := c.Stats()
	if err != nil {
		t.Fatalf("the issuer's stats: %v", err)
	}
	return st.TokensIssued
}

// readable is a run's output with each JSON log line (log.format: json)
// replaced by its string fields' values, unescaped, so that a test can look
// for a message as a person reads it.
func readable(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		var fields map[string]any
		if json.Unmarshal([]byte(l), &fields) != nil {
			b.WriteString(l + "\n")
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if v, ok := fields[k].(string); ok {
				b.WriteString(v + "\n")
			}
		}
	}
	return b.String()
}
