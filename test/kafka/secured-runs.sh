#!/usr/bin/env bash
# The end-to-end suites again, over the secured listeners of the broker that
# `make test-kafka` started (its env file exported: TURBO_TEST_*, the state
# dir in TURBO_TEST_STATE), then a search for its secrets.
#
#   secured-runs.sh suites GO TIMEOUT [PARALLEL]
#
# runs, all three at once (they wait on the broker far more than they
# compute), each printing what it printed once it ends:
#
#   1. SASL_SSL with SCRAM-SHA-512: the SIGTERM drain, kill -9 with
#      commit metadata, the swarm's shared run (test/e2e) and
#      the dead-letter topic (actors), every client and turbo process secured
#      by the TURBO_KAFKA_* variables below;
#   2. the same dead-letter test over SCRAM (its own run: another package);
#   3. SSL with client certificates (mTLS): the swarm's shared run.
#
#   secured-runs.sh search
#
# searches every line the line's runs printed (turbo's logs and errors, swarm
# /status bodies, the tests' own output, run with -v: the gotest.sh logs in
# the state dir, these runs' among them) and the broker's logs for the
# broker's passwords and the OAuth client secret: finding one fails.
set -euo pipefail

state=${TURBO_TEST_STATE:?run through make test-kafka}
out=$state/secured
mkdir -p "$out"

need() {
	local v
	for v in "$@"; do
		[[ -n ${!v:-} ]] || {
			echo "secured-runs: $v is not set (run through make test-kafka)" >&2
			exit 1
		}
	done
}
need TURBO_TEST_SASL_SSL_BROKERS TURBO_TEST_SSL_BROKERS TURBO_TEST_TLS_DIR \
	TURBO_TEST_SCRAM512_USER TURBO_TEST_SCRAM512_PASSWORD TURBO_TEST_SCRAM256_PASSWORD \
	TURBO_TEST_PLAIN_PASSWORD TURBO_TEST_OAUTH_CLIENT_SECRET_FILE

# run NAME ENV... -- GO TEST ARGS: one suite, its output kept for the search
# (NAME.log) and what gotest.sh prints in NAME.console, its verdict last.
run() {
	local name=$1 started=$SECONDS rc=0
	shift
	local -a env=()
	while [[ $1 != -- ]]; do
		env+=("$1")
		shift
	done
	shift
	env "${env[@]}" bash "$(dirname "$0")/gotest.sh" "$out/$name.log" "$GO" -tags kafka -race -count=1 \
		-timeout "$TIMEOUT" -parallel "$PARALLEL" "$@" >"$out/$name.console" 2>&1 || rc=$?
	echo "secured-runs: $name: exit $rc after $((SECONDS - started)) s" >>"$out/$name.console"
	return "$rc"
}

suites() {
	local tls=$TURBO_TEST_TLS_DIR
	local -a scram=(
		TURBO_TEST_BROKERS="$TURBO_TEST_SASL_SSL_BROKERS"
		TURBO_KAFKA_TLS_ENABLED=true TURBO_KAFKA_TLS_CA_FILE="$tls/ca.pem"
		TURBO_KAFKA_SASL_MECHANISM=SCRAM-SHA-512
		TURBO_KAFKA_SASL_USERNAME="$TURBO_TEST_SCRAM512_USER" TURBO_KAFKA_SASL_PASSWORD="$TURBO_TEST_SCRAM512_PASSWORD"
	)
	local -a mtls=(
		TURBO_TEST_BROKERS="$TURBO_TEST_SSL_BROKERS"
		TURBO_KAFKA_TLS_ENABLED=true TURBO_KAFKA_TLS_CA_FILE="$tls/ca.pem"
		TURBO_KAFKA_TLS_CERT_FILE="$tls/client.pem" TURBO_KAFKA_TLS_KEY_FILE="$tls/client-key.pem"
	)
	local e2e='^(TestSigtermThenRestartRedeliversNothingFinished|TestKill9RedeliversOnlyUnfinishedRecords|TestSwarmSharesPartitionsAndStopsCleanly)$'
	local -a names=(scram-e2e scram-dlq mtls-swarm) pids=()
	run scram-e2e "${scram[@]}" -- -run "$e2e" ./test/e2e/ &
	pids+=($!)
	run scram-dlq "${scram[@]}" -- -run '^TestDeadLetterTopicForPermanentFailures$' ./actors/ &
	pids+=($!)
	run mtls-swarm "${mtls[@]}" -- -run '^TestSwarmSharesPartitionsAndStopsCleanly$' ./test/e2e/ &
	pids+=($!)
	local i rc failed=0
	for i in "${!names[@]}"; do
		rc=0
		wait "${pids[$i]}" || rc=$?
		echo "secured-runs: ${names[$i]}"
		cat "$out/${names[$i]}.console"
		((rc == 0)) || failed=$rc
	done
	return "$failed"
}

search() {
	local -a secrets files
	secrets=("$TURBO_TEST_SCRAM512_PASSWORD" "$TURBO_TEST_SCRAM256_PASSWORD" "$TURBO_TEST_PLAIN_PASSWORD" "$(cat "$TURBO_TEST_OAUTH_CLIENT_SECRET_FILE")")
	# The line's gotest.sh logs (test/kafka with its negative tests on the
	# secured listeners and OAUTHBEARER, the timed tests, the suites, these
	# runs), and the broker's own logs.
	files=("$state"/*.log "$out"/*.log)
	[[ -f $state/work ]] && files+=("$(cat "$state/work")"/logs/*.log)
	local lines s
	lines=$(cat "${files[@]}" | wc -l)
	for s in "${secrets[@]}"; do
		if grep -lF -- "$s" "${files[@]}" >&2; then
			echo "secured-runs: a secret (${#s} characters) appears in the files above" >&2
			return 1
		fi
	done
	echo "secured-runs: no secret in ${#files[@]} files, $lines lines (test output, turbo's logs, /status, the broker's logs)"
}

case ${1:-} in
suites)
	readonly GO=${2:-go} TIMEOUT=${3:-20m} PARALLEL=${4:-4}
	suites
	;;
search) search ;;
*)
	echo "usage: $0 suites GO TIMEOUT [PARALLEL] | search" >&2
	exit 2
	;;
esac
