// Command embedded is a small custom service that embeds turbo: it builds a
// consumer from a config struct in code, handles records with its own Go
// handler, and serves its own HTTP endpoint next to it.
//
//	go run ./examples/embedded                       # starts an in-process broker with demo records
//	go run ./examples/embedded -brokers host:9092    # your Kafka
//	curl localhost:8081/stats
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/config"
)

// wordCounter is the service's own handler: it counts records per key. It
// is called concurrently for different keys, one record at a time per key.
type wordCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *wordCounter) Handle(ctx context.Context, rec *actors.Record) error {
	if len(rec.Value) == 0 {
		// A record that can never succeed: say so, so that retries (when
		// configured) are skipped.
		return fmt.Errorf("empty value at %s@%d: %w", rec.TP(), rec.Offset, actors.ErrPermanent)
	}
	select {
	case <-time.After(5 * time.Millisecond): // pretend to call something slow
	case <-ctx.Done():
		return ctx.Err()
	}
	w.mu.Lock()
	w.counts[string(rec.Key)]++
	w.mu.Unlock()
	return nil
}

func main() {
	brokers := flag.String("brokers", "", "Kafka bootstrap brokers, comma-separated (default: an in-process broker with demo records)")
	listen := flag.String("listen", "127.0.0.1:8081", "address of this service's HTTP endpoint")
	flag.Parse()
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	if err := run(*brokers, *listen, log); err != nil {
		log.Error().Err(err).Msg("embedded example failed")
		os.Exit(1)
	}
}

func run(brokers, listen string, log zerolog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	kafka := config.Default().Kafka
	if brokers == "" {
		b, err := embedded.Start(embedded.Options{Partitions: 8, Topics: []string{"words"}})
		if err != nil {
			return err
		}
		defer b.Close()
		if err := embedded.Produce(ctx, embedded.ProduceOptions{Brokers: b.Addrs(), Topic: "words", Count: 5000, Keys: 50}); err != nil {
			return err
		}
		kafka.Brokers = b.Addrs()
	} else {
		kafka.Brokers = strings.Split(brokers, ",")
	}

	// The consumer's configuration, in code: the same struct `turbo run`
	// loads from YAML, with the same defaults and validation.
	cc := config.DefaultConsumer("word-counter")
	cc.Topics = []string{"words"}
	cc.Ordering = config.OrderingKey
	cc.Concurrency = 32

	counter := &wordCounter{counts: map[string]int{}}
	consumer, err := actors.New(actors.Options{
		Consumer:        cc,
		Kafka:           kafka,
		ShutdownTimeout: 10 * time.Second,
		Handler:         counter,
		Logger:          log,
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		counter.mu.Lock()
		keys := len(counter.counts)
		counter.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"consumer": consumer.Stats(), "distinct_keys": keys})
	})
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	log.Info().Str("listen", listen).Msg("serving /stats; Ctrl-C to stop")

	select {
	case <-ctx.Done():
	case err = <-served:
	}
	// Stop in order: the HTTP endpoint, then the consumer (which drains and
	// commits within its shutdown timeout).
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil && err == nil {
		err = serr
	}
	if cerr := consumer.Stop(shutdownCtx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
