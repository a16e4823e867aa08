#!/usr/bin/env bash
# The shared store on a Redis Cluster: how evenly the tenants spread over
# the primaries, what a transition costs each shard's main thread, and
# the ceiling of a fleet of N shards computed from that cost.
#
#   scripts/bench/cluster.sh [TENANTS] [OPS]     (make bench-cluster)
#   scripts/bench/cluster.sh --selftest [TENANTS]
#
# Starts its own cluster of 3 primaries and 3 replicas on free loopback
# ports (tests/bats/cluster_helpers.bash, the bats suites' own: no
# persistence, a temporary directory, every node stopped on exit), with
# the library (build/gen/statefs.lua) on every primary, mounts statefs
# on it (-o store=cluster://SEEDS,store_layout=tenant: each tenant's
# call touches one slot) and makes TENANTS (default 300) tenants, each
# with one parent and OPS (default 4) creates and unlinks of a child.
# A mount that fails ends the run with one line saying so.
#
# --selftest mounts nothing: it drives, through one `redis-cli -c`, an
# FCALL of a tiny function of its own (an HSET and an XADD on the
# tenant's slot, as a transition appends to its tenant's log) for each
# of TENANTS hash tags {statefs.tN} (N = 10, 20, ...: a tenant and its
# special files then one parent take ten inode numbers), OPS times each,
# so that the statistics below can be checked without a mount.
#
# Prints, from INFO commandstats and INFO cpu of each primary over the
# workload: its slots, its FCALLs and their share of all (the target:
# each between 25% and 42%), its XADDs (transitions) and its main
# thread's CPU (used_cpu_sys_main_thread + used_cpu_user_main_thread) per
# transition; the spread of the tenants' hash tags over the primaries
# (CLUSTER KEYSLOT); and the ceiling of N shards from the per-shard cost.
# This is a 2-core machine: it cannot run many shards at once, so the
# fleet's aggregate is computed, not measured.
set -euo pipefail
cd "$(dirname "$0")/../.."

selftest=0
if [ "${1:-}" = --selftest ]; then
	selftest=1
	shift
fi
tenants=${1:-300}
ops=${2:-4}
bin=build/statefs
REDIS_LIBRARY=${REDIS_LIBRARY:-build/gen/statefs.lua}

dir=$(mktemp -d "${TMPDIR:-/tmp}/statefs-cluster.XXXXXX")
mnt=
REDIS_PIDS=()
cleanup() {
	set +e
	if [ -n "$mnt" ] && mountpoint -q "$mnt" 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
	fi
	[ -n "${spid:-}" ] && wait "$spid" 2>/dev/null
	local p
	# (A node killed already, by a failed start, is waited for too.)
	for p in "${REDIS_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT

# What cluster_helpers.bash takes from the bats helpers.
fail() { echo "cluster.sh: $*" >&2; return 1; }
proc_alive() { kill -0 "$1" 2>/dev/null; }
statefs_sleep() { sleep "$1"; }
# shellcheck source=tests/bats/cluster_helpers.bash
source tests/bats/cluster_helpers.bash

BATS_TEST_TMPDIR=$dir cluster_start 3 1 >/dev/null
primaries=("${CLUSTER_PORTS[@]:0:3}")
echo "cluster: primaries ${primaries[*]}, replicas ${CLUSTER_PORTS[*]:3}"

# stat PORT: "FCALLS XADDS CPU_SECONDS" of that primary so far.
stat() {
	{
		ccli "$1" INFO commandstats
		ccli "$1" INFO cpu
	} | tr -d '\r' | awk -F'[:=,]' '
		/^cmdstat_fcall:/ { f = $3 }
		/^cmdstat_xadd:/ { x = $3 }
		/^used_cpu_(sys|user)_main_thread:/ { c += $2 }
		END { printf "%d %d %.6f\n", f, x, c }'
}

# nslots PORT: how many slots that primary serves.
nslots() {
	ccli "$1" CLUSTER NODES | tr -d '\r' | awk '$3 ~ /myself/ {
		for (i = 9; i <= NF; i++) {
			if ($i ~ /^\[/) continue
			n = split($i, r, "-")
			s += (n > 1 ? r[2] - r[1] + 1 : 1)
		}
		print s + 0 }'
}

# The spread of TENANTS hash tags over the primaries, one redis-cli for
# every CLUSTER KEYSLOT; prints "PORT COUNT" lines.
spread() {
	local p
	for p in "${primaries[@]}"; do
		ccli "$p" CLUSTER NODES | tr -d '\r' | awk '$3 ~ /myself/ {
			for (i = 9; i <= NF; i++) {
				if ($i ~ /^\[/) continue
				n = split($i, r, "-")
				print r[1], (n > 1 ? r[2] : r[1]), "'"$p"'"
			}
		}'
	done >"$dir/ranges"
	awk '{ print "CLUSTER KEYSLOT " $0 }' "$dir/tags" | ccli "${primaries[0]}" |
		tr -d '\r' | awk -v R="$dir/ranges" '
		BEGIN { while ((getline l < R) > 0) { split(l, f, " "); lo[++n] = f[1]; hi[n] = f[2]; po[n] = f[3] } }
		{ for (i = 1; i <= n; i++) if ($1 >= lo[i] && $1 <= hi[i]) c[po[i]]++ }
		END { for (p in c) print p, c[p] }'
}

declare -A before
for p in "${primaries[@]}"; do
	before[$p]=$(stat "$p")
done

if [ "$selftest" = 1 ]; then
	for ((t = 0; t < tenants; t++)); do
		echo "{statefs.t$((10 + 10 * t))}"
	done >"$dir/tags"
	lib='#!lua name=clusterbench
redis.register_function("bench_touch", function(keys, args)
	redis.call("HSET", keys[1], "n", args[1])
	redis.call("XADD", keys[2], "*", "n", args[1])
	return 1
end)'
	for p in "${primaries[@]}"; do
		printf '%s' "$lib" | ccli "$p" -x FUNCTION LOAD REPLACE >/dev/null
	done
	for p in "${primaries[@]}"; do
		before[$p]=$(stat "$p")
	done
	# One redis-cli -c: each command goes to the primary of its slot.
	awk -v ops="$ops" '{ for (i = 0; i < ops; i++) printf "FCALL bench_touch 2 %s:t %s:log %d\n", $0, $0, i }' \
		"$dir/tags" | ccli "${primaries[0]}" -c >"$dir/replies"
	# (redis-cli -c says where it was redirected: those lines are no reply.)
	bad=$(grep -v '^-> Redirected' "$dir/replies" | grep -vcx 1 || :)
	[ "$bad" -eq 0 ] || {
		echo "cluster.sh: $bad FCALLs of the self test did not answer 1" >&2
		exit 1
	}
	echo "self test: $((tenants * ops)) FCALLs of bench_touch (an HSET and an XADD each) on $tenants hash tags, no mount"
else
	[ -x "$bin" ] || { echo "cluster.sh: no $bin (run make)" >&2; exit 1; }
	cluster_load_library
	for p in "${primaries[@]}"; do
		before[$p]=$(stat "$p")
	done
	mnt=$dir/mnt
	mkdir "$mnt"
	"$bin" -f -o "store=cluster://$CLUSTER_SEEDS,store_layout=tenant" "$mnt" \
		</dev/null >"$dir/statefs.log" 2>&1 &
	spid=$!
	for ((i = 0; i < 200; i++)); do
		mountpoint -q "$mnt" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.05
	done
	if ! mountpoint -q "$mnt"; then
		echo "cluster.sh: statefs did not mount on the cluster (-o store=cluster://$CLUSTER_SEEDS,store_layout=tenant): $(tail -n 1 "$dir/statefs.log")" >&2
		exit 1
	fi
	python3 - "$mnt" "$tenants" "$ops" <<'EOF'
import os, sys
root, n, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for t in range(n):
    p = os.path.join(root, "t%d" % t, "p")
    os.makedirs(p)
    for i in range(ops):
        f = os.path.join(p, "c%d" % i)
        open(f, "w").close()
        os.unlink(f)
EOF
	# The tenants' hash tags as the store made them: each {PREFIX.tN}
	# of the keys of every primary.
	for p in "${primaries[@]}"; do
		ccli "$p" --scan
	done | sed -n 's/^[^{]*\({[^}]*\.t[0-9]*}\).*/\1/p' | sort -u >"$dir/tags"
	echo "statefs: $tenants tenants, one parent and $ops creates and unlinks each, $(wc -l <"$dir/tags") tenant hash tags in the store"
fi

echo
echo "the $(wc -l <"$dir/tags") tenant hash tags over the primaries (CLUSTER KEYSLOT):"
spread | sort -n | awk '{ printf "  primary %s: %d tenants\n", $1, $2 }'

echo
printf '%-8s %6s %8s %7s %8s %10s %14s %s\n' primary slots fcalls share xadds cpu_ms us/transition target
for p in "${primaries[@]}"; do
	echo "$p $(nslots "$p") ${before[$p]} $(stat "$p")"
done | awk -v lo=25 -v hi=42 '
	{ port[NR] = $1; sl[NR] = $2; f[NR] = $6 - $3; x[NR] = $7 - $4; c[NR] = $8 - $5; F += f[NR] }
	END {
		if (F == 0) { print "no FCALL reached the primaries"; exit 1 }
		for (i = 1; i <= NR; i++) {
			sh = 100 * f[i] / F
			us = x[i] ? c[i] * 1e6 / x[i] : 0
			met = (sh >= lo && sh <= hi) ? "met" : "not met"
			printf "%-8s %6d %8d %6.1f%% %8d %10.1f %14.1f %s\n", port[i], sl[i], f[i], sh, x[i], c[i] * 1e3, us, met
			if (sh > smax) smax = sh
			if (x[i]) { cs += us; n++ }
		}
		if (!n) { print "no XADD reached the primaries: no cost per transition"; exit 1 }
		cost = cs / n
		printf "\nmean main-thread CPU per transition: %.1f us, so one shard tops out near %.0f transitions/s (one core each)\n", cost, 1e6 / cost
		printf "the busiest primary took %.1f%% of the FCALLs (an even share: %.1f%%)\n", smax, 100 / NR
		print "\nceiling of a fleet of N shards, computed from the per-shard cost (this"
		print "2-core machine cannot run many shards at once, so the aggregate is"
		print "computed, not measured), the busiest shard bound at the same imbalance:"
		imb = smax / (100 / NR)
		for (k = 3; k <= 48; k *= 2)
			printf "  %2d shards: %9.0f transitions/s\n", k, k * (1e6 / cost) / imb
	}'
