package config

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateReference = flag.Bool("update", false, "rewrite REFERENCE.md from the configuration's types and doc comments")

// referenceFile is the configuration reference, generated from the types of
// this package: every key path, its type, its default, its bounds and the
// field's doc comment.
const referenceFile = "REFERENCE.md"

// TestConfigurationReference keeps REFERENCE.md the configuration's own
// description; after a change to a type, a doc comment, a default or a
// bound, `go test ./config -run TestConfigurationReference -update`
// rewrites it.
func TestConfigurationReference(t *testing.T) {
	want, keys := configurationReference(t)
	if *updateReference {
		if err := os.WriteFile(referenceFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("config/%s is out of date: run\n  go test ./config -run TestConfigurationReference -update", referenceFile)
	}
	// The reference is only as good as the doc comments and the bounds it
	// is made of: every key has a description, and every number, duration
	// and size says its bounds.
	for _, k := range keys {
		if k.doc == "" {
			t.Errorf("%s: no doc comment on %s.%s (the reference would say nothing of it)", k.path, k.goType, k.goField)
		}
		if k.numeric && k.bounds == "" {
			t.Errorf("%s: no bounds in referenceBounds", k.path)
		}
	}
	if len(keys) < 80 {
		t.Errorf("only %d keys in the reference", len(keys))
	}
}

// refKey is one key of the reference.
type refKey struct {
	path            string // consumers[].retry.max_attempts
	goType, goField string // Retry, MaxAttempts
	typ             string // integer, duration, …
	def             string // the default, as the file writes it
	bounds          string
	env             string
	doc             string
	numeric         bool
}

// refSection is one struct of the configuration: a heading of the reference.
type refSection struct {
	path string // "" for the top level
	doc  string
	keys []refKey
}

// referenceBounds are the bounds Validate checks, written with the
// constants of limits.go (and the rest of the package), so that a bound
// changed there changes the reference.
func referenceBounds() map[string]string {
	n := func(v int) string { return formatInt(int64(v)) }
	d := fmtDur
	return map[string]string{
		"kafka.brokers":                            fmt.Sprintf("1 to %s entries, each `host:port` (port 1–65535), or exactly `[%s]`", n(MaxBrokers), EmbeddedBroker),
		"kafka.version":                            fmt.Sprintf("at least %d.%d.%d", minCooperativeVersion[0], minCooperativeVersion[1], minCooperativeVersion[2]),
		"kafka.client":                             "`sarama` or `franz-go`",
		"kafka.group_protocol":                     "`classic` or `consumer` (`consumer` needs `kafka.client: franz-go` and Kafka 4.0 or later)",
		"kafka.group_instance_id":                  "1 to 240 characters of `[0-9a-zA-Z._-]`, not `.` or `..`",
		"kafka.tls.ca_file":                        fmt.Sprintf("a readable PEM file with at least one certificate, at most %s", MaxPEMFileSize),
		"kafka.tls.cert_file":                      fmt.Sprintf("a readable PEM certificate, valid now, matching `key_file`, at most %s", MaxPEMFileSize),
		"kafka.tls.key_file":                       fmt.Sprintf("a readable PEM key matching `cert_file`, at most %s", MaxPEMFileSize),
		"kafka.tls.server_name":                    fmt.Sprintf("at most %s bytes", n(maxCredentialLen)),
		"kafka.sasl.username":                      fmt.Sprintf("at most %s bytes", n(maxCredentialLen)),
		"kafka.sasl.password":                      fmt.Sprintf("at most %s; not with `password_file`", MaxSecretFileSize),
		"kafka.sasl.password_file":                 fmt.Sprintf("a readable, non-empty file of at most %s", MaxSecretFileSize),
		"kafka.sasl.oauth.token_url":               fmt.Sprintf("`https://`, or `http://` to a loopback host; no credentials; at most %s bytes", n(maxCredentialLen)),
		"kafka.sasl.oauth.client_id":               fmt.Sprintf("at most %s bytes", n(maxCredentialLen)),
		"kafka.sasl.oauth.client_secret":           fmt.Sprintf("at most %s; not with `client_secret_file`", MaxSecretFileSize),
		"kafka.sasl.oauth.client_secret_file":      fmt.Sprintf("a readable, non-empty file of at most %s", MaxSecretFileSize),
		"kafka.sasl.oauth.scopes":                  fmt.Sprintf("at most %s, without spaces, quotes or backslashes", n(MaxScopes)),
		"kafka.sasl.oauth.extensions":              fmt.Sprintf("at most %s; names of letters other than `auth`, printable values", n(MaxExtensions)),
		"kafka.embedded.partitions":                fmt.Sprintf("1 to %s", n(MaxEmbeddedPartitions)),
		"kafka.embedded.seed.records":              fmt.Sprintf("0 to %s", n(MaxSeedRecords)),
		"kafka.embedded.seed.keys":                 fmt.Sprintf("1 to %s when `records` is above 0", n(MaxSeedKeys)),
		"kafka.embedded.seed.topic":                "a Kafka topic name; required when `records` is above 0",
		"consumers":                                fmt.Sprintf("1 to %s", n(MaxConsumers)),
		"consumers[].name":                         "required, unique, `[0-9a-zA-Z._-]`",
		"consumers[].topics":                       fmt.Sprintf("1 to %s, each a Kafka topic name (1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`) or a `/regex/` (RE2, at most %s bytes)", n(MaxTopics), n(MaxTopicPatternBytes)),
		"consumers[].exclude_topics":               fmt.Sprintf("at most %s Kafka topic names", n(MaxTopics)),
		"consumers[].metadata_refresh":             fmt.Sprintf("%s to %s", d(MinMetadataRefresh), d(MaxDuration)),
		"consumers[].max_partitions":               fmt.Sprintf("0 (the default, %s) or 1 to %s", n(DefaultMaxPartitions), n(MaxSubscribedPartitions)),
		"consumers[].concurrency":                  fmt.Sprintf("1 to %s", n(MaxConcurrency)),
		"consumers[].concurrency_min":              "0 (means 1) to `concurrency`; needs `concurrency_mode: adaptive`",
		"consumers[].max_buffered":                 fmt.Sprintf("0 to %s", n(MaxBuffered)),
		"consumers[].max_buffered_bytes":           fmt.Sprintf("%s to %s", MinMaxBufferedBytes, MaxMaxBufferedBytes),
		"consumers[].commit_interval":              fmt.Sprintf("%s to %s", d(MinCommitInterval), d(MaxDuration)),
		"consumers[].dlq_topic":                    "a Kafka topic name; required with `on_failure: dlq`",
		"consumers[].max_handler_time":             fmt.Sprintf("0 (unlimited) or %s to %s", d(MinTimeout), d(MaxDuration)),
		"consumers[].commit_metadata_bytes":        fmt.Sprintf("0 (off) or %d to %s", minCommitMetadataBytes, n(maxCommitMetadataBytes)),
		"consumers[].handler.url":                  fmt.Sprintf("an absolute `http(s)` URL with a host (port 1–65535), or `unix://<socket path>:<request path>` (socket path at most %d bytes); required for `http`", maxSocketPath),
		"consumers[].handler.target":               "required for `grpc`",
		"consumers[].handler.timeout":              fmt.Sprintf("%s to %s", d(MinTimeout), d(MaxDuration)),
		"consumers[].handler.duration":             fmt.Sprintf("0 to %s", d(MaxDuration)),
		"consumers[].handler.bytes":                fmt.Sprintf("1 to %s (%s) with `type: hash`", n(MaxHashBytes), ByteSize(MaxHashBytes)),
		"consumers[].handler.headers":              fmt.Sprintf("at most %s; each name once, not one the handler sets (`Kafka-*`, `Content-Type`, `Host`, trace context, …)", n(MaxHTTPHeaders)),
		"consumers[].handler.headers[].name":       "an HTTP header name (token), at most 256 characters",
		"consumers[].handler.headers[].value":      fmt.Sprintf("exactly one of `value`, `value_env`, `value_file`; at most %s", MaxSecretFileSize),
		"consumers[].handler.headers[].value_env":  "exactly one of `value`, `value_env`, `value_file`; set and not empty at start",
		"consumers[].handler.headers[].value_file": fmt.Sprintf("exactly one of `value`, `value_env`, `value_file`; one printable line, at most %s", MaxSecretFileSize),
		"consumers[].retry.max_attempts":           fmt.Sprintf("1 to %s", n(MaxAttempts)),
		"consumers[].retry.initial_backoff":        fmt.Sprintf("%s to %s", d(MinTimeout), d(MaxDuration)),
		"consumers[].retry.max_backoff":            fmt.Sprintf("`initial_backoff` to %s", d(MaxDuration)),
		"consumers[].rate.limit":                   fmt.Sprintf("0 (no limit) or %g to %s per second", MinRateLimit, n(MaxRateLimit)),
		"consumers[].rate.burst":                   fmt.Sprintf("0 to %s; needs `rate.limit`", n(MaxRateBurst)),
		"consumers[].batch.max_records":            fmt.Sprintf("0 (means 1) to %s, and at most `concurrency` + `max_buffered`", n(MaxBatchRecords)),
		"consumers[].batch.max_wait":               fmt.Sprintf("0 (no wait) or %s to %s; needs `max_records` above 1", d(MinTimeout), d(MaxBatchWait)),
		"consumers[].batch.max_bytes":              fmt.Sprintf("0 (no bound) to %s", MaxMaxBufferedBytes),
		"consumers[].handler.response":             "`ignore` or `outputs` (handler types `http` and `grpc`); `outputs` needs the `output` block",
		"consumers[].output.topic":                 "a Kafka topic name, not `dlq_topic`",
		"consumers[].output.topics":                fmt.Sprintf("at most %s Kafka topic names, not `dlq_topic`", n(MaxTopics)),
		"consumers[].output.max_per_record":        fmt.Sprintf("1 to %s", n(MaxOutputsPerRecord)),
		"consumers[].output.max_bytes":             fmt.Sprintf("1 B to %s", MaxOutputBytes),
		"shutdown_timeout":                         fmt.Sprintf("%s to %s", d(MinShutdownTimeout), d(MaxShutdownTimeout)),
		"swarm.nodes":                              fmt.Sprintf("1 to %s", n(MaxNodes)),
		"swarm.node_report_interval":               fmt.Sprintf("%s to %s", d(MinNodeReportInterval), d(MaxDuration)),
		"swarm.node_report_timeout":                fmt.Sprintf("%d × `node_report_interval` to %s", NodeReportTimeoutIntervals, d(MaxDuration)),
		"swarm.node_restart_timeout":               fmt.Sprintf("0 to %s", d(MaxDuration)),
		"swarm.supervision_interval":               fmt.Sprintf("%s to %s", d(MinSupervisionInterval), d(MaxDuration)),
		"swarm.max_restarts":                       fmt.Sprintf("0 to %s", n(MaxRestarts)),
		"swarm.restart_window":                     fmt.Sprintf("%s to %s", d(MinRestartWindow), d(MaxDuration)),
		"swarm.memory_limit":                       fmt.Sprintf("0 (off) or %s to %s", minMemoryLimit, MaxMemoryLimit),
		"http.listen":                              "empty (off) or `host:port`; port 0 takes any free port",
		"tracing.otlp_endpoint":                    fmt.Sprintf("empty (off) or an `http(s)` URL with a host, without credentials, query or fragment; at most %s bytes", n(maxCredentialLen)),
		"tracing.service_name":                     fmt.Sprintf("printable, at most %d bytes", maxServiceName),
	}
}

// referenceDefaults are defaults that the Go defaults cannot say as they
// are: keys that a file must give, and keys whose empty value means
// something else.
var referenceDefaults = map[string]string{
	"consumers[].name":         "required",
	"consumers[].group":        "the consumer's `name`",
	"consumers[].topics":       "required",
	"consumers[].handler":      "required",
	"consumers[].handler.type": "required (`noop` only when written)",
	"tracing.service_name":     "`turbo`",
}

// referenceDocs replace the doc comments of keys whose type serves
// elsewhere too: handler.tls is kafka.tls's type, whose comments speak of
// brokers.
var referenceDocs = map[string]string{
	"consumers[].handler.tls.enabled":              "For `grpc` only: `enabled: true` alone turns TLS on with the system's roots. Refused for `http`, where an `https://` URL turns TLS on by itself.",
	"consumers[].handler.tls.ca_file":              "A PEM bundle of the certificate authorities that sign the handler server's certificate; empty means the system's roots.",
	"consumers[].handler.tls.cert_file":            "`cert_file` and `key_file` are the client certificate (PEM) and its key (PEM: PKCS#1, PKCS#8 or EC) for a server that requires one (mTLS). Both or neither.",
	"consumers[].handler.tls.key_file":             "`cert_file` and `key_file` are the client certificate (PEM) and its key (PEM: PKCS#1, PKCS#8 or EC) for a server that requires one (mTLS). Both or neither.",
	"consumers[].handler.tls.server_name":          "Overrides the name the server's certificate is checked against (and the SNI sent); empty means the host of `url` or `target`.",
	"consumers[].handler.tls.insecure_skip_verify": "Accepts any server certificate. For tests only.",
}

// configurationReference renders the reference from the package's source
// and its defaults; it returns the keys too, for the test's checks.
func configurationReference(t *testing.T) (string, []refKey) {
	t.Helper()
	src := parseConfigSource(t)
	var sections []refSection
	var all []refKey
	bounds := referenceBounds()
	idents := src.identifiers()
	type nested struct {
		path, env, doc string
		typ            reflect.Type
		def            reflect.Value
	}
	var walk func(n nested)
	walk = func(n nested) {
		path, env, typ, def := n.path, n.env, n.typ, n.def
		sec := refSection{path: path, doc: n.doc}
		var subs []nested
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := keyName(f)
			key := joinKey(path, name)
			k := refKey{
				path:    key,
				goType:  typ.Name(),
				goField: f.Name,
				env:     env + "_" + strings.ToUpper(name),
				doc:     src.render(src.fieldDoc(typ.Name(), f.Name), typ.Name(), idents),
				bounds:  bounds[key],
			}
			if d, ok := referenceDocs[key]; ok {
				k.doc = d
			}
			var fv reflect.Value
			if def.IsValid() {
				fv = def.Field(i)
			}
			ft := f.Type
			switch {
			case ft.Kind() == reflect.Struct && ft != durationType:
				k.typ = "section"
				subs = append(subs, nested{key, k.env, sectionDoc(k), ft, fv})
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				k.typ = "list of sections"
				k.env += "_<n>"
				var el reflect.Value
				if ft.Elem() == reflect.TypeFor[Consumer]() {
					el = reflect.ValueOf(DefaultConsumer("<name>"))
				}
				subs = append(subs, nested{key + "[]", k.env, sectionDoc(k), ft.Elem(), el})
			default:
				k.typ, k.numeric = typeName(ft, src)
				k.def = formatDefault(fv)
				k.doc = joinParas(k.doc, src.enumList(ft.Name(), idents))
			}
			if d, ok := referenceDefaults[key]; ok {
				k.def = d
			}
			sec.keys = append(sec.keys, k)
			all = append(all, k)
		}
		sections = append(sections, sec)
		for _, s := range subs {
			walk(s)
		}
	}
	walk(nested{"", EnvPrefix, src.render(src.typeDocs["Config"], "Config", idents), reflect.TypeFor[Config](), reflect.ValueOf(Default())})

	var b strings.Builder
	b.WriteString(`# Configuration reference

<!-- Generated from the types of package config, their doc comments, their
defaults and the bounds Validate checks. Do not edit: change the source, then
run go test ./config -run TestConfigurationReference -update -->

Every key turbo reads, in the order of the file's sections. Each entry gives
the key's type, its default, the bounds checked at load, the environment
variable that overrides it, and what it does. A value outside its bounds,
an unknown key or a wrong type stops turbo at load with exit code 2 and a
message naming the key. For how to put a file together, see the
[configuration guide](README.md).

Notation: ` + "`consumers[].concurrency`" + ` is the key ` + "`concurrency`" + ` of
every entry of the list ` + "`consumers`" + `; ` + "`<n>`" + ` in an environment
variable is the entry's index, from 0 (` + "`TURBO_CONSUMERS_0_CONCURRENCY`" + `).
Durations are Go durations with a unit (` + "`500ms`, `10s`, `1h`" + `); sizes are
bytes or a number with ` + "`KiB`, `MiB`, `GiB`, `TiB`" + ` (or ` + "`KB`, `MB`, …" + `).
Lists are comma-separated in the environment; maps are ` + "`name=value`" + ` pairs
separated by commas.

`)
	b.WriteString("## Sections\n\n")
	for _, s := range sections {
		title := "top level"
		if s.path != "" {
			title = "`" + s.path + "`"
		}
		fmt.Fprintf(&b, "- [%s](#%s)\n", title, anchor(s.path))
	}
	b.WriteString("\n")
	for _, s := range sections {
		if s.path == "" {
			b.WriteString("## top level\n\n")
		} else {
			fmt.Fprintf(&b, "## `%s`\n\n", s.path)
		}
		if s.doc != "" {
			b.WriteString(s.doc + "\n\n")
		}
		b.WriteString("| key | type | default |\n|---|---|---|\n")
		for _, k := range s.keys {
			def := k.def
			if def == "" {
				def = "—"
			}
			target := k.path
			if k.typ == "list of sections" {
				target += "[]"
			}
			fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", k.path, anchor(target), k.typ, def)
		}
		b.WriteString("\n")
		for _, k := range s.keys {
			if k.typ == "section" || k.typ == "list of sections" {
				continue // described under its own heading
			}
			fmt.Fprintf(&b, "### `%s`\n\n", k.path)
			if k.doc != "" {
				b.WriteString(k.doc + "\n\n")
			}
			b.WriteString("- Type: " + k.typ + "\n")
			if k.def != "" {
				b.WriteString("- Default: " + k.def + "\n")
			}
			if k.bounds != "" {
				b.WriteString("- Bounds: " + k.bounds + "\n")
			}
			b.WriteString("- Environment: `" + k.env + "`\n\n")
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n", all
}

// sectionDoc introduces a section by the comment of the field that holds
// it (which says what it is for there: kafka.tls and handler.tls share a
// type), and its bounds and default when it has them.
func sectionDoc(k refKey) string {
	doc := k.doc
	var facts []string
	switch k.def {
	case "":
	case "required":
		facts = append(facts, "Required.")
	default:
		facts = append(facts, "Default: "+k.def+".")
	}
	if k.bounds != "" {
		facts = append(facts, "Entries: "+k.bounds+".")
	}
	return joinParas(doc, strings.Join(facts, " "))
}

// anchor is the GitHub anchor of a heading "`path`".
func anchor(path string) string {
	if path == "" {
		return "top-level"
	}
	return strings.NewReplacer(".", "", "[", "", "]", "", "_", "_").Replace(path)
}

// typeName names a field's type as the file writes it; numeric reports
// whether the type has bounds to state.
func typeName(t reflect.Type, src *configSource) (string, bool) {
	switch t {
	case durationType:
		return "duration", true
	case byteSizeType:
		return "size", true
	case secretType:
		return "string (secret: never shown)", false
	}
	if vals := src.enums[t.Name()]; len(vals) > 0 && t.Kind() == reflect.String {
		quoted := make([]string, len(vals))
		for i, v := range vals {
			quoted[i] = "`" + v.value + "`"
			if v.value == "" {
				quoted[i] = "`\"\"`"
			}
		}
		return "one of " + strings.Join(quoted, ", "), false
	}
	switch t.Kind() {
	case reflect.String:
		return "string", false
	case reflect.Bool:
		return "boolean", false
	case reflect.Int, reflect.Int64:
		return "integer", true
	case reflect.Float64:
		return "number", true
	case reflect.Slice:
		return "list of " + t.Elem().Kind().String() + "s", false
	case reflect.Map:
		return "map of " + t.Key().Kind().String() + " to " + t.Elem().Kind().String(), false
	}
	return t.String(), false
}

// formatDefault writes a default the way a file would.
func formatDefault(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	switch v.Type() {
	case durationType:
		return "`" + fmtDur(time.Duration(v.Int())) + "`"
	case byteSizeType:
		if v.Int() == 0 {
			return "`0`"
		}
		return "`" + ByteSize(v.Int()).String() + "`"
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return "`\"\"`"
		}
		return "`" + v.String() + "`"
	case reflect.Bool:
		return "`" + strconv.FormatBool(v.Bool()) + "`"
	case reflect.Int, reflect.Int64:
		return "`" + strconv.FormatInt(v.Int(), 10) + "`"
	case reflect.Float64:
		return "`" + strconv.FormatFloat(v.Float(), 'g', -1, 64) + "`"
	case reflect.Slice:
		if v.Len() == 0 {
			return "`[]`"
		}
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return "`[" + strings.Join(parts, ", ") + "]`"
	case reflect.Map:
		if v.Len() == 0 {
			return "`{}`"
		}
	}
	return "`" + fmt.Sprint(v.Interface()) + "`"
}

// formatInt writes n with thousands separators, as the guides do.
func formatInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) <= 4 {
		return s
	}
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, out...), ",")
}

// configSource is what the reference takes from the package's source: the
// doc comments of types and fields, and the values of enum constants.
type configSource struct {
	typeDocs  map[string]string
	fieldDocs map[string]map[string]string // type → field → doc
	fieldKeys map[string]map[string]string // type → Go field name → key
	fields    map[string][]string          // type → its fields, in order
	enums     map[string][]enumValue       // type → its constants
}

type enumValue struct {
	name, value, doc string
}

func parseConfigSource(t *testing.T) *configSource {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/turbokafka/turbo/config")
	if err != nil {
		t.Fatal(err)
	}
	src := &configSource{
		typeDocs:  map[string]string{},
		fieldDocs: map[string]map[string]string{},
		fieldKeys: map[string]map[string]string{},
		fields:    map[string][]string{},
		enums:     map[string][]enumValue{},
	}
	for _, typ := range pkg.Types {
		src.typeDocs[typ.Name] = typ.Doc
		for _, spec := range typ.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok || ts.Name.Name != typ.Name {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			docs := map[string]string{}
			keys := map[string]string{}
			for _, field := range st.Fields.List {
				text := field.Doc.Text()
				if text == "" {
					text = field.Comment.Text()
				}
				for _, name := range field.Names {
					src.fields[typ.Name] = append(src.fields[typ.Name], name.Name)
					docs[name.Name] = text
					if field.Tag != nil {
						tag, _ := strconv.Unquote(field.Tag.Value)
						if k, _, _ := strings.Cut(reflect.StructTag(tag).Get("mapstructure"), ","); k != "" {
							keys[name.Name] = k
						}
					}
				}
			}
			src.fieldDocs[typ.Name] = docs
			src.fieldKeys[typ.Name] = keys
		}
		for _, c := range typ.Consts {
			for _, spec := range c.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok || id.Name != typ.Name || len(vs.Values) != 1 {
					continue
				}
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				src.enums[typ.Name] = append(src.enums[typ.Name], enumValue{vs.Names[0].Name, v, vs.Doc.Text()})
			}
		}
	}
	return src
}

// fieldDoc is a field's doc comment. Fields declared under one comment
// ("CertFile and KeyFile are …") share it.
func (s *configSource) fieldDoc(typ, field string) string {
	docs := s.fieldDocs[typ]
	if d := docs[field]; d != "" {
		return d
	}
	for _, other := range s.fields[typ] {
		if d := docs[other]; regexp.MustCompile(`\b` + field + `\b`).MatchString(d) {
			return d
		}
	}
	return ""
}

// enumList lists an enum type's values with their constants' comments,
// each comment's leading constant name replaced by the value.
func (s *configSource) enumList(typ string, ids map[string]string) string {
	var lines []string
	for _, v := range s.enums[typ] {
		if v.doc == "" {
			continue
		}
		doc := strings.TrimPrefix(strings.TrimSpace(v.doc), v.name+" ")
		doc = strings.TrimPrefix(doc, "is ")
		lines = append(lines, "- "+ids[v.name]+": "+s.render(doc, "", ids))
	}
	return strings.Join(lines, "\n")
}

func joinParas(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n\n" + b
}

// identifiers maps the Go names a doc comment may use to what a file
// writes: Type.Field and multi-word field names to their keys, enum
// constants to their values.
func (s *configSource) identifiers() map[string]string {
	ids := map[string]string{
		"EmbeddedBroker":             "`" + EmbeddedBroker + "`",
		"NodeReportTimeoutIntervals": strconv.Itoa(NodeReportTimeoutIntervals),
	}
	for typ, keys := range s.fieldKeys {
		for field, key := range keys {
			ids[typ+"."+field] = "`" + key + "`"
		}
	}
	for _, vals := range s.enums {
		for _, v := range vals {
			ids[v.name] = "`" + v.value + "`"
			if v.value == "" {
				ids[v.name] = "`\"\"`"
			}
		}
	}
	return ids
}

var goIdent = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*(\.[A-Z][A-Za-z0-9]*)?\b`)

// render turns a Go doc comment into the reference's prose: the Go names of
// fields (of the same type, or written Type.Field) and of enum constants
// become the names a file uses, and an enum type's constants are listed
// with their own comments.
func (s *configSource) render(text, typ string, ids map[string]string) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	own := s.fieldKeys[typ]
	var paras []string
	for _, p := range strings.Split(text, "\n\n") {
		p = strings.Join(strings.Fields(p), " ")
		p = goIdent.ReplaceAllStringFunc(p, func(w string) string {
			if r, ok := ids[w]; ok {
				return r
			}
			if k, ok := own[w]; ok {
				return "`" + k + "`"
			}
			return w
		})
		paras = append(paras, p)
	}
	return strings.Join(paras, "\n\n")
}
