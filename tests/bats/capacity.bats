#!/usr/bin/env bats
# statefs(8), CHILDREN and OPTIONS: store-wide ceilings (ENOSPC) and
# per-parent / per-tenant quotas (EDQUOT).  Every refusal is all or nothing: the
# listing and the .stats gauges are exactly what they were before.

load helpers

# snapshot: what exists (every listing) plus the .stats gauges.
snapshot() {
	(cd "$MNT" && find . | sort)
	gauges
}

@test "max_tenants: one tenant too many fails with ENOSPC and adds nothing" {
	statefs_mount -o max_tenants=2
	mkdir "$MNT/a" "$MNT/b"
	local before
	before=$(snapshot)
	run mkdir "$MNT/c"
	assert_failure
	assert_output --partial 'No space left on device'
	run snapshot
	assert_output "$before"
	rmdir "$MNT/a"
	mkdir "$MNT/c"
	run ls "$MNT"
	assert_output $'b\nc'
}

@test "max_parents counts parents store-wide and refuses with ENOSPC" {
	statefs_mount -o max_parents=2
	mkdir -p "$MNT/t/p1" "$MNT/u/p2"
	local before
	before=$(snapshot)
	run mkdir "$MNT/t/p3"
	assert_failure
	assert_output --partial 'No space left on device'
	run mkdir "$MNT/u/p3"
	assert_failure
	assert_output --partial 'No space left on device'
	run snapshot
	assert_output "$before"
}

@test "max_parents: a departed parent's slot is free again" {
	statefs_mount -o max_parents=1
	mkdir -p "$MNT/t/p1"
	rmdir "$MNT/t/p1"
	mkdir "$MNT/t/p2"
	run ls "$MNT/t"
	assert_output p2
}

@test "max_children counts states store-wide and refuses with ENOSPC" {
	# No tenant share: one tenant reaches the ceiling.
	statefs_mount -o max_children=2,tenant_max_children=0
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	echo 1 >"$MNT/t/a/c1"
	echo 2 >"$MNT/t/b/c2"
	local before
	before=$(snapshot)
	run touch "$MNT/t/a/c3"
	assert_failure
	assert_output --partial 'No space left on device'
	run bash -c 'echo 3 >"$1/t/b/c3"' _ "$MNT"
	assert_failure
	assert_output --partial 'No space left on device'
	run snapshot
	assert_output "$before"
}

@test "max_children: a link adds no state, so it is admitted at the ceiling" {
	statefs_mount -o max_children=1
	mkdir -p "$MNT/t/a" "$MNT/t/b"
	echo 1 >"$MNT/t/a/c"
	ln "$MNT/t/a/c" "$MNT/t/b/c"
	run stat -c %h "$MNT/t/b/c"
	assert_output 2
	run stat_of children
	assert_output 1
	run touch "$MNT/t/a/d"
	assert_failure
	assert_output --partial 'No space left on device'
}

@test "max_bytes: content over the store-wide byte ceiling fails with ENOSPC" {
	statefs_mount -o max_payload=32,max_bytes=40,tenant_max_bytes=0
	mkdir -p "$MNT/t/p"
	printf %032d 1 >"$MNT/t/p/a"
	echo old >"$MNT/t/p/b"
	local before
	before=$(snapshot)
	run bash -c 'printf %010d 2 >"$1/t/p/b"' _ "$MNT"
	assert_failure
	assert_output --partial 'No space left on device'
	run bash -c 'printf %010d 2 >>"$1/t/p/b"' _ "$MNT"
	assert_failure
	assert_output --partial 'No space left on device'
	run cat "$MNT/t/p/b"
	assert_output old
	run snapshot
	assert_output "$before"
	run stat_of bytes
	assert_output 36
}

@test "max_bytes: replacing content frees its old bytes" {
	statefs_mount -o max_payload=32,max_bytes=40,tenant_max_bytes=0
	mkdir -p "$MNT/t/p"
	printf %032d 1 >"$MNT/t/p/a"
	printf %032d 2 >"$MNT/t/p/a"
	printf %08d 3 >"$MNT/t/p/b"
	run stat_of bytes
	assert_output 40
	rm "$MNT/t/p/a"
	printf %032d 4 >"$MNT/t/p/c"
	run stat_of bytes
	assert_output 40
}

@test "parent_quota: one entry too many in a parent fails with EDQUOT" {
	statefs_mount -o parent_quota=2
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	touch "$MNT/t/p/a" "$MNT/t/p/b"
	local before
	before=$(snapshot)
	run touch "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run snapshot
	assert_output "$before"
	touch "$MNT/t/q/c"
	run ls "$MNT/t/q"
	assert_output c
}

@test "parent_quota: a link or a move into a full parent fails with EDQUOT" {
	statefs_mount -o parent_quota=2
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	touch "$MNT/t/p/a" "$MNT/t/p/b"
	echo x >"$MNT/t/q/c"
	local before
	before=$(snapshot)
	run ln "$MNT/t/q/c" "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$MNT/t/q/c" "$MNT/t/p/c"
	assert_output EDQUOT
	run snapshot
	assert_output "$before"
	run cat "$MNT/t/q/c"
	assert_output x
}

@test "parent_quota: a rename that adds no entry is admitted in a full parent" {
	statefs_mount -o parent_quota=1
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	echo a >"$MNT/t/p/a"
	echo b >"$MNT/t/q/b"
	mv "$MNT/t/p/a" "$MNT/t/p/z"
	mv "$MNT/t/q/b" "$MNT/t/p/z"
	run ls "$MNT/t/p" "$MNT/t/q"
	assert_output "$MNT/t/p:
z

$MNT/t/q:"
	run cat "$MNT/t/p/z"
	assert_output b
	run stat_of children
	assert_output 1
}

@test "parent_quota: a removal frees a slot" {
	statefs_mount -o parent_quota=1
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/a"
	rm "$MNT/t/p/a"
	touch "$MNT/t/p/b"
	run ls "$MNT/t/p"
	assert_output b
}

@test "tenant_quota: one entry too many in a tenant fails with EDQUOT" {
	statefs_mount -o tenant_quota=2
	mkdir -p "$MNT/t/p" "$MNT/t/q" "$MNT/u/p"
	touch "$MNT/t/p/a" "$MNT/t/q/b"
	local before
	before=$(snapshot)
	run touch "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run touch "$MNT/t/q/c"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run snapshot
	assert_output "$before"
	touch "$MNT/u/p/a" "$MNT/u/p/b"
	run ls "$MNT/u/p"
	assert_output $'a\nb'
}

@test "tenant_quota: links count as entries" {
	statefs_mount -o tenant_quota=2
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	touch "$MNT/t/p/a"
	ln "$MNT/t/p/a" "$MNT/t/q/a"
	run touch "$MNT/t/p/b"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	rm "$MNT/t/q/a"
	touch "$MNT/t/p/b"
	run ls "$MNT/t/p"
	assert_output $'a\nb'
}

@test "a move inside one tenant does not count twice against tenant_quota" {
	statefs_mount -o tenant_quota=1
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	echo x >"$MNT/t/p/a"
	mv "$MNT/t/p/a" "$MNT/t/q/a"
	run cat "$MNT/t/q/a"
	assert_output x
	run stat_of children
	assert_output 1
}

@test "refusals are counted by reason in .stats" {
	statefs_mount -o max_tenants=1,parent_quota=1
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/a"
	run mkdir "$MNT/u"
	assert_failure
	run touch "$MNT/t/p/b"
	assert_failure
	run stat_of refused_capacity
	assert_output 1
	run stat_of refused_quota
	assert_output 1
}
