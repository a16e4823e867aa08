#!/usr/bin/env bats
# statefs(8), CHILDREN: ln shares one state between parents of a tenant; mv
# hands a child from one parent to another.

load helpers

setup() {
	statefs_mount
	mkdir -p "$MNT/t/a" "$MNT/t/b"
}

# python: renameat2(src, dst, RENAME_NOREPLACE), prints OK or the errno name.
rename_noreplace() {
	python3 - "$1" "$2" <<'EOF'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_NOREPLACE = -100, 1
rc = libc.renameat2(AT_FDCWD, os.fsencode(sys.argv[1]),
                    AT_FDCWD, os.fsencode(sys.argv[2]), RENAME_NOREPLACE)
print('OK' if rc == 0 else errno.errorcode[ctypes.get_errno()])
EOF
}

# --- ln ------------------------------------------------------------------------

@test "ln shares one state between two parents: one inode, nlink 2" {
	echo shared >"$MNT/t/a/c"
	ln "$MNT/t/a/c" "$MNT/t/b/c"
	run stat -c '%i %h' "$MNT/t/a/c"
	local a=$output
	run stat -c '%i %h' "$MNT/t/b/c"
	assert_output "$a"
	assert_output --regexp ' 2$'
	run cat "$MNT/t/b/c"
	assert_output shared
	run stat_of children
	assert_output 1
	run stat_of links
	assert_output 2
}

@test "a write through one link is read through the other" {
	echo v1 >"$MNT/t/a/c"
	ln "$MNT/t/a/c" "$MNT/t/b/c"
	echo v2 >"$MNT/t/b/c"
	run cat "$MNT/t/a/c"
	assert_output v2
	echo v3 >>"$MNT/t/a/c"
	run cat "$MNT/t/b/c"
	assert_output $'v2\nv3'
	run ver "$MNT/t/b/c"
	assert_output 3
}

@test "a link in the same parent under another name works too" {
	echo x >"$MNT/t/a/c"
	ln "$MNT/t/a/c" "$MNT/t/a/d"
	run ls "$MNT/t/a"
	assert_output $'c\nd'
	run stat -c %h "$MNT/t/a/d"
	assert_output 2
}

@test "rm of one link keeps the state under the other; the last rm ends it" {
	echo kept >"$MNT/t/a/c"
	ln "$MNT/t/a/c" "$MNT/t/b/c"
	rm "$MNT/t/a/c"
	run cat "$MNT/t/b/c"
	assert_output kept
	run stat -c %h "$MNT/t/b/c"
	assert_output 1
	run stat_of children
	assert_output 1
	rm "$MNT/t/b/c"
	run stat_of children
	assert_output 0
	run stat_of links
	assert_output 0
	run stat_of bytes
	assert_output 0
}

@test "ln across tenants fails with EXDEV and adds nothing" {
	mkdir -p "$MNT/u/b"
	echo x >"$MNT/t/a/c"
	run ln "$MNT/t/a/c" "$MNT/u/b/c"
	assert_failure
	assert_output --partial 'Invalid cross-device link'
	run ls "$MNT/u/b"
	assert_output ''
	run stat -c %h "$MNT/t/a/c"
	assert_output 1
}

@test "ln onto an existing name fails with EEXIST and changes nothing" {
	echo one >"$MNT/t/a/c"
	echo two >"$MNT/t/b/c"
	run py_errno 'os.link(sys.argv[1], sys.argv[2])' "$MNT/t/a/c" "$MNT/t/b/c"
	assert_output EEXIST
	run cat "$MNT/t/b/c"
	assert_output two
	run stat -c %h "$MNT/t/a/c"
	assert_output 1
}

@test "ln into a departed parent fails with ENOENT" {
	echo x >"$MNT/t/a/c"
	rmdir "$MNT/t/b"
	run ln "$MNT/t/a/c" "$MNT/t/b/c"
	assert_failure
	assert_output --partial 'No such file or directory'
	run stat -c %h "$MNT/t/a/c"
	assert_output 1
}

# --- mv ---------------------------------------------------------------------------

@test "mv hands a child to another parent: same inode, same content" {
	echo payload >"$MNT/t/a/c"
	local ino
	ino=$(stat -c %i "$MNT/t/a/c")
	mv "$MNT/t/a/c" "$MNT/t/b/c"
	run ls "$MNT/t/a"
	assert_output ''
	run cat "$MNT/t/b/c"
	assert_output payload
	run stat -c %i "$MNT/t/b/c"
	assert_output "$ino"
	run stat_of children
	assert_output 1
	run stat_of links
	assert_output 1
}

@test "mv renames a child inside its parent" {
	echo x >"$MNT/t/a/c"
	mv "$MNT/t/a/c" "$MNT/t/a/d"
	run ls "$MNT/t/a"
	assert_output d
	run cat "$MNT/t/a/d"
	assert_output x
}

@test "mv onto an existing child replaces it, and the replaced one is removed" {
	echo new >"$MNT/t/a/c"
	echo old >"$MNT/t/b/c"
	mv "$MNT/t/a/c" "$MNT/t/b/c"
	run cat "$MNT/t/b/c"
	assert_output new
	run ls "$MNT/t/a"
	assert_output ''
	run stat_of children
	assert_output 1
	run stat_of bytes
	assert_output 4
}

@test "mv -n leaves an existing destination and the source alone" {
	echo src >"$MNT/t/a/c"
	echo dst >"$MNT/t/b/c"
	run mv -n "$MNT/t/a/c" "$MNT/t/b/c"
	run cat "$MNT/t/b/c"
	assert_output dst
	run cat "$MNT/t/a/c"
	assert_output src
}

@test "RENAME_NOREPLACE onto an existing child fails with EEXIST" {
	echo src >"$MNT/t/a/c"
	echo dst >"$MNT/t/b/c"
	run rename_noreplace "$MNT/t/a/c" "$MNT/t/b/c"
	assert_output EEXIST
	run cat "$MNT/t/a/c" "$MNT/t/b/c"
	assert_output $'src\ndst'
}

@test "RENAME_NOREPLACE to a free name moves the child" {
	echo src >"$MNT/t/a/c"
	run rename_noreplace "$MNT/t/a/c" "$MNT/t/b/c"
	assert_output OK
	run cat "$MNT/t/b/c"
	assert_output src
	run ls "$MNT/t/a"
	assert_output ''
}

@test "renaming a tenant fails with EPERM" {
	run mv "$MNT/t" "$MNT/u"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run ls "$MNT"
	assert_output t
}

@test "renaming a parent fails with EPERM" {
	echo x >"$MNT/t/a/c"
	run mv "$MNT/t/a" "$MNT/t/z"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run ls "$MNT/t"
	assert_output $'a\nb'
	run gen "$MNT/t/a"
	assert_output 1
}

@test "rename of a child across tenants fails with EXDEV" {
	mkdir -p "$MNT/u/b"
	echo x >"$MNT/t/a/c"
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$MNT/t/a/c" "$MNT/u/b/c"
	assert_output EXDEV
	run ls "$MNT/u/b"
	assert_output ''
	run cat "$MNT/t/a/c"
	assert_output x
}

@test "mv of a missing child fails with ENOENT" {
	run mv "$MNT/t/a/nope" "$MNT/t/b/nope"
	assert_failure
	assert_output --partial 'No such file or directory'
	run ls "$MNT/t/b"
	assert_output ''
}

@test "mv into a departed parent fails with ENOENT and keeps the source" {
	echo x >"$MNT/t/a/c"
	rmdir "$MNT/t/b"
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$MNT/t/a/c" "$MNT/t/b/c"
	assert_output ENOENT
	run cat "$MNT/t/a/c"
	assert_output x
}

@test "an open file keeps working across a mv" {
	echo one >"$MNT/t/a/c"
	exec 8>>"$MNT/t/a/c"
	mv "$MNT/t/a/c" "$MNT/t/b/c"
	echo two >&8
	exec 8>&-
	run cat "$MNT/t/b/c"
	assert_output $'one\ntwo'
}
