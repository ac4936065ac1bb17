package main

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testClock is the fixed time tokens are issued at in handler tests.
var testClock = time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)

const (
	testClientID = "turbo-client"
	// The secret has characters golang.org/x/oauth2 escapes in the Basic
	// header (url.QueryEscape), to prove they are decoded.
	testSecret   = "s3cr+t/=&%:é"
	testLifetime = 10 * time.Second
)

// testIssuer is an Issuer behind an httptest server, with its secret file.
type testIssuer struct {
	*Issuer
	srv        *httptest.Server
	secretFile string
}

// newTestIssuer starts an issuer whose clock is now (nil: testClock) and
// whose secret file holds secret followed by a newline.
func newTestIssuer(t *testing.T, now func() time.Time) *testIssuer {
	t.Helper()
	if now == nil {
		now = func() time.Time { return testClock }
	}
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	writeSecret(t, secretFile, testSecret+"\n")
	is, err := newIssuer(issuerConfig{
		Issuer:           "turbo-test-oidc",
		Audience:         "turbo-test",
		ClientID:         testClientID,
		ClientSecretFile: secretFile,
		Lifetime:         testLifetime,
	}, now, log.New(testWriter{t}, "oidc: ", 0))
	if err != nil {
		t.Fatalf("newIssuer: %v", err)
	}
	srv := httptest.NewServer(is.Handler())
	t.Cleanup(srv.Close)
	return &testIssuer{Issuer: is, srv: srv, secretFile: secretFile}
}

func writeSecret(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("writing the secret file: %v", err)
	}
}

// testWriter sends the issuer's log to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// postToken sends a token request with form fields and, when basic is
// true, HTTP Basic credentials escaped the way golang.org/x/oauth2 does.
func (ti *testIssuer) postToken(t *testing.T, form url.Values, basic bool, id, secret string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ti.srv.URL+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	resp, err := ti.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST /token: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// get fetches path and decodes its JSON body into v.
func (ti *testIssuer) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := ti.srv.Client().Get(ti.srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decoding: %v", path, err)
	}
}

func (ti *testIssuer) statsNow(t *testing.T) stats {
	t.Helper()
	var s stats
	ti.get(t, "/stats", &s)
	return s
}

// decodeJSON decodes resp's body after checking its status.
func decodeJSON(t *testing.T, resp *http.Response, wantStatus int, v any) {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	if resp.StatusCode != wantStatus {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, wantStatus, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
}

// verifyJWT checks token the way a resource server does: the key comes from
// the JWK Set by the header's kid, the signature is RS256. It returns the
// header and the claims as generic JSON, so that types (numbers, strings)
// are checked as a JSON consumer sees them.
func verifyJWT(t *testing.T, token string, set jwkSet) (map[string]any, map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	var header, claims map[string]any
	decodePart(t, parts[0], &header)
	decodePart(t, parts[1], &claims)

	pub := publicKey(t, set, header["kid"])
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		t.Fatalf("signature is not base64url: %v", err)
	}
	if err := verifyRS256(parts[0]+"."+parts[1], sig, pub); err != nil {
		t.Fatalf("signature does not verify with the JWKS key: %v", err)
	}
	return header, claims
}

// verifyRS256 checks an RS256 signature of signingInput.
func verifyRS256(signingInput string, sig []byte, pub *rsa.PublicKey) error {
	digest := sha256.Sum256([]byte(signingInput))
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig)
}

func decodePart(t *testing.T, part string, v any) {
	t.Helper()
	raw, err := b64.DecodeString(part)
	if err != nil {
		t.Fatalf("token part %q is not base64url without padding: %v", part, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("token part %s is not JSON: %v", raw, err)
	}
}

// publicKey finds kid in set and rebuilds its RSA key.
func publicKey(t *testing.T, set jwkSet, kid any) *rsa.PublicKey {
	t.Helper()
	for _, k := range set.Keys {
		if k.Kid != kid {
			continue
		}
		if k.Kty != "RSA" || k.Alg != "RS256" || k.Use != "sig" {
			t.Fatalf("key %q: kty %q alg %q use %q, want RSA RS256 sig", k.Kid, k.Kty, k.Alg, k.Use)
		}
		n, err := b64.DecodeString(k.N)
		if err != nil {
			t.Fatalf("n: %v", err)
		}
		e, err := b64.DecodeString(k.E)
		if err != nil {
			t.Fatalf("e: %v", err)
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() != 2048 {
			t.Fatalf("key size %d bits, want 2048", pub.N.BitLen())
		}
		return pub
	}
	t.Fatalf("no key %v in the JWKS %+v", kid, set)
	return nil
}

// jsonInt returns claim name of claims as an integer, failing unless it is
// a JSON number without fraction (a NumericDate as jose4j reads it).
func jsonInt(t *testing.T, claims map[string]any, name string) int64 {
	t.Helper()
	n, ok := claims[name].(json.Number)
	if !ok {
		t.Fatalf("claim %s = %#v, want a JSON number", name, claims[name])
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatalf("claim %s = %s, want an integer: %v", name, n, err)
	}
	return v
}
