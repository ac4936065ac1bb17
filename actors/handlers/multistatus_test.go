package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
)

// The entries of batchRecs, as a 207 answer names them.
const (
	msA = `{"topic":"orders","partition":3,"offset":1042,"retryable":true,"error":"busy"}`
	msB = `{"topic":"orders","partition":3,"offset":1043,"retryable":false,"error":"bad value"}`
	msC = `{"topic":"orders","partition":1,"offset":1042,"retryable":true}`
)

// badMultiStatus are 207 bodies that are not the document, each with what
// the refusal must say. Each once counted every record of the batch done.
var badMultiStatus = []struct {
	name, body, says string
}{
	{"empty object", `{}`, `"failed" is missing`},
	{"failed null", `{"failed":null}`, `"failed" must be a list`},
	{"failed an object", `{"failed":{}}`, `"failed" must be a list`},
	{"failed empty", `{"failed":[]}`, "lists no record"},
	{"misspelt key", `{"failures":[` + msA + `,` + msB + `,` + msC + `]}`, `unknown key "failures"`},
	{"key in another case", `{"Failed":[` + msA + `]}`, `unknown key "Failed"`},
	{"unknown key beside failed", `{"failed":[` + msA + `],"retry_after":5}`, `unknown key "retry_after"`},
	{"failed twice", `{"failed":[` + msA + `],"failed":[` + msC + `]}`, `"failed" appears twice`},
	{"entry without topic", `{"failed":[{"partition":3,"offset":1043,"retryable":true}]}`, `failed[0]: "topic" is missing`},
	{"entry without partition", `{"failed":[{"topic":"orders","offset":1043}]}`, `failed[0]: "partition" is missing`},
	{"entry without offset", `{"failed":[` + msA + `,{"topic":"orders","partition":3}]}`, `failed[1]: "offset" is missing`},
	{"entry with a null topic", `{"failed":[{"topic":null,"partition":3,"offset":1043}]}`, `failed[0]: "topic" must be a string`},
	{"entry with a quoted partition", `{"failed":[{"topic":"orders","partition":"3","offset":1043}]}`, `failed[0]: "partition" must be an integer`},
	{"entry with a fractional offset", `{"failed":[{"topic":"orders","partition":3,"offset":1043.5}]}`, `failed[0]: "offset" must be an integer`},
	{"entry with a partition beyond int32", `{"failed":[{"topic":"orders","partition":4294967299,"offset":1043}]}`, `failed[0]: "partition" must be an integer`},
	{"entry with retryable a string", `{"failed":[{"topic":"orders","partition":3,"offset":1043,"retryable":"yes"}]}`, `failed[0]: "retryable" must be true or false`},
	{"entry with an unknown key", `{"failed":[{"topic":"orders","partition":3,"offset":1043,"retry":false}]}`, `failed[0]: unknown key "retry"`},
	{"entry not an object", `{"failed":[1]}`, `failed[0]: not a JSON object`},
	{"names no record of the batch", `{"failed":[{"topic":"orders","partition":9,"offset":1}]}`, "names none of the batch's records"},
	{"garbage after the object", `{"failed":[` + msB + `]}garbage`, "after the JSON object"},
	{"a second object", `{"failed":[` + msB + `]} {"failed":[]}`, "after the JSON object"},
	{"not an object", `[` + msB + `]`, "not a JSON object"},
	{"null", `null`, "not a JSON object"},
	{"html", `<html>`, "not a JSON object"},
	{"empty body", ``, "not a JSON object"},
	{"truncated", `{"failed":[` + msB, "not a JSON object"},
	{"over 1 MiB", `{"failed":[` + msB + `]}` + strings.Repeat(" ", maxDrain), "over 1MiB"},
}

// A 207 that is not the document fails the whole batch, retryably, with a
// message that says what was wrong; no record of the batch counts as done.
func TestHTTPBatchBadMultiStatus(t *testing.T) {
	for _, tt := range badMultiStatus {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _ := batchServer(t, http.StatusMultiStatus, tt.body, nil)
			recs := batchRecs()
			res := NewHTTP(srv.URL, 5*time.Second, 1).HandleBatch(context.Background(), recs)
			for i := range recs {
				if err, ok := res.Failed[i]; (!ok || err == nil) && res.Err == nil {
					t.Errorf("record %d counts as done", i)
				}
			}
			if len(res.Failed) != 0 {
				t.Errorf("Failed = %v, want the whole batch failed (Err) and no record's own outcome", res.Failed)
			}
			if !errors.Is(res.Err, ErrBadMultiStatus) || errors.Is(res.Err, actors.ErrPermanent) {
				t.Fatalf("Err = %v, want a retryable ErrBadMultiStatus", res.Err)
			}
			msg := res.Err.Error()
			if !strings.Contains(msg, tt.says) {
				t.Errorf("Err = %q, want it to say %q", msg, tt.says)
			}
			if len(msg) > 1024 || strings.Contains(msg, "bad value") {
				t.Errorf("Err is %d bytes or shows an entry's content: %.300q", len(msg), msg)
			}
		})
	}
}

// A 207 that is the document: only the records it names fail, and a
// record's retryable absent (or null) means retryable — only an explicit
// false is permanent.
func TestHTTPBatchMultiStatusRetryable(t *testing.T) {
	for _, tt := range []struct {
		name      string
		body      string
		permanent map[int]bool // failed records: permanent or not
	}{
		{"retryable absent", `{"failed":[{"topic":"orders","partition":3,"offset":1043,"error":"busy"}]}`, map[int]bool{1: false}},
		{"retryable null, error null", `{"failed":[{"topic":"orders","partition":3,"offset":1043,"retryable":null,"error":null}]}`, map[int]bool{1: false}},
		{"retryable false", `{"failed":[{"topic":"orders","partition":1,"offset":1042,"retryable":false}]}`, map[int]bool{2: true}},
		{"all three, and one not in the batch", `{"failed":[` + msA + `,` + msB + `,` + msC + `,{"topic":"orders","partition":9,"offset":1}]}` + "\n", map[int]bool{0: false, 1: true, 2: false}},
		{"listed twice, permanent once", `{"failed":[` + msB + `,{"topic":"orders","partition":3,"offset":1043,"retryable":true}]}`, map[int]bool{1: false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _ := batchServer(t, http.StatusMultiStatus, tt.body, nil)
			res := NewHTTP(srv.URL, 5*time.Second, 1).HandleBatch(context.Background(), batchRecs())
			if res.Err != nil || len(res.Failed) != len(tt.permanent) {
				t.Fatalf("result %+v, want exactly records %v failed", res, tt.permanent)
			}
			for i, perm := range tt.permanent {
				err := res.Failed[i]
				if err == nil || errors.Is(err, actors.ErrPermanent) != perm {
					t.Errorf("record %d: %v, want failed, permanent %v", i, err, perm)
				}
			}
		})
	}
}

// batchIDs names batchRecs as a 207 answer does.
func batchIDs() []recordID {
	var ids []recordID
	for _, r := range batchRecs() {
		ids = append(ids, recordID{r.Topic, r.Partition, r.Offset})
	}
	return ids
}

// TestParseMultiStatus: the parser alone, on every body above and on good
// ones, with what it makes of each.
func TestParseMultiStatus(t *testing.T) {
	for _, tt := range badMultiStatus {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			got, _, err := parseMultiStatus([]byte(tt.body), batchIDs(), false)
			if err == nil || got != nil {
				t.Fatalf("accepted as %v, want refused saying %q", got, tt.says)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q, want it to say %q", err, tt.says)
			}
		})
	}
	for _, tt := range []struct {
		name, body string
		want       map[int]msFailure
	}{
		{"one failed", `{"failed":[` + msB + `]}`, map[int]msFailure{1: {permanent: true, reason: "bad value"}}},
		{"whitespace around", " \n\t{ \"failed\" : [ " + msA + " ] }\r\n ", map[int]msFailure{0: {reason: "busy"}}},
		{"all failed", `{"failed":[` + msC + `,` + msB + `,` + msA + `]}`, map[int]msFailure{0: {reason: "busy"}, 1: {permanent: true, reason: "bad value"}, 2: {}}},
		{"retryable absent or null", `{"failed":[{"topic":"orders","partition":3,"offset":1042},{"topic":"orders","partition":3,"offset":1043,"retryable":null,"error":null}]}`,
			map[int]msFailure{0: {}, 1: {}}},
		{"others ignored", `{"failed":[{"topic":"orders","partition":3,"offset":7},{"topic":"refunds","partition":1,"offset":1042},` + msC + `]}`, map[int]msFailure{2: {}}},
		{"named twice: permanent only if both say so", `{"failed":[` + msB + `,{"topic":"orders","partition":3,"offset":1043,"retryable":true}]}`,
			map[int]msFailure{1: {reason: "bad value"}}},
		{"named twice, permanent both times", `{"failed":[` + msB + `,` + msB + `]}`, map[int]msFailure{1: {permanent: true, reason: "bad value"}}},
		{"negative numbers are integers", `{"failed":[` + msA + `,{"topic":"orders","partition":-1,"offset":-1}]}`, map[int]msFailure{0: {reason: "busy"}}},
		{"exactly 1 MiB", `{"failed":[` + msA + `]}` + strings.Repeat(" ", maxDrain-len(`{"failed":[`+msA+`]}`)), map[int]msFailure{0: {reason: "busy"}}},
	} {
		t.Run("accepted/"+tt.name, func(t *testing.T) {
			got, _, err := parseMultiStatus([]byte(tt.body), batchIDs(), false)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzMultiStatus: parseMultiStatus never panics, and when it accepts a
// body, every record it marks failed is in the batch, at least one is, and
// each is named by an entry of the body (checked with a lenient decoding of
// its own); one marked permanent has only entries saying "retryable": false.
func FuzzMultiStatus(f *testing.F) {
	for _, tt := range badMultiStatus {
		if len(tt.body) < 4096 {
			f.Add([]byte(tt.body))
		}
	}
	for _, s := range []string{
		`{"failed":[` + msA + `,` + msB + `,` + msC + `]}`,
		`{"failed":[` + msB + `,{"topic":"orders","partition":3,"offset":1043,"retryable":true}]}`,
		`{"failed":[{"topic":"orders","partition":3,"offset":1042,"retryable":null,"error":null},{"topic":"x","partition":0,"offset":0}]}`,
		`{"failed":[{"topic":"orders","partition":3,"offset":1042e0}]}`,
		`{"failed":[{"topic":"orde\u0072s","partition":1,"offset":1042}]}`,
	} {
		f.Add([]byte(s))
	}
	batch := batchIDs()
	f.Fuzz(func(t *testing.T, body []byte) {
		got, _, err := parseMultiStatus(body, batch, false)
		if err != nil {
			if got != nil {
				t.Fatalf("refused (%v) but returned %v", err, got)
			}
			return
		}
		if len(got) == 0 {
			t.Fatalf("accepted %q with no record of the batch failed", body)
		}
		var doc struct {
			Failed []map[string]any `json:"failed"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
		}
		for i, fl := range got {
			if i < 0 || i >= len(batch) {
				t.Fatalf("index %d failed, outside the batch of %d", i, len(batch))
			}
			named, allFalse := 0, true
			for _, e := range doc.Failed {
				p, _ := e["partition"].(float64)
				o, _ := e["offset"].(float64)
				if e["topic"] == batch[i].topic && p == float64(batch[i].partition) && o == float64(batch[i].offset) {
					named++
					if e["retryable"] != false {
						allFalse = false
					}
				}
			}
			if named == 0 {
				t.Fatalf("record %d (%v) marked failed, but no entry of %q names it", i, batch[i], body)
			}
			if fl.permanent != allFalse {
				t.Fatalf("record %d: permanent %v, but its %d entries say retryable:false all %v (%q)", i, fl.permanent, named, allFalse, body)
			}
		}
	})
}
