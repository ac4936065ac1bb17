package testkit

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"
)

// A coordinator loading offsets, moving or not yet there is asked again;
// a group that does not exist, or any other error, is not.
func TestCoordinatorBusy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{sarama.ErrOffsetsLoadInProgress, true},
		{fmt.Errorf("listing: %w", sarama.ErrNotCoordinatorForConsumer), true},
		{sarama.ErrConsumerCoordinatorNotAvailable, true},
		{sarama.ErrGroupIDNotFound, false},
		{sarama.ErrOutOfBrokers, false},
		{nil, false},
	} {
		if got := coordinatorBusy(c.err); got != c.want {
			t.Errorf("coordinatorBusy(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}
