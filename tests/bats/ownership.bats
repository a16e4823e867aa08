#!/usr/bin/env bats
# statefs(8), PERMISSIONS: ownership and modes are real.

load helpers

@test "new nodes get the requested mode minus the umask" {
	statefs_mount
	run bash -c 'umask 027 && mkdir "$1/t" "$1/t/p" && touch "$1/t/p/c" &&
		echo x >"$1/t/p/d" && stat -c %a "$1/t" "$1/t/p" "$1/t/p/c" "$1/t/p/d"' _ "$MNT"
	assert_success
	assert_output $'750\n750\n640\n640'
	run bash -c 'umask 077 && mkdir -m 0755 "$1/u" && stat -c %a "$1/u"' _ "$MNT"
	assert_output 755
}

@test "new nodes belong to the caller's uid and gid" {
	statefs_mount -o allow_other
	mkdir -m 0777 "$MNT/t"
	mkdir "$MNT/t/root"
	run stat -c '%u %g' "$MNT/t" "$MNT/t/root"
	assert_output $'0 0\n0 0'
	as_nobody mkdir "$MNT/t/p"
	as_nobody touch "$MNT/t/p/c"
	run stat -c '%u %g' "$MNT/t/p" "$MNT/t/p/c"
	assert_output $'65534 65534\n65534 65534'
}

@test "chmod changes the mode of a tenant, a parent and a child" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/c"
	chmod 700 "$MNT/t"
	chmod 711 "$MNT/t/p"
	chmod 600 "$MNT/t/p/c"
	run stat -c %a "$MNT/t" "$MNT/t/p" "$MNT/t/p/c"
	assert_output $'700\n711\n600'
}

@test "chown changes the owner and group of a tenant, a parent and a child" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	chown 123:456 "$MNT/t" "$MNT/t/p" "$MNT/t/p/c"
	run stat -c '%u %g' "$MNT/t" "$MNT/t/p" "$MNT/t/p/c"
	assert_output $'123 456\n123 456\n123 456'
	chgrp 789 "$MNT/t/p/c"
	run stat -c '%u %g' "$MNT/t/p/c"
	assert_output '123 789'
	run cat "$MNT/t/p/c"
	assert_output x
}

@test "with allow_other,default_permissions a 0700 tenant keeps other users out" {
	statefs_mount -o allow_other,default_permissions
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/c"
	chmod 0755 "$MNT/t"
	# Control: with 0755 another user can list it.
	run as_nobody ls "$MNT/t"
	assert_success
	assert_output p
	chmod 0700 "$MNT/t"
	run as_nobody ls "$MNT/t"
	assert_failure
	assert_output --partial 'Permission denied'
	run as_nobody touch "$MNT/t/p/x"
	assert_failure
	assert_output --partial 'Permission denied'
	run as_nobody mkdir "$MNT/t/q"
	assert_failure
	assert_output --partial 'Permission denied'
	run ls "$MNT/t" "$MNT/t/p"
	assert_output "$MNT/t:
p

$MNT/t/p:
c"
}

@test "with default_permissions another user cannot write a 0644 child or remove it from a 0755 parent" {
	statefs_mount -o allow_other,default_permissions
	mkdir -p "$MNT/t/p"
	chmod 0755 "$MNT/t" "$MNT/t/p"
	echo mine >"$MNT/t/p/c"
	chmod 0644 "$MNT/t/p/c"
	run as_nobody cat "$MNT/t/p/c"
	assert_success
	assert_output mine
	run as_nobody bash -c 'echo theirs >"$1"' _ "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'Permission denied'
	run as_nobody rm -f "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'Permission denied'
	run as_nobody rmdir "$MNT/t/p"
	assert_failure
	assert_output --partial 'Permission denied'
	run cat "$MNT/t/p/c"
	assert_output mine
}

@test "a tenant handed to another user with chown is theirs to fill" {
	statefs_mount -o allow_other,default_permissions
	mkdir -m 0700 "$MNT/t"
	chown 65534:65534 "$MNT/t"
	as_nobody mkdir "$MNT/t/p"
	as_nobody bash -c 'umask 022 && echo hi >"$1/t/p/c"' _ "$MNT"
	run as_nobody cat "$MNT/t/p/c"
	assert_output hi
	run stat -c '%U %a' "$MNT/t/p/c"
	assert_output --regexp '^(nobody|65534) 644$'
}

@test "a tenant's owner can use its .depart; with default_permissions others cannot" {
	statefs_mount -o allow_other,default_permissions
	mkdir -m 0755 "$MNT/t" "$MNT/u"
	chown 65534:65534 "$MNT/t"
	mkdir "$MNT/t/p" "$MNT/u/p"
	run as_nobody bash -c 'echo p >"$1/t/.depart"' _ "$MNT"
	assert_success
	run as_nobody bash -c 'echo p >"$1/u/.depart"' _ "$MNT"
	assert_failure
	assert_output --partial 'Permission denied'
	run ls "$MNT/t" "$MNT/u"
	assert_output "$MNT/t:

$MNT/u:
p"
}
