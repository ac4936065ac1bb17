package actors_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
)

// CheckKafka is the backstop for what sarama refuses and config cannot see
// (config does not link sarama): before it, kafka.version 2.3.0 reached
// sarama.NewConsumerGroup, whose "cooperative balance strategies require
// Version >= 2.4" the tree retried forever as "cannot reach Kafka". The
// configurations here are built in code, past config.Validate.
func TestCheckKafka(t *testing.T) {
	t.Parallel()
	base := func() config.Config {
		c := config.Default()
		cons := config.DefaultConsumer("orders")
		cons.Topics = []string{"orders"}
		c.Consumers = []config.Consumer{cons}
		return c
	}
	tests := []struct {
		name    string
		mutate  func(*config.Config)
		wantKey string // "" means accepted
		wantIn  string
	}{
		{"defaults", func(*config.Config) {}, "", ""},
		{"oldest version", func(c *config.Config) { c.Kafka.Version = "2.4.0" }, "", ""},
		{"static membership", func(c *config.Config) { c.Kafka.GroupInstanceID = "pod-1" }, "", ""},
		{"version 2.3.0", func(c *config.Config) { c.Kafka.Version = "2.3.0" }, "kafka.version", "cooperative balance strategies require Version >= 2.4"},
		{"version 0.10.2.0", func(c *config.Config) { c.Kafka.Version = "0.10.2.0" }, "kafka.version", "Version >= 2.4"},
		{"unparseable version", func(c *config.Config) { c.Kafka.Version = "3.6.0.1" }, "kafka.version", "invalid version"},
		{"instance id ..", func(c *config.Config) { c.Kafka.GroupInstanceID = ".." }, "kafka.group_instance_id", `cannot be "." or ".."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mutate(&c)
			err := actors.CheckKafka(&c)
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("CheckKafka: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckKafka accepted kafka %+v", c.Kafka)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Key != tt.wantKey {
				t.Errorf("error %q is not a FieldError for %s", err, tt.wantKey)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %q does not wrap config.ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error %q does not contain %q", err, tt.wantIn)
			}
		})
	}
}
