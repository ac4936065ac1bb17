package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The strict decoder below walks the schema types by reflection. It is used
// instead of mapstructure because mapstructure's weak mode turns a scalar
// into a one-element list (`topics: 5` would become ["5"]) and accepts bare
// integers as nanosecond durations, and its errors are not keyed the way
// users write paths ("consumers[0].handler.url"). Owning the walk also makes
// the first error deterministic: unknown keys of a section in sorted order,
// then its fields in declaration order.

var durationType = reflect.TypeFor[time.Duration]()

// keyName is the config key of a struct field: its mapstructure tag.
func keyName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ","); name != "" {
		return name
	}
	return strings.ToLower(f.Name)
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// decode fills c from the raw tree, strictly.
func decode(raw map[string]any, c *Config) error {
	return decodeValue("", raw, reflect.ValueOf(c).Elem())
}

func decodeValue(key string, raw any, dst reflect.Value) error {
	t := dst.Type()
	if es, ok := raw.(envString); ok && t.Kind() != reflect.Int && t.Kind() != reflect.Float64 && t.Kind() != reflect.Bool {
		raw = string(es) // only numbers and booleans treat env values apart
	}
	if t == byteSizeType {
		b, err := toByteSize(raw)
		if err != nil {
			return fieldErr(key, err.Error())
		}
		dst.SetInt(int64(b))
		return nil
	}
	if t == durationType {
		d, err := toDuration(raw)
		if err != nil {
			return fieldErr(key, err.Error())
		}
		dst.SetInt(int64(d))
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return decodeStruct(key, raw, dst)
	case reflect.Slice:
		list, ok := raw.([]any)
		if !ok {
			return fieldErr(key, "expected a list, got "+describe(raw))
		}
		out := reflect.MakeSlice(t, len(list), len(list))
		for i, el := range list {
			if err := decodeValue(fmt.Sprintf("%s[%d]", key, i), el, out.Index(i)); err != nil {
				return err
			}
		}
		dst.Set(out)
		return nil
	case reflect.String:
		s, err := toString(raw, t == secretType)
		if err != nil {
			return fieldErr(key, err.Error())
		}
		dst.SetString(s)
		return nil
	case reflect.Int:
		n, err := toInt(raw)
		if err == nil && dst.OverflowInt(n) {
			err = fmt.Errorf("%d is out of range", n)
		}
		if err != nil {
			return fieldErr(key, err.Error())
		}
		dst.SetInt(n)
		return nil
	case reflect.Float64:
		f, err := toFloat(raw)
		if err != nil {
			return fieldErr(key, err.Error())
		}
		dst.SetFloat(f)
		return nil
	case reflect.Bool:
		b, err := toBool(raw)
		if err != nil {
			return fieldErr(key, err.Error())
		}
		dst.SetBool(b)
		return nil
	case reflect.Map:
		return decodeStringMap(key, raw, dst)
	default:
		panic("config: unsupported schema kind " + t.Kind().String())
	}
}

// decodeStringMap fills a map[string]string (free-form names, such as SASL
// extensions) from a mapping of scalars.
func decodeStringMap(key string, raw any, dst reflect.Value) error {
	m, ok := raw.(map[string]any)
	if !ok {
		return fieldErr(key, "expected a mapping, got "+describe(raw))
	}
	out := reflect.MakeMapWithSize(dst.Type(), len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, err := toString(m[k], false)
		if err != nil {
			return fieldErr(joinKey(key, quoteKey(k)), err.Error())
		}
		out.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(s))
	}
	dst.Set(out)
	return nil
}

// toBool accepts booleans, and "true"/"false" from the environment; a
// quoted "true" in the file is a string, as quoted numbers are.
func toBool(raw any) (bool, error) {
	switch v := raw.(type) {
	case bool:
		return v, nil
	case envString:
		b, err := strconv.ParseBool(strings.TrimSpace(string(v)))
		if err != nil {
			return false, fmt.Errorf("expected true or false, got %s", quoteValue(string(v)))
		}
		return b, nil
	case string:
		return false, fmt.Errorf("expected true or false, got %s (a string: remove the quotes)", quoteValue(v))
	default:
		return false, fmt.Errorf("expected true or false, got %s", describe(raw))
	}
}

func decodeStruct(key string, raw any, dst reflect.Value) error {
	m, ok := raw.(map[string]any)
	if !ok {
		return fieldErr(key, "expected a mapping, got "+describe(raw))
	}
	t := dst.Type()
	known := make([]string, t.NumField())
	for i := range known {
		known[i] = keyName(t.Field(i))
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !slices.Contains(known, k) {
			if msg, ok := replacedKeys[joinKey(key, k)]; ok {
				return fieldErr(joinKey(key, k), msg)
			}
			msg := unknownKeyMsg
			if s := suggest(k, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return fieldErr(joinKey(key, quoteKey(k)), msg)
		}
	}
	for i, name := range known {
		v, ok := m[name]
		if !ok || v == nil {
			continue // absent: keep the zero value (defaults were merged before)
		}
		if err := decodeValue(joinKey(key, name), v, dst.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

var plainKey = regexp.MustCompile(`^[0-9A-Za-z_-]+$`)

// quoteKey quotes a key that would make the printed path ambiguous or
// unreadable (dots, spaces, control characters).
func quoteKey(k string) string {
	if plainKey.MatchString(k) {
		return k
	}
	return strconv.Quote(k)
}

// suggest returns the known key closest to an unknown one, if it is close
// enough to be a likely typo.
func suggest(k string, known []string) string {
	best, bestDist := "", 3 // suggest only within 2 edits
	for _, c := range known {
		if strings.EqualFold(k, c) {
			return c
		}
		if d := editDistance(k, c, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or at least limit
// once it is known to reach limit (keys from a fuzzed file can be long).
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describe renders a raw value for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return quoteValue(v)
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case time.Time:
		// YAML and TOML turn unquoted dates into timestamps.
		return "a date/time (quote it to use it as text)"
	default:
		return fmt.Sprintf("a value of type %T", v)
	}
}

// quoteValue quotes a string for an error message, shortening long ones so
// one bad value cannot flood the terminal.
func quoteValue(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

// toString accepts strings only. A scalar the file's syntax reads as a
// number or a boolean is refused rather than turned back into text: the
// text it came from is gone by then (YAML reads `group: 0123` as 83, `1.50`
// as 1.5, `0x1F` as 31), so the conversion silently named another group or
// topic. The message asks for quotes; for a secret it shows no value.
func toString(raw any, secret bool) (string, error) {
	switch v := raw.(type) {
	case string:
		return v, nil
	case bool, int, int64, uint64, float64:
		what := "a number"
		if _, ok := v.(bool); ok {
			what = "a boolean"
		}
		if !secret {
			what += " (" + describe(v) + ")"
		}
		return "", fmt.Errorf("expected text, got %s: quote it to keep the text as written", what)
	default:
		return "", fmt.Errorf("expected a string, got %s", describe(raw))
	}
}

// toInt accepts integers, whole floats (JSON has no integers) and decimal
// strings set by the environment (env values are strings), not quoted
// numbers in the file.
func toInt(raw any) (int64, error) {
	switch v := raw.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%d is out of range", v)
		}
		return int64(v), nil
	case float64:
		// 2^63 is exactly representable; MaxInt64 is not.
		if v != math.Trunc(v) {
			return 0, fmt.Errorf("expected an integer, got %v", v)
		}
		if v < -(1<<63) || v >= 1<<63 {
			return 0, fmt.Errorf("%v is out of range", v)
		}
		return int64(v), nil
	case envString:
		n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse %s as an integer", quoteValue(string(v)))
		}
		return n, nil
	case string:
		// A quoted number in the file is a string: `concurrency: "4"` was
		// taken as 4, hiding a templating or typing mistake.
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return 0, fmt.Errorf("expected an integer, got %s (a string: remove the quotes)", quoteValue(v))
		}
		return 0, fmt.Errorf("cannot parse %s as an integer", quoteValue(v))
	default:
		return 0, fmt.Errorf("expected an integer, got %s", describe(raw))
	}
}

// toFloat accepts numbers, and a number from the environment; a quoted
// number in the file is a string, as for integers.
func toFloat(raw any) (float64, error) {
	switch v := raw.(type) {
	case int:
		return float64(v), nil
	case int64:
		return float64(v), nil
	case uint64:
		return float64(v), nil
	case float64:
		return v, nil
	case envString:
		f, err := strconv.ParseFloat(strings.TrimSpace(string(v)), 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse %s as a number", quoteValue(string(v)))
		}
		return f, nil
	case string:
		if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			return 0, fmt.Errorf("expected a number, got %s (a string: remove the quotes)", quoteValue(v))
		}
		return 0, fmt.Errorf("cannot parse %s as a number", quoteValue(v))
	default:
		return 0, fmt.Errorf("expected a number, got %s", describe(raw))
	}
}

const durationHint = "use a Go duration with a unit, e.g. 1s, 500ms or 1m30s"

// toDuration accepts Go duration strings only. Bare numbers are rejected,
// even 0, because "5" is ambiguous (seconds? nanoseconds?) and a silent
// nanosecond interpretation turns "commit every 5" into a busy loop.
func toDuration(raw any) (time.Duration, error) {
	switch v := raw.(type) {
	case string:
		s := strings.TrimSpace(v)
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return 0, fmt.Errorf("%s has no unit: use a unit, e.g. 1s", quoteValue(v))
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("cannot parse %s as a duration: %s", quoteValue(v), durationHint)
		}
		return d, nil
	case int, int64, uint64, float64:
		return 0, fmt.Errorf("bare number %v is not a duration: use a unit, e.g. 1s", v)
	default:
		return 0, fmt.Errorf("expected a duration, got %s", describe(raw))
	}
}
