#!/usr/bin/env bats
# statefs(8), PARENTS: parents join, leave, generations and tombstones;
# tenant cleanup.

load helpers

setup() {
	statefs_mount
	mkdir "$MNT/t"
}

@test "mkdir of a new parent joins with generation 1" {
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_success
	assert_output 1
}

@test "mkdir of a live parent fails with EEXIST and keeps its generation and children" {
	mkdir "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	run mkdir "$MNT/t/p"
	assert_failure
	assert_output --partial 'File exists'
	run gen "$MNT/t/p"
	assert_output 1
	run cat "$MNT/t/p/c"
	assert_output x
}

@test "each rejoin after rmdir gets the previous generation plus one" {
	mkdir "$MNT/t/p"
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 2
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 3
}

@test "generations are per parent name" {
	mkdir "$MNT/t/a" "$MNT/t/b"
	rmdir "$MNT/t/a"
	mkdir "$MNT/t/a"
	run gen "$MNT/t/a"
	assert_output 2
	run gen "$MNT/t/b"
	assert_output 1
	mkdir "$MNT/u"
	mkdir "$MNT/u/a"
	run gen "$MNT/u/a"
	assert_output 1
}

@test "rmdir of a parent with children removes them and leaves a tombstone" {
	mkdir "$MNT/t/p"
	echo 1 >"$MNT/t/p/a"
	echo 2 >"$MNT/t/p/b"
	touch "$MNT/t/p/c"
	rmdir "$MNT/t/p"
	run ls "$MNT/t"
	assert_output ''
	run stat "$MNT/t/p"
	assert_failure
	assert_output --partial 'No such file or directory'
	run stat "$MNT/t/p/a"
	assert_failure
	assert_output --partial 'No such file or directory'
	run stat_of children
	assert_output 0
	run stat_of bytes
	assert_output 0
	run stat_of tombstones
	assert_output 1
	run stat_of parents
	assert_output 0
}

@test "a rejoined parent starts empty" {
	mkdir "$MNT/t/p"
	echo 1 >"$MNT/t/p/a"
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p"
	run ls -A "$MNT/t/p"
	assert_output ''
	run stat_of tombstones
	assert_output 0
}

@test "a departed parent cannot be re-created by a late admission through its path" {
	mkdir "$MNT/t/p"
	rmdir "$MNT/t/p"
	run touch "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'No such file or directory'
	run bash -c 'echo x >"$1/t/p/c"' _ "$MNT"
	assert_failure
	assert_output --partial 'No such file or directory'
	run ls "$MNT/t"
	assert_output ''
}

@test "a leave removes only the leaving parent's link of a shared child" {
	mkdir "$MNT/t/a" "$MNT/t/b"
	echo shared >"$MNT/t/a/c"
	ln "$MNT/t/a/c" "$MNT/t/b/c"
	rmdir "$MNT/t/a"
	run cat "$MNT/t/b/c"
	assert_output shared
	run stat -c %h "$MNT/t/b/c"
	assert_output 1
	run stat_of children
	assert_output 1
	run stat_of links
	assert_output 1
}

@test "writing a live parent's name to .depart leaves it with the cascade" {
	mkdir "$MNT/t/p"
	echo 1 >"$MNT/t/p/a"
	echo 2 >"$MNT/t/p/b"
	echo p >"$MNT/t/.depart"
	run ls "$MNT/t"
	assert_output ''
	run stat "$MNT/t/p"
	assert_failure
	assert_output --partial 'No such file or directory'
	run stat_of children
	assert_output 0
	run stat_of tombstones
	assert_output 1
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 2
	run ls -A "$MNT/t/p"
	assert_output ''
}

@test "a .depart for a parent that never joined records a tombstone and the later mkdir gets generation 1" {
	echo p >"$MNT/t/.depart"
	run ls "$MNT/t"
	assert_output ''
	run stat_of tombstones
	assert_output 1
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 1
	run stat_of tombstones
	assert_output 0
}

@test "departing an already departed parent keeps its generation: the rejoin still counts up" {
	mkdir "$MNT/t/p"
	rmdir "$MNT/t/p"
	echo p >"$MNT/t/.depart"
	printf p >"$MNT/t/.depart"
	run stat_of tombstones
	assert_output 1
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 2
}

@test ".depart takes one valid name per write" {
	mkdir "$MNT/t/a" "$MNT/t/b"
	# Two names in one write(2) (bash's printf would write line by line).
	run py_errno 'os.write(os.open(sys.argv[1], os.O_WRONLY), b"a\nb\n")' "$MNT/t/.depart"
	assert_output EINVAL
	run bash -c 'echo "a b" >"$1/t/.depart"' _ "$MNT"
	assert_failure
	assert_output --partial 'Invalid argument'
	run bash -c 'echo .a >"$1/t/.depart"' _ "$MNT"
	assert_failure
	assert_output --partial 'Invalid argument'
	run ls "$MNT/t"
	assert_output $'a\nb'
	run stat_of tombstones
	assert_output 0
}

@test "the generation of a parent is an extended attribute read by name, not listed" {
	mkdir "$MNT/t/p"
	run getfattr --absolute-names -n user.statefs.generation "$MNT/t/p"
	assert_success
	assert_output --partial 'user.statefs.generation="1"'
	run getfattr --absolute-names -d -m - "$MNT/t/p"
	assert_success
	assert_output ''
}

@test "the generation cannot be set by hand" {
	mkdir "$MNT/t/p"
	run setfattr -n user.statefs.generation -v 7 "$MNT/t/p"
	assert_failure
	run gen "$MNT/t/p"
	assert_output 1
}

@test "rmdir of a tenant removes everything in it at once" {
	mkdir "$MNT/t/a" "$MNT/t/b"
	echo 1 >"$MNT/t/a/c"
	echo 2 >"$MNT/t/b/c"
	ln "$MNT/t/a/c" "$MNT/t/b/d"
	mkdir "$MNT/t/gone"
	rmdir "$MNT/t/gone"
	mkdir "$MNT/u"
	mkdir "$MNT/u/keep"
	echo k >"$MNT/u/keep/c"
	rmdir "$MNT/t"
	run ls "$MNT"
	assert_output u
	run stat "$MNT/t"
	assert_failure
	assert_output --partial 'No such file or directory'
	run stat_of tenants
	assert_output 1
	run stat_of parents
	assert_output 1
	run stat_of children
	assert_output 1
	run stat_of tombstones
	assert_output 0
	run cat "$MNT/u/keep/c"
	assert_output k
}

@test "a tenant made again after cleanup is empty and its parents start at generation 1" {
	mkdir "$MNT/t/p"
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	rmdir "$MNT/t"
	mkdir "$MNT/t"
	run ls "$MNT/t"
	assert_output ''
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 1
}

@test "tombstone pool full: rmdir fails with ENOSPC and removes nothing" {
	statefs_remount -o max_tombstones=1
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	echo 1 >"$MNT/t/b/c"
	echo 2 >"$MNT/t/b/d"
	rmdir "$MNT/t/a"
	local before
	before=$(gauges)
	run rmdir "$MNT/t/b"
	assert_failure
	assert_output --partial 'No space left on device'
	run ls "$MNT/t" "$MNT/t/b"
	assert_output "$MNT/t:
b

$MNT/t/b:
c
d"
	run cat "$MNT/t/b/c" "$MNT/t/b/d"
	assert_output $'1\n2'
	run gen "$MNT/t/b"
	assert_output 1
	run gauges
	assert_output "$before"
}

@test "tombstone pool full: .depart fails with ENOSPC and removes nothing" {
	statefs_remount -o max_tombstones=1
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	echo 1 >"$MNT/t/b/c"
	echo a >"$MNT/t/.depart"
	run bash -c 'echo b >"$1/t/.depart"' _ "$MNT"
	assert_failure
	assert_output --partial 'No space left on device'
	run bash -c 'echo never >"$1/t/.depart"' _ "$MNT"
	assert_failure
	assert_output --partial 'No space left on device'
	run cat "$MNT/t/b/c"
	assert_output 1
	run stat_of tombstones
	assert_output 1
}

@test "tombstone pool: a rejoin clears the tombstone and frees its slot" {
	statefs_remount -o max_tombstones=1
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	rmdir "$MNT/t/a"
	mkdir "$MNT/t/a"
	run gen "$MNT/t/a"
	assert_output 2
	rmdir "$MNT/t/b"
	run ls "$MNT/t"
	assert_output a
	run stat_of tombstones
	assert_output 1
}

@test "tombstones age out after tombstone_ttl and free their slot" {
	# The test clock: the refusal does not depend on how fast the two
	# rmdirs follow each other.
	statefs_remount -o max_tombstones=1,tombstone_ttl=0.3,testclock
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	rmdir "$MNT/t/a"
	run rmdir "$MNT/t/b"
	assert_failure
	assert_output --partial 'No space left on device'
	advance 600
	rmdir "$MNT/t/b"
	run ls "$MNT/t"
	assert_output ''
}

@test "tombstones of a tenant count in its own .stats" {
	mkdir "$MNT/u"
	mkdir "$MNT/t/p" "$MNT/u/p"
	rmdir "$MNT/t/p"
	echo q >"$MNT/t/.depart"
	run stat_of tombstones "$MNT/t"
	assert_output 2
	run stat_of tombstones "$MNT/u"
	assert_output 0
	run stat_of tombstones
	assert_output 2
}
