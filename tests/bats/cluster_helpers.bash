# cluster_helpers.bash - a Redis Cluster of a bats test's own, for the
# shared store on a cluster (docs/design.md, "The shared store on a Redis
# Cluster").  Loaded by redis_helpers.bash, whose redis_stop_all stops
# its nodes: every node is in REDIS_PIDS, so a test that fails half way
# leaves no redis-server behind.
#
# The choices of tests/unit/redis/cluster_fixture.h: loopback TCP only
# (--bind 127.0.0.1), no persistence, a directory of the nodes' own,
# `redis-cli --cluster create --cluster-yes`; a short node timeout here
# (2 s) so that a killed primary's replica takes over within seconds.
#
#   cluster_start [N_PRIMARIES=3] [REPLICAS=1]
#                            start N*(1+REPLICAS) nodes on free ports,
#                            join them, wait until every node says
#                            cluster_state:ok and every replica is synced.
#                            Sets CLUSTER_PORTS (primaries, then
#                            replicas, as created), CLUSTER_PIDS (the
#                            same order), CLUSTER_SEEDS
#                            (127.0.0.1:P1,127.0.0.1:P2,... the primaries)
#                            and CLUSTER_DIR
#   ccli PORT ARGS...        redis-cli -p PORT ARGS (add -c to follow MOVED)
#   cluster_primary_of_key KEY   the port of the primary serving KEY's slot
#   cluster_primary_of_slot SLOT the port of the primary serving SLOT
#   cluster_failover REPLICA_PORT
#                            CLUSTER FAILOVER on that replica; waits until
#                            it is a primary, its old primary a replica,
#                            and every node ok
#   cluster_kill_primary PORT
#                            SIGKILL the node on PORT; waits until one of
#                            its replicas is a primary and every living
#                            node says cluster_state:ok
#   cluster_move_slot SLOT TO_PORT
#                            move one slot and its keys to the primary on
#                            TO_PORT (SETSLOT IMPORTING/MIGRATING, MIGRATE
#                            in batches, SETSLOT NODE on every primary)
#   cluster_load_library     FUNCTION LOAD REPLACE of REDIS_LIBRARY on every
#                            primary
#   cluster_wait_ok          wait until every living node says
#                            cluster_state:ok and agrees on the slot map
#
# CLUSTER_NODE_ARGS: more arguments of every node's redis-server
# (default --cluster-require-full-coverage no: while a primary is down
# and not yet replaced, the other primaries go on serving their slots,
# as a fleet's shards do; "" for Redis's default, every node refusing
# with CLUSTERDOWN until every slot is served again).
#
# Every wait is bounded (60 s: a loaded machine may be slow, a cluster
# that does not settle in that time is a failure, not a hang).

CLUSTER_NODE_ARGS=${CLUSTER_NODE_ARGS---cluster-require-full-coverage no}
CLUSTER_PORTS=()
CLUSTER_PIDS=()
# (Exported by the cluster run's setup_file: kept.)
CLUSTER_SEEDS=${CLUSTER_SEEDS:-}
CLUSTER_DIR=${CLUSTER_DIR:-}

ccli() {
	local port=$1
	shift
	redis-cli -h 127.0.0.1 -p "$port" "$@"
}

# _cluster_port_free PORT: nobody listens on PORT (ss -ltn), nor on its
# cluster bus port PORT+10000.
_cluster_port_free() {
	local p=$1 used
	used=$(ss -Hltn "( sport = :$p or sport = :$((p + 10000)) )" 2>/dev/null)
	[ -z "$used" ]
}

# _cluster_pick_port: a free port of 11000..21999 (its bus port
# 21000..31999: both below the kernel's ephemeral ports, 32768 on, which
# a client's connection may hold unseen by ss -l) not yet chosen by this
# start, in $port.
_cluster_pick_port() {
	local i p
	for ((i = 0; i < 200; i++)); do
		p=$((11000 + (RANDOM * 32768 + RANDOM) % 11000))
		[[ " ${CLUSTER_PORTS[*]} " == *" $p "* ]] && continue
		_cluster_port_free "$p" && port=$p && return 0
	done
	return 1
}

# _cluster_node_start: one node on a free port, in a directory of its
# own; tried again on another port when the one chosen was taken in
# between (the node then exits at once).  Appends to CLUSTER_PORTS,
# CLUSTER_PIDS and REDIS_PIDS.
_cluster_node_start() {
	local port dir pid try i
	for ((try = 0; try < 5; try++)); do
		_cluster_pick_port || break
		dir=$CLUSTER_DIR/node-$port
		mkdir -m 0700 -- "$dir" || return 1
		# fd 3 is bats' output channel: a background child must not keep it.
		# shellcheck disable=SC2086 # CLUSTER_NODE_ARGS: words
		redis-server --port "$port" --bind 127.0.0.1 \
			--cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
			--cluster-port $((port + 10000)) --cluster-node-timeout 2000 \
			--save '' --appendonly no --dir "$dir" \
			--logfile "$dir/redis.log" $CLUSTER_NODE_ARGS \
			</dev/null >/dev/null 2>&1 3>&- &
		pid=$!
		REDIS_PIDS+=("$pid")
		for ((i = 0; i < 2000; i++)); do
			if [ "$(ccli "$port" PING 2>/dev/null)" = PONG ]; then
				CLUSTER_PORTS+=("$port")
				CLUSTER_PIDS+=("$pid")
				return 0
			fi
			proc_alive "$pid" || break
			statefs_sleep 0.01
		done
		echo "cluster node on port $port did not start:" >&2
		tail -n 5 "$dir/redis.log" >&2 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null || :
	done
	fail "cannot start a cluster node on a free loopback port"
}

# _cluster_info_field PORT FIELD: one field of CLUSTER INFO on PORT.
_cluster_info_field() {
	ccli "$1" CLUSTER INFO 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

# _cluster_living: the ports of CLUSTER_PORTS whose node still runs.
_cluster_living() {
	local i
	for i in "${!CLUSTER_PORTS[@]}"; do
		proc_alive "${CLUSTER_PIDS[i]}" && echo "${CLUSTER_PORTS[i]}"
	done
}

# _cluster_settled: every living node says ok with all 16384 slots ok,
# each knows the same
# number of primaries serving slots, and every replica's link to its
# primary is up and synced.
_cluster_settled() {
	local p role want="" n
	for p in $(_cluster_living); do
		[ "$(_cluster_info_field "$p" cluster_state)" = ok ] || return 1
		# Every slot served by a primary seen alive (state ok alone does
		# not say so without full coverage).
		[ "$(_cluster_info_field "$p" cluster_slots_ok)" = 16384 ] || return 1
		n=$(_cluster_info_field "$p" cluster_size)
		[ -z "$want" ] && want=$n
		[ "$n" = "$want" ] || return 1
		role=$(ccli "$p" ROLE 2>/dev/null | head -n 1)
		if [ "$role" = slave ]; then
			ccli "$p" INFO replication 2>/dev/null | tr -d '\r' |
				grep -q '^master_link_status:up' || return 1
			ccli "$p" INFO replication 2>/dev/null | tr -d '\r' |
				grep -q '^master_sync_in_progress:0' || return 1
		fi
	done
	return 0
}

cluster_wait_ok() {
	local i
	for ((i = 0; i < 600; i++)); do
		_cluster_settled && return 0
		statefs_sleep 0.1
	done
	fail "the cluster did not settle within 60 s: $(
		for p in $(_cluster_living); do
			echo "$p: $(_cluster_info_field "$p" cluster_state) $(ccli "$p" ROLE | head -n 1)"
		done)"
}

cluster_start() {
	local n=${1:-3} r=${2:-1} i addrs=()
	if ! command -v redis-server >/dev/null 2>&1; then
		fail "redis-server is not installed (scripts/deps.sh installs it)"
		return 1
	fi
	CLUSTER_PORTS=()
	CLUSTER_PIDS=()
	CLUSTER_DIR=$(mktemp -d "${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/cluster.XXXXXX") || return 1
	for ((i = 0; i < n * (1 + r); i++)); do
		_cluster_node_start || return 1
	done
	for i in "${CLUSTER_PORTS[@]}"; do
		addrs+=("127.0.0.1:$i")
	done
	# create gives the first N the slots and makes the others replicas;
	# it may still move a replica between primaries, which ROLE tells.
	if ! timeout 60 redis-cli --cluster create "${addrs[@]}" \
		--cluster-replicas "$r" --cluster-yes \
		</dev/null >"$CLUSTER_DIR/create.log" 2>&1 3>&-; then
		cat "$CLUSTER_DIR/create.log" >&2
		fail "redis-cli --cluster create failed"
		return 1
	fi
	cluster_wait_ok || return 1
	# The primaries first, then the replicas: the order CLUSTER_PORTS
	# promises, whatever create chose.
	local prim=() prim_pids=() repl=() repl_pids=()
	for i in "${!CLUSTER_PORTS[@]}"; do
		if [ "$(ccli "${CLUSTER_PORTS[i]}" ROLE | head -n 1)" = master ]; then
			prim+=("${CLUSTER_PORTS[i]}")
			prim_pids+=("${CLUSTER_PIDS[i]}")
		else
			repl+=("${CLUSTER_PORTS[i]}")
			repl_pids+=("${CLUSTER_PIDS[i]}")
		fi
	done
	CLUSTER_PORTS=("${prim[@]}" "${repl[@]}")
	CLUSTER_PIDS=("${prim_pids[@]}" "${repl_pids[@]}")
	CLUSTER_SEEDS=$(printf '127.0.0.1:%s,' "${prim[@]}")
	CLUSTER_SEEDS=${CLUSTER_SEEDS%,}
}

# _cluster_nodes PORT: CLUSTER NODES as PORT sees it, "ID PORT FLAGS
# MASTER_ID SLOTS..." a line.
_cluster_nodes() {
	ccli "$1" CLUSTER NODES 2>/dev/null | tr -d '\r' | awk '{
		split($2, a, "[:@]")
		line = $1 " " a[2] " " $3 " " $4
		for (i = 9; i <= NF; i++) line = line " " $i
		print line
	}'
}

# _cluster_any: a living node's port.
_cluster_any() {
	_cluster_living | head -n 1
}

# cluster_primary_of_slot SLOT [ASK_PORT]: as ASK_PORT (default: any
# living node) sees it.
cluster_primary_of_slot() {
	local slot=$1 ask=${2:-$(_cluster_any)}
	_cluster_nodes "$ask" | awk -v s="$slot" '
		$3 ~ /master/ && $3 !~ /fail/ {
			for (i = 5; i <= NF; i++) {
				if ($i ~ /^\[/) continue
				n = split($i, r, "-")
				lo = r[1] + 0; hi = (n > 1 ? r[2] : r[1]) + 0
				if (s >= lo && s <= hi) { print $2; exit }
			}
		}'
}

cluster_primary_of_key() {
	cluster_primary_of_slot "$(ccli "$(_cluster_any)" CLUSTER KEYSLOT "$1")"
}

# _cluster_role PORT: master or slave.
_cluster_role() {
	ccli "$1" ROLE 2>/dev/null | head -n 1
}

cluster_failover() {
	local port=$1 old i
	old=$(ccli "$port" ROLE | sed -n 3p)
	[ "$(_cluster_role "$port")" = slave ] || {
		fail "cluster_failover: $port is not a replica"
		return 1
	}
	ccli "$port" CLUSTER FAILOVER >/dev/null || return 1
	for ((i = 0; i < 600; i++)); do
		[ "$(_cluster_role "$port")" = master ] &&
			[ "$(_cluster_role "$old")" = slave ] && break
		statefs_sleep 0.1
	done
	[ "$(_cluster_role "$port")" = master ] || {
		fail "cluster_failover: $port is still a replica after 60 s"
		return 1
	}
	cluster_wait_ok
}

cluster_kill_primary() {
	local port=$1 id i idx="" replicas p
	for i in "${!CLUSTER_PORTS[@]}"; do
		[ "${CLUSTER_PORTS[i]}" = "$port" ] && idx=$i
	done
	[ -n "$idx" ] || {
		fail "cluster_kill_primary: no node of this cluster on $port"
		return 1
	}
	id=$(ccli "$port" CLUSTER MYID | tr -d '\r')
	replicas=$(_cluster_nodes "$port" | awk -v m="$id" '$4 == m { print $2 }')
	[ -n "$replicas" ] || {
		fail "cluster_kill_primary: $port has no replica to take over"
		return 1
	}
	kill -KILL "${CLUSTER_PIDS[idx]}"
	wait "${CLUSTER_PIDS[idx]}" 2>/dev/null || :
	for ((i = 0; i < 600; i++)); do
		for p in $replicas; do
			if [ "$(_cluster_role "$p")" = master ]; then
				cluster_wait_ok
				return
			fi
		done
		statefs_sleep 0.1
	done
	fail "cluster_kill_primary: no replica of $port became primary within 60 s"
}

cluster_move_slot() {
	local slot=$1 to=$2 from from_id to_id keys p i
	from=$(cluster_primary_of_slot "$slot")
	[ -n "$from" ] || {
		fail "cluster_move_slot: nobody serves slot $slot"
		return 1
	}
	[ "$from" != "$to" ] || return 0
	from_id=$(ccli "$from" CLUSTER MYID | tr -d '\r')
	to_id=$(ccli "$to" CLUSTER MYID | tr -d '\r')
	ccli "$to" CLUSTER SETSLOT "$slot" IMPORTING "$from_id" | grep -q OK || return 1
	ccli "$from" CLUSTER SETSLOT "$slot" MIGRATING "$to_id" | grep -q OK || return 1
	for ((i = 0; i < 100000; i++)); do
		mapfile -t keys < <(ccli "$from" CLUSTER GETKEYSINSLOT "$slot" 100 | tr -d '\r')
		if [ "${#keys[@]}" -eq 0 ] || [ -z "${keys[0]}" ]; then
			break
		fi
		ccli "$from" MIGRATE 127.0.0.1 "$to" "" 0 5000 KEYS "${keys[@]}" |
			grep -q OK || {
			fail "cluster_move_slot: MIGRATE of slot $slot failed"
			return 1
		}
	done
	# The new owner first (it stops importing), then the old, then the
	# others: each serves or redirects at once, without waiting for gossip.
	for p in "$to" "$from" $(_cluster_living); do
		[ "$(_cluster_role "$p")" = master ] || continue
		ccli "$p" CLUSTER SETSLOT "$slot" NODE "$to_id" >/dev/null
	done
	for ((i = 0; i < 600; i++)); do
		local ok=1
		for p in $(_cluster_living); do
			[ "$(cluster_primary_of_slot "$slot" "$p")" = "$to" ] || ok=0
		done
		[ "$ok" = 1 ] && return 0
		statefs_sleep 0.1
	done
	fail "cluster_move_slot: the nodes do not agree that $to serves slot $slot"
}

cluster_load_library() {
	local p
	[ -r "$REDIS_LIBRARY" ] || {
		fail "no library at $REDIS_LIBRARY (run make)"
		return 1
	}
	for p in $(_cluster_living); do
		[ "$(_cluster_role "$p")" = master ] || continue
		ccli "$p" -x FUNCTION LOAD REPLACE <"$REDIS_LIBRARY" >/dev/null || return 1
	done
}
