package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxFormBytes bounds a token request body; a real one is under 200 bytes.
const maxFormBytes = 64 << 10

// issuerConfig is what an Issuer issues and to whom.
type issuerConfig struct {
	Issuer           string        // the iss claim
	Audience         string        // the aud claim
	ClientID         string        // the one client allowed
	ClientSecretFile string        // its secret, read on every token request
	Lifetime         time.Duration // exp - iat; whole seconds, at least 1 s
}

func (c issuerConfig) validate() error {
	switch {
	case c.Issuer == "":
		return errors.New("oidc: -issuer is empty")
	case c.Audience == "":
		return errors.New("oidc: -audience is empty")
	case c.ClientID == "":
		return errors.New("oidc: -client-id is empty")
	case c.ClientSecretFile == "":
		return errors.New("oidc: -client-secret-file is empty")
	case c.Lifetime < time.Second || c.Lifetime%time.Second != 0:
		return fmt.Errorf("oidc: -lifetime %s is not a whole number of seconds ≥ 1s (JWT times are in seconds)", c.Lifetime)
	}
	return nil
}

// Issuer is the token endpoint and key set of one client-credentials client.
// Its handlers are safe for concurrent use.
type Issuer struct {
	cfg    issuerConfig
	key    *rsa.PrivateKey
	kid    string
	now    func() time.Time
	logger *log.Logger

	tokensIssued atomic.Int64
	refused      atomic.Int64
	jwksServed   atomic.Int64
	// failNext is how many of the next token requests get 503.
	failNext atomic.Int64
}

// newIssuer returns an Issuer with a fresh RSA-2048 key; nothing is written
// to disk. now is the clock (time.Now outside tests).
func newIssuer(cfg issuerConfig, now func() time.Time, logger *log.Logger) (*Issuer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("oidc: generating the RSA key: %w", err)
	}
	kid, err := randomID(6)
	if err != nil {
		return nil, err
	}
	return &Issuer{cfg: cfg, key: key, kid: kid, now: now, logger: logger}, nil
}

// stats is the document served at /stats.
type stats struct {
	TokensIssued int64 `json:"tokens_issued"`
	Refused      int64 `json:"refused"`
	JWKSServed   int64 `json:"jwks_served"`
}

func (is *Issuer) stats() stats {
	return stats{TokensIssued: is.tokensIssued.Load(), Refused: is.refused.Load(), JWKSServed: is.jwksServed.Load()}
}

// tokenResponse is a successful token response (RFC 6749 5.1).
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

// issue returns a signed token for subject with scopes, issued now.
func (is *Issuer) issue(subject string, scopes []string) (tokenResponse, error) {
	jti, err := randomID(12)
	if err != nil {
		return tokenResponse{}, err
	}
	c := newClaims(is.cfg.Issuer, is.cfg.Audience, subject, scopes, is.now(), is.cfg.Lifetime, jti)
	jwt, err := signJWT(is.key, is.kid, c)
	if err != nil {
		return tokenResponse{}, err
	}
	return tokenResponse{AccessToken: jwt, TokenType: "Bearer", ExpiresIn: c.Expiry - c.IssuedAt, Scope: c.Scope}, nil
}

// takeFailure consumes one injected failure, if any is left.
func (is *Issuer) takeFailure() bool {
	for {
		n := is.failNext.Load()
		if n <= 0 {
			return false
		}
		if is.failNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Handler serves /token, /jwks, /stats and /fail.
func (is *Issuer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", is.handleToken)
	mux.HandleFunc("GET /jwks", is.handleJWKS)
	mux.HandleFunc("GET /stats", is.handleStats)
	mux.HandleFunc("POST /fail", is.handleFail)
	return mux
}

func (is *Issuer) handleToken(w http.ResponseWriter, r *http.Request) {
	resp, oerr := is.token(w, r)
	// RFC 6749 5.1: token responses, errors too, are not to be cached.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if oerr != nil {
		is.refused.Add(1)
		is.logger.Printf("token request refused: %d %s", oerr.Status, oerr.Error())
		if oerr.Status == http.StatusUnauthorized && oerr.basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="turbo-test-oidc"`)
		}
		writeJSON(w, oerr.Status, oerr)
		return
	}
	is.tokensIssued.Add(1)
	is.logger.Printf("issued a token to %q (scope %q, expires in %d s)", is.cfg.ClientID, resp.Scope, resp.ExpiresIn)
	writeJSON(w, http.StatusOK, resp)
}

// token runs a token request through the injected failures, parsing, client
// authentication and the grant check, in that order.
func (is *Issuer) token(w http.ResponseWriter, r *http.Request) (tokenResponse, *oauthError) {
	if is.takeFailure() {
		return tokenResponse{}, &oauthError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
			Description: "failure injected through /fail"}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return tokenResponse{}, invalidRequest("unreadable form: %v", err)
	}
	req, oerr := parseTokenRequest(r.Header.Get("Authorization"), r.PostForm)
	if oerr != nil {
		return tokenResponse{}, oerr
	}
	// Read on every request so that a test can rotate the secret.
	raw, err := os.ReadFile(is.cfg.ClientSecretFile)
	if err != nil {
		return tokenResponse{}, &oauthError{Status: http.StatusInternalServerError, Code: "server_error",
			Description: fmt.Sprintf("reading the client secret file: %v", err)}
	}
	if oerr := authenticate(req, is.cfg.ClientID, trimSecret(raw)); oerr != nil {
		return tokenResponse{}, oerr
	}
	if oerr := checkGrant(req); oerr != nil {
		return tokenResponse{}, oerr
	}
	resp, err := is.issue(req.ClientID, req.Scopes)
	if err != nil {
		return tokenResponse{}, &oauthError{Status: http.StatusInternalServerError, Code: "server_error", Description: err.Error()}
	}
	return resp, nil
}

func (is *Issuer) handleJWKS(w http.ResponseWriter, _ *http.Request) {
	is.jwksServed.Add(1)
	writeJSON(w, http.StatusOK, newJWKSet(&is.key.PublicKey, is.kid))
}

func (is *Issuer) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, is.stats())
}

// handleFail makes the next count token requests fail with 503; count
// replaces what was left of an earlier /fail (0 cancels it).
func (is *Issuer) handleFail(w http.ResponseWriter, r *http.Request) {
	n, err := parseCount(r.URL.Query().Get("count"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, invalidRequest("%v", err))
		return
	}
	is.failNext.Store(n)
	is.logger.Printf("the next %d token requests will get 503", n)
	writeJSON(w, http.StatusOK, map[string]int64{"fail_next": n})
}

// parseCount parses /fail's count: a non-negative integer.
func parseCount(s string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, errors.New("count is missing")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("count %q is not a non-negative integer", s)
	}
	return n, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent; a client that went away cannot be told more.
	_ = json.NewEncoder(w).Encode(v)
}
