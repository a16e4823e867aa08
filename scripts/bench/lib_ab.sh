#!/usr/bin/env bash
# scripts/bench/lib_ab.sh - two versions of the shared store side by
# side through a real mount: the same workload, one after the other in
# each round, so that the load of a shared machine weighs on both alike.
#
#   scripts/bench/lib_ab.sh A B [CHILDREN] [OPS] [ROUNDS]
#
# Each of A and B is one of:
#  - a library text (build/gen/statefs.lua, or one made of another
#    commit's redis/lua/*.lua) of the same LIBVERSION as build/statefs:
#    a mount keeps a loaded library of its own version, so it is loaded
#    into the fresh redis-server before build/statefs mounts it;
#  - a statefs binary (another commit's build/statefs), which mounts the
#    fresh redis-server with the library it carries;
#  - "embedded": build/statefs with no shared store, the reference.
# Each mount has a fresh redis-server (a unix socket in a temporary
# directory, no persistence).  A tenant of CHILDREN children (default
# 10000) is populated, then loadgen's point phases run with one thread,
# OPS operations each (default 2000), around CONFIG RESETSTAT and INFO:
# one line per version and round with each phase's ops/s and, on Redis,
# FCALL's usec_per_call, the main thread's CPU per FCALL (everything
# Redis did, the mount's follower included) and the XRANGEs the mount
# read the logs with.  Needs root (FUSE) and build/bench/loadgen (make
# bench builds it).
set -eu
cd "$(dirname "$0")/../.."

a=$1 b=$2 children=${3:-10000} ops=${4:-2000} rounds=${5:-1}
dir=$(mktemp -d "${TMPDIR:-/tmp}/statefs-ab.XXXXXX")
rpid="" mpid=""
# shellcheck source=scripts/bench/redis_bench.bash
. scripts/bench/redis_bench.bash
stop() {
	if [ -n "$mpid" ]; then
		fusermount3 -u "$dir/mnt" 2>/dev/null || true
		wait "$mpid" 2>/dev/null || true
		mpid=""
	fi
	bench_reap "$rpid"
	rpid=""
}
trap 'stop; rm -rf "$dir"' EXIT

one() { # one LABEL A-OR-B
	local bin=build/statefs store=() c0 c1 line calls usec xr
	mkdir -p "$dir/mnt"
	if [ "$2" != embedded ]; then
		bench_redis_start
		rpid=$pid
		if [ -x "$2" ] && [ ! -d "$2" ]; then
			bin=$2
		else
			R -x FUNCTION LOAD <"$2" >/dev/null
		fi
		store=(-o "store=unix:$dir/r.sock")
	fi
	"$bin" -f "${store[@]}" \
		-o max_children=4000000,max_bytes=4294967296 "$dir/mnt" \
		2>"$dir/statefs.log" &
	mpid=$!
	for _ in $(seq 200); do
		mountpoint -q "$dir/mnt" && break
		sleep 0.05
	done
	mkdir "$dir/mnt/t"
	build/bench/loadgen populate "$dir/mnt/t" bg 0 "$children" 10000 >/dev/null
	[ -z "$rpid" ] || R CONFIG RESETSTAT >/dev/null
	[ -z "$rpid" ] || c0=$(cpu)
	line=$(build/bench/loadgen point "$dir/mnt/t" 1 "$ops" |
		awk '{ printf "%s %.0f  ", $2, $4 / $5 }')
	if [ -z "$rpid" ]; then
		echo "$1: $line"
		stop
		rm -rf "$dir/mnt"
		return
	fi
	c1=$(cpu)
	read -r calls usec < <(R INFO commandstats | tr -d '\r' |
		sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),usec=\([0-9]*\),.*/\1 \2/p')
	xr=$(R INFO commandstats | tr -d '\r' |
		sed -n 's/^cmdstat_xrange:calls=\([0-9]*\),.*/\1/p')
	echo "$1: ${line}FCALLs $calls usec_per_call" \
		"$(awk -v u="$usec" -v n="$calls" 'BEGIN { printf "%.1f", u / n }')" \
		"cpu_per_fcall $(awk -v a="$c0" -v b="$c1" -v n="$calls" \
			'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')" \
		"XRANGEs ${xr:-0}"
	stop
	rm -rf "$dir/mnt"
}

for r in $(seq "$rounds"); do
	one "A round $r" "$a"
	one "B round $r" "$b"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
