package config

import (
	"slices"
	"testing"
)

func TestHandlerChanges(t *testing.T) {
	consumer := func(name string, h HandlerType) Consumer {
		c := DefaultConsumer(name)
		c.Topics, c.Handler.Type = []string{name}, h
		return c
	}
	old := Default()
	old.Consumers = []Consumer{consumer("a", HandlerHTTP), consumer("b", HandlerHTTP), consumer("gone", HandlerLog)}
	next := Default()
	next.Consumers = []Consumer{consumer("new", HandlerNoop), consumer("b", HandlerNoop), consumer("a", HandlerHTTP)}
	got := HandlerChanges(&old, &next)
	want := []HandlerChange{{Consumer: "b", Old: HandlerHTTP, New: HandlerNoop}}
	if !slices.Equal(got, want) {
		t.Fatalf("HandlerChanges = %+v, want %+v", got, want)
	}
	if got := HandlerChanges(&old, &old); got != nil {
		t.Fatalf("no change: %+v", got)
	}
}

func TestRestartOnly(t *testing.T) {
	old := Default()
	next := Default()
	next.Log.Level = LogDebug
	next.HTTP.Listen = "127.0.0.1:0"
	next.Consumers = []Consumer{DefaultConsumer("a")} // the consumers' own: reloaded
	if got, want := RestartOnly(&old, &next), []string{"http", "log"}; !slices.Equal(got, want) {
		t.Fatalf("RestartOnly = %q, want %q", got, want)
	}
}
