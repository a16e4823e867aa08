#!/usr/bin/env bash
# Run every statefs test and print one verdict.
#
#   1. each unit binary build/unit/test_* and build/unit/stress_store*
#      (cmocka: "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s), ...")
#   2. a 5 s smoke run of each libFuzzer target build/fuzz/fuzz_* from its
#      seed corpus (tests/fuzz/run.sh --smoke); each target is one test,
#      passed when libFuzzer exits 0
#   3. the end-to-end suites, twice: bats --tap tests/bats on the
#      embedded store, then every suite that mounts (those that load
#      helpers.bash) on a shared store (STATEFS_STORE=redis: each mount
#      its own redis-server), leaving out the tests tagged embedded-only
#      (# bats test_tags=embedded-only; tests/README.md says why each)
#   4. the seam between fs/ and the store (scripts/check-seam.sh): one
#      test, passed when it exits 0
#
# Each suite's output is shown as it runs.  The last line is always
# "N passed, N failed"; the exit status is non-zero on any failure,
# including a unit binary that crashed or exited non-zero without a cmocka
# failure line, a skipped bats test (statefs tests never skip), a bats
# test that never reported, and bats itself failing.
#
# Run from anywhere; `make test` builds everything first.
set -u

cd "$(dirname "$0")/.." || exit 1

passed=0
failed=0
log=$(mktemp "${TMPDIR:-/tmp}/statefs-tests.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT

# --- unit binaries -------------------------------------------------------------

found=0
# The binaries of today's sources only: one left in build/ by a test
# file since removed is not a test any more.
for src in tests/unit/test_*.c tests/unit/stress_store.c; do
	base=$(basename "$src" .c)
	for bin in "build/unit/$base" "build/unit/$base.tsan"; do
		[ -f "$bin" ] && [ -x "$bin" ] || continue
		found=1
		echo "=== $bin"
		"$bin" >"$log" 2>&1
		rc=$?
		cat "$log"
		p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$log" |
			awk '{ s += $1 } END { print s + 0 }')
		f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s), listed below:.*/\1/p' "$log" |
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
	done
done
if [ "$found" -eq 0 ]; then
	echo "*** no unit test binaries in build/unit (run make unit)"
	failed=$((failed + 1))
fi

# --- fuzz smoke runs ------------------------------------------------------------

fuzz_found=0
for bin in build/fuzz/fuzz_*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	fuzz_found=1
	echo "=== $bin (smoke run)"
	if tests/fuzz/run.sh --smoke 5 "$bin"; then
		echo "--- $bin: 1 passed, 0 failed"
		passed=$((passed + 1))
	else
		echo "--- $bin: 0 passed, 1 failed"
		failed=$((failed + 1))
	fi
done
if [ "$fuzz_found" -eq 0 ]; then
	echo "*** no fuzz targets in build/fuzz (run make fuzz-build)"
	failed=$((failed + 1))
fi

# --- end-to-end suites -----------------------------------------------------------

# run_bats NAME ARGS...: one bats run, its verdict added to the totals.
run_bats() {
	local name=$1 rc plan ok skipped notok f
	shift
	echo "=== bats $name"
	TMPDIR="$run_tmp" "$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$log" | head -n 1)
	ok=$(grep -E '^ok [0-9]+' "$log" | grep -vcE '^ok [0-9]+.*# skip')
	skipped=$(grep -cE '^ok [0-9]+.*# skip' "$log")
	notok=$(grep -cE '^not ok [0-9]+' "$log")
	f=$((notok + skipped))
	if [ "$skipped" -gt 0 ]; then
		echo "*** bats $name: $skipped skipped test(s) count as failed"
	fi
	if [ -n "$plan" ] && [ $((ok + notok + skipped)) -lt "$plan" ]; then
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

# The suites that mount, for the shared store's run, less the tests
# tagged embedded-only: bats' own --filter-tags when it has it, else a
# copy of the suites without those tests in build/bats-redis (at the
# same depth as tests/bats, so their paths to the binary hold).
redis_suites() {
	local f out=build/bats-redis
	if bats --help 2>&1 | grep -q -- '--filter-tags'; then
		echo "--filter-tags !embedded-only"
		grep -l '^load helpers' tests/bats/*.bats
		return
	fi
	rm -rf "$out"
	mkdir -p "$out"
	cp tests/bats/*.bash tests/bats/*.py "$out"/
	for f in $(grep -l '^load helpers' tests/bats/*.bats); do
		awk '
			/^# bats test_tags=.*embedded-only/ { drop = 1; next }
			drop && /^}/ { drop = 0; next }
			!drop { print }
		' "$f" >"$out/$(basename "$f")"
		echo "$out/$(basename "$f")"
	done
}

if ! command -v bats >/dev/null 2>&1; then
	echo "*** bats is not installed (scripts/deps.sh installs it)"
	failed=$((failed + 1))
else
	# This run's mounts live under their own directory, so the check for
	# mounts left behind sees only this run's.
	run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/statefs-test.XXXXXX")
	chmod 0755 "$run_tmp"
	run_bats "tests/bats (embedded store)" bats --tap tests/bats
	# shellcheck disable=SC2046
	STATEFS_STORE=redis run_bats "tests/bats (shared store, redis)" \
		bats --tap $(redis_suites)
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

left=0
if [ -n "${run_tmp:-}" ]; then
	left=$(awk -v d="$run_tmp/" '$3 ~ /^fuse/ && index($2, d) == 1' /proc/mounts | wc -l)
	[ "$left" -eq 0 ] && rm -rf "$run_tmp"
fi
if [ "$left" -gt 0 ]; then
	echo "*** $left statefs test mount(s) left behind (see /proc/mounts)"
	failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
