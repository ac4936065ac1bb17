package kafkanet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
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
