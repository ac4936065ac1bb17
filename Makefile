# turbo's build, test and benchmark entry points. Everything needs only Go.
GO       ?= go
BIN      := .bin/turbo
PKGS     := ./...
# The whole suite, race detector on, must stay far below CI's limit.
TEST_TIMEOUT ?= 20m

.PHONY: all build run test vet fmt-check proto proto-check bench bench-quick fuzz clean

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

## bench: turbo's pipeline against plain sarama on the same topic, same run.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/

## bench-quick: the same with 200,000 records.
bench-quick:
	TURBO_BENCH_RECORDS=200000 $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m ./test/bench/

## fuzz: a short run of every fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzScheduler -fuzztime 20s ./actors/schedule/
	$(GO) test -run '^$$' -fuzz FuzzTracker -fuzztime 20s ./actors/watermark/
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime 20s ./config/
	$(GO) test -run '^$$' -fuzz 'FuzzDecode$$' -fuzztime 20s ./actors/offsetmeta/
	$(GO) test -run '^$$' -fuzz FuzzDecodeBody -fuzztime 20s ./actors/offsetmeta/
	$(GO) test -run '^$$' -fuzz FuzzFrameReader -fuzztime 20s ./supervisor/

clean:
	rm -rf .bin .bench
