package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// TLS configures encryption of the connections to the brokers.
type TLS struct {
	// Enabled turns TLS on for every Kafka connection.
	Enabled bool `mapstructure:"enabled"`
	// CAFile is a PEM bundle of the certificate authorities that sign the
	// brokers' certificates; empty means the system's roots.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are the client certificate (PEM) and its key
	// (PEM: PKCS#1, PKCS#8 or EC) for brokers that authenticate clients by
	// certificate (mTLS). Both or neither. They are read again at every
	// connection, so a renewed certificate is used without a restart.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ServerName overrides the name the brokers' certificates are checked
	// against (and the SNI sent); empty means each broker's host.
	ServerName string `mapstructure:"server_name"`
	// InsecureSkipVerify accepts any broker certificate. For tests only: a
	// warning is logged at start.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// SASLMechanism is how turbo authenticates to the brokers.
type SASLMechanism string

// SASL mechanisms. The empty mechanism turns SASL off.
const (
	SASLNone        SASLMechanism = ""
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
	SASLOAuthBearer SASLMechanism = "OAUTHBEARER"
)

// SASL configures authentication to the brokers.
type SASL struct {
	// Mechanism selects the SASL mechanism; empty turns SASL off.
	Mechanism SASLMechanism `mapstructure:"mechanism"`
	// Username and Password are the credentials of PLAIN and SCRAM.
	Username string `mapstructure:"username"`
	Password Secret `mapstructure:"password"`
	// PasswordFile holds the password instead of Password (one of the two).
	// It is read again for every new connection (SCRAM) or restart
	// (PLAIN), so a rotated secret is picked up.
	PasswordFile string `mapstructure:"password_file"`
	// OAuth configures OAUTHBEARER.
	OAuth OAuth `mapstructure:"oauth"`
}

// OAuth configures OAUTHBEARER: an OAuth 2.0 client-credentials flow
// against a token endpoint.
type OAuth struct {
	// TokenURL is the token endpoint (http or https).
	TokenURL string `mapstructure:"token_url"`
	// ClientID and ClientSecret (or ClientSecretFile, read again for every
	// token) authenticate turbo to the token endpoint.
	ClientID         string `mapstructure:"client_id"`
	ClientSecret     Secret `mapstructure:"client_secret"`
	ClientSecretFile string `mapstructure:"client_secret_file"`
	// Scopes are requested with every token.
	Scopes []string `mapstructure:"scopes"`
	// Extensions are SASL extensions sent with the token (KIP-342), e.g.
	// logicalCluster and identityPoolId for Confluent Cloud.
	Extensions map[string]string `mapstructure:"extensions"`
	// AuthStyle is where the client secret goes in a token request: the
	// Authorization header or the form body, never both and never one
	// after the other.
	AuthStyle AuthStyle `mapstructure:"auth_style"`
}

// AuthStyle is how turbo authenticates to the OAuth token endpoint.
type AuthStyle string

// OAuth client authentication styles (RFC 6749 section 2.3.1).
const (
	// AuthStyleHeader sends the client id and secret as HTTP Basic
	// credentials, the style every server must support; the default.
	AuthStyleHeader AuthStyle = "header"
	// AuthStyleBody sends them as the client_id and client_secret form
	// parameters, for servers that accept only those.
	AuthStyleBody AuthStyle = "body"
)

// Secret is a configuration value that must never be shown: it formats as
// "[redacted]" with fmt (every verb), in JSON and as text, so a secret that
// reaches a log line, an error or a panic through the configuration shows
// as that. Reveal returns the value itself.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret itself, for the one place that needs it.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" when the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts %#v too.
func (s Secret) GoString() string { return `config.Secret("` + s.String() + `")` }

// Format redacts every fmt verb, %x and %q included.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// MarshalText redacts encodings that use it (JSON, YAML, zerolog).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Bounds of the security settings.
const (
	// MaxSecretFileSize bounds a password or client-secret file.
	MaxSecretFileSize = 64 * KiB
	// MaxPEMFileSize bounds a CA bundle, certificate or key file (the
	// system's whole root bundle is about 200 KiB).
	MaxPEMFileSize = 4 * MiB
	// MaxScopes and MaxExtensions bound the OAuth lists.
	MaxScopes     = 64
	MaxExtensions = 64
	// maxCredentialLen bounds a username, client id, server name or URL.
	maxCredentialLen = 4096
)

var (
	// Kafka's rules for SASL extension keys and values
	// (OAuthBearerClientInitialResponse); "auth" is reserved.
	extensionKeyPattern   = regexp.MustCompile(`^[A-Za-z]+$`)
	extensionValuePattern = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
)

// ReadSecretFile reads a secret from path: at most MaxSecretFileSize, with
// trailing line breaks removed (an editor's or `echo`'s). Its errors name
// the file, never the content.
func ReadSecretFile(path string) (string, error) {
	b, err := readFileLimited(path, MaxSecretFileSize)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// ReadPEMFile reads a PEM file of at most MaxPEMFileSize.
func ReadPEMFile(path string) ([]byte, error) { return readFileLimited(path, MaxPEMFileSize) }

func readFileLimited(path string, limit ByteSize) ([]byte, error) {
	// Only regular files (symbolic links to them included, as Kubernetes
	// mounts secrets): opening a FIFO would block the load, and reading a
	// device has no end.
	if st, err := os.Stat(path); err != nil {
		return nil, plainPathErr(path, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, plainPathErr(path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, plainPathErr(path, err)
	}
	if int64(len(b)) > int64(limit) {
		return nil, fmt.Errorf("%s is larger than %s", path, limit)
	}
	return b, nil
}

// plainPathErr says "cannot read PATH: REASON" once, without the
// *PathError's repetition of the operation.
func plainPathErr(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot read %s: %w", path, err)
}

// PasswordValue returns the PLAIN or SCRAM password: the file's content
// when PasswordFile is set, else Password.
func (s SASL) PasswordValue() (string, error) {
	if s.PasswordFile != "" {
		return ReadSecretFile(s.PasswordFile)
	}
	return s.Password.Reveal(), nil
}

// ClientSecretValue returns the OAuth client secret: the file's content
// when ClientSecretFile is set, else ClientSecret.
func (o OAuth) ClientSecretValue() (string, error) {
	if o.ClientSecretFile != "" {
		return ReadSecretFile(o.ClientSecretFile)
	}
	return o.ClientSecret.Reveal(), nil
}

// CertPool reads the CA bundle of CAFile; nil (the system's roots) when it
// is empty.
func (t TLS) CertPool() (*x509.CertPool, error) {
	if t.CAFile == "" {
		return nil, nil
	}
	b, err := ReadPEMFile(t.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", t.CAFile, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", t.CAFile)
	}
	return pool, nil
}

// ClientCertificate reads CertFile and KeyFile; nil when neither is set.
// Its errors never include the key.
func (t TLS) ClientCertificate() (*tls.Certificate, error) {
	c, _, err := t.clientCertificate("")
	return c, err
}

// clientCertificate is ClientCertificate that also names the key at fault
// under prefix (kafka.tls, a handler's tls).
func (t TLS) clientCertificate(prefix string) (*tls.Certificate, string, error) {
	if t.CertFile == "" && t.KeyFile == "" {
		return nil, "", nil
	}
	certPEM, err := ReadPEMFile(t.CertFile)
	if err != nil {
		return nil, prefix + ".cert_file", err
	}
	keyPEM, err := ReadPEMFile(t.KeyFile)
	if err != nil {
		return nil, prefix + ".key_file", err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// crypto/tls's messages name the problem (no PEM data in the
		// certificate or key input, a mismatch) and never the key's bytes.
		key := prefix + ".key_file"
		if strings.Contains(err.Error(), "certificate input") {
			key = prefix + ".cert_file"
		}
		return nil, key, fmt.Errorf("%s and %s: %w", t.CertFile, t.KeyFile, err)
	}
	return &c, "", nil
}

// ClientConfig is the client side of these settings for connections
// checked against a server (prefix names the settings in errors): the CA
// bundle read now, the client certificate read again at every handshake, so
// a certificate renewed on disk (cert-manager, a rotated Kubernetes secret)
// is used by the next connection.
func (t TLS) ClientConfig(prefix string) (*tls.Config, error) {
	pool, err := t.CertPool()
	if err != nil {
		return nil, fmt.Errorf("%s.ca_file: %w", prefix, err)
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		RootCAs:            pool,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // the operator's explicit choice, warned about at start
	}
	if t.CertFile != "" {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := t.ClientCertificate()
			if err != nil {
				return nil, fmt.Errorf("%s.cert_file: %w", prefix, err)
			}
			return c, nil
		}
	}
	return tc, nil
}

// IsSet reports whether any setting is given.
func (t TLS) IsSet() bool { return t != TLS{} }

func (t *TLS) validate(embedded bool, now time.Time) error {
	if !t.Enabled {
		for _, f := range []struct{ key, v string }{
			{"kafka.tls.ca_file", t.CAFile}, {"kafka.tls.cert_file", t.CertFile},
			{"kafka.tls.key_file", t.KeyFile}, {"kafka.tls.server_name", t.ServerName},
		} {
			if f.v != "" {
				return fieldErr(f.key, "is set but kafka.tls.enabled is false (set it to true to use TLS)")
			}
		}
		if t.InsecureSkipVerify {
			return fieldErr("kafka.tls.insecure_skip_verify", "is true but kafka.tls.enabled is false")
		}
		return nil
	}
	if embedded {
		return fieldErr("kafka.tls.enabled", `the embedded broker speaks plaintext only: turn TLS off or name real brokers`)
	}
	return t.validateFiles("kafka.tls", now)
}

// validateFiles checks the settings under prefix: the server name, the CA
// bundle, and the client certificate and key (both or neither, readable,
// matching, valid now).
func (t *TLS) validateFiles(prefix string, now time.Time) error {
	if len(t.ServerName) > maxCredentialLen || strings.ContainsAny(t.ServerName, " /\t\r\n") {
		return fieldErr(prefix+".server_name", fmt.Sprintf("must be a host name (got %s)", quoteValue(t.ServerName)))
	}
	if _, err := t.CertPool(); err != nil {
		return fieldErr(prefix+".ca_file", err.Error())
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		return fieldErr(prefix+".key_file", "is required with "+prefix+".cert_file")
	case t.CertFile == "" && t.KeyFile != "":
		return fieldErr(prefix+".cert_file", "is required with "+prefix+".key_file")
	}
	c, key, err := t.clientCertificate(prefix)
	if err != nil {
		return fieldErr(key, err.Error())
	}
	if c != nil && c.Leaf != nil {
		// An expired or not yet valid certificate is refused by every
		// server; say so now rather than as a handshake failure.
		switch {
		case now.After(c.Leaf.NotAfter):
			return fieldErr(prefix+".cert_file", fmt.Sprintf("the certificate in %s expired at %s", t.CertFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339)))
		case now.Before(c.Leaf.NotBefore):
			return fieldErr(prefix+".cert_file", fmt.Sprintf("the certificate in %s is not valid before %s", t.CertFile, c.Leaf.NotBefore.UTC().Format(time.RFC3339)))
		}
	}
	return nil
}

func (s *SASL) validate(embedded bool) error {
	if err := oneOf("kafka.sasl.mechanism", s.Mechanism, SASLNone, SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer); err != nil {
		return err
	}
	userPass := s.Mechanism == SASLPlain || s.Mechanism == SASLScramSHA256 || s.Mechanism == SASLScramSHA512
	o := &s.OAuth
	// Loading fills auth_style with its default, so any other value was
	// written in the file or the environment: checked whatever the
	// mechanism. Empty is what a Kafka section built in Go holds; with
	// OAUTHBEARER it must be said.
	if o.AuthStyle != "" || s.Mechanism == SASLOAuthBearer {
		if err := oneOf("kafka.sasl.oauth.auth_style", o.AuthStyle, AuthStyleHeader, AuthStyleBody); err != nil {
			return err
		}
	}
	oauthSet := o.TokenURL != "" || o.ClientID != "" || o.ClientSecret != "" || o.ClientSecretFile != "" || len(o.Scopes) > 0 || len(o.Extensions) > 0
	switch {
	case s.Mechanism == SASLNone && (s.Username != "" || s.Password != "" || s.PasswordFile != "" || oauthSet):
		return fieldErr("kafka.sasl.mechanism", "is empty (SASL off) but credentials are set: name the mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)")
	case s.Mechanism == SASLNone:
		return nil
	case embedded:
		return fieldErr("kafka.sasl.mechanism", "the embedded broker does not authenticate: leave it empty or name real brokers")
	case !userPass && (s.Username != "" || s.Password != "" || s.PasswordFile != ""):
		return fieldErr("kafka.sasl.username", fmt.Sprintf("username and password are for PLAIN and SCRAM, not %s (use kafka.sasl.oauth)", s.Mechanism))
	case userPass && oauthSet:
		return fieldErr("kafka.sasl.oauth", fmt.Sprintf("is for OAUTHBEARER, not %s", s.Mechanism))
	}
	if userPass {
		switch {
		case s.Username == "":
			return fieldErr("kafka.sasl.username", fmt.Sprintf("is required with %s", s.Mechanism))
		case len(s.Username) > maxCredentialLen:
			return fieldErr("kafka.sasl.username", fmt.Sprintf("at most %d bytes", maxCredentialLen))
		}
		return secretSource("kafka.sasl.password", s.Password, "kafka.sasl.password_file", s.PasswordFile)
	}
	switch u, err := url.Parse(o.TokenURL); {
	case o.TokenURL == "":
		return fieldErr("kafka.sasl.oauth.token_url", "is required with OAUTHBEARER")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(o.TokenURL) > maxCredentialLen:
		return fieldErr("kafka.sasl.oauth.token_url", fmt.Sprintf("must be an http or https URL (got %s)", quoteValue(o.TokenURL)))
	case u.User != nil:
		// The URL is logged with every token failure.
		return fieldErr("kafka.sasl.oauth.token_url", "must not hold credentials: use client_id and client_secret")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		// Every token request carries the client secret.
		return fieldErr("kafka.sasl.oauth.token_url", fmt.Sprintf("http:// would send the client secret in the clear: use https://, or a loopback host (localhost, 127.0.0.1, ::1) (got %s)", quoteValue(u.Host)))
	}
	switch {
	case o.ClientID == "":
		return fieldErr("kafka.sasl.oauth.client_id", "is required with OAUTHBEARER")
	case len(o.ClientID) > maxCredentialLen:
		return fieldErr("kafka.sasl.oauth.client_id", fmt.Sprintf("at most %d bytes", maxCredentialLen))
	case len(o.Scopes) > MaxScopes:
		return fieldErr("kafka.sasl.oauth.scopes", fmt.Sprintf("at most %d scopes (got %d)", MaxScopes, len(o.Scopes)))
	case len(o.Extensions) > MaxExtensions:
		return fieldErr("kafka.sasl.oauth.extensions", fmt.Sprintf("at most %d extensions (got %d)", MaxExtensions, len(o.Extensions)))
	}
	for i, sc := range o.Scopes {
		if sc == "" || len(sc) > maxCredentialLen || strings.ContainsAny(sc, " \t\r\n\"\\") {
			return fieldErr(fmt.Sprintf("kafka.sasl.oauth.scopes[%d]", i), fmt.Sprintf("must be a non-empty scope without spaces, quotes or backslashes (got %s)", quoteValue(sc)))
		}
	}
	keys := make([]string, 0, len(o.Extensions))
	for k := range o.Extensions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		key := "kafka.sasl.oauth.extensions." + quoteKey(k)
		if !extensionKeyPattern.MatchString(k) || k == "auth" {
			return fieldErr(key, `a SASL extension's name is letters only, and not "auth"`)
		}
		if v := o.Extensions[k]; len(v) > maxCredentialLen || !extensionValuePattern.MatchString(v) {
			return fieldErr(key, "a SASL extension's value is printable ASCII, spaces and line breaks, not empty")
		}
	}
	return secretSource("kafka.sasl.oauth.client_secret", o.ClientSecret, "kafka.sasl.oauth.client_secret_file", o.ClientSecretFile)
}

// loopback reports whether host (without port or brackets) is this machine
// for certain: "localhost", or an address in 127.0.0.0/8 or ::1. Other
// names are not resolved: what they resolve to can change after the check.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secretSource checks that exactly one of a secret and its file is given,
// that the secret is at most as large as a secret file may be, and that the
// file can be read. Its messages never show the secret.
func secretSource(key string, v Secret, fileKey, file string) error {
	switch {
	case v != "" && file != "":
		return fieldErr(fileKey, fmt.Sprintf("give %s or %s, not both", key, fileKey))
	case v == "" && file == "":
		return fieldErr(key, fmt.Sprintf("is required (or %s)", fileKey))
	case len(v) > int(MaxSecretFileSize):
		return fieldErr(key, fmt.Sprintf("at most %s (got %d bytes)", MaxSecretFileSize, len(v)))
	case file != "":
		if _, err := ReadSecretFile(file); err != nil {
			return fieldErr(fileKey, err.Error())
		}
	}
	return nil
}

// Bounds of a control token (http.control_token_file), after surrounding
// white space is trimmed: at least 16 bytes (128 bits when drawn at random,
// e.g. `openssl rand -hex 32`), at most 4 KiB.
const (
	MinControlToken = 16
	MaxControlToken = 4 << 10
)

// ReadControlToken reads a control token file: a regular file whose
// content, less surrounding white space, is MinControlToken to
// MaxControlToken bytes. An error names the file, never what it holds.
func ReadControlToken(path string) ([]byte, error) {
	b, err := readFileLimited(path, MaxControlToken)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinControlToken {
		clear(b)
		return nil, fmt.Errorf("%s holds a token shorter than %d bytes (white space around it does not count)", path, MinControlToken)
	}
	return b, nil
}
