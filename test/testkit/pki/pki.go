// Package pki makes throwaway certificate authorities and certificates for
// tests: PEM files written into a test's temporary directory, never
// committed.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that issues certificates.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// PEM is the CA's certificate, PEM-encoded.
	PEM []byte
}

// KeyFormat is how a private key is encoded.
type KeyFormat int

// Key formats.
const (
	PKCS8 KeyFormat = iota // RSA key, "PRIVATE KEY"
	PKCS1                  // RSA key, "RSA PRIVATE KEY"
	EC                     // P-256 key, "EC PRIVATE KEY"
)

// Pair is an issued certificate and its key, PEM-encoded.
type Pair struct {
	Cert, Key []byte
}

// NewCA makes a self-signed CA called name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("CA certificate: %v", err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Options shape an issued certificate.
type Options struct {
	// CommonName is the subject's name.
	CommonName string
	// Hosts are DNS names or IP addresses the certificate is valid for
	// (server certificates).
	Hosts []string
	// NotBefore and NotAfter default to an hour ago and a day ahead.
	NotBefore, NotAfter time.Time
	// Format is the key's encoding.
	Format KeyFormat
}

// Issue signs a certificate for a server (Hosts set) or a client.
func (ca *CA) Issue(t testing.TB, o Options) Pair {
	t.Helper()
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	var key crypto.Signer
	var err error
	if o.Format == EC {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("certificate: %v", err)
	}
	var block *pem.Block
	switch o.Format {
	case PKCS1:
		block = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))}
	case EC:
		b, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatalf("EC key: %v", err)
		}
		block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: b}
	default:
		b, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatalf("PKCS#8 key: %v", err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: b}
	}
	return Pair{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key: pem.EncodeToMemory(block)}
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

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("serial: %v", err)
	}
	return n
}
