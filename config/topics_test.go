package config

import (
	"slices"
	"strings"
	"testing"
)

func TestTopicPatterns(t *testing.T) {
	doc := `
consumers:
  - name: orders
    topics: [audit, "/orders\\..*/", "/payments-[0-9]+/"]
    handler: {type: noop}
    on_failure: dlq
    dlq_topic: orders.dead
    exclude_topics: [orders.internal]
    metadata_refresh: 200ms
  - name: billing
    topics: [billing]
    handler: {type: noop}
    on_failure: dlq
    dlq_topic: billing.dead
`
	cfg, err := Load(writeConfig(t, "p.yaml", doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Consumers[0]
	if c.MetadataRefresh.String() != "200ms" {
		t.Fatalf("metadata_refresh %s", c.MetadataRefresh)
	}
	// Every consumer's dead-letter topic is every consumer's exclusion.
	for i, cc := range cfg.Consumers {
		if want := []string{"orders.internal", "orders.dead", "billing.dead"}; i == 0 && !slices.Equal(cc.ExcludeTopics, want) ||
			i == 1 && !slices.Equal(cc.ExcludeTopics, want[1:]) {
			t.Fatalf("consumers[%d].exclude_topics = %q", i, cc.ExcludeTopics)
		}
	}
	again := *cfg
	again.ExcludeDeadLetters() // idempotent: nothing added twice
	if !slices.Equal(again.Consumers[0].ExcludeTopics, c.ExcludeTopics) {
		t.Fatalf("ApplyDefaults again: %q", again.Consumers[0].ExcludeTopics)
	}
	sub, err := c.Subscription()
	if err != nil || !sub.HasPatterns() || !slices.Equal(sub.Names(), []string{"audit"}) {
		t.Fatalf("subscription %+v, %v", sub, err)
	}
	existing := []string{
		"orders.eu", "orders.us", "orders", // "orders" does not match orders\..*
		"orders.dead", "orders.internal", "__consumer_offsets", "__orders.x", // dead letters, excluded, internal
		"payments-12", "payments-x", "xpayments-1", "payments-1x", // anchored at both ends
		"billing.dead",
	}
	want := []string{"audit", "orders.eu", "orders.us", "payments-12"}
	if got := sub.Match(existing); !slices.Equal(got, want) {
		t.Fatalf("Match = %v, want %v", got, want)
	}
	// Without patterns nothing depends on what exists.
	plain, _ := Consumer{Topics: []string{"b", "a"}}.Subscription()
	if plain.HasPatterns() || !slices.Equal(plain.Match(existing), []string{"a", "b"}) {
		t.Fatalf("plain subscription matched %v", plain.Match(existing))
	}
}

func TestTopicPatternErrors(t *testing.T) {
	for _, tt := range []struct{ topics, want string }{
		{`["/orders[/"]`, `consumers[0].topics[0]: the pattern "/orders[/" is not a regular expression: error parsing regexp: missing closing ]`},
		{`["//"]`, `consumers[0].topics[0]: the pattern "//" is empty`},
		{`["/` + strings.Repeat("a", 1000) + `/"]`, `consumers[0].topics[0]: the pattern is 1002 bytes long, at most 1000`},
		{`["orders*"]`, `consumers[0].topics[0]: must be a Kafka topic name (1 to 249 characters of [a-zA-Z0-9._-], not . or ..) or a /regular expression/ (got "orders*")`},
		{`[t]` + "\n    exclude_topics: [\"a b\"]", `consumers[0].exclude_topics[0]: must be a Kafka topic name`},
		{`[t]` + "\n    metadata_refresh: 1ms", `consumers[0].metadata_refresh: must be between 100ms and 24h (got 1ms)`},
	} {
		_, err := Load(writeConfig(t, "bad.yaml", "consumers:\n  - name: a\n    handler: {type: noop}\n    topics: "+tt.topics+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("topics %.40s: error %v, want it to contain %q", tt.topics, err, tt.want)
		}
	}
}

// The CLI's topic filters apply to what a pattern matches.
func TestSelectFiltersPatterns(t *testing.T) {
	base := func() *Config {
		return &Config{Consumers: []Consumer{{Name: "a", Topics: []string{"audit", "/orders\\..*/"}, ExcludeTopics: []string{"orders.x"}}}}
	}
	c := base()
	if err := c.Select(nil, nil, nil, []string{"orders.eu", "audit"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Consumers[0]; !slices.Equal(got.Topics, []string{"/orders\\..*/"}) || !slices.Equal(got.ExcludeTopics, []string{"orders.x", "orders.eu", "audit"}) {
		t.Fatalf("--exclude-topics: topics %v, exclude_topics %v", got.Topics, got.ExcludeTopics)
	}
	c = base()
	if err := c.Select(nil, nil, []string{"orders.us", "orders.eu", "refunds"}, []string{"orders.eu"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Consumers[0].Topics; !slices.Equal(got, []string{"orders.us"}) {
		t.Fatalf("--include-topics with a pattern: topics %v, want [orders.us]", got)
	}
	c = base()
	if err := c.Select(nil, nil, []string{"refunds"}, nil); err == nil {
		t.Fatal("an include filter that leaves the only consumer nothing was accepted")
	}
}
