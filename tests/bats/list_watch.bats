#!/usr/bin/env bats
# statefs(8), WATCHING, list then watch: .snapshot's second line is
#   seq \t N \t - \t - \t - \t - \t - \t - \t - \t -
# N the number of the last event line the snapshot includes; an open
# .events whose first read is at offset N (lseek, dd skip=N
# iflag=skip_bytes) starts at the first line numbered N or more, after
# one "overflow" line when the log no longer holds N; a number yet to
# come waits for it.  With shell tools only, through a tenant's files
# (the same on both stores: a tenant's numbers are one order).

load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

setup() {
	statefs_mount
	OUT="$BATS_TEST_TMPDIR/events"
	CONSUMER=
}

teardown() {
	local rc=0
	# A consumer runs in a group of its own (setsid): its dd too.
	[ -n "$CONSUMER" ] && kill -KILL -- "-$CONSUMER" 2>/dev/null
	bg_teardown || rc=1
	# The redis-server a test started itself (redis_start), on either
	# store: statefs_unmount stops only the mounts' own, on a shared
	# store's run.
	redis_stop_all
	return "$rc"
}

# snap_seq FILE: the seq line's number.
snap_seq() {
	awk -F'\t' '$1 == "seq" { print $2 }' "$1"
}

# follow FROM DIR OUT: copy DIR/.events from number FROM into OUT in the
# background (dd, for at most 20 s).
follow() {
	timeout 20 dd if="$2/.events" iflag=skip_bytes skip="$1" bs=64K \
		status=none >"$3" 2>"$3.err" 3>&- &
	BG_PIDS+=($!)
}

# until_line OUT REGEX: wait (10 s at most) for a line of OUT to match.
until_line() {
	local i
	for i in $(seq 200); do
		grep -qE -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "no line matching '$2' in $1: $(cat "$1")"
}

@test "the seq line comes right after the header, at the root and in a tenant; kind filters skip it" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	run sed -n 2p "$MNT/t/.snapshot"
	assert_output --regexp $'^seq\t[0-9]+(\t-){8}$'
	run sed -n 2p "$MNT/.snapshot"
	assert_output --regexp $'^seq\t([0-9]+|-)(\t-){8}$'
	run awk -F'\t' '$1 == "child" { print $4 }' "$MNT/t/.snapshot"
	assert_output c
	# The tenant's number is its last line's.
	local n
	n=$(snap_seq "$MNT/t/.snapshot")
	follow 1 "$MNT/t" "$OUT"
	until_line "$OUT" $'\twrite\tt\tp\tc\t'
	run tail -n 1 "$OUT"
	assert_output --regexp "^$n	write	t	p	c	"
}

@test "a snapshot's seq then .events from the next number replays onto a later snapshot exactly, under a writer" {
	mkdir -p "$MNT/t/p"
	local i
	for i in $(seq 20); do echo "$i" >"$MNT/t/p/c$i"; done
	# A writer creates and removes children while the snapshot is taken.
	(
		for i in $(seq 21 220); do
			: >"$MNT/t/p/c$i"
			[ $((i % 3)) -eq 0 ] && rm "$MNT/t/p/c$((i - 5))"
		done
		mkdir "$MNT/t/end"
	) 3>&- &
	BG_PIDS+=($!)
	sleep 0.1
	cat "$MNT/t/.snapshot" >"$BATS_TEST_TMPDIR/s1"
	local n
	n=$(snap_seq "$BATS_TEST_TMPDIR/s1")
	follow $((n + 1)) "$MNT/t" "$OUT"
	until_line "$OUT" $'\tjoin\tt\tend\t'
	cat "$MNT/t/.snapshot" >"$BATS_TEST_TMPDIR/s2"
	# Numbers: from n + 1 on, each once, in order, with no gap (one
	# tenant, one order) and no overflow.
	run awk -F'\t' -v n="$n" '
		$1 !~ /^[0-9]+$/ { print "not a line: " $0; bad = 1 }
		$1 != n + NR { print "line " NR " is " $1 ", not " n + NR; bad = 1 }
		END { exit bad }' "$OUT"
	assert_success
	# Replayed onto the first snapshot's children: the second's.
	awk -F'\t' '
		FILENAME == ARGV[1] && $1 == "child" { c[$4] = 1; next }
		FILENAME == ARGV[2] && $2 == "create" { c[$5] = 1 }
		FILENAME == ARGV[2] && $2 == "unlink" { delete c[$5] }
		END { for (k in c) print k }' "$BATS_TEST_TMPDIR/s1" "$OUT" |
		sort >"$BATS_TEST_TMPDIR/replayed"
	run diff "$BATS_TEST_TMPDIR/replayed" \
		<(awk -F'\t' '$1 == "child" { print $4 }' "$BATS_TEST_TMPDIR/s2" | sort)
	assert_success
	[ "$(wc -l <"$BATS_TEST_TMPDIR/replayed")" -gt 100 ]
}

@test "no seek is the present; a later seek forward changes nothing, one back into the last read gets its bytes again" {
	mkdir -p "$MNT/t/p"
	echo old >"$MNT/t/p/old"
	run python3 -c '
import os, sys
fd = os.open(sys.argv[1] + "/t/.events", os.O_RDONLY)
os.mkdir(sys.argv[1] + "/t/c")
first = os.read(fd, 65536)
print(first.decode(), end="")
os.lseek(fd, 1 << 20, os.SEEK_SET)
os.mkdir(sys.argv[1] + "/t/d")
print(os.read(fd, 65536).decode(), end="")
pos = os.lseek(fd, 0, os.SEEK_CUR)
os.lseek(fd, pos - 4, os.SEEK_SET)
print(os.read(fd, 65536).decode(), end="")
' "$MNT"
	assert_success
	run cut -f2-4 <<<"$output"
	assert_output $'join\tt\tc\njoin\tt\td\n-'
	# bash's read, which reads a chunk and seeks back past its line.
	timeout 5 bash -c '
		exec 9<"$1/t/.events"
		mkdir "$1/t/e" "$1/t/f"
		read -r l1 <&9; read -r l2 <&9
		printf "%s\n" "$l1" "$l2"' _ "$MNT" >"$OUT"
	run cut -f2-4 "$OUT"
	assert_output $'join\tt\te\njoin\tt\tf'
}

@test "a number yet to come waits for it" {
	mkdir -p "$MNT/t/p"
	local n
	n=$(snap_seq "$MNT/t/.snapshot")
	follow $((n + 3)) "$MNT/t" "$OUT"
	sleep 0.3
	mkdir "$MNT/t/a"
	mkdir "$MNT/t/b"
	sleep 0.3
	run cat "$OUT"
	assert_output ''
	mkdir "$MNT/t/c"
	mkdir "$MNT/t/d"
	until_line "$OUT" $'\tjoin\tt\td\t'
	run cut -f1-4 "$OUT"
	assert_output "$((n + 3))	join	t	c
$((n + 4))	join	t	d"
}

@test "a number the log no longer holds gives one overflow line, then the oldest line it has" {
	mkdir -p "$MNT/t"
	# More lines than the log keeps (65536): a join and a leave each.
	python3 -c '
import os, sys
d = sys.argv[1] + "/t/"
for i in range(33000):
    os.mkdir(d + "p")
    os.rmdir(d + "p")
os.mkdir(d + "end")
' "$MNT"
	local n
	n=$(snap_seq "$MNT/t/.snapshot")
	follow 1 "$MNT/t" "$OUT"
	until_line "$OUT" $'\tjoin\tt\tend\t'
	run head -n 1 "$OUT"
	assert_output overflow
	run grep -c '^overflow$' "$OUT"
	assert_output 1
	# Then contiguous numbers up to the last, the oldest far past 1.
	run awk -F'\t' -v n="$n" '
		NR == 2 { if ($1 <= 1) { print "oldest " $1; bad = 1 } }
		NR > 2 && $1 != prev + 1 { print "gap at " $0; bad = 1 }
		NR > 1 { prev = $1 }
		END { if (prev != n) { print "last " prev " not " n; bad = 1 }; exit bad }' "$OUT"
	assert_success
}

@test "a reader started at a number sees no line its reader may not see" {
	statefs_remount -o allow_other,default_permissions
	# Each line is judged as its tenant was when it was appended.
	mkdir -m 0700 "$MNT/closed"
	mkdir -m 0755 "$MNT/open"
	mkdir "$MNT/open/p" "$MNT/closed/p"
	mkdir "$MNT/open/q" "$MNT/closed/q"
	run as_nobody timeout 2 dd if="$MNT/.events" iflag=skip_bytes skip=1 \
		bs=64K status=none
	refute_output --partial closed
	assert_output --partial $'join\topen\tq'
}

# shared_mount: a mount of the shared store at $REDIS_SOCK, whatever
# STATEFS_STORE says; MNT names it.
shared_mount() {
	STATEFS_STORE=embedded statefs_mount -o "store=unix:$REDIS_SOCK" "$@"
}

# unmount_newest: unmount this test's newest mount and wait for its
# daemon (its store, when shared, stays).
unmount_newest() {
	local last=$((${#STATEFS_MOUNTS[@]} - 1))
	# shellcheck disable=SC2086
	_statefs_unmount_one ${STATEFS_MOUNTS[last]}
	unset "STATEFS_MOUNTS[$last]"
}

@test "a shared store's tenant lines from before a mount came, or before its remount, by a seek before the first read" {
	redis_start
	shared_mount
	local a=$MNT
	mkdir -p "$a/t/p" "$a/t/q"
	echo 1 >"$a/t/p/c1"
	ln "$a/t/p/c1" "$a/t/q/l1"
	echo 2 >>"$a/t/p/c1"
	mv "$a/t/q/l1" "$a/t/p/c2"
	# Lines while the tenant was closed are its owner's alone.
	chmod 0700 "$a/t"
	mkdir "$a/t/secret"
	chmod 0755 "$a/t"
	rmdir "$a/t/q"
	mkdir "$a/t/end"
	local n
	n=$(snap_seq "$a/t/.snapshot")
	# What this mount's own log shows, from the first number.
	follow 1 "$a/t" "$OUT.a"
	until_line "$OUT.a" $'\tjoin\tt\tend\t'
	# A mount made after them: its log never had them; Redis's has.
	shared_mount -o allow_other,default_permissions
	local b=$MNT
	follow 1 "$b/t" "$OUT.b"
	until_line "$OUT.b" $'\tjoin\tt\tend\t'
	run diff "$OUT.a" "$OUT.b"
	assert_success
	grep -q $'\tjoin\tt\tsecret\t' "$OUT.b"
	run as_nobody timeout 2 dd if="$b/t/.events" iflag=skip_bytes skip=1 \
		bs=64K status=none
	assert_output "$(grep -v $'\tsecret\t' "$OUT.a")"
	# From the middle, and after a remount of the first.
	bg_stop || true
	unmount_newest
	unmount_newest
	shared_mount
	follow 4 "$MNT/t" "$OUT.c"
	until_line "$OUT.c" $'\tjoin\tt\tend\t'
	run diff <(awk -F'\t' '$1 >= 4' "$OUT.a") "$OUT.c"
	assert_success
	# Then the stream goes on live, with the next number.
	mkdir "$MNT/t/after"
	until_line "$OUT.c" $'\tjoin\tt\tafter\t'
	run tail -n 1 "$OUT.c"
	assert_output "$((n + 1))	join	t	after	-	1	-"
	[ "$(head -n 1 "$OUT.a" | cut -f1-3)" = $'1\tjoin\tt' ]
}

@test "numbers with no line (an attribute's change) between a snapshot and the next line lose nothing" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	local n
	n=$(snap_seq "$MNT/t/.snapshot")
	follow $((n + 1)) "$MNT/t" "$OUT"
	sleep 0.2
	# On a shared store each takes a number and shows no line.
	chmod 0600 "$MNT/t/p/c"
	touch -m -d @1000000000 "$MNT/t/p"
	mkdir "$MNT/t/x"
	until_line "$OUT" $'\tjoin\tt\tx\t'
	run cut -f2-4 "$OUT"
	assert_output $'join\tt\tx'
	# And so for a reader started after them, at the number after n.
	follow $((n + 1)) "$MNT/t" "$OUT.2"
	until_line "$OUT.2" $'\tjoin\tt\tx\t'
	run diff "$OUT" "$OUT.2"
	assert_success
}

# mirror_script FILE: the man page's consumer (statefs(8), "A consumer: a
# directory kept in step"), as the page shows it, into FILE.
mirror_script() {
	awk 'prev == "```" && $0 == "#!/bin/sh" { on = 1 }
		on && $0 == "```" { exit }
		on { print }
		{ prev = $0 }' "$BATS_TEST_DIRNAME/../../docs/statefs.8.scd" |
		sed 's/\\\\/\\/g' >"$1"
	grep -q '^dd if="$T/.events"' "$1" && sh -n "$1"
}

# tree_of DIR: the consumer's directory as "PARENT" and "PARENT/CHILD" lines.
tree_of() {
	(cd "$1" && find . -mindepth 1 ! -name '.*' | sed 's|^\./||' | sort)
}

# listed SNAPSHOT: its parents and children, the same way.
listed() {
	awk -F'\t' '$1 == "parent" { print $3 } $1 == "child" { print $3 "/" $4 }' \
		"$1" | sort
}

@test "the man page's consumer keeps a directory of a tenant's children in step, killed and run again under a writer" {
	local script=$BATS_TEST_TMPDIR/statefs-mirror D=$BATS_TEST_TMPDIR/children
	mirror_script "$script"
	local i
	mkdir -p "$MNT/t/p1" "$MNT/t/p2" "$MNT/t/p3"
	for i in $(seq 10); do echo "$i" >"$MNT/t/p1/old$i"; done
	# Its first run lists; every later one resumes (the list stays).
	setsid sh "$script" "$MNT/t" "$D" 2>>"$D.err" 3>&- &
	CONSUMER=$!
	for i in $(seq 200); do
		[ -s "$D/.position" ] && break
		sleep 0.05
	done
	local listed_at
	listed_at=$(cat "$D/.position")
	cmp "$D/.list" <(cat "$MNT/t/.snapshot")
	# A writer: creates (most of them stay, so a line lost shows),
	# removals, moves (onto a child too), links, a parent that leaves
	# with its children and joins again.
	(
		for i in $(seq 240); do
			p=p$((i % 3 + 1)) q=p$(((i + 1) % 3 + 1))
			: >"$MNT/t/$p/c$i"
			case $((i % 8)) in
			1) rm -f "$MNT/t/$q/c$((i - 5))" ;;
			2) mv "$MNT/t/$p/c$i" "$MNT/t/$q/m$i" ;;
			3) ln "$MNT/t/$p/c$i" "$MNT/t/$q/l$i" ;;
			4) mv -f "$MNT/t/$p/c$i" "$MNT/t/$q/c$((i - 3))" ;;
			7) [ $((i % 48)) = 7 ] && rmdir "$MNT/t/p3" &&
				mkdir "$MNT/t/p3" ;;
			esac
		done 2>/dev/null
		mkdir "$MNT/t/end"
	) 3>&- &
	local writer=$! kills=0
	# The consumer, killed (SIGKILL, its whole group) and run again.
	while kill -0 "$writer" 2>/dev/null; do
		sleep "0.$((RANDOM % 4 + 1))"
		kill -KILL -- "-$CONSUMER" 2>/dev/null || true
		wait "$CONSUMER" 2>/dev/null || true
		kills=$((kills + 1))
		setsid sh "$script" "$MNT/t" "$D" 2>>"$D.err" 3>&- &
		CONSUMER=$!
	done
	wait "$writer" || true
	cat "$MNT/t/.snapshot" >"$BATS_TEST_TMPDIR/final"
	local n
	n=$(snap_seq "$BATS_TEST_TMPDIR/final")
	for i in $(seq 600); do
		[ "$(cat "$D/.position" 2>/dev/null)" = "$n" ] && break
		sleep 0.1
	done
	kill -KILL -- "-$CONSUMER" 2>/dev/null || true
	wait "$CONSUMER" 2>/dev/null || true
	CONSUMER=
	run diff <(listed "$BATS_TEST_TMPDIR/final") <(tree_of "$D")
	assert_success
	# It did follow: many children, several runs that resumed (none
	# listed again), no line lost.
	[ "$(tree_of "$D" | grep -c /)" -gt 50 ]
	[ "$kills" -ge 3 ]
	[ "$(snap_seq "$D/.list")" = "$listed_at" ]
	run cat "$D.err"
	assert_output ''
	# And it stopped at the last line.
	[ "$(cat "$D/.position")" = "$n" ]
}
