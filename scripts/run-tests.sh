#!/usr/bin/env bash
# Run every statefs test and print one verdict.
#
#   scripts/run-tests.sh           every test (make test)
#   scripts/run-tests.sh --check   the quick set of make check: the unit
#                                  binaries but the TSan ones, the seam,
#                                  and the bats suites on the embedded
#                                  store but the slow ones (SLOW below)
#
# The tests, each a job:
#   1. each unit binary build/unit/test_* and build/unit/stress_store*
#      (cmocka: "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s), ...")
#   2. a 5 s smoke run of each libFuzzer target build/fuzz/fuzz_* from its
#      seed corpus (tests/fuzz/run.sh --smoke); each target is one test,
#      passed when libFuzzer exits 0
#   3. the end-to-end suites: each bats file on the embedded store, and
#      each that mounts through statefs_mount (it loads helpers.bash)
#      and does not choose its store itself again on a shared store
#      (STATEFS_STORE=redis: each mount its own redis-server), leaving
#      out the tests tagged embedded-only (# bats test_tags=embedded-only;
#      tests/README.md says why each).  One job per file and store.
#   4. the seam between fs/ and the store (scripts/check-seam.sh): one
#      test, passed when it exits 0
#
# The jobs run STATEFS_TEST_JOBS at a time (GNU parallel; default one
# more than the cores), the longest first (ESTIMATE below), so that the
# run does not end with one long job alone.  The tests of one bats file
# run one after another, as bats runs them, but in the long suites of
# WIDE, whose tests are independent: those run several at once (bats
# --jobs), so that no suite is much longer than the run's share of the
# others.  Each job's output goes to a file of its own; the outputs are
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
[ "${1:-}" = "--check" ] && check=1

passed=0
failed=0

# The bats suites that take longest (a minute or more on a quiet 2-core
# machine, from bats -T): make check leaves them out, and the job list
# shows them first.
SLOW="leaks shared_faults multimount saturation concurrency permissions
lease_stress events drain leases shared_watch redis_functions shared
shared_tls"

# The suites whose tests run several at once (bats --jobs N): the long
# ones with many tests, each test with its own mounts and redis-servers
# under names of its own (mktemp), nothing shared with the others but the
# machine.  A suite of one long test bounds the run whatever is done; a
# suite of many, split, does not.  Not parents.bats: two of its commands
# must run within a 0.3 s tombstone_ttl, which a loaded machine misses.
WIDE="redis_functions:4 shared_damage:3 multimount:3 permissions:2 shares:2
drain:2 shared_faults:2 concurrency:2 stats:2 shared:2 shared_watch:2
leases:2 events:2 children:2 tools:2 snapshot:2 tree:2"

# wide_of NAME: N for a suite of WIDE, 1 for any other.
wide_of() {
	local w
	for w in $WIDE; do
		[ "${w%%:*}" = "$1" ] && echo "${w#*:}" && return
	done
	echo 1
}

# What each job takes, in seconds of one loaded run on this 2-core
# machine (the job log of a full run, build/run-tests.joblog, one test
# at a time; the shared store's runs and tools, snapshot, tree,
# store_options, watch and walks estimated, a shared store's run half
# again its embedded one): only the proportions matter.  The jobs start
# longest first (a suite of WIDE as long as its tests take N at once),
# so that the run ends with short jobs, not with one long job alone; a
# job not listed counts as short.
ESTIMATE="
embedded  redis_functions:1613 shared_damage:689 multimount:567 permissions:301
embedded  shares:300 drain:283 shared_faults:272 shared_outcome:269
embedded  concurrency:234 stats:232 shared:210 parents:210 shared_watch:208
embedded  leases:207 events:204 tools:200 snapshot:200 children:191
embedded  saturation:173 tree:150 store_options:150 capacity:142 watch:120
embedded  links:119 install:116 options:114 cache:106 ownership:69 faults:67
embedded  walks:67 leaks:53 lease_stress:35
redis  permissions:451 shares:450 drain:424 concurrency:351 stats:348
redis  parents:315 leases:310 events:306 tools:300 snapshot:300 children:286
redis  saturation:259 tree:225 capacity:213 watch:180 links:178 install:174
redis  options:171 cache:159 ownership:103 faults:100 walks:100 leaks:79
redis  lease_stress:52
unit  test_snapshot:103 test_remote_ops.tsan:60 stress_store.tsan:43
unit  test_faults:40 test_remote_ops:29 test_mirror:29 test_rconn:28
unit  test_fs:25 test_events:22 test_remote_clock:19 test_lease:14
unit  stress_store:10
"

is_slow() {
	case " $(echo $SLOW) " in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

# in_order FILE...: the files, the slow suites first, in SLOW's order.
in_order() {
	local s f
	for s in $SLOW; do
		for f in "$@"; do
			[ "$(basename "$f" .bats)" = "$s" ] && echo "$f"
		done
	done
	for f in "$@"; do
		is_slow "$(basename "$f" .bats)" || echo "$f"
	done
}

has_tags=0
bats --help 2>&1 | grep -q -- '--filter-tags' && has_tags=1

# redis_suites: the files of the shared store's run.  Those that choose
# their store themselves (shared.bats, multimount.bats, ... set
# STATEFS_STORE and start their own redis-servers) ran in the embedded
# run already.  Without bats' --filter-tags, a copy of each suite less
# its embedded-only tests, in build/bats-redis (at the same depth as
# tests/bats, so their paths to the binary hold).
redis_suites() {
	local f out=build/bats-redis
	rm -rf "$out"
	mkdir -p "$out"
	cp tests/bats/*.bash tests/bats/*.py "$out"/
	for f in $(grep -l '^load helpers' tests/bats/*.bats); do
		grep -q '^STATEFS_STORE=' "$f" && continue
		if [ "$has_tags" = 1 ]; then
			echo "$f"
			continue
		fi
		awk '
			/^# bats test_tags=.*embedded-only/ { drop = 1; next }
			drop && /^}/ { drop = 0; next }
			!drop { print }
		' "$f" >"$out/$(basename "$f")"
		echo "$out/$(basename "$f")"
	done
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

# --- the job list: "KIND ARG" lines ---------------------------------------------

{
	# The binaries of today's sources only: one left in build/ by a
	# test file since removed is not a test any more.  The TSan ones,
	# the longest, first.
	for src in tests/unit/*/test_*.c tests/unit/stress/stress_store.c; do
		base=$(basename "$src" .c)
		[ "$check" = 0 ] && [ -x "build/unit/$base.tsan" ] &&
			echo "unit build/unit/$base.tsan"
	done
	for src in tests/unit/*/test_*.c tests/unit/stress/stress_store.c; do
		base=$(basename "$src" .c)
		[ -x "build/unit/$base" ] && echo "unit build/unit/$base"
	done
	if [ "$check" = 0 ]; then
		for bin in build/fuzz/fuzz_*; do
			[ -f "$bin" ] && [ -x "$bin" ] && echo "fuzz $bin"
		done
	fi
	if command -v bats >/dev/null 2>&1; then
		for f in $(in_order tests/bats/*.bats); do
			[ "$check" = 1 ] && is_slow "$(basename "$f" .bats)" && continue
			echo "embedded $f"
		done
		if [ "$check" = 0 ]; then
			# shellcheck disable=SC2046
			for f in $(in_order $(redis_suites)); do
				echo "redis $f"
			done
		fi
	fi
} >"$jobs_list"

grep -q '^unit ' "$jobs_list" || {
	echo "*** no unit test binaries in build/unit (run make unit)"
	failed=$((failed + 1))
}
[ "$check" = 1 ] || grep -q '^fuzz ' "$jobs_list" || {
	echo "*** no fuzz targets in build/fuzz (run make fuzz-build)"
	failed=$((failed + 1))
}
command -v bats >/dev/null 2>&1 || {
	echo "*** bats is not installed (scripts/deps.sh installs it)"
	failed=$((failed + 1))
}

# --- running them ---------------------------------------------------------------

# one_job N KIND ARG WIDE: job N's output in $run_tmp/N.out, its exit
# status in $run_tmp/N.rc, the processor time it took (user and system,
# in seconds, of every process it waited for) in $run_tmp/N.cpu.  A bats
# suite runs WIDE tests at once, each line of its TAP with the test's
# time (bats -T: "ok 3 NAME in 812ms").
one_job() {
	local n=$1 kind=$2 arg=$3 wide=$4 rc opts=(--tap -T)
	[ "$wide" -gt 1 ] && opts+=(--jobs "$wide")
	case $kind in
	unit)
		"$arg" ;;
	fuzz)
		tests/fuzz/run.sh --smoke 5 "$arg" ;;
	embedded)
		TMPDIR="$run_tmp" bats "${opts[@]}" "$arg" ;;
	redis)
		[ "$has_tags" = 1 ] && opts+=(--filter-tags '!embedded-only')
		STATEFS_STORE=redis TMPDIR="$run_tmp" bats "${opts[@]}" "$arg" ;;
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
	# "N KIND ARG WIDE" lines, N the job's place in the list (its
	# output's name), the longest first.
	n=0
	while read -r kind arg; do
		n=$((n + 1))
		w=1
		case $kind in embedded | redis) w=$(wide_of "$(basename "$arg" .bats)") ;; esac
		est=$(awk -v k="$kind" -v a="$(basename "$arg" .bats)" '
			$1 == k { for (i = 2; i <= NF; i++) if (index($i, a ":") == 1) e = substr($i, length(a) + 2) }
			END { print e + 1 }' <<<"$ESTIMATE")
		echo "$((est / w)) $n $kind $arg $w"
	done <"$jobs_list" | sort -k1,1nr -k2,2n | cut -d' ' -f2- >"$run_tmp/order"
	parallel --will-cite --jobs "$jobs" --joblog "$run_tmp/joblog" \
		--colsep ' ' one_job {1} {2} {3} {4} <"$run_tmp/order"
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
while read -r kind arg; do
	n=$((n + 1))
	out=$run_tmp/$n.out
	rc=$(cat "$run_tmp/$n.rc" 2>/dev/null || echo 127)
	case $kind in
	unit)
		echo "=== $arg"
		cat "$out" 2>/dev/null
		tally_unit "$arg" "$out" "$rc" ;;
	fuzz)
		echo "=== $arg (smoke run)"
		cat "$out" 2>/dev/null
		if [ "$rc" -eq 0 ]; then
			echo "--- $arg: 1 passed, 0 failed"
			passed=$((passed + 1))
		else
			echo "--- $arg: 0 passed, 1 failed"
			failed=$((failed + 1))
		fi ;;
	embedded | redis)
		echo "=== bats $arg ($kind store)"
		cat "$out" 2>/dev/null
		tally_bats "$arg ($kind store)" "$out" "$rc" ;;
	esac
done <"$jobs_list"

# --- the slowest jobs ------------------------------------------------------------

# GNU parallel's job log: a header, then one line a job, tab-separated,
# its run time in seconds the fourth field and its command the last
# ("one_job N KIND ARG WIDE").  The longest bound the run: they are the
# ones to split or to start first (ESTIMATE), and a job whose processor
# time is far below its run time waits (sleeps, timeouts) more than it
# works.
if [ -s "$run_tmp/joblog" ]; then
	echo "=== the ten slowest jobs: seconds run, seconds of processor time, job"
	awk -F '\t' -v d="$run_tmp" 'NR > 1 {
			split($NF, c, " ")
			cpu = "?"
			f = d "/" c[2] ".cpu"
			if ((getline cpu <f) <= 0) cpu = "?"
			close(f)
			w = c[5] > 1 ? " (" c[5] " tests at once)" : ""
			printf "%7.1f %7s  %s %s%s\n", $4, cpu, c[3], c[4], w
		}' "$run_tmp/joblog" | sort -rn | head -n 10
	# Kept for the next look at where the time goes.
	[ -d build ] && cp "$run_tmp/joblog" build/run-tests.joblog
	echo "=== the ten slowest bats tests: seconds, suite (store), test"
	n=0
	while read -r kind arg; do
		n=$((n + 1))
		case $kind in embedded | redis) ;; *) continue ;; esac
		sed -n 's/^\(not \)\{0,1\}ok [0-9][0-9]* \(.*\) in \([0-9][0-9]*\)ms\( # skip.*\)\{0,1\}$/\3\t\2/p' \
			"$run_tmp/$n.out" 2>/dev/null |
			awk -F '\t' -v s="$(basename "$arg" .bats) ($kind)" \
				'{ printf "%7.1f  %s  %s\n", $1 / 1000, s, $2 }'
	done <"$jobs_list" | sort -rn | head -n 10
fi

# --- the seam --------------------------------------------------------------------

echo "=== scripts/check-seam.sh"
if scripts/check-seam.sh; then
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
