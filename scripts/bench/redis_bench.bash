# scripts/bench/redis_bench.bash - what the benchmarks of the shared store
# share (sourced by redis_fcall.sh, redis_floor.sh, mounts.sh and
# lib_ab.sh): a redis-server of their own on a unix socket in $dir, the
# populated tenant the library's calls run on, and how a batch of calls
# is piped to Redis and measured.
#
#   bench_rt              "chrt -f 10" as root when chrt is there, else
#                         nothing: a prefix that runs a server under
#                         SCHED_FIFO, so other processes do not preempt it
#                         in the middle of a call
#   bench_redis_start [PREFIX...]
#                         start redis-server (PREFIX before it) on
#                         $dir/r.sock, no persistence, its pid in $pid;
#                         returns once it answers PING
#   R ARGS...             redis-cli on that socket
#   bench_tenant          load the library (STATEFS_LUA, default
#                         build/gen/statefs.lua), make the store and its
#                         tenant "bench" of 10 parents (inodes 19..28);
#                         sets M, T and I (meta key, tenant key, instance)
#   pipe                  lines of words on stdin ("-": an empty word) to
#                         RESP, streamed by redis-cli --pipe
#   per_call CMD          usec_per_call of CMD in INFO commandstats
#   calls_of CMD          its calls
#   cpu                   the main thread's CPU seconds so far (user + system)
#   run_batch NAME [CMD]  pipe stdin after CONFIG RESETSTAT; sets NAME_wall
#                         (usec_per_call of CMD, default fcall) and NAME_cpu
#                         (main-thread CPU per call: $calls of them)
#   bench_reap PID        end background process PID (SIGTERM) and wait
#                         for it; nothing for an empty PID (a cleanup's)
#   bench_dir NAME        make $dir (statefs-NAME.XXXXXX in TMPDIR), empty
#                         $pid, and on exit stop the server and remove $dir
#                         (for a script with nothing else to clean up)

bench_dir() {
	dir=$(mktemp -d "${TMPDIR:-/tmp}/statefs-$1.XXXXXX")
	pid=""
	trap 'bench_reap "$pid"; rm -rf "$dir"' EXIT
}

bench_rt() {
	if [ "$(id -u)" -eq 0 ] && command -v chrt >/dev/null 2>&1; then
		echo "chrt -f 10"
	fi
}

R() { redis-cli -s "$dir/r.sock" "$@"; }

bench_reap() {
	[ -n "$1" ] || return 0
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

bench_redis_start() {
	rm -f "$dir/r.sock"
	"$@" redis-server --unixsocket "$dir/r.sock" --unixsocketperm 700 --port 0 \
		--save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" \
		</dev/null >/dev/null 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		[ "$(R PING 2>/dev/null)" = PONG ] && return 0
		sleep 0.05
	done
}

bench_tenant() {
	M='statefs:{statefs}:meta'
	T='statefs:{statefs.t1}:t'
	I=0123456789abcdef
	R -x FUNCTION LOAD REPLACE <"${STATEFS_LUA:-build/gen/statefs.lua}" >/dev/null
	R FCALL sfs_init 1 "$M" "" "" "" 1 "$I" 0 >/dev/null
	R FCALL sfs_mkdir_tenant 1 "$M" "$I" "" "" bench 0 0 493 >/dev/null
	for p in 0 1 2 3 4 5 6 7 8 9; do
		R FCALL sfs_join 2 "$M" "$T" "$I" "" "" "p$p" 0 0 493 >/dev/null
	done
}

# Lines of words to RESP, so redis-cli --pipe streams them.
resp() {
	awk '{ printf "*%d\r\n", NF
	       for (i = 1; i <= NF; i++) { w = $i; if (w == "-") w = ""
	               printf "$%d\r\n%s\r\n", length(w), w } }'
}
pipe() { resp | R --pipe >/dev/null; }
per_call() {
	R INFO commandstats | sed -n "s/^cmdstat_$1:.*usec_per_call=\([0-9.]*\).*/\1/p"
}
calls_of() {
	R INFO commandstats | sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p"
}
cpu() {
	R INFO cpu | awk -F: '/^used_cpu_(user|sys)_main_thread:/ { s += $2 }
		END { printf "%.6f", s }'
}
run_batch() {
	local c0 c1 stat=${2:-fcall}
	R CONFIG RESETSTAT >/dev/null
	c0=$(cpu)
	pipe
	c1=$(cpu)
	printf -v "$1_wall" '%s' "$(per_call "$stat")"
	printf -v "$1_cpu" '%s' "$(awk -v a="$c0" -v b="$c1" -v n="$calls" \
		'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')"
}
