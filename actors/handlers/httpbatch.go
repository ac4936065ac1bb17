package handlers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
)

// HandleBatch implements actors.BatchHandler: one POST per batch.
//
// The request's body is application/x-ndjson: one JSON object per record,
// in the batch's order, each on its own line:
//
//	{"topic":"orders","partition":3,"offset":1042,"timestamp":"2026-11-24T16:40:00.123Z",
//	 "key":"b3JkZXItNw==","value":"eyJpZCI6N30=","headers":[{"key":"source","value":"d2Vi"}]}
//
// key is null for a record without one, value null for a tombstone; keys,
// values and header values are base64 — or, with handler.encoding utf8,
// JSON strings when they are valid UTF-8, and under key_base64,
// value_base64 (a header's value_base64) when they are not. The request
// carries Kafka-Batch-Size (the number of lines) and the static headers.
//
// The answer:
//   - 207 Multi-Status with a JSON body {"failed":[{"topic":"orders",
//     "partition":3,"offset":1042,"retryable":true,"error":"…"}]}: the
//     records listed failed (retryable unless "retryable" is false), every
//     other record is done; a listed record not in the batch is ignored. A
//     207 whose body is not exactly that document (see parseMultiStatus:
//     unknown keys, a missing field, no record of the batch listed, data
//     after it, over 1 MiB) fails the whole batch, retryably, wrapping
//     ErrBadMultiStatus.
//   - any other 2xx: every record is done.
//
// With handler.response: outputs, a 2xx answer's body lists the batch's
// outputs as Handle's does, each with "input":{"topic","partition",
// "offset"} naming its record, and a 207's document may list them under
// "outputs" beside "failed" (up to 64 MiB then). An output whose input is
// missing or not in the batch fails the whole batch for good
// (ErrBadOutputs); one the output rules refuse fails its record.
//   - anything else fails the whole batch as Handle fails one record: 408,
//     429 and 5xx retryably (with Retry-After), others for good.
func (h *HTTP) HandleBatch(ctx context.Context, recs []*actors.Record) actors.BatchResult {
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body) // a line per record
	for _, rec := range recs {
		if err := enc.Encode(h.line(rec)); err != nil {
			return actors.BatchFailed(fmt.Errorf("handlers: encoding a batch: %w", errors.Join(err, actors.ErrPermanent)))
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, &body)
	if err != nil {
		return actors.BatchFailed(fmt.Errorf("handlers: http request: %w", errors.Join(err, actors.ErrPermanent)))
	}
	now := time.Now()
	for _, sh := range h.headers {
		if err := sh.set(req.Header, now); err != nil {
			return actors.BatchFailed(err) // retryable: the file may be good again
		}
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Kafka-Batch-Size", strconv.Itoa(len(recs)))
	resp, err := h.client.Do(req)
	if err != nil {
		return actors.BatchFailed(fmt.Errorf("handlers: http post %s: %w", h.shown, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusMultiStatus:
		return h.partial(ctx, resp, recs)
	case resp.StatusCode >= 200 && resp.StatusCode < 300 && h.outputs:
		lines, err := h.readOutputs(resp.Body)
		if err != nil {
			return actors.BatchFailed(err)
		}
		failed, err := h.emitBatch(ctx, recs, lines)
		if err != nil {
			return actors.BatchFailed(err)
		}
		return actors.BatchResult{Failed: failed}
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain)); err != nil {
			return actors.BatchFailed(fmt.Errorf("handlers: http post %s: status %d, but the answer broke off: %w", h.shown, resp.StatusCode, err))
		}
		return actors.BatchResult{}
	}
	return actors.BatchFailed(statusFailure(resp))
}

// statusFailure is the failure a non-2xx answer stands for: retryable or
// permanent by its status, with its Retry-After.
func statusFailure(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	serr := &StatusError{Status: resp.StatusCode, Body: string(bytes.TrimSpace(body))}
	if Retryable(resp.StatusCode) {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return actors.RetryAfter(d, serr)
		}
	}
	return serr
}

// partial reads a 207 answer: which records failed, and how (see
// parseMultiStatus). An answer that is not the document fails the whole
// batch, retryably.
func (h *HTTP) partial(ctx context.Context, resp *http.Response, recs []*actors.Record) actors.BatchResult {
	// One byte more than the limit, so a body over it is told from one at it.
	limit := int64(maxDrain)
	if h.outputs {
		limit = maxOutputsBody
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return actors.BatchFailed(fmt.Errorf("handlers: http post %s: status 207, but the answer broke off: %w", h.shown, err))
	}
	batch := make([]recordID, len(recs))
	for i, rec := range recs {
		batch[i] = recordID{rec.Topic, rec.Partition, rec.Offset}
	}
	failed, outputs, err := parseMultiStatus(body, batch, h.outputs)
	if err != nil {
		return actors.BatchFailed(fmt.Errorf("handlers: http post %s: %w: %s", h.shown, ErrBadMultiStatus, truncated(err.Error(), 512)))
	}
	res := actors.BatchResult{Failed: make(map[int]error, len(failed))}
	if outputs != nil {
		lines, err := h.readOutputs(bytes.NewReader(outputs))
		if err != nil {
			return actors.BatchFailed(err)
		}
		emitted, err := h.emitBatch(ctx, recs, lines)
		if err != nil {
			return actors.BatchFailed(err)
		}
		for i, err := range emitted {
			res.Failed[i] = err
		}
	}
	for i, f := range failed {
		rec := recs[i]
		err := fmt.Errorf("handlers: http post %s: %s/%d@%d failed: %s", h.shown, rec.Topic, rec.Partition, rec.Offset, truncated(f.reason, 512))
		if f.permanent {
			err = errors.Join(err, actors.ErrPermanent)
		}
		res.Failed[i] = err
	}
	return res
}

func truncated(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// line is one record of a batch body.
type line struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   string       `json:"timestamp"`
	Key         *string      `json:"key"`
	KeyBase64   *string      `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 *string      `json:"value_base64,omitempty"`
	Headers     []lineHeader `json:"headers,omitempty"`
}

type lineHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

func (h *HTTP) line(rec *actors.Record) line {
	l := line{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UTC().Format(time.RFC3339Nano)}
	l.Key, l.KeyBase64 = h.bytes(rec.Key)
	l.Value, l.ValueBase64 = h.bytes(rec.Value)
	for _, hd := range rec.Headers {
		lh := lineHeader{Key: hd.Key}
		lh.Value, lh.ValueBase64 = h.bytes(hd.Value)
		l.Headers = append(l.Headers, lh)
	}
	return l
}

// bytes encodes b for a batch body: plain (utf8 encoding, valid UTF-8) or
// base64 in the first result, or base64 in the second when utf8 encoding
// meets bytes that are not UTF-8; nil for nil.
func (h *HTTP) bytes(b []byte) (plain, b64 *string) {
	if b == nil {
		return nil, nil
	}
	if h.encoding == config.EncodingUTF8 {
		if utf8.Valid(b) {
			s := string(b)
			return &s, nil
		}
		s := base64.StdEncoding.EncodeToString(b)
		return nil, &s
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, nil
}
