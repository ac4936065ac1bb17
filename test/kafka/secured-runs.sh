#!/usr/bin/env bash
# The end-to-end suites again, over the secured listeners of the broker that
# `make test-kafka` started (its env file exported: TURBO_TEST_*):
#
#   1. SASL_SSL with SCRAM-SHA-512: the ordering modes, the SIGTERM drain,
#      kill -9 with commit metadata, the swarm's shared run (test/e2e) and
#      the dead-letter topic (actors), every client and turbo process secured
#      by the TURBO_KAFKA_* variables below;
#   2. SSL with client certificates (mTLS): the swarm's shared run.
#
# Every line they print (turbo's logs and errors, swarm /status bodies, the
# tests' own output, run with -v), the plain pass of the line before them and
# the broker's logs are then searched for the broker's passwords and the
# OAuth client secret: finding one fails.
#
#   secured-runs.sh GO TIMEOUT
set -euo pipefail

readonly GO=${1:-go} TIMEOUT=${2:-20m}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

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

# run NAME ENV... -- GO TEST ARGS: one suite, its output kept for the search.
run() {
	local name=$1 started=$SECONDS rc=0
	shift
	local -a env=()
	while [[ $1 != -- ]]; do
		env+=("$1")
		shift
	done
	shift
	echo "secured-runs: $name"
	env "${env[@]}" bash "$(dirname "$0")/gotest.sh" "$out/$name.log" "$GO" -tags kafka -race -count=1 -timeout "$TIMEOUT" "$@" || rc=$?
	echo "secured-runs: $name: exit $rc after $((SECONDS - started)) s"
	if ((rc != 0)); then
		exit "$rc"
	fi
}

tls=$TURBO_TEST_TLS_DIR
scram=(
	TURBO_TEST_BROKERS="$TURBO_TEST_SASL_SSL_BROKERS"
	TURBO_KAFKA_TLS_ENABLED=true TURBO_KAFKA_TLS_CA_FILE="$tls/ca.pem"
	TURBO_KAFKA_SASL_MECHANISM=SCRAM-SHA-512
	TURBO_KAFKA_SASL_USERNAME="$TURBO_TEST_SCRAM512_USER" TURBO_KAFKA_SASL_PASSWORD="$TURBO_TEST_SCRAM512_PASSWORD"
)
mtls=(
	TURBO_TEST_BROKERS="$TURBO_TEST_SSL_BROKERS"
	TURBO_KAFKA_TLS_ENABLED=true TURBO_KAFKA_TLS_CA_FILE="$tls/ca.pem"
	TURBO_KAFKA_TLS_CERT_FILE="$tls/client.pem" TURBO_KAFKA_TLS_KEY_FILE="$tls/client-key.pem"
)
e2e='^(TestOrderingModes|TestSigtermThenRestartRedeliversNothingFinished|TestKill9RedeliversOnlyUnfinishedRecords|TestSwarmSharesPartitionsAndStopsCleanly)$'

run scram-e2e "${scram[@]}" -- -run "$e2e" ./test/e2e/
run scram-dlq "${scram[@]}" -- -run '^TestDeadLetterTopicForPermanentFailures$' ./actors/
run mtls-swarm "${mtls[@]}" -- -run '^TestSwarmSharesPartitionsAndStopsCleanly$' ./test/e2e/

# The search: these runs, the plain pass before them and the broker's own
# logs (all in the state dir the Makefile made: TURBO_TEST_STATE).
secrets=("$TURBO_TEST_SCRAM512_PASSWORD" "$TURBO_TEST_SCRAM256_PASSWORD" "$TURBO_TEST_PLAIN_PASSWORD" "$(cat "$TURBO_TEST_OAUTH_CLIENT_SECRET_FILE")")
files=("$out"/*.log)
if [[ -n ${TURBO_TEST_STATE:-} ]]; then
	# The plain pass of the same line (the Makefile's gotest.sh logs: test/kafka
	# alone, then the rest), which holds the negative tests on the secured
	# listeners and OAUTHBEARER.
	for f in "$TURBO_TEST_STATE/alone.log" "$TURBO_TEST_STATE/plain.log"; do
		if [[ -f $f ]]; then files+=("$f"); fi
	done
	[[ -f $TURBO_TEST_STATE/work ]] && files+=("$(cat "$TURBO_TEST_STATE/work")"/logs/*.log)
fi
lines=$(cat "${files[@]}" | wc -l)
for s in "${secrets[@]}"; do
	if grep -lF -- "$s" "${files[@]}" >&2; then
		echo "secured-runs: a secret (${#s} characters) appears in the files above" >&2
		exit 1
	fi
done
echo "secured-runs: no secret in ${#files[@]} files, $lines lines (test output, turbo's logs, /status, the broker's logs)"
