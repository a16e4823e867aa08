#!/usr/bin/env bash
# Soak statefs under a mixed shell load and check that it gives back what
# it took.  Not part of `make test`: it runs in real time.
#
#   scripts/soak.sh [SECONDS] [MOUNTPOINT]
#       SECONDS      how long the load runs (default 60)
#       MOUNTPOINT   where to mount (default: a fresh mktemp directory;
#                    one that does not exist is created and removed after)
#
#   SOAK_WORKERS=N   load shells in parallel (default 4)
#   SOAK_INTERVAL=S  seconds between samples (default 5)
#   SOAK_LAPSE=S     seconds to wait after the load for leases to lapse
#                    (default 3; the mount's default_ttl is 2)
#   SOAK_WARMUP=N    publications made before the load (default 66000;
#                    0 skips the warm-up), see below
#
# It builds nothing: build/statefs must exist (run `make`).  It mounts
# `build/statefs -f -o default_ttl=2 MOUNTPOINT` in the background and runs,
# for SECONDS:
#   - SOAK_WORKERS shells, each picking at random among: create a child with
#     content (echo >), append (echo >>), renew it (touch), remove it (rm),
#     hard-link it to another parent (ln), move it to another parent (mv),
#     join a parent (mkdir), leave one (rmdir), set or clear a parent's
#     heartbeat lease (setfattr user.statefs.ttl, 0.5..2 s), beat it (touch
#     the parent; the beats are sparse, so some heartbeats lapse), read a
#     .stats, read a .snapshot.  Names come from bounded pools (3 tenants x
#     6 parents x 16 children), so the store's population stays bounded and
#     rejoins reuse the departed tombstones;
#   - one reader of MNT/.events (cat > /dev/null) open for the whole run.
# Warm-up: the store keeps the newest 65,536 event lines (about 9 MB), so
# its RSS rises until that ring is full, which a shell load takes a minute
# or more to do; that is not a leak.  Before the timed load one shell
# therefore makes SOAK_WARMUP publications (echo > one child, in a tenant
# removed afterwards; at most 60 s) to fill the ring, so the samples taken
# during the load compare like with like.
# One sample line is printed before the warm-up and every SOAK_INTERVAL
# seconds of the load: the daemon's VmRSS, its open descriptors and the
# .stats gauges.  After the load it waits SOAK_LAPSE seconds, takes a last
# sample, unmounts, waits for the daemon and prints a summary (RSS and fds
# first/last/max, RSS growth after warm-up, operations attempted and failed
# per kind) and a verdict:
#
#   soak: PASS               descriptors are back to the first sample's count
#                            and VmRSS grew by less than 10% between the
#                            second sample (after warm-up) and the last
#   soak: FAIL (reasons)     otherwise, or the daemon died or exited non-zero
#
# Exit status: 0 PASS, 1 FAIL, 2 could not run (usage, no binary, no mount).
# Whatever happens the load is stopped, the mount is unmounted and the
# daemon is waited for (trap EXIT).
# shellcheck disable=SC2317 # functions run from traps and through op()
set -u
export LC_ALL=C

usage() {
	echo "usage: scripts/soak.sh [SECONDS] [MOUNTPOINT]" >&2
	exit 2
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

DURATION=${1:-60}
MNT_ARG=${2:-}
WORKERS=${SOAK_WORKERS:-4}
INTERVAL=${SOAK_INTERVAL:-5}
LAPSE=${SOAK_LAPSE:-3}
WARMUP=${SOAK_WARMUP:-66000}
[ $# -le 2 ] || usage
if ! is_uint "$DURATION" || [ "$DURATION" -eq 0 ]; then usage; fi
if ! is_uint "$WORKERS" || [ "$WORKERS" -eq 0 ]; then
	echo "soak: bad SOAK_WORKERS=$WORKERS" >&2
	exit 2
fi
if ! is_uint "$INTERVAL" || [ "$INTERVAL" -eq 0 ]; then
	echo "soak: bad SOAK_INTERVAL=$INTERVAL" >&2
	exit 2
fi
if ! is_uint "$WARMUP"; then
	echo "soak: bad SOAK_WARMUP=$WARMUP" >&2
	exit 2
fi
if ! is_uint "$LAPSE"; then
	echo "soak: bad SOAK_LAPSE=$LAPSE" >&2
	exit 2
fi

# The mountpoint is relative to the caller's directory; the binary to the repo.
if [ -n "$MNT_ARG" ]; then
	MNT_ARG=$(realpath -m -- "$MNT_ARG") || exit 2
fi
cd "$(dirname "$0")/.." || exit 2
BIN=$PWD/build/statefs
if [ ! -x "$BIN" ]; then
	echo "soak: $BIN is missing; build it first (make). This script builds nothing." >&2
	exit 2
fi

# Every background job in its own process group: a Ctrl-C reaches only this
# shell (whose trap tears down in order), and a worker is stopped together
# with whatever command it is running.
set -m

WORK=$(mktemp -d "${TMPDIR:-/tmp}/statefs-soak.XXXXXX") || exit 2
MNT_CREATED=0
if [ -z "$MNT_ARG" ]; then
	MNT=$WORK/mnt
	mkdir "$MNT" || exit 2
	MNT_CREATED=1
else
	MNT=$MNT_ARG
	if mountpoint -q -- "$MNT" 2>/dev/null ||
	   awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; then
		echo "soak: $MNT is already a mount point; unmount it first" >&2
		rm -rf -- "$WORK"
		exit 2
	fi
	if [ ! -d "$MNT" ]; then
		mkdir -p -- "$MNT" || { rm -rf -- "$WORK"; exit 2; }
		MNT_CREATED=1
	fi
fi

DAEMON_PID=
DAEMON_RC=
READER_PID=
WORKER_PIDS=()
TORN_DOWN=0

# --- helpers ------------------------------------------------------------------

# now: NOW = the time in microseconds (no fork)
now() {
	NOW=${EPOCHREALTIME/[.,]/}
	NOW=$((10#$NOW))
}

sleep_us() {
	local us=$1
	[ "$us" -gt 0 ] || return 0
	sleep "$((us / 1000000)).$(printf '%06d' $((us % 1000000)))"
}

# alive PID: the process exists and is not a zombie waiting to be reaped
alive() {
	local line state
	[ -n "$1" ] || return 1
	read -r line 2>/dev/null <"/proc/$1/stat" || return 1
	state=${line##*) }
	state=${state%% *}
	[ "$state" != Z ] && [ "$state" != X ]
}

# wait_gone PID SECONDS: wait until PID has exited, at most SECONDS
wait_gone() {
	local pid=$1 end
	now
	end=$((NOW + $2 * 1000000))
	while alive "$pid"; do
		now
		[ "$NOW" -lt "$end" ] || return 1
		sleep 0.1
	done
	return 0
}

is_mounted() {
	awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts
}

# stop_group PID: end the process group PID leads (one of our jobs)
stop_group() {
	local pid=$1
	alive "$pid" || return 0
	kill -TERM -- "-$pid" 2>/dev/null
	wait_gone "$pid" 3 && return 0
	kill -KILL -- "-$pid" 2>/dev/null
	wait_gone "$pid" 3
}

stop_load() {
	local pid
	for pid in "${WORKER_PIDS[@]}"; do
		stop_group "$pid"
	done
	for pid in "${WORKER_PIDS[@]}"; do
		wait "$pid" 2>/dev/null
	done
	WORKER_PIDS=()
}

teardown() {
	[ "$TORN_DOWN" = 1 ] && return
	TORN_DOWN=1
	set +m # no "Terminated" notices for the jobs stopped here
	stop_load
	if [ -n "$READER_PID" ]; then
		stop_group "$READER_PID"
		wait "$READER_PID" 2>/dev/null
	fi
	if [ -n "$DAEMON_PID" ]; then
		local i
		for i in 1 2 3 4 5; do
			is_mounted || break
			fusermount3 -u "$MNT" 2>>"$WORK/unmount.err" && break
			sleep 1
		done
		if is_mounted; then
			echo "soak: $MNT is busy; unmounting lazily" >&2
			fusermount3 -uz "$MNT" 2>>"$WORK/unmount.err"
		fi
		if ! wait_gone "$DAEMON_PID" 15; then
			# A signal starts a drain; a second one ends its window at once.
			echo "soak: the daemon did not exit after the unmount; signalling it" >&2
			kill -TERM "$DAEMON_PID" 2>/dev/null
			sleep 1
			kill -TERM "$DAEMON_PID" 2>/dev/null
			wait_gone "$DAEMON_PID" 10 || kill -KILL "$DAEMON_PID" 2>/dev/null
		fi
		wait "$DAEMON_PID" 2>/dev/null
		DAEMON_RC=$?
		DAEMON_PID=
	fi
}

# on_exit: tear down if not done yet, then remove what this script made
on_exit() {
	teardown
	if ! is_mounted; then
		[ "$MNT_CREATED" = 1 ] && rmdir -- "$MNT" 2>/dev/null
		rm -rf -- "$WORK"
	else
		echo "soak: $MNT is still mounted; left $WORK in place" >&2
	fi
}

trap on_exit EXIT
trap 'echo "soak: interrupted" >&2; exit 130' INT
trap 'echo "soak: interrupted" >&2; exit 143' TERM HUP

# --- the load -----------------------------------------------------------------

TENANTS=(t0 t1 t2)
NPARENTS=6
NCHILDREN=16

# worker ID DEADLINE_US: run random operations until the deadline, then write
# "kind attempted failed" lines to $WORK/ops.ID
worker() {
	local id=$1 deadline=$2 n=0
	declare -A att=() fail=()
	RANDOM=$((id * 7919 + $$ % 1000))

	dump() {
		local k
		for k in "${!att[@]}"; do
			echo "$k ${att[$k]} ${fail[$k]:-0}"
		done >"$WORK/ops.$id"
	}
	trap 'dump; exit 0' TERM

	# op KIND COMMAND...: count one attempt, and a failure if it fails
	op() {
		local kind=$1
		shift
		att[$kind]=$((${att[$kind]:-0} + 1))
		"$@" </dev/null >/dev/null 2>&1 || fail[$kind]=$((${fail[$kind]:-0} + 1))
	}
	put() { echo "$2" >"$1"; }
	add() { echo "$2" >>"$1"; }

	local t p p2 c c2 dir r ttls=(0.5 1 1.5 2 0)
	while now && [ "$NOW" -lt "$deadline" ]; do
		n=$((n + 1))
		t=$MNT/${TENANTS[RANDOM % ${#TENANTS[@]}]}
		p=p$((RANDOM % NPARENTS))
		p2=p$((RANDOM % NPARENTS))
		c=c$((RANDOM % NCHILDREN))
		c2=c$((RANDOM % NCHILDREN))
		r=$((RANDOM % 100))
		if [ "$r" -lt 30 ]; then
			op create put "$t/$p/$c" "state w$id n$n $RANDOM$RANDOM"
		elif [ "$r" -lt 35 ]; then
			op append add "$t/$p/$c" "more w$id n$n"
		elif [ "$r" -lt 47 ]; then
			op renew touch -c "$t/$p/$c"
		elif [ "$r" -lt 56 ]; then
			op remove rm "$t/$p/$c"
		elif [ "$r" -lt 62 ]; then
			op link ln "$t/$p/$c" "$t/$p2/$c"
		elif [ "$r" -lt 68 ]; then
			op move mv -f "$t/$p/$c" "$t/$p2/$c2"
		elif [ "$r" -lt 77 ]; then
			op join mkdir "$t/$p"
		elif [ "$r" -lt 80 ]; then
			op leave rmdir "$t/$p"
		elif [ "$r" -lt 85 ]; then
			op heartbeat setfattr -n user.statefs.ttl \
				-v "${ttls[RANDOM % ${#ttls[@]}]}" "$t/$p"
		elif [ "$r" -lt 88 ]; then
			op beat touch "$t/$p"
		elif [ "$r" -lt 95 ]; then
			if [ $((RANDOM % 2)) = 0 ]; then dir=$MNT; else dir=$t; fi
			op stats cat "$dir/.stats"
		else
			if [ $((RANDOM % 2)) = 0 ]; then dir=$MNT; else dir=$t; fi
			op snapshot cat "$dir/.snapshot"
		fi
	done
	dump
}

# --- sampling -----------------------------------------------------------------

S_LABEL=()
S_RSS=()
S_FD=()
DAEMON_LOST=0

# sample LABEL: one line: daemon VmRSS, open fds, .stats gauges
sample() {
	local label=$1 rss='' fds='' k v g=""
	if alive "$DAEMON_PID"; then
		while read -r k v _; do
			[ "$k" = VmRSS: ] && rss=$v
		done <"/proc/$DAEMON_PID/status"
		# shellcheck disable=SC2012 # /proc/PID/fd names are numbers
		fds=$(ls "/proc/$DAEMON_PID/fd" 2>/dev/null | wc -l)
	fi
	if [ -z "$rss" ] || [ -z "$fds" ]; then
		DAEMON_LOST=1
		printf 'sample %-6s daemon gone\n' "$label"
		return 1
	fi
	while read -r k v; do
		case $k in
		tenants | parents | children | links | tombstones | bytes) g+=" $k=$v" ;;
		esac
	done < <(timeout 10 cat "$MNT/.stats" 2>/dev/null)
	[ -n "$g" ] || g=" (.stats unreadable)"
	S_LABEL+=("$label")
	S_RSS+=("$rss")
	S_FD+=("$fds")
	printf 'sample %-6s rss=%skB fds=%s%s\n' "$label" "$rss" "$fds" "$g"
}

# --- run ----------------------------------------------------------------------

"$BIN" -f -o default_ttl=2 "$MNT" >"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!

now
end=$((NOW + 10000000))
until is_mounted && [ -e "$MNT/.stats" ]; do
	now
	if ! alive "$DAEMON_PID" || [ "$NOW" -ge "$end" ]; then
		echo "soak: statefs did not mount at $MNT:" >&2
		sed 's/^/  /' "$WORK/daemon.log" >&2
		exit 2
	fi
	sleep 0.1
done

for t in "${TENANTS[@]}"; do
	mkdir "$MNT/$t" || exit 2
	for ((i = 0; i < NPARENTS; i++)); do
		mkdir "$MNT/$t/p$i" || exit 2
	done
done

echo "soak: statefs pid $DAEMON_PID at $MNT (default_ttl=2); load ${DURATION} s," \
	"$WORKERS workers, a sample every ${INTERVAL} s"

sample start || exit 1

cat "$MNT/.events" >/dev/null 2>"$WORK/reader.err" &
READER_PID=$!

if [ "$WARMUP" -gt 0 ]; then
	now
	w0=$NOW
	wend=$((w0 + 60000000))
	wn=0
	if mkdir "$MNT/warmup" && mkdir "$MNT/warmup/p"; then
		while [ "$wn" -lt "$WARMUP" ] && now && [ "$NOW" -lt "$wend" ]; do
			for ((j = 0; j < 1000; j++)); do
				echo "$wn" >"$MNT/warmup/p/c" 2>/dev/null
				wn=$((wn + 1))
			done
		done
		rmdir "$MNT/warmup/p" "$MNT/warmup"
	fi
	now
	echo "soak: warm-up: $wn publications in" \
		"$(awk -v us=$((NOW - w0)) 'BEGIN { printf "%.1f", us / 1e6 }') s"
fi

now
start=$NOW
deadline=$((start + DURATION * 1000000))
for ((i = 1; i <= WORKERS; i++)); do
	# (a worker's own stderr would only show bash's "Terminated" notices)
	worker "$i" "$deadline" 2>/dev/null &
	WORKER_PIDS+=($!)
done

k=1
while :; do
	at=$((k * INTERVAL))
	[ "$at" -lt "$DURATION" ] || at=$DURATION
	now
	sleep_us $((start + at * 1000000 - NOW))
	sample "${at}s" || break
	[ "$at" -lt "$DURATION" ] || break
	k=$((k + 1))
done

# The workers stop by themselves at the deadline; a worker stuck in an
# operation gets a few seconds more, then it is stopped.
for pid in "${WORKER_PIDS[@]}"; do
	wait_gone "$pid" 10 || break
done
stop_load
now
load_s=$(awk -v us=$((NOW - start)) 'BEGIN { printf "%.1f", us / 1e6 }')

READER_OK=0
alive "$READER_PID" && READER_OK=1

if [ "$DAEMON_LOST" = 0 ]; then
	sleep "$LAPSE"
	sample "+${LAPSE}s" # after the load: leases lapsed
fi
# What the store's counters say, and whether every lease lapsed.
STATS=$(timeout 10 cat "$MNT/.stats" 2>/dev/null)
COUNTERS=$(awk '$1 ~ /^(admissions|removals|expiries|joins|leaves|children|parents|tombstones)$/ {
	printf "%s%s=%s", sep, $1, $2; sep = " " }' <<<"$STATS")
LEFT_CHILDREN=$(awk '$1 == "children" { print $2 }' <<<"$STATS")

teardown

# --- summary ------------------------------------------------------------------

n=${#S_RSS[@]}
echo "soak: summary"
reasons=()
if [ "$n" -ge 1 ]; then
	rss_first=${S_RSS[0]} rss_last=${S_RSS[n - 1]} rss_max=0
	fd_first=${S_FD[0]} fd_last=${S_FD[n - 1]} fd_max=0
	for ((i = 0; i < n; i++)); do
		[ "${S_RSS[i]}" -gt "$rss_max" ] && rss_max=${S_RSS[i]}
		[ "${S_FD[i]}" -gt "$fd_max" ] && fd_max=${S_FD[i]}
	done
	echo "  rss kB:   first $rss_first  last $rss_last  max $rss_max  (first is before the warm-up)"
	if [ "$n" -ge 2 ]; then
		rss_warm=${S_RSS[1]}
		growth=$(awk -v a="$rss_warm" -v b="$rss_last" 'BEGIN { printf "%+.1f", (b - a) * 100 / a }')
		echo "  rss growth after warm-up: ${S_LABEL[1]} ${rss_warm} kB -> ${S_LABEL[n - 1]} ${rss_last} kB (${growth}%)"
		if ! awk -v g="$growth" 'BEGIN { exit !(g < 10) }'; then
			reasons+=("RSS grew ${growth}% after warm-up (limit 10%)")
		fi
	else
		reasons+=("fewer than two samples")
	fi
	echo "  fds:      first $fd_first  last $fd_last  max $fd_max"
	[ "$fd_last" = "$fd_first" ] ||
		reasons+=("open fds $fd_first at the start, $fd_last at the end")
else
	reasons+=("no samples")
fi
[ "$DAEMON_LOST" = 0 ] || reasons+=("the daemon died during the run")

echo "  operations attempted (failed) in ${load_s} s by $WORKERS workers:"
missing=0
for ((i = 1; i <= WORKERS; i++)); do
	[ -s "$WORK/ops.$i" ] || missing=$((missing + 1))
done
cat "$WORK"/ops.* 2>/dev/null | awk -v s="$load_s" '
	{ a[$1] += $2; f[$1] += $3; ta += $2; tf += $3 }
	END {
		split("create append renew remove link move join leave heartbeat beat stats snapshot", order, " ")
		for (i = 1; i in order; i++) {
			k = order[i]
			if (k in a)
				printf "    %-10s %8d (%d)\n", k, a[k], f[k]
		}
		printf "    %-10s %8d (%d), %.0f/s\n", "total", ta, tf, (s > 0 ? ta / s : 0)
	}'
[ "$missing" = 0 ] || echo "    ($missing workers left no counts)"
echo "    (renew is touch -c, which does not report a child that is gone)"
[ -n "$COUNTERS" ] && echo "  store at the end: $COUNTERS"
if [ -n "$LEFT_CHILDREN" ] && [ "$LEFT_CHILDREN" != 0 ]; then
	echo "  note: $LEFT_CHILDREN children still live ${LAPSE} s after the load (default_ttl 2)"
fi
if [ "$READER_OK" = 1 ]; then
	echo "  .events reader: open for the whole load"
else
	echo "  .events reader: ended early: $(head -c 200 "$WORK/reader.err" 2>/dev/null)"
fi
echo "  daemon exit status: ${DAEMON_RC:-unknown}"
if [ -n "$DAEMON_RC" ] && [ "$DAEMON_RC" != 0 ]; then
	reasons+=("the daemon exited with status $DAEMON_RC")
fi
if [ -s "$WORK/daemon.log" ]; then
	echo "  daemon output (last 10 lines):"
	tail -n 10 "$WORK/daemon.log" | sed 's/^/    /'
fi

if [ ${#reasons[@]} -eq 0 ]; then
	echo "soak: PASS"
	exit 0
fi
msg=$(printf '%s; ' "${reasons[@]}")
echo "soak: FAIL (${msg%; })"
exit 1
