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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/turbokafka/turbo/test/testkit/pki"
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

// Generate makes the whole set, valid from now (the expired client
// certificate ended a day before now).
func Generate(now time.Time) ([]File, error) {
	var files []File
	add := func(name string, data []byte, secret bool) {
		files = append(files, File{Name: name, Data: data, Secret: secret})
	}
	// The CAs begin before the expired client's start.
	ca, err := pki.NewCA("turbo-test-ca", now.Add(-3*24*time.Hour), now.Add(validity))
	if err != nil {
		return nil, err
	}
	other, err := pki.NewCA("turbo-test-other-ca", now.Add(-3*24*time.Hour), now.Add(validity))
	if err != nil {
		return nil, err
	}
	add(CAFile, ca.PEM, false)
	add(OtherCAFile, other.PEM, false)

	valid := func(name string, format pki.KeyFormat, hosts ...string) pki.Options {
		return pki.Options{CommonName: name, Hosts: hosts, NotBefore: now.Add(-backdate), NotAfter: now.Add(validity), Format: format}
	}
	for _, c := range []struct {
		ca                   *pki.CA
		o                    pki.Options
		certFile, key, pkcs1 string
		chainWithCACert      bool
	}{
		// The broker: an RSA key, as most clusters have; SANs for every
		// name a client may dial.
		{ca, valid(brokerCommonName, pki.PKCS8, "localhost", "127.0.0.1", "::1"), BrokerFile, BrokerKeyFile, "", true},
		// The client of the good CA, its RSA key in both encodings clients
		// meet, and the same client with an EC key.
		{ca, valid(clientCommonName, pki.PKCS8), ClientFile, ClientKeyFile, ClientKeyPKCS1File, false},
		{ca, valid(clientCommonName, pki.EC), ClientECFile, ClientECKeyFile, "", false},
		// A client the broker must refuse: signed by the other CA.
		{other, valid(otherClientCommonName, pki.ECPKCS8), OtherClientFile, OtherClientKeyFile, "", false},
		// And one signed by the good CA but expired a day ago.
		{ca, pki.Options{CommonName: clientCommonName, NotBefore: now.Add(-2 * 24 * time.Hour), NotAfter: now.Add(-24 * time.Hour), Format: pki.ECPKCS8},
			ExpiredClientFile, ExpiredClientKeyFile, "", false},
	} {
		p, err := c.ca.Issue(c.o)
		if err != nil {
			return nil, err
		}
		if c.chainWithCACert {
			p.Cert = append(p.Cert, c.ca.PEM...)
		}
		add(c.certFile, p.Cert, false)
		add(c.key, p.Key, true)
		if c.pkcs1 != "" {
			add(c.pkcs1, p.KeyPKCS1, true)
		}
	}
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

// errUsage is returned for bad command lines.
var errUsage = errors.New("usage: pki -dir DIR")
