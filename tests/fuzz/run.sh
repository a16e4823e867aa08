#!/bin/sh
# Run libFuzzer targets for a while and say how it went.
#
#   tests/fuzz/run.sh [--smoke] [--cluster] SECONDS BINARY...
#
# Each BINARY (build/fuzz/NAME) runs for SECONDS on a copy of its seed
# corpus tests/fuzz/corpus/NAME, so the committed corpus stays small:
#
#   default   build/fuzz/corpus/NAME: seeded from the committed corpus and
#             kept between runs, so a long run builds on the last one
#   --smoke   build/fuzz/smoke/NAME: a fresh copy of the seeds each time,
#             so the smoke run in `make test` does the same work each time
#
# --cluster runs fuzz_shared on a Redis Cluster of its own
# (FUZZ_SHARED_CLUSTER=1, README.md "Cluster mode") as NAME-cluster:
# its corpus, log and artifacts apart from the one-server run's.
#
# A crash or a model mismatch leaves its input in
# build/fuzz/artifacts/NAME-*; rerun it with `BINARY FILE` (add
# FUZZ_STORE_TRACE=1 to see every step of fuzz_store).  libFuzzer's whole
# output is in build/fuzz/logs/NAME.log.  Exit status: 0 when every
# target ran clean (libFuzzer exited 0), 1 otherwise.
set -u

cd "$(dirname "$0")/../.." || exit 1

smoke=0
cluster=0
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) smoke=1 ;;
	--cluster) cluster=1 ;;
	*) break ;;
	esac
	shift
done
if [ $# -lt 2 ]; then
	echo "usage: tests/fuzz/run.sh [--smoke] [--cluster] SECONDS BINARY..." >&2
	exit 2
fi
secs=$1
shift

status=0
for bin in "$@"; do
	name=$(basename "$bin")
	seeds=tests/fuzz/corpus/$name
	if [ "$cluster" -eq 1 ]; then
		name=$name-cluster
		export FUZZ_SHARED_CLUSTER=1
	fi
	# A smoke run mutates from a fixed seed: make test does the same
	# work each time (make fuzz explores).
	seedopt=
	if [ "$smoke" -eq 1 ]; then
		corpus=build/fuzz/smoke/$name
		rm -rf "$corpus"
		seedopt=-seed=1
	else
		corpus=build/fuzz/corpus/$name
	fi
	log=build/fuzz/logs/$name.log
	mkdir -p "$corpus" build/fuzz/artifacts build/fuzz/logs
	# Seeds the run has not kept already (an updated seed replaces its
	# old copy; what libFuzzer added stays).
	[ -d "$seeds" ] && cp "$seeds"/* "$corpus"/ 2>/dev/null

	"$bin" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 \
		-max_len=1024 -print_final_stats=1 $seedopt \
		-artifact_prefix="build/fuzz/artifacts/$name-" \
		"$corpus" >"$log" 2>&1
	rc=$?

	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	cov=$(grep -aE '^#[0-9]+' "$log" | tail -n 1 |
		sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1, ft \2, corpus \3/p')
	if [ "$rc" -eq 0 ]; then
		echo "$name: clean for $secs s: ${runs:-?} runs, ${rate:-?} exec/s, ${cov:-?}"
	else
		status=1
		echo "*** $name: libFuzzer exited $rc after ${runs:-?} runs; the end of $log:"
		tail -n 40 "$log" | sed 's/^/    /'
		art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
		env=
		[ "$cluster" -eq 1 ] && env="FUZZ_SHARED_CLUSTER=1 "
		[ -n "$art" ] && echo "*** reproduce: $env$bin $art"
	fi
done
exit "$status"
