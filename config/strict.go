package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"go.yaml.in/yaml/v3"
)

// readLimited reads at most MaxFileSize bytes of path. A larger file, or
// one without end (/dev/zero), is an error, not something to read whole;
// so is anything but a regular file (after symbolic links): a FIFO would
// block the read until someone writes to it, holding up a reload, and a
// device or a socket is no configuration. The file is opened without
// blocking, so that opening a FIFO cannot block either.
func readLimited(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", errNotRegular, fileKind(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(MaxFileSize)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > int(MaxFileSize) {
		return nil, errTooLarge
	}
	return data, nil
}

// fileKind names what a non-regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

var errNotRegular = errors.New("not a regular file")

var errTooLarge = errors.New("file too large")

// checkStrict refuses what the codecs would silently accept: a key given
// twice in a JSON object (encoding/json keeps the last; YAML and TOML refuse
// it) and a second YAML document (the codec reads the first only). Syntax
// errors are left to the codec, which reports them better.
func checkStrict(ext string, data []byte) error {
	switch ext {
	case "json":
		dec := json.NewDecoder(bytes.NewReader(data))
		dup, err := jsonDuplicate(dec, "")
		if err == nil && dup != "" {
			return fmt.Errorf("key %s is defined twice", dup)
		}
	case "yaml", "yml":
		dec := yaml.NewDecoder(bytes.NewReader(data))
		var doc yaml.Node
		if dec.Decode(&doc) != nil {
			return nil // empty, or a syntax error the codec reports
		}
		if err := dec.Decode(&doc); !errors.Is(err, io.EOF) {
			return errors.New(`a second YAML document (after "---") is not supported; put everything in one`)
		}
	}
	return nil
}

// jsonDuplicate reads one JSON value from dec and returns the path of the
// first key that an object of it defines twice ("" if none), written as
// Load's errors write key paths.
func jsonDuplicate(dec *json.Decoder, key string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return "", err
			}
			name, _ := t.(string)
			sub := joinKey(key, quoteKey(name))
			if seen[name] {
				return sub, nil
			}
			seen[name] = true
			if dup, err := jsonDuplicate(dec, sub); err != nil || dup != "" {
				return dup, err
			}
		}
		_, err = dec.Token() // the closing brace
		return "", err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if dup, err := jsonDuplicate(dec, key+"["+strconv.Itoa(i)+"]"); err != nil || dup != "" {
				return dup, err
			}
		}
		_, err = dec.Token()
		return "", err
	}
	return "", nil
}
