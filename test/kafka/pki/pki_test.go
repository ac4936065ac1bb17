package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The set kafka.sh and the secured tests rely on: every key matches its
// certificate in each encoding, the broker's certificate verifies for both
// names a client dials, the good clients chain to the CA, and the negative
// ones fail for the reason their name gives.
func TestGenerate(t *testing.T) {
	now := time.Now()
	files, err := Generate(now)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]byte{}
	for _, f := range files {
		byName[f.Name] = f.Data
		block, _ := pem.Decode(f.Data)
		if block == nil {
			t.Fatalf("%s: not PEM", f.Name)
		}
		isKey := block.Type != "CERTIFICATE"
		if isKey != f.Secret {
			t.Errorf("%s: PEM type %q but Secret=%t", f.Name, block.Type, f.Secret)
		}
	}

	pairs := []struct{ cert, key, keyType string }{
		{BrokerFile, BrokerKeyFile, "PRIVATE KEY"},
		{ClientFile, ClientKeyFile, "PRIVATE KEY"},
		{ClientFile, ClientKeyPKCS1File, "RSA PRIVATE KEY"},
		{ClientECFile, ClientECKeyFile, "EC PRIVATE KEY"},
		{OtherClientFile, OtherClientKeyFile, "PRIVATE KEY"},
		{ExpiredClientFile, ExpiredClientKeyFile, "PRIVATE KEY"},
	}
	leaf := map[string]*x509.Certificate{}
	for _, p := range pairs {
		pair, err := tls.X509KeyPair(byName[p.cert], byName[p.key])
		if err != nil {
			t.Errorf("%s with %s: %v", p.cert, p.key, err)
			continue
		}
		if block, _ := pem.Decode(byName[p.key]); block.Type != p.keyType {
			t.Errorf("%s: PEM type %q, want %q", p.key, block.Type, p.keyType)
		}
		if leaf[p.cert], err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(pemBlocks(t, byName[BrokerFile])); n != 2 {
		t.Errorf("%s holds %d certificates, want the broker's and the CA's", BrokerFile, n)
	}

	roots := pool(t, byName[CAFile])
	otherRoots := pool(t, byName[OtherCAFile])
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf[BrokerFile].Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("broker certificate for %s: %v", name, err)
		}
		var unknown x509.UnknownAuthorityError
		if _, err := leaf[BrokerFile].Verify(x509.VerifyOptions{DNSName: name, Roots: otherRoots, CurrentTime: now}); !errors.As(err, &unknown) {
			t.Errorf("broker certificate against the other CA: %v, want an unknown authority", err)
		}
	}

	clientAuth := func(cert string, roots *x509.CertPool, at time.Time) error {
		_, err := leaf[cert].Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	for _, cert := range []string{ClientFile, ClientECFile} {
		if err := clientAuth(cert, roots, now); err != nil {
			t.Errorf("%s: %v", cert, err)
		}
	}
	if err := clientAuth(OtherClientFile, otherRoots, now); err != nil {
		t.Errorf("%s against its own CA: %v", OtherClientFile, err)
	}
	var unknown x509.UnknownAuthorityError
	if err := clientAuth(OtherClientFile, roots, now); !errors.As(err, &unknown) {
		t.Errorf("%s against the CA: %v, want an unknown authority", OtherClientFile, err)
	}
	var invalid x509.CertificateInvalidError
	if err := clientAuth(ExpiredClientFile, roots, now); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Errorf("%s now: %v, want expired", ExpiredClientFile, err)
	}
	if err := clientAuth(ExpiredClientFile, roots, now.Add(-36*time.Hour)); err != nil {
		t.Errorf("%s while it was valid: %v (it should fail only for its dates)", ExpiredClientFile, err)
	}
}

// Write makes keys readable by their owner only and never overwrites.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	files := []File{{Name: "a.pem", Data: []byte("cert")}, {Name: "a-key.pem", Data: []byte("key"), Secret: true}}
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{".": 0o700 | os.ModeDir, "a.pem": 0o644, "a-key.pem": 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, st.Mode(), want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a-key.pem")); string(got) != "key" {
		t.Errorf("a-key.pem holds %q", got)
	}
	if err := Write(dir, files); !errors.Is(err, os.ErrExist) {
		t.Errorf("second Write: %v, want an error wrapping os.ErrExist", err)
	}
}

// The command writes the set and refuses a command line without -dir.
func TestRun(t *testing.T) {
	if err := run(nil); !errors.Is(err, errUsage) {
		t.Errorf("run without -dir: %v, want errUsage", err)
	}
	dir := filepath.Join(t.TempDir(), "tls")
	if err := run([]string{"-dir", dir}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CAFile, ClientKeyPKCS1File, ExpiredClientKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

func pemBlocks(t *testing.T, data []byte) []*pem.Block {
	t.Helper()
	var out []*pem.Block
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}
		out = append(out, b)
	}
}

func pool(t *testing.T, data []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data) {
		t.Fatal("no certificate in CA PEM")
	}
	return p
}
