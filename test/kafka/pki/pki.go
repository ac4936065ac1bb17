// Command pki writes the throwaway certificates and keys of kafka.sh's
// secured listeners into a directory: a CA, the broker's certificate, client
// certificates signed by that CA (RSA with its key as PKCS#8 and PKCS#1, and
// EC), an unrelated second CA with a client of its own, and an expired client
// certificate of the first CA. Everything is PEM, generated anew on every
// call, and never committed.
//
//	go run ./test/kafka/pki -dir DIR
//
// Private keys are written with mode 0600; nothing is printed.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File is one PEM file of the set; Secret files hold a private key.
type File struct {
	Name   string
	Data   []byte
	Secret bool
}

const (
	// validity is how long the certificates (but the expired one) stay
	// valid: far longer than any test run, as restarts reuse them.
	validity = 30 * 24 * time.Hour
	// backdate covers clocks a little behind this one.
	backdate = time.Hour
	// rsaBits is the size of the RSA keys, the smallest Java accepts by
	// default.
	rsaBits = 2048
)

// The names of the files Generate returns, which kafka.sh and the tests use.
const (
	CAFile                = "ca.pem"
	BrokerFile            = "broker.pem" // the broker's certificate, then the CA's
	BrokerKeyFile         = "broker-key.pem"
	ClientFile            = "client.pem"
	ClientKeyFile         = "client-key.pem" // PKCS#8
	ClientKeyPKCS1File    = "client-key-pkcs1.pem"
	ClientECFile          = "client-ec.pem"
	ClientECKeyFile       = "client-ec-key.pem" // SEC 1, "EC PRIVATE KEY"
	OtherCAFile           = "other-ca.pem"
	OtherClientFile       = "other-client.pem"
	OtherClientKeyFile    = "other-client-key.pem"
	ExpiredClientFile     = "expired-client.pem"
	ExpiredClientKeyFile  = "expired-client-key.pem"
	brokerCommonName      = "localhost"
	clientCommonName      = "turbo-client"
	otherClientCommonName = "turbo-other-client"
)

// issuer is a CA: its certificate and the key that signs with it.
type issuer struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// Generate makes the whole set, valid from now (the expired client
// certificate ended a day before now).
func Generate(now time.Time) ([]File, error) {
	var files []File
	add := func(name string, data []byte, secret bool) {
		files = append(files, File{Name: name, Data: data, Secret: secret})
	}

	ca, err := newCA("turbo-test-ca", now)
	if err != nil {
		return nil, err
	}
	other, err := newCA("turbo-test-other-ca", now)
	if err != nil {
		return nil, err
	}
	add(CAFile, certPEM(ca.cert), false)
	add(OtherCAFile, certPEM(other.cert), false)

	// The broker: an RSA key, as most clusters have; SANs for both names a
	// client may dial.
	brokerKey, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return nil, fmt.Errorf("pki: broker key: %w", err)
	}
	broker, err := ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: brokerCommonName, Organization: []string{"turbo-test"}},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, brokerKey)
	if err != nil {
		return nil, err
	}
	brokerKeyPEM, err := pkcs8PEM(brokerKey)
	if err != nil {
		return nil, err
	}
	add(BrokerFile, append(certPEM(broker), certPEM(ca.cert)...), false)
	add(BrokerKeyFile, brokerKeyPEM, true)

	// The client of the good CA, RSA: its key in both encodings clients meet.
	clientKey, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return nil, fmt.Errorf("pki: client key: %w", err)
	}
	client, err := ca.sign(clientTemplate(clientCommonName, now.Add(-backdate), now.Add(validity)), clientKey)
	if err != nil {
		return nil, err
	}
	clientKeyPEM, err := pkcs8PEM(clientKey)
	if err != nil {
		return nil, err
	}
	add(ClientFile, certPEM(client), false)
	add(ClientKeyFile, clientKeyPEM, true)
	add(ClientKeyPKCS1File, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(clientKey)}), true)

	// The same client with an EC key, written as SEC 1 (what openssl ecparam
	// gives).
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: client EC key: %w", err)
	}
	clientEC, err := ca.sign(clientTemplate(clientCommonName, now.Add(-backdate), now.Add(validity)), ecKey)
	if err != nil {
		return nil, err
	}
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		return nil, fmt.Errorf("pki: client EC key: %w", err)
	}
	add(ClientECFile, certPEM(clientEC), false)
	add(ClientECKeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}), true)

	// A client the broker must refuse: signed by the other CA.
	cert, keyPEM, err := other.client(otherClientCommonName, now.Add(-backdate), now.Add(validity))
	if err != nil {
		return nil, err
	}
	add(OtherClientFile, certPEM(cert), false)
	add(OtherClientKeyFile, keyPEM, true)

	// And one signed by the good CA but expired a day ago.
	cert, keyPEM, err = ca.client(clientCommonName, now.Add(-2*24*time.Hour), now.Add(-24*time.Hour))
	if err != nil {
		return nil, err
	}
	add(ExpiredClientFile, certPEM(cert), false)
	add(ExpiredClientKeyFile, keyPEM, true)
	return files, nil
}

// Write writes files into dir (created 0700 if missing): secrets 0600, the
// rest 0644. It refuses to overwrite, so a set is never half replaced.
func Write(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	for _, f := range files {
		mode := os.FileMode(0o644)
		if f.Secret {
			mode = 0o600
		}
		out, err := os.OpenFile(filepath.Join(dir, f.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return fmt.Errorf("pki: %w", err)
		}
		_, err = out.Write(f.Data)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pki: writing %s: %w", f.Name, err)
		}
	}
	return nil
}

func newCA(name string, now time.Time) (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: %s key: %w", name, err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"turbo-test"}},
		NotBefore:             now.Add(-3 * 24 * time.Hour), // before the expired client's start
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", name, err)
	}
	return &issuer{cert: cert, key: key}, nil
}

// sign issues tmpl for the public half of key.
func (ca *issuer) sign(tmpl *x509.Certificate, key crypto.Signer) (*x509.Certificate, error) {
	var err error
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("pki: %s signed by %s: %w", tmpl.Subject.CommonName, ca.cert.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", tmpl.Subject.CommonName, err)
	}
	return cert, nil
}

// client issues a client certificate with a new EC key, returned as PKCS#8.
func (ca *issuer) client(name string, notBefore, notAfter time.Time) (*x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s key: %w", name, err)
	}
	cert, err := ca.sign(clientTemplate(name, notBefore, notAfter), key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := pkcs8PEM(key)
	if err != nil {
		return nil, nil, err
	}
	return cert, keyPEM, nil
}

func clientTemplate(name string, notBefore, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{"turbo-test"}},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	return n, nil
}

func certPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// pkcs8PEM encodes key as an unencrypted PKCS#8 "PRIVATE KEY" block, the
// form Kafka's PEM key stores read.
func pkcs8PEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encoding a key as PKCS#8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// errUsage is returned for bad command lines.
var errUsage = errors.New("usage: pki -dir DIR")
