#!/bin/bash
# scripts/bench/report.sh RESULTS OUTDIR "LEVELS" - the tables and the
# chart of `make bench` from scripts/bench/run.sh's results.tsv:
# OUTDIR/report.md (printed too) and OUTDIR/bench.png.  The shared
# store's tables (filesystems redis and redis2, the propagation, Redis's
# CPU) come last, each target printed beside its figure.
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
# Redis/embedded against the targets of the shared store: create,
# rename and unlink >= 0.5x, stat, restat and read >= 0.9x.
function target(ph, r, e,   min) {
	min = ph ~ /^(create|rename|unlink)$/ ? 0.5 : ph ~ /^(stat|restat|read)$/ ? 0.9 : 0
	if (!min)
		return ""
	if (!e)
		return "-"
	return sprintf("%s (>= %.1fx)", r >= min * e ? "met" : "not met", min)
}
function redis_table(lvl,   p, t, a, e, r) {
	printf "\nThe shared store: statefs on a Redis-backed mount beside the embedded one, population %d (ops/s, each the median of its runs):\n\n", lvl
	print "| phase | threads | tmpfs | statefs embedded | statefs on Redis | embedded/tmpfs | Redis/tmpfs | Redis/embedded | target |"
	print "|---|---|---|---|---|---|---|---|---|"
	for (p = 1; p <= nph; p++)
		for (t = 1; t <= 2; t++) {
			a = rate("tmpfs", lvl, t, ph[p])
			e = rate("statefs", lvl, t, ph[p])
			r = rate("redis", lvl, t, ph[p])
			printf "| %s | %d | %.0f | %.0f | %.0f | %s | %s | %s | %s |\n",
				ph[p], t, a, e, r, ratio(e, a), ratio(r, a), ratio(r, e),
				target(ph[p], r, e)
		}
}
# Median of the fcall rounds of one column (w: wall, c: CPU).
function fmed(what, col,   m, i, j, x, v) {
	m = fn[what]
	if (!m)
		return "-"
	for (i = 1; i <= m; i++)
		v[i] = fv[what, col, i] + 0
	for (i = 2; i <= m; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
			x = v[j]; v[j] = v[j - 1]; v[j - 1] = x
		}
	return (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
function cpu_row(what, lvl, label,   n, us, c, per, cpu, met) {
	n = val("redis", lvl, "-", "fcall_" what)
	us = val2("redis", lvl, "-", "fcall_" what)
	c = val2("redis", lvl, "-", "rcpu_" what)
	if (n == "")
		return
	per = cpu = met = "-"
	if (n > 0) {
		per = sprintf("%.1f", us / n)
		cpu = sprintf("%.1f", c / n)
		met = (c / n <= 30) ? "met" : "not met"
	}
	printf "| %s | %d | %s | %s | %s |\n", label, n, per, cpu, met
}
# scripts/bench/redis_floor.sh: the library beside its commands alone,
# one request, and what these leave of each target (computed).
function f1(x) { return (x == "-") ? x : sprintf("%.1f", x) }
function floor_tables(lvl,   n, nf, i, f, lw, lc, cw, cc, rt, rc, pc, e, te, best, m, ph2) {
	n = fn["fl_create_lib"]
	printf "\nWhat a call cannot go below on this machine (scripts/bench/redis_floor.sh, median of %d rounds; us per call or request):\n\n", n
	print "The commands alone: the Redis commands one call of the library makes (traced with MONITOR), issued by a generated Functions library in a straight line with no logic, pipelined on a tenant of the same population, each beside the real function in the same run.\n"
	print "| call | the library: usec_per_call / main-thread CPU | its commands alone: usec_per_call / main-thread CPU | the commands'\'' share of usec_per_call | target: usec_per_call <= 20 us, the commands alone |"
	print "|---|---|---|---|---|"
	nf = split("create publish rename unlink", f, " ")
	for (i = 1; i <= nf; i++) {
		if (!fn["fl_" f[i] "_lib"])
			continue
		lw = fmed("fl_" f[i] "_lib", "w"); lc = fmed("fl_" f[i] "_lib", "c")
		cw = fmed("fl_" f[i] "_cmds", "w"); cc = fmed("fl_" f[i] "_cmds", "c")
		printf "| sfs_%s | %s / %s | %s / %s | %s | %s |\n", f[i], f1(lw), f1(lc), f1(cw), f1(cc),
			(lw > 0) ? sprintf("%.0f%%", 100 * cw / lw) : "-",
			(cw + 0 <= 20) ? "within reach" : "not reachable: the commands alone take more"
	}
	print "\n| one request from one client (redis-benchmark -c 1) | us per request (unpipelined: the round trip) | Redis main-thread CPU per request |"
	print "|---|---|---|"
	printf "| PING (PING_INLINE and PING_MBULK) | %s | %s |\n", f1(fmed("rtt_ping", "w")), f1(fmed("rtt_ping", "c"))
	printf "| GET | %s | %s |\n", f1(fmed("rtt_get", "w")), f1(fmed("rtt_get", "c"))
	printf "| PING, pipelined 16 deep (-P 16) | %s | %s |\n", f1(fmed("p16_ping", "w")), f1(fmed("p16_ping", "c"))
	printf "| GET, pipelined 16 deep (-P 16) | %s | %s |\n", f1(fmed("p16_get", "w")), f1(fmed("p16_get", "c"))

	rt = f1(fmed("rtt_get", "w")); rc = fmed("rtt_get", "c"); pc = fmed("p16_get", "c")
	printf "\nComputed from the figures above, not measured: the best each target could reach (the round trip: GET'\''s median above; the embedded rates: statefs at %d children, 1 thread, the median of its runs).\n\n", lvl
	for (i = 1; i <= nf; i++) {
		if (!fn["fl_" f[i] "_cmds"])
			continue
		cc = fmed("fl_" f[i] "_cmds", "c")
		m = cc + rc - pc
		printf "- Redis main-thread CPU per transition <= 30 us: an unpipelined sfs_%s costs at least its commands alone, pipelined (%.1f us), plus what not pipelining adds to a request (GET: %.1f us unpipelined - %.1f us pipelined) = %.1f us: %s.\n",
			f[i], cc, rc, pc, m, (m <= 30) ? "within reach" : "not reachable at these figures"
	}
	split("create unlink rename", ph2, " ")
	for (i = 1; i <= 3; i++) {
		e = rate("statefs", lvl, 1, ph2[i])
		if (!e) {
			printf "- %s through a mount >= 0.5x embedded: no embedded rate at %d children.\n", ph2[i], lvl
			continue
		}
		te = 1e6 / e
		if (ph2[i] == "rename" && !fn["fl_rename_cmds"]) {
			# A results file of a redis_floor.sh that did not trace a rename.
			best = te + rt
			printf "- rename through a mount >= 0.5x embedded: embedded %.1f us a rename (%.0f ops/s at %d children, 1 thread) plus one round trip (GET, %s us; its commands were not measured, so the real bound is lower) = %.1f us: at best %.2fx (measured on the mount: %s): %s.\n",
				te, e, lvl, rt, best, te / best, ratio(rate("redis", lvl, 1, ph2[i]), e),
				(te / best >= 0.5) ? "not ruled out" : "not reachable at these figures"
			continue
		}
		if (ph2[i] == "create") {
			# loadgen create: open(O_CREAT) (sfs_create) + write + close (sfs_publish).
			cw = fmed("fl_create_cmds", "w") + fmed("fl_publish_cmds", "w")
			best = te + 2 * rt + cw
			printf "- create through a mount >= 0.5x embedded: embedded %.1f us a create (%.0f ops/s at %d children, 1 thread: open, write, close) plus two round trips (GET, %s us each: sfs_create at open, sfs_publish at close) plus the commands of both alone (%.1f us) = %.1f us: at best %.2fx (measured on the mount: %s): %s.\n",
				te, e, lvl, rt, cw, best, te / best,
				ratio(rate("redis", lvl, 1, "create"), e), (te / best >= 0.5) ? "within reach" : "not reachable at these figures"
			continue
		}
		cw = fmed("fl_" ph2[i] "_cmds", "w")
		best = te + rt + cw
		printf "- %s through a mount >= 0.5x embedded: embedded %.1f us %s %s (%.0f ops/s at %d children, 1 thread) plus one round trip (GET, %s us) plus the commands of sfs_%s alone (%.1f us) = %.1f us: at best %.2fx (measured on the mount: %s): %s.\n",
			ph2[i], te, ph2[i] == "unlink" ? "an" : "a", ph2[i], e, lvl, rt, ph2[i], cw, best, te / best,
			ratio(rate("redis", lvl, 1, ph2[i]), e), (te / best >= 0.5) ? "within reach" : "not reachable at these figures"
	}
}
{
	k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
	ops[k] = $5
	secs[k] = $6
	if ($4 == "rss_kb") rss[$1 SUBSEP $2] = $5
	if ($1 == "redis" && $4 ~ /^(create|stat|restat|read|rename|unlink)$/) {
		if (!rlo || $2 + 0 < rlo) rlo = $2 + 0
		if ($2 + 0 > rhi) rhi = $2 + 0
	}
	if ($4 == "propagate") {
		pm[++npm] = $5; pn[$5] = $6; p50[$5] = $7; p99[$5] = $8
		pmax[$5] = $9; pmiss[$5] = $10; plvl = $2
	}
	if ($1 == "fcall" || $1 == "floor") {
		fn[$4]++
		fv[$4, "w", fn[$4]] = $5
		fv[$4, "c", fn[$4]] = $6
	}
}
END {
	nph = split("create stat restat read rename unlink", ph, " ")
	printf "statefs benchmark, %s (scripts/bench/run.sh)\n", date
	printf "\nMachine: two threads of a CPU-bound loop do %s times the work of one.\n",
		val2("machine", 0, 2, "spin")
	point_table(lo)

	printf "\nFUSE requests per operation (1 thread, 1000 operations, counted at the fuse_request_send tracepoint):\n\n"
	print "| phase | FUSE floor | statefs | statefs on Redis |"
	print "|---|---|---|---|"
	for (p = 1; p <= nph; p++) {
		f = val("floor", 0, 1, "req_" ph[p]); s = val("statefs", 0, 1, "req_" ph[p])
		r = val("redis", 0, 1, "req_" ph[p])
		printf "| %s | %s | %s | %s |\n", ph[p],
			f ? sprintf("%.2f", val2("floor", 0, 1, "req_" ph[p]) / f) : "-",
			s ? sprintf("%.2f", val2("statefs", 0, 1, "req_" ph[p]) / s) : "-",
			r ? sprintf("%.2f", val2("redis", 0, 1, "req_" ph[p]) / r) : "-"
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

	if (!rlo)
		exit
	redis_table(rlo)
	if (rhi != rlo)
		redis_table(rhi)

	printf "\nTwo mounts of one store, two threads on each, in one tenant (population %d; ops/s of the four threads together, medians):\n\n", rhi
	print "| phase | tmpfs, 2 threads | Redis, one mount, 2 threads | Redis, two mounts, 2 + 2 threads | two mounts / one | two mounts / tmpfs |"
	print "|---|---|---|---|---|---|"
	for (p = 1; p <= nph; p++) {
		a = rate("tmpfs", rhi, 2, ph[p])
		r = rate("redis", rhi, 2, ph[p])
		s = rate("redis2", rhi, 4, ph[p])
		printf "| %s | %.0f | %.0f | %.0f | %s | %s |\n", ph[p], a, r, s,
			ratio(s, r), ratio(s, a)
	}

	if (npm) {
		printf "\nPropagation: from the return of close() of a new 16-byte child on one mount to the other mount showing it (population %d):\n\n", plvl
		print "| measured by | publications | p50 (us) | p99 (us) | max (us) | not seen within 2 s (counted as 2 s) | target: p99 < 5 ms |"
		print "|---|---|---|---|---|---|---|"
		for (i = 1; i <= npm; i++) {
			m = pm[i]
			how = "polling stat(2) on the other mount every 20 us"
			if (m == "inotify")
				how = "its inotify event (IN_MODIFY or IN_CLOSE_WRITE) on the other mount"
			else if (m == "sync")
				how = "polling statx(2) with AT_STATX_FORCE_SYNC (past the kernel'\''s caches) every 20 us"
			met = (p99[m] + 0 < 5000 && !pmiss[m]) ? "met" : "not met"
			printf "| %s | %d | %s | %s | %s | %d | %s |\n",
				how, pn[m], p50[m], p99[m], pmax[m], pmiss[m], met
		}
		if (!("inotify" in pn))
			print "\nThe second mount raised no inotify event for the first one'\''s publication (probe: none within 2 s), so the delay is to the change being visible to stat(2) there."
	}

	printf "\nRedis CPU per transition (one FCALL is one transition; INFO commandstats and INFO cpu of the mount'\''s redis-server over the phases):\n\n"
	print "| workload | FCALLs | usec_per_call of FCALL | Redis main-thread CPU per FCALL, all commands (us) | target: main-thread CPU per FCALL <= 30 us |"
	print "|---|---|---|---|---|"
	cpu_row("one", rlo, sprintf("one mount, the point phases with 1 and 2 threads, population %d", rlo))
	cpu_row("two", rhi, sprintf("two mounts, 2 + 2 threads, population %d", rhi))
	if (fn["fc_create"]) {
		printf "\nThe Functions library alone (scripts/bench/redis_fcall.sh: pipelined calls on a populated tenant, the server under SCHED_FIFO when run as root; us per call, median of %d rounds):\n\n", fn["fc_create"]
		print "| call | usec_per_call (wall inside the command) | main-thread CPU per call | target: usec_per_call <= 20 us |"
		print "|---|---|---|---|"
		split("fc_create sfs_create fc_publish sfs_publish fc_unlink sfs_unlink fc_version sfs_version_(calibration) fc_hset HSET_(calibration)", fc, " ")
		for (i = 1; i < 10; i += 2) {
			w = fmed(fc[i], "w")
			met = ""
			if (i <= 5)
				met = (w + 0 <= 20) ? "met" : "not met"
			printf "| %s | %s | %s | %s |\n", fc[i + 1], w, fmed(fc[i], "c"), met
		}
	}
	if (fn["fl_create_lib"])
		floor_tables(rhi)
}' "$RES" | sed 's/_(calibration)/ (calibration)/' | tee "$OUT/report.md"

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
			split("tmpfs floor statefs redis", f, " ")
			for (k = 1; k <= 4; k++)
				for (t = 1; t <= 2; t++) {
					x = median(f[k] SUBSEP l SUBSEP t SUBSEP ph)
					fmt = x > 0 ? " %.0f" : " NaN"
					printf fmt, x
				}
			printf "\n"
		}
	}' "$RES" >"$OUT/chart-$ph.dat"
done

if command -v gnuplot >/dev/null; then
	gnuplot <<EOF
set terminal pngcairo size 1800,900 font ",10"
set output "$OUT/bench.png"
set multiplot layout 2,3 title "statefs (embedded and on Redis) vs the FUSE floor vs tmpfs: ops/s against population ($(date -u +%Y-%m-%d))"
set logscale xy
# The populations measured, with half a decade of room either side.
set xrange [$lo / 3.0 : $hi * 3.0]
set xlabel "children in the store"
set ylabel "ops/s"
# The key beside each panel, outside its plotting area (right of the
# axes, top aligned), so that it never covers a curve, whatever the
# data; the same right margin on every panel keeps their axes aligned.
set key outside right top vertical Left reverse width -2 font ",8" samplen 2
set rmargin 16
set grid
do for [ph in "create stat restat read rename unlink"] {
	set title ph
	plot "$OUT/chart-".ph.".dat" using 1:2 with linespoints title "tmpfs 1t", \
	     "" using 1:3 with linespoints title "tmpfs 2t", \
	     "" using 1:4 with linespoints title "floor 1t", \
	     "" using 1:5 with linespoints title "floor 2t", \
	     "" using 1:6 with linespoints lw 2 title "statefs 1t", \
	     "" using 1:7 with linespoints lw 2 title "statefs 2t", \
	     "" using 1:8 with linespoints lw 2 title "on Redis 1t", \
	     "" using 1:9 with linespoints lw 2 title "on Redis 2t"
}
unset multiplot
EOF
	echo "chart: $OUT/bench.png"
fi
