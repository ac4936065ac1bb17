package main

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// oauthError is an error response of the token endpoint (RFC 6749 5.2).
type oauthError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	// basic is set when the client tried HTTP Basic: the 401 then names the
	// scheme in WWW-Authenticate, as RFC 6749 5.2 asks.
	basic bool
}

func (e *oauthError) Error() string {
	if e.Description == "" {
		return e.Code
	}
	return e.Code + ": " + e.Description
}

func invalidRequest(format string, args ...any) *oauthError {
	return &oauthError{Status: http.StatusBadRequest, Code: "invalid_request", Description: fmt.Sprintf(format, args...)}
}

// tokenRequest is a parsed client-credentials request.
type tokenRequest struct {
	GrantType    string
	ClientID     string
	ClientSecret string
	// Basic tells whether the client authenticated with HTTP Basic (else
	// with client_id/client_secret form fields).
	Basic  bool
	Scopes []string
}

// parseTokenRequest reads a token request from its Authorization header and
// its form body. The client may authenticate either way (RFC 6749 2.3.1);
// golang.org/x/oauth2 in AuthStyleAutoDetect tries the header first and the
// form second, so both must work. Using both at once is refused, as the RFC
// says. The header's id and secret are form-urlencoded before the Basic
// encoding (RFC 6749 2.3.1; golang.org/x/oauth2 does url.QueryEscape), so
// they are decoded here.
func parseTokenRequest(authorization string, form url.Values) (tokenRequest, *oauthError) {
	var req tokenRequest
	for _, key := range []string{"grant_type", "client_id", "client_secret", "scope"} {
		if len(form[key]) > 1 {
			return req, invalidRequest("%s is repeated", key)
		}
	}
	req.GrantType = form.Get("grant_type")
	if req.GrantType == "" {
		return req, invalidRequest("grant_type is missing")
	}
	req.Scopes = strings.Fields(form.Get("scope"))

	formID, formSecret := form.Get("client_id"), form.Get("client_secret")
	if authorization != "" {
		id, secret, ok := parseBasic(authorization)
		if !ok {
			return req, &oauthError{Status: http.StatusUnauthorized, Code: "invalid_client",
				Description: "the Authorization header is not HTTP Basic with form-urlencoded credentials", basic: true}
		}
		if formSecret != "" {
			return req, invalidRequest("client authenticated both by HTTP Basic and by client_secret")
		}
		if formID != "" && formID != id {
			return req, invalidRequest("client_id differs from the HTTP Basic user")
		}
		req.ClientID, req.ClientSecret, req.Basic = id, secret, true
		return req, nil
	}
	req.ClientID, req.ClientSecret = formID, formSecret
	return req, nil
}

// parseBasic decodes an HTTP Basic Authorization header value whose user and
// password are form-urlencoded.
func parseBasic(authorization string) (id, secret string, ok bool) {
	r := http.Request{Header: http.Header{"Authorization": {authorization}}}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return "", "", false
	}
	id, err := url.QueryUnescape(user)
	if err != nil {
		return "", "", false
	}
	secret, err = url.QueryUnescape(pass)
	if err != nil {
		return "", "", false
	}
	return id, secret, true
}

// authenticate checks the request's client against the expected id and
// secret. The comparisons take constant time so that the test issuer does
// not teach anything bad to whoever copies it.
func authenticate(req tokenRequest, wantID, wantSecret string) *oauthError {
	idOK := subtle.ConstantTimeCompare([]byte(req.ClientID), []byte(wantID)) == 1
	secretOK := subtle.ConstantTimeCompare([]byte(req.ClientSecret), []byte(wantSecret)) == 1
	// An empty secret file would let anyone who knows the id in.
	if req.ClientID == "" || wantSecret == "" || !idOK || !secretOK {
		return &oauthError{Status: http.StatusUnauthorized, Code: "invalid_client",
			Description: "unknown client or wrong secret", basic: req.Basic}
	}
	return nil
}

// checkGrant refuses every grant but client_credentials.
func checkGrant(req tokenRequest) *oauthError {
	if req.GrantType != "client_credentials" {
		return &oauthError{Status: http.StatusBadRequest, Code: "unsupported_grant_type",
			Description: fmt.Sprintf("grant_type %q is not supported; use client_credentials", req.GrantType)}
	}
	return nil
}

// trimSecret removes the line ending a secret file usually has.
func trimSecret(b []byte) string {
	return strings.TrimRight(string(b), "\r\n")
}
