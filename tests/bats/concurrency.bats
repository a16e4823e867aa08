#!/usr/bin/env bats
# Races through the mount: exactly-one winners, atomic publications,
# one marker per item, and capacity refusals that stay exact under load.
#
# Every background job here closes fd 3 (bats' output) and is waited for
# before the test ends, so the teardown can unmount.

load helpers

setup() {
	statefs_mount
	mkdir -p "$MNT/t/p"
	OUT="$BATS_TEST_TMPDIR/out"
	mkdir -p "$OUT"
	PIDS=() # background jobs of the test; never a bare `wait` (statefs is one)
}

# tally: the results collected in $OUT (one word per file), counted.
tally() {
	cat "$OUT"/* | sort | uniq -c | awk '{ print $2 "=" $1 }' | paste -sd ' '
}

@test "20 concurrent rm of one child: exactly one succeeds, the rest get ENOENT" {
	echo x >"$MNT/t/p/c"
	local i
	for i in $(seq 20); do
		(py_errno 'os.unlink(sys.argv[1])' "$MNT/t/p/c" >"$OUT/$i") 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run tally
	assert_output 'ENOENT=19 OK=1'
	run ls "$MNT/t/p"
	assert_output ''
	run stat_of children
	assert_output 0
}

@test "20 concurrent exclusive creates of one name: exactly one wins and its content is there" {
	local i
	for i in $(seq 20); do
		(bash -c 'set -C; echo "$1" >"$2"' _ "$i" "$MNT/t/p/c" 2>/dev/null &&
			echo "$i" >"$OUT/winner.$i") 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run bash -c 'ls "$1" | wc -l' _ "$OUT"
	assert_output 1
	local winner
	winner=$(cat "$OUT"/winner.*)
	run cat "$MNT/t/p/c"
	assert_output "$winner"
	run ver "$MNT/t/p/c"
	assert_output 1
}

@test "20 concurrent mkdir of one parent: exactly one joins, generation 1" {
	local i
	for i in $(seq 20); do
		(py_errno 'os.mkdir(sys.argv[1])' "$MNT/t/q" >"$OUT/$i") 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run tally
	assert_output 'EEXIST=19 OK=1'
	run gen "$MNT/t/q"
	assert_output 1
	run stat_of parents
	assert_output 2
}

@test "concurrent join/leave cycles: the final generation equals the number of joins" {
	rmdir "$MNT/t/p" # setup's join was generation 1
	local w
	for w in $(seq 8); do
		(
			for _ in $(seq 10); do
				mkdir "$MNT/t/p" 2>>"$OUT/errors" && echo join
				rmdir "$MNT/t/p" 2>>"$OUT/errors" && echo leave
			done >"$OUT/$w"
		) 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	local joins
	joins=$(($(cat "$OUT"/* | grep -c join) + 1))
	# Only the expected refusals: a live name, or a parent already gone.
	run grep -v -e 'File exists' -e 'No such file or directory' "$OUT/errors"
	assert_output ''
	if ! [ -d "$MNT/t/p" ]; then
		mkdir "$MNT/t/p"
		joins=$((joins + 1))
	fi
	[ "$joins" -ge 2 ]
	run gen "$MNT/t/p"
	assert_output "$joins"
	run stat_of parents
	assert_output 1
}

@test "readers racing multi-write publications never see a mix" {
	local size=4096
	head -c "$size" /dev/zero | tr '\0' A >"$BATS_TEST_TMPDIR/A"
	head -c "$size" /dev/zero | tr '\0' B >"$BATS_TEST_TMPDIR/B"
	cat "$BATS_TEST_TMPDIR/A" >"$MNT/t/p/c"
	# The writer publishes all-A or all-B, each in 4 write calls of 1 KiB.
	(
		for i in $(seq 60); do
			if ((i % 2)); then src=B; else src=A; fi
			dd if="$BATS_TEST_TMPDIR/$src" of="$MNT/t/p/c" bs=1k status=none || echo "write $i failed" >>"$OUT/writer"
		done
		touch "$BATS_TEST_TMPDIR/writer.done"
	) 3>&- &
	PIDS+=($!)
	local r
	for r in $(seq 4); do
		(
			n=0
			while ! [ -e "$BATS_TEST_TMPDIR/writer.done" ] || [ "$n" -lt 20 ]; do
				n=$((n + 1))
				c=$(cat "$MNT/t/p/c") || { echo "read failed" >>"$OUT/reader$r"; continue; }
				case $c in
				*A*B* | *B*A*) echo "mixed read" >>"$OUT/reader$r" ;;
				*) [ "${#c}" -eq "$size" ] || echo "short read: ${#c}" >>"$OUT/reader$r" ;;
				esac
			done
		) 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run bash -c 'shopt -s nullglob; cat "$1"/*' _ "$OUT"
	assert_output ''
	run ver "$MNT/t/p/c"
	assert_output 61
}

@test "concurrent appenders of multi-write lines: every line lands whole" {
	local w
	for w in $(seq 20); do
		(
			letter=$(printf "\\$(printf %03o $((64 + w)))")
			line=$(head -c 1023 /dev/zero | tr '\0' "$letter")
			printf '%s\n' "$line" |
				dd of="$MNT/t/p/log" bs=256 oflag=append conv=notrunc status=none
		) 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run wc -l <"$MNT/t/p/log"
	assert_output 20
	run awk 'length($0) != 1023 || $0 !~ ("^" substr($0, 1, 1) "+$")' "$MNT/t/p/log"
	assert_output ''
	run bash -c 'cut -c1 "$1" | sort -u | wc -l' _ "$MNT/t/p/log"
	assert_output 20
	run ver "$MNT/t/p/log"
	assert_output 20
}

@test "producers write one marker per item while a reader prunes dead ones: no live marker is lost" {
	local P=10 N=20 done_flag="$BATS_TEST_TMPDIR/producers.done"
	# The producers: P processes, each registering N live and N dead items.
	(
		pids=()
		for w in $(seq "$P"); do
			(
				for j in $(seq "$N"); do
					touch "$MNT/t/p/live-$w-$j" "$MNT/t/p/dead-$w-$j"
				done
			) &
			pids+=($!)
		done
		wait "${pids[@]}"
		touch "$done_flag"
	) 3>&- &
	PIDS+=($!)
	# The reader: list, remove what is dead, until the producers are done
	# and one last pass has run.
	(
		while :; do
			last=0
			[ -e "$done_flag" ] && last=1
			for f in "$MNT/t/p"/dead-*; do
				[ -e "$f" ] && rm -f "$f"
			done
			[ "$last" -eq 1 ] && break
		done
	) 3>&- &
	PIDS+=($!)
	wait "${PIDS[@]}" || true
	run bash -c 'ls "$1" | grep -c "^live-"' _ "$MNT/t/p"
	assert_output $((P * N))
	run bash -c 'ls "$1" | grep -c "^dead-"' _ "$MNT/t/p"
	assert_output 0
	run stat_of children
	assert_output $((P * N))
	local w j missing=0
	for w in $(seq "$P"); do
		for j in $(seq "$N"); do
			[ -e "$MNT/t/p/live-$w-$j" ] || missing=$((missing + 1))
		done
	done
	assert_equal "$missing" 0
}

@test "max_children under concurrency: exactly the ceiling is admitted and .stats matches ls" {
	# No tenant share: the ceiling alone, reached from both tenants.
	statefs_remount -o max_children=30,tenant_max_children=0
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/u/a"
	local i dirs=("$MNT/t/a" "$MNT/t/b" "$MNT/u/a")
	for i in $(seq 50); do
		(py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))' \
			"${dirs[i % 3]}/c$i" >"$OUT/$i") 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	# 33 creates in t (a and b), 17 in u.  The tenant layout admits each
	# tenant against the ceiling as if it were the store alone: t gets
	# 30, u all 17.
	local ok=30 refused=20
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		ok=47 refused=3
	fi
	run tally
	assert_output "ENOSPC=$refused OK=$ok"
	run bash -c 'find "$1" -mindepth 3 -type f | wc -l' _ "$MNT"
	assert_output "$ok"
	run stat_of children
	assert_output "$ok"
	run stat_of links
	assert_output "$ok"
}

@test "parent_quota under concurrency: exactly the quota is admitted" {
	statefs_remount -o parent_quota=10
	mkdir -p "$MNT/t/p"
	local i
	for i in $(seq 30); do
		(py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))' \
			"$MNT/t/p/c$i" >"$OUT/$i") 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run tally
	assert_output 'EDQUOT=20 OK=10'
	run bash -c 'ls "$1" | wc -l' _ "$MNT/t/p"
	assert_output 10
	run stat_of children
	assert_output 10
}

@test "max_tenants under concurrency: exactly the ceiling is admitted" {
	statefs_remount -o max_tenants=5
	local i
	for i in $(seq 20); do
		(py_errno 'os.mkdir(sys.argv[1])' "$MNT/t$i" >"$OUT/$i") 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run tally
	assert_output 'ENOSPC=15 OK=5'
	run bash -c 'ls "$1" | wc -l' _ "$MNT"
	assert_output 5
	run stat_of tenants
	assert_output 5
}

@test "a child passed back and forth by concurrent mv exists exactly once" {
	mkdir "$MNT/t/q"
	echo token >"$MNT/t/p/c"
	local w
	for w in $(seq 10); do
		(
			for _ in $(seq 10); do
				mv "$MNT/t/p/c" "$MNT/t/q/c" 2>/dev/null
				mv "$MNT/t/q/c" "$MNT/t/p/c" 2>/dev/null
			done
		) 3>&- &
		PIDS+=($!)
	done
	wait "${PIDS[@]}" || true
	run bash -c 'cat "$1"/t/*/c' _ "$MNT"
	assert_output token
	run stat_of children
	assert_output 1
	run stat_of links
	assert_output 1
}

@test "leave racing admissions: no child survives in a departed parent" {
	local w
	for w in $(seq 10); do
		(
			for j in $(seq 20); do
				touch "$MNT/t/p/c-$w-$j" 2>/dev/null
			done
		) 3>&- &
		PIDS+=($!)
	done
	sleep 0.1
	rmdir "$MNT/t/p"
	wait "${PIDS[@]}" || true
	run ls "$MNT/t"
	assert_output ''
	run stat_of children
	assert_output 0
	run stat_of links
	assert_output 0
}

# --- threads sharing one open file ----------------------------------------------
#
# Threads that share a descriptor send the daemon requests for one open file
# at once.  shared_fd KIND N runs N reads (or writes) per thread on one
# descriptor of the file KIND names, from six threads, and prints "ok" or
# what went wrong; the daemon must survive it (the teardown fails a test
# whose daemon died from a signal).

shared_fd() {
	python3 - "$MNT" "$1" "$2" <<'PY'
import errno, os, re, sys, threading
mnt, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad = []
def note(what):
    if len(bad) < 5:
        bad.append(what)
def run(fns):
    ths = [threading.Thread(target=f) for f in fns]
    for t in ths: t.start()
    return ths
def join(ths):
    for t in ths: t.join()

if kind == "drain":
    # Reads at offset 0 take the state anew; a drain starts and the clock
    # moves meanwhile, so the text changes under the readers.
    fd = os.open(mnt + "/.drain", os.O_RDONLY)
    text = re.compile(rb"(ready|draining [0-9]+|drained)\n")
    def reader(off):
        def go():
            for _ in range(n):
                try:
                    d = os.pread(fd, 64, off)
                except OSError as e:
                    return note("read at %d: %s" % (off, errno.errorcode[e.errno]))
                if off == 0 and not text.fullmatch(d):
                    note("read at 0 gave %r" % d)
                if off and d and not d.endswith(b"\n"):
                    note("read at %d gave %r" % (off, d))
        return go
    ths = run([reader(o) for o in (0, 0, 0, 0, 2, 3)])
    with open(mnt + "/.drain", "w") as w: w.write("1\n")
    for _ in range(20):
        with open(mnt + "/.clock", "w") as c: c.write("7\n")
    join(ths)
    os.close(fd)
elif kind in ("stats", "snapshot", "clock"):
    # Made at open: every piece any thread reads is the same text.
    fd = os.open(mnt + "/." + kind, os.O_RDONLY)
    whole = os.pread(fd, 1 << 20, 0)
    def reader(off):
        def go():
            for i in range(n):
                o = (off * 7 + i * 13) % (len(whole) + 2)
                try:
                    d = os.pread(fd, 17, o)
                except OSError as e:
                    return note("read: %s" % errno.errorcode[e.errno])
                if d != whole[o:o + 17]:
                    note("read at %d gave %r, not %r" % (o, d, whole[o:o + 17]))
        return go
    ths = run([reader(o) for o in range(6)])
    for i in range(50):
        os.mkdir("%s/t/q%d" % (mnt, i))
    join(ths)
    os.close(fd)
elif kind == "events":
    # Every line is handed out once, to one of the readers.
    fd = os.open(mnt + "/t/.events", os.O_RDONLY | os.O_NONBLOCK)
    got = []
    lock = threading.Lock()
    done = threading.Event()
    def reader():
        while True:
            try:
                d = os.read(fd, 4096)
            except OSError as e:
                if e.errno != errno.EAGAIN:
                    return note("read: %s" % errno.errorcode[e.errno])
                if done.is_set():
                    return
                continue
            with lock:
                got.append(d)
    ths = run([reader for _ in range(6)])
    for i in range(n):
        os.mkdir("%s/t/q%d" % (mnt, i))
    # A line may wait for the cache invalidations of its transition; the
    # readers drain everything that is there before they stop.
    for _ in range(2000):
        with lock:
            if b"".join(got).count(b"\n") >= n:
                break
        threading.Event().wait(0.01)
    done.set()
    join(ths)
    lines = b"".join(got).count(b"\n")
    if lines != n:
        note("%d lines read for %d joins" % (lines, n))
    os.close(fd)
elif kind == "depart":
    # Each write is one departure; all of them land.
    fd = os.open(mnt + "/t/.depart", os.O_WRONLY)
    def writer(k):
        def go():
            for i in range(n):
                try:
                    os.write(fd, b"gone-%d-%d\n" % (k, i))
                except OSError as e:
                    return note("write: %s" % errno.errorcode[e.errno])
        return go
    join(run([writer(k) for k in range(6)]))
    os.close(fd)
elif kind == "child":
    # Two threads write 8-byte blocks, one truncates, one reads, one
    # fsyncs, one closes dups: every read and the result are whole blocks.
    fd = os.open(mnt + "/t/p/c", os.O_RDWR | os.O_TRUNC)
    def whole(d):
        return len(d) % 8 == 0 and all(d[i:i + 8] == d[i:i + 1] * 8
                                       for i in range(0, len(d), 8))
    def step(f):
        def go():
            for i in range(n):
                try:
                    f(i)
                except OSError as e:
                    return note("%s: %s" % (f.__name__, errno.errorcode[e.errno]))
        return go
    def write0(i): os.pwrite(fd, bytes([97 + i % 26]) * 8, 0)
    def write8(i): os.pwrite(fd, bytes([65 + i % 26]) * 8, 8)
    def trunc(i): os.ftruncate(fd, 8 * (i % 3))
    def read(i):
        d = os.pread(fd, 64, 0)
        if not whole(d):
            note("read gave %r" % d)
    def sync(i): os.fsync(fd)
    def dupclose(i): os.close(os.dup(fd))
    join(run([step(f) for f in (write0, write8, trunc, read, sync, dupclose)]))
    os.close(fd)
    d = open(mnt + "/t/p/c", "rb").read()
    if not whole(d):
        note("published %r" % d)
print("ok" if not bad else "; ".join(bad))
PY
}

@test "threads sharing one .drain descriptor read whole texts while a drain starts, and the daemon survives" {
	statefs_remount -o testclock,drain_window=1000
	mkdir -p "$MNT/t/p"
	echo keep >"$MNT/t/p/c"
	run shared_fd drain 3000
	assert_output ok
	run cat "$MNT/.drain"
	assert_output --regexp '^draining [0-9]+$'
	run cat "$MNT/t/p/c"
	assert_output keep
}

@test "threads sharing one .stats, .snapshot or .clock descriptor all read the text made at open" {
	statefs_remount -o testclock
	mkdir -p "$MNT/t/p"
	echo keep >"$MNT/t/p/c"
	local kind
	for kind in stats snapshot clock; do
		run shared_fd "$kind" 500
		assert_output ok
		rmdir "$MNT"/t/q*
	done
	run stat_of children
	assert_output 1
}

@test "threads sharing one .events descriptor: every line is read once" {
	mkdir -p "$MNT/t/p"
	run shared_fd events 200
	assert_output ok
	run stat_of parents
	assert_output 201
}

@test "threads sharing one .depart descriptor: every departure lands" {
	mkdir -p "$MNT/t/p"
	run shared_fd depart 50
	assert_output ok
	run stat_of tombstones
	assert_output 300
}

@test "threads sharing one child descriptor write, truncate, read, fsync and close: whole blocks only" {
	mkdir -p "$MNT/t/p"
	echo keep >"$MNT/t/p/c"
	run shared_fd child 500
	assert_output ok
	run stat_of children
	assert_output 1
}

# race_admissions MNT SECONDS create|mkdir: while other processes make the
# parent t/P leave (rmdir, .depart) and come back, one process admits
# unique children into it (create) or is the only one to join it (mkdir),
# for SECONDS.  Prints each call that failed and yet changed the store: a
# failed create whose child has a 'create' line in .events, or a mkdir
# call during which the store counted more joins than the call made (the
# kernel repeats a mkdir answered ESTALE).
race_admissions() {
	python3 - "$@" <<'PY'
import os, sys, time, errno, select, multiprocessing as mp
M, DUR, MODE = sys.argv[1], float(sys.argv[2]), sys.argv[3]
T = M + "/t"
def joins():
    with open(M + "/.stats") as f:
        for l in f:
            if l.startswith("joins "): return int(l.split()[1])
def remover(kind, stop):
    while not stop.is_set():
        try:
            if kind == "rmdir": os.rmdir(T + "/P")
            elif kind == "rejoin": os.mkdir(T + "/P")
            else:
                with open(T + "/.depart", "w") as f: f.write("P\n")
        except OSError: pass
def reader(fd, stop, out):
    # Reads all along, so the stream never falls behind.
    data, idle = b"", 0
    while idle < 5 or not stop.is_set():
        if select.select([fd], [], [], 0.2)[0]: data += os.read(fd, 1 << 20); idle = 0
        else: idle += 1
    out.send(data)
if __name__ == "__main__":
    os.makedirs(T + "/P", exist_ok=True)
    ev = os.open(M + "/.events", os.O_RDONLY)
    stop, evstop = mp.Event(), mp.Event()
    got, give = mp.Pipe(False)
    rd = mp.Process(target=reader, args=(ev, evstop, give))
    rd.start()
    kinds = ("rmdir", "depart", "rejoin") if MODE == "create" else ("rmdir", "depart")
    ps = [mp.Process(target=remover, args=(k, stop)) for k in kinds]
    for p in ps: p.start()
    failed, bad, i, end = [], [], 0, time.time() + DUR
    while time.time() < end:
        i += 1
        if MODE == "create":
            name = "c%d" % i
            try: os.close(os.open(T + "/P/" + name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except OSError as e: failed.append((name, errno.errorcode[e.errno]))
        else:
            j0 = joins()
            try: os.mkdir(T + "/P"); r = "OK"
            except OSError as e: r = errno.errorcode[e.errno]
            d = joins() - j0
            if d > (1 if r == "OK" else 0): bad.append("mkdir %s, joins during the call: %d" % (r, d))
    stop.set()
    for p in ps: p.join()
    evstop.set()
    data = got.recv()
    rd.join()
    created = set(l.split("\t")[4] for l in data.decode().splitlines() if l.split("\t")[1:2] == ["create"])
    if "overflow" in data.decode().split("\n"): print("events overflowed")
    bad += ["create %s failed with %s, admitted" % (n, e) for n, e in failed if n in created]
    for b in bad[:10]: print(b)
PY
}

@test "a create racing its parent's leave either succeeds or leaves no trace" {
	run race_admissions "$MNT" 3 create
	assert_output ''
}

@test "a mkdir racing the parent's leave joins once, and only when it succeeds" {
	run race_admissions "$MNT" 3 mkdir
	assert_output ''
}
