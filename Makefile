# turbo's build, test and benchmark entry points. Everything needs only Go.
GO       ?= go
BIN      := .bin/turbo
PKGS     := ./...
# The whole suite, race detector on, must stay far below CI's limit.
TEST_TIMEOUT ?= 20m
# What test-kafka runs against a real Kafka broker (test/kafka/kafka.sh).
KAFKA_PKGS := ./test/kafka/ ./test/e2e/... ./test/chaos/ ./actors/...
KAFKA_SH   := test/kafka/kafka.sh

.PHONY: all build run test vet fmt-check proto proto-check bench bench-quick fuzz fuzz-config clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/turbo

## run: the quickstart, on the embedded broker; ends by itself.
run: build
	$(BIN) run --config examples/quickstart/app.yaml --exit-on-idle

## test: formatting, vet, and every test with the race detector.
test: fmt-check vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## proto: regenerate the Go code of proto/*.proto (protoc comes from Maven Central).
proto:
	bash proto/gen.sh

## proto-check: fail when the committed generated code is not current.
proto-check:
	bash proto/gen.sh --check

## test-kafka: KAFKA_PKGS against a real Apache Kafka broker (Java; the jars
## come from Maven Central once), started for the run and always stopped.
## Skipped, not failed, when Java cannot be installed.
.PHONY: test-kafka kafka-start kafka-stop
test-kafka:
	@rc=0; bash $(KAFKA_SH) fetch || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "test-kafka: skipped: Java cannot be installed"; exit 0; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; \
	state=$$(mktemp -d) || exit 1; \
	trap 'bash $(KAFKA_SH) stop "$$state"; rm -rf "$$state"' EXIT; \
	trap 'exit 130' INT TERM; \
	addr=$$(bash $(KAFKA_SH) start "$$state") || exit 1; \
	echo "test-kafka: TURBO_TEST_BROKERS=$$addr"; \
	TURBO_TEST_BROKERS=$$addr $(GO) test -tags kafka -race -count=1 -timeout $(TEST_TIMEOUT) $(KAFKA_PKGS)

## kafka-start: a real Kafka broker in the background for manual runs; then
## TURBO_TEST_BROKERS=<the address it prints> go test ./... uses it.
kafka-start:
	@bash $(KAFKA_SH) start

## kafka-stop: stops the broker of kafka-start and deletes its data.
kafka-stop:
	@bash $(KAFKA_SH) stop

## bench: turbo against plain sarama and the Confluent Parallel Consumer (Java;
## built by Maven once, cached in .cache/bench/), same broker, topics and work,
## one after the other; the table lands in .bench/ (about 7 minutes).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/

## bench-quick: the same scenarios, scaled down (under 3 minutes).
bench-quick:
	TURBO_BENCH_QUICK=1 $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m ./test/bench/

## fuzz: a short run of every fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzScheduler -fuzztime 20s ./actors/schedule/
	$(GO) test -run '^$$' -fuzz FuzzTracker -fuzztime 20s ./actors/watermark/
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime 20s ./config/
	$(GO) test -run '^$$' -fuzz 'FuzzDecode$$' -fuzztime 20s ./actors/offsetmeta/
	$(GO) test -run '^$$' -fuzz FuzzDecodeBody -fuzztime 20s ./actors/offsetmeta/
	$(GO) test -run '^$$' -fuzz FuzzFrameReader -fuzztime 20s ./supervisor/

## fuzz-config: configuration loading alone, longer (FUZZTIME, default 2m):
## Load must return an ErrInvalid or a configuration within the documented
## limits (README "Limits").
FUZZTIME ?= 2m
fuzz-config:
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./config/

clean:
	rm -rf .bin .bench
