package kafkanet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Token refresh and retry. A token is replaced once four fifths of its
// life have passed (as Kafka's Java client does by default), so the
// re-authentication sarama does before a session expires (KIP-368) always
// gets a fresh one.
const (
	refreshAtFraction = 0.8
	// tokenTimeout bounds one request to the token endpoint: sarama waits
	// for the token with a broker connection's lock held.
	tokenTimeout = 10 * time.Second
	// tokenRetryMin and tokenRetryMax bound the wait between failed token
	// requests: a failing endpoint is not hammered by every connection.
	tokenRetryMin = time.Second
	tokenRetryMax = 30 * time.Second
	// noExpiryRefresh is when a token the endpoint gave no lifetime is
	// replaced anyway.
	noExpiryRefresh = time.Hour
	// minTokenInterval is the least time between two token requests after
	// one succeeded: an endpoint answering a lifetime below it (a negative
	// expires_in is a broken endpoint) would otherwise be asked again at
	// every connection. Until then the token is used as it is; the brokers
	// judge it. It is well under the shortest lifetimes identity providers
	// give (minutes), so a token is never held past its expiry otherwise.
	minTokenInterval = 5 * time.Second
)

// TokenError is a failure to get an OAUTHBEARER token. Its message names the
// endpoint and what it answered, never the client secret.
type TokenError struct {
	// URL is the token endpoint.
	URL string
	// Status is the HTTP status the endpoint answered, 0 when it could not
	// be reached.
	Status int
	msg    string
}

func (e *TokenError) Error() string { return e.msg }

// refused reports whether the endpoint refused the client (a
// configuration mistake), rather than failing for a while. A redirect
// counts: a token endpoint that has moved, or an http:// URL its server
// sends to https://, answers every request the same way until token_url
// is changed, so at start-up turbo gives up with the message rather than
// retrying for ever (later in a run a refusal is still retried).
func (e *TokenError) refused() bool {
	return e.Status == http.StatusBadRequest || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden ||
		redirect(e.Status)
}

// redirect reports whether status is a 3xx answer.
func redirect(status int) bool { return status >= 300 && status < 400 }

// tokenProvider is sarama's AccessTokenProvider for OAUTHBEARER: it gets
// tokens with the client-credentials flow and caches each until it is due
// for refresh. It has no goroutine: a token is fetched when a connection
// (or a re-authentication) asks for one and the cached one is due.
type tokenProvider struct {
	o      config.OAuth
	client *http.Client
	log    zerolog.Logger
	now    func() time.Time
	wait   time.Duration // bounds one request (tokenTimeout)

	mu       sync.Mutex
	cc       clientcredentials.Config
	tok      *oauth2.Token
	refresh  time.Time // when tok is due for replacement
	failures int
	retryAt  time.Time // no request before this after a failure
	earliest time.Time // no request before this after a success
	lastErr  error
}

func newTokenProvider(o config.OAuth, log zerolog.Logger) *tokenProvider {
	return &tokenProvider{o: o, client: &http.Client{Timeout: tokenTimeout, CheckRedirect: noRedirects}, log: log, now: time.Now, wait: tokenTimeout,
		cc: clientcredentials.Config{ClientID: o.ClientID, TokenURL: o.TokenURL, Scopes: o.Scopes, AuthStyle: authStyle(o.AuthStyle)}}
}

// noRedirects makes the token client hand a redirect back as the answer
// (which oauth2 reports as an error with its status) instead of following
// it. Following one sends the client secret where token_url does not say:
// Go re-sends the Authorization header to the same host on any port, and
// the form body (client_secret, with auth_style body) to any host.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// authStyle is where the client secret goes: the configured place only.
// oauth2's auto-detection (its zero value) retries a refused request with
// the secret in the body, sending it twice per token to an endpoint that
// said no. Empty is the default, header, for a configuration built in Go
// rather than loaded.
func authStyle(s config.AuthStyle) oauth2.AuthStyle {
	if s == config.AuthStyleBody {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

var _ sarama.AccessTokenProvider = (*tokenProvider)(nil)

// Token returns a valid token: the cached one until it is due for refresh,
// else a new one. When the endpoint fails, a cached token that has not
// expired is still returned, and the endpoint is asked again only after a
// backoff.
func (p *tokenProvider) Token() (*sarama.AccessToken, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	valid := p.tok != nil && (p.tok.Expiry.IsZero() || now.Before(p.tok.Expiry))
	if valid && now.Before(p.refresh) {
		return p.access(), nil
	}
	if now.Before(p.retryAt) {
		if valid {
			return p.access(), nil
		}
		return nil, p.lastErr
	}
	if p.tok != nil && now.Before(p.earliest) {
		return p.access(), nil
	}
	tok, err := p.fetch()
	// What follows counts from the answer: a request may have taken up to
	// tokenTimeout, longer than the first backoff.
	now = p.now()
	valid = p.tok != nil && (p.tok.Expiry.IsZero() || now.Before(p.tok.Expiry))
	if err != nil {
		p.failures++
		p.retryAt = now.Add(min(tokenRetryMin<<min(p.failures-1, 5), tokenRetryMax))
		p.lastErr = err
		ev := p.log.Warn().Err(err).Time("retry_after", p.retryAt)
		if valid {
			ev.Time("token_expires", p.tok.Expiry).Msg("OAUTHBEARER: cannot refresh the token; the current one is still valid")
			return p.access(), nil
		}
		ev.Msg("OAUTHBEARER: cannot get a token")
		return nil, err
	}
	if p.failures > 0 {
		p.log.Info().Int("failures", p.failures).Msg("OAUTHBEARER: token endpoint answering again")
	}
	p.failures, p.lastErr = 0, nil
	if !tok.Expiry.IsZero() && tok.Expiry.Sub(now) < minTokenInterval {
		p.log.Warn().Stringer("expires_in", tok.Expiry.Sub(now).Round(time.Second)).Stringer("next_request_in", minTokenInterval).
			Msg("OAUTHBEARER: the token endpoint gave a token (almost) expired; using it, and not asking again sooner than shown")
	}
	p.tok, p.earliest = tok, now.Add(minTokenInterval)
	if tok.Expiry.IsZero() {
		p.refresh = now.Add(noExpiryRefresh)
	} else {
		p.refresh = now.Add(time.Duration(float64(tok.Expiry.Sub(now)) * refreshAtFraction))
	}
	p.log.Debug().Time("expires", tok.Expiry).Time("refresh", p.refresh).Msg("OAUTHBEARER: got a token")
	return p.access(), nil
}

func (p *tokenProvider) access() *sarama.AccessToken {
	return &sarama.AccessToken{Token: p.tok.AccessToken, Extensions: p.o.Extensions}
}

// fetch asks the token endpoint for a new token, reading the client secret
// (or its file) now.
func (p *tokenProvider) fetch() (*oauth2.Token, error) {
	secret, err := p.o.ClientSecretValue()
	if err != nil {
		return nil, &TokenError{URL: p.o.TokenURL, msg: "OAUTHBEARER: kafka.sasl.oauth.client_secret_file: " + err.Error()}
	}
	p.cc.ClientSecret = secret
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), oauth2.HTTPClient, p.client), p.wait)
	defer cancel()
	tok, err := p.cc.Token(ctx)
	if err == nil {
		if tok.AccessToken == "" {
			return nil, &TokenError{URL: p.o.TokenURL, Status: http.StatusOK, msg: fmt.Sprintf("OAUTHBEARER: the token endpoint %s answered without an access_token", p.o.TokenURL)}
		}
		return tok, nil
	}
	return nil, tokenError(p.o.TokenURL, err, secret)
}

// tokenError turns what oauth2 returned into a TokenError whose message
// holds the endpoint, the HTTP status and the OAuth error code, and
// never the secret (even if a broken endpoint echoed it).
func tokenError(url string, err error, secret string) *TokenError {
	var re *oauth2.RetrieveError
	e := &TokenError{URL: url}
	switch {
	case errors.As(err, &re) && re.Response != nil && redirect(re.Response.StatusCode):
		e.Status = re.Response.StatusCode
		e.msg = fmt.Sprintf("OAUTHBEARER: the token endpoint %s answered HTTP %d (a redirect%s, not followed: set kafka.sasl.oauth.token_url to the final URL)",
			url, e.Status, redirectHost(re.Response))
	case errors.As(err, &re) && re.Response != nil:
		e.Status = re.Response.StatusCode
		e.msg = fmt.Sprintf("OAUTHBEARER: the token endpoint %s answered HTTP %d", url, e.Status)
		if re.ErrorCode != "" {
			e.msg += " " + clip(re.ErrorCode)
			if re.ErrorDescription != "" {
				e.msg += ": " + clip(re.ErrorDescription)
			}
		}
		if e.refused() {
			e.msg += " (check kafka.sasl.oauth.client_id and client_secret)"
		}
	default:
		e.msg = fmt.Sprintf("OAUTHBEARER: cannot get a token from %s: %v", url, err)
	}
	if secret != "" {
		e.msg = strings.ReplaceAll(e.msg, secret, "[redacted]")
	}
	return e
}

// redirectHost names where a redirect pointed: " to <host:port>", or
// nothing when it has no usable Location. Only the host: the Location's path
// and query may carry a signature or a code.
func redirectHost(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil || loc.Host == "" {
		return ""
	}
	return " to " + clip(loc.Host)
}

// clip bounds text from a remote party in a log line.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
