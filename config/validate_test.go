package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// validConfig builds a valid configuration in code, as Go callers do.
func validConfig() Config {
	c := Default()
	a := DefaultConsumer("a")
	a.Topics = []string{"t1", "t2"}
	b := DefaultConsumer("b")
	b.Topics = []string{"t2", "t3"}
	c.Consumers = []Consumer{a, b}
	return c
}

func TestValidateInCode(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantKey string // "" means valid
	}{
		{"valid", func(*Config) {}, ""},
		{"embedded alone", func(c *Config) { c.Kafka.Brokers = []string{EmbeddedBroker} }, ""},
		{"oldest version", func(c *Config) { c.Kafka.Version = "2.4.0" }, ""},
		{"four-part version is too old", func(c *Config) { c.Kafka.Version = "0.10.2.1" }, "kafka.version"},
		{"franz-go client", func(c *Config) { c.Kafka.Client = ClientFranz }, ""},
		{"franz-go with the consumer protocol", func(c *Config) {
			c.Kafka.Client, c.Kafka.GroupProtocol = ClientFranz, GroupConsumer
		}, ""},
		{"client misspelt", func(c *Config) { c.Kafka.Client = "franz" }, "kafka.client"},
		{"output topic", func(c *Config) { c.Consumers[0].Output.Topic = "out" }, ""},
		{"http answers read for outputs", func(c *Config) {
			c.Consumers[0].Handler = Handler{Type: HandlerHTTP, URL: "http://h/x", Timeout: time.Second, Response: ResponseOutputs}
			c.Consumers[0].Output.Topic = "out"
		}, ""},
		{"grpc answers read for outputs", func(c *Config) {
			c.Consumers[0].Handler = Handler{Type: HandlerGRPC, Target: "h:1", Timeout: time.Second, Response: ResponseOutputs}
			c.Consumers[0].Output.Topics = []string{"out"}
		}, ""},
		{"http answers ignored explicitly", func(c *Config) {
			c.Consumers[0].Handler = Handler{Type: HandlerHTTP, URL: "http://h/x", Timeout: time.Second, Response: ResponseIgnore}
		}, ""},
		{"response on a noop handler", func(c *Config) { c.Consumers[0].Handler.Response = ResponseIgnore }, "consumers[0].handler.response"},
		{"response misspelt", func(c *Config) {
			c.Consumers[0].Handler = Handler{Type: HandlerHTTP, URL: "http://h/x", Timeout: time.Second, Response: "output"}
		}, "consumers[0].handler.response"},
		{"answers read for outputs with no output topic", func(c *Config) {
			c.Consumers[0].Handler = Handler{Type: HandlerHTTP, URL: "http://h/x", Timeout: time.Second, Response: ResponseOutputs}
		}, "consumers[0].handler.response"},
		{"output topic with the answers ignored", func(c *Config) {
			c.Consumers[0].Handler = Handler{Type: HandlerHTTP, URL: "http://h/x", Timeout: time.Second}
			c.Consumers[0].Output.Topic = "out"
		}, "consumers[0].output"},
		{"output topics only", func(c *Config) { c.Consumers[0].Output.Topics = []string{"o1", "o2"} }, ""},
		{"output topic invalid", func(c *Config) { c.Consumers[0].Output.Topic = "a b" }, "consumers[0].output.topic"},
		{"output topics invalid", func(c *Config) { c.Consumers[0].Output.Topics = []string{"ok", ".."} }, "consumers[0].output.topics[1]"},
		{"output to the dead-letter topic", func(c *Config) {
			c.Consumers[0].OnFailure, c.Consumers[0].DLQTopic = OnFailureDLQ, "dead"
			c.Consumers[0].Output.Topics = []string{"dead"}
		}, "consumers[0].output"},
		{"outputs per record 0", func(c *Config) { c.Consumers[0].Output.MaxPerRecord = 0 }, "consumers[0].output.max_per_record"},
		{"outputs per record above the bound", func(c *Config) { c.Consumers[0].Output.MaxPerRecord = MaxOutputsPerRecord + 1 }, "consumers[0].output.max_per_record"},
		{"copy handler", func(c *Config) {
			c.Consumers[0].Handler, c.Consumers[0].Output.Topic = Handler{Type: HandlerCopy}, "out"
		}, ""},
		{"copy handler without an output topic", func(c *Config) { c.Consumers[0].Handler = Handler{Type: HandlerCopy} }, "consumers[0].output.topic"},
		{"exactly once", func(c *Config) { c.Consumers[0].Output.Topic, c.Consumers[0].Output.ExactlyOnce = "out", true }, ""},
		{"exactly once with an id", func(c *Config) {
			c.Consumers[0].Output = Output{Topic: "out", ExactlyOnce: true, TransactionalID: "orders.enrich-1", MaxPerRecord: 1, MaxBytes: 1}
		}, ""},
		{"exactly once without an output topic", func(c *Config) { c.Consumers[0].Output.ExactlyOnce = true }, "consumers[0].output.exactly_once"},
		{"exactly once on franz-go", func(c *Config) {
			c.Kafka.Client = ClientFranz
			c.Consumers[0].Output.Topic, c.Consumers[0].Output.ExactlyOnce = "out", true
		}, ""},
		{"exactly once before Kafka 2.5", func(c *Config) {
			c.Kafka.Version = "2.4.1"
			c.Consumers[0].Output.Topic, c.Consumers[0].Output.ExactlyOnce = "out", true
		}, "consumers[0].output.exactly_once"},
		{"transactional id without exactly once", func(c *Config) {
			c.Consumers[0].Output.Topic, c.Consumers[0].Output.TransactionalID = "out", "t1"
		}, "consumers[0].output.transactional_id"},
		{"transactional id with a space", func(c *Config) {
			c.Consumers[0].Output = Output{Topic: "out", ExactlyOnce: true, TransactionalID: "a b", MaxPerRecord: 1, MaxBytes: 1}
		}, "consumers[0].output.transactional_id"},
		{"transactional id too long", func(c *Config) {
			c.Consumers[0].Output = Output{Topic: "out", ExactlyOnce: true, TransactionalID: strings.Repeat("t", 201), MaxPerRecord: 1, MaxBytes: 1}
		}, "consumers[0].output.transactional_id"},
		{"output bytes 0", func(c *Config) { c.Consumers[0].Output.MaxBytes = 0 }, "consumers[0].output.max_bytes"},
		{"output bytes above the bound", func(c *Config) { c.Consumers[0].Output.MaxBytes = MaxOutputBytes + 1 }, "consumers[0].output.max_bytes"},
		{"client in capitals", func(c *Config) { c.Kafka.Client = "SARAMA" }, "kafka.client"},
		{"no client", func(c *Config) { c.Kafka.Client = "" }, "kafka.client"},
		{"protocol misspelt", func(c *Config) { c.Kafka.GroupProtocol = "kip848" }, "kafka.group_protocol"},
		{"consumer protocol on sarama", func(c *Config) { c.Kafka.GroupProtocol = GroupConsumer }, "kafka.group_protocol"},
		{"http handler", func(c *Config) {
			c.Consumers[0].Handler = Handler{Type: HandlerHTTP, URL: "HTTPS://h/x", Timeout: time.Second}
		}, ""},
		{"url ignored for non-http", func(c *Config) { c.Consumers[0].Handler.URL = "relative" }, ""},
		{"empty group needs ApplyDefaults", func(c *Config) { c.Consumers[1].Group = "" }, "consumers[1].group"},
		{"nil brokers", func(c *Config) { c.Kafka.Brokers = nil }, "kafka.brokers"},
		{"blank broker", func(c *Config) { c.Kafka.Brokers = []string{" "} }, "kafka.brokers[0]"},
		{"zero value enum", func(c *Config) { c.Consumers[0].Ordering = "" }, "consumers[0].ordering"},
		{"kafka reported before consumers", func(c *Config) {
			c.Consumers[0].Concurrency = 0
			c.Kafka.Version = "x"
		}, "kafka.version"},
		{"consumers reported before shutdown_timeout", func(c *Config) {
			c.ShutdownTimeout = 0
			c.Consumers[1].MaxBuffered = -1
		}, "consumers[1].max_buffered"},
		{"shutdown_timeout reported before log", func(c *Config) {
			c.ShutdownTimeout = 0
			c.Log.Level = "x"
		}, "shutdown_timeout"},
		{"zero config", func(c *Config) { *c = Config{} }, "kafka.brokers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			before := deepCopy(c)
			err := c.Validate()
			if !reflect.DeepEqual(c, before) {
				t.Errorf("Validate modified the config")
			}
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded")
			}
			checkInvalid(t, err, tt.wantKey)
		})
	}
}

// deepCopy copies the slices of c so a later comparison sees mutations.
func deepCopy(c Config) Config {
	out := c
	out.Kafka.Brokers = append([]string(nil), c.Kafka.Brokers...)
	out.Consumers = nil
	for _, cons := range c.Consumers {
		cons.Topics = append([]string(nil), cons.Topics...)
		out.Consumers = append(out.Consumers, cons)
	}
	if c.Consumers == nil {
		out.Consumers = nil
	}
	return out
}
