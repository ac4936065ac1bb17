package config

import (
	"reflect"
	"slices"
)

// HandlerChange is a consumer whose handler type a reload changes: worth a
// warning, since what is done with every record from then on changes with it.
type HandlerChange struct {
	Consumer string
	Old, New HandlerType
}

// HandlerChanges lists, in next's order, the consumers (by name) that both
// configurations have and whose handler type differs.
func HandlerChanges(old, next *Config) []HandlerChange {
	var out []HandlerChange
	for _, n := range next.Consumers {
		i := slices.IndexFunc(old.Consumers, func(o Consumer) bool { return o.Name == n.Name })
		if i >= 0 && old.Consumers[i].Handler.Type != n.Handler.Type {
			out = append(out, HandlerChange{Consumer: n.Name, Old: old.Consumers[i].Handler.Type, New: n.Handler.Type})
		}
	}
	return out
}

// RestartOnly names the sections next changes that belong to the process
// rather than to its consumers (http, tracing, log, swarm, kafka.embedded):
// a reload replaces the consumers, and these take effect when the process
// starts again.
func RestartOnly(old, next *Config) []string {
	var out []string
	for _, s := range []struct {
		name      string
		old, next any
	}{
		{"http", old.HTTP, next.HTTP}, {"tracing", old.Tracing, next.Tracing}, {"log", old.Log, next.Log},
		{"swarm", old.Swarm, next.Swarm}, {"kafka.embedded", old.Kafka.Embedded, next.Kafka.Embedded},
	} {
		if !reflect.DeepEqual(s.old, s.next) {
			out = append(out, s.name)
		}
	}
	return out
}
