package config

import (
	"reflect"
	"testing"
)

// selectConfig has consumers a (t1, t2), b (t2, t3) and c (t4).
func selectConfig() Config {
	c := validConfig()
	cc := DefaultConsumer("c")
	cc.Topics = []string{"t4"}
	c.Consumers = append(c.Consumers, cc)
	return c
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name                       string
		inclC, exclC, inclT, exclT []string
		want                       map[string][]string // consumer name -> topics, in order
		order                      []string
		wantKey                    string // error key, "" for success
		wantIn                     string
	}{
		{name: "no filters keeps all", order: []string{"a", "b", "c"},
			want: map[string][]string{"a": {"t1", "t2"}, "b": {"t2", "t3"}, "c": {"t4"}}},
		{name: "include consumers", inclC: []string{"c", "a"}, order: []string{"a", "c"},
			want: map[string][]string{"a": {"t1", "t2"}, "c": {"t4"}}},
		{name: "exclude consumers", exclC: []string{"b"}, order: []string{"a", "c"},
			want: map[string][]string{"a": {"t1", "t2"}, "c": {"t4"}}},
		{name: "exclude wins over include", inclC: []string{"a", "b"}, exclC: []string{"a"}, order: []string{"b"},
			want: map[string][]string{"b": {"t2", "t3"}}},
		{name: "include topics narrows and drops consumers left empty", inclT: []string{"t2"}, order: []string{"a", "b"},
			want: map[string][]string{"a": {"t2"}, "b": {"t2"}}},
		{name: "exclude topics", exclT: []string{"t2", "t4"}, order: []string{"a", "b"},
			want: map[string][]string{"a": {"t1"}, "b": {"t3"}}},
		{name: "include and exclude topics", inclT: []string{"t1", "t2", "t3"}, exclT: []string{"t2"}, order: []string{"a", "b"},
			want: map[string][]string{"a": {"t1"}, "b": {"t3"}}},
		{name: "unknown topic in filter is fine", inclT: []string{"t3", "nope"}, order: []string{"b"},
			want: map[string][]string{"b": {"t3"}}},
		{name: "unknown included consumer", inclC: []string{"a", "x"},
			wantKey: "--include-consumers", wantIn: `no consumer named "x"`},
		{name: "unknown excluded consumer", exclC: []string{"y"},
			wantKey: "--exclude-consumers", wantIn: `no consumer named "y"`},
		{name: "everything excluded", exclC: []string{"a", "b", "c"},
			wantKey: "consumers", wantIn: "nothing left to run"},
		{name: "all topics filtered out", inclC: []string{"c"}, exclT: []string{"t4"},
			wantKey: "consumers", wantIn: "nothing left to run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := selectConfig()
			before := deepCopy(c)
			err := c.Select(tt.inclC, tt.exclC, tt.inclT, tt.exclT)
			if tt.wantKey != "" {
				if err == nil {
					t.Fatalf("Select succeeded: %+v", c.Consumers)
				}
				checkInvalid(t, err, tt.wantKey, tt.wantIn)
				if !reflect.DeepEqual(c, before) {
					t.Error("failed Select modified the config")
				}
				return
			}
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			var names []string
			for _, cons := range c.Consumers {
				names = append(names, cons.Name)
				if !reflect.DeepEqual(cons.Topics, tt.want[cons.Name]) {
					t.Errorf("consumer %s topics = %q, want %q", cons.Name, cons.Topics, tt.want[cons.Name])
				}
			}
			if !reflect.DeepEqual(names, tt.order) {
				t.Errorf("consumers = %q, want %q", names, tt.order)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate after Select: %v", err)
			}
		})
	}
}

// Select must not write into topic slices it shares with the caller.
func TestSelectDoesNotAliasTopics(t *testing.T) {
	shared := []string{"t1", "t2", "t3"}
	c := Default()
	a := DefaultConsumer("a")
	a.Topics = shared
	c.Consumers = []Consumer{a}
	if err := c.Select(nil, nil, nil, []string{"t1"}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shared, []string{"t1", "t2", "t3"}) {
		t.Errorf("shared topics slice changed to %q", shared)
	}
}
