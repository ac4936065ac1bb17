package kafkanet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit/pki"
)

// tokenServer is a client-credentials endpoint issuing "token-N" tokens
// valid for lifetime to client "turbo" with secret testSecret; secretFile
// is the client's copy of the secret.
type tokenServer struct {
	*httptest.Server
	secretFile string
	lifetime   time.Duration
	mu         sync.Mutex
	issued     int
	fail       int // the next fail requests get 503
	scopes     []string
}

func newTokenServer(t *testing.T, lifetime time.Duration) *tokenServer {
	s := &tokenServer{lifetime: lifetime, secretFile: pki.Write(t, t.TempDir(), "secret", []byte(testSecret))}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.FormValue("client_id"), r.FormValue("client_secret")
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case s.fail > 0:
			s.fail--
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":"temporarily_unavailable"}`)
		case id != "turbo" || secret != testSecret:
			w.WriteHeader(http.StatusUnauthorized)
			// A careless endpoint that echoes what it got.
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s"}`, secret)
		default:
			s.issued++
			s.scopes = strings.Fields(r.FormValue("scope"))
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("token-%d", s.issued), "token_type": "Bearer", "expires_in": int(s.lifetime / time.Second)})
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *tokenServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued
}

func newProvider(t *testing.T, s *tokenServer, log *bytes.Buffer) (*tokenProvider, *time.Time) {
	o := config.OAuth{TokenURL: s.URL + "/token", ClientID: "turbo", ClientSecretFile: s.secretFile, Scopes: []string{"kafka", "read"},
		Extensions: map[string]string{"logicalCluster": "lkc-1"}}
	p := newTokenProvider(o, zerolog.New(log))
	now := time.Now()
	p.now = func() time.Time { return now }
	return p, &now
}

// A token is reused until four fifths of its life have passed, then
// replaced; scopes and extensions go with it.
func TestTokenRefreshAhead(t *testing.T) {
	s := newTokenServer(t, 100*time.Second)
	var log bytes.Buffer
	p, now := newProvider(t, s, &log)
	tok, err := p.Token()
	if err != nil || tok.Token != "token-1" || tok.Extensions["logicalCluster"] != "lkc-1" {
		t.Fatalf("first Token = %+v, %v", tok, err)
	}
	if fmt.Sprint(s.scopes) != "[kafka read]" {
		t.Errorf("scopes sent %v, want [kafka read]", s.scopes)
	}
	*now = now.Add(79 * time.Second)
	if tok, _ := p.Token(); tok.Token != "token-1" {
		t.Errorf("at 79%% of its life the token is %s, want token-1 reused", tok.Token)
	}
	*now = now.Add(2 * time.Second)
	if tok, _ := p.Token(); tok.Token != "token-2" {
		t.Errorf("at 81%% of its life the token is %s, want token-2", tok.Token)
	}
	if s.count() != 2 {
		t.Errorf("%d tokens issued, want 2", s.count())
	}
}

// The endpoint failing: the valid token is kept, the endpoint is asked
// again only after a backoff, and a rotated secret file is read again.
func TestTokenEndpointFailures(t *testing.T) {
	s := newTokenServer(t, 100*time.Second)
	var log bytes.Buffer
	p, now := newProvider(t, s, &log)
	if _, err := p.Token(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.fail = 1
	s.mu.Unlock()
	*now = now.Add(85 * time.Second)
	tok, err := p.Token()
	if err != nil || tok.Token != "token-1" {
		t.Fatalf("Token while the endpoint fails = %+v, %v: want the still valid token-1", tok, err)
	}
	if !strings.Contains(log.String(), "answered HTTP 503 temporarily_unavailable") {
		t.Errorf("log %s: want the endpoint's status", log.String())
	}
	*now = now.Add(500 * time.Millisecond)
	if tok, _ := p.Token(); tok.Token != "token-1" || s.count() != 1 {
		t.Errorf("within the backoff: token %s after %d issued; want token-1 and no new request", tok.Token, s.count())
	}
	*now = now.Add(time.Second)
	if tok, _ := p.Token(); tok.Token != "token-2" {
		t.Errorf("after the backoff the token is %s, want token-2", tok.Token)
	}

	// The client's secret file holds a wrong secret: refused, 401, the
	// secret shown nowhere even though the endpoint echoes it.
	if err := os.WriteFile(s.secretFile, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(200 * time.Second) // token-2 expired
	_, err = p.Token()
	te, ok := err.(*TokenError)
	if !ok || te.Status != 401 || !te.refused() {
		t.Fatalf("Token with a wrong secret: %v, want a refused *TokenError", err)
	}
	want := "OAUTHBEARER: the token endpoint " + s.URL + "/token answered HTTP 401 invalid_client: bad secret [redacted] (check kafka.sasl.oauth.client_id and client_secret)"
	if err.Error() != want {
		t.Errorf("error\n  %s\nwant\n  %s", err, want)
	}
	if r := (&Net{}).Explain(err); r == nil || r.Cause != want {
		t.Errorf("Explain = %v, want the refusal %q", r, want)
	}
	// The new secret reaches the client: read again for the next token.
	if err := os.WriteFile(s.secretFile, []byte(testSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(time.Minute)
	if tok, err := p.Token(); err != nil || tok.Token != "token-3" {
		t.Errorf("after the secret file is right again: %+v, %v", tok, err)
	}
	if strings.Contains(log.String(), testSecret) || strings.Contains(log.String(), "rotated") {
		t.Errorf("the log shows a secret:\n%s", log.String())
	}
}

// An unreachable endpoint is an outage: retried, not a refusal.
func TestTokenEndpointUnreachable(t *testing.T) {
	s := newTokenServer(t, time.Minute)
	s.Close()
	var log bytes.Buffer
	p, _ := newProvider(t, s, &log)
	_, err := p.Token()
	te, ok := err.(*TokenError)
	if !ok || te.refused() || !strings.Contains(err.Error(), "cannot get a token from "+s.URL+"/token") {
		t.Fatalf("Token from a closed endpoint: %v, want an unrefused *TokenError naming the endpoint", err)
	}
	if r := (&Net{}).Explain(err); r != nil {
		t.Errorf("Explain = %q: an unreachable endpoint is not a refusal", r)
	}
	if strings.Contains(err.Error(), testSecret) || strings.Contains(log.String(), testSecret) {
		t.Errorf("the error or the log shows the secret: %v\n%s", err, log.String())
	}
}

// recorder is an HTTP server that keeps everything it receives: each
// request's line, headers, decoded Basic credentials and body. It answers
// 401 invalid_client, as a token endpoint that got no credentials does.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		dump, err := httputil.DumpRequest(req, true)
		if err != nil {
			t.Errorf("recorder: %v", err)
		}
		id, secret, _ := req.BasicAuth()
		r.mu.Lock()
		r.reqs = append(r.reqs, fmt.Sprintf("%s\nbasic: %s:%s", dump, id, secret))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
	}))
	t.Cleanup(r.Close)
	return r
}

// requests returns what the recorder received so far.
func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// The token endpoint answering with a redirect: the client secret must not
// follow it, neither in the Authorization header (which Go re-sends to the
// same host on another port) nor in the body (which oauth2's auth-style
// detection would send after the other host's 401). The redirect is an
// error naming token_url and the status, never the Location's query.
func TestTokenNeverFollowsARedirect(t *testing.T) {
	for _, tt := range []struct {
		name string
		host string // the redirect target's host name
	}{
		{"same host, other port", "127.0.0.1"},
		{"other host name", "localhost"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target := newRecorder(t)
			location := strings.Replace(target.URL, "127.0.0.1", tt.host, 1) + "/token?sig=query-secret"
			var redirects atomic.Int32
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				redirects.Add(1)
				http.Redirect(w, r, location, http.StatusTemporaryRedirect)
			}))
			t.Cleanup(redirector.Close)
			tokenURL := redirector.URL + "/oauth2/token"
			var log bytes.Buffer
			p := newTokenProvider(config.OAuth{TokenURL: tokenURL, ClientID: "turbo", ClientSecret: testSecret}, zerolog.New(&log))

			_, err := p.Token()

			for i, req := range target.requests() {
				if strings.Contains(req, testSecret) {
					t.Errorf("the redirect's target received the client secret in request %d of %d:\n%s", i+1, len(target.requests()), req)
				}
			}
			if n := len(target.requests()); n != 0 {
				t.Errorf("the redirect's target received %d requests, want none (a redirect is not followed)", n)
			}
			if n := redirects.Load(); n != 1 {
				t.Errorf("the token endpoint received %d requests for one token, want 1", n)
			}
			var te *TokenError
			if !errors.As(err, &te) {
				t.Fatalf("Token after a redirect: %v, want a *TokenError", err)
			}
			want := "OAUTHBEARER: the token endpoint " + tokenURL + " answered HTTP 307 (a redirect to " + tt.host + ":"
			if te.Status != http.StatusTemporaryRedirect || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "set kafka.sasl.oauth.token_url to the final URL") {
				t.Errorf("error %q (status %d)\nwant it to begin %q and say which key to set", err, te.Status, want)
			}
			for _, s := range []string{testSecret, "query-secret"} {
				if strings.Contains(err.Error(), s) || strings.Contains(log.String(), s) {
					t.Errorf("the error or the log shows %q: %v\n%s", s, err, log.String())
				}
			}
			if r := (&Net{}).Explain(err); r == nil || r.Cause != err.Error() {
				t.Errorf("Explain = %v: a redirect is a configuration mistake, want it explained as a refusal", r)
			}
		})
	}
}

// One auth style, the configured one: a 401 is not retried with the secret
// in the other place, and the secret is only where the style puts it.
func TestTokenAuthStyle(t *testing.T) {
	for _, tt := range []struct {
		name   string
		style  config.AuthStyle
		header bool // the secret in the Authorization header, else in the form
	}{
		{"header", config.AuthStyleHeader, true},
		{"body", config.AuthStyleBody, false},
		{"empty (a Kafka section built in Go) is header", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			endpoint := newRecorder(t)
			var log bytes.Buffer
			p := newTokenProvider(config.OAuth{TokenURL: endpoint.URL + "/token", ClientID: "turbo", ClientSecret: testSecret, AuthStyle: tt.style}, zerolog.New(&log))
			_, err := p.Token()
			var te *TokenError
			if !errors.As(err, &te) || te.Status != http.StatusUnauthorized {
				t.Fatalf("Token from an endpoint answering 401: %v, want a *TokenError with status 401", err)
			}
			reqs := endpoint.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests for one token attempt, want exactly 1 (no retry in the other auth style):\n%s", len(reqs), strings.Join(reqs, "\n----\n"))
			}
			req := reqs[0]
			head, body, _ := strings.Cut(req, "\r\n\r\n")
			inHeader := strings.Contains(req, "basic: turbo:"+testSecret) && strings.Contains(head, "Authorization: Basic ")
			inForm := strings.Contains(body, "client_secret="+testSecret) && strings.Contains(body, "client_id=turbo")
			if inHeader != tt.header || inForm == tt.header {
				t.Errorf("auth style %q: secret in the header %v, in the form %v; want the header %v:\n%s", tt.style, inHeader, inForm, tt.header, req)
			}
			if strings.Contains(log.String(), testSecret) || strings.Contains(err.Error(), testSecret) {
				t.Errorf("the error or the log shows the secret: %v\n%s", err, log.String())
			}

			// An endpoint that takes the style gives a token.
			s := newTokenServer(t, time.Minute)
			p = newTokenProvider(config.OAuth{TokenURL: s.URL + "/token", ClientID: "turbo", ClientSecret: testSecret, AuthStyle: tt.style}, zerolog.New(&log))
			if tok, err := p.Token(); err != nil || tok.Token != "token-1" {
				t.Errorf("Token from an endpoint that accepts the style: %+v, %v", tok, err)
			}
		})
	}
}

// A token endpoint that hangs: the attempt ends at the request's bound,
// and the backoff counts from then, so the retry_after logged is never
// already past. The clock says the attempt took 10 s (tokenTimeout).
func TestTokenBackoffCountsFromTheAnswer(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for the handler
	var log bytes.Buffer
	p := newTokenProvider(config.OAuth{TokenURL: hung.URL + "/token", ClientID: "turbo", ClientSecret: testSecret}, zerolog.New(&log))
	p.wait, p.client.Timeout = 300*time.Millisecond, 300*time.Millisecond
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	calls := 0
	p.now = func() time.Time {
		calls++
		if calls == 1 {
			return start
		}
		return start.Add(tokenTimeout)
	}
	if _, err := p.Token(); err == nil {
		t.Fatal("a token from an endpoint that never answers")
	}
	var line struct {
		RetryAfter time.Time `json:"retry_after"`
	}
	if err := json.Unmarshal(bytes.SplitN(log.Bytes(), []byte("\n"), 2)[0], &line); err != nil || line.RetryAfter.IsZero() {
		t.Fatalf("no retry_after logged (%v): %s", err, log.String())
	}
	if want := start.Add(tokenTimeout + tokenRetryMin); line.RetryAfter.Before(want) {
		t.Errorf("retry_after %s, want %s (the attempt's end plus the backoff): it counted from the request's start",
			line.RetryAfter.Format(time.RFC3339), want.Format(time.RFC3339))
	}
}

// An endpoint answering a negative (or tiny) expires_in: the token is used
// for minTokenInterval, with one warning, instead of a new token being
// asked for at every connection; a short but sane lifetime (10 s) is
// honoured, the token replaced before it expires.
func TestTokenLifetimeIsClamped(t *testing.T) {
	for _, lifetime := range []time.Duration{-5 * time.Second, time.Second} {
		s := newTokenServer(t, lifetime)
		var log bytes.Buffer
		p, now := newProvider(t, s, &log)
		for range 5 {
			if tok, err := p.Token(); err != nil || tok.Token != "token-1" {
				t.Fatalf("expires_in %v: Token = %+v, %v; want token-1 reused", lifetime, tok, err)
			}
		}
		if !strings.Contains(log.String(), "almost) expired") {
			t.Errorf("expires_in %v: no warning logged: %s", lifetime, log.String())
		}
		*now = now.Add(minTokenInterval)
		if tok, _ := p.Token(); tok == nil || tok.Token != "token-2" {
			t.Errorf("expires_in %v: after %v the token is %+v, want token-2", lifetime, minTokenInterval, tok)
		}
		if s.count() != 2 {
			t.Errorf("expires_in %v: %d tokens issued for 6 calls over %v, want 2", lifetime, s.count(), minTokenInterval)
		}
	}
	s := newTokenServer(t, 10*time.Second)
	var log bytes.Buffer
	p, now := newProvider(t, s, &log)
	for i := range 3 {
		if _, err := p.Token(); err != nil {
			t.Fatal(err)
		}
		// oauth2 dates a token's expiry by the real clock, so only the
		// first answer is judged against the test's clock.
		if i == 0 && strings.Contains(log.String(), "almost) expired") {
			t.Errorf("a 10 s token was warned about: %s", log.String())
		}
		*now = now.Add(9 * time.Second)
	}
	if s.count() != 3 {
		t.Errorf("10 s tokens asked for every 9 s: %d issued for 3 calls, want 3 (none used past its expiry)", s.count())
	}
}
