# A three-node Apache Kafka cluster for turbo's cluster tests: sourced by
# kafka.sh when TURBO_TEST_KAFKA_BROKERS=3, with its functions (Java, the
# jars, ports, logging, the probe).
#
#   kafka.sh start [STATE_DIR]          start three combined broker+controller
#                                       nodes (KRaft, ids 1..3) on free
#                                       loopback ports; prints their PLAINTEXT
#                                       addresses, comma-separated, once every
#                                       node sees all three
#   kafka.sh env   [STATE_DIR]          print STATE_DIR/env
#   kafka.sh with COMMAND...            as for one broker
#   kafka.sh stop  [STATE_DIR]          stop every node, delete the data
#   kafka.sh down  STATE_DIR ID [--kill]
#                                       stop node ID (SIGTERM, or SIGKILL with
#                                       --kill); the others go on
#   kafka.sh up    STATE_DIR ID         start node ID again, same ports and
#                                       data; prints its address once it
#                                       answers and sees all three
#
# Every topic is replicated three times with min.insync.replicas=2, the
# internal ones too: one node down, everything goes on (leaders move, the
# group coordinator moves); two down, writes stop. Unclean leader election
# stays off.
#
# Each node has two client listeners: PLAINTEXT, advertised as it is, and
# PROXIED, advertised at a port of its own where nothing listens: a test
# that wants to come between the clients and the node (latency, a cut, a
# reset) listens there and forwards to the node's PROXIED port
# (TURBO_TEST_PROXY_ROUTES). A client that bootstraps from the advertised
# PROXIED addresses only ever talks to the nodes through them.
#
# The cluster has no secured listeners: the single broker tests those.
# STATE_DIR/env (KEY=value lines):
#   TURBO_TEST_BROKERS          the PLAINTEXT addresses, comma-separated
#   TURBO_TEST_KAFKA_VERSION, TURBO_TEST_KAFKA_NODES=3
#   TURBO_TEST_KAFKA_NODE_<ID>  node ID's PLAINTEXT address
#   TURBO_TEST_PROXIED_BROKERS  the advertised PROXIED addresses
#   TURBO_TEST_PROXY_ROUTES     ADVERTISED=NODE pairs, comma-separated: where
#                               a proxy listens, and where it forwards to
#   TURBO_TEST_STATE            STATE_DIR (for down and up)

readonly CLUSTER_NODES=3
# Seconds a node has to answer and see the others. Three JVMs electing a
# quorum beside a busy test run on two cores took longer than the single
# broker's START_TIMEOUT (60 s): their controllers' 2 s request timeouts
# expire and elections repeat until the load lets one through.
readonly CLUSTER_START_TIMEOUT="${TURBO_KAFKA_START_TIMEOUT:-180}"

# node_dir prints the work dir of node $2 of cluster work dir $1.
node_dir() { printf '%s/node-%s' "$1" "$2"; }

# write_node_config writes node $2's configuration into its dir under work
# dir $1; the ports come from the cluster's ports file.
write_node_config() {
	local work=$1 id=$2 dir voters="" n port xport aport cport
	dir=$(node_dir "$work" "$id")
	for n in $(seq 1 $CLUSTER_NODES); do
		read -r port xport aport cport < <(sed -n "${n}p" "$work/ports")
		voters+="${voters:+,}$n@127.0.0.1:$cport"
	done
	read -r port xport aport cport < <(sed -n "${id}p" "$work/ports")
	cat >"$dir/server.properties" <<EOF
# Node $id of a three-node KRaft cluster for tests: broker and controller.
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,PROXIED://127.0.0.1:$xport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,PROXIED://127.0.0.1:$aport
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data

# Three replicas of everything, two in sync for a write: one node may go.
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
unclean.leader.election.enable=false
offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4
share.coordinator.state.topic.num.partitions=4
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.partitions=8
delete.topic.enable=true
# Two cores for three nodes and the tests.
num.network.threads=1
num.io.threads=2
num.replica.fetchers=1
num.recovery.threads.per.data.dir=1
background.threads=2
EOF
	if [[ $KAFKA_LINE != 3.9 ]]; then
		group_timing_config >>"$dir/server.properties"
	fi
	# A cluster's tolerated unknown configs differ by line: 3.9 knows no
	# share coordinator.
	if [[ $KAFKA_LINE == 3.9 ]]; then
		sed -i '/^share\.coordinator\./d' "$dir/server.properties"
	fi
	write_log_config "$dir"
}

# run_node starts node $2 of work dir $1 in the background and prints its
# pid.
run_node() {
	local dir
	dir=$(node_dir "$1" "$2")
	nohup "$(java_bin)" -cp "$LIB_DIR/*" "$(log_opts "$dir")" \
		-Xms128m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 $JIT_OPTS \
		-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		kafka.Kafka "$dir/server.properties" >>"$dir/logs/stdout.log" 2>&1 </dev/null &
	printf '%s' "$!"
}

# node_port prints node $2's column $3 of work dir $1's ports file (1:
# PLAINTEXT, 2: PROXIED, 3: PROXIED as advertised, 4: CONTROLLER).
node_port() { sed -n "${2}p" "$1/ports" | cut -d' ' -f"$3"; }

# await_node waits until node $3 (pid $4) of work dir $2 answers and sees
# all the nodes; $1 is what to say when it does not.
await_node() {
	local what=$1 work=$2 id=$3 pid=$4 port deadline=$((SECONDS + CLUSTER_START_TIMEOUT))
	port=$(node_port "$work" "$id" 1)
	while ! probe "$port" $CLUSTER_NODES; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "node $id (pid $pid) exited $what"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			log "node $id did not see $CLUSTER_NODES nodes within $CLUSTER_START_TIMEOUT s $what"
			return 1
		fi
		sleep 0.2
	done
}

# cluster_log_tail prints the end of every node's logs.
cluster_log_tail() {
	local n
	for n in $(seq 1 $CLUSTER_NODES); do
		log_tail "$(node_dir "$1" "$n")"
	done
}

cluster_write_env() {
	local state=$1 work=$2 n addrs="" proxied="" routes="" nodes=""
	for n in $(seq 1 $CLUSTER_NODES); do
		addrs+="${addrs:+,}127.0.0.1:$(node_port "$work" "$n" 1)"
		proxied+="${proxied:+,}127.0.0.1:$(node_port "$work" "$n" 3)"
		routes+="${routes:+,}127.0.0.1:$(node_port "$work" "$n" 3)=127.0.0.1:$(node_port "$work" "$n" 2)"
		nodes+="TURBO_TEST_KAFKA_NODE_$n=127.0.0.1:$(node_port "$work" "$n" 1)"$'\n'
	done
	cat >"$state/env.partial" <<EOF
TURBO_TEST_BROKERS=$addrs
TURBO_TEST_KAFKA_VERSION=$KAFKA_VERSION
TURBO_TEST_KAFKA_NODES=$CLUSTER_NODES
${nodes}TURBO_TEST_PROXIED_BROKERS=$proxied
TURBO_TEST_PROXY_ROUTES=$routes
TURBO_TEST_STATE=$state
EOF
	mv "$state/env.partial" "$state/env"
	printf '%s\n' "$addrs" >"$state/addr"
}

cluster_start() {
	local state=${1:-$DEFAULT_STATE_DIR}
	cmd_fetch
	need_java
	need_python
	mkdir -p "$state"
	state=$(cd "$state" && pwd)
	if [[ -f $state/work ]] && cluster_running "$state"; then
		die "a cluster already runs for $state at $(cat "$state/addr"); stop it first"
	fi
	cluster_stop "$state" 2>/dev/null # leftovers of a cluster that died

	local work started=$SECONDS cid n pid attempt ok
	work=$(mktemp -d "${TMPDIR:-/tmp}/turbo-kafka.XXXXXX")
	printf '%s\n' "$work" >"$state/work"
	cid=$(cluster_id)
	# A port found free can be taken before a node binds it: then that node
	# exits with "Address already in use", and the cluster starts again on
	# other ports.
	for attempt in 1 2 3; do
		free_ports $((4 * CLUSTER_NODES)) | tr ' ' '\n' | paste -d' ' - - - - >"$work/ports"
		# The three data dirs are formatted at once: a JVM start each,
		# which beside a busy test run takes tens of seconds.
		local -a formats=()
		for n in $(seq 1 $CLUSTER_NODES); do
			local dir
			dir=$(node_dir "$work" "$n")
			rm -rf "$dir"
			mkdir -p "$dir/data" "$dir/logs"
			write_node_config "$work" "$n"
			"$(java_bin)" -cp "$LIB_DIR/*" "$(log_opts "$dir")" -Xmx256m $JIT_OPTS kafka.tools.StorageTool format \
				-t "$cid" -c "$dir/server.properties" >"$dir/logs/format.log" 2>&1 &
			formats+=($!)
		done
		local failed=""
		for n in $(seq 1 $CLUSTER_NODES); do
			wait "${formats[$((n - 1))]}" || failed+="${failed:+, }$n"
		done
		if [[ -n $failed ]]; then
			cluster_log_tail "$work"
			cluster_stop "$state"
			die "formatting the data dir of node(s) $failed failed (above)"
		fi
		for n in $(seq 1 $CLUSTER_NODES); do
			pid=$(run_node "$work" "$n")
			printf '%s\n' "$pid" >"$state/pid.$n"
		done
		ok=1
		for n in $(seq 1 $CLUSTER_NODES); do
			await_node "during start-up" "$work" "$n" "$(cat "$state/pid.$n")" || ok=0
		done
		if ((ok)); then
			cluster_write_env "$state" "$work"
			log "Kafka $KAFKA_VERSION cluster of $CLUSTER_NODES ready after $((SECONDS - started)) s: $(cat "$state/addr")" \
				"(logs in $work/node-*/logs; settings in $state/env)"
			cat "$state/addr"
			return 0
		fi
		for n in $(seq 1 $CLUSTER_NODES); do
			[[ -f $state/pid.$n ]] && kill_process "$(cat "$state/pid.$n")" KILL "node $n"
		done
		if ! grep -qs 'Address already in use' "$work"/node-*/logs/server.log "$work"/node-*/logs/stdout.log; then
			break
		fi
		log "a port was taken meanwhile (attempt $attempt); trying others"
	done
	cluster_log_tail "$work"
	cluster_stop "$state"
	die "the cluster did not start (logs above)"
}

# cluster_running succeeds when a node of state dir $1 runs.
cluster_running() {
	local state=$1 n work
	work=$(cat "$state/work")
	for n in $(seq 1 $CLUSTER_NODES); do
		[[ -f $state/pid.$n ]] && is_ours "$(cat "$state/pid.$n")" "$work" && return 0
	done
	return 1
}

cluster_stop() {
	local state=${1:-$DEFAULT_STATE_DIR} work="" n pid
	[[ -f $state/work ]] && work=$(cat "$state/work")
	# All at once: a node stopping alone waits for the others to take over
	# its partitions.
	for n in $(seq 1 $CLUSTER_NODES); do
		if [[ -f $state/pid.$n && -n $work ]] && pid=$(cat "$state/pid.$n") && is_ours "$pid" "$work"; then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for n in $(seq 1 $CLUSTER_NODES); do
		if [[ -f $state/pid.$n && -n $work ]] && pid=$(cat "$state/pid.$n") && is_ours "$pid" "$work"; then
			kill_process "$pid" TERM "node $n"
			log "stopped node $n (pid $pid)"
		fi
		rm -f "$state/pid.$n"
	done
	if [[ -d $work && $(basename "$work") == turbo-kafka.* ]]; then
		rm -rf "$work"
	fi
	rm -f "$state/work" "$state/addr" "$state/env" "$state/env.partial"
}

# node_args checks state dir $1 and node id $2, and sets work and pid.
node_args() {
	local state=$1 id=$2
	[[ $id =~ ^[1-9]$ ]] && ((id <= CLUSTER_NODES)) || die "node id $id: want 1 to $CLUSTER_NODES"
	[[ -f $state/work ]] || die "no cluster was started for $state"
	work=$(cat "$state/work")
	pid=$(cat "$state/pid.$id" 2>/dev/null || true)
}

cluster_down() {
	local state=$1 id=$2 sig=TERM work pid
	[[ ${3:-} == --kill ]] && sig=KILL
	node_args "$state" "$id"
	[[ -n $pid ]] && is_ours "$pid" "$work" || die "node $id of $state is not running"
	kill_process "$pid" "$sig" "node $id"
	rm -f "$state/pid.$id"
	log "node $id stopped (SIG$sig)"
}

cluster_up() {
	local state=$1 id=$2 work pid started=$SECONDS
	node_args "$state" "$id"
	if [[ -n $pid ]] && is_ours "$pid" "$work"; then
		die "node $id of $state already runs (pid $pid)"
	fi
	pid=$(run_node "$work" "$id")
	printf '%s\n' "$pid" >"$state/pid.$id"
	if ! await_node "after a restart" "$work" "$id" "$pid"; then
		log_tail "$(node_dir "$work" "$id")"
		die "node $id did not come back (logs above)"
	fi
	log "node $id back in $((SECONDS - started)) s (pid $pid)"
	printf '127.0.0.1:%s\n' "$(node_port "$work" "$id" 1)"
}

cluster_main() {
	case ${1:-} in
	fetch) cmd_fetch ;;
	start) cluster_start "${2:-}" ;;
	stop) cluster_stop "${2:-}" ;;
	env) cmd_env "${2:-}" ;;
	with)
		shift
		WITH_START=cluster_start WITH_STOP=cluster_stop cmd_with "$@"
		;;
	down) (($# >= 3)) || cluster_usage && cluster_down "$2" "$3" "${4:-}" ;;
	up) (($# >= 3)) || cluster_usage && cluster_up "$2" "$3" ;;
	*) cluster_usage ;;
	esac
}

cluster_usage() {
	echo "usage (TURBO_TEST_KAFKA_BROKERS=3): $0 fetch | start [STATE_DIR] | stop [STATE_DIR] | env [STATE_DIR] | with COMMAND... | down STATE_DIR ID [--kill] | up STATE_DIR ID" >&2
	exit 2
}
