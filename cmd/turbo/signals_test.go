package main

import (
	"os"
	"syscall"
	"testing"
)

func TestSignalPolicy(t *testing.T) {
	tests := []struct {
		name    string
		node    bool
		reloads bool
		sigs    []os.Signal
		want    []signalVerdict
	}{
		{"run: SIGHUP reloads, every time", false, true, []os.Signal{syscall.SIGHUP, syscall.SIGHUP}, []signalVerdict{reload, reload}},
		{"run: SIGHUP while stopping changes nothing", false, true, []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT}, []signalVerdict{stopGracefully, alreadyStopping, stopNow}},
		{"dev, produce: SIGHUP stops gracefully", false, false, []os.Signal{syscall.SIGHUP, syscall.SIGHUP}, []signalVerdict{stopGracefully, stopNow}},
		{"run: a second SIGTERM exits now", false, true, []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, []signalVerdict{stopGracefully, stopNow}},
		{"run: SIGINT then SIGQUIT", false, true, []os.Signal{syscall.SIGINT, syscall.SIGQUIT}, []signalVerdict{stopGracefully, stopNow}},
		// A killed supervisor's Pdeathsig arrives once per exiting thread.
		{"node: repeated SIGTERMs are one request", true, false, []os.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGTERM}, []signalVerdict{stopGracefully, alreadyStopping, alreadyStopping}},
		{"node: SIGINT after SIGTERM exits now", true, false, []os.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGINT}, []signalVerdict{stopGracefully, alreadyStopping, stopNow}},
		{"node: SIGHUP is its supervisor's to act on", true, false, []os.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGHUP}, []signalVerdict{ignored, stopGracefully, ignored}},
		{"node: a second SIGQUIT exits now", true, false, []os.Signal{syscall.SIGQUIT, syscall.SIGQUIT}, []signalVerdict{stopGracefully, stopNow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := signalPolicy{node: tt.node, reloads: tt.reloads}
			for i, sig := range tt.sigs {
				if got := p.judge(sig); got != tt.want[i] {
					t.Errorf("signal %d (%s): verdict %d, want %d", i+1, sig, got, tt.want[i])
				}
			}
		})
	}
}
