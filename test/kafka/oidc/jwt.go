package main

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// jwtHeader is the JOSE header of every token: RS256 is what Kafka's broker
// validator (jose4j, any algorithm but "none") and every OIDC provider
// support.
type jwtHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

// claims are the JWT claims of an access token.
//
// Kafka's broker validator (ValidatorAccessTokenValidator in 3.x,
// BrokerJwtValidator in 4.x, both on jose4j) requires exp and iat as
// NumericDate numbers and a string sub; it checks nbf when present (with
// sasl.oauthbearer.clock.skew.seconds, 30 by default), and aud only against
// sasl.oauthbearer.expected.audience — but jose4j rejects a token carrying an
// aud when no expected audience is configured, so the broker must set it.
//
// scope is a space-separated string (RFC 9068) and is left out when empty:
// Kafka turns a string scope into a one-element list and refuses an empty
// element ("scope value must be non-empty"), while an absent scope claim is
// an empty set. Kafka 3.9 keeps "a b" as one scope; newer releases split it
// (OAuthBearerScopeClaimUtils). Neither uses scopes for authentication.
type claims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	Audience  string `json:"aud"`
	IssuedAt  int64  `json:"iat"`
	NotBefore int64  `json:"nbf"`
	Expiry    int64  `json:"exp"`
	ID        string `json:"jti"`
	Scope     string `json:"scope,omitempty"`
}

// newClaims returns the claims of a token issued at now for subject, valid
// for lifetime (whole seconds: NumericDate has no fraction here).
func newClaims(issuer, audience, subject string, scopes []string, now time.Time, lifetime time.Duration, jti string) claims {
	iat := now.Unix()
	return claims{
		Issuer:    issuer,
		Subject:   subject,
		Audience:  audience,
		IssuedAt:  iat,
		NotBefore: iat,
		Expiry:    iat + int64(lifetime/time.Second),
		ID:        jti,
		Scope:     strings.Join(scopes, " "),
	}
}

var b64 = base64.RawURLEncoding

// signJWT returns the compact JWS (header.payload.signature) of c, signed
// with RS256 by key and labelled kid.
func signJWT(key *rsa.PrivateKey, kid string, c claims) (string, error) {
	header, err := json.Marshal(jwtHeader{Alg: "RS256", Typ: "JWT", Kid: kid})
	if err != nil {
		return "", fmt.Errorf("oidc: encoding the JWT header: %w", err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("oidc: encoding the JWT claims: %w", err)
	}
	signingInput := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signingInput))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("oidc: signing the JWT: %w", err)
	}
	return signingInput + "." + b64.EncodeToString(sig), nil
}

// jwk is one public key of a JWK Set (RFC 7517), RSA only.
type jwk struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// jwkSet is the document served at /jwks.
type jwkSet struct {
	Keys []jwk `json:"keys"`
}

// newJWKSet returns the JWK Set publishing pub under kid. n and e are
// unsigned big-endian integers in base64url without padding (RFC 7518 6.3.1).
func newJWKSet(pub *rsa.PublicKey, kid string) jwkSet {
	return jwkSet{Keys: []jwk{{
		Kty: "RSA",
		Use: "sig",
		Alg: "RS256",
		Kid: kid,
		N:   b64.EncodeToString(pub.N.Bytes()),
		E:   b64.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}}
}

// randomID returns n random bytes in base64url: key ids and token ids.
func randomID(n int) (string, error) {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("oidc: reading random bytes: %w", err)
	}
	return b64.EncodeToString(buf), nil
}
