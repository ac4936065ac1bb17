package config

import (
	"fmt"
	"net/textproto"
	"regexp"
	"strings"
)

// reservedHeaders are the request headers the http handler sets itself (or
// Go's client does): a static header must not replace them.
var reservedHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Transfer-Encoding": true, "Host": true,
	"Connection": true, "Traceparent": true, "Tracestate": true, "Te": true, "Upgrade": true,
}

var (
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)
)

func validateHeaders(key string, hs []HTTPHeader) error {
	if len(hs) > MaxHTTPHeaders {
		return fieldErr(key, fmt.Sprintf("at most %d headers (got %d)", MaxHTTPHeaders, len(hs)))
	}
	seen := map[string]bool{}
	for i, h := range hs {
		k := fmt.Sprintf("%s[%d]", key, i)
		canon := textproto.CanonicalMIMEHeaderKey(h.Name)
		switch {
		case !headerName.MatchString(h.Name):
			return fieldErr(k+".name", fmt.Sprintf("must be an HTTP header name (letters, digits and !#$%%&'*+.^_`|~-, at most 256) (got %s)", quoteValue(h.Name)))
		case reservedHeaders[canon] || strings.HasPrefix(canon, "Kafka-"):
			return fieldErr(k+".name", fmt.Sprintf("%s is set by the handler itself (Kafka-*, Content-Type, Host, trace context, …)", canon))
		case seen[canon]:
			return fieldErr(k+".name", fmt.Sprintf("%s is given twice", canon))
		}
		seen[canon] = true
		n := 0
		for _, set := range []bool{h.Value != "", h.ValueEnv != "", h.ValueFile != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fieldErr(k, "needs exactly one of value, value_env and value_file")
		}
		if !ValidHeaderValue(h.Prefix) {
			return fieldErr(k+".prefix", "must be printable, without line breaks")
		}
		switch {
		case h.Value != "" && !ValidHeaderValue(h.Value.Reveal()):
			// The value itself is never shown: it may be a secret.
			return fieldErr(k+".value", "must be printable, without line breaks, at most 64 KiB")
		case h.ValueEnv != "" && !envName.MatchString(h.ValueEnv):
			return fieldErr(k+".value_env", fmt.Sprintf("must be an environment variable's name (got %s)", quoteValue(h.ValueEnv)))
		case h.ValueFile != "":
			v, err := ReadSecretFile(h.ValueFile)
			if err != nil {
				return fieldErr(k+".value_file", err.Error())
			}
			if !ValidHeaderValue(v) {
				return fieldErr(k+".value_file", fmt.Sprintf("%s must hold one printable line (at most 64 KiB)", h.ValueFile))
			}
		}
	}
	return nil
}

// ValidHeaderValue reports whether v can be sent as an HTTP header value as
// it is: visible characters, spaces and tabs inside (no control character,
// no line break), at most MaxSecretFileSize bytes.
func ValidHeaderValue(v string) bool {
	if len(v) > int(MaxSecretFileSize) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// maxSocketPath is the longest unix socket path Linux takes (sun_path holds
// 108 bytes, the last a NUL).
const maxSocketPath = 107

// UnixURL splits a handler URL of the form unix:///run/app.sock:/records
// into the socket's path and the request's path ("/" when none is given);
// ok is false for any other URL.
func UnixURL(u string) (socket, path string, ok bool) {
	rest, found := strings.CutPrefix(u, "unix://")
	if !found {
		return "", "", false
	}
	socket, path, found = strings.Cut(rest, ":")
	if !found {
		path = "/"
	}
	return socket, path, true
}
