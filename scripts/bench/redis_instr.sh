#!/usr/bin/env bash
# Instructions Redis spends on one call of the Functions library, counted
# by callgrind: a figure the machine's load does not move, where
# redis_fcall.sh's times move with it.  Several versions of the library
# can be counted side by side.
#
#   scripts/bench/redis_instr.sh [CHILDREN] [CALLS] [LIB...]
#
# For each LIB (default build/gen/statefs.lua), a redis-server of its own
# under valgrind --tool=callgrind, the library loaded, a tenant of 10
# parents holding CHILDREN children (default 2000), then one batch of
# CALLS (default 300) pipelined calls of each, each call with its own op
# id: sfs_create of new children, sfs_create of names that exist with
# EXCL (refused EEXIST), sfs_publish (20 bytes), sfs_rename to the next
# parent, sfs_unlink there, and as calibration a plain HSET and FCALL_RO
# sfs_version.  A figure is every instruction the server ran during its
# batch (reading the commands, the function, the replies: the counters
# zeroed before it and dumped after it, callgrind_control) divided by
# CALLS; the server's cron runs during the batch too, so two runs differ
# by a few thousand a call.  Prints one line per LIB:
#   instr LIB create N eexist N publish N rename N unlink N hset N version N
set -eu
shopt -s lastpipe # run at the end of a pipe adds to line
cd "$(dirname "$0")/../.."
children=${1:-2000}
calls=${2:-300}
shift 2 2>/dev/null || shift $#
libs=("$@")
[ ${#libs[@]} -gt 0 ] || libs=(build/gen/statefs.lua)
if ! command -v callgrind_control >/dev/null; then
	echo "redis_instr.sh: needs valgrind (callgrind_control)" >&2
	exit 1
fi

# shellcheck source=scripts/bench/redis_bench.bash
. scripts/bench/redis_bench.bash
bench_dir instr

# The instructions of one batch a call, in $instr (stdin: lines of
# words, as pipe takes):
# callgrind_control answers once the dump is written, the server's
# dumps numbered from 1 (dumps counts them).
count() {
	callgrind_control -z "$pid" >/dev/null 2>&1
	pipe
	callgrind_control -d "$pid" >/dev/null 2>&1
	dumps=$((dumps + 1))
	instr=$(awk -v c="$calls" '/^summary:/ { printf "%d", $2 / c; exit }' \
		"$dir/cg.out.$dumps")
}

for lib in "${libs[@]}"; do
	[ -f "$lib" ] || { echo "redis_instr.sh: no library $lib" >&2; exit 1; }
	bench_reap "$pid"
	rm -f "$dir"/cg.out*
	dumps=0
	bench_redis_start valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
		--dump-instr=no
	[ "$(R PING 2>/dev/null)" = PONG ] || { echo "redis_instr.sh: the server did not start" >&2; exit 1; }
	STATEFS_LUA=$lib bench_tenant
	awk -v n="$children" -v M="$M" -v T="$T" -v I=$I 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_create 2 %s %s %s - - %d pop%d 0 0 420 1\n", M, T, I, 19 + i % 10, i }' | pipe
	next=$((29 + children))
	line="instr $lib"
	run() { count; line="$line $1 $instr"; }
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_create 2 %s %s %s c%d - %d n%d 0 0 420 1\n", M, T, I, i, 19 + i % 10, i }' | run create
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_create 2 %s %s %s x%d - %d pop%d 0 0 420 1\n", M, T, I, i, 19 + i % 10, i }' | run eexist
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v b="$next" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_publish 2 %s %s %s w%d - %d replace - content-%012d\n", M, T, I, i, b + i, i }' | run publish
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_rename 3 %s %s %s %s m%d - %d n%d %d n%d 0\n", M, T, T, I, i, 19 + i % 10, i, 19 + (i + 1) % 10, i }' | run rename
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_unlink 2 %s %s %s u%d - %d n%d\n", M, T, I, i, 19 + (i + 1) % 10, i }' | run unlink
	awk -v n="$calls" 'BEGIN { for (i = 0; i < n; i++) printf "HSET bench:h f%d %d\n", i % 100, i }' | run hset
	awk -v n="$calls" 'BEGIN { for (i = 0; i < n; i++) printf "FCALL_RO sfs_version 0\n" }' | run version
	left=$(R FCALL_RO sfs_stats 2 "$M" "$T" "$I" - - | awk 'NR > 3 && $0 == "children" { getline; print }')
	[ "$left" = "$children" ] || { echo "redis_instr.sh: $left children left, not $children: a call failed" >&2; exit 1; }
	echo "$line"
done
