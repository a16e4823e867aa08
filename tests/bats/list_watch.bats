#!/usr/bin/env bats
# statefs(8), WATCHING, list then watch: .snapshot's second line is
#   seq \t N \t - \t - \t - \t - \t - \t - \t - \t -
# N the number of the last event line the snapshot includes; an open
# .events whose first read is at offset N (lseek, dd skip=N
# iflag=skip_bytes) starts at the first line numbered N or more, after
# one "overflow" line when the log no longer holds N; a number yet to
# come waits for it.  With shell tools only, through a tenant's files
# (the same on both stores: a tenant's numbers are one order), and
# through the root's (one order of all tenants: the embedded store's,
# and one Redis's).

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

# A store of the tenant layout (STATEFS_STORE_LAYOUT=tenant: each tenant
# in its own slot) has no order of all tenants: true when it is one and
# @1, its root snapshot's seq row, says "-" (as a Redis Cluster's, below);
# the rest of a test of that order does not apply to it.
tenant_unordered() {
	[ "${STATEFS_STORE_LAYOUT:-}" = tenant ] && [ "$1" = - ]
}

@test "the seq line comes right after the header, at the root and in a tenant; kind filters skip it" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	run sed -n 2p "$MNT/t/.snapshot"
	assert_output --regexp $'^seq\t[0-9]+(\t-){8}$'
	run sed -n 2p "$MNT/.snapshot"
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		assert_output --regexp $'^seq(\t-){9}$' # no order of all tenants
	else
		assert_output --regexp $'^seq\t[0-9]+(\t-){8}$'
	fi
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

# replay_children SNAPSHOT EVENTS: the root snapshot's children
# ("TENANT/PARENT/CHILD"), with the creates and unlinks of EVENTS
# replayed onto them, sorted.
replay_children() {
	awk -F'\t' '
		FILENAME == ARGV[1] && $1 == "child" { c[$2 "/" $3 "/" $4] = 1; next }
		FILENAME == ARGV[2] && $2 == "create" { c[$3 "/" $4 "/" $5] = 1 }
		FILENAME == ARGV[2] && $2 == "unlink" { delete c[$3 "/" $4 "/" $5] }
		END { for (k in c) print k }' "$1" "$2" | sort
}

# root_children SNAPSHOT: its children the same way.
root_children() {
	awk -F'\t' '$1 == "child" { print $2 "/" $3 "/" $4 }' "$1" | sort
}

# two_writers DIR: two tenants written at once (t/p, u/q), then DIR/t/end.
two_writers() {
	(
		local i t
		for t in t/p u/q; do
			(
				for i in $(seq 21 170); do
					: >"$1/$t/c$i"
					[ $((i % 3)) -eq 0 ] && rm "$1/$t/c$((i - 5))"
				done
			) &
		done
		wait
		mkdir "$1/t/end"
	) 3>&- &
	BG_PIDS+=($!)
}

@test "the root's seq then its .events from the next number replays onto a later root snapshot exactly, under writers in two tenants" {
	mkdir -p "$MNT/t/p" "$MNT/u/q"
	local i
	for i in $(seq 20); do echo "$i" >"$MNT/t/p/c$i"; echo "$i" >"$MNT/u/q/c$i"; done
	two_writers "$MNT"
	sleep 0.1
	cat "$MNT/.snapshot" >"$BATS_TEST_TMPDIR/s1"
	local n
	n=$(snap_seq "$BATS_TEST_TMPDIR/s1")
	tenant_unordered "$n" && return 0
	[[ $n =~ ^[0-9]+$ ]]
	follow $((n + 1)) "$MNT" "$OUT"
	until_line "$OUT" $'\tjoin\tt\tend\t'
	cat "$MNT/.snapshot" >"$BATS_TEST_TMPDIR/s2"
	# Numbers: past n, each once, rising, no overflow (one order of all
	# tenants; a shared store's changes with no line leave gaps).
	run awk -F'\t' -v n="$n" '
		$1 !~ /^[0-9]+$/ { print "not a line: " $0; bad = 1 }
		$1 + 0 <= prev + 0 || $1 + 0 <= n + 0 { print "line " NR " is " $1; bad = 1 }
		{ prev = $1 }
		END { exit bad }' "$OUT"
	assert_success
	# Both tenants' lines are there, interleaved.
	grep -q $'\tt\tp\t' "$OUT"
	grep -q $'\tu\tq\t' "$OUT"
	# Replayed onto the first snapshot's children: the second's.
	replay_children "$BATS_TEST_TMPDIR/s1" "$OUT" >"$BATS_TEST_TMPDIR/replayed"
	run diff "$BATS_TEST_TMPDIR/replayed" <(root_children "$BATS_TEST_TMPDIR/s2")
	assert_success
	[ "$(wc -l <"$BATS_TEST_TMPDIR/replayed")" -gt 200 ]
	# The second snapshot ends at the last line.
	[ "$(snap_seq "$BATS_TEST_TMPDIR/s2")" = "$(tail -n 1 "$OUT" | cut -f1)" ]
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

@test "a shared store's root lines from before a mount came, or before its remount, by a seek before the first read" {
	redis_start
	shared_mount
	local a=$MNT
	mkdir -p "$a/t/p" "$a/u/q" "$a/v"
	echo 1 >"$a/t/p/c1"
	echo 2 >"$a/u/q/c2"
	ln "$a/t/p/c1" "$a/t/p/l1"
	mv "$a/u/q/c2" "$a/u/q/m2"
	# Lines while a tenant was closed are its owner's alone.
	chmod 0700 "$a/u"
	mkdir "$a/u/secret"
	chmod 0755 "$a/u"
	rmdir "$a/v"
	mkdir "$a/t/end"
	local n
	n=$(snap_seq "$a/.snapshot")
	tenant_unordered "$n" && return 0
	follow 1 "$a" "$OUT.a"
	until_line "$OUT.a" $'\tjoin\tt\tend\t'
	[ "$(tail -n 1 "$OUT.a" | cut -f1)" = "$n" ]
	grep -q $'\tcleanup\tv\t' "$OUT.a"
	# A mount made after them: its log never had them; Redis's logs have.
	shared_mount -o allow_other,default_permissions
	local b=$MNT
	follow 1 "$b" "$OUT.b"
	until_line "$OUT.b" $'\tjoin\tt\tend\t'
	run diff "$OUT.a" "$OUT.b"
	assert_success
	run as_nobody timeout 2 dd if="$b/.events" iflag=skip_bytes skip=1 \
		bs=64K status=none
	assert_output "$(grep -v $'\tsecret\t' "$OUT.a")"
	# From the middle, and after a remount of the first.
	bg_stop || true
	unmount_newest
	unmount_newest
	shared_mount
	local mid
	mid=$(sed -n 5p "$OUT.a" | cut -f1)
	follow "$mid" "$MNT" "$OUT.c"
	until_line "$OUT.c" $'\tjoin\tt\tend\t'
	run diff <(awk -F'\t' -v m="$mid" '$1 >= m' "$OUT.a") "$OUT.c"
	assert_success
	# Then the stream goes on live, past n.
	mkdir "$MNT/u/after"
	until_line "$OUT.c" $'\tjoin\tu\tafter\t'
	run tail -n 1 "$OUT.c"
	assert_output --regexp "^[0-9]+	join	u	after	-	1	-\$"
	[ "$(tail -n 1 "$OUT.c" | cut -f1)" -gt "$n" ]
}

@test "two mounts of one shared store give the root's lines the same numbers, and the same root snapshot" {
	redis_start
	shared_mount
	local a=$MNT
	shared_mount
	local b=$MNT
	mkdir -p "$a/t/p" "$b/u/q"
	local i
	for i in $(seq 20); do echo "$i" >"$a/t/p/c$i"; echo "$i" >"$b/u/q/c$i"; done
	local n
	n=$(snap_seq "$b/.snapshot")
	tenant_unordered "$n" && return 0
	[[ $n =~ ^[0-9]+$ ]]
	follow $((n + 1)) "$a" "$OUT.a"
	follow $((n + 1)) "$b" "$OUT.b"
	# And a reader of the present, opened now: the same numbers.
	exec 9<"$b/.events"
	# One writer on each mount, each in its tenant.
	(
		for i in $(seq 21 120); do
			: >"$a/t/p/c$i"
			[ $((i % 4)) -eq 0 ] && rm "$a/t/p/c$((i - 5))"
		done &
		for i in $(seq 21 120); do
			: >"$b/u/q/c$i"
			[ $((i % 4)) -eq 0 ] && rm "$b/u/q/c$((i - 5))"
		done &
		wait
		mkdir "$a/t/end"
	) 3>&- &
	BG_PIDS+=($!)
	until_line "$OUT.a" $'\tjoin\tt\tend\t'
	until_line "$OUT.b" $'\tjoin\tt\tend\t'
	run diff "$OUT.a" "$OUT.b"
	assert_success
	grep -q $'\tu\tq\t' "$OUT.a"
	timeout 2 cat <&9 >"$OUT.p" || true
	exec 9<&-
	run diff "$OUT.a" "$OUT.p"
	assert_success
	# Once both have every change: one snapshot, seq line and all.
	python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$b/t"
	run diff <(cat "$a/.snapshot") <(cat "$b/.snapshot")
	assert_success
	[ "$(snap_seq "$a/.snapshot")" = "$(tail -n 1 "$OUT.a" | cut -f1)" ]
}

@test "a mount made while another writes in two tenants: its first root snapshot's seq, then its root .events, replay onto its later root snapshot" {
	redis_start
	shared_mount
	local a=$MNT
	mkdir -p "$a/t/p" "$a/u/q"
	local i
	for i in $(seq 20); do echo "$i" >"$a/t/p/c$i"; echo "$i" >"$a/u/q/c$i"; done
	two_writers "$a"
	sleep 0.2
	# Each tenant loaded at its own instant, the writers going on.
	shared_mount
	local b=$MNT
	cat "$b/.snapshot" >"$BATS_TEST_TMPDIR/s1"
	local n
	n=$(snap_seq "$BATS_TEST_TMPDIR/s1")
	tenant_unordered "$n" && return 0
	[[ $n =~ ^[0-9]+$ ]]
	follow $((n + 1)) "$b" "$OUT"
	until_line "$OUT" $'\tjoin\tt\tend\t'
	cat "$b/.snapshot" >"$BATS_TEST_TMPDIR/s2"
	run grep -c -v $'^[0-9]\+\t' "$OUT"
	assert_output 0
	replay_children "$BATS_TEST_TMPDIR/s1" "$OUT" >"$BATS_TEST_TMPDIR/replayed"
	run diff "$BATS_TEST_TMPDIR/replayed" <(root_children "$BATS_TEST_TMPDIR/s2")
	assert_success
	[ "$(wc -l <"$BATS_TEST_TMPDIR/replayed")" -gt 200 ]
}

@test "a mount with follow_idle loads every tenant for its root snapshot: its seq row is the store's number, its root lines are numbered as without it" {
	redis_start
	shared_mount -o follow_idle=0
	local a=$MNT
	mkdir -p "$a/t/p" "$a/u/q"
	echo x >"$a/u/q/c"
	shared_mount -o follow_idle=60
	local b=$MNT
	# b has used no tenant: its root snapshot loads both first, and
	# ends at the same number as a's, which follows every tenant.
	run diff <(cat "$a/.snapshot") <(cat "$b/.snapshot")
	assert_success
	local n
	n=$(snap_seq "$b/.snapshot")
	tenant_unordered "$n" && return 0
	[[ $n =~ ^[0-9]+$ ]]
	follow $((n + 1)) "$a" "$OUT.a"
	follow $((n + 1)) "$b" "$OUT.b"
	echo y >"$a/t/p/c"
	mkdir "$a/t/end"
	until_line "$OUT.a" $'\tjoin\tt\tend\t'
	until_line "$OUT.b" $'\tjoin\tt\tend\t'
	run diff "$OUT.a" "$OUT.b"
	assert_success
	# Replayed, b's lines from its snapshot's number end at its next one.
	python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$b/t"
	[ "$(snap_seq "$b/.snapshot")" = "$(tail -n 1 "$OUT.b" | cut -f1)" ]
}

@test "a store without one order of all tenants (entries without gseq, as a Redis Cluster's would be): the root's seq row says -, its lines show each tenant's numbers" {
	redis_start
	# The library with its store-wide order left out, loaded first (the
	# same version: the mount keeps it).
	sed 's/^local STORE_ORDER = true$/local STORE_ORDER = false/' \
		"$REDIS_LIBRARY" >"$BATS_TEST_TMPDIR/lib.lua"
	grep -q '^local STORE_ORDER = false$' "$BATS_TEST_TMPDIR/lib.lua"
	rcli -x FUNCTION LOAD REPLACE <"$BATS_TEST_TMPDIR/lib.lua" >/dev/null
	shared_mount
	mkdir -p "$MNT/t/p" "$MNT/u/q"
	[ -z "$(rcli HGET 'statefs:{statefs}:meta' gseq)" ]
	run sed -n 2p "$MNT/.snapshot"
	assert_output $'seq\t-\t-\t-\t-\t-\t-\t-\t-\t-'
	follow 1 "$MNT" "$OUT"
	until_line "$OUT" $'\tjoin\tu\tq\t'
	# (The two tenants' lines in the order this mount applied them.)
	run env LC_ALL=C sort "$OUT"
	assert_output $'1\tjoin\tt\t-\t-\t-\t-\n1\tjoin\tu\t-\t-\t-\t-\n2\tjoin\tt\tp\t-\t1\t-\n2\tjoin\tu\tq\t-\t1\t-'
	# A seek skips each tenant's lines below it.
	follow 2 "$MNT" "$OUT.2"
	until_line "$OUT.2" $'\tjoin\tt\tp\t'
	until_line "$OUT.2" $'\tjoin\tu\tq\t'
	run env LC_ALL=C sort "$OUT.2"
	assert_output $'2\tjoin\tt\tp\t-\t1\t-\n2\tjoin\tu\tq\t-\t1\t-'
}

@test "a store an older statefs made (entries without gseq): after the upgrade its root is numbered from 1, and a later mount's seek reads that from Redis" {
	redis_start
	# An older library: no store-wide order, a lower version (a mount of
	# this statefs replaces it).
	sed -e 's/^local STORE_ORDER = true$/local STORE_ORDER = false/' \
		-e 's/^local LIBVERSION = [0-9]*$/local LIBVERSION = 5/' \
		"$REDIS_LIBRARY" >"$BATS_TEST_TMPDIR/lib.lua"
	grep -q '^local LIBVERSION = 5$' "$BATS_TEST_TMPDIR/lib.lua"
	rcli -x FUNCTION LOAD REPLACE <"$BATS_TEST_TMPDIR/lib.lua" >/dev/null
	# What an older mount made: a tenant t with a parent p.
	local meta='statefs:{statefs}:meta' inst=0123456789abcdef
	[ "$(rcli FCALL sfs_init 1 "$meta" "" "" "" 5 "$inst" 0 | head -n 1)" = OK ]
	[ "$(rcli FCALL sfs_mkdir_tenant 1 "$meta" "$inst" old:1 "" t 0 0 493 | head -n 1)" = OK ]
	[ "$(rcli FCALL sfs_join 2 "$meta" 'statefs:{statefs.t1}:t' "$inst" old:2 "" p 0 0 493 | head -n 1)" = OK ]
	shared_mount
	local a=$MNT
	[ "$(rcli FCALL sfs_version 0)" -gt 5 ]
	[ "$(rcli HGET "$meta" gseq)" = 0 ]
	[ -d "$a/t/p" ]
	mkdir "$a/t/q" "$a/u"
	mkdir "$a/u/r"
	local n
	n=$(snap_seq "$a/.snapshot")
	[[ $n =~ ^[0-9]+$ ]]
	follow 1 "$a" "$OUT.a"
	until_line "$OUT.a" $'\tjoin\tu\tr\t'
	run cut -f1-4 "$OUT.a"
	# (u's first entry, then the root log's of it, 3, which shows no line.)
	assert_output $'1\tjoin\tt\tq\n2\tjoin\tu\t-\n4\tjoin\tu\tr'
	[ "$n" = 4 ]
	# A mount made after: its seek is served from the logs in Redis,
	# the older entries applied first.
	shared_mount
	follow 1 "$MNT" "$OUT.b"
	until_line "$OUT.b" $'\tjoin\tu\tr\t'
	run diff "$OUT.a" "$OUT.b"
	assert_success
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
	# The consumer, killed (SIGKILL, its whole group) and run again,
	# three times at least (a quick writer may be done before).
	while proc_alive "$writer" || [ "$kills" -lt 3 ]; do
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
