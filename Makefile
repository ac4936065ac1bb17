# turbo's build, test and benchmark entry points. Everything needs only Go.
GO       ?= go
# Builds share the build cache across checkouts: without -trimpath every
# package's cache key holds the checkout's directory, and each fresh clone
# compiled everything again (33 s of the race build alone on two cores).
export GOFLAGS := -trimpath $(GOFLAGS)
BIN      := .bin/turbo
PKGS     := ./...
# make test's packages, in the order go test starts them: the longest first,
# so that none of them starts last and runs alone.
TEST_PKGS := ./test/e2e/ ./supervisor/ ./actors/ ./test/chaos/ ./actors/schedule/ ./test/web/ ./test/module/ \
	./actors/watermark/ ./test/container/ ./actors/offsetmeta/ ./actors/pipeline/ $(PKGS)
# The whole suite, race detector on, must stay far below CI's limit.
TEST_TIMEOUT ?= 20m
# Most tests wait (for sessions, joins, handlers, processes) far more than
# they compute: at go test's default of two packages at once, `make test`
# kept one of the two cores busy. TEST_PAR packages run at once, and up to
# TEST_PAR tests of a package that call t.Parallel.
TEST_PAR ?= 4
TEST_FLAGS = -race -count=1 -timeout $(TEST_TIMEOUT) -p $(TEST_PAR) -parallel $(TEST_PAR)
# The tests that hold turbo to a time bound: the swarm's run against the
# ideal, a node's exit seen at once, a stop within shutdown_timeout + 250
# ms, the rate limit to ±5 %, the throughput adaptive concurrency reaches, no
# record of a lost partition started 100 ms after the loss. They run after the rest,
# on their own, one package at a time: under the load of the others a bound
# measures the machine. (Each says so in a comment.)
TIMED := ^(TestRateLimit|TestRateLimitPacesAttempts|TestSwarmExitOnIdle|TestSwarmReplacesAKilledNodeWithoutMovingTheOther|TestRunShutdownIsBoundedAgainstASilentBroker|TestAdaptiveConcurrencyFollowsTheDownstream|TestStopWhileJoiningIsClean|TestStopIsBoundedWhenAHandlerHangs|TestDroppedMemberStopsItsLostPartitionsAtOnce)$$
TIMED_PKGS := ./test/e2e/ ./actors/
# Where the timed tests that a real broker runs too (not
# KAFKA_EMBEDDED_ONLY) are: the newest Kafka line runs them from there.
KAFKA_TIMED_PKGS := ./test/e2e/
# The Kafka sides (kafka.client and kafka.group_protocol: sarama, franz-go,
# franz-go-consumer). The side tests (test/testkit.EachSide: KAFKA_CORE's)
# run once per side of TURBO_TEST_SIDES; every other test runs on sarama,
# the default. Each side's side tests meet one broker per environment
# (test/README.md, "The two Kafka sides"): on the embedded broker,
# franz-go with the consumer protocol (sarama runs every other test there).
TEST_SIDES ?= franz-go-consumer

# The turbo binaries the tests run (test/testkit: TURBO_TEST_BINARY, built
# with the race detector, and TURBO_TEST_PERF_BINARY), built once for all
# the packages of a `make test` or a `make test-kafka` line.
TEST_BIN_DIR := .cache/test-bin
WITH_BINS = TURBO_TEST_BINARY=$(CURDIR)/$(TEST_BIN_DIR)/turbo-race TURBO_TEST_PERF_BINARY=$(CURDIR)/$(TEST_BIN_DIR)/turbo

# What test-kafka runs against a real Apache Kafka broker
# (test/kafka/kafka.sh), on each line of KAFKA_LINES in turn (3.9: Kafka
# 3.9.2, 4: Kafka 4.4.0). `make test` has run every test on the embedded
# broker already; a real broker runs what it can make fail differently
# (test/README.md, "What runs where"):
#  - every line: (the newest line only) the TIMED tests, alone; then at
#    once: test/kafka (a broker restarted mid-run, the secured
#    mistakes, OAuth, every mechanism) and KAFKA_CORE: the ordering ledgers,
#    kill -9 with commit metadata, the SIGTERM drain, the swarm, rebalances
#    under load and the key handover, and the output ledgers (at least
#    once; exactly once across a restart, rebalances, dead letters, kill -9
#    and a zombie) (test/kafka/line.sh);
#  - the newest line, KAFKA_FULL_LINE, instead of KAFKA_CORE: every test of
#    KAFKA_SUITES but KAFKA_EMBEDDED_ONLY, beside test/kafka; then the
#    secured runs.
KAFKA_LINES     ?= 3.9 4
KAFKA_FULL_LINE := 4
# The sides of each line (see TEST_SIDES): KAFKA_SIDES_<line> for the side
# tests; KAFKA_SIDE_<line> for the broker restart, the rest of test/kafka
# (the secured mistakes, OAuth, every mechanism) and the secured runs, so
# that each side meets a real broker's restarts and security on one line.
# The timed tests run on sarama.
# The cluster tests every change runs (test/cluster, on a three-node
# cluster of CLUSTER_LINE): beside phase 2 of the line that is not the
# newest, whose phase 2 is the lighter. The whole suite is
# `make test-kafka-cluster`.
CLUSTER_CI_3.9 := ^(TestLeaderKilledUnderLoad|TestPartitionedFromTheCoordinator)$$
# test/kafka's tests a line leaves out: on 3.9, the broker restarted mid-run
# (a broker of its own, two JVM starts beside the crowd), since sarama meets
# a broker's death and a lost session on the cluster beside that line. It
# runs on the newest line (franz-go); `make test-kafka KAFKA_LINES=3.9
# KAFKA_SKIP_3.9=` runs it on sarama too. The broker restarted under
# exactly-once outputs runs on 3.9 (sarama) in its place, and the newest
# line leaves it out (`KAFKA_SKIP_4=` runs it there, on franz-go).
KAFKA_SKIP_3.9  := ^TestBrokerRestartMidRun$$
KAFKA_SKIP_4    := ^TestBrokerRestartExactlyOnce$$
KAFKA_SIDES_3.9 := sarama
KAFKA_SIDE_3.9  := sarama
KAFKA_SIDES_4   := franz-go
KAFKA_SIDE_4    := franz-go-consumer
KAFKA_SUITES    := ./test/e2e/ ./test/chaos/ ./actors/
KAFKA_CORE      := ^(TestOrderingModes|TestKill9RedeliversOnlyUnfinishedRecords|TestSigtermThenRestartRedeliversNothingFinished|TestSwarmSharesPartitionsAndStopsCleanly|TestSwarmExitOnIdleAfterANodeIsKilled|TestSwarmOfFourLosesNothingToAKillAndAHang|TestRebalancesUnderLoad|TestRebalanceHandoverKeepsKeysApart|TestOutputsOnKafka|TestExactlyOnceOnKafka|TestExactlyOnceDeadLetters|TestKill9ExactlyOnceOutputs|TestZombieTransactionIsFenced|TestSwarmNodeKilledExactlyOnce)$$
# Tests of what no broker changes: turbo's own output and process handling,
# its handler protocols (gRPC, HTTP batches and multi-status), the limits it
# sets itself (the rate limit, adaptive concurrency, the stop bound of a
# hung handler), the credit flow's and the gate's models, the configuration,
# the docs' examples, memory bounds that turbo's credits set (the byte
# budget, which real fetch sizes do change, still runs on Kafka), and tests
# that bring a broker of their own (kfake, a fake that never answers, the
# harness's in-memory one) whatever TURBO_TEST_BROKERS says.
KAFKA_EMBEDDED_ONLY := ^(TestCreditFlowModel|TestGRPCHandler|TestHTTPBatches|TestA207ThatIsNotTheDocumentIsRetried|TestAdaptiveConcurrencyThroughHTTP|TestRateLimit|TestRateLimitPacesAttempts|TestStopIsBoundedWhenAHandlerHangs|TestAConfigurationCutShortIsRefused|TestRunShutdownIsBoundedAgainstASilentBroker|TestStopWhileJoiningIsClean|TestAdaptiveConcurrencyFollowsTheDownstream|TestRefusalLaterInARunIsRetriedAndShown|TestConsumerRefusedAtStartGivesUp|TestConsumerOverMTLSAndSCRAM|TestEveryExampleRuns|TestEnrichExample|TestMemoryFlatWithLargeBacklog|TestMemoryReleasedAfterDistinctKeys|TestRunReportsTheLogLinesItDropped|TestRunKeepsGoingWhenStderrIsNeverRead|TestRunSurvivesALostOutputReader|TestSystemdNotify|TestSystemdNotifySwarm|TestSystemdUnit|TestSwarmNodesDieWithTheirSupervisor|TestRunSignalDuringStartUpIsACleanStop|TestSwarmSignalDuringStartUpIsACleanStop|TestAStoppingMemberKeepsItsGenerationWhileAnotherLeaves|TestACommitOvertakenByARebalanceIsSentAgain|TestDroppedMemberStopsItsLostPartitionsAtOnce|TestGateModel)$$
KAFKA_SH    := test/kafka/kafka.sh

# On KAFKA_FULL_LINE, the secured runs (test/kafka/secured-runs.sh, run by
# line.sh): e2e suites over SASL_SSL with SCRAM and over mTLS; then all the
# line printed is searched for the broker's secrets.

# The browser test's tools (test/web/browser.sh): Chromium and promtool, found
# or installed (apt-get) by `make tools`, which writes their paths to TOOLS_ENV
# for the test recipes (TURBO_TEST_CHROMIUM, TURBO_TEST_PROMTOOL).
WEB_SH    := test/web/browser.sh
TOOLS_ENV := .cache/tools.env
# Sources TOOLS_ENV into a recipe's shell.
WITH_TOOLS = set -a && . ./$(TOOLS_ENV) && set +a &&

.PHONY: all build image run test test-web tools vet fmt-check proto proto-check bench bench-quick fuzz fuzz-config clean

all: build

## build: the binary, stamped with its commit when built from a git checkout
## (turbo version), whatever GOFLAGS says.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/turbo

## image: the container image (examples/container/Dockerfile, target
## prebuilt) from a static binary built here, with podman; no registry needed.
IMAGE     ?= localhost/turbo:dev
IMAGE_DIR := .cache/image
image:
	@mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags="-s -w -buildid=" -o $(IMAGE_DIR)/turbo ./cmd/turbo
	cp /etc/ssl/certs/ca-certificates.crt $(IMAGE_DIR)/
	podman build --target prebuilt -f examples/container/Dockerfile -t $(IMAGE) $(IMAGE_DIR)

## run: the quickstart, on the embedded broker; ends by itself.
run: build
	$(BIN) run --config examples/quickstart/app.yaml --exit-on-idle

## test: formatting, vet, and every test with the race detector; the browser
## test (test/web) among them, hence `tools` first.
test: fmt-check vet tools test-bins
	$(WITH_TOOLS) $(WITH_BINS) TURBO_TEST_SIDES=$(TEST_SIDES) $(GO) test $(TEST_FLAGS) -skip '$(TIMED)' $(TEST_PKGS)
	$(WITH_BINS) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -p 1 -run '$(TIMED)' $(TIMED_PKGS)

## test-bins: the turbo binaries the tests run, with and without the race
## detector, built once (the packages that run them share these).
.PHONY: test-bins
test-bins:
	@mkdir -p $(TEST_BIN_DIR)
	$(GO) build -race -o $(TEST_BIN_DIR)/turbo-race ./cmd/turbo
	$(GO) build -o $(TEST_BIN_DIR)/turbo ./cmd/turbo

## test-web: the web console in headless Chromium, and /metrics through
## promtool (test/web); `tools` installs what is missing.
test-web: tools
	$(WITH_TOOLS) $(GO) test -race -count=1 -timeout 5m ./test/web/

## tools: Chromium (Debian's chromium, with apt-get) and promtool (taken out
## of Debian's prometheus package, which is not installed) when missing; their
## paths go to TOOLS_ENV. When Chromium cannot be installed (not root, no
## apt-get) this says so and goes on: the browser test then fails and says why.
tools:
	@mkdir -p $(dir $(TOOLS_ENV)); rc=0; \
	bash $(WEB_SH) env > $(TOOLS_ENV).tmp || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "tools: Chromium cannot be installed here: test/web will fail (see $(WEB_SH))" >&2; \
	elif [ $$rc -ne 0 ]; then rm -f $(TOOLS_ENV).tmp; exit $$rc; fi; \
	mv $(TOOLS_ENV).tmp $(TOOLS_ENV); sed 's/^/tools: /' $(TOOLS_ENV)

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
## come from Maven Central once), once per line of KAFKA_LINES (e.g.
## `make test-kafka KAFKA_LINES=4`), each on a broker of its own, started for
## the run and always stopped; prints each line's duration. The broker has
## PLAINTEXT (TURBO_TEST_BROKERS), SASL_SSL and mTLS listeners; its env file
## is exported for the tests. Skipped, not failed, when Java cannot be
## installed.
.PHONY: test-kafka test-kafka-line kafka-start kafka-stop
test-kafka:
	@rc=0; summary=""; \
	for line in $(KAFKA_LINES); do \
		started=$$(date +%s); \
		$(MAKE) --no-print-directory test-kafka-line KAFKA_LINE=$$line; lrc=$$?; \
		took=$$(( $$(date +%s) - started )); \
		if [ $$lrc -eq 0 ]; then result=ok; else result="FAILED (exit $$lrc)"; rc=1; fi; \
		echo "test-kafka: Kafka line $$line: $$result in $$took s"; \
		summary="$$summary line $$line $$result in $$took s;"; \
		if [ $$lrc -gt 128 ]; then exit $$lrc; fi; \
	done; \
	echo "test-kafka:$$summary"; \
	exit $$rc

## test-kafka-line: test-kafka on one line, KAFKA_LINE (3.9 or 4). Tests that
## start brokers of their own get the same line from TURBO_TEST_KAFKA_VERSION.
KAFKA_LINE ?= 3.9
test-kafka-line: test-bins
	@rc=0; TURBO_TEST_KAFKA_LINE=$(KAFKA_LINE) bash $(KAFKA_SH) fetch || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "test-kafka: skipped: Java cannot be installed"; exit 0; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; \
	if [ "$(KAFKA_LINE)" = "$(KAFKA_FULL_LINE)" ]; then \
		export SUITES_FLAG=-skip SUITES_EXPR='$(KAFKA_EMBEDDED_ONLY)|$(TIMED)' SECURED=1; \
	else \
		export SUITES_FLAG=-run SUITES_EXPR='$(KAFKA_CORE)' SECURED=0; \
	fi; \
	export CLUSTER_RUN='$(CLUSTER_CI_$(KAFKA_LINE))' CLUSTER_LINE='$(CLUSTER_LINE)'; \
	export GO='$(GO)' TEST_TIMEOUT='$(TEST_TIMEOUT)' TEST_PAR='$(TEST_PAR)' TEST_FLAGS='$(TEST_FLAGS)' \
		TIMED='$(TIMED)' TIMED_PKGS='$(KAFKA_TIMED_PKGS)' KAFKA_EMBEDDED_ONLY='$(KAFKA_EMBEDDED_ONLY)' \
		KAFKA_SUITES='$(KAFKA_SUITES)' TURBO_TEST_SIDES='$(KAFKA_SIDES_$(KAFKA_LINE))' KAFKA_SIDE='$(KAFKA_SIDE_$(KAFKA_LINE))' \
		KAFKA_SKIP='$(KAFKA_SKIP_$(KAFKA_LINE))'; \
	$(WITH_BINS) TURBO_TEST_KAFKA_LINE=$(KAFKA_LINE) bash $(KAFKA_SH) with bash test/kafka/line.sh

## test-kafka-cluster: test/cluster against a three-node Kafka cluster
## (kafka.sh with TURBO_TEST_KAFKA_BROKERS=3, on CLUSTER_LINE), started for
## the run and always stopped: a leader and the group coordinator killed
## under load, rolling restarts under a swarm (CLUSTER_RUN picks tests; the
## tests share the cluster, so they run one after the other).
CLUSTER_LINE ?= 4
CLUSTER_RUN  ?= .
.PHONY: test-kafka-cluster
test-kafka-cluster: test-bins
	@rc=0; TURBO_TEST_KAFKA_LINE=$(CLUSTER_LINE) bash $(KAFKA_SH) fetch || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "test-kafka-cluster: skipped: Java cannot be installed"; exit 0; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; \
	started=$$(date +%s); \
	mkdir -p .cache && log=.cache/test-kafka-cluster.log; \
	$(WITH_BINS) TURBO_TEST_KAFKA_LINE=$(CLUSTER_LINE) TURBO_TEST_KAFKA_BROKERS=3 bash $(KAFKA_SH) with \
		$(GO) test -tags cluster -race -count=1 -timeout $(TEST_TIMEOUT) -p 1 -v -run '$(CLUSTER_RUN)' ./test/cluster/ >$$log 2>&1 || rc=$$?; \
	if [ $$rc -eq 0 ]; then grep -E '^(--- |ok )|FIGURES' $$log; else cat $$log; fi; \
	echo "test-kafka-cluster: Kafka line $(CLUSTER_LINE): $$([ $$rc -eq 0 ] && echo ok || echo "FAILED (exit $$rc)") in $$(( $$(date +%s) - started )) s"; \
	exit $$rc

## soak-kafka-cluster: the chaos soak (test/chaos TestChaosSoak) on a
## three-node cluster of CLUSTER_LINE for SOAK (default 10m): members killed,
## restarted, added and removed, and nodes killed, stopped and brought back,
## while records are produced; the CHAOS line says what it did and found.
SOAK ?= 10m
.PHONY: soak-kafka-cluster
soak-kafka-cluster: test-bins
	@mkdir -p .cache
	$(WITH_BINS) TURBO_SOAK=$(SOAK) TURBO_TEST_KAFKA_LINE=$(CLUSTER_LINE) TURBO_TEST_KAFKA_BROKERS=3 bash $(KAFKA_SH) with \
		bash test/kafka/gotest.sh .cache/soak-kafka-cluster.log $(GO) -race -count=1 -timeout 40m -run '^TestChaosSoak$$' ./test/chaos/

## kafka-start: a real Kafka broker in the background for manual runs
## (TURBO_TEST_KAFKA_LINE=4 for Kafka 4.x); then TURBO_TEST_BROKERS=<the address it
## prints> go test ./... uses it, and `bash test/kafka/kafka.sh env` prints
## all its settings, the secured listeners' too, for `set -a; . FILE; set +a`.
kafka-start:
	@bash $(KAFKA_SH) start

## kafka-stop: stops the broker of kafka-start and deletes its data.
kafka-stop:
	@bash $(KAFKA_SH) stop

## bench: turbo against plain sarama and the Confluent Parallel Consumer (Java;
## built by Maven once, cached in .cache/bench/), same broker, topics and work,
## one after the other; the table lands in .bench/ (about 17 minutes).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/

## bench-quick: the same scenarios, scaled down, one round (about 5 minutes).
bench-quick:
	TURBO_BENCH_QUICK=1 $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m ./test/bench/

## bench-kafka: the whole table on a real Apache Kafka broker, once per line
## of KAFKA_LINES (3.9: Kafka 3.9.2, 4: Kafka 4.4.0, where the share-group
## peer runs too), each started by test/kafka/kafka.sh for the run and always
## stopped; each line's table goes to .bench/results-kafka-<line>.md and
## .json. BENCH picks scenarios (a -bench regexp, default all);
## TURBO_BENCH_QUICK=1 scales them down.
BENCH ?= .
bench-kafka:
	@rc=0; for line in $(KAFKA_LINES); do \
		$(MAKE) --no-print-directory bench-kafka-line KAFKA_LINE=$$line || rc=1; \
	done; exit $$rc

.PHONY: bench-kafka bench-kafka-line
bench-kafka-line:
	@rc=0; TURBO_TEST_KAFKA_LINE=$(KAFKA_LINE) bash $(KAFKA_SH) fetch || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "bench-kafka: skipped: Java cannot be installed"; exit 0; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; \
	TURBO_TEST_KAFKA_LINE=$(KAFKA_LINE) bash $(KAFKA_SH) with bash -c ' \
		echo "bench-kafka: Kafka $$TURBO_TEST_KAFKA_VERSION at $$TURBO_TEST_BROKERS"; \
		TURBO_BENCH_OUT=results-kafka-$(KAFKA_LINE) $(GO) test -run "^$$" -bench "$(BENCH)" -benchtime 1x -timeout 60m ./test/bench/'

## fuzz: a short run of every fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzScheduler -fuzztime 20s ./actors/schedule/
	$(GO) test -run '^$$' -fuzz FuzzTracker -fuzztime 20s ./actors/watermark/
	$(GO) test -run '^$$' -fuzz FuzzPipeline -fuzztime 20s ./actors/pipeline/
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime 20s ./config/
	$(GO) test -run '^$$' -fuzz FuzzStringFields -fuzztime 20s ./config/
	$(GO) test -run '^$$' -fuzz 'FuzzDecode$$' -fuzztime 20s ./actors/offsetmeta/
	$(GO) test -run '^$$' -fuzz FuzzDecodeBody -fuzztime 20s ./actors/offsetmeta/
	$(GO) test -run '^$$' -fuzz FuzzFrameReader -fuzztime 20s ./supervisor/
	$(GO) test -run '^$$' -fuzz FuzzMultiStatus -fuzztime 20s ./actors/handlers/
	$(GO) test -run '^$$' -fuzz FuzzReadOutputs -fuzztime 20s ./actors/handlers/
	$(GO) test -run '^$$' -fuzz FuzzCreditFlow -fuzztime 20s ./actors/

## fuzz-config: configuration loading alone, longer (FUZZTIME, default 2m):
## Load must return an ErrInvalid or a configuration within the documented
## limits (config/README.md, "Limits").
FUZZTIME ?= 2m
fuzz-config:
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./config/

clean:
	rm -rf .bin .bench
