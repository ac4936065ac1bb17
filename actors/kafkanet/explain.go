package kafkanet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/turbokafka/turbo/config"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrRefused is wrapped by every *Refusal.
var ErrRefused = errors.New("kafkanet: kafka refused the connection")

// Refusal is a connection failure that retrying will not cure: the broker
// refused turbo's credentials or certificate, turbo refused the broker's
// certificate, or the two disagree on TLS or SASL. Its message names the
// cause and the setting to check, in one line.
type Refusal struct {
	// Cause is the one-line explanation.
	Cause string
	// Err is what the Kafka client returned.
	Err error
}

func (r *Refusal) Error() string { return r.Cause }

// Unwrap returns ErrRefused and the client's error.
func (r *Refusal) Unwrap() []error { return []error{ErrRefused, r.Err} }

// Explain returns a *Refusal when err (from a sarama client, broker or
// consumer group built with Apply, or a franz-go client built with Franz)
// is a refusal as described there, and nil for anything else (and for a
// nil Net), such as an unreachable broker. A bare EOF (the broker hung up),
// or a first request that ran out of time (franz-go retries a connection
// the broker hangs up on until its deadline), is explained only when a
// probe of the brokers finds the cause (see Diagnose); it is nil otherwise.
func (n *Net) Explain(err error) *Refusal {
	if n == nil || err == nil {
		return nil
	}
	if errors.Is(err, kerr.IllegalSaslState) {
		// franz-go keeps the broker's code (sarama drops it: see
		// bareOutOfBrokers); the probe names the listener.
		if cause := n.Diagnose(); cause != "" {
			return &Refusal{Cause: cause, Err: err}
		}
	}
	if cause := n.explain(err); cause != "" {
		return &Refusal{Cause: cause, Err: err}
	}
	if hungUp(err) || (n.k.TLS.Enabled && timedOut(err)) || bareOutOfBrokers(err) || errors.Is(err, context.DeadlineExceeded) || oversizeAnswer(err) {
		if cause := n.Diagnose(); cause != "" {
			return &Refusal{Cause: cause, Err: err}
		}
	}
	return nil
}

func (n *Net) explain(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		header    tls.RecordHeaderError
		tokenErr  *TokenError
		sasl      = string(n.k.SASL.Mechanism)
	)
	switch {
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed), errors.Is(err, kerr.SaslAuthenticationFailed):
		who := "the credentials"
		switch n.k.SASL.Mechanism {
		case config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512:
			who = fmt.Sprintf("user %q", n.k.SASL.Username)
		case config.SASLOAuthBearer:
			who = "the OAuth token of client " + fmt.Sprintf("%q", n.k.SASL.OAuth.ClientID)
		}
		return fmt.Sprintf("the broker refused %s (SASL %s): wrong username or password, or a user the cluster does not know (kafka.sasl)%s", who, sasl, brokerSays(err))
	case errors.Is(err, sarama.ErrUnsupportedSASLMechanism), errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Sprintf("the broker's listener does not offer SASL %s (kafka.sasl.mechanism)%s", sasl, brokerSays(err))
	case (errors.Is(err, sarama.ErrIllegalSASLState) || errors.Is(err, kerr.IllegalSaslState)) && n.k.SASL.Mechanism != config.SASLNone:
		return fmt.Sprintf("the broker's listener does not expect SASL: kafka.sasl.mechanism is %s, but the listener is PLAINTEXT or SSL (clear kafka.sasl.mechanism, or use the SASL listener's port)", sasl)
	case errors.As(err, &tokenErr) && tokenErr.refused():
		return tokenErr.Error()
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("TLS: the broker's certificate (%s) is signed by an authority turbo does not trust: set kafka.tls.ca_file to the CA that signed it%s", certName(unknownCA.Cert), caHint(n.k.TLS))
	case errors.As(err, &hostname):
		return fmt.Sprintf("TLS: the broker's certificate is not valid for %q (%s): connect by a name the certificate holds, or set kafka.tls.server_name", hostname.Host, hostnameDetail(hostname))
	case errors.As(err, &invalid):
		switch invalid.Reason {
		case x509.Expired:
			return fmt.Sprintf("TLS: the broker's certificate (%s) has expired or is not yet valid (%s)", certName(invalid.Cert), invalid.Detail)
		default:
			return fmt.Sprintf("TLS: the broker's certificate (%s) is not acceptable: %v", certName(invalid.Cert), invalid)
		}
	case errors.As(err, &header):
		return "TLS: the broker did not answer in TLS: kafka.tls.enabled is true, but the listener is PLAINTEXT or SASL_PLAINTEXT (turn TLS off, or use the TLS listener's port)"
	}
	msg := err.Error()
	if _, alert, ok := strings.Cut(msg, "remote error: tls: "); ok {
		alert, _, _ = strings.Cut(alert, "\n")
		switch {
		case strings.Contains(alert, "certificate required") || n.k.TLS.CertFile == "":
			// Kafka answers a missing client certificate with "bad
			// certificate", Go's servers with "certificate required".
			return fmt.Sprintf("TLS: the broker requires a client certificate (mTLS): set kafka.tls.cert_file and kafka.tls.key_file (it answered: %s)", alert)
		case strings.Contains(alert, "expired"):
			return fmt.Sprintf("TLS: the broker refused turbo's client certificate as expired (%s; kafka.tls.cert_file)", alert)
		default:
			return fmt.Sprintf("TLS: the broker refused turbo's client certificate (%s): the broker must trust the CA that signed kafka.tls.cert_file", alert)
		}
	}
	// A file that was readable at start is gone or broken.
	for _, key := range []string{"kafka.tls.cert_file: ", "kafka.sasl.password_file: ", "kafka.sasl.oauth.client_secret_file: "} {
		if _, rest, ok := strings.Cut(msg, key); ok {
			rest, _, _ = strings.Cut(rest, "\n")
			return key + rest
		}
	}
	return ""
}

// brokerSays appends the broker's own message, when it sent one.
func brokerSays(err error) string {
	var kerr sarama.KError
	msg := err.Error()
	// sarama wraps the broker's message as "<KError text>: <message>".
	if errors.As(err, &kerr) {
		if _, rest, ok := strings.Cut(msg, kerr.Error()+": "); ok {
			rest, _, _ = strings.Cut(rest, "\n")
			if rest != "" {
				return "; the broker says: " + clip(rest)
			}
		}
	}
	return ""
}

func certName(c *x509.Certificate) string {
	if c == nil {
		return "unknown subject"
	}
	return fmt.Sprintf("subject %q, issuer %q", c.Subject.CommonName, c.Issuer.CommonName)
}

func caHint(t config.TLS) string {
	if t.CAFile == "" {
		return " (it is empty: the system's roots are used)"
	}
	return fmt.Sprintf(" (it is %s)", t.CAFile)
}

func hostnameDetail(h x509.HostnameError) string {
	if h.Certificate == nil {
		return "no certificate"
	}
	names := append([]string{}, h.Certificate.DNSNames...)
	for _, ip := range h.Certificate.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "it names no host"
	}
	return "it is valid for " + strings.Join(names, ", ")
}

// hungUp reports whether err is the broker closing the connection before
// answering: what a TLS listener does to a plaintext client, and a SASL
// listener to a client that skips authentication.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// bareOutOfBrokers reports sarama's "run out of available brokers" without
// the brokers' errors: sarama drops the Kafka error codes a broker answered
// a connection's first requests with (ILLEGAL_SASL_STATE from a listener
// without SASL, UNSUPPORTED_SASL_MECHANISM), keeping only this.
func bareOutOfBrokers(err error) bool {
	return inChain(err, func(e error) bool { return e.Error() == sarama.ErrOutOfBrokers.Error() })
}

// inChain reports whether is holds for err or an error it wraps alone (a
// caller's context around the client's error; not the errors joined with
// it).
func inChain(err error, is func(error) bool) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if is(e) {
			return true
		}
	}
	return false
}

// oversizeAnswer reports franz-go reading a size no Kafka answer has: the
// first bytes of a TLS alert or an HTTP answer, taken for a Kafka one.
func oversizeAnswer(err error) bool {
	return inChain(err, func(e error) bool { return strings.HasPrefix(e.Error(), "invalid large response size") })
}

// timedOut reports a network timeout: what a plaintext listener that waits
// for the rest of a "request" as long as a TLS hello's first bytes say
// gives a TLS client.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Diagnose probes the bootstrap brokers to find why they hang up on turbo:
// a listener that speaks TLS to a client without it, or one that wants SASL
// from a client without it. It returns the cause, or "" when the probes
// find none (or cannot connect).
func (n *Net) Diagnose() string {
	for _, addr := range n.k.Brokers {
		if cause := n.diagnose(addr); cause != "" {
			return cause
		}
	}
	return ""
}

func (n *Net) diagnose(addr string) string {
	tlsOn := speaksTLS(addr)
	switch {
	case !n.k.TLS.Enabled && tlsOn:
		return fmt.Sprintf("the broker at %s speaks TLS, but kafka.tls.enabled is false (an SSL or SASL_SSL listener: set kafka.tls.enabled, and kafka.sasl for SASL_SSL)", addr)
	case n.k.TLS.Enabled && !tlsOn && speaksPlainKafka(addr):
		return fmt.Sprintf("the broker at %s does not speak TLS: kafka.tls.enabled is true, but the listener is PLAINTEXT or SASL_PLAINTEXT (turn TLS off, or use the TLS listener's port)", addr)
	}
	conn, err := n.dial(addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	if mech := n.k.SASL.Mechanism; mech != config.SASLNone {
		code, mechs, answered := saslHandshake(conn, string(mech))
		switch {
		case !answered:
			return ""
		case sarama.KError(code) == sarama.ErrIllegalSASLState:
			return fmt.Sprintf("the broker's listener at %s does not expect SASL: kafka.sasl.mechanism is %s, but the listener is PLAINTEXT or SSL (clear kafka.sasl.mechanism, or use the SASL listener's port)", addr, mech)
		case sarama.KError(code) == sarama.ErrUnsupportedSASLMechanism:
			return fmt.Sprintf("the broker's listener at %s does not offer SASL %s (it offers %s): kafka.sasl.mechanism", addr, mech, strings.Join(mechs, ", "))
		}
		return ""
	}
	mechs, ok := saslMechanisms(conn)
	if !ok {
		return ""
	}
	offers := ""
	if len(mechs) > 0 {
		offers = " (it offers " + strings.Join(mechs, ", ") + ")"
	}
	return fmt.Sprintf("the broker at %s wants SASL authentication%s, but kafka.sasl.mechanism is empty", addr, offers)
}

func (n *Net) dial(addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	if !n.k.TLS.Enabled {
		return d.Dial("tcp", addr)
	}
	tc, err := n.tlsConfig()
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	return tls.DialWithDialer(d, "tcp", addr, tc)
}

// speaksTLS reports whether a TLS handshake with addr gets as far as the
// server's certificate (which is not checked: only the protocol matters).
func speaksTLS(addr string) bool {
	d := &net.Dialer{Timeout: dialTimeout}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a protocol probe; nothing is sent
	if err != nil {
		// A server asking for a client certificate still spoke TLS.
		return strings.Contains(err.Error(), "remote error: tls:")
	}
	conn.Close()
	return true
}

// speaksPlainKafka reports whether addr answers a Kafka request sent
// without TLS.
func speaksPlainKafka(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return false
	}
	defer conn.Close()
	_, _, answered := saslHandshake(conn, "TURBO-PROBE")
	return answered
}

// saslMechanisms sends a SaslHandshake request (v1) for a mechanism no
// broker has, so that a SASL listener refuses it with the list of those it
// offers; ok is false for a listener without SASL (which answers
// ILLEGAL_SASL_STATE) or any failure.
func saslMechanisms(conn net.Conn) (mechs []string, ok bool) {
	code, mechs, answered := saslHandshake(conn, "TURBO-PROBE")
	if !answered || (code != 0 && sarama.KError(code) != sarama.ErrUnsupportedSASLMechanism) {
		return nil, false // ILLEGAL_SASL_STATE: no SASL on this listener
	}
	return mechs, true
}

// saslHandshake sends the probe's SaslHandshake request and returns the
// answer's error code and mechanisms; answered is false when no Kafka
// answer came.
func saslHandshake(conn net.Conn, mech string) (code int16, mechs []string, answered bool) {
	const apiKey, version, correlation = 17, 1, 0x7475
	const clientID = "turbo-probe"
	body := binary.BigEndian.AppendUint16(nil, apiKey)
	body = binary.BigEndian.AppendUint16(body, version)
	body = binary.BigEndian.AppendUint32(body, correlation)
	body = binary.BigEndian.AppendUint16(body, uint16(len(clientID)))
	body = append(body, clientID...)
	body = binary.BigEndian.AppendUint16(body, uint16(len(mech)))
	body = append(body, mech...)
	req := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := conn.Write(append(req, body...)); err != nil {
		return 0, nil, false
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return 0, nil, false
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 10 || n > 1<<16 {
		return 0, nil, false
	}
	resp := make([]byte, n)
	if _, err := io.ReadFull(conn, resp); err != nil || binary.BigEndian.Uint32(resp) != correlation {
		return 0, nil, false
	}
	code = int16(binary.BigEndian.Uint16(resp[4:]))
	count := int32(binary.BigEndian.Uint32(resp[6:]))
	pos := 10
	for i := int32(0); i < count && pos+2 <= len(resp); i++ {
		l := int(binary.BigEndian.Uint16(resp[pos:]))
		pos += 2
		if pos+l > len(resp) {
			break
		}
		mechs = append(mechs, string(resp[pos:pos+l]))
		pos += l
	}
	return code, mechs, true
}
