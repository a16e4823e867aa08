#!/bin/bash
# scripts/bench/run.sh - `make bench`: statefs against tmpfs and the FUSE
# floor (scripts/bench/floorfs.c), side by side in one run, and statefs
# on the shared store (a Redis-backed mount) beside them.
#
# For each filesystem, in turn: mount it under a fresh directory in /tmp
# and work in <fs>/t (for statefs a tenant: its directories are parents,
# their files children); at each population level (BENCH_LEVELS children
# in directories bg00000, bg00001, ... of 10,000) run the point phases of scripts/bench/loadgen.c
# with 1 and 2 threads (BENCH_OPS operations per thread and phase,
# BENCH_REPS times over: the report takes each phase's median), note
# the daemon's resident memory; after the last level, `ls -l` of a
# directory of BENCH_BIG children cold (caches dropped) and warm, its
# removal while a probe thread admits elsewhere, fs_mark, and for statefs
# a .snapshot of the whole population.  Every mount is undone on exit.
#
# The shared store ("redis" in the results): statefs mounted with
# -o store=unix:SOCK on a redis-server of its own (a unix socket in the
# work directory, no persistence), run at the levels up to
# BENCH_REDIS_MAX only (each create is a round trip to Redis), with the
# same point phases; around those of the first level, Redis's INFO
# commandstats and main-thread CPU (per FCALL: a transition).  At its
# last level a second mount of the same store joins ("redis2"): the
# point phases with two threads on each mount in one tenant, then the
# propagation delay from close() on the first mount to the second
# showing the publication (loadgen propagate: its inotify event, or
# polling stat(2) while the mount raises none for another mount's
# changes; the results say which), and to the second mount holding it
# (polling statx(2) with AT_STATX_FORCE_SYNC, past the kernel's caches).  The whole-directory phases are not
# run on it.  Last, scripts/bench/redis_fcall.sh (the Functions library
# alone, pipelined: BENCH_FCALL="CHILDREN CALLS ROUNDS"), then
# scripts/bench/redis_floor.sh (what a transition cannot go below: the
# library's commands alone, one request's round trip and Redis CPU;
# BENCH_FLOOR="CHILDREN CALLS ROUNDS"), then scripts/bench/lua_stages.sh
# (where one sfs_create's time goes, stage by stage, and what a step of
# Redis's Lua costs; its lines are kept, not tabled), then
# scripts/bench/redis_instr.sh (the instructions Redis spends on one call
# of each transition, counted by callgrind: a figure the load does not
# move).
#
# Output: build/bench/results.tsv (every figure: filesystem, population,
# threads, what, and one or two numbers: ops and seconds for a phase),
# build/bench/report.md
# (the tables), build/bench/bench.png (ops/s against population),
# build/bench/redis_fcall.txt, build/bench/redis_floor.txt,
# build/bench/lua_stages.txt, build/bench/redis_instr.txt.  A run
# worth keeping is reported in docs/bench/DATE.md, its chart beside it
# as docs/bench/DATE.png.
#
#   BENCH_LEVELS="1000 10000 100000 1000000" BENCH_OPS=5000 BENCH_REPS=3
#   BENCH_BIG=100000 BENCH_REDIS_MAX=10000 BENCH_PROP=1000
#   BENCH_FCALL="100000 5000 3" BENCH_FLOOR="100000 5000 3"
#   BENCH_QUICK=1: a reduced run (a few minutes): levels 1000 10000,
#   1000 operations, BIG 10000, 300 propagations, BENCH_FCALL and
#   BENCH_FLOOR "10000 2000 1"; any variable set explicitly still wins.
set -euo pipefail
cd "$(dirname "$0")/../.."

B=build/bench
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	LEVELS=${BENCH_LEVELS:-"1000 10000"}
	OPS=${BENCH_OPS:-1000}
	BIG=${BENCH_BIG:-10000}
	PROP=${BENCH_PROP:-300}
	FCALL=${BENCH_FCALL:-"10000 2000 1"}
	FLOOR=${BENCH_FLOOR:-"10000 2000 1"}
else
	LEVELS=${BENCH_LEVELS:-"1000 10000 100000 1000000"}
	OPS=${BENCH_OPS:-5000}
	BIG=${BENCH_BIG:-100000}
	PROP=${BENCH_PROP:-1000}
	FCALL=${BENCH_FCALL:-"100000 5000 3"}
	FLOOR=${BENCH_FLOOR:-"100000 5000 3"}
fi
REPS=${BENCH_REPS:-3}
REDIS_MAX=${BENCH_REDIS_MAX:-10000}
W=$(mktemp -d /tmp/sb.XXXXXX) # short: fs_mark wants a path under 40 bytes
RES=$B/results.tsv
FINDFMT='%M %n %u %g %s %t %p\n'
PIDS=()
LIMITS=max_children=4000000,max_bytes=4294967296

cleanup() {
	for m in "$W"/statefs "$W"/floor "$W"/redis "$W"/redis2; do
		mountpoint -q "$m" 2>/dev/null && fuse_umount "$m" || true
	done
	mountpoint -q "$W/tmpfs" 2>/dev/null && umount "$W/tmpfs" || true
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

say() { printf '%s\n' "$*" >&2; }
now() { date +%s.%N; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
record() { printf '%s\n' "$*" | tr ' ' '\t' >>"$RES"; }

wait_mount() {
	for _ in $(seq 100); do
		mountpoint -q "$1" && return 0
		sleep 0.05
	done
	say "bench: $1 did not mount"
	exit 1
}

# fusermount3 -u, again while the mount is busy (a daemon's own thread
# may be in it for a moment after a run), lazily after 5 s.
fuse_umount() {
	for _ in $(seq 50); do
		fusermount3 -u "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	say "bench: $1 stayed busy; unmounting it lazily"
	fusermount3 -uz "$1"
}

# The shared store's redis-server: a unix socket in $W/rs, no
# persistence; R runs redis-cli on it.
redis_start() {
	mkdir -p "$W/rs"
	redis-server --unixsocket "$W/rs/r.sock" --unixsocketperm 700 --port 0 \
		--save '' --appendonly no --dir "$W/rs" --logfile "$W/rs/redis.log" \
		</dev/null >/dev/null 2>&1 &
	RPID=$!
	PIDS+=("$RPID")
	for _ in $(seq 200); do
		[ "$(R PING 2>/dev/null)" = PONG ] && return 0
		sleep 0.05
	done
	say "bench: redis-server did not answer (see $W/rs/redis.log)"
	exit 1
}
R() { redis-cli -s "$W/rs/r.sock" "$@"; }

# Redis's statistics over a part of the run: rstat_begin resets them;
# rstat_end WHAT LEVEL records the FCALLs since (calls, usec inside
# them) and the CPU seconds of Redis's main thread (us) over them.
rcpu() {
	R INFO cpu | awk -F: '/^used_cpu_(user|sys)_main_thread:/ { s += $2 }
		END { printf "%.6f", s }'
}
rstat_begin() {
	R CONFIG RESETSTAT >/dev/null
	RCPU0=$(rcpu)
}
rstat_end() {
	local calls usec c1
	c1=$(rcpu)
	read -r calls usec < <(R INFO commandstats | tr -d '\r' |
		sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),usec=\([0-9]*\),.*/\1 \2/p') || true
	record redis "$2" - "fcall_$1" "${calls:-0}" "${usec:-0}"
	record redis "$2" - "rcpu_$1" "${calls:-0}" \
		"$(echo "($c1 - $RCPU0) * 1000000" | bc -l)"
}

# mount_fs NAME: mounts it at $W/NAME; sets DPID to its daemon (or empty).
mount_fs() {
	mkdir -p "$W/$1"
	DPID=
	case $1 in
	tmpfs)
		mount -t tmpfs -o size=16g none "$W/tmpfs" ;;
	floor)
		"$B/floorfs" -f "$W/floor" & DPID=$!
		PIDS+=("$DPID")
		wait_mount "$W/floor" ;;
	statefs)
		build/statefs -f -o "$LIMITS" "$W/statefs" & DPID=$!
		PIDS+=("$DPID")
		wait_mount "$W/statefs" ;;
	redis)
		redis_start
		build/statefs -f -o "store=unix:$W/rs/r.sock" -o "$LIMITS" \
			"$W/redis" & DPID=$!
		PIDS+=("$DPID")
		wait_mount "$W/redis" ;;
	redis2)
		build/statefs -f -o "store=unix:$W/rs/r.sock" -o "$LIMITS" \
			"$W/redis2" & DPID=$!
		PIDS+=("$DPID")
		wait_mount "$W/redis2" ;;
	esac
}

umount_fs() {
	case $1 in
	tmpfs) umount "$W/tmpfs" ;;
	*) fuse_umount "$W/$1"; wait "$DPID" 2>/dev/null || true ;;
	esac
	if [ "$1" = redis ]; then
		kill "$RPID" 2>/dev/null || true
		wait "$RPID" 2>/dev/null || true
	fi
}

# count_requests FS DIR: FUSE requests per operation of each point phase
# (1 thread, 1000 operations), from the kernel's fuse_request_send
# tracepoint on this mount's connection, split by the phases' start and
# end times (the trace clock set to CLOCK_MONOTONIC, as loadgen's).
count_requests() {
	local fs=$1 d=$2 t=/sys/kernel/tracing dev out
	[ -d $t/events/fuse ] || mount -t tracefs nodev $t 2>/dev/null || true
	[ -d $t/events/fuse ] || { say "bench: no fuse tracepoint"; return 0; }
	dev=$(stat -c %d "$d")
	echo mono >$t/trace_clock
	echo 32768 >$t/buffer_size_kb
	echo >$t/trace
	echo 1 >$t/events/fuse/fuse_request_send/enable
	out=$("$B/loadgen" point "$d" 1 1000)
	echo 0 >$t/events/fuse/fuse_request_send/enable
	echo "$out" | while read -r _ phase _t ops _s a b; do
		n=$(awk -v a="$a" -v b="$b" -v c="connection $dev " '
			index($0, c) { for (i = 1; i <= NF; i++)
				if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = $i + 0; break }
				if (ts >= a && ts <= b) n++ }
			END { print n + 0 }' $t/trace)
		record "$fs" 0 1 "req_$phase" "$ops" "$n"
	done
	echo >$t/trace
}

# Seconds a command takes (its output discarded).
timed() {
	local a b
	a=$(now)
	"$@" >/dev/null
	b=$(now)
	echo "$b - $a" | bc -l
}

# Two mounts of the shared store at population LEVEL: the point phases
# with two threads on each (one tenant, parents of their own), then the
# propagation delay from the first mount to the second.
run_two_mounts() {
	local lvl=$1 pid1=$DPID
	say "bench: redis: a second mount, two threads on each; propagation"
	mount_fs redis2
	rstat_begin
	for _ in $(seq "$REPS"); do
		"$B/loadgen" point "$W/redis/t" 2 "$OPS" "$W/redis2/t" |
		while read -r _ phase threads ops secs _; do
			record redis2 "$lvl" "$threads" "$phase" "$ops" "$secs"
		done
	done
	rstat_end two "$lvl"
	# What the second mount shows (its inotify event, else stat(2)),
	# then what it holds whatever the kernel caches (statx(2) with
	# AT_STATX_FORCE_SYNC).
	# shellcheck disable=SC2046 # the six words of its line
	record redis "$lvl" 1 $("$B/loadgen" propagate "$W/redis/t/prop" \
		"$W/redis2/t/prop" "$PROP")
	# shellcheck disable=SC2046
	record redis "$lvl" 1 $("$B/loadgen" propagate "$W/redis/t/prop2" \
		"$W/redis2/t/prop2" "$PROP" sync)
	umount_fs redis2
	DPID=$pid1
}

run_fs() {
	local fs=$1 d prev=0 lvl t rss0 out levels=$LEVELS first=1
	if [ "$fs" = redis ]; then
		levels=$(echo "$LEVELS" | tr ' ' '\n' |
			awk -v m="$REDIS_MAX" '$1 + 0 <= m + 0' | tr '\n' ' ')
		[ -n "$levels" ] || levels=$(echo "$LEVELS" | awk '{ print $1 }')
	fi
	mount_fs "$fs"
	d=$W/$fs/t
	mkdir "$d"
	[ -n "$DPID" ] && rss0=$(rss_kb "$DPID") || rss0=0
	record "$fs" 0 - rss_kb "$rss0" -
	[ "$fs" = tmpfs ] || count_requests "$fs" "$d"
	for lvl in $levels; do
		say "bench: $fs: population $lvl"
		"$B/loadgen" populate "$d" bg "$prev" $((lvl - prev)) 10000 >/dev/null
		prev=$lvl
		sync
		[ -n "$DPID" ] && record "$fs" "$lvl" - rss_kb "$(rss_kb "$DPID")" -
		[ "$fs" = redis ] && [ "$first" = 1 ] && rstat_begin
		for _ in $(seq "$REPS"); do
			for t in 1 2; do
				"$B/loadgen" point "$d" "$t" "$OPS" |
				while read -r _ phase threads ops secs _; do
					record "$fs" "$lvl" "$threads" "$phase" "$ops" "$secs"
				done
			done
		done
		[ "$fs" = redis ] && [ "$first" = 1 ] && rstat_end one "$lvl"
		first=0
	done
	if [ "$fs" = redis ]; then
		run_two_mounts "$prev"
		umount_fs "$fs"
		return 0
	fi

	say "bench: $fs: ls -l of $BIG children, its removal, fs_mark"
	"$B/loadgen" populate "$d" big 0 "$BIG" "$BIG" >/dev/null
	sync
	echo 3 >/proc/sys/vm/drop_caches
	record "$fs" "$prev" 1 ls_cold 1 "$(timed ls -l "$d/big00000")"
	record "$fs" "$prev" 1 ls_warm 1 "$(timed ls -l "$d/big00000")"
	# The same listing with every entry's attributes but without the two
	# extended attributes ls -l asks of each file (docs/bench/2026-11-30.md).
	sync
	echo 3 >/proc/sys/vm/drop_caches
	record "$fs" "$prev" 1 find_cold 1 "$(timed find "$d/big00000" -printf "$FINDFMT")"
	record "$fs" "$prev" 1 find_warm 1 "$(timed find "$d/big00000" -printf "$FINDFMT")"
	"$B/loadgen" leave "$d/big00000" "$d/probe" |
	while read -r what name _calls _p50 p99 max; do
		case $what in
		leave) record "$fs" "$prev" 1 leave_ms 1 "$name" ;;
		probe) record "$fs" "$prev" 1 "probe_${name}_us" "$p99" "$max" ;;
		esac
	done
	# The same removal with nothing of it in the kernel's caches.
	"$B/loadgen" populate "$d" big "$BIG" "$BIG" "$BIG" >/dev/null
	sync
	echo 3 >/proc/sys/vm/drop_caches
	"$B/loadgen" leave "$d/big00001" "$d/probe2" |
	while read -r what name _; do
		if [ "$what" = leave ]; then
			record "$fs" "$prev" 1 leave_cold_ms 1 "$name"
		fi
	done
	for t in 1 2; do
		(cd "$W" && fs_mark -d "$d/fsm$t" -n 4000 -s 16 -S 0 -t "$t" -L 1) \
			>"$B/fs_mark-$fs-$t.log" 2>&1 ||
			say "bench: fs_mark on $fs failed: see $B/fs_mark-$fs-$t.log"
		out=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 { print $4 }' \
			"$B/fs_mark-$fs-$t.log" | tail -1)
		record "$fs" "$prev" "$t" fs_mark_files_per_s 1 "${out:-0}"
	done
	if [ "$fs" = statefs ]; then
		record "$fs" "$prev" 1 snapshot_s 1 "$(timed cat "$W/statefs/t/.snapshot")"
		record "$fs" "$prev" 1 snapshot_lines 1 "$(wc -l <"$W/statefs/t/.snapshot")"
	fi
	umount_fs "$fs"
}

make -s all
mkdir -p "$B"
: >"$RES"
say "bench: results in $RES; work directory $W"
# How much a second thread can add on this machine at all.
record machine 0 2 spin 1 "$("$B/loadgen" spin | awk '{ print $2 }')"
for fs in tmpfs floor statefs redis; do
	run_fs "$fs"
done
say "bench: the Functions library alone (scripts/bench/redis_fcall.sh $FCALL)"
# shellcheck disable=SC2086 # three numbers
scripts/bench/redis_fcall.sh $FCALL >"$B/redis_fcall.txt" 2>&1 ||
	say "bench: redis_fcall.sh failed: see $B/redis_fcall.txt"
# "round N: create W/C publish W/C unlink W/C (calibration: HSET W/C,
# FCALL sfs_version W/C)": us per call, wall inside the command / CPU.
tr '(),:/' '     ' <"$B/redis_fcall.txt" | awk '$1 == "round" {
	printf "fcall\t0\t%s\tfc_create\t%s\t%s\n", $2, $4, $5
	printf "fcall\t0\t%s\tfc_publish\t%s\t%s\n", $2, $7, $8
	printf "fcall\t0\t%s\tfc_unlink\t%s\t%s\n", $2, $10, $11
	printf "fcall\t0\t%s\tfc_hset\t%s\t%s\n", $2, $14, $15
	printf "fcall\t0\t%s\tfc_version\t%s\t%s\n", $2, $18, $19 }' >>"$RES"
say "bench: what a transition cannot go below (scripts/bench/redis_floor.sh $FLOOR)"
# shellcheck disable=SC2086 # three numbers
scripts/bench/redis_floor.sh $FLOOR >"$B/redis_floor.txt" 2>&1 ||
	say "bench: redis_floor.sh failed: see $B/redis_floor.txt"
# Its "tsv" lines are results.tsv rows: floor 0 ROUND fl_create_lib
# WALL CPU, fl_create_cmds ..., rtt_ping US CPU, ... (us per call or
# request).
sed -n 's/^tsv\t//p' "$B/redis_floor.txt" >>"$RES"
say "bench: where a create's time goes (scripts/bench/lua_stages.sh)"
scripts/bench/lua_stages.sh >"$B/lua_stages.txt" 2>&1 ||
	say "bench: lua_stages.sh failed: see $B/lua_stages.txt"
say "bench: instructions a call (scripts/bench/redis_instr.sh)"
scripts/bench/redis_instr.sh >"$B/redis_instr.txt" 2>&1 ||
	say "bench: redis_instr.sh failed: see $B/redis_instr.txt"
scripts/bench/report.sh "$RES" "$B" "$LEVELS"
