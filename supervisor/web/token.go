package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/turbokafka/turbo/config"
)

// tokenFile is http.control_token_file: the bearer token a command must
// carry. The file is read again when it changes (its size, modification
// time or identity: a rotation by rename too), so a rotated token works
// without a restart; only its SHA-256 is kept, and requests are compared
// against it in constant time whatever their length.
type tokenFile struct {
	path string

	mu   sync.Mutex
	seen os.FileInfo // the file as last read; nil before
	sum  [sha256.Size]byte
	err  error // why the file as last seen holds no usable token
}

// admit checks an Authorization header against the token; "" lets the
// request in, anything else is why not.
func (t *tokenFile) admit(header string) string {
	sum, err := t.current()
	if err != nil {
		return "control's token file cannot be used: " + err.Error()
	}
	presented, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || presented == "" {
		return "control needs a bearer token (Authorization: Bearer …, the content of http.control_token_file)"
	}
	if !tokenMatches(sum, strings.TrimSpace(presented)) {
		return "the bearer token is not control's"
	}
	return ""
}

// tokenMatches reports whether presented is the token whose SHA-256 is
// want. Its time depends on presented's length only, not on how much of it
// is right: the digests have a fixed size and are compared in constant
// time.
func tokenMatches(want [sha256.Size]byte, presented string) bool {
	got := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// current is the token's digest, the file read again first if it changed.
func (t *tokenFile) current() ([sha256.Size]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fi, err := os.Stat(t.path)
	if err != nil {
		t.seen, t.err = nil, err
		return t.sum, err
	}
	if t.seen != nil && os.SameFile(t.seen, fi) && fi.Size() == t.seen.Size() && fi.ModTime().Equal(t.seen.ModTime()) &&
		time.Since(fi.ModTime()) > time.Second { // a write within the second may not have moved the time yet
		return t.sum, t.err
	}
	b, err := config.ReadControlToken(t.path)
	t.seen, t.err = fi, err
	if err == nil {
		t.sum = sha256.Sum256(b)
		clear(b)
	}
	return t.sum, t.err
}
