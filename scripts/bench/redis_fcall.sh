#!/usr/bin/env bash
# Redis CPU per transition of the shared store's Functions library
# (build/gen/statefs.lua, made of redis/lua/*.lua by `make`): usec_per_call
# of FCALL from INFO commandstats for sfs_create, sfs_publish and
# sfs_unlink on a populated tenant.
#
#   scripts/bench/redis_fcall.sh [CHILDREN] [CALLS] [ROUNDS]
#
# STATEFS_LUA names another library to load (default build/gen/statefs.lua),
# so two versions can be compared in one run.
#
# Starts its own redis-server on a unix socket in a temporary directory
# (stopped on exit), makes a tenant of 10 parents holding CHILDREN
# children (default 100000), then ROUNDS times (default 3) runs CALLS
# (default 5000) creates, publications (20 bytes) and unlinks of new
# children, pipelined so the server runs them back to back as under load,
# each op with its own op id (the at-most-once record is part of the
# cost).  Prints, per round, usec_per_call (wall time inside the command)
# and the CPU time of Redis's main thread per call (INFO cpu, which also
# counts reading the command and writing the reply, but not time the
# thread was preempted), and two calibration points taken alongside: a
# plain HSET sent by a client, and an FCALL of sfs_version (the cost of
# entering a function), since on a shared machine every number moves with
# the load.  As root the server runs under SCHED_FIFO (chrt), so other
# processes do not preempt it in the middle of a call.  `make bench` runs it
# last (scripts/bench/run.sh, BENCH_FCALL) and reports its medians.
set -eu
shopt -s lastpipe # run_batch at the end of a pipe sets variables

cd "$(dirname "$0")/../.."
children=${1:-100000}
calls=${2:-5000}
rounds=${3:-3}

# shellcheck source=scripts/bench/redis_bench.bash
. scripts/bench/redis_bench.bash
bench_dir fcall
rt=$(bench_rt)
# shellcheck disable=SC2086 # $rt: a command and its words, or nothing
bench_redis_start $rt
bench_tenant

# Parents are inodes 19..28; children get 29, 30, ...
echo "populating: $children children in 10 parents"
awk -v n="$children" -v M="$M" -v T="$T" -v I=$I 'BEGIN {
	for (i = 0; i < n; i++)
		printf "FCALL sfs_create 2 %s %s %s - - %d pop%d 0 0 420 1\n", M, T, I, 19 + i % 10, i }' | pipe
next=$((29 + children))

echo "usec per call: wall inside the command / CPU of the main thread${rt:+ (server under $rt)}"
for r in $(seq "$rounds"); do
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v r="$r" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_create 2 %s %s %s c%d.%d - %d r%dn%d 0 0 420 1\n", M, T, I, r, i, 19 + i % 10, r, i }' |
		run_batch create
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v r="$r" -v b="$next" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_publish 2 %s %s %s w%d.%d - %d replace - content-%012d\n", M, T, I, r, i, b + i, i }' |
		run_batch publish
	awk -v n="$calls" -v M="$M" -v T="$T" -v I=$I -v r="$r" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "FCALL sfs_unlink 2 %s %s %s u%d.%d - %d r%dn%d\n", M, T, I, r, i, 19 + i % 10, r, i }' |
		run_batch unlink
	awk -v n="$calls" 'BEGIN { for (i = 0; i < n; i++) printf "HSET bench:h f%d %d\n", i % 100, i }' |
		run_batch hset hset
	awk -v n="$calls" 'BEGIN { for (i = 0; i < n; i++) printf "FCALL_RO sfs_version 0\n" }' |
		run_batch version fcall_ro
	next=$((next + calls))
	echo "round $r: create $create_wall/$create_cpu publish $publish_wall/$publish_cpu" \
		"unlink $unlink_wall/$unlink_cpu (calibration: HSET $hset_wall/$hset_cpu," \
		"FCALL sfs_version $version_wall/$version_cpu)"
done
n=$(R FCALL_RO sfs_stats 2 "$M" "$T" "$I" - - | awk 'NR > 3 && $0 == "children" { getline; print }')
echo "children left: $n (expected $children); load: $(cut -d' ' -f1-3 /proc/loadavg)"
