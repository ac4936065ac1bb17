package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// EnvPrefix starts the name of every environment variable that overrides a
// configuration key, e.g. TURBO_LOG_LEVEL for log.level.
const EnvPrefix = "TURBO"

// Load reads the configuration file at path (YAML, JSON or TOML by
// extension; at most MaxFileSize), applies the defaults, applies the
// environment overrides of environ ("KEY=value" entries, os.Environ() in
// production; nil means no environment), decodes strictly, validates, and
// excludes every dead-letter topic from every consumer's topic patterns
// (ExcludeDeadLetters).
// A TURBO_ variable in the configuration's namespace that names no key is
// an error (see envNamespace). Every error wraps ErrInvalid; a missing file
// also satisfies errors.Is(err, fs.ErrNotExist).
func Load(path string, environ []string) (*Config, error) {
	raw, err := readRaw(path)
	if err != nil {
		return nil, err
	}
	untyped := handlersUnnamed(raw)
	applyRawDefaults(raw)
	origins, err := applyEnv(raw, environ)
	if err != nil {
		return nil, err
	}

	var c Config
	if err := decode(raw, &c); err != nil {
		return nil, blameEnv(err, origins)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, blameEnv(err, origins)
	}
	if err := requireHandlers(untyped, origins); err != nil {
		return nil, err
	}
	c.ExcludeDeadLetters()
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
	data, err := readLimited(path)
	if errors.Is(err, errTooLarge) {
		return nil, &fileError{msg: fmt.Sprintf("config: %s is larger than %s, the most a configuration file may be", path, MaxFileSize)}
	}
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
	if err := checkStrict(ext, data); err != nil {
		return nil, &fileError{msg: fmt.Sprintf("config: cannot parse %s: %v", path, err)}
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

// handlersUnnamed returns, for each consumer of the file whose handler type
// is absent (or null), whether the whole handler section is: the defaults
// would fill in noop, and a consumer nobody told what to do must not run.
func handlersUnnamed(raw map[string]any) map[int]bool {
	list, _ := raw["consumers"].([]any)
	out := map[int]bool{}
	for i, el := range list {
		m, ok := el.(map[string]any)
		if !ok {
			continue // not a consumer: the decoder says so
		}
		h, _ := m["handler"].(map[string]any)
		if m["handler"] == nil || h != nil && h["type"] == nil {
			out[i] = h == nil
		}
	}
	return out
}

// requireHandlers refuses a consumer without a handler type, from the file
// or the environment. A file cut short — an editor's, a config tool's or
// kubectl cp's write read half way — is often still valid, and the part
// lost is the handler section: with noop as its default, such a file
// acknowledged and committed every record it was given. noop runs only
// when written.
func requireHandlers(untyped map[int]bool, origins map[string]string) error {
	for _, i := range slices.Sorted(maps.Keys(untyped)) {
		key := fmt.Sprintf("consumers[%d].handler", i)
		if origins[key+".type"] != "" {
			continue
		}
		const what = "say what is done with each record (type http, grpc, log, sleep or hash); " +
			"write handler: {type: noop} to acknowledge records without doing anything"
		if untyped[i] {
			return fieldErr(key, "is missing: "+what+" (a file cut short loses its handler section)")
		}
		return fieldErr(key+".type", "is required: "+what)
	}
	return nil
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
	case reflect.Float64:
		return v.Float()
	case reflect.Bool:
		return v.Bool()
	case reflect.Map:
		if v.Len() == 0 {
			return nil
		}
		m := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().String()
		}
		return m
	default:
		panic("config: unsupported schema kind " + v.Kind().String())
	}
}

// envString is a value the environment set. Environment values are always
// strings, so the decoder accepts one for an integer, where a quoted number
// in the file ("4") is an error.
type envString string

// applyEnv overrides leaves of the raw tree from the environment and
// returns which env variable set which key path (for error messages). A
// variable in the configuration's namespace that names no key is an error:
// a misspelt TURBO_KAFKA_BROKER, or TURBO_CONSUMERS_5_CONCURRENCY for a
// consumer the file lacks, was silently ignored.
//
// Env names are not parsed back into key paths, since snake_case keys
// contain "_" and TURBO_KAFKA_CLIENT_ID would be ambiguous. Instead every
// key path the schema knows (with the consumer indices present in the
// file) is turned into its env name and looked up.
func applyEnv(raw map[string]any, environ []string) (map[string]string, error) {
	vars := map[string]string{}
	for _, kv := range environ {
		if name, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, EnvPrefix+"_") && v != "" {
			// Empty counts as unset, as in viper: templated deployments
			// often export VAR= for values they do not mean to set.
			vars[name] = v
		}
	}
	origins := map[string]string{}
	known := map[string]bool{}
	envWalk(reflect.TypeFor[Config](), raw, "", EnvPrefix, vars, origins, known)
	return origins, unknownEnv(raw, vars, known)
}

// envNamespace returns the first words of the top-level keys in env form
// (KAFKA, CONSUMERS, SHUTDOWN, LOG, SWARM, HTTP, TRACING): a TURBO_ variable
// starting with one of them must name a key. Other TURBO_ variables
// (TURBO_TEST_BROKERS, and the swarm's node variables under EnvNodePrefix)
// are not the configuration's business.
func envNamespace() []string {
	t := reflect.TypeFor[Config]()
	words := make([]string, t.NumField())
	for i := range words {
		first, _, _ := strings.Cut(keyName(t.Field(i)), "_")
		words[i] = strings.ToUpper(first)
	}
	return words
}

func unknownEnv(raw map[string]any, vars map[string]string, known map[string]bool) error {
	words := envNamespace()
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rest := strings.TrimPrefix(name, EnvPrefix+"_")
		first, _, _ := strings.Cut(rest, "_")
		if known[name] || !slices.Contains(words, first) {
			continue
		}
		if key, msg, ok := replacedEnv(name); ok {
			return fieldErr(name, fmt.Sprintf("%s: %s", key, msg))
		}
		if now, ok := movedNodeEnv[name]; ok {
			return fieldErr(name, "renamed "+now+": turbo swarm sets it for its nodes; it is no configuration key")
		}
		msg := "the environment variable names no configuration key"
		consumers, _ := raw["consumers"].([]any)
		if idx, ok := envIndex(rest, "CONSUMERS_"); ok && idx >= len(consumers) {
			msg += fmt.Sprintf(" (the file has no consumers[%d]; only consumers in the file can be overridden)", idx)
		} else if s := suggest(name, slices.Sorted(maps.Keys(known))); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return fieldErr(name, msg)
	}
	return nil
}

// envIndex parses the list index of an env name's rest such as
// CONSUMERS_5_CONCURRENCY.
func envIndex(rest, list string) (int, bool) {
	after, ok := strings.CutPrefix(rest, list)
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(after, "_")
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 0
}

func envWalk(t reflect.Type, m map[string]any, keyPrefix, envPrefix string, vars, origins map[string]string, known map[string]bool) {
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
				envWalk(f.Type, sub, key, env, vars, origins, known)
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			list, _ := m[name].([]any)
			for j, el := range list {
				if sub, ok := el.(map[string]any); ok {
					envWalk(f.Type.Elem(), sub, fmt.Sprintf("%s[%d]", key, j), env+"_"+strconv.Itoa(j), vars, origins, known)
				}
			}
		default:
			known[env] = true
			v, ok := vars[env]
			if !ok {
				continue
			}
			if f.Type.Kind() == reflect.Map {
				// name=value pairs, comma-separated.
				mv := map[string]any{}
				for _, p := range strings.Split(v, ",") {
					k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
					mv[k] = val
				}
				m[name] = mv
			} else if f.Type.Kind() == reflect.Slice {
				parts := strings.Split(v, ",")
				l := make([]any, len(parts))
				for j, p := range parts {
					l[j] = envString(strings.TrimSpace(p))
				}
				m[name] = l
			} else {
				m[name] = envString(v)
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

// KafkaFromEnv returns the default kafka section with the environment
// overrides of environ (TURBO_KAFKA_* only), validated: how tools and tests
// that have no configuration file reach a secured cluster with the same
// variables `turbo run` reads.
func KafkaFromEnv(environ []string) (Kafka, error) {
	var kafkaEnv []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, EnvPrefix+"_KAFKA_") {
			kafkaEnv = append(kafkaEnv, kv)
		}
	}
	raw := toRaw(reflect.ValueOf(Default())).(map[string]any)
	origins, err := applyEnv(raw, kafkaEnv)
	if err != nil {
		return Kafka{}, err
	}
	var c Config
	if err := decode(raw, &c); err != nil {
		return Kafka{}, blameEnv(err, origins)
	}
	if err := c.Kafka.validate(); err != nil {
		return Kafka{}, blameEnv(err, origins)
	}
	return c.Kafka, nil
}
