package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/turbokafka/turbo/config"
)

// ErrBadMultiStatus fails a batch whose 207 answer is not the document
// parseMultiStatus reads; HandleBatch wraps it, retryably, with what was
// wrong.
var ErrBadMultiStatus = errors.New(`handlers: a 207 answer was not understood (its body must be {"failed":[{"topic","partition","offset","retryable","error"}]})`)

// recordID names a record of a batch, as a 207 answer's entry does.
type recordID struct {
	topic     string
	partition int32
	offset    int64
}

// msFailure is what a 207 answer says of one record of the batch.
type msFailure struct {
	permanent bool   // only an explicit "retryable": false
	reason    string // the entry's "error", as the downstream wrote it
}

// parseMultiStatus reads the body of a 207 answer to a batch: which of the
// batch's records failed (by index in batch), and how. A 207 counts every
// record it does not name as done, so anything short of the documented
// document is refused (and HandleBatch fails the whole batch, retryably):
// a misspelt key, a missing field or a stray byte must not turn records
// into commits. The body must be exactly one JSON object, with nothing but
// whitespace after it and at most maxDrain bytes, whose only key is
// "failed": a list of entries whose keys are "topic" (a string),
// "partition" and "offset" (integers), all three required, and optionally
// "retryable" (true or false; absent or null means true, since a retry is
// never a loss while retry.max_attempts bounds it) and "error" (a string
// or null). Keys are matched exactly, once each. At least one entry must
// name a record of the batch: a 207 is a partial failure, and a list that
// names none (an empty one included) more likely says the downstream
// misread the batch than that all is done, which 200 says. Entries naming
// records not in the batch are ignored. A record named twice is permanent
// only if every entry naming it says so.
//
// Its errors say what was wrong with the body without quoting it beyond a
// key name (clipped): the body may echo the records.
func parseMultiStatus(body []byte, batch []recordID, withOutputs bool) (map[int]msFailure, json.RawMessage, error) {
	limit := maxDrain
	if withOutputs {
		limit = maxOutputsBody
	}
	if len(body) > limit {
		return nil, nil, fmt.Errorf("the body is over %s", config.ByteSize(limit))
	}
	top, keys, err := jsonObject(body)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		if k != "failed" && (k != "outputs" || !withOutputs) {
			return nil, nil, fmt.Errorf("unknown key %s", quoteKey(k))
		}
	}
	outputs := top["outputs"]
	if outputs != nil && isNull(outputs) {
		outputs = nil
	}
	if outputs != nil && outputs[0] != '[' {
		return nil, nil, errors.New(`"outputs" must be a list of outputs`)
	}
	failed, err := parseFailed(top, batch)
	return failed, outputs, err
}

// parseFailed reads the "failed" list of a 207 answer (parseMultiStatus).
func parseFailed(top map[string]json.RawMessage, batch []recordID) (map[int]msFailure, error) {
	raw, ok := top["failed"]
	if !ok {
		return nil, errors.New(`"failed" is missing`)
	}
	var list []json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &list) != nil {
		return nil, errors.New(`"failed" must be a list of entries`)
	}
	if len(list) == 0 {
		return nil, errors.New(`"failed" lists no record (a 207 is for a partial failure; 200 means every record is done)`)
	}
	at := make(map[recordID]int, len(batch))
	for i, id := range batch {
		if _, dup := at[id]; !dup {
			at[id] = i
		}
	}
	failed := make(map[int]msFailure)
	for n, raw := range list {
		id, f, err := parseEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("failed[%d]: %w", n, err)
		}
		i, ok := at[id]
		if !ok {
			continue
		}
		if prev, twice := failed[i]; twice {
			f.permanent = f.permanent && prev.permanent
			if f.reason == "" {
				f.reason = prev.reason
			}
		}
		failed[i] = f
	}
	if len(failed) == 0 {
		return nil, fmt.Errorf(`"failed" names none of the batch's records (%d entries)`, len(list))
	}
	return failed, nil
}

// parseEntry reads one entry of "failed".
func parseEntry(raw json.RawMessage) (recordID, msFailure, error) {
	var id recordID
	f := msFailure{}
	m, keys, err := jsonObject(raw)
	if err != nil {
		return id, f, err
	}
	for _, k := range keys {
		switch k {
		case "topic", "partition", "offset", "retryable", "error":
		default:
			return id, f, fmt.Errorf("unknown key %s", quoteKey(k))
		}
	}
	for _, k := range []string{"topic", "partition", "offset"} {
		if _, ok := m[k]; !ok {
			return id, f, fmt.Errorf("%q is missing", k)
		}
	}
	if !isString(m["topic"]) || json.Unmarshal(m["topic"], &id.topic) != nil {
		return id, f, errors.New(`"topic" must be a string`)
	}
	// encoding/json refuses a fraction, an exponent, a value beyond the
	// type and a string; isNull catches null, which it would take as 0.
	if isNull(m["partition"]) || json.Unmarshal(m["partition"], &id.partition) != nil {
		return id, f, errors.New(`"partition" must be an integer (a 32-bit one)`)
	}
	if isNull(m["offset"]) || json.Unmarshal(m["offset"], &id.offset) != nil {
		return id, f, errors.New(`"offset" must be an integer (a 64-bit one)`)
	}
	if r, ok := m["retryable"]; ok && !isNull(r) {
		var retryable bool
		if json.Unmarshal(r, &retryable) != nil {
			return id, f, errors.New(`"retryable" must be true or false`)
		}
		f.permanent = !retryable
	}
	if e, ok := m["error"]; ok && !isNull(e) {
		if !isString(e) || json.Unmarshal(e, &f.reason) != nil {
			return id, f, errors.New(`"error" must be a string`)
		}
	}
	return id, f, nil
}

// jsonObject reads data as exactly one JSON object, and nothing after it
// but whitespace, into its members by exact name, and their names in the
// order they came (so a message names the first wrong one). encoding/json
// alone would match names case-insensitively, let a repeated name
// overwrite the first, and stop at the end of the first value.
func jsonObject(data []byte) (map[string]json.RawMessage, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("not a JSON object")
	}
	m := make(map[string]json.RawMessage)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("not a JSON object: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, nil, errors.New("not a JSON object")
		}
		if _, dup := m[key]; dup {
			return nil, nil, fmt.Errorf("%s appears twice", quoteKey(key))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("not a JSON object: %w", err)
		}
		m[key] = v
		keys = append(keys, key)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("data after the JSON object")
	}
	return m, keys, nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

// quoteKey shows a key of the answer in a message: quoted, at most 64 bytes.
func quoteKey(k string) string {
	const max = 64
	if len(k) > max {
		return fmt.Sprintf("%q…", k[:max])
	}
	return fmt.Sprintf("%q", k)
}
