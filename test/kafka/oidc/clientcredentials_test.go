package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ccConfig is the client turbo builds: golang.org/x/oauth2/clientcredentials
// with the default AuthStyleAutoDetect.
func ccConfig(ti *testIssuer, secret string, scopes ...string) *clientcredentials.Config {
	return &clientcredentials.Config{
		ClientID:     testClientID,
		ClientSecret: secret,
		TokenURL:     ti.srv.URL + "/token",
		Scopes:       scopes,
	}
}

func ccContext(t *testing.T, ti *testIssuer) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return context.WithValue(ctx, oauth2.HTTPClient, ti.srv.Client())
}

// TestClientCredentialsEndToEnd: golang.org/x/oauth2/clientcredentials gets a
// token with scopes, over the header style its auto-detection tries first,
// and the token verifies with the JWKS.
func TestClientCredentialsEndToEnd(t *testing.T) {
	ti := newTestIssuer(t, time.Now)
	before := time.Now()
	tok, err := ccConfig(ti, testSecret, "kafka.read", "kafka.write").Token(ccContext(t, ti))
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	// Not tok.Valid(): it is false for a token living 10 s or less (see
	// TestReuseTokenSourceWithShortLifetime).
	if tok.TokenType != "Bearer" || tok.AccessToken == "" {
		t.Fatalf("token type %q, access token %q: want a Bearer token", tok.TokenType, tok.AccessToken)
	}
	if tok.Extra("scope") != "kafka.read kafka.write" {
		t.Fatalf("response scope %v, want %q", tok.Extra("scope"), "kafka.read kafka.write")
	}
	// oauth2 sets Expiry from expires_in on receipt.
	if lo, hi := before.Add(testLifetime), time.Now().Add(testLifetime); tok.Expiry.Before(lo.Add(-time.Second)) || tok.Expiry.After(hi.Add(time.Second)) {
		t.Fatalf("expiry %s, want now + %s (%s .. %s)", tok.Expiry, testLifetime, lo, hi)
	}

	var set jwkSet
	ti.get(t, "/jwks", &set)
	_, claims := verifyJWT(t, tok.AccessToken, set)
	if claims["scope"] != "kafka.read kafka.write" || claims["sub"] != testClientID || claims["aud"] != "turbo-test" {
		t.Fatalf("claims %v", claims)
	}
	if exp, iat := jsonInt(t, claims, "exp"), jsonInt(t, claims, "iat"); exp-iat != int64(testLifetime/time.Second) {
		t.Fatalf("exp - iat = %d s, want %s", exp-iat, testLifetime)
	}
	// The first try (HTTP Basic) succeeded: nothing refused.
	if s := ti.statsNow(t); s != (stats{TokensIssued: 1, Refused: 0, JWKSServed: 1}) {
		t.Fatalf("stats %+v, want 1 issued, 0 refused, 1 JWKS", s)
	}
}

// TestClientCredentialsParamsStyle: the form-field style works on its own.
func TestClientCredentialsParamsStyle(t *testing.T) {
	ti := newTestIssuer(t, time.Now)
	cfg := ccConfig(ti, testSecret)
	cfg.AuthStyle = oauth2.AuthStyleInParams
	tok, err := cfg.Token(ccContext(t, ti))
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	var set jwkSet
	ti.get(t, "/jwks", &set)
	if _, claims := verifyJWT(t, tok.AccessToken, set); claims["sub"] != testClientID {
		t.Fatalf("sub %v, want %s", claims["sub"], testClientID)
	}
}

// TestClientCredentialsAutoDetectFallback: when the header-style try fails,
// oauth2's auto-detection retries with form fields at once. So, until a
// first success, one Token call costs two of /fail's count — what a backoff
// test has to know.
func TestClientCredentialsAutoDetectFallback(t *testing.T) {
	ti := newTestIssuer(t, time.Now)
	cfg := ccConfig(ti, testSecret)

	ti.failNext.Store(1)
	if _, err := cfg.Token(ccContext(t, ti)); err != nil {
		t.Fatalf("Token after one injected failure: %v (the params-style retry should succeed)", err)
	}
	if s := ti.statsNow(t); s.TokensIssued != 1 || s.Refused != 1 {
		t.Fatalf("stats %+v, want 1 issued after 1 refused", s)
	}

	cfg = ccConfig(ti, testSecret) // a fresh auth-style cache
	ti.failNext.Store(2)
	_, err := cfg.Token(ccContext(t, ti))
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusServiceUnavailable || re.ErrorCode != "temporarily_unavailable" {
		t.Fatalf("Token with both tries failing: %v, want a RetrieveError 503 temporarily_unavailable", err)
	}
	if s := ti.statsNow(t); s.TokensIssued != 1 || s.Refused != 3 {
		t.Fatalf("stats %+v, want 1 issued, 3 refused", s)
	}
	if _, err := cfg.Token(ccContext(t, ti)); err != nil {
		t.Fatalf("Token once the failures are used up: %v", err)
	}
}

// TestClientCredentialsWrongSecret: both tries are refused with 401
// invalid_client, and the error turbo would log does not carry the secret.
func TestClientCredentialsWrongSecret(t *testing.T) {
	ti := newTestIssuer(t, time.Now)
	const wrong = "not-the-secret-0123"
	_, err := ccConfig(ti, wrong).Token(ccContext(t, ti))
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusUnauthorized || re.ErrorCode != "invalid_client" {
		t.Fatalf("Token with a wrong secret: %v, want a RetrieveError 401 invalid_client", err)
	}
	for _, s := range []string{wrong, testSecret} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("the error %q carries a secret", err)
		}
	}
	if s := ti.statsNow(t); s.TokensIssued != 0 || s.Refused != 2 {
		t.Fatalf("stats %+v, want 0 issued, 2 refused (header try, then params try)", s)
	}
}

// TestClientCredentialsRotation: a client that picks up the rotated secret
// gets tokens again; the old one is refused.
func TestClientCredentialsRotation(t *testing.T) {
	ti := newTestIssuer(t, time.Now)
	if _, err := ccConfig(ti, testSecret).Token(ccContext(t, ti)); err != nil {
		t.Fatalf("Token: %v", err)
	}
	writeSecret(t, ti.secretFile, "second-secret\n")
	if _, err := ccConfig(ti, testSecret).Token(ccContext(t, ti)); err == nil {
		t.Fatal("the old secret still works after rotation")
	}
	if _, err := ccConfig(ti, "second-secret").Token(ccContext(t, ti)); err != nil {
		t.Fatalf("Token with the rotated secret: %v", err)
	}
	if s := ti.statsNow(t); s.TokensIssued != 2 || s.Refused != 2 {
		t.Fatalf("stats %+v, want 2 issued, 2 refused", s)
	}
}

// TestReuseTokenSourceWithShortLifetime documents a trap for turbo's client:
// oauth2's token sources treat a token as expired 10 s before its expiry
// (defaultExpiryDelta), so with a lifetime of 10 s or less the plain
// TokenSource fetches a new token on every call. ReuseTokenSourceWithExpiry
// with a smaller margin reuses it.
func TestReuseTokenSourceWithShortLifetime(t *testing.T) {
	ti := newTestIssuer(t, time.Now)
	ctx := ccContext(t, ti)
	cfg := ccConfig(ti, testSecret)
	src := cfg.TokenSource(ctx)
	for range 2 {
		if _, err := src.Token(); err != nil {
			t.Fatalf("Token: %v", err)
		}
	}
	if s := ti.statsNow(t); s.TokensIssued != 2 {
		t.Fatalf("stats %+v: want 2 tokens, the 10 s token never reused", s)
	}
	reuse := oauth2.ReuseTokenSourceWithExpiry(nil, cfg.TokenSource(ctx), 2*time.Second)
	for range 3 {
		if _, err := reuse.Token(); err != nil {
			t.Fatalf("Token: %v", err)
		}
	}
	if s := ti.statsNow(t); s.TokensIssued != 3 {
		t.Fatalf("stats %+v: want 3 tokens, one for the three calls with a 2 s margin", s)
	}
}
