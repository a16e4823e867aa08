#!/bin/bash
# scripts/bench/report.sh RESULTS OUTDIR "LEVELS" - the tables and the
# chart of `make bench` from scripts/bench/run.sh's results.tsv:
# OUTDIR/report.md (printed too) and OUTDIR/bench.png.
set -euo pipefail

RES=$1
OUT=$2
LEVELS=$3
lo=$(echo "$LEVELS" | awk '{ print $1 }')
hi=$(echo "$LEVELS" | awk '{ print $NF }')

# A point phase runs BENCH_REPS times: both awk programs below collect
# its rates (ops/s) in samp[k, 1..nsamp[k]], k = fs, level, threads,
# phase, and use median(k).
RATES_AWK='
$4 ~ /^(create|stat|restat|read|rename|unlink)$/ && $6 > 0 {
	k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
	samp[k, ++nsamp[k]] = $5 / $6
}
function median(k,   m, i, j, x, v) {
	m = nsamp[k]
	if (!m)
		return 0
	for (i = 1; i <= m; i++)
		v[i] = samp[k, i]
	for (i = 2; i <= m; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
			x = v[j]; v[j] = v[j - 1]; v[j - 1] = x
		}
	return (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}'

awk -F'\t' -v lo="$lo" -v hi="$hi" -v date="$(date -u +%Y-%m-%d)" "$RATES_AWK"'
function rate(fs, lvl, t, ph) {
	return median(fs SUBSEP lvl SUBSEP t SUBSEP ph)
}
function val(fs, lvl, t, what,   k) {
	k = fs SUBSEP lvl SUBSEP t SUBSEP what
	return (k in ops) ? ops[k] : ""
}
function val2(fs, lvl, t, what,   k) {
	k = fs SUBSEP lvl SUBSEP t SUBSEP what
	return (k in secs) ? secs[k] : ""
}
function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }
function point_table(lvl,   p, t, a, f, s) {
	printf "\nPoint operations at a population of %d children (ops/s, each the median of its runs):\n\n", lvl
	print "| phase | threads | tmpfs | FUSE floor | statefs | statefs/floor | statefs/tmpfs |"
	print "|---|---|---|---|---|---|---|"
	for (p = 1; p <= nph; p++)
		for (t = 1; t <= 2; t++) {
			a = rate("tmpfs", lvl, t, ph[p])
			f = rate("floor", lvl, t, ph[p])
			s = rate("statefs", lvl, t, ph[p])
			printf "| %s | %d | %.0f | %.0f | %.0f | %s | %s |\n",
				ph[p], t, a, f, s, ratio(s, f), ratio(s, a)
		}
}
{
	k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
	ops[k] = $5
	secs[k] = $6
	if ($4 == "rss_kb") rss[$1 SUBSEP $2] = $5
}
END {
	nph = split("create stat restat read rename unlink", ph, " ")
	printf "statefs benchmark, %s (scripts/bench/run.sh)\n", date
	printf "\nMachine: two threads of a CPU-bound loop do %s times the work of one.\n",
		val2("machine", 0, 2, "spin")
	point_table(lo)

	printf "\nFUSE requests per operation (1 thread, 1000 operations, counted at the fuse_request_send tracepoint):\n\n"
	print "| phase | FUSE floor | statefs |"
	print "|---|---|---|"
	for (p = 1; p <= nph; p++) {
		f = val("floor", 0, 1, "req_" ph[p]); s = val("statefs", 0, 1, "req_" ph[p])
		printf "| %s | %s | %s |\n", ph[p],
			f ? sprintf("%.2f", val2("floor", 0, 1, "req_" ph[p]) / f) : "-",
			s ? sprintf("%.2f", val2("statefs", 0, 1, "req_" ph[p]) / s) : "-"
	}
	if (hi != lo)
		point_table(hi)

	printf "\nFlat as the population grows: statefs rate at %d / rate at %d children:\n\n", hi, lo
	print "| phase | 1 thread | 2 threads |"
	print "|---|---|---|"
	for (p = 1; p <= nph; p++)
		printf "| %s | %s | %s |\n", ph[p],
			ratio(rate("statefs", hi, 1, ph[p]), rate("statefs", lo, 1, ph[p])),
			ratio(rate("statefs", hi, 2, ph[p]), rate("statefs", lo, 2, ph[p]))

	printf "\nTwo threads on two parents / one thread (population %d):\n\n", lo
	print "| phase | tmpfs | FUSE floor | statefs |"
	print "|---|---|---|---|"
	for (p = 1; p <= nph; p++)
		printf "| %s | %s | %s | %s |\n", ph[p],
			ratio(rate("tmpfs", lo, 2, ph[p]), rate("tmpfs", lo, 1, ph[p])),
			ratio(rate("floor", lo, 2, ph[p]), rate("floor", lo, 1, ph[p])),
			ratio(rate("statefs", lo, 2, ph[p]), rate("statefs", lo, 1, ph[p]))

	printf "\nWhole-directory and mixed operations (population %d):\n\n", hi
	print "| what | tmpfs | FUSE floor | statefs | statefs/tmpfs |"
	print "|---|---|---|---|---|"
	split("ls_cold ls_warm find_cold find_warm", ls, " ")
	for (i = 1; i <= 4; i++) {
		a = val2("tmpfs", hi, 1, ls[i]); f = val2("floor", hi, 1, ls[i])
		s = val2("statefs", hi, 1, ls[i])
		printf "| %s of the big directory, %s (s) | %.3f | %.3f | %.3f | %s |\n",
			i <= 2 ? "`ls -l`" : "`find -printf` (`ls -l` without its xattr probes)",
			substr(ls[i], index(ls[i], "_") + 1), a, f, s, ratio(s, a)
	}
	a = val2("tmpfs", hi, 1, "leave_ms"); f = val2("floor", hi, 1, "leave_ms")
	s = val2("statefs", hi, 1, "leave_ms")
	printf "| removing the big directory after the listing (ms; rmdir, or rm -r where rmdir is refused) | %.1f | %.1f | %.1f | %s |\n", a, f, s, ratio(s, a)
	a = val2("tmpfs", hi, 1, "leave_cold_ms"); f = val2("floor", hi, 1, "leave_cold_ms")
	s = val2("statefs", hi, 1, "leave_cold_ms")
	printf "| the same with the kernel caches dropped first (ms) | %.1f | %.1f | %.1f | %s |\n", a, f, s, ratio(s, a)
	for (i = 0; i < 2; i++) {
		w = i ? "during" : "base"
		printf "| probe admissions elsewhere, %s the removal: p99 / max (us) | %s / %s | %s / %s | %s / %s | |\n",
			i ? "during" : "before",
			val("tmpfs", hi, 1, "probe_" w "_us"), val2("tmpfs", hi, 1, "probe_" w "_us"),
			val("floor", hi, 1, "probe_" w "_us"), val2("floor", hi, 1, "probe_" w "_us"),
			val("statefs", hi, 1, "probe_" w "_us"), val2("statefs", hi, 1, "probe_" w "_us")
	}
	for (t = 1; t <= 2; t++) {
		a = val2("tmpfs", hi, t, "fs_mark_files_per_s")
		f = val2("floor", hi, t, "fs_mark_files_per_s")
		s = val2("statefs", hi, t, "fs_mark_files_per_s")
		printf "| fs_mark, %d thread(s), 16-byte files (files/s) | %.0f | %.0f | %.0f | %s (floor: %s) |\n",
			t, a, f, s, ratio(s, a), ratio(s, f)
	}
	printf "| `cat .snapshot` of the whole store (s, %s lines) | | | %.3f | |\n",
		val2("statefs", hi, 1, "snapshot_lines"), val2("statefs", hi, 1, "snapshot_s")

	printf "\nResident memory of the daemon (population %d -> %d):\n\n", lo, hi
	print "| | FUSE floor | statefs |"
	print "|---|---|---|"
	for (i = 0; i < 2; i++) {
		fs = i ? "statefs" : "floor"
		d[fs] = (rss[fs SUBSEP hi] - rss[fs SUBSEP lo]) * 1024 / (hi - lo)
	}
	printf "| bytes per child (RSS growth / children) | %.0f | %.0f |\n", d["floor"], d["statefs"]
	printf "| of which name (8) and content (16) | 24 | 24 |\n"
	printf "| overhead per child | %.0f | %.0f |\n", d["floor"] - 24, d["statefs"] - 24
}' "$RES" | tee "$OUT/report.md"

# Chart: ops/s against population, one panel per phase.
for ph in create stat restat read rename unlink; do
	awk -F'\t' -v ph="$ph" "$RATES_AWK"'
	$4 == ph && $6 > 0 { lv[$2] = 1 }
	END {
		n = 0
		for (l in lv) v[++n] = l + 0
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
		for (i = 1; i <= n; i++) {
			l = v[i]
			printf "%d", l
			split("tmpfs floor statefs", f, " ")
			for (k = 1; k <= 3; k++)
				for (t = 1; t <= 2; t++)
					printf " %.0f", median(f[k] SUBSEP l SUBSEP t SUBSEP ph)
			printf "\n"
		}
	}' "$RES" >"$OUT/chart-$ph.dat"
done

if command -v gnuplot >/dev/null; then
	gnuplot <<EOF
set terminal pngcairo size 1500,900 font ",10"
set output "$OUT/bench.png"
set multiplot layout 2,3 title "statefs vs the FUSE floor vs tmpfs: ops/s against population ($(date -u +%Y-%m-%d))"
set logscale xy
set xrange [500:2000000]
set xlabel "children in the store"
set ylabel "ops/s"
set key bottom left font ",8"
set grid
do for [ph in "create stat restat read rename unlink"] {
	set title ph
	plot "$OUT/chart-".ph.".dat" using 1:2 with linespoints title "tmpfs 1t", \
	     "" using 1:3 with linespoints title "tmpfs 2t", \
	     "" using 1:4 with linespoints title "floor 1t", \
	     "" using 1:5 with linespoints title "floor 2t", \
	     "" using 1:6 with linespoints lw 2 title "statefs 1t", \
	     "" using 1:7 with linespoints lw 2 title "statefs 2t"
}
unset multiplot
EOF
	echo "chart: $OUT/bench.png"
fi
