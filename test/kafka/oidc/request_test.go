package main

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func basicHeader(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestParseTokenRequest(t *testing.T) {
	cc := func(kv ...string) url.Values {
		v := url.Values{"grant_type": {"client_credentials"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	cases := []struct {
		name    string
		auth    string
		form    url.Values
		want    tokenRequest
		errCode string
	}{
		{"basic", basicHeader("id", "secret"), cc("scope", "a b"),
			tokenRequest{GrantType: "client_credentials", ClientID: "id", ClientSecret: "secret", Basic: true, Scopes: []string{"a", "b"}}, ""},
		{"basic escaped", basicHeader(url.QueryEscape("i d:x"), url.QueryEscape("p+w/=&%:é")), cc(),
			tokenRequest{GrantType: "client_credentials", ClientID: "i d:x", ClientSecret: "p+w/=&%:é", Basic: true, Scopes: []string{}}, ""},
		{"basic with the same client_id field", basicHeader("id", "s"), cc("client_id", "id"),
			tokenRequest{GrantType: "client_credentials", ClientID: "id", ClientSecret: "s", Basic: true, Scopes: []string{}}, ""},
		{"form", "", cc("client_id", "id", "client_secret", "s", "scope", "  x   y  "),
			tokenRequest{GrantType: "client_credentials", ClientID: "id", ClientSecret: "s", Scopes: []string{"x", "y"}}, ""},
		{"form without credentials", "", cc(),
			tokenRequest{GrantType: "client_credentials", Scopes: []string{}}, ""},
		{"other grant is parsed, refused later", "", url.Values{"grant_type": {"password"}},
			tokenRequest{GrantType: "password", Scopes: []string{}}, ""},
		{"no grant", basicHeader("id", "s"), url.Values{}, tokenRequest{}, "invalid_request"},
		{"bearer header", "Bearer abc", cc(), tokenRequest{}, "invalid_client"},
		{"basic not base64", "Basic !!!", cc(), tokenRequest{}, "invalid_client"},
		{"basic bad escape", basicHeader("id", "%zz"), cc(), tokenRequest{}, "invalid_client"},
		{"basic and form secret", basicHeader("id", "s"), cc("client_secret", "s"), tokenRequest{}, "invalid_request"},
		{"basic and other client_id", basicHeader("id", "s"), cc("client_id", "other"), tokenRequest{}, "invalid_request"},
		{"repeated scope", "", cc("scope", "a", "scope", "b"), tokenRequest{}, "invalid_request"},
		{"repeated secret", "", cc("client_id", "id", "client_secret", "a", "client_secret", "b"), tokenRequest{}, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, oerr := parseTokenRequest(c.auth, c.form)
			if c.errCode != "" {
				if oerr == nil || oerr.Code != c.errCode {
					t.Fatalf("error %v, want %s", oerr, c.errCode)
				}
				return
			}
			if oerr != nil {
				t.Fatalf("unexpected error %v", oerr)
			}
			if got.Scopes == nil {
				got.Scopes = []string{}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestAuthenticateAndGrant(t *testing.T) {
	ok := tokenRequest{GrantType: "client_credentials", ClientID: "id", ClientSecret: "s"}
	if e := authenticate(ok, "id", "s"); e != nil {
		t.Fatalf("right client refused: %v", e)
	}
	for _, r := range []tokenRequest{
		{ClientID: "id", ClientSecret: "t"},
		{ClientID: "di", ClientSecret: "s"},
		{ClientID: "", ClientSecret: ""},
		{ClientID: "id", ClientSecret: "s "},
	} {
		if e := authenticate(r, "id", "s"); e == nil || e.Code != "invalid_client" || e.Status != 401 {
			t.Errorf("authenticate(%+v) = %v, want 401 invalid_client", r, e)
		}
	}
	// Empty ids and secrets never match, even when the configuration is
	// empty (an empty secret file).
	if e := authenticate(tokenRequest{ClientID: "", ClientSecret: ""}, "", ""); e == nil {
		t.Error("an empty client id was accepted")
	}
	if e := authenticate(tokenRequest{ClientID: "id", ClientSecret: ""}, "id", ""); e == nil {
		t.Error("an empty secret was accepted")
	}
	if e := checkGrant(ok); e != nil {
		t.Fatalf("client_credentials refused: %v", e)
	}
	if e := checkGrant(tokenRequest{GrantType: "refresh_token"}); e == nil || e.Code != "unsupported_grant_type" || e.Status != 400 {
		t.Fatalf("refresh_token: %v, want 400 unsupported_grant_type", e)
	}
}

func TestTrimSecret(t *testing.T) {
	for in, want := range map[string]string{
		"s\n": "s", "s\r\n": "s", "s": "s", "s\n\n": "s", " s \n": " s ", "": "",
	} {
		if got := trimSecret([]byte(in)); got != want {
			t.Errorf("trimSecret(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1": 1, "42": 42} {
		if got, err := parseCount(in); err != nil || got != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "-1", "x", "1.5", "99999999999999999999"} {
		if _, err := parseCount(in); err == nil {
			t.Errorf("parseCount(%q) accepted", in)
		}
	}
}

func TestIssuerConfigValidate(t *testing.T) {
	good := issuerConfig{Issuer: "i", Audience: "a", ClientID: "c", ClientSecretFile: "f", Lifetime: 10 * time.Second}
	if err := good.validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for name, mutate := range map[string]func(*issuerConfig){
		"-issuer":             func(c *issuerConfig) { c.Issuer = "" },
		"-audience":           func(c *issuerConfig) { c.Audience = "" },
		"-client-id":          func(c *issuerConfig) { c.ClientID = "" },
		"-client-secret-file": func(c *issuerConfig) { c.ClientSecretFile = "" },
		"-lifetime 1.5s":      func(c *issuerConfig) { c.Lifetime = 1500 * time.Millisecond },
		"-lifetime 0s":        func(c *issuerConfig) { c.Lifetime = 0 },
		"-lifetime -1s":       func(c *issuerConfig) { c.Lifetime = -time.Second },
	} {
		c := good
		mutate(&c)
		err := c.validate()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming %s", name, err, name)
		}
	}
}

// TestClaimsJSON: the claim names and types as a JWT consumer reads them;
// an empty scope leaves the claim out.
func TestClaimsJSON(t *testing.T) {
	now := time.Unix(1_800_000_000, 999_000_000)
	c := newClaims("iss", "aud", "sub", nil, now, 30*time.Second, "jti")
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"iss":"iss","sub":"sub","aud":"aud","iat":1800000000,"nbf":1800000000,"exp":1800000030,"jti":"jti"}`
	if string(b) != want {
		t.Fatalf("claims %s, want %s", b, want)
	}
	c = newClaims("iss", "aud", "sub", []string{"a", "b"}, now, 30*time.Second, "jti")
	if c.Scope != "a b" {
		t.Fatalf("scope %q, want %q", c.Scope, "a b")
	}
}
