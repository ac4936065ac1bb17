package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

func clientCredentials(scope string) url.Values {
	v := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		v.Set("scope", scope)
	}
	return v
}

// TestTokenVerifiesWithJWKS: a token from /token verifies with the key
// /jwks publishes, and its claims are the ones Kafka's validator needs.
func TestTokenVerifiesWithJWKS(t *testing.T) {
	ti := newTestIssuer(t, nil)
	var tok tokenResponse
	decodeJSON(t, ti.postToken(t, clientCredentials("kafka.read  kafka.write"), true, testClientID, testSecret), http.StatusOK, &tok)
	if tok.TokenType != "Bearer" || tok.ExpiresIn != int64(testLifetime/time.Second) || tok.Scope != "kafka.read kafka.write" {
		t.Fatalf("token response %+v: want Bearer, expires_in %d, scope %q", tok, testLifetime/time.Second, "kafka.read kafka.write")
	}
	var set jwkSet
	ti.get(t, "/jwks", &set)
	if len(set.Keys) != 1 {
		t.Fatalf("JWKS has %d keys, want 1", len(set.Keys))
	}
	header, claims := verifyJWT(t, tok.AccessToken, set)

	if header["alg"] != "RS256" || header["typ"] != "JWT" || header["kid"] != ti.kid {
		t.Fatalf("header %v, want alg RS256, typ JWT, kid %q", header, ti.kid)
	}
	for name, want := range map[string]string{
		"iss": "turbo-test-oidc", "sub": testClientID, "aud": "turbo-test", "scope": "kafka.read kafka.write",
	} {
		if claims[name] != want {
			t.Errorf("claim %s = %#v, want %q", name, claims[name], want)
		}
	}
	iat, nbf, exp := jsonInt(t, claims, "iat"), jsonInt(t, claims, "nbf"), jsonInt(t, claims, "exp")
	if iat != testClock.Unix() || nbf != iat || exp != iat+int64(testLifetime/time.Second) {
		t.Errorf("iat %d nbf %d exp %d; want iat %d = nbf, exp = iat + %s", iat, nbf, exp, testClock.Unix(), testLifetime)
	}
	if jti, _ := claims["jti"].(string); len(jti) < 16 {
		t.Errorf("jti %#v: want a random string of 16 characters or more", claims["jti"])
	}
	if len(claims) != 8 {
		t.Errorf("claims %v: want exactly iss sub aud iat nbf exp jti scope", claims)
	}

	// A second token differs by its jti only (same clock).
	var tok2 tokenResponse
	decodeJSON(t, ti.postToken(t, clientCredentials("kafka.read kafka.write"), true, testClientID, testSecret), http.StatusOK, &tok2)
	_, claims2 := verifyJWT(t, tok2.AccessToken, set)
	if claims2["jti"] == claims["jti"] {
		t.Errorf("two tokens share the jti %v", claims["jti"])
	}
	if got := ti.statsNow(t); got != (stats{TokensIssued: 2, Refused: 0, JWKSServed: 1}) {
		t.Errorf("stats %+v, want 2 issued, 0 refused, 1 JWKS", got)
	}
}

// TestTokenWithoutScopeHasNoScopeClaim: Kafka refuses an empty scope string
// ("scope value must be non-empty") but accepts an absent scope claim.
func TestTokenWithoutScopeHasNoScopeClaim(t *testing.T) {
	ti := newTestIssuer(t, nil)
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {testClientID}, "client_secret": {testSecret}}
	var tok tokenResponse
	decodeJSON(t, ti.postToken(t, form, false, "", ""), http.StatusOK, &tok)
	if tok.Scope != "" {
		t.Fatalf("scope %q in the response, want empty", tok.Scope)
	}
	var set jwkSet
	ti.get(t, "/jwks", &set)
	_, claims := verifyJWT(t, tok.AccessToken, set)
	if v, ok := claims["scope"]; ok {
		t.Fatalf("scope claim %#v present, want none", v)
	}
}

// TestTokenRefusals: each wrong request gets its RFC 6749 error, is counted
// as refused, and no error body carries the secret.
func TestTokenRefusals(t *testing.T) {
	withGrant := func(grant string, extra ...string) url.Values {
		v := url.Values{}
		if grant != "" {
			v.Set("grant_type", grant)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Add(extra[i], extra[i+1])
		}
		return v
	}
	cases := []struct {
		name       string
		form       url.Values
		basic      bool
		id, secret string
		status     int
		code       string
		wwwAuth    bool
	}{
		{"basic wrong secret", clientCredentials(""), true, testClientID, "wrong", 401, "invalid_client", true},
		{"basic unknown client", clientCredentials(""), true, "someone", testSecret, 401, "invalid_client", true},
		{"basic empty secret", clientCredentials(""), true, testClientID, "", 401, "invalid_client", true},
		{"form wrong secret", withGrant("client_credentials", "client_id", testClientID, "client_secret", "wrong"), false, "", "", 401, "invalid_client", false},
		{"form secret with newline", withGrant("client_credentials", "client_id", testClientID, "client_secret", testSecret+"\n"), false, "", "", 401, "invalid_client", false},
		{"no client", clientCredentials(""), false, "", "", 401, "invalid_client", false},
		{"form secret without id", withGrant("client_credentials", "client_secret", testSecret), false, "", "", 401, "invalid_client", false},
		{"both basic and form secret", withGrant("client_credentials", "client_secret", testSecret), true, testClientID, testSecret, 400, "invalid_request", false},
		{"basic user and form id differ", withGrant("client_credentials", "client_id", "other"), true, testClientID, testSecret, 400, "invalid_request", false},
		{"bad grant type", withGrant("password", "username", "u", "password", "p"), true, testClientID, testSecret, 400, "unsupported_grant_type", false},
		{"no grant type", withGrant(""), true, testClientID, testSecret, 400, "invalid_request", false},
		{"repeated grant type", withGrant("client_credentials", "grant_type", "client_credentials"), true, testClientID, testSecret, 400, "invalid_request", false},
	}
	ti := newTestIssuer(t, nil)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := ti.postToken(t, c.form, c.basic, c.id, c.secret)
			var e map[string]string
			decodeJSON(t, resp, c.status, &e)
			if e["error"] != c.code {
				t.Fatalf("error %q, want %q (body %v)", e["error"], c.code, e)
			}
			for _, v := range e {
				if strings.Contains(v, testSecret) {
					t.Fatalf("the error body %v carries the secret", e)
				}
			}
			if got := resp.Header.Get("WWW-Authenticate") != ""; got != c.wwwAuth {
				t.Fatalf("WWW-Authenticate %q, want present=%v", resp.Header.Get("WWW-Authenticate"), c.wwwAuth)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
			}
			if s := ti.statsNow(t); s.Refused != int64(i+1) || s.TokensIssued != 0 {
				t.Fatalf("stats %+v, want %d refused, 0 issued", s, i+1)
			}
		})
	}
}

// TestTokenMethods: only POST reaches /token; the stats and key set are GET.
func TestTokenMethods(t *testing.T) {
	ti := newTestIssuer(t, nil)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/token"}, {http.MethodPost, "/jwks"}, {http.MethodPost, "/stats"}, {http.MethodGet, "/fail"},
	} {
		req, err := http.NewRequest(c.method, ti.srv.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ti.srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405", c.method, c.path, resp.StatusCode)
		}
	}
}

// TestSecretRotation: the secret file is read on every request, so a
// rewritten file takes effect at once and the old secret stops working.
func TestSecretRotation(t *testing.T) {
	ti := newTestIssuer(t, nil)
	var tok tokenResponse
	decodeJSON(t, ti.postToken(t, clientCredentials(""), true, testClientID, testSecret), http.StatusOK, &tok)

	const rotated = "rotated-secret"
	writeSecret(t, ti.secretFile, rotated+"\r\n")
	var e map[string]string
	decodeJSON(t, ti.postToken(t, clientCredentials(""), true, testClientID, testSecret), http.StatusUnauthorized, &e)
	if e["error"] != "invalid_client" {
		t.Fatalf("old secret after rotation: error %q, want invalid_client", e["error"])
	}
	decodeJSON(t, ti.postToken(t, clientCredentials(""), true, testClientID, rotated), http.StatusOK, &tok)

	// Without a trailing newline too.
	writeSecret(t, ti.secretFile, "no-newline")
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {testClientID}, "client_secret": {"no-newline"}}
	decodeJSON(t, ti.postToken(t, form, false, "", ""), http.StatusOK, &tok)
	if s := ti.statsNow(t); s.TokensIssued != 3 || s.Refused != 1 {
		t.Fatalf("stats %+v, want 3 issued, 1 refused", s)
	}

	// A secret file gone after start is a server error that names the
	// file, not a crash.
	if err := os.Remove(ti.secretFile); err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, ti.postToken(t, form, false, "", ""), http.StatusInternalServerError, &e)
	if e["error"] != "server_error" || !strings.Contains(e["error_description"], ti.secretFile) {
		t.Fatalf("missing secret file: %v, want server_error naming %s", e, ti.secretFile)
	}
}

// TestFail: /fail?count=N makes exactly the next N token requests fail with
// 503 temporarily_unavailable, whatever their credentials, counted as
// refused.
func TestFail(t *testing.T) {
	ti := newTestIssuer(t, nil)
	fail := func(count string) *http.Response {
		t.Helper()
		resp, err := ti.srv.Client().Post(ti.srv.URL+"/fail?count="+count, "", nil)
		if err != nil {
			t.Fatalf("POST /fail: %v", err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	var ack map[string]int64
	decodeJSON(t, fail("2"), http.StatusOK, &ack)
	if ack["fail_next"] != 2 {
		t.Fatalf("/fail answered %v, want fail_next 2", ack)
	}
	for i := range 2 {
		var e map[string]string
		decodeJSON(t, ti.postToken(t, clientCredentials(""), true, testClientID, testSecret), http.StatusServiceUnavailable, &e)
		if e["error"] != "temporarily_unavailable" {
			t.Fatalf("request %d: error %q, want temporarily_unavailable", i, e["error"])
		}
	}
	var tok tokenResponse
	decodeJSON(t, ti.postToken(t, clientCredentials(""), true, testClientID, testSecret), http.StatusOK, &tok)
	if s := ti.statsNow(t); s.TokensIssued != 1 || s.Refused != 2 {
		t.Fatalf("stats %+v, want 1 issued, 2 refused", s)
	}

	// A new count replaces the old; 0 cancels.
	decodeJSON(t, fail("5"), http.StatusOK, &ack)
	decodeJSON(t, fail("0"), http.StatusOK, &ack)
	decodeJSON(t, ti.postToken(t, clientCredentials(""), true, testClientID, testSecret), http.StatusOK, &tok)

	for _, bad := range []string{"", "-1", "x", "1.5"} {
		var e map[string]string
		decodeJSON(t, fail(url.QueryEscape(bad)), http.StatusBadRequest, &e)
		if e["error"] != "invalid_request" {
			t.Fatalf("/fail?count=%q: %v, want invalid_request", bad, e)
		}
	}
}

// TestStatsCountsJWKS: every JWKS fetch is counted (Kafka's refreshes show).
func TestStatsCountsJWKS(t *testing.T) {
	ti := newTestIssuer(t, nil)
	for range 3 {
		var set jwkSet
		ti.get(t, "/jwks", &set)
	}
	var raw map[string]json.Number
	ti.get(t, "/stats", &raw)
	if len(raw) != 3 || raw["jwks_served"] != "3" || raw["tokens_issued"] != "0" || raw["refused"] != "0" {
		t.Fatalf("stats %v, want exactly tokens_issued 0, refused 0, jwks_served 3", raw)
	}
}
