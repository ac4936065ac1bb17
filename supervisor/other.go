//go:build !linux

package supervisor

import (
	"context"
	"errors"
	"runtime"
)

var errUnsupported = errors.New("turbo swarm needs Linux 5.4 or later (pidfds); this is " + runtime.GOOS)

// Supported reports whether this system can run a swarm: only Linux can.
func Supported() error { return errUnsupported }

// Run is never reached: New fails where Supported does.
func (s *Supervisor) Run(context.Context) error { return errUnsupported }

func residentBytes(int) (uint64, error) { return 0, errUnsupported }

type process struct{}
