#!/usr/bin/env bash
# What the shared store's transitions cannot go below on this machine.
#
#   scripts/bench/redis_floor.sh [CHILDREN] [CALLS] [ROUNDS]
#
# Two floors under the Functions library's cost (scripts/bench/redis_fcall.sh
# measures that cost itself):
#
# 1. The commands alone.  On a tenant of 10 parents holding CHILDREN
#    children (default 100000) one call each of sfs_create (a new child),
#    sfs_publish (20 bytes), sfs_rename (to the next parent, the same
#    name) and sfs_unlink (there) is traced with MONITOR; the lines tagged
#    [0 lua] after each FCALL are the Redis commands that call made.
#    scripts/bench/floor_lua.py turns them into a second Functions
#    library, "floor", whose floor_create, floor_publish, floor_rename and
#    floor_unlink issue exactly those commands in a straight line with no
#    logic, only the per-call names substituted (op id, the parents, child
#    name, child inode), on keys of their own ("floor:{...", populated with CHILDREN
#    children the same way), so each call makes new keys as the real one
#    does and never changes the real tenant.  Generated from the trace, it
#    follows the library as it changes.  Then ROUNDS times (default 3),
#    CALLS (default 5000) calls of each real function and of its floor,
#    one batch beside the other, pipelined as redis_fcall.sh does
#    (redis-cli --pipe): usec_per_call of FCALL (INFO commandstats) and
#    the main thread's CPU per call (INFO cpu).  What the library adds to
#    its commands (checks, encoding, Lua) is the difference.
#
# 2. One request.  The round trip and the main thread's CPU of one
#    request from one client, unpipelined (redis-benchmark -c 1, CALLS x 5
#    requests a test: PING, which runs PING_INLINE and PING_MBULK, so
#    twice as many, and GET of a 3-byte value), once a round,
#    and pipelined 16 deep (-P 16) for comparison: the time per request
#    (1e6 / redis-benchmark's rps; unpipelined, the round trip as the
#    client sees it), and INFO cpu over the requests counted by INFO
#    commandstats.  An unpipelined transition pays at least this, on top
#    of its commands.
#
# Starts its own redis-server on a unix socket in a temporary directory
# (stopped on exit); FLOOR_LUA names a file to keep the generated library
# in.  As root it runs under SCHED_FIFO (chrt), as in
# redis_fcall.sh.  Prints per round:
#   round N: create LIB_WALL/LIB_CPU alone CMDS_WALL/CMDS_CPU (SHARE%) ...
#   round N: one request: PING RTT/CPU GET RTT/CPU; pipelined -P 16: ...
# (us per call or request) and, for scripts/bench/run.sh, lines
#   tsv <TAB> floor <TAB> 0 <TAB> ROUND <TAB> WHAT <TAB> A <TAB> B
# (fl_create_lib / fl_create_cmds ...: usec_per_call and CPU per call;
# rtt_ping / rtt_get / p16_ping / p16_get: us per request and CPU per
# request).  `make bench` runs it after redis_fcall.sh (BENCH_FLOOR).
set -eu
shopt -s lastpipe # run_batch at the end of a pipe sets variables

cd "$(dirname "$0")/../.."
children=${1:-100000}
calls=${2:-5000}
rounds=${3:-3}
requests=$((calls * 5))

dir=$(mktemp -d "${TMPDIR:-/tmp}/statefs-floor.XXXXXX")
pid=""
mon=""
# shellcheck source=scripts/bench/redis_bench.bash
. scripts/bench/redis_bench.bash
cleanup() {
	bench_reap "$mon"
	bench_reap "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT
rt=$(bench_rt)
# shellcheck disable=SC2086 # $rt: a command and its words, or nothing
bench_redis_start $rt
bench_tenant
FM='floor:{statefs}:meta'
FT='floor:{statefs.t1}:t'

# bench NAME TEST [OPTIONS]: redis-benchmark of one client, one test;
# sets NAME_us (us per request, 1e6 / its requests per second: with one
# client and no pipeline the round trip; PING: the mean of its two tests) and
# NAME_cpu (main-thread CPU per request counted by INFO commandstats).
bench() {
	local name=$1 test=$2 c0 c1 lat n
	shift 2
	R CONFIG RESETSTAT >/dev/null
	c0=$(cpu)
	lat=$(redis-benchmark -s "$dir/r.sock" -c 1 -n "$requests" -t "$test" --csv "$@" |
		tr -d '"' | awk -F, '$1 != "test" && $2 > 0 { s += 1e6 / $2; n++ }
			END { if (n) printf "%.1f", s / n }')
	c1=$(cpu)
	n=$(calls_of "$test")
	printf -v "${name}_us" '%s' "${lat:--}"
	printf -v "${name}_cpu" '%s' "$(awk -v a="$c0" -v b="$c1" -v n="${n:-0}" \
		'BEGIN { if (n > 0) printf "%.1f", (b - a) * 1e6 / n; else print "-" }')"
}
share() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "-" }'; }

# Parents are inodes 19..28; children get 29, 30, ...
echo "populating: $children children in 10 parents"
awk -v n="$children" -v M="$M" -v T="$T" -v I=$I 'BEGIN {
	for (i = 0; i < n; i++)
		printf "FCALL sfs_create 2 %s %s %s - - %d pop%d 0 0 420 1\n", M, T, I, 19 + i % 10, i }' | pipe

# The trace: one create of a new child in parent 19, a publication to
# it, its unlink, each as redis_fcall.sh calls them, under MONITOR.
redis-cli -s "$dir/r.sock" MONITOR >"$dir/monitor.txt" & # not R: $! is redis-cli
mon=$!
for _ in $(seq 200); do
	R CLIENT LIST | grep -q 'cmd=monitor' && break
	sleep 0.05
done
name=zqname0
cre=$(R FCALL sfs_create 2 "$M" "$T" "$I" zqop.c "" 19 "$name" 0 0 420 1)
ino=$(R HGET 'statefs:{statefs.t1}:l:19' "$name")
pub=$(R FCALL sfs_publish 2 "$M" "$T" "$I" zqop.p "" "$ino" replace "" content-000000000000)
# Its rename to the next parent under the same name, then its unlink there.
ren=$(R FCALL sfs_rename 3 "$M" "$T" "$T" "$I" zqop.r "" 19 "$name" 20 "$name" 0)
unl=$(R FCALL sfs_unlink 2 "$M" "$T" "$I" zqop.u "" 20 "$name")
R ECHO zqtrace-end >/dev/null
for _ in $(seq 200); do
	grep -q zqtrace-end "$dir/monitor.txt" && break
	sleep 0.05
done
bench_reap "$mon"
mon=""
for r in "$cre" "$pub" "$ren" "$unl"; do
	if [ "$(printf '%s\n' "$r" | head -1)" != OK ]; then
		echo "redis_floor: a traced call failed: $r" >&2
		exit 1
	fi
done
/usr/bin/python3 scripts/bench/floor_lua.py "$dir/monitor.txt" zqop "$name" 19 "$ino" 20 \
	sfs_create "$cre" sfs_publish "$pub" sfs_rename "$ren" sfs_unlink "$unl" >"$dir/floor.lua"
R -x FUNCTION LOAD REPLACE <"$dir/floor.lua" >/dev/null
if [ -n "${FLOOR_LUA:-}" ]; then
	cp "$dir/floor.lua" "$FLOOR_LUA"
fi
echo "traced at $children children: $(awk '/^-- sfs_/ { printf "%s%s %s commands", n++ ? ", " : "", $2, $3 }' "$dir/floor.lua" | tr -d :)"

# The floor's own keys, populated the same way (inodes 29, 30, ...).
awk -v n="$children" -v M="$FM" -v T="$FT" 'BEGIN {
	for (i = 0; i < n; i++)
		printf "FCALL floor_create 2 %s %s fpop.%d %d pop%d %d\n", M, T, i, 19 + i % 10, i, 29 + i }' | pipe
next=$((30 + children)) # the traced create took 29 + CHILDREN
fnext=$((29 + children))
R SET 'key:__rand_int__' xxx >/dev/null

echo "us per call: usec_per_call (wall inside the command) / CPU of the main thread${rt:+ (server under $rt)};"
echo "\"alone\": the same commands issued by the floor library (its share of the real call's usec_per_call)"
tsv=""
row() { tsv="$tsv$(printf 'tsv\tfloor\t0\t%s\t%s\t%s\t%s' "$1" "$2" "$3" "$4")"$'\n'; }
for r in $(seq "$rounds"); do
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v r="$r" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_create 2 %s %s %s c%d.%d - %d r%dn%d 0 0 420 1\n", M, T, I, r, i, 19 + i % 10, r, i }' |
		run_batch create
	awk -v n="$calls" -v M="$FM" -v T="$FT" -v r="$r" -v b="$fnext" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL floor_create 2 %s %s c%d.%d %d r%dn%d %d\n", M, T, r, i, 19 + i % 10, r, i, b + i }' |
		run_batch fcreate
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v r="$r" -v b="$next" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_publish 2 %s %s %s w%d.%d - %d replace - content-%012d\n", M, T, I, r, i, b + i, i }' |
		run_batch publish
	awk -v n="$calls" -v M="$FM" -v T="$FT" -v r="$r" -v b="$fnext" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL floor_publish 2 %s %s w%d.%d %d r%dn%d %d\n", M, T, r, i, 19 + i % 10, r, i, b + i }' |
		run_batch fpublish
	# Each child to the next parent (19..28, around), then unlinked there.
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v r="$r" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_rename 3 %s %s %s %s m%d.%d - %d r%dn%d %d r%dn%d 0\n", M, T, T, I, r, i, 19 + i % 10, r, i, 19 + (i + 1) % 10, r, i }' |
		run_batch rename
	awk -v n="$calls" -v M="$FM" -v T="$FT" -v r="$r" -v b="$fnext" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL floor_rename 2 %s %s m%d.%d %d r%dn%d %d %d\n", M, T, r, i, 19 + i % 10, r, i, b + i, 19 + (i + 1) % 10 }' |
		run_batch frename
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v r="$r" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_unlink 2 %s %s %s u%d.%d - %d r%dn%d\n", M, T, I, r, i, 19 + (i + 1) % 10, r, i }' |
		run_batch unlink
	awk -v n="$calls" -v M="$FM" -v T="$FT" -v r="$r" -v b="$fnext" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL floor_unlink 2 %s %s u%d.%d %d r%dn%d %d %d\n", M, T, r, i, 19 + i % 10, r, i, b + i, 19 + (i + 1) % 10 }' |
		run_batch funlink
	next=$((next + calls))
	fnext=$((fnext + calls))
	bench ping ping
	bench get get
	bench pping ping -P 16
	bench pget get -P 16
	echo "round $r: create $create_wall/$create_cpu alone $fcreate_wall/$fcreate_cpu" \
		"($(share "$fcreate_wall" "$create_wall")) publish $publish_wall/$publish_cpu" \
		"alone $fpublish_wall/$fpublish_cpu ($(share "$fpublish_wall" "$publish_wall"))" \
		"rename $rename_wall/$rename_cpu alone $frename_wall/$frename_cpu" \
		"($(share "$frename_wall" "$rename_wall"))" \
		"unlink $unlink_wall/$unlink_cpu alone $funlink_wall/$funlink_cpu" \
		"($(share "$funlink_wall" "$unlink_wall"))"
	echo "round $r: one request (round trip/CPU, $requests from one client):" \
		"PING $ping_us/$ping_cpu GET $get_us/$get_cpu;" \
		"pipelined -P 16: PING $pping_us/$pping_cpu GET $pget_us/$pget_cpu"
	for f in create publish rename unlink; do
		eval "row $r fl_${f}_lib \"\$${f}_wall\" \"\$${f}_cpu\""
		eval "row $r fl_${f}_cmds \"\$f${f}_wall\" \"\$f${f}_cpu\""
	done
	row "$r" rtt_ping "$ping_us" "$ping_cpu"
	row "$r" rtt_get "$get_us" "$get_cpu"
	row "$r" p16_ping "$pping_us" "$pping_cpu"
	row "$r" p16_get "$pget_us" "$pget_cpu"
done
n=$(R FCALL_RO sfs_stats 2 "$M" "$T" "$I" - - | awk 'NR > 3 && $0 == "children" { getline; print }')
fl=$(R HLEN 'floor:{statefs.t1}:l:19')
echo "children left: $n (expected $children); floor parent 19: $fl entries" \
	"(expected $((children / 10))); load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s' "$tsv"
