#!/usr/bin/env bash
# One line of `make test-kafka`: run by `kafka.sh with`, beside a broker
# started for it (its settings exported: TURBO_TEST_*, the state dir in
# TURBO_TEST_STATE). The Makefile says what to run, in the environment:
#
#   GO, TEST_TIMEOUT, TEST_PAR       the go command, its timeout, how many at once
#   TEST_FLAGS                       the flags of the crowded phase (2)
#   TIMED, TIMED_PKGS                the timed tests (1), and where they are
#   KAFKA_EMBEDDED_ONLY              the tests never run on a real broker
#   KAFKA_SUITES, SUITES_FLAG, SUITES_EXPR
#                                    the suites of phase 2, and which of their tests
#   SECURED                          1: the timed tests (1), the secured
#                                    runs and the search (3)
#   TURBO_TEST_SIDES                 the sides of the side tests (2)
#   KAFKA_SIDE                       the side of test/kafka (2, 3) and of
#                                    the secured runs (3)
#   KAFKA_SKIP                       (optional) test/kafka's tests to leave out
#   CLUSTER_RUN, CLUSTER_LINE        (optional) the tests of test/cluster to
#                                    run in phase 2, on a three-node cluster
#                                    of that Kafka line of their own
#
# 1. (SECURED, the newest line) alone: the timed tests (TIMED in TIMED_PKGS,
#    one package at a time): their bounds are turbo's, one line is enough;
# 2. the suites, and beside them test/kafka and CLUSTER_RUN on its
#    cluster;
# 3. (SECURED) the secured runs, once the suites of phase 2 but the first
#    (the longest) have ended: beside its tail, and beside test/kafka if
#    it has not ended; then a search of everything printed for the
#    broker's secrets.
#
# Each phase prints what test/kafka/gotest.sh prints once it ends; the line
# stops at the first phase that fails.
set -uo pipefail

here=$(dirname "$0")
state=${TURBO_TEST_STATE:?run through kafka.sh with}
gotest() { bash "$here/gotest.sh" "$@"; }

echo "test-kafka: Kafka $TURBO_TEST_KAFKA_VERSION: TURBO_TEST_BROKERS=$TURBO_TEST_BROKERS (PLAINTEXT)," \
	"SASL_SSL $TURBO_TEST_SASL_SSL_BROKERS, SSL $TURBO_TEST_SSL_BROKERS; suites: $SUITES_FLAG $SUITES_EXPR"

# onside CMD...: CMD with every turbo process and in-process consumer on
# KAFKA_SIDE.
onside() {
	local client=${KAFKA_SIDE%-consumer} protocol=classic
	[[ $KAFKA_SIDE == *-consumer ]] && protocol=consumer
	TURBO_KAFKA_CLIENT=$client TURBO_KAFKA_GROUP_PROTOCOL=$protocol "$@"
}

once=(-tags kafka -race -count=1 -timeout "$TEST_TIMEOUT")
# shellcheck disable=SC2086 # TIMED_PKGS is a list of packages
if [[ $SECURED == 1 ]]; then
	gotest "$state/timed.log" "$GO" "${once[@]}" -p 1 -run "$TIMED" -skip "$KAFKA_EMBEDDED_ONLY" $TIMED_PKGS || exit
fi

# shellcheck disable=SC2206 # TEST_FLAGS is a list of flags
crowd=(-tags kafka $TEST_FLAGS)
skip=()
[[ -n ${KAFKA_SKIP:-} ]] && skip=(-skip "$KAFKA_SKIP")
rest() { onside gotest "$state/kafka.log" "$GO" "${crowd[@]}" "${skip[@]}" ./test/kafka/ >"$state/kafka.out" 2>&1; }

rc=0
# test/kafka waits on brokers (a restart, refusals retried until turbo
# gives up) more than it computes: it runs beside the suites.
rest &
kafka=$!
# The cluster's tests judge by ledgers, not by time: the others' load does
# not change their verdicts.
cluster=""
if [[ -n ${CLUSTER_RUN:-} ]]; then
	(
		TURBO_TEST_KAFKA_LINE=$CLUSTER_LINE TURBO_TEST_KAFKA_BROKERS=3 bash "$here/kafka.sh" with \
			bash "$here/gotest.sh" "$state/cluster.log" "$GO" -tags cluster -race -count=1 -timeout "$TEST_TIMEOUT" \
			-run "$CLUSTER_RUN" ./test/cluster/ >"$state/cluster.out" 2>&1
	) &
	cluster=$!
fi
suites() { gotest "$1" "$GO" "${crowd[@]}" "$SUITES_FLAG" "$SUITES_EXPR" "${@:2}"; }
if [[ $SECURED == 1 ]]; then
	# The secured runs are suites again: they start once the other suites
	# have ended, beside the tail of the longest (the first of
	# KAFKA_SUITES), which runs in a go test of its own so as not to hold
	# them back: it waits on its processes more than it computes.
	read -r longest others <<<"$KAFKA_SUITES"
	suites "$state/longest.log" "$longest" >"$state/longest.out" 2>&1 &
	first=$!
	# shellcheck disable=SC2086 # others is a list of packages
	suites "$state/plain.log" $others || rc=$?
	if ((rc == 0)); then
		onside bash "$here/secured-runs.sh" suites "$GO" "$TEST_TIMEOUT" "$TEST_PAR" || rc=$?
	fi
	wait "$first" || rc=$?
	cat "$state/longest.out"
else
	# shellcheck disable=SC2086 # KAFKA_SUITES is a list of packages
	suites "$state/plain.log" $KAFKA_SUITES || rc=$?
fi
wait "$kafka" || rc=$?
cat "$state/kafka.out"
if [[ -n $cluster ]]; then
	wait "$cluster" || rc=$?
	cat "$state/cluster.out"
fi
if ((rc == 0)) && [[ $SECURED == 1 ]]; then
	bash "$here/secured-runs.sh" search || rc=$?
fi
exit "$rc"
