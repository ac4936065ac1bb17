// Package pki makes throwaway certificate authorities and certificates for
// tests and for the test broker's listeners (test/kafka/pki): PEM, made anew
// each time, never committed.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// RSABits is the size of the RSA keys, the smallest Java accepts by default.
const RSABits = 2048

// CA is a certificate authority that issues certificates.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// PEM is the CA's certificate, PEM-encoded.
	PEM []byte
}

// KeyFormat is how an issued certificate's private key is made and encoded.
type KeyFormat int

// Key formats.
const (
	PKCS8   KeyFormat = iota // RSA key, "PRIVATE KEY" (what Kafka's PEM key stores read)
	PKCS1                    // RSA key, "RSA PRIVATE KEY"
	EC                       // P-256 key, SEC 1 "EC PRIVATE KEY" (what openssl ecparam gives)
	ECPKCS8                  // P-256 key, "PRIVATE KEY"
)

// Options shape an issued certificate.
type Options struct {
	// CommonName is the subject's name.
	CommonName string
	// Hosts are the DNS names and IP addresses of a server certificate;
	// without them the certificate is for a client.
	Hosts []string
	// NotBefore and NotAfter default to an hour ago and a day ahead.
	NotBefore, NotAfter time.Time
	// Format is the key's kind and encoding.
	Format KeyFormat
}

// Pair is an issued certificate and its key, PEM-encoded.
type Pair struct {
	Cert, Key []byte
	// KeyPKCS1 is the same key as PKCS#1, for RSA keys.
	KeyPKCS1 []byte
}

// NewCA makes a self-signed CA called name, valid from notBefore to
// notAfter, with an EC key.
func NewCA(name string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: %s key: %w", name, err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"turbo-test"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	cert, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: CertPEM(cert)}, nil
}

// Issue signs a certificate for a server (Hosts set) or a client.
func (ca *CA) Issue(o Options) (Pair, error) {
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	var key crypto.Signer
	var err error
	if o.Format == EC || o.Format == ECPKCS8 {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		key, err = rsa.GenerateKey(rand.Reader, RSABits)
	}
	if err != nil {
		return Pair{}, fmt.Errorf("pki: %s key: %w", o.CommonName, err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: o.CommonName, Organization: []string{"turbo-test"}},
		NotBefore:   o.NotBefore,
		NotAfter:    o.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(o.Hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	cert, err := sign(tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return Pair{}, err
	}
	keyPEM, err := encodeKey(key, o.Format)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{Cert: CertPEM(cert), Key: keyPEM}
	if rk, ok := key.(*rsa.PrivateKey); ok {
		p.KeyPKCS1 = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})
	}
	return p, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	tmpl.SerialNumber = n
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("pki: %s signed by %s: %w", tmpl.Subject.CommonName, parent.Subject.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

func encodeKey(key crypto.Signer, f KeyFormat) ([]byte, error) {
	switch f {
	case PKCS1:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))}), nil
	case EC:
		der, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
		if err != nil {
			return nil, fmt.Errorf("pki: EC key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	default:
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("pki: encoding a key as PKCS#8: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
	}
}

// CertPEM encodes a certificate as PEM.
func CertPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// TestCA is NewCA for a test (valid from an hour ago for a day), failing it
// on error.
func TestCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestIssue is Issue for a test, failing it on error.
func (ca *CA) TestIssue(t testing.TB, o Options) Pair {
	t.Helper()
	p, err := ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Write writes data to name in dir (mode 0600) and returns the path.
func Write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatalf("writing %s: %v", p, err)
	}
	return p
}

// TestServerTLS issues a server certificate named name for hosts and
// returns a server configuration with it that requires a client
// certificate signed by ca (mTLS), failing the test on error.
func (ca *CA) TestServerTLS(t testing.TB, name string, hosts ...string) *tls.Config {
	t.Helper()
	p := ca.TestIssue(t, Options{CommonName: name, Hosts: hosts})
	cert, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}
