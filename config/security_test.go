package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit/pki"
)

// secretValue is what the tests below use as a secret: any output that
// contains it leaked it.
const secretValue = "hunter2-s3cr3t-value"

// tlsFiles writes a CA and a client certificate of each key format.
type tlsFiles struct {
	dir, ca, cert, key, pkcs1Cert, pkcs1Key, ecCert, ecKey, expiredCert, expiredKey, futureCert, futureKey string
}

func writeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca := pki.TestCA(t, "test CA")
	f := tlsFiles{dir: dir, ca: pki.Write(t, dir, "ca.pem", ca.PEM)}
	p := ca.TestIssue(t, pki.Options{CommonName: "client"})
	f.cert, f.key = pki.Write(t, dir, "client.pem", p.Cert), pki.Write(t, dir, "client-key.pem", p.Key)
	p = ca.TestIssue(t, pki.Options{CommonName: "client1", Format: pki.PKCS1})
	f.pkcs1Cert, f.pkcs1Key = pki.Write(t, dir, "client1.pem", p.Cert), pki.Write(t, dir, "client1-key.pem", p.Key)
	p = ca.TestIssue(t, pki.Options{CommonName: "clientec", Format: pki.EC})
	f.ecCert, f.ecKey = pki.Write(t, dir, "clientec.pem", p.Cert), pki.Write(t, dir, "clientec-key.pem", p.Key)
	p = ca.TestIssue(t, pki.Options{CommonName: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	f.expiredCert, f.expiredKey = pki.Write(t, dir, "expired.pem", p.Cert), pki.Write(t, dir, "expired-key.pem", p.Key)
	p = ca.TestIssue(t, pki.Options{CommonName: "new", NotBefore: time.Now().Add(time.Hour), NotAfter: time.Now().Add(48 * time.Hour)})
	f.futureCert, f.futureKey = pki.Write(t, dir, "future.pem", p.Cert), pki.Write(t, dir, "future-key.pem", p.Key)
	return f
}

func TestSecurityLoads(t *testing.T) {
	f := writeTLSFiles(t)
	pwFile := pki.Write(t, f.dir, "pw", []byte(secretValue+"\n"))
	tests := []struct {
		name  string
		lines []string
		env   []string
		check func(t *testing.T, k Kafka)
	}{
		{"off by default", nil, nil, func(t *testing.T, k Kafka) {
			if k.TLS.Enabled || k.SASL.Mechanism != SASLNone {
				t.Errorf("tls %+v sasl %+v: want both off", k.TLS, k.SASL)
			}
		}},
		{"tls with system roots", []string{"  tls: {enabled: true}"}, nil, func(t *testing.T, k Kafka) {
			if !k.TLS.Enabled || k.TLS.CAFile != "" {
				t.Errorf("tls %+v", k.TLS)
			}
		}},
		{"mtls pkcs8", []string{"  tls: {enabled: true, ca_file: " + f.ca + ", cert_file: " + f.cert + ", key_file: " + f.key + ", server_name: kafka.internal}"}, nil, func(t *testing.T, k Kafka) {
			if k.TLS.ServerName != "kafka.internal" || k.TLS.KeyFile != f.key {
				t.Errorf("tls %+v", k.TLS)
			}
		}},
		{"mtls pkcs1", []string{"  tls: {enabled: true, cert_file: " + f.pkcs1Cert + ", key_file: " + f.pkcs1Key + "}"}, nil, nil},
		{"mtls ec", []string{"  tls: {enabled: true, cert_file: " + f.ecCert + ", key_file: " + f.ecKey + "}"}, nil, nil},
		{"scram password", []string{"  sasl: {mechanism: SCRAM-SHA-512, username: u, password: " + secretValue + "}"}, nil, func(t *testing.T, k Kafka) {
			if pw, err := k.SASL.PasswordValue(); err != nil || pw != secretValue {
				t.Errorf("PasswordValue = %q, %v", pw, err)
			}
		}},
		{"plain password file", []string{"  sasl: {mechanism: PLAIN, username: u, password_file: " + pwFile + "}"}, nil, func(t *testing.T, k Kafka) {
			if pw, err := k.SASL.PasswordValue(); err != nil || pw != secretValue {
				t.Errorf("PasswordValue = %q, %v: want the file's content without its line break", pw, err)
			}
		}},
		{"password from the environment", []string{"  sasl: {mechanism: SCRAM-SHA-256, username: u}"},
			[]string{"TURBO_KAFKA_SASL_PASSWORD=" + secretValue, "TURBO_KAFKA_TLS_ENABLED=true", "TURBO_KAFKA_TLS_CA_FILE=" + f.ca}, func(t *testing.T, k Kafka) {
				if k.SASL.Password.Reveal() != secretValue || !k.TLS.Enabled || k.TLS.CAFile != f.ca {
					t.Errorf("sasl %#v tls %+v: want the environment's values", k.SASL, k.TLS)
				}
			}},
		{"oauthbearer", []string{"  sasl:", "    mechanism: OAUTHBEARER", "    oauth:", "      token_url: https://idp.example.com/oauth2/token",
			"      client_id: turbo", "      client_secret_file: " + pwFile, "      scopes: [kafka, read]", "      extensions: {logicalCluster: lkc-1, identityPoolId: pool-2}"}, nil,
			func(t *testing.T, k Kafka) {
				o := k.SASL.OAuth
				if s, err := o.ClientSecretValue(); err != nil || s != secretValue {
					t.Errorf("ClientSecretValue = %q, %v", s, err)
				}
				if fmt.Sprint(o.Scopes) != "[kafka read]" || o.Extensions["logicalCluster"] != "lkc-1" || o.Extensions["identityPoolId"] != "pool-2" || len(o.Extensions) != 2 {
					t.Errorf("scopes %v extensions %v", o.Scopes, o.Extensions)
				}
				if o.AuthStyle != AuthStyleHeader {
					t.Errorf("auth_style %q, want the default header", o.AuthStyle)
				}
			}},
		{"oauth auth_style body", []string{"  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/t\", client_id: c, client_secret_file: " + pwFile + ", auth_style: body}}"}, nil,
			func(t *testing.T, k Kafka) {
				if k.SASL.OAuth.AuthStyle != AuthStyleBody {
					t.Errorf("auth_style %q, want body", k.SASL.OAuth.AuthStyle)
				}
			}},
		{"oauth auth_style from the environment", []string{"  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/t\", client_id: c, client_secret_file: " + pwFile + "}}"},
			[]string{"TURBO_KAFKA_SASL_OAUTH_AUTH_STYLE=body"}, func(t *testing.T, k Kafka) {
				if k.SASL.OAuth.AuthStyle != AuthStyleBody {
					t.Errorf("auth_style %q, want body", k.SASL.OAuth.AuthStyle)
				}
			}},
		{"oauth extensions from the environment", []string{"  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: http://127.0.0.1:1/t, client_id: c}}"},
			[]string{"TURBO_KAFKA_SASL_OAUTH_CLIENT_SECRET=" + secretValue, "TURBO_KAFKA_SASL_OAUTH_EXTENSIONS=logicalCluster=lkc-9, identityPoolId=p", "TURBO_KAFKA_SASL_OAUTH_SCOPES=a,b"},
			func(t *testing.T, k Kafka) {
				o := k.SASL.OAuth
				if o.ClientSecret.Reveal() != secretValue || o.Extensions["logicalCluster"] != "lkc-9" || o.Extensions["identityPoolId"] != "p" || fmt.Sprint(o.Scopes) != "[a b]" {
					t.Errorf("oauth %#v", o)
				}
			}},
	}
	// Plain http only to this machine: the secret goes with every request.
	for _, u := range []string{"http://localhost:8080/t", "http://LOCALHOST/t", "http://127.0.0.1:1/t", "http://127.3.4.5/t", "http://[::1]:9000/t", "https://idp.example.com/t"} {
		tests = append(tests, struct {
			name  string
			lines []string
			env   []string
			check func(t *testing.T, k Kafka)
		}{"oauth token_url " + u, []string{"  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"" + u + "\", client_id: c, client_secret_file: " + pwFile + "}}"}, nil, nil})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := withConsumer(append([]string{"kafka:", "  brokers: [k1:9093]"}, tt.lines...)...)
			c, err := Load(writeConfig(t, "app.yaml", content), tt.env)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if tt.check != nil {
				tt.check(t, c.Kafka)
			}
		})
	}
}

func TestSecurityRejects(t *testing.T) {
	f := writeTLSFiles(t)
	pwFile := pki.Write(t, f.dir, "pw", []byte(secretValue))
	empty := pki.Write(t, f.dir, "empty", []byte("\n"))
	notPEM := pki.Write(t, f.dir, "junk.pem", []byte("not a certificate"))
	missing := filepath.Join(f.dir, "missing.pem")
	kafka := func(lines ...string) string {
		return withConsumer(append([]string{"kafka:", "  brokers: [k1:9093]"}, lines...)...)
	}
	scram := "  sasl: {mechanism: SCRAM-SHA-256, username: u, password: " + secretValue + "}"
	tests := []struct {
		name    string
		content string
		wantKey string
		wantIn  []string
	}{
		{"unknown tls key", kafka("  tls: {enabled: true, ca: x}"), "kafka.tls.ca", []string{"unknown key"}},
		{"unknown sasl key", kafka("  sasl: {mechanism: PLAIN, usrname: u}"), "kafka.sasl.usrname", []string{`did you mean "username"?`}},
		{"quoted bool", kafka(`  tls: {enabled: "true"}`), "kafka.tls.enabled", []string{"remove the quotes"}},
		{"bad mechanism", kafka("  sasl: {mechanism: scram-sha-256}"), "kafka.sasl.mechanism", []string{"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"}},
		{"ca file without tls", kafka("  tls: {ca_file: " + f.ca + "}"), "kafka.tls.ca_file", []string{"kafka.tls.enabled is false"}},
		{"missing ca file", kafka("  tls: {enabled: true, ca_file: " + missing + "}"), "kafka.tls.ca_file", []string{"cannot read " + missing, "no such file"}},
		{"ca file not PEM", kafka("  tls: {enabled: true, ca_file: " + notPEM + "}"), "kafka.tls.ca_file", []string{"holds no PEM certificate"}},
		{"cert without key", kafka("  tls: {enabled: true, cert_file: " + f.cert + "}"), "kafka.tls.key_file", []string{"required with kafka.tls.cert_file"}},
		{"key without cert", kafka("  tls: {enabled: true, key_file: " + f.key + "}"), "kafka.tls.cert_file", []string{"required with kafka.tls.key_file"}},
		{"key of another cert", kafka("  tls: {enabled: true, cert_file: " + f.cert + ", key_file: " + f.ecKey + "}"), "kafka.tls.key_file", []string{"does not match"}},
		{"cert not PEM", kafka("  tls: {enabled: true, cert_file: " + notPEM + ", key_file: " + f.key + "}"), "kafka.tls.cert_file", []string{"certificate input"}},
		{"missing key file", kafka("  tls: {enabled: true, cert_file: " + f.cert + ", key_file: " + missing + "}"), "kafka.tls.key_file", []string{"cannot read " + missing}},
		{"expired client certificate", kafka("  tls: {enabled: true, cert_file: " + f.expiredCert + ", key_file: " + f.expiredKey + "}"), "kafka.tls.cert_file", []string{"expired at"}},
		{"client certificate not yet valid", kafka("  tls: {enabled: true, cert_file: " + f.futureCert + ", key_file: " + f.futureKey + "}"), "kafka.tls.cert_file", []string{"not valid before"}},
		{"tls with the embedded broker", withConsumer("kafka: {brokers: [embedded], tls: {enabled: true}}"), "kafka.tls.enabled", []string{"plaintext only"}},
		{"sasl with the embedded broker", withConsumer("kafka: {brokers: [embedded], sasl: {mechanism: PLAIN, username: u, password: p}}"), "kafka.sasl.mechanism", []string{"does not authenticate"}},
		{"credentials without mechanism", kafka("  sasl: {username: u, password: " + secretValue + "}"), "kafka.sasl.mechanism", []string{"credentials are set"}},
		{"scram without username", kafka("  sasl: {mechanism: SCRAM-SHA-512, password: " + secretValue + "}"), "kafka.sasl.username", []string{"required with SCRAM-SHA-512"}},
		{"scram without password", kafka("  sasl: {mechanism: SCRAM-SHA-512, username: u}"), "kafka.sasl.password", []string{"is required (or kafka.sasl.password_file)"}},
		{"password too long", kafka("  sasl: {mechanism: PLAIN, username: u, password: " + strings.Repeat("p", 64*1024+1) + "}"), "kafka.sasl.password", []string{"at most 64KiB (got 65537 bytes)"}},
		{"password and file", kafka("  sasl: {mechanism: PLAIN, username: u, password: " + secretValue + ", password_file: " + pwFile + "}"), "kafka.sasl.password_file", []string{"not both"}},
		{"missing password file", kafka("  sasl: {mechanism: PLAIN, username: u, password_file: " + missing + "}"), "kafka.sasl.password_file", []string{"cannot read"}},
		{"password file a device", kafka("  sasl: {mechanism: PLAIN, username: u, password_file: /dev/zero}"), "kafka.sasl.password_file", []string{"/dev/zero is not a regular file"}},
		{"ca file a fifo", kafka("  tls: {enabled: true, ca_file: " + fifo(t, f.dir) + "}"), "kafka.tls.ca_file", []string{"is not a regular file"}},
		{"empty password file", kafka("  sasl: {mechanism: PLAIN, username: u, password_file: " + empty + "}"), "kafka.sasl.password_file", []string{"is empty"}},
		{"oauth with scram", kafka("  sasl: {mechanism: SCRAM-SHA-256, username: u, password: p, oauth: {client_id: c}}"), "kafka.sasl.oauth", []string{"for OAUTHBEARER, not SCRAM-SHA-256"}},
		{"username with oauthbearer", kafka("  sasl: {mechanism: OAUTHBEARER, username: u}"), "kafka.sasl.username", []string{"use kafka.sasl.oauth"}},
		{"oauth without token url", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {client_id: c, client_secret: s}}"), "kafka.sasl.oauth.token_url", []string{"required"}},
		{"oauth token url not http", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"ftp://idp/token\", client_id: c, client_secret: s}}"), "kafka.sasl.oauth.token_url", []string{"http or https URL"}},
		{"oauth token url with credentials", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://u:" + secretValue + "@idp/token\", client_id: c, client_secret: s}}"), "kafka.sasl.oauth.token_url", []string{"must not hold credentials"}},
		{"oauth token url http to another host", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"http://idp.example.com/token\", client_id: c, client_secret: s}}"), "kafka.sasl.oauth.token_url", []string{"in the clear", "https://", "idp.example.com"}},
		{"oauth token url http to a private address", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"HTTP://10.0.0.7:8080/token\", client_id: c, client_secret: s}}"), "kafka.sasl.oauth.token_url", []string{"in the clear"}},
		{"oauth token url http to a name that merely starts with localhost", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"http://localhost.example.com/token\", client_id: c, client_secret: s}}"), "kafka.sasl.oauth.token_url", []string{"in the clear"}},
		{"oauth token url http to a name that resolves to loopback", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"http://127.0.0.1.nip.io/token\", client_id: c, client_secret: s}}"), "kafka.sasl.oauth.token_url", []string{"in the clear"}},
		{"oauth auth_style unknown", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, auth_style: basic}}"), "kafka.sasl.oauth.auth_style", []string{"must be one of header, body", `"basic"`}},
		{"oauth auth_style empty", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, auth_style: \"\"}}"), "kafka.sasl.oauth.auth_style", []string{"must be one of header, body"}},
		{"oauth auth_style upper case", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, auth_style: Header}}"), "kafka.sasl.oauth.auth_style", []string{"must be one of header, body"}},
		{"oauth auth_style bad without sasl", kafka("  sasl: {oauth: {auth_style: both}}"), "kafka.sasl.oauth.auth_style", []string{"must be one of header, body"}},
		{"oauth without client id", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_secret: s}}"), "kafka.sasl.oauth.client_id", []string{"required"}},
		{"oauth without secret", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c}}"), "kafka.sasl.oauth.client_secret", []string{"client_secret_file"}},
		{"oauth scope with a space", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, scopes: [\"a b\"]}}"), "kafka.sasl.oauth.scopes[0]", []string{"without spaces"}},
		{"oauth extension name", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, extensions: {pool_id: x}}}"), "kafka.sasl.oauth.extensions.pool_id", []string{"letters only"}},
		{"oauth extension auth", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, extensions: {auth: x}}}"), "kafka.sasl.oauth.extensions.auth", []string{`not "auth"`}},
		{"oauth extension value", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, extensions: {pool: \"\"}}}"), "kafka.sasl.oauth.extensions.pool", []string{"not empty"}},
		{"oauth extensions not a mapping", kafka("  sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://idp/token\", client_id: c, client_secret: s, extensions: [a]}}"), "kafka.sasl.oauth.extensions", []string{"expected a mapping"}},
		{"scram ok but bad tls", kafka(scram, "  tls: {enabled: true, ca_file: "+notPEM+"}"), "kafka.tls.ca_file", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", tt.content), noEnv)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
			if strings.Contains(err.Error(), secretValue) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

// fifo makes a named pipe, which nothing ever writes to.
func fifo(t *testing.T, dir string) string {
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A secret reaches no output through the configuration: every fmt verb,
// JSON, and a panic's value print it redacted.
func TestSecretsAreRedacted(t *testing.T) {
	c := Default()
	c.Kafka.SASL = SASL{Mechanism: SASLScramSHA256, Username: "u", Password: secretValue,
		OAuth: OAuth{ClientSecret: secretValue}}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		outs = append(outs, fmt.Sprintf(verb, c), fmt.Sprintf(verb, c.Kafka.SASL.Password))
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	func() {
		defer func() { outs = append(outs, fmt.Sprint(recover())) }()
		panic(c.Kafka.SASL.Password)
	}()
	for _, o := range outs {
		if strings.Contains(o, secretValue) || strings.Contains(o, fmt.Sprintf("%x", secretValue)) {
			t.Errorf("output shows the secret: %s", o)
		}
	}
	if !strings.Contains(outs[0], "[redacted]") {
		t.Errorf("%%v of the config = %s: want [redacted] where the password is", outs[0])
	}
	if got := Secret("").String(); got != "" {
		t.Errorf("an empty secret prints %q, want nothing", got)
	}
}

// A rotated password file is read again: the value is never cached.
func TestPasswordFileIsReadAgain(t *testing.T) {
	dir := t.TempDir()
	p := pki.Write(t, dir, "pw", []byte("first\n"))
	s := SASL{Mechanism: SASLPlain, Username: "u", PasswordFile: p}
	if v, err := s.PasswordValue(); err != nil || v != "first" {
		t.Fatalf("PasswordValue = %q, %v", v, err)
	}
	if err := os.WriteFile(p, []byte("second\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := s.PasswordValue(); err != nil || v != "second" {
		t.Fatalf("after rotation PasswordValue = %q, %v: want second", v, err)
	}
	big := pki.Write(t, dir, "big", []byte(strings.Repeat("x", int(MaxSecretFileSize)+1)))
	if _, err := ReadSecretFile(big); err == nil || !strings.Contains(err.Error(), "larger than 64KiB") {
		t.Errorf("ReadSecretFile of a %d-byte file: %v, want a size error", MaxSecretFileSize+1, err)
	}
}

func TestKafkaFromEnv(t *testing.T) {
	f := writeTLSFiles(t)
	k, err := KafkaFromEnv([]string{"TURBO_KAFKA_TLS_ENABLED=true", "TURBO_KAFKA_TLS_CA_FILE=" + f.ca, "TURBO_KAFKA_SASL_MECHANISM=SCRAM-SHA-512",
		"TURBO_KAFKA_SASL_USERNAME=u", "TURBO_KAFKA_SASL_PASSWORD=" + secretValue, "TURBO_LOG_LEVEL=nonsense", "PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if !k.TLS.Enabled || k.TLS.CAFile != f.ca || k.SASL.Mechanism != SASLScramSHA512 || k.SASL.Password.Reveal() != secretValue || k.Version != Default().Kafka.Version {
		t.Errorf("KafkaFromEnv = %+v", k)
	}
	_, err = KafkaFromEnv([]string{"TURBO_KAFKA_SASL_MECHANISM=SCRAM"})
	checkInvalid(t, err, "kafka.sasl.mechanism", "TURBO_KAFKA_SASL_MECHANISM")
}

// The secured example loads with its password from the environment, and
// says what is missing without it.
func TestSecuredExampleLoads(t *testing.T) {
	path := filepath.Join("..", "examples", "secured", "app.yaml")
	c, err := Load(path, []string{"TURBO_KAFKA_SASL_PASSWORD=" + secretValue})
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	if c.Kafka.SASL.Mechanism != SASLScramSHA512 || !c.Kafka.TLS.Enabled || c.Kafka.SASL.Password.Reveal() != secretValue {
		t.Errorf("kafka %+v", c.Kafka)
	}
	_, err = Load(path, noEnv)
	checkInvalid(t, err, "kafka.sasl.password", "is required (or kafka.sasl.password_file)")
}
