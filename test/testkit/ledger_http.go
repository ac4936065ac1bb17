package testkit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
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
//
// A batch (Content-Type application/x-ndjson, the http handler's batch
// contract) is handled a record after the other, in order; a record after
// a failed one of its unit is skipped (turbo counts it as not run), and the
// failures are answered as a 207.
func (l *Ledger) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	l.requests.Add(1)
	// Reading the whole body first also lets the server notice at once a
	// caller that goes away (its request context is then cancelled).
	value, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.Header.Get("Content-Type") == "application/x-ndjson" {
		l.serveBatch(w, req, value)
		return
	}
	p, _ := strconv.Atoi(req.Header.Get("Kafka-Partition"))
	off, _ := strconv.ParseInt(req.Header.Get("Kafka-Offset"), 10, 64)
	hk := req.Header.Get("Kafka-Key")
	key, _ := base64.StdEncoding.DecodeString(hk)
	rec := &actors.Record{Topic: req.Header.Get("Kafka-Topic"), Partition: int32(p), Offset: off, Key: key, Value: value}
	d := l.begin(rec, memberOf(req), hk != "")
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

// peerKey keys a connection's *peer in its requests' contexts.
type peerKey struct{}

// peer is the process at the other end of a connection, looked up once, by
// the first request that needs it: not in the server's accept loop, where a
// slow lookup would hold up every connection behind it (and requests whose
// caller gave up meanwhile would be judged when they arrived).
type peer struct {
	remote, local string
	once          sync.Once
	name          string // "pid:<pid>", or "" when it cannot tell
}

func (p *peer) member() string {
	p.once.Do(func() {
		if pid := peerPID(p.remote, p.local); pid != 0 {
			p.name = "pid:" + strconv.Itoa(pid)
		}
	})
	return p.name
}

// Endpoint serves the ledger over HTTP for the test (ServeHTTP) and returns
// its URL, closed when the test ends. A caller that posts to URL +
// "/<member>" is judged for ownership as that member; any other as the
// process that opened the connection ("pid:<pid>"), found once per
// connection.
func (l *Ledger) Endpoint(t testing.TB) string {
	srv := httptest.NewUnstartedServer(l)
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, peerKey{}, &peer{remote: c.RemoteAddr().String(), local: c.LocalAddr().String()})
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// memberOf is the member a request is judged as (see ServeHTTP).
func memberOf(req *http.Request) string {
	member := strings.TrimPrefix(req.URL.Path, "/")
	if i := strings.LastIndexByte(member, '/'); i >= 0 {
		member = member[i+1:]
	}
	if p, ok := req.Context().Value(peerKey{}).(*peer); ok && member == "" {
		member = p.member()
	}
	return member
}

// batchLine is one record of a batch body (base64 encoding).
type batchLine struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

// batchFailure is one entry of a 207 answer.
type batchFailure struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Retryable bool   `json:"retryable"`
	Error     string `json:"error"`
}

// serveBatch handles a batch body's records in order (see ServeHTTP).
func (l *Ledger) serveBatch(w http.ResponseWriter, req *http.Request, body []byte) {
	var recs []*actors.Record
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var ln batchLine
		if err := dec.Decode(&ln); err == io.EOF {
			break
		} else if err != nil {
			http.Error(w, "a batch line: "+err.Error(), http.StatusBadRequest)
			return
		}
		rec := &actors.Record{Topic: ln.Topic, Partition: ln.Partition, Offset: ln.Offset}
		if ln.Key != nil {
			rec.Key, _ = base64.StdEncoding.DecodeString(*ln.Key)
		}
		if ln.Value != nil {
			rec.Value, _ = base64.StdEncoding.DecodeString(*ln.Value)
		}
		recs = append(recs, rec)
	}
	errs, gone := l.handleBatch(req.Context(), recs, memberOf(req))
	if gone {
		return // nobody to answer
	}
	var failed []batchFailure
	for i, err := range errs {
		if err != nil {
			failed = append(failed, batchFailure{Topic: recs[i].Topic, Partition: recs[i].Partition, Offset: recs[i].Offset, Retryable: true, Error: err.Error()})
		}
	}
	if len(failed) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMultiStatus)
	_ = json.NewEncoder(w).Encode(map[string]any{"failed": failed})
}

// handleBatch runs a batch's records one after the other, as member; a
// record after a failed one of its unit is skipped (turbo counts it as not
// run). It returns each record's failure, nil for the done and the skipped,
// and whether the caller went away meanwhile.
func (l *Ledger) handleBatch(ctx context.Context, recs []*actors.Record, member string) (errs []error, gone bool) {
	errs = make([]error, len(recs))
	skip := map[string]bool{} // units with a failed record in this batch
	for i, rec := range recs {
		unit := ledgerKey(rec)
		if l.UnitOf != nil {
			unit = l.UnitOf(rec)
		}
		if skip[unit] {
			continue
		}
		d := l.begin(rec, member, rec.Key != nil)
		if d == nil {
			continue
		}
		if err := d.run(ctx, rec, true); err != nil {
			if ctx.Err() != nil {
				return errs, true
			}
			skip[unit] = true
			errs[i] = err
		}
	}
	return errs, false
}

// Requests is how many HTTP requests the ledger served: with batches, fewer
// than its deliveries.
func (l *Ledger) Requests() int { return int(l.requests.Load()) }
