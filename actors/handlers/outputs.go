package handlers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
)

// ErrBadOutputs fails a record, for good, whose answer lists outputs that
// cannot be read (handler.response: outputs): the endpoint has handled the
// record, and what it meant to write is unknown.
var ErrBadOutputs = errors.New("handlers: the answer's outputs were not understood")

// maxOutputsBody bounds the body read for outputs (output.max_per_record
// outputs of output.max_bytes, base64 and all, may need more: such an
// endpoint batches less).
const maxOutputsBody = 64 << 20

// outputLine is one output as an answer lists it (see the handlers guide):
// the topic (empty: output.topic), key and value encoded as the request's
// batch lines are (handler.encoding), headers, and in a batch answer the
// record it is for.
type outputLine struct {
	Topic       string       `json:"topic"`
	Key         *string      `json:"key"`
	KeyBase64   *string      `json:"key_base64"`
	Value       *string      `json:"value"`
	ValueBase64 *string      `json:"value_base64"`
	Headers     []lineHeader `json:"headers"`
	Input       *inputID     `json:"input"`
}

// inputID names the record of a batch an output is for.
type inputID struct {
	Topic     *string `json:"topic"`
	Partition *int32  `json:"partition"`
	Offset    *int64  `json:"offset"`
}

// readOutputs reads an answer's body for outputs: empty (no outputs), or
// JSON objects one after the other (application/x-ndjson: one per line), or
// a JSON list of them. A body that broke off is retryable (the endpoint did
// not finish answering); anything else wrong fails for good.
func (h *HTTP) readOutputs(body io.Reader) ([]outputLine, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxOutputsBody+1))
	if err != nil {
		return nil, fmt.Errorf("handlers: http post %s: the answer broke off: %w", h.shown, err)
	}
	if len(data) > maxOutputsBody {
		return nil, h.badOutputs(fmt.Errorf("the body is over %s", config.ByteSize(maxOutputsBody)))
	}
	// One pass, one strict decoder: each value is decoded where it starts
	// (an object, or a list of them), without a copy of it first.
	var lines []outputLine
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	for {
		c, ok := nextValue(data, dec.InputOffset())
		if !ok {
			return lines, nil
		}
		var err error
		switch c {
		case '{':
			lines = append(lines, outputLine{})
			err = dec.Decode(&lines[len(lines)-1])
		case '[':
			var list []outputLine
			if err = dec.Decode(&list); err == nil {
				lines = append(lines, list...)
			}
		default:
			var other json.RawMessage
			if err = dec.Decode(&other); err == nil {
				err = errors.New("not a JSON object")
			}
		}
		if err != nil {
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("not JSON: %w", err)
			}
			return nil, h.badOutputs(fmt.Errorf("output %d: %w", len(lines), err))
		}
	}
}

// nextValue returns the first byte of data from off that is not JSON
// whitespace, and false at the end.
func nextValue(data []byte, off int64) (byte, bool) {
	for _, c := range data[off:] {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c, true
		}
	}
	return 0, false
}

func (h *HTTP) badOutputs(err error) error {
	return fmt.Errorf("%w (http post %s): %w", ErrBadOutputs, h.shown, errors.Join(err, actors.ErrPermanent))
}

// output turns a line into the actors.Output it stands for.
func (h *HTTP) output(l *outputLine) (actors.Output, error) {
	o := actors.Output{Topic: l.Topic}
	var err error
	if o.Key, err = h.unbytes("key", l.Key, l.KeyBase64); err != nil {
		return o, err
	}
	if o.Value, err = h.unbytes("value", l.Value, l.ValueBase64); err != nil {
		return o, err
	}
	for i, lh := range l.Headers {
		v, err := h.unbytes(fmt.Sprintf("headers[%d].value", i), lh.Value, lh.ValueBase64)
		if err != nil {
			return o, err
		}
		o.Headers = append(o.Headers, actors.Header{Key: lh.Key, Value: v})
	}
	return o, nil
}

// unbytes decodes a key, value or header value as the request's batch lines
// encode them: under name, base64 (or, with handler.encoding utf8, the
// string's UTF-8 bytes), or base64 under name_base64; null or absent: nil.
func (h *HTTP) unbytes(name string, plain, b64 *string) ([]byte, error) {
	switch {
	case plain != nil && b64 != nil:
		return nil, fmt.Errorf("both %s and %s_base64", name, name)
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_base64: %w", name, err)
		}
		return b, nil
	case plain == nil:
		return nil, nil
	case h.encoding == config.EncodingUTF8:
		return []byte(*plain), nil
	}
	b, err := base64.StdEncoding.DecodeString(*plain)
	if err != nil {
		return nil, fmt.Errorf("%s (base64, handler.encoding): %w", name, err)
	}
	return b, nil
}

// emitOne emits the outputs an answer to one record lists; an "input", if
// given, must be that record.
func (h *HTTP) emitOne(ctx context.Context, rec *actors.Record, body io.Reader) error {
	lines, err := h.readOutputs(body)
	if err != nil {
		return err
	}
	outs := make([]actors.Output, 0, len(lines))
	for i := range lines {
		if in := lines[i].Input; in != nil && !in.names(rec) {
			return h.badOutputs(fmt.Errorf("output %d: its input is not the record posted (%s/%d@%d)", i, rec.Topic, rec.Partition, rec.Offset))
		}
		o, err := h.output(&lines[i])
		if err != nil {
			return h.badOutputs(fmt.Errorf("output %d: %w", i, err))
		}
		outs = append(outs, o)
	}
	if len(outs) == 0 {
		return nil
	}
	return actors.Emit(ctx, rec, outs...)
}

// emitBatch emits the outputs an answer to a batch lists, each for the
// record its "input" names; it returns the records' failures (by index),
// or the batch's when the outputs cannot be read or name a record that is
// not in the batch.
func (h *HTTP) emitBatch(ctx context.Context, recs []*actors.Record, lines []outputLine) (map[int]error, error) {
	at := make(map[recordID]int, len(recs))
	for i, rec := range recs {
		at[recordID{rec.Topic, rec.Partition, rec.Offset}] = i
	}
	byRec := make(map[int][]actors.Output)
	for n := range lines {
		in := lines[n].Input
		if in == nil || in.Topic == nil || in.Partition == nil || in.Offset == nil {
			return nil, h.badOutputs(fmt.Errorf(`output %d: "input" {"topic","partition","offset"} is required in a batch's answer`, n))
		}
		i, ok := at[recordID{*in.Topic, *in.Partition, *in.Offset}]
		if !ok {
			return nil, h.badOutputs(fmt.Errorf("output %d: its input %s/%d@%d is not in the batch", n, *in.Topic, *in.Partition, *in.Offset))
		}
		o, err := h.output(&lines[n])
		if err != nil {
			return nil, h.badOutputs(fmt.Errorf("output %d: %w", n, err))
		}
		byRec[i] = append(byRec[i], o)
	}
	var failed map[int]error
	for i, outs := range byRec {
		if err := actors.Emit(ctx, recs[i], outs...); err != nil {
			if failed == nil {
				failed = make(map[int]error)
			}
			failed[i] = err
		}
	}
	return failed, nil
}

// names reports whether the input names rec (the fields given must match).
func (in *inputID) names(rec *actors.Record) bool {
	return (in.Topic == nil || *in.Topic == rec.Topic) &&
		(in.Partition == nil || *in.Partition == rec.Partition) &&
		(in.Offset == nil || *in.Offset == rec.Offset)
}
