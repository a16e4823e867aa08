#!/usr/bin/env bats
# Tools that walk a tree, as statefs(8) TOOLS tells users to run them:
# rmdir (not rm -r) for a tenant, the tenant's special files (its names
# beginning with '.') left out when grep -r, tar, rsync, zip -r, cp -r or
# find walk it, and mv across tenants being a copy and a removal.

load helpers

teardown() {
	bg_teardown
}

# A tenant T with two parents, three children and their contents.
populate() {
	mkdir "$MNT/T" "$MNT/T/p1" "$MNT/T/p2"
	echo alpha >"$MNT/T/p1/a"
	echo beta >"$MNT/T/p1/b"
	echo gamma >"$MNT/T/p2/c"
}

@test "rmdir of a tenant removes everything in it in one transition; rm -rf fails on the special files and leaves the tenant" {
	statefs_mount
	populate
	events_bg "$BATS_TEST_TMPDIR/ev" 1
	rmdir "$MNT/T"
	events_wait
	run cut -f 2- "$BATS_TEST_TMPDIR/ev"
	assert_output "$(evlines cleanup T - - - -)"
	run ls "$MNT"
	assert_output ""

	populate
	run rm -rf "$MNT/T"
	assert_failure
	assert_output --partial "cannot remove '$MNT/T/.events': Operation not permitted"
	# The children and the parents went one by one, each parent with a
	# tombstone, and the tenant is still there.
	run ls -A "$MNT/T"
	assert_output ".depart
.drain
.events
.snapshot
.stats"
	run stat_of tombstones
	assert_output 2
}

@test "grep -r, tar, rsync, zip -r, cp -r and find walk a tenant as documented, without its special files or waiting on .events" {
	statefs_mount
	populate
	local out="$BATS_TEST_TMPDIR/out"

	# (A listing's order is the store's, not sorted.)
	run bash -o pipefail -c "timeout 20 grep -r a '$MNT/T'/* | sort"
	assert_success
	assert_output "$MNT/T/p1/a:alpha
$MNT/T/p1/b:beta
$MNT/T/p2/c:gamma"

	run timeout 20 tar --anchored --exclude='T/.*' -cf "$out.tar" -C "$MNT" T
	assert_success
	run bash -c "tar -tf '$out.tar' | sort"
	assert_output "T/
T/p1/
T/p1/a
T/p1/b
T/p2/
T/p2/c"

	run timeout 20 rsync -a --exclude='/.*' "$MNT/T/" "$out.rsync/"
	assert_success
	run bash -c "cd '$out.rsync' && find . | sort"
	assert_output ".
./p1
./p1/a
./p1/b
./p2
./p2/c"

	run bash -c "cd '$MNT' && timeout 20 zip -qr '$out.zip' T -x 'T/.*'"
	assert_success
	run bash -c "unzip -Z1 '$out.zip' | sort"
	assert_output "T/
T/p1/
T/p1/a
T/p1/b
T/p2/
T/p2/c"

	mkdir "$out.cp"
	run timeout 20 bash -c "cp -r '$MNT/T'/* '$out.cp/'"
	assert_success
	run cat "$out.cp/p1/a" "$out.cp/p1/b" "$out.cp/p2/c"
	assert_output "alpha
beta
gamma"
	run ls -A "$out.cp"
	assert_output "p1
p2"

	run timeout 20 find "$MNT/T" -path "$MNT/T/.*" -prune -o -type f -print
	assert_success
	run sort <<<"$output"
	assert_output "$MNT/T/p1/a
$MNT/T/p1/b
$MNT/T/p2/c"
}

@test "mv across tenants is a copy (create, write) and an unlink; within a tenant it is one rename" {
	statefs_mount
	populate
	mkdir "$MNT/U" "$MNT/U/q"
	events_bg "$BATS_TEST_TMPDIR/ev" 4
	run mv "$MNT/T/p1/a" "$MNT/U/q/a"
	assert_success
	assert_output ""
	mv "$MNT/T/p1/b" "$MNT/T/p2/b"
	events_wait
	run cut -f 2-7 "$BATS_TEST_TMPDIR/ev"
	assert_output "$(evlines create U q a 1 0 write U q a 1 1 unlink T p1 a 1 1 \
		rename T p2 b 1 1)"
	run cat "$MNT/U/q/a"
	assert_output "alpha"
	run ls "$MNT/T/p1"
	assert_output ""
}
