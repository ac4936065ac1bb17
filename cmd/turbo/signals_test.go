package main

import (
	"os"
	"syscall"
	"testing"
)

func TestSignalPolicy(t *testing.T) {
	tests := []struct {
		name string
		node bool
		sigs []os.Signal
		want []signalVerdict
	}{
		{"run: the first of each stop signal is graceful", false, []os.Signal{syscall.SIGHUP}, []signalVerdict{stopGracefully}},
		{"run: a second SIGTERM exits now", false, []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, []signalVerdict{stopGracefully, stopNow}},
		{"run: SIGINT then SIGQUIT", false, []os.Signal{syscall.SIGINT, syscall.SIGQUIT}, []signalVerdict{stopGracefully, stopNow}},
		// A killed supervisor's Pdeathsig arrives once per exiting thread.
		{"node: repeated SIGTERMs are one request", true, []os.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGTERM}, []signalVerdict{stopGracefully, alreadyStopping, alreadyStopping}},
		{"node: SIGINT after SIGTERM exits now", true, []os.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGINT}, []signalVerdict{stopGracefully, alreadyStopping, stopNow}},
		{"node: SIGTERM after SIGHUP is the same request", true, []os.Signal{syscall.SIGHUP, syscall.SIGTERM}, []signalVerdict{stopGracefully, alreadyStopping}},
		{"node: a second SIGQUIT exits now", true, []os.Signal{syscall.SIGQUIT, syscall.SIGQUIT}, []signalVerdict{stopGracefully, stopNow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := signalPolicy{node: tt.node}
			for i, sig := range tt.sigs {
				if got := p.judge(sig); got != tt.want[i] {
					t.Errorf("signal %d (%s): verdict %d, want %d", i+1, sig, got, tt.want[i])
				}
			}
		})
	}
}
