#!/usr/bin/env bats
# statefs(8), SPECIAL FILES, .snapshot: MNT/.snapshot and MNT/T/.snapshot are a
# consistent point-in-time listing taken when the file is opened, served
# from the open handle.  A header line, then one tab-separated line per
# node in scope:
#
#   kind tenant parent child generation version size nlink ttl_ms_left inode
#   tenant    T - - - - - - - INO
#   parent    T P - GEN - - - TTL_LEFT_OR_- INO
#   child     T P C GEN VERSION SIZE NLINK TTL_LEFT_OR_- INO   (one per link)
#   tombstone T P - GEN - - - TTL_LEFT -
#
# Lines come in name order (statefs(8), .snapshot): tenant by tenant, the
# tenant's line, each parent's followed by its children's, then its
# tombstones, each by name in byte order; tests that check other things
# compare sorted lines.

load helpers
# The test of three mounts of one shared store starts its own
# redis-server, whichever store the rest of the run uses.
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

setup() {
	statefs_mount -o testclock
	S="$BATS_TEST_TMPDIR/snap"
}

teardown() {
	local rc=0
	bg_teardown || rc=1
	redis_stop_all
	return "$rc"
}

HEADER=$'kind\ttenant\tparent\tchild\tgeneration\tversion\tsize\tnlink\tttl_ms_left\tinode'

# row FIELD...: one snapshot line (10 tab-separated fields).
row() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@"
}

# body FILE: the node lines of a snapshot (after its header and its seq
# line), sorted.
body() {
	tail -n +2 "$1" | grep -v $'^seq\t' | LC_ALL=C sort
}

# nodes FILE: a snapshot without its seq line, in its order.
nodes() {
	grep -v $'^seq\t' "$1"
}

ino() {
	stat -c %i "$1"
}

# snap_ok FILE: FILE starts with the header, then the seq line (a number,
# or "-", then eight "-"), and every other line has 10 fields, a known
# kind and numbers or "-" where they belong.
snap_ok() {
	awk -F'\t' -v h="$HEADER" '
		NR == 1 { if ($0 != h) { print "bad header: " $0; bad = 1 }; next }
		NR == 2 { if ($0 !~ /^seq\t([0-9]+|-)(\t-)(\t-)(\t-)(\t-)(\t-)(\t-)(\t-)(\t-)$/) { print "bad seq line: " $0; bad = 1 }; next }
		NF != 10 { print "not 10 fields: " $0; bad = 1; next }
		$1 !~ /^(tenant|parent|child|tombstone)$/ { print "bad kind: " $0; bad = 1 }
		{ for (i = 5; i <= 10; i++)
			if ($i !~ /^(-|[0-9]+)$/) { print "bad field " i ": " $0; bad = 1 } }
		END { if (NR < 2) { print "empty"; bad = 1 }; exit bad }' "$1"
}

# in_order FILE: a snapshot's lines after its header are in the order
# statefs(8) gives: keyed "TENANT RANK PARENT CHILD" (RANK 0 for the
# tenant's line, 1 for its parents' and children's, 2 for tombstones; "-"
# read as no name), the keys are unique and LC_ALL=C sort leaves them as
# they are (names hold no byte at or below the tab, so that is name by
# name, byte by byte).  Prints the first line out of order.
in_order() {
	tail -n +2 "$1" | grep -v $'^seq\t' | awk -F'\t' -v OFS='\t' '
		{ r = $1 == "tenant" ? 0 : $1 == "tombstone" ? 2 : 1
		  p = $3 == "-" ? "" : $3; c = $4 == "-" ? "" : $4
		  print $2, r, p, c }' >"$1.keys"
	LC_ALL=C sort -c -u "$1.keys" 2>&1
}

# --- the file ----------------------------------------------------------------

@test ".snapshot is a 0444 file at the root and in each tenant, listed by ls -a; parents have none" {
	mkdir -p "$MNT/t/p"
	run stat -c %a "$MNT/.snapshot" "$MNT/t/.snapshot"
	assert_success
	assert_output $'444\n444'
	run ls -A "$MNT"
	assert_line .snapshot
	run ls -A "$MNT/t"
	assert_line .snapshot
	run stat "$MNT/t/p/.snapshot"
	assert_failure
	assert_output --partial 'No such file or directory'
}

@test "writing to .snapshot is refused and changes nothing" {
	mkdir -p "$MNT/t/p"
	cat "$MNT/.snapshot" >"$S.1"
	run bash -c 'echo x >"$1/.snapshot"' _ "$MNT"
	assert_failure
	run bash -c 'echo x >"$1/t/.snapshot"' _ "$MNT"
	assert_failure
	cat "$MNT/.snapshot" >"$S.2"
	run diff "$S.1" "$S.2"
	assert_success
}

@test "the snapshot of an empty store is the header line and its seq line alone" {
	run cat "$MNT/.snapshot"
	assert_success
	assert_output "$HEADER"$'\n'"$(row seq "$(awk -F'\t' '$1 == "seq" { print $2 }' "$MNT/.snapshot")" - - - - - - - -)"
	assert_output --regexp $'\nseq\t([0-9]+|-)\t'
	# and it ends with a newline
	assert_equal "$(tail -c 1 "$MNT/.snapshot" | od -An -c | tr -d ' ')" '\n'
}

# --- the lines ---------------------------------------------------------------

@test "every kind of node, with generations, versions, sizes, leases and inodes" {
	statefs_remount -o testclock,tombstone_ttl=10
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/t/g"
	rmdir "$MNT/t/a"
	mkdir "$MNT/t/a"          # a: generation 2, no tombstone
	rmdir "$MNT/t/g"          # g: a tombstone of generation 1
	echo hello >"$MNT/t/a/c"  # version 1
	echo more >>"$MNT/t/a/c"  # version 2, 11 bytes
	touch "$MNT/t/b/e"        # version 0, empty
	set_ttl 5 "$MNT/t/a/c"
	set_ttl 7 "$MNT/t/b"
	mkdir "$MNT/u"
	advance 1000
	cat "$MNT/.snapshot" >"$S"
	run snap_ok "$S"
	assert_success
	assert_equal "$(head -n 1 "$S")" "$HEADER"
	run body "$S"
	assert_output "$({
		row tenant t - - - - - - - "$(ino "$MNT/t")"
		row tenant u - - - - - - - "$(ino "$MNT/u")"
		row parent t a - 2 - - - - "$(ino "$MNT/t/a")"
		row parent t b - 1 - - - 6000 "$(ino "$MNT/t/b")"
		row child t a c 2 2 11 1 4000 "$(ino "$MNT/t/a/c")"
		row child t b e 1 0 0 1 - "$(ino "$MNT/t/b/e")"
		row tombstone t g - 1 - - - 9000 -
	} | LC_ALL=C sort)"
}

@test "ttl_ms_left counts down exactly with the manual clock" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/c"
	set_ttl 2.5 "$MNT/t/p/c"
	set_ttl 10 "$MNT/t/p"
	advance 1234
	run awk -F'\t' '$1 == "child" || $1 == "parent" { print $1, $9 }' "$MNT/.snapshot"
	assert_line 'child 1266'
	assert_line 'parent 8766'
	advance 1265
	run awk -F'\t' '$1 == "child" { print $9 }' "$MNT/.snapshot"
	assert_output 1
}

@test "a tombstone's ttl_ms_left is the time until it ages out" {
	statefs_remount -o testclock,tombstone_ttl=3
	mkdir -p "$MNT/t/p"
	rmdir "$MNT/t/p"
	run awk -F'\t' '$1 == "tombstone" { print $3, $4, $5, $9, $10 }' "$MNT/.snapshot"
	assert_output 'p - 1 3000 -'
	advance 2999
	run awk -F'\t' '$1 == "tombstone" { print $9 }' "$MNT/.snapshot"
	assert_output 1
	advance 1
	run grep -c '^tombstone' "$MNT/.snapshot"
	assert_output 0
}

@test "a hard-linked child shows under each parent, with one inode and nlink 2" {
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	rmdir "$MNT/t/b"
	mkdir "$MNT/t/b" # generation 2
	echo shared >"$MNT/t/a/c"
	ln "$MNT/t/a/c" "$MNT/t/b/d"
	local i
	i=$(ino "$MNT/t/a/c")
	assert_equal "$(ino "$MNT/t/b/d")" "$i"
	run body <(awk -F'\t' 'NR == 1 || $1 == "child"' "$MNT/.snapshot")
	assert_output "$({
		row child t a c 1 1 7 2 - "$i"
		row child t b d 2 1 7 2 - "$i"
	} | LC_ALL=C sort)"
	rm "$MNT/t/a/c"
	run body <(awk -F'\t' 'NR == 1 || $1 == "child"' "$MNT/.snapshot")
	assert_output "$(row child t b d 2 1 7 1 - "$i")"
}

@test "a tenant's .snapshot has that tenant's lines only" {
	mkdir -p "$MNT/t/p" "$MNT/t/q" "$MNT/u/p" "$MNT/v"
	echo x >"$MNT/t/p/c"
	echo y >"$MNT/u/p/c"
	ln "$MNT/t/p/c" "$MNT/t/q/c"
	rmdir "$MNT/u/p"
	echo z >"$MNT/u/.depart"
	cat "$MNT/t/.snapshot" >"$S.t"
	cat "$MNT/.snapshot" >"$S.root"
	run snap_ok "$S.t"
	assert_success
	run awk -F'\t' 'NR > 1 && $1 != "seq" && $2 != "t"' "$S.t"
	assert_output ''
	# exactly the root snapshot's lines of tenant t
	run body "$S.t"
	assert_output "$(awk -F'\t' 'NR > 1 && $2 == "t"' "$S.root" | LC_ALL=C sort)"
	assert_equal "$(body "$S.t" | wc -l)" 5
	run body <(cat "$MNT/u/.snapshot")
	assert_output "$({
		row tenant u - - - - - - - "$(ino "$MNT/u")"
		row tombstone u p - 1 - - - 600000 -
		row tombstone u z - 0 - - - 600000 -
	} | LC_ALL=C sort)"
	run nodes "$MNT/v/.snapshot"
	assert_output "$HEADER"$'\n'"$(row tenant v - - - - - - - "$(ino "$MNT/v")")"
}

@test "expired and removed nodes are not listed" {
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	touch "$MNT/t/p/short" "$MNT/t/p/long" "$MNT/t/p/gone"
	set_ttl 1 "$MNT/t/p/short"
	set_ttl 5 "$MNT/t/p/long"
	set_ttl 2 "$MNT/t/q"
	rm "$MNT/t/p/gone"
	advance 2000
	run awk -F'\t' 'NR > 1 && $1 != "seq" { print $1, $3, $4 }' "$MNT/.snapshot"
	assert_output --partial 'child p long'
	refute_output --partial 'short'
	refute_output --partial 'gone'
	refute_output --partial 'parent q'
	# the expired parent left a tombstone, as a leave does
	assert_output --partial 'tombstone q -'
}

@test "each inode is stat's inode of that node, and the counts match .stats" {
	mkdir -p "$MNT/t/p" "$MNT/t/q" "$MNT/u/r"
	touch "$MNT/t/p/a" "$MNT/t/q/b" "$MNT/u/r/c"
	ln "$MNT/t/p/a" "$MNT/t/q/a2"
	cat "$MNT/.snapshot" >"$S"
	local kind t p c inode n=0
	while IFS=$'\t' read -r kind t p c _ _ _ _ _ inode; do
		case $kind in
		tenant) assert_equal "$inode" "$(ino "$MNT/$t")" ;;
		parent) assert_equal "$inode" "$(ino "$MNT/$t/$p")" ;;
		child) assert_equal "$inode" "$(ino "$MNT/$t/$p/$c")" ;;
		*) fail "unexpected line kind $kind" ;;
		esac
		n=$((n + 1))
	done < <(tail -n +2 "$S" | grep -v $'^seq\t')
	assert_equal "$n" 9
	assert_equal "$(grep -c '^tenant' "$S")" "$(stat_of tenants)"
	assert_equal "$(grep -c '^parent' "$S")" "$(stat_of parents)"
	assert_equal "$(grep -c '^child' "$S")" "$(stat_of links)"
	assert_equal "$(awk -F'\t' '$1 == "child" { print $10 }' "$S" | sort -u | wc -l)" \
		"$(stat_of children)"
}

@test "a large store: one line per node, read in many pieces" {
	mkdir -p "$MNT/t/p"
	local long
	long=$(printf 'n%.0s' $(seq 200))
	(cd "$MNT/t/p" && touch $(printf "${long}%d " $(seq 1000)))
	cat "$MNT/.snapshot" >"$S"
	run snap_ok "$S"
	assert_success
	[ "$(stat -c %s "$S")" -gt 200000 ]
	assert_equal "$(grep -c '^child' "$S")" 1000
	assert_equal "$(stat_of children)" 1000
	assert_equal "$(awk -F'\t' '$1 == "child" { print $4 }' "$S" | sort -u | wc -l)" 1000
	# read in 7-byte pieces: the same bytes
	python3 -c '
import sys
f = open(sys.argv[1], "rb", buffering=0)
out = b""
while True:
    b = f.read(7)
    if not b:
        break
    out += b
sys.stdout.buffer.write(out)' "$MNT/.snapshot" >"$S.small"
	run cmp "$S" "$S.small"
	assert_success
}

# --- order -------------------------------------------------------------------

@test "lines are sorted by tenant, parent and child name in byte order, tombstones after a tenant's parents" {
	statefs_remount -o testclock,tombstone_ttl=60
	local t p c
	# Names that a hash, a creation order or a locale would each order
	# differently: capitals, digits, '_' and '~', prefixes, UTF-8.
	for t in zeta B a-b a ab; do
		mkdir "$MNT/$t"
		for p in w9 W1 w10 _x w1 "caf$(printf '\xc3\xa9')" w; do
			mkdir "$MNT/$t/$p"
		done
		for c in 9 10 1 Z a a.b a-b ~x _; do
			: >"$MNT/$t/w1/$c"
		done
		ln "$MNT/$t/w1/a" "$MNT/$t/W1/b"
		echo gone-2 >"$MNT/$t/.depart"
		echo Gone-1 >"$MNT/$t/.depart"
		rmdir "$MNT/$t/w9"
	done
	cat "$MNT/.snapshot" >"$S"
	run in_order "$S"
	assert_success
	assert_output ''
	# One tenant, in full: its line, its parents and children, then its
	# tombstones.
	run awk -F'\t' '$2 == "a" { print $1, $3, $4 }' "$S"
	assert_output "tenant - -
parent W1 -
child W1 b
parent _x -
parent caf$(printf '\xc3\xa9') -
parent w -
parent w1 -
child w1 1
child w1 10
child w1 9
child w1 Z
child w1 _
child w1 a
child w1 a-b
child w1 a.b
child w1 ~x
parent w10 -
tombstone Gone-1 -
tombstone gone-2 -
tombstone w9 -"
	run awk -F'\t' '$1 == "tenant" { print $2 }' "$S"
	assert_output $'B\na\na-b\nab\nzeta'
	# A tenant's own snapshot: the same lines as the root's of it.
	cat "$MNT/a-b/.snapshot" >"$S.t"
	run in_order "$S.t"
	assert_success
	run diff <(awk -F'\t' 'NR == 1 || $2 == "a-b"' "$S") <(nodes "$S.t")
	assert_success
}

@test "unchanged children keep their place after the parent's table grows and shrinks" {
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	local i
	for i in $(seq 12); do echo "$i" >"$MNT/t/p/c$i"; done
	echo 1 >"$MNT/t/q/x"
	cat "$MNT/t/.snapshot" >"$S.1"
	run in_order "$S.1"
	assert_success
	# 300 children come and go: the table grows, then shrinks.
	(cd "$MNT/t/p" && touch $(printf 'x%d ' $(seq 300)) && rm x*)
	for i in $(seq 100); do mkdir "$MNT/t/j$i"; done
	for i in $(seq 100); do rmdir "$MNT/t/j$i"; done
	cat "$MNT/t/.snapshot" >"$S.2"
	# The tombstones of the j parents are the only new lines.
	run diff <(grep -v -e $'^tombstone\t' -e $'^seq\t' "$S.1") \
		<(grep -v -e $'^tombstone\t' -e $'^seq\t' "$S.2")
	assert_success
	run in_order "$S.2"
	assert_success
}

@test "three mounts of one shared store give the same snapshot, byte for byte" {
	redis_start
	local m
	for m in A B C; do
		STATEFS_STORE=embedded statefs_mount -o "store=unix:$REDIS_SOCK,testclock,tombstone_ttl=60"
		eval "$m=\$MNT"
	done
	# Changes from each mount, in an order no table keeps.
	# (Each mount first catches up with the others: fsync of a
	# directory.)
	mkdir "$A/u" "$B/v"
	local i
	for i in 7 3 11 1 9; do mkdir "$A/u/p$i"; done
	fsyncdir "$B/u"
	for i in $(seq 20 -1 1); do echo "$i" >"$B/u/p3/c$i"; done
	fsyncdir "$C/u"
	for i in 5 15 2; do rm "$C/u/p3/c$i"; done
	ln "$C/u/p3/c7" "$C/u/p9/c7"
	rmdir "$C/u/p11"
	mkdir "$C/v/q"
	fsyncdir "$B/u"
	mv "$B/u/p3/c8" "$B/u/p1/c8"
	echo late >"$B/u/.depart"
	fsyncdir "$A/v"
	touch "$A/v/q/z" "$A/v/q/y"
	fsyncdir "$A/u" "$B/u" "$C/u" "$A/v" "$B/v" "$C/v"
	for m in A B C; do
		cat "${!m}/u/.snapshot" >"$S.u.$m"
		cat "${!m}/.snapshot" >"$S.$m"
		run in_order "$S.$m"
		assert_success
	done
	[ "$(grep -c $'^child\tu\t' "$S.A")" = 18 ] || fail "$(cat "$S.A")"
	for m in B C; do
		run cmp "$S.u.A" "$S.u.$m"
		assert_success
		# The root's: the same lines (a shared store numbers each
		# tenant's log, so a seq line is the mount's own).
		run diff <(grep -v $'^seq\t' "$S.A") <(grep -v $'^seq\t' "$S.$m")
		assert_success
	done
}

# --- diff --------------------------------------------------------------------

@test "two snapshots with no change in between are identical" {
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/u/c"
	echo x >"$MNT/t/a/1"
	echo y >"$MNT/t/b/2"
	ln "$MNT/t/a/1" "$MNT/t/b/1"
	rmdir "$MNT/u/c"
	cat "$MNT/.snapshot" >"$S.1"
	ls -R "$MNT" >/dev/null
	cat "$MNT/.snapshot" >"$S.2"
	run diff "$S.1" "$S.2"
	assert_success
	assert_output ''
}

@test "after one mkdir, two snapshots differ in exactly the added line" {
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	echo x >"$MNT/t/a/1"
	cat "$MNT/.snapshot" >"$S.1"
	mkdir "$MNT/t/n"
	cat "$MNT/.snapshot" >"$S.2"
	run bash -c 'diff <(grep -v "^seq" "$1") <(grep -v "^seq" "$2") | grep "^[<>]"' _ "$S.1" "$S.2"
	assert_output "> $(row parent t n - 1 - - - - "$(ino "$MNT/t/n")")"
	# and after a new tenant: the tenant's line
	mkdir "$MNT/u"
	cat "$MNT/.snapshot" >"$S.3"
	run bash -c 'diff <(grep -v "^seq" "$1") <(grep -v "^seq" "$2") | grep "^[<>]"' _ "$S.2" "$S.3"
	assert_output "> $(row tenant u - - - - - - - "$(ino "$MNT/u")")"
}

@test "after one rm, two snapshots differ in exactly the removed line" {
	mkdir -p "$MNT/t/a"
	echo x >"$MNT/t/a/1"
	touch "$MNT/t/a/2"
	local i
	i=$(ino "$MNT/t/a/1")
	cat "$MNT/.snapshot" >"$S.1"
	rm "$MNT/t/a/1"
	cat "$MNT/.snapshot" >"$S.2"
	run bash -c 'diff <(grep -v "^seq" "$1") <(grep -v "^seq" "$2") | grep "^[<>]"' _ "$S.1" "$S.2"
	assert_output "< $(row child t a 1 1 1 2 1 - "$i")"
}

# --- taken at open, served from the handle -----------------------------------

@test "a snapshot read slowly still shows the state at open" {
	mkdir -p "$MNT/t/p" "$MNT/u"
	local long
	long=$(printf 'x%.0s' $(seq 150))
	(cd "$MNT/t/p" && touch $(printf "${long}%d " $(seq 400)))
	echo keep >"$MNT/t/p/c"
	cat "$MNT/.snapshot" >"$S.before"
	python3 -c '
import os, sys
m = sys.argv[1]
f = open(m + "/.snapshot", "rb", buffering=0)
out = f.read(10)
os.mkdir(m + "/t/q")
os.unlink(m + "/t/p/c")
for i in range(1, 201):
    os.unlink(m + "/t/p/" + sys.argv[2] + str(i))
with open(m + "/t/p/d", "w") as g:
    g.write("new")
os.rmdir(m + "/u")
while True:
    b = f.read(4096)
    if not b:
        break
    out += b
sys.stdout.buffer.write(out)' "$MNT" "$long" >"$S.slow"
	run cmp "$S.before" "$S.slow"
	assert_success
	# a new open shows the new state
	run awk -F'\t' 'NR > 1 { print $1, $2, $3, $4 }' "$MNT/.snapshot"
	assert_line 'parent t q -'
	assert_line 'child t p d'
	refute_line 'child t p c'
	refute_line 'tenant u - -'
	assert_equal "$(grep -c '^child' "$MNT/.snapshot")" 201
}

@test "the snapshot is taken at open, not at the first read" {
	mkdir -p "$MNT/t/p"
	echo keep >"$MNT/t/p/c"
	cat "$MNT/t/.snapshot" >"$S.before"
	python3 -c '
import os, sys
m = sys.argv[1]
f = open(m + "/t/.snapshot", "rb", buffering=0)
os.mkdir(m + "/t/q")
os.unlink(m + "/t/p/c")
sys.stdout.buffer.write(f.read())' "$MNT" >"$S.late"
	run cmp "$S.before" "$S.late"
	assert_success
	run grep -c '^child' "$MNT/t/.snapshot"
	assert_output 0
}

# --- consistency while shells mutate ----------------------------------------

@test "a child moved back and forth shows exactly once in every one of 60 snapshots" {
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	echo x >"$MNT/t/a/c"
	touch "$MNT/t/a/still" "$MNT/t/b/still"
	local stop="$BATS_TEST_TMPDIR/stop" n="$BATS_TEST_TMPDIR/moves"
	(
		i=0
		while [ ! -e "$stop" ]; do
			mv "$MNT/t/a/c" "$MNT/t/b/c" || { echo "mv a->b failed" >"$n.err"; break; }
			mv "$MNT/t/b/c" "$MNT/t/a/c" || { echo "mv b->a failed" >"$n.err"; break; }
			i=$((i + 1))
		done
		echo "$i" >"$n"
	) 3>&- &
	BG_PIDS+=($!)
	local k seen_a=0 seen_b=0 where still parents
	for k in $(seq 60); do
		# One process a snapshot (the writer spins as long as this loop
		# runs): it keeps a copy in $S.$k and prints c's parents, a
		# blank, still's parents, a blank, the number of parent lines.
		{
			IFS= read -r where
			IFS= read -r -d '' still || :
		} < <(awk -F'\t' -v out="$S.$k" '
			{ print >out }
			$1 == "child" && $4 == "c" { w = w $3 " " }
			$4 == "still" { s = s $3 "\n" }
			/^parent/ { np++ }
			END { printf "%s\n%s%d", w, s, np }' "$MNT/.snapshot")
		parents=${still##*$'\n'}
		still=${still%$'\n'*}
		case $where in
		'a ') seen_a=$((seen_a + 1)) ;;
		'b ') seen_b=$((seen_b + 1)) ;;
		*) fail "snapshot $k shows c in [${where}]: $(cat "$S.$k")" ;;
		esac
		assert_equal "$still" $'a\nb'
		[ "$parents" -eq 2 ] || fail "snapshot $k: $(cat "$S.$k")"
	done
	touch "$stop"
	events_wait
	[ ! -e "$n.err" ] || fail "$(cat "$n.err")"
	[ "$(cat "$n")" -gt 0 ] || fail "the mover never completed a round"
	echo "# c in a: $seen_a, in b: $seen_b; $(cat "$n") rounds" >&3
	run ls "$MNT/t/a"
	assert_output $'c\nstill'
}

@test "snapshots racing links, removals, replacing renames and leave cascades are always self-consistent" {
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	local stop="$BATS_TEST_TMPDIR/stop" n="$BATS_TEST_TMPDIR/rounds"
	# writer 1: x appears in a, is linked into b, then both links go
	(
		i=0
		while [ ! -e "$stop" ]; do
			touch "$MNT/t/a/x" && ln "$MNT/t/a/x" "$MNT/t/b/x" &&
				rm "$MNT/t/a/x" && rm "$MNT/t/b/x" ||
				{ echo "writer 1 failed" >"$n.err"; break; }
			i=$((i + 1))
		done
		echo "$i" >"$n.1"
	) 3>&- &
	BG_PIDS+=($!)
	# writer 2: p joins, gets two children, leaves with them (cascade)
	(
		i=0
		while [ ! -e "$stop" ]; do
			mkdir "$MNT/t/p" && touch "$MNT/t/p/1" "$MNT/t/p/2" &&
				rmdir "$MNT/t/p" ||
				{ echo "writer 2 failed" >"$n.err"; break; }
			i=$((i + 1))
		done
		echo "$i" >"$n.2"
	) 3>&- &
	BG_PIDS+=($!)
	# writer 3: a new state is staged in s, then replaces a/cur by rename
	mkdir "$MNT/t/s"
	echo 0 >"$MNT/t/a/cur"
	(
		i=0
		while [ ! -e "$stop" ]; do
			echo "$i" >"$MNT/t/s/tmp" && mv -f "$MNT/t/s/tmp" "$MNT/t/a/cur" ||
				{ echo "writer 3 failed" >"$n.err"; break; }
			i=$((i + 1))
		done
		echo "$i" >"$n.3"
	) 3>&- &
	BG_PIDS+=($!)
	local k out
	for k in $(seq 60); do
		# One process a snapshot (the writers spin as long as this loop
		# runs), keeping a copy in $S.$k, printing what is wrong with it:
		# snap_ok's checks; cur is in a, once; every child's parent and
		# every parent's tenant is listed, and an inode has as many lines
		# as its nlink says; p's children come and go in pairs within the
		# leave (two at most).
		out=$(awk -F'\t' -v h="$HEADER" -v out="$S.$k" '
			{ print >out }
			NR == 1 { if ($0 != h) print "bad header: " $0; next }
			NR == 2 { if ($0 !~ /^seq\t([0-9]+|-)(\t-)(\t-)(\t-)(\t-)(\t-)(\t-)(\t-)(\t-)$/) print "bad seq line: " $0; next }
			NF != 10 { print "not 10 fields: " $0 }
			NF == 10 && $1 !~ /^(tenant|parent|child|tombstone)$/ { print "bad kind: " $0 }
			NF == 10 { for (i = 5; i <= 10; i++)
				if ($i !~ /^(-|[0-9]+)$/) print "bad field " i ": " $0 }
			$1 == "tenant" { ten[$2] = 1 }
			$1 == "parent" { par[$2 "/" $3] = 1 }
			$1 == "child" { ch[NR] = $2 "/" $3; cnt[$10]++; nl[$10] = $8
				if ($8 != nl0[$10] && nl0[$10] != "") print "nlink differs: " $0
				nl0[$10] = $8 }
			$1 == "tombstone" && $3 != "p" { print "unexpected tombstone: " $0 }
			$1 == "child" && $4 == "cur" { cur = cur (ncur++ ? "\n" : "") $3 }
			$1 == "child" && $3 == "p" { np++ }
			END {
				if (NR < 2) print "empty"
				if (cur != "a") print "cur is in [" cur "], not in a alone"
				if (np > 2) print np " children of p"
				for (l in ch) { split(ch[l], a, "/")
					if (!(ch[l] in par)) print "child without its parent: " ch[l]
					if (!(a[1] in ten)) print "child without its tenant: " ch[l] }
				for (p in par) { split(p, a, "/")
					if (!(a[1] in ten)) print "parent without its tenant: " p }
				for (i in cnt) if (cnt[i] != nl[i])
					print "inode " i ": " cnt[i] " lines, nlink " nl[i]
			}' "$MNT/.snapshot")
		[ -z "$out" ] || fail "snapshot $k: $out
$(cat "$S.$k")"
	done
	touch "$stop"
	events_wait
	[ ! -e "$n.err" ] || fail "$(cat "$n.err")"
	[ "$(cat "$n.1")" -gt 0 ] && [ "$(cat "$n.2")" -gt 0 ] && [ "$(cat "$n.3")" -gt 0 ] ||
		fail "a writer never completed a round: $(cat "$n.1" "$n.2" "$n.3")"
	run ls "$MNT/t/a"
	assert_output cur
	run ls "$MNT/t/b"
	assert_output ''
}
