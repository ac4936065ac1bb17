package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// EnvPrefix starts the name of every environment variable that overrides a
// configuration key, e.g. TURBO_LOG_LEVEL for log.level.
const EnvPrefix = "TURBO"

// Load reads the configuration file at path (YAML, JSON or TOML by
// extension), applies the defaults, applies the environment overrides found
// through lookupEnv (os.LookupEnv in production; nil means no environment),
// decodes strictly and validates. Every error wraps ErrInvalid; a missing
// file also satisfies errors.Is(err, fs.ErrNotExist).
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	raw, err := readRaw(path)
	if err != nil {
		return nil, err
	}
	applyRawDefaults(raw)
	origins := applyEnv(raw, lookupEnv)

	var c Config
	if err := decode(raw, &c); err != nil {
		return nil, blameEnv(err, origins)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, blameEnv(err, origins)
	}
	return &c, nil
}

// readRaw parses the file into a generic tree with viper's codecs. The raw
// tree is used rather than viper.AllSettings because viper lower-cases keys
// (hiding typos from the strict decoder, and making "Foo" and "foo" collide
// at random) and splits keys on dots, while strict decoding needs exactly
// what the file says.
func readRaw(path string) (map[string]any, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	switch ext {
	case "yaml", "yml", "json", "toml":
	default:
		return nil, &fileError{msg: fmt.Sprintf("config: %s: unsupported file extension %q (use .yaml, .yml, .json or .toml)", path, filepath.Ext(path))}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		msg := err.Error()
		if errors.As(err, &pe) {
			msg = pe.Err.Error() // the PathError text would repeat the path
		}
		return nil, &fileError{msg: fmt.Sprintf("config: cannot read %s: %s", path, msg), cause: err}
	}
	dec, err := viper.NewCodecRegistry().Decoder(ext)
	if err != nil {
		return nil, &fileError{msg: fmt.Sprintf("config: %s: %v", path, err), cause: err}
	}
	doc := map[string]any{}
	if err := safeDecode(dec, data, doc); err != nil {
		return nil, &fileError{msg: fmt.Sprintf("config: cannot parse %s: %v", path, err), cause: err}
	}
	// Normalizing also deep-copies, so later steps never mutate data the
	// parser may share between nodes (YAML aliases).
	return normalize(doc).(map[string]any), nil
}

// safeDecode turns a parser panic into an error: a malformed file must
// yield ErrInvalid, never crash the process.
func safeDecode(dec viper.Decoder, data []byte, into map[string]any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parser failed: %v", r)
		}
	}()
	return dec.Decode(data, into)
}

// normalize deep-copies a parsed tree, turning YAML's map[any]any (a map
// with a non-string key) into map[string]any so every later step sees one
// map type. Such keys are never in the schema and come out as unknown keys.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = normalize(e)
		}
		return m
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = normalize(e)
		}
		return l
	default:
		return v
	}
}

// applyRawDefaults fills keys that are absent (or null) in the raw tree
// with their defaults. It works on the raw tree, not through viper's
// SetDefault, because defaults must also reach into every element of the
// consumers list, and because only absent keys may be filled: an explicit
// `concurrency: 0` must survive to be rejected by Validate.
func applyRawDefaults(raw map[string]any) {
	mergeDefaults(raw, toRaw(reflect.ValueOf(Default())).(map[string]any))
	list, ok := raw["consumers"].([]any)
	if !ok {
		return
	}
	// The group default depends on the final name (which env may change),
	// so it is filled after decoding by ApplyDefaults.
	def := toRaw(reflect.ValueOf(DefaultConsumer(""))).(map[string]any)
	for _, el := range list {
		if m, ok := el.(map[string]any); ok {
			mergeDefaults(m, def)
		}
	}
}

// mergeDefaults copies into dst every key of def that dst lacks or has as
// null, recursing into maps present on both sides. A present value of the
// wrong type is kept, for the decoder to report.
func mergeDefaults(dst, def map[string]any) {
	for k, dv := range def {
		cur, ok := dst[k]
		if !ok || cur == nil {
			dst[k] = normalize(dv) // a copy: def is shared by all consumers
			continue
		}
		if dm, ok := dv.(map[string]any); ok {
			if cm, ok := cur.(map[string]any); ok {
				mergeDefaults(cm, dm)
			}
		}
	}
}

// toRaw turns a schema value into the raw form a file would have, so the
// defaults go through the same decoder as the file. Nil slices are left
// out, meaning "no default".
func toRaw(v reflect.Value) any {
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	if v.Type() == byteSizeType {
		return ByteSize(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			if r := toRaw(v.Field(i)); r != nil {
				m[keyName(v.Type().Field(i))] = r
			}
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		l := make([]any, v.Len())
		for i := range l {
			l[i] = toRaw(v.Index(i))
		}
		return l
	case reflect.String:
		return v.String()
	case reflect.Int:
		return int(v.Int())
	default:
		panic("config: unsupported schema kind " + v.Kind().String())
	}
}

// applyEnv overrides leaves of the raw tree from the environment and
// returns which env variable set which key path (for error messages).
//
// Env names are not parsed back into key paths, since snake_case keys
// contain "_" and TURBO_KAFKA_CLIENT_ID would be ambiguous. Instead every
// key path the schema knows (with the consumer indices present in the
// file) is turned into its env name and looked up.
func applyEnv(raw map[string]any, lookupEnv func(string) (string, bool)) map[string]string {
	origins := map[string]string{}
	if lookupEnv != nil {
		envWalk(reflect.TypeFor[Config](), raw, "", EnvPrefix, lookupEnv, origins)
	}
	return origins
}

func envWalk(t reflect.Type, m map[string]any, keyPrefix, envPrefix string, lookupEnv func(string) (string, bool), origins map[string]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name := keyName(f)
		key := joinKey(keyPrefix, name)
		env := envPrefix + "_" + strings.ToUpper(name)
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != durationType:
			// After the defaults every section exists; one that is not a
			// map is a type error the decoder reports.
			if sub, ok := m[name].(map[string]any); ok {
				envWalk(f.Type, sub, key, env, lookupEnv, origins)
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			list, _ := m[name].([]any)
			for j, el := range list {
				if sub, ok := el.(map[string]any); ok {
					envWalk(f.Type.Elem(), sub, fmt.Sprintf("%s[%d]", key, j), env+"_"+strconv.Itoa(j), lookupEnv, origins)
				}
			}
		default:
			v, ok := lookupEnv(env)
			if !ok || v == "" {
				// Empty counts as unset, as in viper: templated deployments
				// often export VAR= for values they do not mean to set.
				continue
			}
			if f.Type.Kind() == reflect.Slice {
				parts := strings.Split(v, ",")
				l := make([]any, len(parts))
				for j, p := range parts {
					l[j] = strings.TrimSpace(p)
				}
				m[name] = l
			} else {
				m[name] = v
			}
			origins[key] = env
		}
	}
}

// blameEnv adds the env variable name to an error about a key that an env
// variable set (or an element of a list it set), so the user looks in the
// right place.
func blameEnv(err error, origins map[string]string) error {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return err
	}
	for key, env := range origins {
		if fe.Key == key || strings.HasPrefix(fe.Key, key+"[") {
			return &FieldError{Key: fe.Key, Msg: fe.Msg + " (set by environment variable " + env + ")"}
		}
	}
	return err
}
