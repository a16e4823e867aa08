#!/usr/bin/env bats
# CONTRACT section 6, the event stream: MNT/.events and MNT/T/.events read
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

@test "ln and mv are reported at the destination, with its generation" {
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
	assert_output "$(evlines link t b c 2 1 rename t b e 2 2 join t z - 1 -)"
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
# once the daemon's cache thread has passed it (README, Watching), which
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
