package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
)

// TestStaticHeaders: handler.headers reach the endpoint from each source; a
// rotated file is sent from the next look at it (within a second); a file
// gone bad fails the attempt as retryable, naming the file and not the
// value, and the next good one is used again.
func TestStaticHeaders(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	defer srv.Close()
	last := func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}
	token := filepath.Join(t.TempDir(), "token")
	write := func(v string) {
		t.Helper()
		if err := os.WriteFile(token, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-token\n")
	t.Setenv("TURBO_TEST_API_KEY", "key-from-env")
	h, err := NewHTTPWith(srv.URL, 5*time.Second, 4, []config.HTTPHeader{
		{Name: "authorization", ValueFile: token, Prefix: "Bearer "},
		{Name: "X-Team", Value: "orders"},
		{Name: "X-Api-Key", ValueEnv: "TURBO_TEST_API_KEY"},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &actors.Record{Topic: "t", Value: []byte("v")}
	if err := h.Handle(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	hd := last()
	if hd.Get("Authorization") != "Bearer first-token" || hd.Get("X-Team") != "orders" || hd.Get("X-Api-Key") != "key-from-env" || hd.Get("Kafka-Topic") != "t" {
		t.Fatalf("headers sent: %v", hd)
	}

	write("second-token-longer\n") // rotated: a different size, whatever the clock's resolution
	deadline := time.Now().Add(5 * time.Second)
	for last().Get("Authorization") != "Bearer second-token-longer" {
		if time.Now().After(deadline) {
			t.Fatalf("the rotated token was not sent within 5 s (still %q)", last().Get("Authorization"))
		}
		if err := h.Handle(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}

	write("") // gone bad
	deadline = time.Now().Add(5 * time.Second)
	var ferr error
	for ferr == nil {
		if time.Now().After(deadline) {
			t.Fatal("an empty token file was not noticed within 5 s")
		}
		ferr = h.Handle(context.Background(), rec)
	}
	if !strings.Contains(ferr.Error(), token) || strings.Contains(ferr.Error(), "second-token") || errors.Is(ferr, actors.ErrPermanent) {
		t.Fatalf("error %q: want a retryable error naming %s, without the old value", ferr, token)
	}
	write("third-token\n")
	deadline = time.Now().Add(5 * time.Second)
	for {
		if err := h.Handle(context.Background(), rec); err == nil && last().Get("Authorization") == "Bearer third-token" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the good file again was not used within 5 s")
		}
	}
}

// TestStaticHeaderFromAMissingEnv: a header whose variable is not set is a
// configuration error naming the header and the variable.
func TestStaticHeaderFromAMissingEnv(t *testing.T) {
	_, err := NewHTTPWith("http://127.0.0.1:1/x", time.Second, 1, []config.HTTPHeader{{Name: "X-Api-Key", ValueEnv: "TURBO_TEST_NOT_SET_ANYWHERE"}})
	if err == nil || !strings.Contains(err.Error(), "X-Api-Key") || !strings.Contains(err.Error(), "TURBO_TEST_NOT_SET_ANYWHERE") {
		t.Fatalf("error %v: want one naming the header and the variable", err)
	}
}

// TestUnixSocketURL: unix:///path.sock:/records posts over the socket to
// /records; an error names the URL as configured.
func TestUnixSocketURL(t *testing.T) {
	dir, err := os.MkdirTemp("", "turbo-sock") // t.TempDir() may exceed a socket path's 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "app.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	paths := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path + " " + r.Header.Get("Kafka-Offset")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h := NewHTTP("unix://"+sock+":/records", 5*time.Second, 2)
	if err := h.Handle(context.Background(), &actors.Record{Topic: "t", Offset: 7}); err != nil {
		t.Fatal(err)
	}
	if got := <-paths; got != "/records 7" {
		t.Fatalf("the endpoint got %q, want /records for offset 7", got)
	}
	gone := NewHTTP("unix://"+filepath.Join(dir, "none.sock")+":/x", time.Second, 1)
	err = gone.Handle(context.Background(), &actors.Record{Topic: "t"})
	if err == nil || !strings.Contains(err.Error(), "unix://"+filepath.Join(dir, "none.sock")+":/x") {
		t.Fatalf("error %v: want one naming the configured URL", err)
	}
}
