package handlers

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
)

// rawServer answers every connection with the bytes of answer, written
// straight to the socket after the request was read, then closes it: what a
// crashing endpoint or a cut connection looks like to the client.
func rawServer(t *testing.T, answer string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("server: hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString(answer)
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A 2xx whose body breaks off (the connection closed before Content-Length
// bytes, or a chunked body without its last chunk) is not an answer the
// endpoint finished: it is a retryable failure, not a success.
func TestHTTPTruncatedBodyIsRetryable(t *testing.T) {
	tests := []struct {
		name, answer string
	}{
		{"content-length 100, 7 bytes sent", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\naccepte"},
		{"chunked without the last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\naccepte\r\n"},
		{"201, content-length 2, 1 byte sent", "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, tt.answer)
			err := receive(t, handleAsync(context.Background(), NewHTTP(srv.URL, 5*time.Second, 1), testRecord()), "Handle")
			if err == nil {
				t.Fatalf("answer %q: Handle = nil, a broken answer counted as success", tt.answer)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("Handle = %v, want an error matching io.ErrUnexpectedEOF", err)
			}
			if errors.Is(err, actors.ErrPermanent) {
				t.Errorf("Handle = %v matches ErrPermanent; a broken answer is retryable", err)
			}
		})
	}
}

// A 2xx with an endless body is a success once its status arrived: the
// handler reads at most 1 MiB of it (so a short body lets the connection be
// reused) and then drops the connection instead of reading forever.
func TestHTTPEndlessSuccessBodyIsNotReadForever(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		w.WriteHeader(http.StatusOK)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	err := receive(t, handleAsync(context.Background(), NewHTTP(srv.URL, 30*time.Second, 1), testRecord()), "Handle of an endless 200")
	if err != nil {
		t.Errorf("Handle = %v, want nil: the status was 200", err)
	}
}

// A body within the limit is read to its end, so the connection goes back
// to the pool: a second record reuses it.
func TestHTTPShortSuccessBodyKeepsTheConnection(t *testing.T) {
	conns := make(chan net.Conn, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("y", 100<<10))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns <- c
		}
	}
	srv.Start()
	defer srv.Close()
	h := NewHTTP(srv.URL, 5*time.Second, 1)
	for i := range 2 {
		if err := h.Handle(context.Background(), testRecord()); err != nil {
			t.Fatalf("request %d: Handle = %v", i, err)
		}
	}
	if n := len(conns); n != 1 {
		t.Errorf("%d connections for 2 requests with 100 KiB answers, want 1 (kept alive)", n)
	}
}
