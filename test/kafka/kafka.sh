#!/usr/bin/env bash
# A real single-node Apache Kafka broker for turbo's tests.
#
#   kafka.sh fetch              download the broker's jars with Maven (once)
#   kafka.sh start [STATE_DIR]  start a KRaft broker on free loopback ports;
#                               prints its PLAINTEXT HOST:PORT on stdout when
#                               it is ready, and writes STATE_DIR/env
#   kafka.sh env   [STATE_DIR]  print STATE_DIR/env
#   kafka.sh with COMMAND...    run COMMAND with a broker of its own, started
#                               in a state dir of its own (TURBO_TEST_STATE)
#                               with STATE_DIR/env exported, and stopped
#                               however COMMAND ends; exits with its code
#   kafka.sh stop  [STATE_DIR]  stop it and delete its data (idempotent)
#   kafka.sh restart [STATE_DIR] [--kill]
#                               stop the broker (SIGTERM, or SIGKILL with
#                               --kill) and start it again on the same ports
#                               with the same data, certificates and users;
#                               prints HOST:PORT when ready
#
# TURBO_TEST_KAFKA_BROKERS=3 makes it a three-node cluster instead, with
# commands of its own to stop, kill and start one node: see
# test/kafka/cluster.sh.
#
# TURBO_TEST_KAFKA_LINE picks the Kafka line: 3.9 (Kafka 3.9.2, the default) or 4
# (Kafka 4.4.0, Java 17); unset, the line of TURBO_TEST_KAFKA_VERSION.
#
# The broker listens on PLAINTEXT; on SASL_SSL with PLAIN, SCRAM-SHA-256,
# SCRAM-SHA-512 and OAUTHBEARER (server-authenticated TLS); and on SSL with a
# client certificate required (mTLS). start generates, in a work directory of
# its own: a throwaway CA, the broker's and clients' certificates (PEM, by
# test/kafka/pki), random passwords, and an OAuth token issuer whose JWKS the
# broker checks tokens against (test/kafka/oidc, running until stop).
# STATE_DIR/env (mode 0600, KEY=value lines for `set -a; . env; set +a`)
# tells tests how to reach it all:
#   TURBO_TEST_BROKERS (PLAINTEXT), TURBO_TEST_KAFKA_VERSION,
#   TURBO_TEST_SASL_SSL_BROKERS, TURBO_TEST_SSL_BROKERS, TURBO_TEST_TLS_DIR,
#   TURBO_TEST_{SCRAM256,SCRAM512,PLAIN}_{USER,PASSWORD},
#   TURBO_TEST_OAUTH_{TOKEN_URL,CLIENT_ID,CLIENT_SECRET_FILE,STATS_URL}
# (test/testkit/secured.go reads them). Secrets are never printed.
#
# The jars come from Maven Central (org.apache.kafka:kafka_2.13 and its runtime
# dependencies) and are cached outside the repository, in
# TURBO_KAFKA_CACHE/<version> (default: $XDG_CACHE_HOME/turbo/kafka/<version>),
# so a fresh clone reuses them. STATE_DIR (default: $TMPDIR/turbo-kafka-<uid>)
# holds the running broker's pids, address, env file and work directory; use
# one per concurrent broker. start needs Go (to build the tools) and python3.
#
# Messages go to stderr; stdout carries only the address printed by start and
# restart, and the env file printed by env.
# Exit codes: 0 ok, 1 failure, 2 usage, 3 Java or Maven missing and not
# installable (callers treat that as "skip").
set -euo pipefail

# The Kafka line to run, from TURBO_TEST_KAFKA_LINE: 3.9 (the default) or 4.
# 3.9 is the newest line that still accepts every protocol version sarama may
# pick and runs on Java 11 or newer; 4.x removed the old versions (KIP-896),
# logs through log4j2 instead of reload4j and needs Java 17.
#
# Without TURBO_TEST_KAFKA_LINE, the line of TURBO_TEST_KAFKA_VERSION (from an env
# file) is taken: a test that starts a broker of its own while the suites run
# on 4.x gets 4.x too.
default_line() {
	case ${TURBO_TEST_KAFKA_VERSION:-} in
	4.*) printf '4' ;;
	*) printf '3.9' ;;
	esac
}
KAFKA_LINE="${TURBO_TEST_KAFKA_LINE:-$(default_line)}"
readonly KAFKA_LINE
case $KAFKA_LINE in
3.9)
	readonly KAFKA_VERSION=3.9.2 JAVA_MIN=11
	;;
4)
	readonly KAFKA_VERSION=4.4.0 JAVA_MIN=17
	;;
*)
	printf 'kafka: TURBO_TEST_KAFKA_LINE=%s: want 3.9 or 4\n' "$KAFKA_LINE" >&2
	exit 2
	;;
esac
readonly SCALA_VERSION=2.13
# The logging backends the Kafka distributions ship with: reload4j for 3.9,
# log4j2 for 4.x.
readonly SLF4J_VERSION=1.7.36
readonly RELOAD4J_VERSION=1.2.25
readonly SLF4J2_VERSION=2.0.17
readonly LOG4J2_VERSION=2.25.5
readonly DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

# One cache per Kafka version, so that both lines stay fetched.
readonly CACHE_DIR="${TURBO_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/turbo/kafka}/$KAFKA_VERSION"
readonly LIB_DIR="$CACHE_DIR/libs"
readonly MARKER="$CACHE_DIR/fetched"
readonly DEFAULT_STATE_DIR="${TMPDIR:-/tmp}/turbo-kafka-$UID"
# Seconds start waits for the broker to answer a metadata request.
readonly START_TIMEOUT="${TURBO_KAFKA_START_TIMEOUT:-60}"
# Seconds stop waits after SIGTERM before SIGKILL.
readonly STOP_TIMEOUT=20
# The repository, whose Go tools (test/kafka/pki, test/kafka/oidc) start
# builds.
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly REPO_ROOT
# The users of the SASL_SSL listener (their passwords are random per start)
# and the OAuth client of the token issuer.
readonly SCRAM256_USER=turboscram256 SCRAM512_USER=turboscram512 PLAIN_USER=turboplain
readonly OAUTH_CLIENT_ID=turbo-test OAUTH_AUDIENCE=turbo-test OAUTH_ISSUER=turbo-test
# Lifetime of the issuer's tokens: short, so that every run of the secured
# suites sees tokens expire and sessions re-authenticate.
readonly OAUTH_TOKEN_LIFETIME=10s
# Seconds start waits for the token issuer to listen.
readonly OIDC_START_TIMEOUT=20

log() { printf 'kafka: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# java_bin prints the java to run: JAVA_HOME's if set, else the one on PATH.
java_bin() { printf '%s' "${JAVA_HOME:+$JAVA_HOME/bin/}java"; }

# java_major prints the major version of that java, or nothing when there is
# none.
java_major() {
	local v
	v=$("$(java_bin)" -version 2>&1 | sed -n 's/.* version "\([0-9][0-9.]*\).*/\1/p' | head -n1) || return 0
	# "1.8.0" is Java 8; "17.0.15" is Java 17.
	case $v in
	1.*) v=${v#1.} ;;
	esac
	printf '%s' "${v%%.*}"
}

# install_java installs a JRE and Maven with apt-get, as root or through
# password-less sudo; it fails when neither is possible.
install_java() {
	local -a sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
			sudo=(sudo -n)
		else
			log "not root and no password-less sudo: cannot install Java"
			return 1
		fi
	fi
	if ! command -v apt-get >/dev/null; then
		log "no apt-get: cannot install Java"
		return 1
	fi
	log "installing openjdk-17-jre-headless and maven with apt-get"
	"${sudo[@]}" apt-get update -q >&2 &&
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jre-headless maven >&2
}

# need_java makes sure Java JAVA_MIN+ and Maven are there, installing them if
# it can, and exits 3 if it cannot.
need_java() {
	local major
	major=$(java_major)
	if [[ -n $major && $major -ge $JAVA_MIN ]] && command -v mvn >/dev/null; then
		return 0
	fi
	log "need Java $JAVA_MIN+ (found: ${major:-none}) and Maven (found: $(command -v mvn || echo none))"
	if ! install_java; then
		log "Java cannot be installed; the broker is unavailable"
		exit 3
	fi
	major=$(java_major)
	if [[ -z $major || $major -lt $JAVA_MIN ]] || ! command -v mvn >/dev/null; then
		log "Java $JAVA_MIN+ and Maven are still missing after apt-get (java: ${major:-none})"
		exit 3
	fi
}

need_python() {
	command -v python3 >/dev/null || die "python3 is needed to pick free ports and probe the broker"
}

# logging_dependencies prints the pom's dependencies that let the broker log to
# a file: the backend its distribution ships with.
logging_dependencies() {
	if [[ $KAFKA_LINE == 3.9 ]]; then
		cat <<EOF
    <!-- slf4j binding and log4j 1 API (reload4j), as in Kafka 3.9. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>ch.qos.reload4j</groupId>
      <artifactId>reload4j</artifactId>
      <version>$RELOAD4J_VERSION</version>
    </dependency>
EOF
		return
	fi
	cat <<EOF
    <!-- slf4j 2 and its log4j2 binding, as in Kafka 4.x. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>$SLF4J2_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>$LOG4J2_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$LOG4J2_VERSION</version>
    </dependency>
EOF
}

# write_pom writes the Maven project whose runtime dependencies are the broker.
write_pom() {
	cat >"$CACHE_DIR/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by turbo's test/kafka/kafka.sh: the jars of a Kafka broker. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.turbo</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_$SCALA_VERSION</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
$(logging_dependencies)
  </dependencies>
</project>
EOF
}

cmd_fetch() {
	if [[ -f $MARKER ]]; then
		return 0
	fi
	need_java
	mkdir -p "$CACHE_DIR"
	# Concurrent fetches (two test runs on a cold cache) take turns; the lock
	# is held by a subshell so that no broker started later inherits it.
	(
		flock 9
		fetch_locked
	) 9>"$CACHE_DIR/.lock"
}

# fetch_locked downloads the jars unless another fetch did meanwhile.
fetch_locked() {
	if [[ -f $MARKER ]]; then
		return 0
	fi
	log "fetching Kafka $KAFKA_VERSION with Maven into $CACHE_DIR (first time only)"
	local started=$SECONDS tmp="$CACHE_DIR/libs.partial" mvn_log="$CACHE_DIR/mvn.log"
	write_pom
	rm -rf "$tmp"
	if ! mvn -B -q -f "$CACHE_DIR/pom.xml" "$DEPENDENCY_PLUGIN:copy-dependencies" \
		-DincludeScope=runtime -DoutputDirectory="$tmp" >"$mvn_log" 2>&1; then
		tail -n 30 "$mvn_log" >&2
		die "mvn could not fetch org.apache.kafka:kafka_$SCALA_VERSION:$KAFKA_VERSION (full log: $mvn_log)"
	fi
	[[ -f $tmp/kafka_$SCALA_VERSION-$KAFKA_VERSION.jar ]] ||
		die "mvn finished but $tmp has no kafka_$SCALA_VERSION-$KAFKA_VERSION.jar (log: $mvn_log)"
	rm -rf "$LIB_DIR"
	mv "$tmp" "$LIB_DIR"
	printf 'org.apache.kafka:kafka_%s:%s\n' "$SCALA_VERSION" "$KAFKA_VERSION" >"$MARKER"
	log "fetched $(find "$LIB_DIR" -name '*.jar' | wc -l) jars in $((SECONDS - started)) s"
}

# free_ports prints $1 loopback TCP ports that were free a moment ago, below
# the kernel's ephemeral range where it has room: a broker stopped for a
# restart leaves its ports unbound, and a port of the ephemeral range can
# meanwhile become some connection's source port (the broker then cannot
# come back); ports below it are only ever bound on purpose.
free_ports() {
	python3 - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
except OSError:
    low = 0
ports, socks = [], []
candidates = list(range(10000, low)) if low > 11000 else []
random.shuffle(candidates)
for port in candidates:
    if len(ports) == n:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    socks.append(s)
    ports.append(port)
while len(ports) < n:  # no room below the ephemeral range
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
    ports.append(s.getsockname()[1])
print(*ports)
EOF
}

# random_secret prints 32 random hex digits: a password that no log line holds
# by chance (tests grep for it), free of the characters that the storage
# tool's --add-scram and JAAS syntaxes treat specially.
random_secret() {
	python3 -c 'import secrets; print(secrets.token_hex(16))'
}

# cluster_id prints a random Kafka cluster id (16 bytes, base64url), never
# one starting with '-', which the storage tool would take for an option.
cluster_id() {
	python3 - <<'EOF'
import base64, uuid
cid = "-"
while cid.startswith("-"):
    cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
print(cid)
EOF
}

# probe succeeds when the broker on 127.0.0.1:$1 answers a metadata request
# (v1) listing at least $2 brokers (default 1) and a controller.
probe() {
	python3 - "$1" "${2:-1}" <<'EOF' 2>/dev/null
import socket, struct, sys
client = b"turbo-probe"
body = struct.pack(">hhih", 3, 1, 1, len(client)) + client + struct.pack(">i", 0)
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
    s.sendall(struct.pack(">i", len(body)) + body)
    def read(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                sys.exit(1)
            buf += chunk
        return buf
    resp = read(struct.unpack(">i", read(4))[0])
# correlation id, then the brokers array (node id, host, port, rack), then
# the controller id.
corr, nbrokers = struct.unpack_from(">ii", resp, 0)
pos = 8
for _ in range(nbrokers):
    pos += 4
    (hlen,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + hlen + 4
    (rlen,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + max(rlen, 0)
(controller,) = struct.unpack_from(">i", resp, pos)
sys.exit(0 if corr == 1 and nbrokers >= int(sys.argv[2]) and controller >= 0 else 1)
EOF
}

# The passwords of the SASL_SSL users, set by new_credentials and used by
# launch (the PLAIN user's in server.properties, the SCRAM users' at format
# time) and write_env. Restarts need them no more: they live in the broker's
# configuration and metadata.
SCRAM256_PASSWORD="" SCRAM512_PASSWORD="" PLAIN_PASSWORD=""

new_credentials() {
	SCRAM256_PASSWORD=$(random_secret)
	SCRAM512_PASSWORD=$(random_secret)
	PLAIN_PASSWORD=$(random_secret)
}

# build_tools builds the Go tools start needs into work dir $1.
build_tools() {
	local work=$1
	(cd "$REPO_ROOT" && go build -o "$work/bin/" ./test/kafka/pki ./test/kafka/oidc) >&2
}

# make_certs writes the throwaway CA, the broker's and the clients'
# certificates and keys into $1/tls (see test/kafka/pki), and the broker's
# PEM key store (its certificate chain, then its key) into $1.
make_certs() {
	local work=$1
	"$work/bin/pki" -dir "$work/tls" || return 1
	(
		umask 077
		cat "$work/tls/broker.pem" "$work/tls/broker-key.pem" >"$work/broker-keystore.pem"
	)
}

# start_oidc starts the OAuth token issuer of work dir $1 (test/kafka/oidc)
# with a new client secret, records its pid in state dir $2, and waits until
# it listens; its address is then in $1/oidc.addr.
start_oidc() {
	local work=$1 state=$2 pid deadline=$((SECONDS + OIDC_START_TIMEOUT))
	(
		umask 077
		random_secret >"$work/oidc.secret"
	)
	nohup "$work/bin/oidc" -listen 127.0.0.1:0 -addr-file "$work/oidc.addr" \
		-client-id "$OAUTH_CLIENT_ID" -client-secret-file "$work/oidc.secret" \
		-lifetime "$OAUTH_TOKEN_LIFETIME" -audience "$OAUTH_AUDIENCE" -issuer "$OAUTH_ISSUER" \
		>>"$work/oidc.log" 2>&1 </dev/null &
	pid=$!
	printf '%s\n' "$pid" >"$state/oidc.pid"
	# The issuer writes the file atomically once it listens.
	while [[ ! -s $work/oidc.addr ]]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "the token issuer exited during start-up"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			log "the token issuer did not listen within $OIDC_START_TIMEOUT s"
			return 1
		fi
		sleep 0.1
	done
}

# oidc_url prints the URL of path $2 on the token issuer of work dir $1.
oidc_url() {
	printf 'http://%s%s' "$(cat "$1/oidc.addr")" "$2"
}

# log_opts prints the JVM option that points the Kafka line's logging backend
# at the configuration in work dir $1.
log_opts() {
	if [[ $KAFKA_LINE == 3.9 ]]; then
		printf '%s' "-Dlog4j.configuration=file:$1/log4j.properties"
	else
		printf '%s' "-Dlog4j2.configurationFile=$1/log4j2.properties"
	fi
}

# write_log_config writes the logging configuration of the Kafka line into
# work dir $1: everything of note to logs/server.log.
write_log_config() {
	local work=$1
	if [[ $KAFKA_LINE == 3.9 ]]; then
		cat >"$work/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$work/logs/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
# Per-request and per-partition chatter.
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
EOF
		return
	fi
	cat >"$work/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $work/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
# Per-request and per-partition chatter.
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = warn
EOF
}

# write_config writes the broker's configuration into work dir $1 for the
# PLAINTEXT, SASL_SSL, SSL and CONTROLLER ports $2 to $5. It holds the PLAIN
# user's password: readable by its owner only.
write_config() {
	local work=$1 port=$2 sport=$3 tport=$4 cport=$5
	(
		umask 077
		cat >"$work/server.properties" <<EOF
# One combined broker+controller in KRaft mode, for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
# PLAINTEXT for the suites as they were; SASL_SSL and SSL (mTLS) for the
# secured ones; brokers talk to themselves over PLAINTEXT.
listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$sport,SSL://127.0.0.1:$tport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$sport,SSL://127.0.0.1:$tport
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$work/data

# TLS of SASL_SSL and SSL: the broker's certificate chain and unencrypted
# PKCS#8 key in one PEM file, and the CA it trusts for client certificates
# (KIP-651 PEM stores; no store password).
ssl.keystore.type=PEM
ssl.keystore.location=$work/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$work/tls/ca.pem
# SSL authenticates clients by certificate (mTLS); SASL_SSL by SASL alone.
listener.name.ssl.ssl.client.auth=required
listener.name.sasl_ssl.ssl.client.auth=none

listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
# PLAIN: the users and passwords are listed here.
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$PLAIN_USER="$PLAIN_PASSWORD";
# SCRAM: the credentials were stored in the metadata at format time.
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
# OAUTHBEARER: tokens (JWTs) checked against the issuer's keys, audience and
# issuer. Kafka fetches only from the URLs that the JVM's
# org.apache.kafka.sasl.oauthbearer.allowed.urls allows (run_broker).
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=$(oidc_url "$work" /jwks)
sasl.oauthbearer.expected.audience=$OAUTH_AUDIENCE
sasl.oauthbearer.expected.issuer=$OAUTH_ISSUER
# A positive value makes the broker end each OAUTHBEARER session when its
# token expires (KIP-368) unless the client re-authenticates with a new
# token first; the tokens' 10 s lifetime comes before this bound.
listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms=60000

# One replica of everything.
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
# Fewer internal partitions than the default 50: quicker to create on the
# first group join or transaction.
offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4
# Groups form at once instead of after 3 s.
group.initial.rebalance.delay.ms=0
# Topics named by a client appear, with as many partitions as turbo's
# embedded broker gives them.
auto.create.topics.enable=true
num.partitions=8
delete.topic.enable=true
# Two cores: fewer threads than the defaults.
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
	)
	if [[ $KAFKA_LINE != 3.9 ]]; then
		# Share groups (KIP-932, on by default since 4.2) keep their state in
		# __share_group_state, three replicas by default: one here too, or
		# no share consumer ever gets a record.
		cat >>"$work/server.properties" <<EOF
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=4
EOF
		group_timing_config >>"$work/server.properties"
	fi
	write_log_config "$work"
}

# group_timing_config prints the 4.x line's group settings: heartbeats and
# sessions as turbo's classic ones.
group_timing_config() {
	cat <<EOF
# A share consumer learns its assignment from a heartbeat: every 5 s by
# default, which made a benchmark's share group idle its first ~5 s.
group.share.min.heartbeat.interval.ms=500
group.share.heartbeat.interval.ms=500
# The consumer group protocol (KIP-848) takes its heartbeat interval and
# session timeout from the broker (5 s and 45 s by default): a member
# learns of a partition moved to it at its next heartbeat, and a killed
# static member holds its partitions until its session times out. The
# values turbo gives the classic protocol: heartbeats every 250 ms, a
# 10 s session.
group.consumer.min.heartbeat.interval.ms=250
group.consumer.heartbeat.interval.ms=250
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
EOF
}

# log_tail prints the end of the broker's and the token issuer's logs in
# work dir $1 to stderr.
log_tail() {
	local f
	for f in "$1/oidc.log" "$1/logs/format.log" "$1/logs/stdout.log" "$1/logs/server.log"; do
		if [[ -s $f ]]; then
			log "--- last lines of $f"
			tail -n 40 "$f" >&2
		fi
	done
}

# is_ours succeeds when pid $1 is alive and is a process of work dir $2 (the
# broker or the token issuer; not another process that reused the pid).
is_ours() {
	local pid=$1 work=$2
	kill -0 "$pid" 2>/dev/null || return 1
	[[ -r /proc/$pid/cmdline ]] || return 0
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$work/"
}

# JIT_OPTS: the JVMs stop at the first JIT tier. A test broker serves
# thousands of records, not millions; the optimising compiler's threads
# would compete with the tests for the machine's cores, and a start (the
# broker restart test makes two per line) takes longer with them.
JIT_OPTS="-XX:TieredStopAtLevel=1"

# launch formats a fresh data dir in $1, with the SCRAM users, and starts the
# broker in the background on the PLAINTEXT, SASL_SSL, SSL and CONTROLLER
# ports $2 to $5; it prints the broker's pid.
launch() {
	local work=$1 port=$2 sport=$3 tport=$4 cport=$5
	rm -rf "$work/data" "$work/logs"
	mkdir -p "$work/data" "$work/logs"
	write_config "$work" "$port" "$sport" "$tport" "$cport"
	# The passwords are on this command line for the moment it runs; the
	# tool does not print them.
	"$(java_bin)" -cp "$LIB_DIR/*" "$(log_opts "$work")" -Xmx256m $JIT_OPTS kafka.tools.StorageTool format \
		-t "$(cluster_id)" -c "$work/server.properties" \
		--add-scram "SCRAM-SHA-256=[name=$SCRAM256_USER,password=$SCRAM256_PASSWORD]" \
		--add-scram "SCRAM-SHA-512=[name=$SCRAM512_USER,password=$SCRAM512_PASSWORD]" \
		>"$work/logs/format.log" 2>&1 || return 1
	run_broker "$work"
}

# run_broker starts the broker of the formatted work dir $1 in the background
# and prints its pid.
run_broker() {
	local work=$1
	nohup "$(java_bin)" -cp "$LIB_DIR/*" "$(log_opts "$work")" \
		-Xms256m -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 $JIT_OPTS \
		-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="$(oidc_url "$work" /jwks)" \
		kafka.Kafka "$work/server.properties" >>"$work/logs/stdout.log" 2>&1 </dev/null &
	printf '%s' "$!"
}

# await_ready waits until the broker of pid $1 answers on port $2; it fails
# when the process exits or START_TIMEOUT passes.
await_ready() {
	local pid=$1 port=$2 deadline=$((SECONDS + START_TIMEOUT))
	while ! probe "$port"; do
		kill -0 "$pid" 2>/dev/null || return 1
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# kill_process stops pid $1 (what $3 names) with signal $2, escalating to
# SIGKILL after STOP_TIMEOUT, and waits until it is gone.
kill_process() {
	local pid=$1 sig=$2 what=$3 deadline=$((SECONDS + STOP_TIMEOUT))
	kill "-$sig" "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "$what (pid $pid) ignored SIG$sig for $STOP_TIMEOUT s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null; do
			sleep 0.1
		done
	fi
}

# write_env writes state dir $1's env file: how tests reach the broker of
# work dir $2 on PLAINTEXT port $3, SASL_SSL port $4 and SSL port $5, and the
# credentials. It holds passwords: readable by its owner only.
write_env() {
	local state=$1 work=$2 port=$3 sport=$4 tport=$5
	(
		umask 077
		cat >"$state/env.partial" <<EOF
TURBO_TEST_BROKERS=127.0.0.1:$port
TURBO_TEST_KAFKA_VERSION=$KAFKA_VERSION
TURBO_TEST_SASL_SSL_BROKERS=127.0.0.1:$sport
TURBO_TEST_SSL_BROKERS=127.0.0.1:$tport
TURBO_TEST_TLS_DIR=$work/tls
TURBO_TEST_SCRAM256_USER=$SCRAM256_USER
TURBO_TEST_SCRAM256_PASSWORD=$SCRAM256_PASSWORD
TURBO_TEST_SCRAM512_USER=$SCRAM512_USER
TURBO_TEST_SCRAM512_PASSWORD=$SCRAM512_PASSWORD
TURBO_TEST_PLAIN_USER=$PLAIN_USER
TURBO_TEST_PLAIN_PASSWORD=$PLAIN_PASSWORD
TURBO_TEST_OAUTH_TOKEN_URL=$(oidc_url "$work" /token)
TURBO_TEST_OAUTH_CLIENT_ID=$OAUTH_CLIENT_ID
TURBO_TEST_OAUTH_CLIENT_SECRET_FILE=$work/oidc.secret
TURBO_TEST_OAUTH_STATS_URL=$(oidc_url "$work" /stats)
EOF
	)
	mv "$state/env.partial" "$state/env"
}

# prepare builds the tools and makes the certificates, the credentials and
# the token issuer of work dir $1 (the issuer's pid in state dir $2).
prepare() {
	local work=$1 state=$2
	build_tools "$work" || return 1
	make_certs "$work" || return 1
	new_credentials
	start_oidc "$work" "$state"
}

cmd_start() {
	local state=${1:-$DEFAULT_STATE_DIR}
	cmd_fetch
	need_java
	need_python
	command -v go >/dev/null || die "go is needed to build the certificate tool and the token issuer"
	mkdir -p "$state"
	if [[ -f $state/pid && -f $state/work ]] && is_ours "$(cat "$state/pid")" "$(cat "$state/work")"; then
		die "a broker already runs for $state at $(cat "$state/addr") (pid $(cat "$state/pid")); stop it first"
	fi
	cmd_stop "$state" 2>/dev/null # leftovers of a broker that died

	local work started=$SECONDS attempt port sport tport cport pid deadline
	work=$(mktemp -d "${TMPDIR:-/tmp}/turbo-kafka.XXXXXX")
	printf '%s\n' "$work" >"$state/work"
	if [[ $work == *[[:space:]]* ]]; then
		cmd_stop "$state"
		die "the work dir $work has a space in its path, which the env file cannot carry; set TMPDIR"
	fi
	if ! prepare "$work" "$state"; then
		log_tail "$work"
		cmd_stop "$state"
		die "preparing the certificates and the token issuer failed (above)"
	fi
	# A port found free can be taken before the broker binds it: then the
	# broker exits with "Address already in use" and other ports are tried.
	for attempt in 1 2 3; do
		read -r port sport tport cport < <(free_ports 4) || die "python3 could not find free ports"
		if ! pid=$(launch "$work" "$port" "$sport" "$tport" "$cport"); then
			log_tail "$work"
			cmd_stop "$state"
			die "formatting the data dir failed (above)"
		fi
		printf '%s\n' "$pid" >"$state/pid"
		printf '127.0.0.1:%s\n' "$port" >"$state/addr"
		deadline=$((SECONDS + START_TIMEOUT))
		while ! probe "$port"; do
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if ((SECONDS >= deadline)); then
				log_tail "$work"
				cmd_stop "$state"
				die "the broker did not answer a metadata request on 127.0.0.1:$port within $START_TIMEOUT s (logs above)"
			fi
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			write_env "$state" "$work" "$port" "$sport" "$tport"
			log "Kafka $KAFKA_VERSION ready after $((SECONDS - started)) s: PLAINTEXT 127.0.0.1:$port," \
				"SASL_SSL 127.0.0.1:$sport, SSL (mTLS) 127.0.0.1:$tport, token issuer $(cat "$work/oidc.addr")" \
				"(pid $pid, logs in $work/logs; settings in $state/env)"
			printf '127.0.0.1:%s\n' "$port"
			return 0
		fi
		if ! grep -qs 'Address already in use' "$work/logs/server.log" "$work/logs/stdout.log"; then
			break
		fi
		log "port $port, $sport, $tport or $cport was taken meanwhile (attempt $attempt); trying others"
	done
	log_tail "$work"
	cmd_stop "$state"
	die "the broker exited during start-up (logs above)"
}

cmd_stop() {
	local state=${1:-$DEFAULT_STATE_DIR} pid="" oidc_pid="" work=""
	[[ -f $state/pid ]] && pid=$(cat "$state/pid")
	[[ -f $state/oidc.pid ]] && oidc_pid=$(cat "$state/oidc.pid")
	[[ -f $state/work ]] && work=$(cat "$state/work")
	if [[ -n $pid && -n $work ]] && is_ours "$pid" "$work"; then
		kill_process "$pid" TERM "the broker"
		log "stopped the broker (pid $pid)"
	fi
	if [[ -n $oidc_pid && -n $work ]] && is_ours "$oidc_pid" "$work"; then
		kill_process "$oidc_pid" TERM "the token issuer"
	fi
	# Only ever delete a work dir this script made.
	if [[ -d $work && $(basename "$work") == turbo-kafka.* ]]; then
		rm -rf "$work"
	fi
	rm -f "$state/pid" "$state/oidc.pid" "$state/addr" "$state/work" "$state/env" "$state/env.partial"
}

# cmd_restart stops the broker of STATE_DIR and starts it again on the same
# ports, with its data, certificates and users: a broker restart as operators
# do it (or a crash, with --kill). The token issuer keeps running.
cmd_restart() {
	local state=${1:-$DEFAULT_STATE_DIR} sig=TERM pid work port started=$SECONDS
	[[ ${2:-} == --kill ]] && sig=KILL
	[[ -f $state/pid && -f $state/work && -f $state/addr ]] || die "no broker was started for $state"
	pid=$(cat "$state/pid") work=$(cat "$state/work") port=$(cut -d: -f2 <"$state/addr")
	is_ours "$pid" "$work" || die "the broker of $state (pid $pid) is not running"
	kill_process "$pid" "$sig" "the broker"
	pid=$(run_broker "$work")
	printf '%s\n' "$pid" >"$state/pid"
	# The old process's port may linger in TIME_WAIT; Kafka sets SO_REUSEADDR.
	if ! await_ready "$pid" "$port"; then
		log_tail "$work"
		die "the restarted broker did not answer on 127.0.0.1:$port within $START_TIMEOUT s (logs above)"
	fi
	log "Kafka restarted (SIG$sig) at 127.0.0.1:$port in $((SECONDS - started)) s (pid $pid)"
	printf '127.0.0.1:%s\n' "$port"
}

# cmd_env prints the env file of the broker of STATE_DIR.
cmd_env() {
	local state=${1:-$DEFAULT_STATE_DIR}
	[[ -f $state/env ]] || die "no broker was started for $state (no $state/env)"
	cat "$state/env"
}

# cmd_with runs COMMAND beside a broker of its own (what make test-kafka and
# make bench-kafka do for each line): its env file exported, its state dir
# in TURBO_TEST_STATE, and the broker stopped however COMMAND ends. The
# cluster mode sets WITH_START and WITH_STOP to its own start and stop.
WITH_START=cmd_start WITH_STOP=cmd_stop
cmd_with() {
	(($# > 0)) || usage
	cmd_fetch
	local state rc=0
	state=$(mktemp -d)
	# shellcheck disable=SC2064 # state is fixed now
	trap "$WITH_STOP '$state'; rm -rf '$state'" EXIT
	trap 'exit 130' INT TERM
	"$WITH_START" "$state" >/dev/null
	unset TURBO_TEST_KAFKA_LINE
	set -a
	# shellcheck source=/dev/null
	. "$state/env"
	TURBO_TEST_STATE=$state
	set +a
	"$@" || rc=$?
	exit "$rc"
}

usage() {
	echo "usage: $0 fetch | start [STATE_DIR] | stop [STATE_DIR] | restart [STATE_DIR] [--kill] | env [STATE_DIR] | with COMMAND..." >&2
	exit 2
}

# TURBO_TEST_KAFKA_BROKERS=3: a cluster of three (test/kafka/cluster.sh).
case ${TURBO_TEST_KAFKA_BROKERS:-1} in
1) ;;
3)
	# shellcheck source=test/kafka/cluster.sh
	. "$REPO_ROOT/test/kafka/cluster.sh"
	cluster_main "$@"
	exit
	;;
*)
	printf 'kafka: TURBO_TEST_KAFKA_BROKERS=%s: want 1 (or unset) or 3\n' "$TURBO_TEST_KAFKA_BROKERS" >&2
	exit 2
	;;
esac

case ${1:-} in
fetch) cmd_fetch ;;
start) cmd_start "${2:-}" ;;
stop) cmd_stop "${2:-}" ;;
restart) cmd_restart "${2:-}" "${3:-}" ;;
env) cmd_env "${2:-}" ;;
with) shift && cmd_with "$@" ;;
*) usage ;;
esac
