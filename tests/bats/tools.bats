#!/usr/bin/env bats
# Everyday tools on a statefs mount: what rsync, cp, install, tar, vim,
# mktemp, tail -f, stat and setfattr/getfattr do to a child must work as
# on any Linux filesystem (tmpfs is the reference), within the contract.

load helpers

setup() {
	statefs_mount
	mkdir -p "$MNT/t/p"
	# A tmpfs of this test's own: the other end of every copy.
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/statefs-tools.XXXXXX")
	mount -t tmpfs -o mode=0755 tmpfs "$TMP"
}

teardown() {
	bg_stop
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	umount "$TMP" 2>/dev/null
	rmdir "$TMP" 2>/dev/null
	statefs_unmount
}

# --- names beginning with a dot inside a parent ------------------------------

@test "rsync -a into a parent copies every file (through its .name.XXXXXX temporaries)" {
	mkdir "$TMP/src"
	printf 'one\n' >"$TMP/src/a"
	printf 'two\n' >"$TMP/src/.hidden"
	touch -d '2001-02-03 04:05:06' "$TMP/src/a" "$TMP/src/.hidden"
	run rsync -a "$TMP/src/" "$MNT/t/p/"
	assert_success
	run ls -A "$MNT/t/p"
	assert_output $'.hidden\na'
	run cat "$MNT/t/p/a" "$MNT/t/p/.hidden"
	assert_output $'one\ntwo'
	run stat -c '%y %n' "$MNT/t/p/a" "$MNT/t/p/.hidden"
	assert_output "2001-02-03 04:05:06.000000000 +0000 $MNT/t/p/a
2001-02-03 04:05:06.000000000 +0000 $MNT/t/p/.hidden"
	# A second run finds nothing to do, and the temporaries are gone.
	run rsync -ai "$TMP/src/" "$MNT/t/p/"
	assert_success
	assert_output ''
	run ls -A "$MNT/t/p"
	assert_output $'.hidden\na'
}

@test "vim edits a child with its swap file beside it, and writes it back" {
	printf 'old line\n' >"$MNT/t/p/c"
	# :swapname names the swap file vim made: in the file's own
	# directory, the first place 'directory' offers.
	run env HOME="$TMP" vim -u NONE -i NONE -es \
		-c 'redir! > '"$TMP"'/swap' -c 'swapname' -c 'redir END' \
		-c '%s/old/new/' -c 'wq' "$MNT/t/p/c"
	assert_success
	run cat "$TMP/swap"
	assert_output --partial "$MNT/t/p/.c.swp"
	run cat "$MNT/t/p/c"
	assert_output 'new line'
	# The swap file went with the edit.
	run ls -A "$MNT/t/p"
	assert_output c
}

@test "mktemp and mkstemp make dot-named temporaries in a parent; rename publishes them" {
	run mktemp "$MNT/t/p/.lock.XXXXXX"
	assert_success
	local tmp=$output
	[ -f "$tmp" ]
	# The editor pattern: write a temporary, rename it over the child.
	echo old >"$MNT/t/p/c"
	run python3 -c '
import os, sys, tempfile
fd, path = tempfile.mkstemp(dir=sys.argv[1], prefix=".c.")
os.write(fd, b"new\n")
os.close(fd)
os.replace(path, os.path.join(sys.argv[1], "c"))' "$MNT/t/p"
	assert_success
	run cat "$MNT/t/p/c"
	assert_output new
	run ls -A "$MNT/t/p"
	assert_output "$(printf '%s\n' "$(basename "$tmp")" c | sort)"
}

@test "dot-named children list, stream and snapshot like any child; special files stay the tenant's" {
	events_bg "$BATS_TEST_TMPDIR/ev" 2 "$MNT/t"
	echo x >"$MNT/t/p/.events"
	echo y >"$MNT/t/p/.snapshot"
	events_wait
	run cut -f2- "$BATS_TEST_TMPDIR/ev"
	assert_output "$(evlines create t p .events 1 0 write t p .events 1 1)"
	run ls -A "$MNT/t/p"
	assert_output $'.events\n.snapshot'
	run cat "$MNT/t/p/.snapshot"
	assert_output y
	# The tenant's own special files are untouched by the names.
	run head -n 1 "$MNT/t/.snapshot"
	assert_output --partial $'kind\ttenant'
	# (Children come in no promised order.)
	awk -F'\t' '$1 == "child" { print $4, $7 }' "$MNT/t/.snapshot" |
		sort >"$BATS_TEST_TMPDIR/rows"
	run cat "$BATS_TEST_TMPDIR/rows"
	assert_output $'.events 2\n.snapshot 2'
	run stat_of children "$MNT/t"
	assert_output 2
	# Tenants and parents still may not begin with a dot.
	run mkdir "$MNT/t/.q"
	assert_failure
	assert_output --partial 'Invalid argument'
}

# --- tail -f ---------------------------------------------------------------

@test "tail -f of a child shows every later append" {
	echo first >"$MNT/t/p/log"
	tail -f "$MNT/t/p/log" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
	BG_PIDS+=($!)
	wait_line "$BATS_TEST_TMPDIR/out" first 10
	echo second >>"$MNT/t/p/log"
	wait_line "$BATS_TEST_TMPDIR/out" second 10
	echo third >>"$MNT/t/p/log"
	wait_line "$BATS_TEST_TMPDIR/out" third 10
	bg_stop || true # tail ends by the signal
	run cat "$BATS_TEST_TMPDIR/out"
	assert_output $'first\nsecond\nthird'
}

# --- times set on the open file ------------------------------------------------

# mtimes FILE...: "MTIME NAME" per file, to the nanosecond.
mtimes() {
	local f
	for f in "$@"; do
		echo "$(stat -c %y "$f") $(basename "$f")"
	done
}

@test "cp -p, cp -a, install -p and tar -x keep the source's modification time" {
	mkdir "$TMP/src"
	printf 'one\n' >"$TMP/src/a"
	printf 'two\n' >"$TMP/src/b"
	printf 'three\n' >"$TMP/src/c"
	printf 'four\n' >"$TMP/src/d"
	touch -d '2001-02-03 04:05:06.5' "$TMP/src/a" "$TMP/src/b" "$TMP/src/c" "$TMP/src/d"
	cp -p "$TMP/src/a" "$MNT/t/p/a"
	cp -a "$TMP/src/b" "$MNT/t/p/b"
	install -p -m 0644 "$TMP/src/c" "$MNT/t/p/c"
	# (A tar archive keeps whole seconds: tmpfs says what to expect.)
	tar -C "$TMP/src" -cf "$TMP/d.tar" d
	mkdir "$TMP/x"
	tar -C "$TMP/x" -xf "$TMP/d.tar"
	tar -C "$MNT/t/p" -xf "$TMP/d.tar"
	run mtimes "$MNT/t/p/a" "$MNT/t/p/b" "$MNT/t/p/c" "$MNT/t/p/d"
	assert_output "$(mtimes "$TMP/src/a" "$TMP/src/b" "$TMP/src/c" "$TMP/x/d")"
	run cat "$MNT/t/p/a" "$MNT/t/p/b" "$MNT/t/p/c" "$MNT/t/p/d"
	assert_output $'one\ntwo\nthree\nfour'
	# Within statefs and back out to tmpfs, the time goes along.
	cp -p "$MNT/t/p/a" "$MNT/t/p/a2"
	cp -p "$MNT/t/p/a2" "$TMP/a3"
	run mtimes "$MNT/t/p/a2" "$TMP/a3"
	assert_output "$(mtimes "$TMP/src/a" "$TMP/src/a" | sed '1s/ a$/ a2/; 2s/ a$/ a3/')"
}

@test "a write after the time was set stamps the content anew, as on tmpfs" {
	touch "$MNT/t/p/c"
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"a")
os.utime(fd, ns=(981173106000000000, 981173106000000000))
os.write(fd, b"b")
os.close(fd)' "$MNT/t/p/c"
	run cat "$MNT/t/p/c"
	assert_output ab
	run stat -c %Y "$MNT/t/p/c"
	assert [ "$output" -gt 981173106 ]
}

# --- extended attributes and copying tools -----------------------------------

# xattrs PATH: the user.* attributes getfattr -d lists, one name=value a line.
xattrs() {
	getfattr --absolute-names -d -m - "$1" | sed '1d; /^$/d'
}

@test "listxattr names ttl and child_ttl only while they are set; the facts are read by name" {
	echo x >"$MNT/t/p/c"
	run xattrs "$MNT/t/p/c"
	assert_output ''
	run xattrs "$MNT/t/p"
	assert_output ''
	setfattr -n user.statefs.ttl -v 30 "$MNT/t/p/c"
	setfattr -n user.statefs.child_ttl -v 1.5 "$MNT/t/p"
	run xattrs "$MNT/t/p/c"
	assert_output 'user.statefs.ttl="30"'
	run xattrs "$MNT/t/p"
	assert_output 'user.statefs.child_ttl="1.5"'
	setfattr -n user.statefs.ttl -v 60 "$MNT/t/p"
	run xattrs "$MNT/t/p"
	assert_output $'user.statefs.child_ttl="1.5"\nuser.statefs.ttl="60"'
	run ver "$MNT/t/p/c"
	assert_output 1
	run gen "$MNT/t/p"
	assert_output 1
	# Tenants and the root keep none.
	run xattrs "$MNT/t"
	assert_output ''
}

@test "cp -a, cp --preserve=xattr and rsync -aX copy children to tmpfs and back, lease included" {
	echo plain >"$MNT/t/p/a"
	echo leased >"$MNT/t/p/b"
	setfattr -n user.statefs.ttl -v 300 "$MNT/t/p/b"
	setfattr -n user.statefs.child_ttl -v 200 "$MNT/t/p"
	touch -d '2001-02-03 04:05:06' "$MNT/t/p/a" "$MNT/t/p/b"

	# statefs -> tmpfs
	run cp -a "$MNT/t/p/a" "$MNT/t/p/b" "$TMP/"
	assert_success
	assert_output ''
	run rsync -aX "$MNT/t/p/" "$TMP/r/"
	assert_success
	run xattrs "$TMP/b"
	assert_output 'user.statefs.ttl="300"'
	run xattrs "$TMP/r/b"
	assert_output 'user.statefs.ttl="300"'
	run xattrs "$TMP/r"
	assert_output 'user.statefs.child_ttl="200"'
	run xattrs "$TMP/a"
	assert_output ''

	# tmpfs -> statefs, into a new parent and over existing children
	mkdir "$MNT/t/q" "$MNT/t/s"
	run cp -a "$TMP/a" "$TMP/b" "$MNT/t/q/"
	assert_success
	assert_output ''
	run cp --preserve=xattr "$TMP/b" "$MNT/t/q/b2"
	assert_success
	assert_output ''
	run rsync -aX "$TMP/r/" "$MNT/t/s/"
	assert_success
	for d in q s; do
		run cat "$MNT/t/$d/a" "$MNT/t/$d/b"
		assert_output $'plain\nleased'
		run xattrs "$MNT/t/$d/b"
		assert_output 'user.statefs.ttl="300"'
		run xattrs "$MNT/t/$d/a"
		assert_output ''
		run stat -c %y "$MNT/t/$d/a"
		assert_output '2001-02-03 04:05:06.000000000 +0000'
	done
	run xattrs "$MNT/t/q/b2"
	assert_output 'user.statefs.ttl="300"'
	run xattrs "$MNT/t/s"
	assert_output 'user.statefs.child_ttl="200"'
	# rsync -X removes what the source lacks: here the lease.
	setfattr -n user.statefs.ttl -v 300 "$MNT/t/s/a"
	run rsync -aX "$TMP/r/" "$MNT/t/s/"
	assert_success
	run xattrs "$MNT/t/s/a"
	assert_output ''
}

@test "cp -a and rsync -aX within statefs copy content, times and leases" {
	echo one >"$MNT/t/p/a"
	setfattr -n user.statefs.ttl -v 300 "$MNT/t/p/a"
	touch -d '2001-02-03 04:05:06' "$MNT/t/p/a"
	mkdir "$MNT/t/q"
	run cp -a "$MNT/t/p/a" "$MNT/t/p/a2"
	assert_success
	assert_output ''
	run rsync -aX "$MNT/t/p/" "$MNT/t/q/"
	assert_success
	run cat "$MNT/t/p/a2" "$MNT/t/q/a" "$MNT/t/q/a2"
	assert_output $'one\none\none'
	for f in "$MNT/t/p/a2" "$MNT/t/q/a" "$MNT/t/q/a2"; do
		run xattrs "$f"
		assert_output 'user.statefs.ttl="300"'
		run stat -c %y "$f"
		assert_output '2001-02-03 04:05:06.000000000 +0000'
	done
}

@test "setfattr -x user.statefs.ttl removes the lease, -x child_ttl goes back to the default" {
	statefs_remount -o testclock -o default_ttl=10
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	run ttl "$MNT/t/p/c"
	assert_output 10
	setfattr -x user.statefs.ttl "$MNT/t/p/c"
	run ttl "$MNT/t/p/c"
	assert_output 0
	run xattrs "$MNT/t/p/c"
	assert_output ''
	# Removing it again is as harmless as setting 0 again.
	setfattr -x user.statefs.ttl "$MNT/t/p/c"
	setfattr -n user.statefs.ttl -v 5 "$MNT/t/p"
	setfattr -x user.statefs.ttl "$MNT/t/p"
	setfattr -n user.statefs.child_ttl -v 2 "$MNT/t/p"
	echo y >"$MNT/t/p/d"
	run ttl "$MNT/t/p/d"
	assert_output 2
	setfattr -x user.statefs.child_ttl "$MNT/t/p"
	run child_ttl "$MNT/t/p"
	assert_output 0
	echo z >"$MNT/t/p/e"
	run ttl "$MNT/t/p/e"
	assert_output 10
	# Neither the child nor the parent expires any more; d and e do.
	advance 20000
	run ls "$MNT/t/p"
	assert_output c
	# The facts stay read-only, other names are absent.
	run setfattr -x user.statefs.version "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run setfattr -x user.statefs.generation "$MNT/t/p"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run setfattr -x user.nope "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'No such attribute'
	run setfattr -x user.statefs.ttl "$MNT/t"
	assert_failure
	assert_output --partial 'No such attribute'
	run setfattr -x user.statefs.child_ttl "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'No such attribute'
}

# --- set-user-ID and set-group-ID bits ----------------------------------------

# as UID:GID CMD...: run CMD as that uid and gid, no supplementary groups
# and (not being root) no capabilities.
as() {
	local uid=${1%%:*} gid=${1##*:}
	shift
	setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
}

@test "a write or truncation without CAP_FSETID clears set-user-ID and set-group-ID, as on tmpfs" {
	statefs_remount -o allow_other,default_permissions
	mkdir -p "$MNT/t/p"
	chmod 0777 "$MNT/t/p" "$TMP"
	# Each case on a statefs child and on a tmpfs file alike:
	# NAME MODE OWNER:GROUP WRITER COMMAND (F is the file).
	local cases=(
		"append-by-other 6777 0:0 1000:1000 echo x >>F"
		"otrunc-by-other 6777 0:0 1000:1000 : >F"
		"replace-by-other 6777 0:0 1000:1000 echo x >F"
		"inplace-by-other 6777 0:0 1000:1000 printf y 1<>F"
		"truncate-by-other 6777 0:0 1000:1000 truncate -s 1 F"
		"append-by-owner 4755 1000:0 1000:1000 echo x >>F"
		"nogx-by-member 2766 0:1000 1000:1000 echo x >>F"
		"nogx-by-nonmember 2766 0:0 1000:1000 echo x >>F"
		"read-by-other 6777 0:0 1000:1000 cat F"
	)
	local c name mode owner writer cmd d names=()
	for c in "${cases[@]}"; do
		read -r name mode owner writer cmd <<<"$c"
		names+=("$name")
		for d in "$MNT/t/p" "$TMP"; do
			echo a >"$d/$name"
			chown "$owner" "$d/$name"
			chmod "$mode" "$d/$name"
			as "$writer" sh -c "${cmd//F/\"\$1\"}" _ "$d/$name" >/dev/null
		done
	done
	(cd "$TMP" && stat -c '%A %n' "${names[@]}") >"$BATS_TEST_TMPDIR/tmpfs"
	run bash -c 'cd "$1" && shift && stat -c "%A %n" "$@"' _ "$MNT/t/p" "${names[@]}"
	# statefs shows what tmpfs shows, which is the kernel's rule.
	assert_output "$(cat "$BATS_TEST_TMPDIR/tmpfs")"
	assert_output "-rwxrwxrwx append-by-other
-rwxrwxrwx otrunc-by-other
-rwxrwxrwx replace-by-other
-rwxrwxrwx inplace-by-other
-rwxrwxrwx truncate-by-other
-rwxr-xr-x append-by-owner
-rwxrwSrw- nogx-by-member
-rwxrw-rw- nogx-by-nonmember
-rwsrwsrwx read-by-other"
}

@test "root's writes keep set-user-ID and set-group-ID, unless it dropped CAP_FSETID" {
	local d
	for d in "$MNT/t/p" "$TMP"; do
		echo a >"$d/c"
		echo a >"$d/d"
		chmod 6777 "$d/c" "$d/d"
		echo x >>"$d/c"
		echo y >"$d/c"
		setpriv --inh-caps=-all --bounding-set=-all -- \
			sh -c 'echo x >>"$1"' _ "$d/d"
	done
	run stat -c '%a %n' "$MNT/t/p/c" "$MNT/t/p/d" "$TMP/c" "$TMP/d"
	assert_output "6777 $MNT/t/p/c
777 $MNT/t/p/d
6777 $TMP/c
777 $TMP/d"
}

# --- fallocate, O_APPEND read-back, mmap, unlinked descriptors -------------

@test "fallocate -l extends a child with zeros as on tmpfs, and publishes on close" {
	local d
	for d in "$MNT/t/p" "$TMP"; do
		fallocate -l 10 "$d/new"
		printf 'abc' >"$d/old"
		fallocate -l 6 "$d/old"
		# Long enough already: nothing changes.
		fallocate -o 1 -l 2 "$d/old"
		printf 'x\n' >"$d/app"
		# Through an O_APPEND descriptor: its end is the content's.
		python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.posix_fallocate(fd, 0, 5)
os.write(fd, b"y")
os.close(fd)' "$d/app"
	done
	for f in new old app; do
		cmp "$MNT/t/p/$f" "$TMP/$f"
	done
	run stat -c '%s %n' "$MNT/t/p/new" "$MNT/t/p/old" "$MNT/t/p/app"
	assert_output "10 $MNT/t/p/new
6 $MNT/t/p/old
6 $MNT/t/p/app"
	# One publication each: the fallocate that changed nothing made none.
	run ver "$MNT/t/p/old"
	assert_output 2
	run ver "$MNT/t/p/app"
	assert_output 2
}

@test "fallocate keeps the limits of a write, and refuses every mode but 0 with EOPNOTSUPP" {
	statefs_remount -o max_payload=16
	mkdir -p "$MNT/t/p"
	printf 'abc' >"$MNT/t/p/c"
	run fallocate -l 17 "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'File too large'
	run fallocate -l 16 "$MNT/t/p/c"
	assert_success
	run stat -c %s "$MNT/t/p/c"
	assert_output 16
	printf 'abc' >"$MNT/t/p/c"
	run fallocate --keep-size -l 10 "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'unsupported'
	# KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE, COLLAPSE_RANGE, INSERT_RANGE
	run python3 -c '
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDWR)
for mode in (0x01, 0x03, 0x10, 0x08, 0x20):
    r = libc.fallocate(fd, mode, ctypes.c_long(0), ctypes.c_long(4096))
    print(errno.errorcode[ctypes.get_errno()] if r else "OK")
os.close(fd)' "$MNT/t/p/c"
	# (Python names EOPNOTSUPP by its other name: one number on Linux.)
	assert_output "$(printf 'ENOTSUP\n%.0s' 1 2 3 4 5 | head -c -1)"
	run cat "$MNT/t/p/c"
	assert_output abc
	run ver "$MNT/t/p/c"
	assert_output 3
}

@test "an O_APPEND descriptor reads back its own pending append, as on tmpfs" {
	local d n=0
	for d in "$MNT/t/p" "$TMP"; do
		printf 'one\n' >"$d/c"
		n=$((n + 1))
		python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND)
os.write(fd, b"two\n")
os.lseek(fd, 0, os.SEEK_SET)
sys.stdout.buffer.write(os.read(fd, 100))
os.lseek(fd, 5, os.SEEK_SET)
sys.stdout.buffer.write(os.read(fd, 100))
os.close(fd)' "$d/c" >"$BATS_TEST_TMPDIR/out.$n"
	done
	run cat "$BATS_TEST_TMPDIR/out.1"
	assert_output "$(cat "$BATS_TEST_TMPDIR/out.2")"
	assert_output $'one\ntwo\nwo'
	run cat "$MNT/t/p/c"
	assert_output $'one\ntwo'
}

# mmap_read FILE: the content of FILE through a read-only shared mapping.
mmap_read() {
	python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ, flags=mmap.MAP_SHARED)
sys.stdout.buffer.write(m[:])
m.close()
os.close(fd)' "$1"
}

@test "a read-only shared mmap of a child reads its content; a new mapping sees a new publication" {
	echo hello >"$MNT/t/p/c"
	run mmap_read "$MNT/t/p/c"
	assert_success
	assert_output hello
	echo 'a new state' >"$MNT/t/p/c"
	run mmap_read "$MNT/t/p/c"
	assert_output 'a new state'
	# One descriptor, mapped again after a publication, sees it too.
	run python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ, flags=mmap.MAP_SHARED)
a = m[:]
m.close()
with open(sys.argv[1], "w") as w:
    w.write("third\n")
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ, flags=mmap.MAP_SHARED)
sys.stdout.buffer.write(a + m[:])' "$MNT/t/p/c"
	assert_success
	assert_output $'a new state\nthird'
}

@test "SQLite's WAL mode (a shared mapping of its -shm file) works in a parent" {
	run python3 -c '
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute("pragma journal_mode=wal").fetchone()[0])
c.execute("create table t(x)")
c.execute("insert into t values (42)")
c.commit()
c.close()
c = sqlite3.connect(sys.argv[1])
print(c.execute("select x from t").fetchone()[0])' "$MNT/t/p/db"
	assert_success
	assert_output $'wal\n42'
}

@test "an unlinked child's own descriptor gets ESTALE, and O_TMPFILE is EOPNOTSUPP (see the man page)" {
	run python3 -c '
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x")
os.unlink(sys.argv[1])
for call in (lambda: os.read(fd, 1), lambda: os.pread(fd, 1, 0),
             lambda: os.write(fd, b"y"), lambda: os.fstat(fd),
             lambda: os.close(fd)):
    try:
        call()
        print("OK")
    except OSError as e:
        print(errno.errorcode[e.errno])
' "$MNT/t/p/c"
	assert_output $'ESTALE\nESTALE\nESTALE\nESTALE\nESTALE'
	run ls -A "$MNT/t/p"
	assert_output ''
	run py_errno 'os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600)' "$MNT/t/p"
	assert_output ENOTSUP # EOPNOTSUPP
	# What the man page offers instead: keep the temporary linked until
	# it is closed (NamedTemporaryFile unlinks after its close).
	run python3 -c '
import sys, tempfile
with tempfile.NamedTemporaryFile(dir=sys.argv[1]) as t:
    t.write(b"scratch")
    t.flush()
    t.seek(0)
    print(t.read().decode())' "$MNT/t/p"
	assert_success
	assert_output scratch
	run ls -A "$MNT/t/p"
	assert_output ''
}
