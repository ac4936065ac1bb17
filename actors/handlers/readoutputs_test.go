package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"
)

// FuzzReadOutputs: readOutputs, which decodes an answer in one pass with
// one strict decoder, accepts exactly the bodies that decoding each value
// to a raw message first and then each object strictly (the contract's
// plain reading) accepts, and reads the same outputs from them.
func FuzzReadOutputs(f *testing.F) {
	for _, s := range []string{
		``, "\n", `{"value":"aGk="}`, "{\"key\":\"aw==\",\"value\":\"dg==\"}\n{\"value\":null}\n",
		`[{"topic":"t","value":"aGk="},{"headers":[{"key":"h","value":"dg=="}]}]`,
		`{"value":"aGk=","colour":"blue"}`, `OK`, `null`, `[1]`, `{"value":1}`, `{"value":"a"`, `{} []`, ` [ ] {"input":{"offset":3}}`,
		`{"value":"x"}{"value":"y"}`, `"s"`, `{"headers":[{"key":"h","oops":1}]}`,
	} {
		f.Add([]byte(s))
	}
	h := &HTTP{shown: "http://h/x"}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := h.readOutputs(bytes.NewReader(body))
		want, ok := plainOutputs(body)
		if (err == nil) != ok {
			t.Fatalf("readOutputs(%q): error %v, the plain reading accepts it: %t", body, err, ok)
		}
		if ok && !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
			t.Fatalf("readOutputs(%q) = %+v, the plain reading %+v", body, got, want)
		}
	})
}

// plainOutputs reads body the plain way: each JSON value in turn as a raw
// message, then each object (or each of a list's) strictly on its own.
func plainOutputs(body []byte) ([]outputLine, bool) {
	var lines []outputLine
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return lines, true
		} else if err != nil {
			return nil, false
		}
		items := []json.RawMessage{raw}
		if raw[0] == '[' {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, false
			}
		}
		for _, item := range items {
			if len(item) == 0 || item[0] != '{' {
				return nil, false
			}
			var l outputLine
			d := json.NewDecoder(bytes.NewReader(item))
			d.DisallowUnknownFields()
			if err := d.Decode(&l); err != nil {
				return nil, false
			}
			lines = append(lines, l)
		}
	}
}
