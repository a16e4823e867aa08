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

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

REDIS_LIBRARY="${REDIS_LIBRARY:-$BATS_TEST_DIRNAME/../../build/gen/statefs.lua}"

REDIS_PIDS=()
REDIS_SOCKS=()

redis_start() {
	local dir pid i
	if ! command -v redis-server >/dev/null 2>&1; then
		fail "redis-server is not installed (scripts/deps.sh installs it)"
		return 1
	fi
	dir=$(mktemp -d "${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/redis.XXXXXX") || return 1
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
	for i in $(seq 400); do
		if [ -S "$dir/redis.sock" ] &&
			[ "$(redis-cli -s "$dir/redis.sock" PING 2>/dev/null)" = PONG ]; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		sleep 0.05
	done
	cat "$dir/redis.log" >&2 2>/dev/null
	fail "redis-server did not answer on $dir/redis.sock (args: $*)"
}

# Stop one server: SIGTERM, then SIGKILL if it is still there after 10 s.
_redis_stop_one() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
	# Not this shell's child when it was started in a subshell.
	wait "$pid" 2>/dev/null || true
	return 0
}

redis_stop_all() {
	local pid
	for pid in "${REDIS_PIDS[@]}"; do
		_redis_stop_one "$pid"
	done
	REDIS_PIDS=()
	REDIS_SOCKS=()
}

rcli() {
	redis-cli -s "$REDIS_SOCK" "$@"
}

redis_load_library() {
	rcli FUNCTION LOAD REPLACE "$(cat "$REDIS_LIBRARY")"
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

fsyncdir() {
	timeout 20 python3 -c '
import os, sys
for d in sys.argv[1:]:
    fd = os.open(d, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)' "$@"
}
