package testkit

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/turbokafka/turbo/actors"
)

// maxBody bounds the value the ledger reads from one request.
const maxBody = 64 << 20

// ServeHTTP is the endpoint for turbo's http handler: the body is the
// record's value, the Kafka-Topic, Kafka-Partition, Kafka-Offset and
// Kafka-Key (base64) headers the rest. The last element of the URL's path
// labels the caller as a member (give each process its own URL); a request
// to the root is labelled by the process that opened the connection when
// served through Endpoint, and is not judged for ownership otherwise. It
// answers 204 after the work, 500 for a failed (or injected) failure, and
// nothing to a caller that went away.
func (l *Ledger) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Reading the whole body first also lets the server notice at once a
	// caller that goes away (its request context is then cancelled).
	value, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p, _ := strconv.Atoi(req.Header.Get("Kafka-Partition"))
	off, _ := strconv.ParseInt(req.Header.Get("Kafka-Offset"), 10, 64)
	hk := req.Header.Get("Kafka-Key")
	key, _ := base64.StdEncoding.DecodeString(hk)
	rec := &actors.Record{Topic: req.Header.Get("Kafka-Topic"), Partition: int32(p), Offset: off, Key: key, Value: value}
	member := strings.TrimPrefix(req.URL.Path, "/")
	if i := strings.LastIndexByte(member, '/'); i >= 0 {
		member = member[i+1:]
	}
	if member == "" {
		member, _ = req.Context().Value(peerKey{}).(string)
	}
	d := l.begin(rec, member, hk != "")
	if d == nil {
		w.WriteHeader(http.StatusNoContent) // not judged: see begin
		return
	}
	if err := d.run(req.Context(), rec, true); err != nil {
		if req.Context().Err() != nil {
			return // nobody to answer
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// peerKey keys the connecting process's member name in a request's context.
type peerKey struct{}

// Endpoint serves the ledger over HTTP for the test (ServeHTTP) and returns
// its URL, closed when the test ends. A caller that posts to URL +
// "/<member>" is judged for ownership as that member; any other as the
// process that opened the connection ("pid:<pid>"), found once per
// connection.
func (l *Ledger) Endpoint(t testing.TB) string {
	srv := httptest.NewUnstartedServer(l)
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if pid := peerPID(c.RemoteAddr().String(), c.LocalAddr().String()); pid != 0 {
			return context.WithValue(ctx, peerKey{}, "pid:"+strconv.Itoa(pid))
		}
		return ctx
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
