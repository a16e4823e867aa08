# redis_helpers.bash - the redis-servers a bats test of the shared store
# starts, and the statefs Functions library on them.
#
# Each test starts its own redis-server(s): a unix socket in a directory
# of its own (no TCP unless asked), no persistence, and stops every one
# in teardown, also when the test failed half way, so no redis-server
# outlives its test.  A suite that loads this file calls redis_stop_all
# from its teardown() (and statefs_unmount first when it also mounts).
#
#   redis_start [ARGS...]    start a redis-server, extra ARGS passed on
#                            (a loopback --port for replicas and
#                            Sentinels); waits until it answers PING and
#                            sets REDIS_SOCK (its socket) and REDIS_DIR
#                            (its directory, with redis.log).  Every
#                            server started is in REDIS_PIDS/REDIS_SOCKS.
#   redis_stop_all           stop every redis-server this test started
#   rcli ARGS...             redis-cli on REDIS_SOCK
#   redis_client             rcli through one connection from now on
#                            (for a test that sends many commands)
#   redis_load_library       FUNCTION LOAD REPLACE build/gen/statefs.lua
#                            (the library as the build makes it of
#                            redis/lua/*.lua) on REDIS_SOCK; prints the
#                            library name
#   mount2 [OPTS...]         two mounts of REDIS_SOCK's store (statefs_mount,
#                            helpers.bash), as two hosts: A and B
#   mount3 [OPTS...]         three: A, B and C
#   fsyncdir DIR...          fsync(2) of each directory: its mount catches
#                            up with every change made before the call
#                            (bounded: a hang fails the test)
#
# A Redis Cluster of the test's own (cluster_helpers.bash, loaded below):
#   cluster_start [N_PRIMARIES=3] [REPLICAS=1], ccli PORT ARGS...,
#   cluster_primary_of_key KEY, cluster_failover REPLICA_PORT,
#   cluster_kill_primary PORT, cluster_move_slot SLOT TO_PORT,
#   cluster_load_library; its nodes are in REDIS_PIDS too, so
#   redis_stop_all stops them.

# bats-support, bats-assert and statefs_sleep (assert.bash).
load assert

REDIS_LIBRARY="${REDIS_LIBRARY:-$BATS_TEST_DIRNAME/../../build/gen/statefs.lua}"

REDIS_PIDS=()
REDIS_SOCKS=()

# shellcheck source=tests/bats/cluster_helpers.bash
source "$BATS_TEST_DIRNAME/cluster_helpers.bash"

# The directory of a server: one mkdir (mode 0700, as mktemp makes it),
# under a name of this process's, tried again when it is taken.
_REDIS_NDIRS=0
redis_start() {
	local dir pid i
	if ! command -v redis-server >/dev/null 2>&1; then
		fail "redis-server is not installed (scripts/deps.sh installs it)"
		return 1
	fi
	for ((i = 0; i < 20; i++)); do
		_REDIS_NDIRS=$((_REDIS_NDIRS + 1))
		dir=${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/redis.$BASHPID.$_REDIS_NDIRS.$RANDOM
		mkdir -m 0700 -- "$dir" 2>/dev/null && break
	done
	[ "$i" -lt 20 ] || {
		fail "cannot make a directory for redis-server"
		return 1
	}
	# fd 3 is bats' output channel: a background child must not keep it.
	redis-server --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
		--port 0 --save '' --appendonly no --dir "$dir" \
		--logfile "$dir/redis.log" "$@" </dev/null >/dev/null 2>&1 3>&- &
	pid=$!
	REDIS_PIDS+=("$pid")
	REDIS_SOCKS+=("$dir/redis.sock")
	REDIS_SOCK="$dir/redis.sock"
	REDIS_DIR="$dir"
	# A loaded machine may take a while; 20 s is generous, not a timing.
	# The socket first (the shell sees it), then PING (a redis-cli).
	for ((i = 0; i < 2000; i++)); do
		if [ -S "$dir/redis.sock" ] &&
			[ "$(redis-cli -s "$dir/redis.sock" PING 2>/dev/null)" = PONG ]; then
			return 0
		fi
		if ! proc_alive "$pid"; then
			break
		fi
		statefs_sleep 0.01
	done
	cat "$dir/redis.log" >&2 2>/dev/null
	fail "redis-server did not answer on $dir/redis.sock (args: $*)"
}

# Stop one server: SIGTERM, then SIGKILL if it is still there after 10 s.
# (It exits at its next serverCron, within 100 ms at the default hz.)
_redis_stop_one() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 500; i++)); do
		proc_alive "$pid" || break
		statefs_sleep 0.02
	done
	kill -KILL "$pid" 2>/dev/null || true
	# Not this shell's child when it was started in a subshell.
	wait "$pid" 2>/dev/null || true
	return 0
}

redis_stop_all() {
	local pid
	_redis_client_stop
	for pid in "${REDIS_PIDS[@]}"; do
		_redis_stop_one "$pid"
	done
	REDIS_PIDS=()
	REDIS_SOCKS=()
}

rcli() {
	if [ $# -gt 0 ] && [ -n "$RCLI_PID" ] && [ "$REDIS_SOCK" = "$RCLI_SOCK" ]; then
		_rcli_conn "$@"
		return
	fi
	redis-cli -s "$REDIS_SOCK" "$@"
}

# redis_client: from now on this test's rcli on REDIS_SOCK goes through
# one connection, kept by one python3 (resp.py: what redis-cli prints,
# byte for byte, without a process a command), for a suite that sends
# many; redis_stop_all ends it.  (rcli on another server's socket, or
# with no arguments, its commands on stdin, still runs redis-cli.)
# Through two fifos of this test's, gone once opened (a server may
# outlive the test: one for a file's tests).
RCLI_PID=
redis_client() {
	local d=${BATS_TEST_TMPDIR:-$REDIS_DIR}/rcli.$BASHPID
	mkfifo "$d.in" "$d.out" || return 1
	python3 "$BATS_TEST_DIRNAME/resp.py" "$REDIS_SOCK" <"$d.in" >"$d.out" 3>&- &
	RCLI_PID=$!
	exec {RCLI_IN}>"$d.in" {RCLI_OUT}<"$d.out"
	RCLI_SOCK=$REDIS_SOCK
	rm -f "$d.in" "$d.out"
}

# _rcli_conn ARGS...: one command through redis_client's connection
# (-x first: the last argument is stdin, as redis-cli -x takes it).
# Lengths in bytes (LC_ALL=C), as resp.py counts them; a NUL between
# two parts of the output.
_rcli_conn() {
	local LC_ALL=C a k i len out
	if [ "${1:-}" = -x ]; then
		shift
		IFS= read -r -d '' a || :
		set -- "$@" "$a"
	fi
	{
		printf '%d\n' $#
		for a; do
			printf '%d\n%s' "${#a}" "$a"
		done
	} >&"$RCLI_IN" || return 1
	IFS= read -r k <&"$RCLI_OUT" || return 1
	[ "$k" != - ] || return 1
	for ((i = 0; i < k; i++)); do
		[ "$i" -eq 0 ] || printf '\0'
		IFS= read -r len <&"$RCLI_OUT" || return 1
		out=
		[ "$len" -eq 0 ] || IFS= read -r -d '' -N "$len" out <&"$RCLI_OUT"
		printf '%s' "$out"
	done
}

_redis_client_stop() {
	[ -n "$RCLI_PID" ] || return 0
	exec {RCLI_IN}>&- {RCLI_OUT}<&-
	kill "$RCLI_PID" 2>/dev/null
	wait "$RCLI_PID" 2>/dev/null
	RCLI_PID=
}

redis_load_library() {
	# -x: the library is the last argument, read from stdin.
	rcli -x FUNCTION LOAD REPLACE <"$REDIS_LIBRARY"
}

mount2() {
	statefs_mount -o "store=unix:$REDIS_SOCK" "$@" || return 1
	A=$MNT
	statefs_mount -o "store=unix:$REDIS_SOCK" "$@" || return 1
	B=$MNT
}

mount3() {
	mount2 "$@" || return 1
	statefs_mount -o "store=unix:$REDIS_SOCK" "$@" || return 1
	C=$MNT
}

# sync(1) with files fsyncs each (open read-only, fsync(2), close), and
# says which failed: the same calls as a python3 of them, at a fifth of
# the cost of its start.
fsyncdir() {
	timeout 20 sync -- "$@"
}
