package config

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// YAML writes c as a configuration file: every key under the name the file
// uses, in the order the types declare them, with the values the process
// runs with (defaults and environment overrides applied), durations and sizes
// in the forms the file accepts, and every Secret redacted. It is what
// `turbo config print` shows; a configuration without secrets loads back
// from it unchanged.
func (c *Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(printNode(reflect.ValueOf(*c))); err != nil {
		return nil, fmt.Errorf("printing the configuration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("printing the configuration: %w", err)
	}
	return b.Bytes(), nil
}

var secretType = reflect.TypeFor[Secret]()

// printNode turns one value of the configuration into a YAML node. Struct
// fields are taken by their mapstructure names; the configuration's types
// use nothing else (no squash, no unexported fields), which the printer test
// checks by loading what it prints.
func printNode(v reflect.Value) *yaml.Node {
	switch v.Type() {
	case durationType:
		return scalar(time.Duration(v.Int()).String(), "!!str")
	case byteSizeType:
		return scalar(ByteSize(v.Int()).String(), "!!str")
	case secretType:
		return scalar(Secret(v.String()).String(), "!!str")
	}
	switch v.Kind() {
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for i := range v.NumField() {
			name := keyName(v.Type().Field(i))
			if name == "-" {
				continue
			}
			n.Content = append(n.Content, scalar(name, "!!str"), printNode(v.Field(i)))
		}
		return n
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			e := printNode(v.Index(i))
			if e.Kind != yaml.ScalarNode {
				n.Style = 0 // a list of mappings reads better in block style
			}
			n.Content = append(n.Content, e)
		}
		return n
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			n.Content = append(n.Content, scalar(k.String(), "!!str"), printNode(v.MapIndex(k)))
		}
		return n
	case reflect.String:
		return scalar(v.String(), "!!str")
	case reflect.Bool:
		return scalar(strconv.FormatBool(v.Bool()), "")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return scalar(strconv.FormatInt(v.Int(), 10), "")
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalar(strconv.FormatUint(v.Uint(), 10), "")
	case reflect.Float32, reflect.Float64:
		return scalar(strconv.FormatFloat(v.Float(), 'g', -1, 64), "")
	}
	// A kind the configuration does not use: say so in the output rather
	// than guess (the printer test loads every field's printed form).
	return scalar(fmt.Sprintf("<unprintable %s>", v.Type()), "!!str")
}

// scalar is a YAML scalar; tag "!!str" keeps a string that looks like a
// number or a boolean quoted, "" lets the value speak for itself.
func scalar(value, tag string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}
