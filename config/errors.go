package config

import (
	"errors"
	"strings"
)

// ErrInvalid is wrapped by every error of this package, so callers can tell
// a configuration problem (exit code 2) from a runtime failure with
// errors.Is(err, ErrInvalid).
var ErrInvalid = errors.New("invalid configuration")

// unknownKeyMsg starts the Msg of a FieldError about a key the schema does
// not know; such errors read "config: unknown key <key>..." because the key
// itself is the problem.
const unknownKeyMsg = "unknown key"

// FieldError is a problem with one configuration key. Use errors.As to get
// the key path, e.g. "consumers[0].concurrency".
type FieldError struct {
	// Key is the path of the offending key: dot-separated map keys and
	// [i] list indices, or a CLI flag name for Select errors.
	Key string
	// Msg says what is wrong, without the key.
	Msg string
}

// Error returns "config: <key>: <msg>", or "config: unknown key <key>..."
// for unknown keys.
func (e *FieldError) Error() string {
	if rest, ok := strings.CutPrefix(e.Msg, unknownKeyMsg); ok {
		return "config: " + unknownKeyMsg + " " + e.Key + rest
	}
	return "config: " + e.Key + ": " + e.Msg
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(key, msg string) *FieldError { return &FieldError{Key: key, Msg: msg} }

// fileError is a problem with the configuration file as a whole (missing,
// unreadable, unparseable). It wraps both ErrInvalid and the cause, so a
// missing file also satisfies errors.Is(err, fs.ErrNotExist).
type fileError struct {
	msg   string
	cause error
}

func (e *fileError) Error() string { return e.msg }

func (e *fileError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.cause}
}
