// Package control carries out the control commands of the HTTP routes
// (supervisor/web: pause, resume, retune, skip, seek) on a process's consumers, so that
// `turbo run` and a service that embeds consumers and serves web's routes
// do the same thing.
package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor/web"
)

// Consumers is a web.Controller over the consumers a function lists (those
// running now: a configuration reload replaces them).
type Consumers func() []*actors.Consumer

// Do implements web.Controller.
func (list Consumers) Do(cmd web.Command) (string, error) {
	for _, c := range list() {
		if c.Name() == cmd.Consumer {
			return Do(c, cmd)
		}
	}
	return "", web.ErrNoConsumer
}

// Do carries out cmd on c and says what it did. Arguments c refuses come
// back wrapping web.ErrBadCommand.
func Do(c *actors.Consumer, cmd web.Command) (string, error) {
	switch cmd.Action {
	case web.ActionPause, web.ActionResume:
		return pause(c, cmd), nil
	case web.ActionRetune:
		return retune(c, cmd)
	case web.ActionSkip:
		tp := actors.TopicPartition{Topic: cmd.Topic, Partition: *cmd.Partition}
		res, err := c.Skip(context.Background(), tp, *cmd.Offset)
		switch {
		case errors.Is(err, actors.ErrSkipTimeout):
			return "", fmt.Errorf("%w: %w", web.ErrBusy, err)
		case err != nil:
			return "", err
		case !res.Found:
			return "", fmt.Errorf("%w: %s", web.ErrNotHere, res)
		}
		return res.String(), nil
	case web.ActionSeek:
		return seek(c, cmd)
	}
	return "", fmt.Errorf("%w: no action %q", web.ErrBadCommand, cmd.Action)
}

// commandWait bounds a command's wait for its consumer: under the HTTP
// server's write timeout (10 s) and a swarm supervisor's wait for its
// nodes (8 s), so that the client gets this answer, not a cut connection.
const commandWait = 7 * time.Second

func seek(c *actors.Consumer, cmd web.Command) (string, error) {
	to := actors.SeekTo{Topic: cmd.Topic}
	if cmd.Partition != nil {
		to.Partitions = []int32{*cmd.Partition}
	}
	if cmd.Time != nil {
		to.Time = *cmd.Time
	} else {
		to.Offset = *cmd.Offset
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandWait)
	defer cancel()
	res, err := c.Seek(ctx, to)
	switch {
	case errors.Is(err, actors.ErrSeekRefused):
		return "", fmt.Errorf("%w: %w", web.ErrBadCommand, err)
	case errors.Is(err, actors.ErrSeekBusy), errors.Is(err, actors.ErrSeekTimeout):
		return "", fmt.Errorf("%w: %w", web.ErrBusy, err)
	case err != nil:
		return "", err
	case len(res.Moved) == 0:
		return "", fmt.Errorf("%w: %s", web.ErrNotHere, res)
	}
	return res.String(), nil
}

func pause(c *actors.Consumer, cmd web.Command) string {
	on := cmd.Action == web.ActionPause
	what := fmt.Sprintf("consumer %q", c.Name())
	switch {
	case cmd.Partition != nil:
		tp := actors.TopicPartition{Topic: cmd.Topic, Partition: *cmd.Partition}
		what = fmt.Sprintf("partition %s of consumer %q", tp, c.Name())
		if on {
			c.Pause(tp)
		} else {
			c.Resume(tp)
		}
	case cmd.Topic != "":
		what = fmt.Sprintf("topic %q of consumer %q", cmd.Topic, c.Name())
		if on {
			c.PauseTopics(cmd.Topic)
		} else {
			c.ResumeTopics(cmd.Topic)
		}
	case on:
		c.Pause()
	default:
		c.Resume()
	}
	return what + " " + cmd.Action + "d"
}

func retune(c *actors.Consumer, cmd web.Command) (string, error) {
	was := c.Tuning()
	if cmd.Rate != nil {
		r := config.Rate{Limit: *cmd.Rate}
		if cmd.Burst != nil {
			r.Burst = *cmd.Burst
		}
		if err := r.Check(); err != nil {
			return "", bad(err)
		}
		if cmd.Concurrency != nil { // both or neither: check the other before changing one
			if n := *cmd.Concurrency; n < 1 || n > config.MaxConcurrency {
				return "", fmt.Errorf("%w: concurrency must be 1 to %d (got %d)", web.ErrBadCommand, config.MaxConcurrency, n)
			}
		}
		if err := c.SetRate(r); err != nil {
			return "", bad(err)
		}
	}
	if cmd.Concurrency != nil {
		if err := c.SetConcurrency(*cmd.Concurrency); err != nil {
			return "", bad(err)
		}
	}
	now := c.Tuning()
	return fmt.Sprintf("consumer %q retuned: concurrency %d (was %d), rate limit %s (was %s)",
		c.Name(), now.Concurrency, was.Concurrency, rateText(now.Rate), rateText(was.Rate)), nil
}

func rateText(r config.Rate) string {
	if r.Limit == 0 {
		return "none"
	}
	if r.Burst == 0 {
		return fmt.Sprintf("%g/s", r.Limit)
	}
	return fmt.Sprintf("%g/s, burst %d", r.Limit, r.Burst)
}

// bad turns a consumer's refusal (config.ErrInvalid) into web.ErrBadCommand
// with the same words.
func bad(err error) error {
	if errors.Is(err, config.ErrInvalid) {
		msg := err.Error()
		if p := config.ErrInvalid.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
			msg = msg[len(p):]
		}
		return fmt.Errorf("%w: %s", web.ErrBadCommand, msg)
	}
	return err
}
