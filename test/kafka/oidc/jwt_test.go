package main

import (
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"
)

// TestSignJWTVerifies: signJWT's output verifies with the key newJWKSet
// publishes, and not with another key.
func TestSignJWTVerifies(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	c := newClaims("iss", "aud", "sub", []string{"s"}, testClock, time.Minute, "jti-1")
	token, err := signJWT(key, "kid-1", c)
	if err != nil {
		t.Fatalf("signJWT: %v", err)
	}
	if strings.ContainsAny(token, "=+/ ") {
		t.Fatalf("token %q is not base64url without padding", token)
	}
	set := newJWKSet(&key.PublicKey, "kid-1")
	header, claims := verifyJWT(t, token, set)
	if header["kid"] != "kid-1" || claims["sub"] != "sub" || jsonInt(t, claims, "exp") != testClock.Unix()+60 {
		t.Fatalf("header %v claims %v", header, claims)
	}

	// A tampered payload fails verification.
	parts := strings.Split(token, ".")
	forged := newClaims("iss", "aud", "admin", nil, testClock, time.Minute, "jti-1")
	forgedToken, err := signJWT(key, "kid-1", forged)
	if err != nil {
		t.Fatal(err)
	}
	tampered := parts[0] + "." + strings.Split(forgedToken, ".")[1] + "." + parts[2]
	if verifies(tampered, &key.PublicKey) {
		t.Fatal("a token with a swapped payload verified")
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if verifies(token, &other.PublicKey) {
		t.Fatal("the token verified with another key")
	}
	if !verifies(token, &key.PublicKey) {
		t.Fatal("the token does not verify with its key")
	}
}

// verifies reports whether token's RS256 signature verifies with pub.
func verifies(token string, pub *rsa.PublicKey) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return false
	}
	return verifyRS256(parts[0]+"."+parts[1], sig, pub) == nil
}

// TestJWKSetEncoding: the exponent 65537 is "AQAB" (RFC 7518's example) and
// n has no leading zero byte.
func TestJWKSetEncoding(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	set := newJWKSet(&key.PublicKey, "k")
	if len(set.Keys) != 1 {
		t.Fatalf("%d keys, want 1", len(set.Keys))
	}
	k := set.Keys[0]
	if k.E != "AQAB" {
		t.Fatalf("e %q, want AQAB", k.E)
	}
	n, err := b64.DecodeString(k.N)
	if err != nil {
		t.Fatal(err)
	}
	if len(n) != 256 || n[0] == 0 {
		t.Fatalf("n is %d bytes starting %#x, want 256 without a leading zero", len(n), n[0])
	}
	if k.Kty != "RSA" || k.Use != "sig" || k.Alg != "RS256" || k.Kid != "k" {
		t.Fatalf("key %+v", k)
	}
}

func TestRandomID(t *testing.T) {
	a, err := randomID(12)
	if err != nil {
		t.Fatal(err)
	}
	b, err := randomID(12)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 16 || a == b {
		t.Fatalf("randomID(12) gave %q and %q: want two different 16-character ids", a, b)
	}
}
