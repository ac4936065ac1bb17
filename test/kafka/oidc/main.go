// Command oidc is a small OAuth 2.0 client-credentials token issuer for
// turbo's real-broker tests: Apache Kafka validates OAUTHBEARER tokens
// against the JWKS it serves (OAuthBearerValidatorCallbackHandler with
// sasl.oauthbearer.jwks.endpoint.url), and turbo fetches tokens from it with
// golang.org/x/oauth2/clientcredentials.
//
//	oidc -listen 127.0.0.1:0 -addr-file PATH -client-id ID \
//	     -client-secret-file PATH -lifetime 10s -audience turbo-test -issuer NAME
//
// Once listening it writes "HOST:PORT\n" to -addr-file (atomically: a script
// waits for the file to appear). The client secret is read from its file on
// every token request, so a test rotates it by rewriting the file; it is
// never printed. The RSA-2048 signing key is made at start and kept in
// memory only. SIGTERM or SIGINT stops it with exit code 0.
//
// Endpoints:
//
//	POST /token        grant_type=client_credentials; client by HTTP Basic or
//	                   client_id/client_secret form fields; optional scope
//	GET  /jwks         the public key (kid, RS256)
//	GET  /stats        {"tokens_issued":N,"refused":M,"jwks_served":K}
//	POST /fail?count=N the next N token requests get 503 temporarily_unavailable
//
// Broker settings checked with Kafka 3.9.2 and 4.4.0 (listener "sasl_plaintext"):
//
//	listener.name.sasl_plaintext.sasl.enabled.mechanisms=OAUTHBEARER
//	listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
//	listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;
//	sasl.oauthbearer.jwks.endpoint.url=http://HOST:PORT/jwks
//	sasl.oauthbearer.expected.audience=turbo-test
//	sasl.oauthbearer.expected.issuer=turbo-test-oidc   (optional)
//
// and the JVM property -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=http://HOST:PORT/jwks
// (4.x refuses to start without it; 3.9.2 does not need it and accepts it).
// The expected audience is not optional: 4.4 refuses to start without it,
// 3.9 rejects every token that has an aud claim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// shutdownTimeout bounds the wait for requests in flight at SIGTERM.
const shutdownTimeout = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command line.
type options struct {
	listen   string
	addrFile string
	issuer   issuerConfig
}

// parseArgs parses the command line; errors are usage errors (exit 2).
func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("oidc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (port 0: a free one)")
	fs.StringVar(&o.addrFile, "addr-file", "", "file to write HOST:PORT to once listening (required)")
	fs.StringVar(&o.issuer.ClientID, "client-id", "", "the client id allowed to get tokens (required)")
	fs.StringVar(&o.issuer.ClientSecretFile, "client-secret-file", "", "file holding the client secret, read on every token request (required)")
	fs.DurationVar(&o.issuer.Lifetime, "lifetime", 10*time.Minute, "token lifetime, whole seconds")
	fs.StringVar(&o.issuer.Audience, "audience", "turbo-test", "the tokens' aud claim")
	fs.StringVar(&o.issuer.Issuer, "issuer", "turbo-test-oidc", "the tokens' iss claim")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("oidc: unexpected arguments %q", fs.Args())
	}
	if o.addrFile == "" {
		return o, errors.New("oidc: -addr-file is required")
	}
	if err := o.issuer.validate(); err != nil {
		return o, err
	}
	return o, nil
}

// run is the program: it serves until ctx is done, then shuts down. It
// returns the exit code: 0 after a clean stop, 1 on a failure, 2 on a usage
// error.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	logger := log.New(stderr, "oidc: ", log.LstdFlags|log.Lmicroseconds)
	o, err := parseArgs(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			logger.Print(err)
		}
		return 2
	}
	// Fail at start rather than at the first token request when the secret
	// file is missing; its content is not looked at here.
	if _, err := os.Stat(o.issuer.ClientSecretFile); err != nil {
		logger.Printf("the client secret file: %v", err)
		return 2
	}
	is, err := newIssuer(o.issuer, time.Now, logger)
	if err != nil {
		logger.Print(err)
		return 1
	}
	if err := serve(ctx, o, is, logger); err != nil {
		logger.Print(err)
		return 1
	}
	return 0
}

// serve listens, publishes the address and serves until ctx is done.
func serve(ctx context.Context, o options, is *Issuer, logger *log.Logger) error {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("oidc: listening on %s: %w", o.listen, err)
	}
	srv := &http.Server{Handler: is.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	addr := ln.Addr().String()
	if err := writeFileAtomic(o.addrFile, []byte(addr+"\n")); err != nil {
		// Serve owns ln now: Close stops it and closes ln.
		_ = srv.Close()
		<-served
		return err
	}
	logger.Printf("listening on %s (kid %s, issuer %q, audience %q, lifetime %s); addr in %s",
		addr, is.kid, is.cfg.Issuer, is.cfg.Audience, is.cfg.Lifetime, o.addrFile)

	select {
	case err := <-served:
		return fmt.Errorf("oidc: serving: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutErr := srv.Shutdown(shutCtx)
	if shutErr != nil {
		// Requests still running after the bound: cut them.
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("oidc: serving: %w", err)
	}
	if shutErr != nil {
		return fmt.Errorf("oidc: shutting down: %w", shutErr)
	}
	logger.Printf("stopped: %+v", is.stats())
	return nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so a reader sees either no file or all of it.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("oidc: writing %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("oidc: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("oidc: writing %s: %w", path, err)
	}
	return nil
}
