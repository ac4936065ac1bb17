package kafkanet

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
)

// The client errors that send Explain to probe the listener are found
// under a caller's context (turbo produce says what it was connecting),
// and not where the client gave its own details.
func TestProbedErrorsAreFoundUnderContext(t *testing.T) {
	oversize := errors.New("invalid large response size 352518912 > limit 104857600; the first three bytes received appear to be a tls alert record")
	for _, tc := range []struct {
		name string
		err  error
		bare bool // bareOutOfBrokers
		big  bool // oversizeAnswer
	}{
		{"bare out of brokers", sarama.ErrOutOfBrokers, true, false},
		{"out of brokers under context", fmt.Errorf("connecting producer to [a:1]: %w", sarama.ErrOutOfBrokers), true, false},
		{"out of brokers with the brokers' errors", fmt.Errorf("%w: %w", sarama.ErrOutOfBrokers, sarama.ErrSASLAuthenticationFailed), false, false},
		{"oversize answer", oversize, false, true},
		{"oversize answer under context", fmt.Errorf("connecting producer to [a:1]: %w", oversize), false, true},
		{"another error", errors.New("connection refused"), false, false},
	} {
		if got := bareOutOfBrokers(tc.err); got != tc.bare {
			t.Errorf("%s: bareOutOfBrokers = %v, want %v", tc.name, got, tc.bare)
		}
		if got := oversizeAnswer(tc.err); got != tc.big {
			t.Errorf("%s: oversizeAnswer = %v, want %v", tc.name, got, tc.big)
		}
	}
}
