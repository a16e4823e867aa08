#!/usr/bin/env bash
# Run every statefs test and print one verdict.
#
#   scripts/run-tests.sh           every test (make test)
#   scripts/run-tests.sh --check   the quick set of make check: the unit
#                                  binaries but the TSan ones, the seam,
#                                  and the bats suites on the embedded
#                                  store but the slow ones (SLOW below)
#   scripts/run-tests.sh --cluster the shared store's group alone (the
#                                  files of step 3's shared store run),
#                                  on a Redis Cluster: STATEFS_STORE=cluster,
#                                  one 3+3 cluster a file, each mount
#                                  store=cluster://...,store_layout=tenant
#                                  (tests/bats/helpers.bash); make
#                                  test-cluster, not part of make test
#
# The tests, each a job:
#   1. each unit binary build/unit/test_* and build/unit/stress_store*
#      (cmocka: "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s), ...")
#   2. a 5 s smoke run of each libFuzzer target build/fuzz/fuzz_* from its
#      seed corpus (tests/fuzz/run.sh --smoke), and one of fuzz_shared on
#      a Redis Cluster (--cluster); each run is one test, passed when
#      libFuzzer exits 0
#   3. the end-to-end suites: each bats file on the embedded store, and
#      each that mounts through statefs_mount (it loads helpers.bash)
#      and does not choose its store itself again on a shared store
#      (STATEFS_STORE=redis: each mount a store of its own, a store_prefix
#      of its own on the file's redis-server), leaving
#      out the tests tagged embedded-only (# bats test_tags=embedded-only;
#      tests/README.md says why each) and those tagged store-free (they
#      mount no store through statefs_mount: the shared store's run
#      would run them again unchanged).  One job per file and store, or
#      several for a suite of WIDE (below).
#   4. the seam between fs/ and the store (scripts/check-seam.sh): one
#      test, passed when it exits 0
#
# The jobs run STATEFS_TEST_JOBS at a time (GNU parallel; default one
# more than the cores), the longest first (ESTIMATE below), so that the
# run does not end with one long job alone.  The tests of one bats file
# run one after another, as bats runs them; a long suite of WIDE, whose
# tests are independent, is split into N jobs, each a copy of the file
# with every Nth test (bats_copy), so that no suite is much longer than
# the run's share of the others.  (Not bats --jobs: on this kind of
# machine its semaphore of files, flock, find and cat processes costs a
# third of a second of processor time a test, as much as the test's
# own bats and mount; a copy costs one bats start.)
#
# The run is bound by processor time, not by waits: every job shares
# two cores with two others, and what a test costs is mostly the
# processes it starts (a fork and exec is several milliseconds here,
# most of it the kernel's page tables).  So the helpers the tests
# share start as few as they can (tests/bats/assert.bash says how), and
# the jobs' processor time is what the run prints and what ESTIMATE is.
# Each job's output goes to a file of its own; the outputs are
# shown, and counted, in the order of the job list once all have run,
# then the ten slowest jobs (seconds run and seconds of processor time,
# from GNU parallel's job log, kept in build/run-tests.joblog) and the
# ten slowest bats tests (bats -T).  The last line is always "N passed,
# N failed"; the exit status is non-zero on any failure, including a
# unit binary that crashed or exited non-zero without a cmocka failure
# line, a skipped bats test (statefs tests never skip), a bats test that
# never reported, and bats itself failing.
#
# Run from anywhere; `make test` (`make check`) builds everything first.
set -u

cd "$(dirname "$0")/.." || exit 1

check=0
cluster=0
[ "${1:-}" = "--check" ] && check=1
[ "${1:-}" = "--cluster" ] && cluster=1

passed=0
failed=0

# The bats suites that take longest (a minute or more on a quiet 2-core
# machine, from bats -T): make check leaves them out, and the job list
# shows them first.
SLOW="leaks shared_faults multimount saturation concurrency permissions
lease_stress events drain leases shared_watch redis_functions shared
shared_tls cluster_harness cluster_faults"

# The suites split into N jobs (bats_copy): the long ones with many
# tests, each test with its own mounts and redis-servers under names of
# its own, nothing shared with the others but the machine, and no test
# that needs another to have run first.  A suite of one long test bounds
# the run whatever is done; a suite of many, split, does not.  Not
# parents.bats: two of its commands must run within a 0.3 s
# tombstone_ttl, which a machine loaded with more of the same misses.
WIDE="redis_functions:4 shared_damage:3 multimount:3 permissions:2 shares:2
drain:2 shared_faults:2 cluster_faults:2 concurrency:2 stats:2 shared:2 shared_watch:2
leases:2 events:2 children:2 tools:2 snapshot:2 tree:2"

# wide_of NAME: N for a suite of WIDE, 1 for any other, in $wide.
wide_of() {
	local w
	wide=1
	for w in $WIDE; do
		[ "${w%%:*}" = "$1" ] && wide=${w#*:} && return
	done
}

# What each job takes: seconds of processor time (user and system) of
# the whole suite on a store, or of the binary, on this 2-core machine:
# most measured (one_job's times, with the helpers and the split of
# now; a run of --check on a quiet machine, the others alone on a
# loaded one), the rest scaled from the bats -T times of a full run.
# A job that mostly waits counts its run time instead: shared_outcome
# (Redis asleep and stopped on the real clock) and saturation (one
# long test).  A split suite's jobs each take their share.  Only the
# proportions matter: the jobs start longest first, so that the run
# ends with short jobs, not with one long job alone; a job not listed
# counts as short.  A full run keeps every job's seconds in
# build/run-tests.times, the numbers to refresh this with.
ESTIMATE="
embedded  shared_outcome:160 redis_functions:156 saturation:80 snapshot:76
embedded  multimount:72 shared_damage:39 permissions:40 events:37 drain:36
embedded  concurrency:34 shared_faults:33 shared_watch:31 leases:23
embedded  tree:22 tools:21 children:20 install:18 shared:17 shares:16
embedded  watch:16 parents:14 capacity:12 stats:12 faults:11 links:11
embedded  cache:9 options:8 store_options:8 ownership:5 leaks:4
embedded  shared_tls:4 lease_stress:3 walks:3 cluster_harness:45
embedded  cluster_faults:26
redis     saturation:100 snapshot:94 events:85 concurrency:68 permissions:59
redis     tree:40 leases:38 install:32 children:29 tools:27 drain:27
redis     shares:26 parents:25 watch:25 capacity:18 links:18 cache:16
redis     stats:15 faults:14 options:10 leaks:7 ownership:6 walks:2
unit      test_snapshot_midway:23 stress_store.tsan:15 test_remote_ops.tsan:12
unit      test_mirror:12 test_remote_clock:11 test_faults:8 test_remote_ops:6
unit      stress_store:5 test_link:5 test_events:3 test_entry:2 test_fs:2
fuzz      fuzz_store:6 fuzz_shared:6 fuzz_layout:6
fuzz-cluster fuzz_shared:8
"

# (The job list is made with the shell's own string operations: a
# basename or a subshell a file and suite would cost seconds.)
slow_list=" $(echo $SLOW) "
is_slow() {
	case $slow_list in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

# suite_name FILE: NAME of .../NAME.bats, in $name.
suite_name() {
	name=${1##*/}
	name=${name%.bats}
}

# in_order FILE...: the files, the slow suites first, in SLOW's order.
in_order() {
	local s f name
	for s in $SLOW; do
		for f in "$@"; do
			suite_name "$f"
			[ "$name" = "$s" ] && echo "$f"
		done
	done
	for f in "$@"; do
		suite_name "$f"
		is_slow "$name" || echo "$f"
	done
}

has_tags=0
bats --help 2>&1 | grep -q -- '--filter-tags' && has_tags=1

# bats_copies STORE SRC N DROP: N copies of the bats file SRC, the Kth
# (K = 1..N) build/bats-STORE-K/NAME.bats (at the same depth as
# tests/bats, beside copies of its helpers, so that the suites' paths to
# the binary and to helpers.bash hold) with the Kth share of its tests:
# tests K, K+N, ...  DROP=1 also leaves out the tests tagged
# embedded-only or store-free (and, on a cluster, exact-ceilings).  A test left out becomes blank lines, with the comment
# lines just above it (its tags): every line that stays keeps its
# number, so what bats reports of a copy reads in the original.  Prints
# the job lines, "STORE COPY N".
bats_copies() {
	local store=$1 src=$2 n=$3 drop=$4 k
	for ((k = 1; k <= n; k++)); do
		if [ ! -d "build/bats-$store-$k" ]; then
			mkdir -p "build/bats-$store-$k"
			cp tests/bats/*.bash tests/bats/*.py "build/bats-$store-$k"/
		fi
	done
	awk -v pre="build/bats-$store-" -v base="${src##*/}" -v n="$n" -v drop="$drop" -v store="$store" '
		function put(k, text) {
			for (j = 1; j <= n; j++)
				printf "%s", (j == k || k == 0) ? text : blanks(text) >(pre j "/" base)
		}
		function blanks(text, b) {
			b = text
			gsub(/[^\n]/, "", b)
			return b
		}
		intest {
			put(owner, $0 "\n")
			if ($0 ~ /^}/) intest = 0
			next
		}
		/^#/ { held = held $0 "\n"; next }
		/^@test / {
			t++
			owner = (t - 1) % n + 1
			if (drop && held ~ /# bats test_tags=[^\n]*(embedded-only|store-free)/) owner = -1
			if (drop && store == "cluster" && held ~ /# bats test_tags=[^\n]*exact-ceilings/) owner = -1
			put(owner, held $0 "\n")
			held = ""
			intest = 1
			next
		}
		{ put(0, held $0 "\n"); held = "" }
		END {
			put(0, held)
			for (j = 1; j <= n; j++) print store, pre j "/" base, n
		}
	' "$src"
}

# suite_jobs STORE FILE...: the job lines of these bats files on STORE
# (embedded or redis), "STORE FILE N" (N: the jobs of a suite of WIDE,
# 1 for any other).  A suite of WIDE runs from copies (bats_copies);
# so does, on the shared store, a suite with embedded-only tests when
# bats has no --filter-tags (which otherwise leaves them out).
suite_jobs() {
	local store=$1 f name wide drop=0
	shift
	[ "$store" != embedded ] && [ "$has_tags" = 0 ] && drop=1
	for f in "$@"; do
		suite_name "$f"
		wide_of "$name"
		if [ "$wide" = 1 ] && [ "$drop" = 0 ]; then
			echo "$store $f 1"
		else
			bats_copies "$store" "$f" "$wide" "$drop"
		fi
	done
}

# redis_suites: the files of the shared store's run: those that mount
# through statefs_mount (they load helpers.bash) but choose their store
# themselves (shared.bats, multimount.bats, ... set STATEFS_STORE and
# start their own redis-servers: they ran in the embedded run already),
# and have a test that is neither embedded-only nor store-free.
redis_suites() {
	awk '
		FNR == 1 { if (f) verdict(); f = FILENAME; helpers = own = tests = eo = 0 }
		/^load helpers/ { helpers = 1 }
		/^STATEFS_STORE=/ { own = 1 }
		/^@test / { tests++ }
		/^# bats test_tags=.*(embedded-only|store-free)/ { eo++ }
		function verdict() { if (helpers && !own && tests > eo) print f }
		END { if (f) verdict() }
	' tests/bats/*.bats
}

# This run's files, and its mounts under their own directory, so the
# check for mounts left behind sees only this run's.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/statefs-test.XXXXXX") || exit 1
chmod 0755 "$run_tmp"
jobs_list=$run_tmp/jobs
# The tests' python3 is Debian's (scripts/deps.sh installs it), whatever
# comes first in PATH: a version manager's shim there costs seconds at
# every start, and the suites start thousands.
mkdir "$run_tmp/bin"
[ -x /usr/bin/python3 ] && ln -s /usr/bin/python3 "$run_tmp/bin/python3"
export PATH="$run_tmp/bin:$PATH"

# --- the job list: "KIND ARG N" lines ---------------------------------------------

if [ "$cluster" = 1 ]; then
	rm -rf build/bats-cluster-*
	# shellcheck disable=SC2046
	suite_jobs cluster $(in_order $(redis_suites)) >"$jobs_list"
else {
	# The binaries of today's sources only: one left in build/ by a
	# test file since removed is not a test any more.  The TSan ones,
	# the longest, first.
	for src in tests/unit/*/test_*.c tests/unit/stress/stress_store.c; do
		base=${src##*/}
		base=${base%.c}
		[ "$check" = 0 ] && [ -x "build/unit/$base.tsan" ] &&
			echo "unit build/unit/$base.tsan 1"
	done
	for src in tests/unit/*/test_*.c tests/unit/stress/stress_store.c; do
		base=${src##*/}
		base=${base%.c}
		[ -x "build/unit/$base" ] && echo "unit build/unit/$base 1"
	done
	if [ "$check" = 0 ]; then
		for bin in build/fuzz/fuzz_*; do
			[ -f "$bin" ] && [ -x "$bin" ] && echo "fuzz $bin 1"
		done
		[ -x build/fuzz/fuzz_shared ] &&
			echo "fuzz-cluster build/fuzz/fuzz_shared 1"
	fi
	if command -v bats >/dev/null 2>&1; then
		rm -rf build/bats-redis build/bats-embedded-* build/bats-redis-*
		embedded=()
		for f in $(in_order tests/bats/*.bats); do
			suite_name "$f"
			[ "$check" = 1 ] && is_slow "$name" && continue
			embedded+=("$f")
		done
		suite_jobs embedded "${embedded[@]}"
		if [ "$check" = 0 ]; then
			# shellcheck disable=SC2046
			suite_jobs redis $(in_order $(redis_suites))
		fi
	fi
} >"$jobs_list"
fi

[ "$cluster" = 1 ] || grep -q '^unit ' "$jobs_list" || {
	echo "*** no unit test binaries in build/unit (run make unit)"
	failed=$((failed + 1))
}
[ "$check" = 1 ] || [ "$cluster" = 1 ] || grep -q '^fuzz ' "$jobs_list" || {
	echo "*** no fuzz targets in build/fuzz (run make fuzz-build)"
	failed=$((failed + 1))
}
command -v bats >/dev/null 2>&1 || {
	echo "*** bats is not installed (scripts/deps.sh installs it)"
	failed=$((failed + 1))
}

# --- running them ---------------------------------------------------------------

# one_job N KIND ARG: job N's output in $run_tmp/N.out, its exit status
# in $run_tmp/N.rc, the processor time it took (user and system, in
# seconds, of every process it waited for) in $run_tmp/N.cpu.  A bats
# file's tests run one after another, each line of its TAP with the
# test's time (bats -T: "ok 3 NAME in 812ms").
one_job() {
	local n=$1 kind=$2 arg=$3 rc opts=(--tap -T)
	case $kind in
	unit)
		"$arg" ;;
	fuzz)
		tests/fuzz/run.sh --smoke 5 "$arg" ;;
	fuzz-cluster)
		# Without the store's drain with a window until its divergence
		# in the tenant layout is settled (tests/fuzz/README.md).
		FUZZ_SHARED_SKIP=store-drain \
			tests/fuzz/run.sh --smoke --cluster 5 "$arg" ;;
	embedded)
		TMPDIR="$run_tmp" bats "${opts[@]}" "$arg" ;;
	redis)
		[ "$has_tags" = 1 ] && opts+=(--filter-tags '!embedded-only,!store-free')
		STATEFS_STORE=redis TMPDIR="$run_tmp" bats "${opts[@]}" "$arg" ;;
	cluster)
		[ "$has_tags" = 1 ] && opts+=(--filter-tags '!embedded-only,!store-free,!exact-ceilings')
		STATEFS_STORE=cluster TMPDIR="$run_tmp" bats "${opts[@]}" "$arg" ;;
	esac >"$run_tmp/$n.out" 2>&1 </dev/null
	rc=$?
	echo "$rc" >"$run_tmp/$n.rc"
	# times: this shell's, then its children's, as "0m1.250s 0m0.310s"
	# (into a file: in a pipe it would be a subshell's, with no children).
	times >"$run_tmp/$n.times"
	awk 'NR == 2 {
			for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] }
			printf "%.1f\n", s
		}' "$run_tmp/$n.times" >"$run_tmp/$n.cpu"
	echo "... $kind $arg: exit $rc"
}
export -f one_job
export run_tmp has_tags

jobs=${STATEFS_TEST_JOBS:-$(($(nproc) + 1))}
if ! command -v parallel >/dev/null 2>&1; then
	echo "*** GNU parallel is not installed (scripts/deps.sh installs it)"
	failed=$((failed + 1))
else
	echo "=== $(wc -l <"$jobs_list") jobs, $jobs at a time"
	start=$(date +%s)
	# "N KIND ARG" lines, N the job's place in the list (its output's
	# name), the longest first: ESTIMATE's seconds for the job's kind and
	# name (the name of its file or binary, less .bats), over the shares
	# of its suite.
	awk -v est="$ESTIMATE" '
		BEGIN {
			nl = split(est, l, "\n")
			for (i = 1; i <= nl; i++) {
				nf = split(l[i], f, " ")
				for (j = 2; j <= nf; j++) {
					c = index(f[j], ":")
					e[f[1] " " substr(f[j], 1, c - 1)] = substr(f[j], c + 1)
				}
			}
		}
		{
			name = $2
			sub(/.*\//, "", name)
			sub(/\.bats$/, "", name)
			printf "%d %d %s %s\n", (e[$1 " " name] + 1) / $3, NR, $1, $2
		}' "$jobs_list" | sort -k1,1nr -k2,2n | cut -d' ' -f2- >"$run_tmp/order"
	parallel --will-cite --jobs "$jobs" --joblog "$run_tmp/joblog" \
		--colsep ' ' one_job {1} {2} {3} <"$run_tmp/order"
	echo "=== every job ran in $(($(date +%s) - start)) s"
fi

# --- counting -------------------------------------------------------------------

# tally_unit BIN OUT RC: a cmocka binary's verdict.
tally_unit() {
	local bin=$1 out=$2 rc=$3 p f
	p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$out" |
		awk '{ s += $1 } END { print s + 0 }')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s), listed below:.*/\1/p' "$out" |
		awk '{ s += $1 } END { print s + 0 }')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		# Crashed, a sanitizer report, or failed outside any test.
		if [ "$rc" -gt 128 ]; then
			echo "*** $bin: killed by signal $((rc - 128))"
		else
			echo "*** $bin: exit status $rc without a failed test"
		fi
		f=1
	elif [ "$rc" -eq 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		echo "*** $bin: no cmocka summary line"
		f=1
	fi
	echo "--- $bin: $p passed, $f failed"
	passed=$((passed + p))
	failed=$((failed + f))
}

# tally_bats NAME OUT RC: a bats run's verdict from its TAP output.
tally_bats() {
	local name=$1 out=$2 rc=$3 plan ok skipped notok f
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$out" | head -n 1)
	ok=$(grep -E '^ok [0-9]+' "$out" | grep -vcE '^ok [0-9]+.*# skip')
	skipped=$(grep -cE '^ok [0-9]+.*# skip' "$out")
	notok=$(grep -cE '^not ok [0-9]+' "$out")
	f=$((notok + skipped))
	if [ "$skipped" -gt 0 ]; then
		echo "*** bats $name: $skipped skipped test(s) count as failed"
	fi
	if [ -z "$plan" ]; then
		echo "*** bats $name: no TAP plan: bats did not run the file"
		f=$((f + 1))
	elif [ $((ok + notok + skipped)) -lt "$plan" ]; then
		echo "*** bats $name: $((plan - ok - notok - skipped)) planned test(s) never reported"
		f=$((f + plan - ok - notok - skipped))
	fi
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "*** bats $name: exit status $rc without a failed test"
		f=1
	fi
	echo "--- bats $name: $ok passed, $f failed"
	passed=$((passed + ok))
	failed=$((failed + f))
}

n=0
while read -r kind arg _; do
	n=$((n + 1))
	out=$run_tmp/$n.out
	rc=$(cat "$run_tmp/$n.rc" 2>/dev/null || echo 127)
	case $kind in
	unit)
		echo "=== $arg"
		cat "$out" 2>/dev/null
		tally_unit "$arg" "$out" "$rc" ;;
	fuzz | fuzz-cluster)
		[ "$kind" = fuzz-cluster ] && arg="$arg on a Redis Cluster"
		echo "=== $arg (smoke run)"
		cat "$out" 2>/dev/null
		if [ "$rc" -eq 0 ]; then
			echo "--- $arg: 1 passed, 0 failed"
			passed=$((passed + 1))
		else
			echo "--- $arg: 0 passed, 1 failed"
			failed=$((failed + 1))
		fi ;;
	embedded | redis | cluster)
		echo "=== bats $arg ($kind store)"
		cat "$out" 2>/dev/null
		tally_bats "$arg ($kind store)" "$out" "$rc" ;;
	esac
done <"$jobs_list"

# --- the slowest jobs ------------------------------------------------------------

# GNU parallel's job log: a header, then one line a job, tab-separated,
# its run time in seconds the fourth field and its command the last
# ("one_job N KIND ARG").  The longest bound the run: they are the ones
# to split or to start first (ESTIMATE), and a job whose processor time
# is far below its run time waits (sleeps, timeouts) more than it works.
# Every job's line is kept in build/run-tests.times (what ESTIMATE is
# made of), GNU parallel's log in build/run-tests.joblog.
if [ -s "$run_tmp/joblog" ]; then
	echo "=== the ten slowest jobs: seconds run, seconds of processor time, job"
	awk -F '\t' -v d="$run_tmp" 'NR > 1 {
			split($NF, c, " ")
			cpu = "?"
			f = d "/" c[2] ".cpu"
			if ((getline cpu <f) <= 0) cpu = "?"
			close(f)
			printf "%7.1f %7s  %s %s\n", $4, cpu, c[3], c[4]
		}' "$run_tmp/joblog" | sort -rn >"$run_tmp/times"
	head -n 10 "$run_tmp/times"
	if [ -d build ]; then
		cp "$run_tmp/joblog" build/run-tests.joblog
		cp "$run_tmp/times" build/run-tests.times
	fi
	echo "=== the ten slowest bats tests: seconds, suite (store), test"
	n=0
	while read -r kind arg _; do
		n=$((n + 1))
		case $kind in embedded | redis | cluster) ;; *) continue ;; esac
		suite_name "$arg"
		sed -n 's/^\(not \)\{0,1\}ok [0-9][0-9]* \(.*\) in \([0-9][0-9]*\)ms\( # skip.*\)\{0,1\}$/\3\t\2/p' \
			"$run_tmp/$n.out" 2>/dev/null |
			awk -F '\t' -v s="$name ($kind)" \
				'{ printf "%7.1f  %s  %s\n", $1 / 1000, s, $2 }'
	done <"$jobs_list" | sort -rn | head -n 10
fi

# --- the seam --------------------------------------------------------------------

if [ "$cluster" = 1 ]; then
	: # the seam is make test's
elif echo "=== scripts/check-seam.sh"; scripts/check-seam.sh; then
	echo "--- seam: 1 passed, 0 failed"
	passed=$((passed + 1))
else
	echo "--- seam: 0 passed, 1 failed"
	failed=$((failed + 1))
fi

# --- verdict ---------------------------------------------------------------------

left=$(awk -v d="$run_tmp/" '$3 ~ /^fuse/ && index($2, d) == 1' /proc/mounts | wc -l)
if [ "$left" -gt 0 ]; then
	echo "*** $left statefs test mount(s) left behind (see /proc/mounts)"
	failed=$((failed + 1))
else
	rm -rf "$run_tmp"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
