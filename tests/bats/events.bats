#!/usr/bin/env bats
# statefs(8), WATCHING, the event stream: MNT/.events and MNT/T/.events read
# like a pipe that never ends; each open starts at the present; each
# transition in scope adds one line
#   SEQ \t OP \t TENANT \t PARENT \t CHILD \t GENERATION \t VERSION
# with "-" for an empty field.  GENERATION is the parent's generation.
#
# A reader is opened before the operations (events_bg opens the file
# synchronously, then copies N lines in the background); tests compare the
# lines without their sequence numbers (cut -f2-) and, where it matters,
# end with a sentinel operation so that a missing or extra line shows.

load helpers

setup() {
	statefs_mount
	OUT="$BATS_TEST_TMPDIR/events"
}

teardown() {
	bg_teardown
}

# seqs_increase FILE: the first field of every line is a number, and the
# numbers strictly increase.
seqs_increase() {
	awk -F'\t' '
		$1 !~ /^[0-9]+$/ { print "bad sequence number: " $0; bad = 1 }
		NR > 1 && $1 + 0 <= prev { print "not increasing: " $0; bad = 1 }
		{ prev = $1 + 0 }
		END { exit bad }' "$1"
}

@test ".events is a 0444 file at the root and in each tenant, listed by ls -a; parents have none" {
	mkdir -p "$MNT/t/p"
	run stat -c %a "$MNT/.events" "$MNT/t/.events"
	assert_success
	assert_output $'444\n444'
	run ls -A "$MNT"
	assert_line .events
	run ls -A "$MNT/t"
	assert_line .events
	run stat "$MNT/t/p/.events"
	assert_failure
	assert_output --partial 'No such file or directory'
}

@test "writing to .events is refused" {
	run bash -c 'echo 1 >"$1/.events"' _ "$MNT"
	assert_failure
}

@test "tenant mkdir, parent join, leave and tenant cleanup" {
	events_bg "$OUT" 4
	mkdir "$MNT/t"
	mkdir "$MNT/t/p"
	rmdir "$MNT/t/p"
	rmdir "$MNT/t"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines \
		join t - - - - \
		join t p - 1 - \
		leave t p - 1 - \
		cleanup t - - - -)"
	run seqs_increase "$OUT"
	assert_success
}

@test "a rejoin's join line carries the new generation" {
	mkdir -p "$MNT/t/p"
	rmdir "$MNT/t/p"
	events_bg "$OUT" 2
	mkdir "$MNT/t/p"
	rmdir "$MNT/t/p"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines join t p - 2 - leave t p - 2 -)"
}

@test "create, publications and unlink of a child carry the parent's generation and the version" {
	mkdir -p "$MNT/t/p"
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p" # generation 2
	events_bg "$OUT" 5
	touch "$MNT/t/p/c"
	echo x >"$MNT/t/p/c"
	echo y >>"$MNT/t/p/c"
	rm "$MNT/t/p/c"
	mkdir "$MNT/t/z"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines \
		create t p c 2 0 \
		write t p c 2 1 \
		write t p c 2 2 \
		unlink t p c 2 2 \
		join t z - 1 -)"
	run seqs_increase "$OUT"
	assert_success
}

@test "echo > a new child is one create and one write line" {
	mkdir -p "$MNT/t/p"
	events_bg "$OUT" 3
	echo hello >"$MNT/t/p/c"
	mkdir "$MNT/t/z"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines create t p c 1 0 write t p c 1 1 join t z - 1 -)"
}

@test "ln and mv name the destination, with its generation, then the source" {
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	rmdir "$MNT/t/b"
	mkdir "$MNT/t/b" # generation 2
	echo x >"$MNT/t/a/c"
	echo y >"$MNT/t/a/d"
	echo z >>"$MNT/t/a/d"
	events_bg "$OUT" 3
	ln "$MNT/t/a/c" "$MNT/t/b/c"
	mv "$MNT/t/a/d" "$MNT/t/b/e"
	mkdir "$MNT/t/z"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(printf '%s\t' link t b c 2 1 a; echo c
		printf '%s\t' rename t b e 2 2 a; echo d
		evlines join t z - 1 -)"
}

@test "rmdir of a parent with children is one leave line" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/a" "$MNT/t/p/b"
	events_bg "$OUT" 2
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines leave t p - 1 - join t p - 2 -)"
}

@test ".depart of a live parent and of a parent that never joined" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/a"
	events_bg "$OUT" 3
	echo p >"$MNT/t/.depart"
	echo q >"$MNT/t/.depart"
	mkdir "$MNT/t/q"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines depart t p - 1 - depart t q - 0 - join t q - 1 -)"
}

@test "tenant cleanup of a tenant with content is one cleanup line" {
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	echo x >"$MNT/t/p/c"
	events_bg "$OUT" 2
	rmdir "$MNT/t"
	mkdir "$MNT/u"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines cleanup t - - - - join u - - - -)"
}

@test "a child's and a parent's expiry (testclock)" {
	statefs_remount -o testclock
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	touch "$MNT/t/p/d"
	setfattr -n user.statefs.ttl -v 1 "$MNT/t/p/c"
	setfattr -n user.statefs.ttl -v 2 "$MNT/t/p"
	events_bg "$OUT" 3
	advance 1000
	advance 1000
	mkdir "$MNT/t/z"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines expire t p c 1 1 expire t p - 1 - join t z - 1 -)"
}

@test "a failed operation adds no line" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	events_bg "$OUT" 1
	run mkdir "$MNT/t/p"
	assert_failure
	run bash -c 'set -C; echo y >"$1/t/p/c"' _ "$MNT"
	assert_failure
	run rm "$MNT/t/p/nope"
	assert_failure
	mkdir "$MNT/t/z"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines join t z - 1 -)"
}

@test "each open starts at the present" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	events_bg "$OUT" 1
	mkdir "$MNT/t/q"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines join t q - 1 -)"
	events_bg "$OUT" 1
	mkdir "$MNT/t/r"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines join t r - 1 -)"
}

# Embedded only: a shared store numbers each tenant's lines by its own log,
# and the root's by its order of all tenants (list_watch.bats): a line's
# two numbers differ.
# bats test_tags=embedded-only
@test "a tenant's .events shows only that tenant; the root's shows all, with the same sequence numbers" {
	mkdir "$MNT/a" "$MNT/b"
	events_bg "$OUT.a" 3 "$MNT/a"
	events_bg "$OUT.root" 5
	mkdir "$MNT/a/p"
	mkdir "$MNT/b/p"
	touch "$MNT/b/p/c"
	echo x >"$MNT/a/p/c"
	events_wait
	run cut -f2- "$OUT.root"
	assert_output "$(evlines \
		join a p - 1 - \
		join b p - 1 - \
		create b p c 1 0 \
		create a p c 1 0 \
		write a p c 1 1)"
	run cut -f2- "$OUT.a"
	assert_output "$(evlines join a p - 1 - create a p c 1 0 write a p c 1 1)"
	run seqs_increase "$OUT.root"
	assert_success
	# The tenant's lines are the root's lines of that tenant, sequence
	# numbers included.
	run diff <(awk -F'\t' '$3 == "a"' "$OUT.root") "$OUT.a"
	assert_success
}

@test "a blocking read waits for the next line" {
	timeout 5 head -n 1 "$MNT/.events" >"$OUT" 2>/dev/null 3>&- &
	local pid=$!
	BG_PIDS+=("$pid")
	sleep 1
	# No transition yet: the reader is still waiting, with nothing read.
	kill -0 "$pid"
	[ ! -s "$OUT" ]
	mkdir "$MNT/t"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(evlines join t - - - -)"
}

@test "blocked readers do not tie up the daemon's worker threads" {
	local i
	for i in $(seq 16); do
		events_bg "$OUT.$i" 1
	done
	sleep 0.5
	run timeout 5 mkdir "$MNT/t"
	assert_success
	run timeout 5 ls "$MNT"
	assert_output t
	events_wait
	for i in $(seq 16); do
		run cut -f2- "$OUT.$i"
		assert_output "$(evlines join t - - - -)"
	done
}

@test "O_NONBLOCK: EAGAIN when nothing is pending, then the line" {
	run python3 -c '
import os, sys
fd = os.open(sys.argv[1] + "/.events", os.O_RDONLY | os.O_NONBLOCK)
try:
    os.read(fd, 4096)
    print("read something")
except BlockingIOError:
    print("EAGAIN")
os.mkdir(sys.argv[1] + "/t")
print(os.read(fd, 4096).decode().split("\t", 1)[1], end="")
try:
    os.read(fd, 4096)
    print("read something")
except BlockingIOError:
    print("EAGAIN")
' "$MNT"
	assert_success
	assert_output "EAGAIN
$(evlines join t - - - -)
EAGAIN"
}

@test "poll and select: not readable while idle, readable after a transition" {
	run python3 -c '
import os, sys, select
fd = os.open(sys.argv[1] + "/.events", os.O_RDONLY)
po = select.poll()
po.register(fd, select.POLLIN)
print("idle", po.poll(200))
r, _, _ = select.select([fd], [], [], 0.2)
print("select idle", r)
os.mkdir(sys.argv[1] + "/t")
ev = po.poll(2000)
print("after", bool(ev) and bool(ev[0][1] & select.POLLIN))
r, _, _ = select.select([fd], [], [], 2)
print("select after", r == [fd])
print(os.read(fd, 4096).decode().split("\t")[1])
print("drained", po.poll(200))
' "$MNT"
	assert_success
	assert_output "idle []
select idle []
after True
select after True
join
drained []"
}

# overflow_run N OUT: open MNT/.events without reading it, create N
# children of t/p as fast as possible, then mkdir t/z and read every line up
# to z's join into OUT.  Prints the seconds the creates took.
#
# A reader falls behind what it may read, and a line is handed out only
# once the daemon's cache thread has passed it (statefs(8), WATCHING), which
# under load may be a while after the transition.  So before the stalled
# reader reads, a second reader opened after the creates waits for z's
# join: once it has it, every create is the stalled reader's to read.
overflow_run() {
	python3 -c '
import os, sys, time, signal
mnt, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
signal.alarm(100)
fd = os.open(mnt + "/.events", os.O_RDONLY)
t0 = time.monotonic()
for i in range(n):
    os.close(os.open("%s/t/p/c%d" % (mnt, i), os.O_CREAT | os.O_WRONLY, 0o644))
took = time.monotonic() - t0
passed = os.open(mnt + "/.events", os.O_RDONLY)
os.mkdir(mnt + "/t/z")
seen = b""
while b"\tjoin\tt\tz\t" not in seen:
    chunk = os.read(passed, 65536)
    if not chunk:
        break
    seen += chunk
os.close(passed)
lines, rest, done = [], b"", False
while not done:
    chunk = os.read(fd, 65536)
    if not chunk:
        lines.append("EOF")
        break
    rest += chunk
    *full, rest = rest.split(b"\n")
    for l in full:
        lines.append(l.decode())
        f = l.split(b"\t")
        if len(f) > 3 and f[1] == b"join" and f[3] == b"z":
            done = True
with open(out, "w") as o:
    o.write("\n".join(lines) + "\n")
print("%.0f" % took)
' "$MNT" "$1" "$2"
}

@test "a reader more than 4096 lines behind gets one overflow line, then continues" {
	mkdir -p "$MNT/t/p"
	run overflow_run 5000 "$OUT"
	assert_success
	run head -n 1 "$OUT"
	assert_output overflow
	run grep -c '^overflow$' "$OUT"
	assert_output 1
	run tail -n 1 "$OUT"
	assert_output --regexp "^[0-9]+	join	t	z	-	1	-\$"
	# After the overflow line: well-formed lines in order, some of the
	# creates (not all 5000: it fell behind), the newest ones, contiguous.
	tail -n +2 "$OUT" >"$OUT.rest"
	run seqs_increase "$OUT.rest"
	assert_success
	local creates
	creates=$(grep -c $'\tcreate\tt\tp\tc' "$OUT.rest")
	[ "$creates" -ge 1 ]
	[ "$creates" -le 4096 ]
	run awk -F'\t' -v n=5000 -v k="$creates" '
		$2 == "create" { want = "c" (n - k + i++); if ($5 != want) { print "got " $5 " want " want; bad = 1 } }
		END { exit bad }' "$OUT.rest"
	assert_success
}

@test "a burst of 10000 creates with a stalled reader is not slowed down by it" {
	mkdir -p "$MNT/t/p"
	run overflow_run 10000 "$OUT"
	assert_success
	[ "$output" -lt 60 ]
	run grep -c '^overflow$' "$OUT"
	assert_output 1
	run stat_of children
	assert_output 10000
}

@test "while read is a complete, ordered change feed of a tenant" {
	mkdir -p "$MNT/acme/w"
	timeout 5 bash -c '
		while read -r seq op t p c g v; do
			echo "$op $t $p $c $g $v"
			[ "$op" = unlink ] && break
		done <"$1/acme/.events"' _ "$MNT" >"$OUT" 2>"$OUT.err" 3>&- &
	local pid=$! i sh
	BG_PIDS+=("$pid")
	# Act once the loop's shell has the feed open.
	for i in $(seq 100); do
		sh=$(pgrep -P "$pid" | head -n 1)
		[ -n "$sh" ] && readlink "/proc/$sh/fd/"* 2>/dev/null | grep -q 'acme/\.events$' && break
		sleep 0.05
	done
	mkdir "$MNT/other"
	echo running >"$MNT/acme/w/job"
	echo 'done' >"$MNT/acme/w/job"
	rm "$MNT/acme/w/job"
	events_wait
	cat "$OUT.err" >&2
	run cat "$OUT"
	assert_output "create acme w job 1 0
write acme w job 1 1
write acme w job 1 2
unlink acme w job 1 2"
}

# renameat2 FROM TO FLAGS: rename(2) with flags (1 RENAME_NOREPLACE,
# 2 RENAME_EXCHANGE) through python's ctypes (coreutils' mv has no
# --exchange before 9.5); prints OK or the errno name.
renameat2() {
	python3 -c '
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(),
                   int(sys.argv[3]))
print("OK" if r == 0 else errno.errorcode[ctypes.get_errno()])' "$@"
}

@test "mv onto a child unlinks it first; an exchange is its own line with both names" {
	mkdir -p "$MNT/t/A" "$MNT/t/B"
	echo 1 >"$MNT/t/A/x"
	echo 2 >"$MNT/t/A/y"
	echo 3 >"$MNT/t/B/z"
	echo 3 >>"$MNT/t/B/z"
	# As events_bg, with a bound of 60 s in place of 5: two python3
	# starts take seconds on a loaded machine (more through a version
	# manager's shim), and a head killed by its timeout writes nothing.
	exec 9<"$MNT/.events"
	timeout 60 head -n 6 <&9 >"$OUT" 2>"$OUT.err" 9<&- 3>&- &
	BG_PIDS+=($!)
	exec 9<&-
	mv "$MNT/t/A/x" "$MNT/t/B/x2"
	mv "$MNT/t/A/y" "$MNT/t/B/z"
	ln "$MNT/t/B/x2" "$MNT/t/A/lnk"
	run renameat2 "$MNT/t/A/lnk" "$MNT/t/B/z" 2
	assert_output OK
	run renameat2 "$MNT/t/A/none" "$MNT/t/B/z" 2
	assert_output ENOENT
	mkdir "$MNT/t/zz"
	events_wait
	run cut -f2- "$OUT"
	assert_output "$(printf '%s\t' rename t B x2 1 1 A; echo x
		evlines unlink t B z 1 2
		printf '%s\t' rename t B z 1 1 A; echo y
		printf '%s\t' link t A lnk 1 1 B; echo x2
		printf '%s\t' exchange t B z 1 1 A; echo lnk
		evlines join t zz - 1 -)"
	# The exchange traded the states: B/z is x's (the one x2 and lnk had).
	[ "$(stat -c %i "$MNT/t/B/z")" = "$(stat -c %i "$MNT/t/B/x2")" ]
	[ "$(cat "$MNT/t/A/lnk")" = 2 ]
}

# replay_check EVENTS SNAPSHOT: replay the lines of tenant t on a model of
# the tree (each line must apply to what the lines before it built) and
# compare the result with the snapshot: the same parents and generations,
# the same names, the names that share a state in the model share an
# inode, each state's version, and nlink = the rows of that state.
# Prints every contradiction (exit 1) or one summary line.
replay_check() {
	python3 - "$@" <<'PY'
import sys
evfile, snapfile = sys.argv[1:3]
bad = []
def err(msg):
    if len(bad) < 30:
        bad.append(msg)
parents = {}            # name -> generation
names = {}              # (p, c) -> state id
version = {}            # state id -> version
nstates = 0
counts = {}
text = open(evfile).read()
if not text.endswith("\n"):
    err("the event file does not end with a whole line")
for n, l in enumerate(text.splitlines(), 1):
    f = l.split("\t")
    if f[0] in ("overflow", "lost") or (len(f) > 1 and f[1] == "lost"):
        print("line %d: %s: the replay would be incomplete" % (n, l))
        sys.exit(1)
    op = f[1] if len(f) > 1 else "?"
    two = op in ("link", "rename", "exchange")
    if len(f) != (9 if two else 7) or f[2] != "t":
        err("line %d malformed: %r" % (n, l))
        continue
    counts[op] = counts.get(op, 0) + 1
    _, op, t, p, c, g, v = f[:7]
    at = "line %d %r" % (n, l)
    if c == "-":
        if op == "join":
            if p in parents:
                err(at + ": join of a present parent")
            parents[p] = g
        elif op in ("leave", "depart", "expire"):
            if p in parents and parents[p] != g:
                err(at + ": removal of another generation (%s)" % parents[p])
            if p not in parents and op != "depart":
                err(at + ": removal of an absent parent")
            parents.pop(p, None)
            for k in [k for k in names if k[0] == p]:
                del names[k]
        else:
            err(at + ": unexpected")
        continue
    if parents.get(p) != g:
        err(at + ": a child line of an absent parent or of another generation")
        continue
    v = int(v)
    k = (p, c)
    if two:
        fk = (f[7], f[8])
        if fk[0] not in parents or fk not in names:
            err(at + ": its source is absent")
            continue
    if op == "create":
        if k in names or v != 0:
            err(at + ": create of a present child")
        nstates += 1
        names[k] = nstates
        version[nstates] = 0
    elif op == "write":
        if k not in names:
            err(at + ": write of an absent child")
        elif v not in (version[names[k]], version[names[k]] + 1):
            err(at + ": write after version %d" % version[names[k]])
        else:
            version[names[k]] = v
    elif op in ("unlink", "expire"):
        if k not in names or version[names[k]] != v:
            err(at + ": removal of an absent child (or of another version)")
        names.pop(k, None)
    elif op in ("link", "rename"):
        if k in names:
            err(at + ": %s onto a present child" % op)
        if version[names[fk]] != v:
            err(at + ": version %d" % version[names[fk]])
        names[k] = names[fk]
        if op == "rename":
            del names[fk]
    elif op == "exchange":
        if k not in names:
            err(at + ": exchange with an absent child")
            continue
        names[k], names[fk] = names[fk], names[k]
        if version[names[k]] != v:
            err(at + ": version %d" % version[names[k]])
    else:
        err(at + ": unexpected")

rows = [r.split("\t") for r in open(snapfile).read().splitlines()[1:]]
sp = {r[2]: r[4] for r in rows if r[0] == "parent"}
sc = {(r[2], r[3]): r for r in rows if r[0] == "child"}
if sp != parents:
    err("parents: snapshot %r, replay %r" % (sorted(sp.items()), sorted(parents.items())))
for k in sorted(set(names) - set(sc)):
    err("the replay has %s/%s, the snapshot does not" % k)
for k in sorted(set(sc) - set(names)):
    err("the snapshot has %s/%s, the replay does not" % k)
ino = {}
for k in sorted(set(sc) & set(names)):
    r, sid = sc[k], names[k]
    if ino.setdefault(sid, r[9]) != r[9]:
        err("%s/%s: inode %s, but the replay shares its state with inode %s" % (k + (r[9], ino[sid])))
    if int(r[5]) != version[sid]:
        err("%s/%s: version %s, replay %d" % (k + (r[5], version[sid])))
    if int(r[7]) != sum(1 for x in names.values() if x == sid):
        err("%s/%s: nlink %s, the replay has %d names" % (k + (r[7], sum(1 for x in names.values() if x == sid))))
if len(set(ino.values())) != len(ino):
    err("two states of the replay are one inode")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("replayed %d lines (%s) to %d parents, %d children" % (
    sum(counts.values()), " ".join("%s=%d" % x for x in sorted(counts.items())),
    len(parents), len(names)))
PY
}

# workload SEED OPS WRITERS WRITES: OPS random transitions of every kind on
# tenant t (P0..P3, c0..c4) through $MNT, mounted with -o testclock, then
# OPS/4 that only add and move children, with WRITERS processes publishing
# WRITES times each meanwhile; records t's
# .events (from before the first operation to the sentinel join of zz) in
# $OUT and the tenant's .snapshot after it in $OUT.snap.
workload() {
	python3 - "$MNT" "$OUT" "$@" <<'PY'
import ctypes, errno, multiprocessing as mp, os, random, select, sys, time
mnt, out, seed, ops, nwriters, writes = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
T = mnt + "/t"
P = ["P%d" % i for i in range(4)]
C = ["c%d" % i for i in range(5)]
libc = ctypes.CDLL(None, use_errno=True)

def path(rnd):
    return "%s/%s/%s" % (T, rnd.choice(P), rnd.choice(C))

def attempt(f, *a):
    try:
        f(*a)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.EEXIST, errno.ESTALE,
                           errno.ENOTEMPTY, errno.EFBIG, errno.EAGAIN):
            raise

def publish(p, flags, data):
    fd = os.open(p, os.O_WRONLY | flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)

def writer(n, s):
    rnd = random.Random(s)
    for _ in range(writes):
        attempt(publish, path(rnd), rnd.choice([os.O_TRUNC, os.O_APPEND]), b"w")

def step(rnd, grow=False):
    x = rnd.random() * (0.73 if grow else 1)
    if x < 0.30:
        attempt(publish, path(rnd), os.O_CREAT | rnd.choice([os.O_TRUNC, os.O_APPEND]), b"ab")
    elif x < 0.35:
        attempt(os.truncate, path(rnd), rnd.randrange(4))
    elif x < 0.41:
        attempt(os.unlink, path(rnd))
    elif x < 0.53:
        attempt(os.link, path(rnd), path(rnd))
    elif x < 0.73:
        fl = rnd.choice([0, 0, 1, 2])   # NOREPLACE, EXCHANGE
        a, b = path(rnd).encode(), path(rnd).encode()
        if libc.renameat2(-100, a, -100, b, fl) != 0:
            e = ctypes.get_errno()
            if e not in (errno.ENOENT, errno.EEXIST, errno.ESTALE):
                raise OSError(e, "renameat2")
    elif x < 0.80:
        attempt(os.mkdir, "%s/%s" % (T, rnd.choice(P)))
    elif x < 0.825:
        attempt(os.rmdir, "%s/%s" % (T, rnd.choice(P)))
    elif x < 0.835:
        with open(T + "/.depart", "w") as f:
            f.write(rnd.choice(P) + "\n")
    elif x < 0.875:
        who = "%s/%s" % (T, rnd.choice(P)) if rnd.random() < 0.3 else path(rnd)
        attempt(os.setxattr, who, "user.statefs.ttl", b"0.0%d" % rnd.randrange(1, 10))
    else:
        with open(mnt + "/.clock", "w") as f:
            f.write("%d\n" % rnd.randrange(1, 6))

os.mkdir(T)
ev = os.open(T + "/.events", os.O_RDONLY | os.O_NONBLOCK)
for p in P:
    os.mkdir("%s/%s" % (T, p))
ws = [mp.Process(target=writer, args=(i, seed * 100 + i)) for i in range(nwriters)]
for w in ws:
    w.start()
rnd = random.Random(seed)
for _ in range(ops):
    step(rnd)
# Then only admissions, publications, links, renames and exchanges, so
# the tree compared at the end is not empty.
for p in P:
    attempt(os.mkdir, "%s/%s" % (T, p))
for _ in range(ops // 4):
    step(rnd, True)
for w in ws:
    w.join()
os.mkdir(T + "/zz")
data, deadline = b"", time.monotonic() + 30
while b"\tjoin\tt\tzz\t" not in data and time.monotonic() < deadline:
    select.select([ev], [], [], 1)
    try:
        data += os.read(ev, 1 << 20)
    except BlockingIOError:
        pass
os.close(ev)
open(out, "wb").write(data)
with open(T + "/.snapshot") as f:
    open(out + ".snap", "w").write(f.read())
PY
}

@test "replaying .events rebuilds the tree .snapshot shows, after a random workload with racing writers" {
	statefs_unmount
	statefs_mount -o testclock
	local seed
	for seed in 1 2 3 4 5; do
		run workload "$seed" 2000 2 300
		assert_success
		grep -q $'\tjoin\tt\tzz\t' "$OUT" || fail "no sentinel line in $OUT"
		# Fewer lines than a reader may fall behind: no overflow.
		[ "$(wc -l <"$OUT")" -lt 4000 ]
		run replay_check "$OUT" "$OUT.snap"
		echo "seed $seed: $output"
		assert_success
		rmdir "$MNT/t"
	done
}

@test "no line of a child follows its parent's leave, depart or expiry while publications race them" {
	statefs_unmount
	statefs_mount -o testclock
	mkdir -p "$MNT/t/P"
	run python3 - "$MNT" <<'PY'
import multiprocessing as mp, os, select, sys
mnt = sys.argv[1]
T = mnt + "/t"

done = mp.Event()

def writer(k):
    i = 0
    while not done.is_set():
        i += 1
        try:
            fd = os.open("%s/P/c%d" % (T, (i * 7 + k) % 8),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, b"x")
            finally:
                os.close(fd)
        except OSError:
            pass

def leaver():
    for i in range(1500):
        try:
            if i % 3 == 0:
                os.rmdir(T + "/P")
            elif i % 3 == 1:
                with open(T + "/.depart", "w") as f:
                    f.write("P\n")
            else:
                os.setxattr(T + "/P", "user.statefs.ttl", b"0.001")
                with open(mnt + "/.clock", "w") as f:
                    f.write("2\n")
        except OSError:
            pass
        try:
            os.mkdir(T + "/P")
            # A fuller bucket: a longer cascade for the writers to hit.
            for c in range(8):
                os.close(os.open("%s/P/c%d" % (T, c), os.O_CREAT | os.O_WRONLY, 0o644))
        except OSError:
            pass

def reader(conn):
    fd = os.open(T + "/.events", os.O_RDONLY)
    conn.send("open")
    rest = b""
    # Per generation of P: removed or not; an overflow forgets them all.
    removed, writes, removals, overflows, bad = set(), 0, 0, 0, []
    while True:
        rest += os.read(fd, 1 << 20)
        *lines, rest = rest.split(b"\n")
        for l in lines:
            f = l.decode().split("\t")
            if f[0] == "overflow":
                overflows += 1
                removed.clear()
                continue
            op, p, c, g = f[1], f[3], f[4], f[5]
            if op == "join" and p == "zz":
                conn.send((writes, removals, overflows, bad[:5], len(bad)))
                return
            if p != "P":
                continue
            if c == "-" and op in ("leave", "depart", "expire"):
                removed.add(g)
                removals += 1
            elif c != "-":
                writes += op == "write"
                if g in removed:
                    bad.append(l.decode())

a, b = mp.Pipe()
r = mp.Process(target=reader, args=(b,))
r.start()
a.recv()
ws = [mp.Process(target=writer, args=(k,)) for k in range(2)]
for p in ws:
    p.start()
leaver()
done.set()
for p in ws:
    p.join()
os.mkdir(T + "/zz")
if not a.poll(60):
    print("the reader did not see the sentinel")
    sys.exit(1)
writes, removals, overflows, bad, nbad = a.recv()
r.join()
print("writes %d removals %d overflows %d; child lines after a removal: %d %r" %
      (writes, removals, overflows, nbad, bad))
sys.exit(1 if nbad or not removals or not writes else 0)
PY
	echo "$output"
	assert_success
}
