#!/usr/bin/env bash
# What idle mounts cost Redis, and what a mount that uses little holds:
# a mount follows the tenants it uses (redis/use.c, -o follow_idle).
#
#   scripts/bench/mounts.sh [TRANSITIONS] [TENANTS] [ROUNDS]
#
# Starts its own redis-server on a unix socket (stopped on exit, its
# mounts unmounted), makes a busy tenant and 16 others, then for 1, 4
# and 16 mounts attached (one busy, the others idle, each having used
# one of the other tenants) runs TRANSITIONS (default 2000) creates and
# unlinks in the busy tenant on the busy mount, three times: the idle
# mounts with follow_idle=0 (every tenant followed: what every mount did
# before), with follow_idle=2 (past it: each follows nothing), and
# following every tenant with follow_gather=0.002 (each reads the busy
# tenant at most every 2 ms).
# Prints Redis's main-thread CPU (INFO cpu used_cpu_*_main_thread) per
# transition (an entry appended to a tenant's log: INFO commandstats
# XADD), the median of ROUNDS (default 3) runs, and the ratio to 1
# mount (a ratio within one run: the machine's load moves every
# absolute number).  Then makes TENANTS (default 1000)
# tenants of 10 children each and prints the RSS of a mount that used 1
# of them, with follow_idle=0 and after follow_idle.  As root (mounts).
set -eu
cd "$(dirname "$0")/../.."
n=${1:-2000}
tenants=${2:-1000}
rounds=${3:-3}
bin=build/statefs

dir=$(mktemp -d "${TMPDIR:-/tmp}/statefs-mounts.XXXXXX")
pid=""
mnts=()
seq=0
# shellcheck source=scripts/bench/redis_bench.bash
. scripts/bench/redis_bench.bash
cleanup() {
	for m in "${mnts[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true
	done
	bench_reap "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT
bench_redis_start

# mnt OPTS: a new mount, its path in $M.
mnt() {
	M="$dir/m$seq"
	seq=$((seq + 1))
	mkdir "$M"
	"$bin" -o "store=unix:$dir/r.sock,$1" "$M" 2>>"$dir/statefs.log"
	mnts+=("$M")
	for _ in $(seq 200); do
		mountpoint -q "$M" && return 0
		sleep 0.05
	done
	echo "mounts.sh: $M did not mount" >&2
	exit 1
}
umnt_idle() {
	local keep=("${mnts[0]}")
	for m in "${mnts[@]:1}"; do
		fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m"
	done
	mnts=("${keep[@]}")
}

# Redis's XADDs so far (its CPU: cpu, redis_bench.bash).
xadds() { calls_of xadd; }

mnt follow_idle=0
busy=$M
mkdir "$busy/b" "$busy/b/p"
for i in $(seq 16); do mkdir "$busy/o$i" "$busy/o$i/p"; : >"$busy/o$i/p/c"; done

# run: TRANSITIONS creates and unlinks in b/p; prints us per transition.
run() {
	local c0 x0 c1 x1
	sleep 0.5
	c0=$(cpu)
	x0=$(xadds)
	python3 - "$busy/b/p" "$n" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n // 2):
    f = os.path.join(d, "c%d" % i)
    open(f, "w").close()
    os.unlink(f)
EOF
	c1=$(cpu)
	x1=$(xadds)
	echo "$c0 $c1 $x0 $x1" | awk '{ printf "%.1f %d\n", ($2 - $1) * 1e6 / ($4 - $3), $4 - $3 }'
}

echo "# mounts idle transitions us_per_transition(before:follow_idle=0) us_per_transition(after:follow_idle=2) us_per_transition(following:follow_idle=0,follow_gather=0.002)"
for k in 1 4 16; do
	out=()
	for opts in follow_idle=0 follow_idle=2 follow_idle=0,follow_gather=0.002; do
		umnt_idle
		for i in $(seq $((k - 1))); do
			mnt "$opts"
			ls "$M/o$i/p" >/dev/null
		done
		# Past follow_idle: the idle mounts follow nothing any more.
		[ "$opts" != follow_idle=2 ] || sleep 5
		us=$(for _ in $(seq "$rounds"); do run; done | sort -n | awk '{ v[NR] = $1; c = $2 } END { print v[int((NR + 1) / 2)], c }')
		count=${us#* }
		out+=("${us% *}")
	done
	echo "$k $((k - 1)) $count ${out[0]} ${out[1]} ${out[2]}" | tee -a "$dir/cpu.txt"
done
awk 'NR == 1 { b = $4; a = $5; g = $6 } NR > 1 { printf "ratio %d mounts / 1 mount: before %.2f, after %.2f, following with follow_gather %.2f\n", $1, $4 / b, $5 / a, $6 / g }' "$dir/cpu.txt"

umnt_idle
# TENANTS tenants of 10 children each, made through the busy mount.
python3 - "$busy" "$tenants" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for t in range(n):
    p = os.path.join(root, "m%d" % t, "p")
    os.makedirs(p)
    for c in range(10):
        with open(os.path.join(p, "c%d" % c), "w") as f:
            f.write("x" * 64)
EOF
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
pidof_mnt() { pgrep -f "statefs .*$1\$" | head -1; }
echo "# rss_kib of a mount that used 1 tenant of $tenants (10 children each)"
for idle in 0 2; do
	mnt "follow_idle=$idle"
	cat "$M/m7/p/c3" >/dev/null
	[ "$idle" = 0 ] || sleep $((idle + 3))
	sleep 1
	echo "follow_idle=$idle rss_kib $(rss "$(pidof_mnt "$M")")"
	fusermount3 -u "$M"
	unset 'mnts[${#mnts[@]}-1]'
done
