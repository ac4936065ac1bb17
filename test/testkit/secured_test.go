package testkit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func setSecuredEnv(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{
		BrokersEnv:               "127.0.0.1:1",
		KafkaVersionEnv:          "4.4.0",
		SASLSSLBrokersEnv:        "127.0.0.1:2",
		SSLBrokersEnv:            "127.0.0.1:3,127.0.0.1:4",
		TLSDirEnv:                "/tls",
		SCRAM256UserEnv:          "u256",
		SCRAM256PasswordEnv:      "p256",
		SCRAM512UserEnv:          "u512",
		SCRAM512PasswordEnv:      "p512",
		PlainUserEnv:             "up",
		PlainPasswordEnv:         "pp",
		OAuthTokenURLEnv:         "http://127.0.0.1:5/token",
		OAuthClientIDEnv:         "turbo-test",
		OAuthClientSecretFileEnv: "/secret",
		OAuthStatsURLEnv:         "http://127.0.0.1:5/stats",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	return env
}

// Every variable of kafka.sh's env file lands in its field.
func TestSecuredFromEnv(t *testing.T) {
	setSecuredEnv(t)
	s, err := SecuredFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := Secured{
		Brokers:        []string{"127.0.0.1:1"},
		KafkaVersion:   "4.4.0",
		SASLSSLBrokers: []string{"127.0.0.1:2"},
		SSLBrokers:     []string{"127.0.0.1:3", "127.0.0.1:4"},
		TLSDir:         "/tls",
		SCRAM256:       Credentials{"u256", "p256"},
		SCRAM512:       Credentials{"u512", "p512"},
		Plain:          Credentials{"up", "pp"},
		OAuth:          OAuthClient{"http://127.0.0.1:5/token", "turbo-test", "/secret", "http://127.0.0.1:5/stats"},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("SecuredFromEnv:\n got %+v\nwant %+v", s, want)
	}
	if got := s.TLSFile(TLSCAFile); got != "/tls/ca.pem" {
		t.Errorf("TLSFile(ca.pem) = %q", got)
	}
}

// A missing or empty variable is named in the error, which wraps
// ErrNoSecuredBroker and holds no value of the others.
func TestSecuredFromEnvMissing(t *testing.T) {
	env := setSecuredEnv(t)
	t.Setenv(SCRAM512PasswordEnv, "")
	os.Unsetenv(OAuthStatsURLEnv) // t.Setenv above restores it
	_, err := SecuredFromEnv()
	if !errors.Is(err, ErrNoSecuredBroker) {
		t.Fatalf("error %v: want ErrNoSecuredBroker", err)
	}
	for _, name := range []string{SCRAM512PasswordEnv, OAuthStatsURLEnv} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	for _, secret := range []string{env[SCRAM256PasswordEnv], env[PlainPasswordEnv]} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q holds a password", err)
		}
	}
}

// TokenSource sends the client by HTTP Basic with the secret read from its
// file at each call, and reports a refusal by status, without the secret.
func TestTokenSource(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	write := func(s string) {
		if err := os.WriteFile(secretFile, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" || !ok || id != "cid" || secret != "s1" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tok","token_type":"Bearer","expires_in":10}`))
	}))
	defer srv.Close()
	ts := &TokenSource{Client: OAuthClient{TokenURL: srv.URL + "/token", ClientID: "cid", ClientSecretFile: secretFile}}

	write("s1")
	tok, err := ts.Token()
	if err != nil || tok.Token != "tok" {
		t.Fatalf("Token() = %+v, %v: want tok", tok, err)
	}
	write("rotated-away")
	_, err = ts.Token()
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("Token() with a wrong secret: %v, want the endpoint and HTTP 401", err)
	}
	if err != nil && strings.Contains(err.Error(), "rotated-away") {
		t.Errorf("error %q holds the secret", err)
	}
}
