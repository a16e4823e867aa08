#!/usr/bin/env bats
# statefs(8), CHILDREN: children: admission, state (content, versions,
# publications, compare-and-swap), removal.

load helpers

setup() {
	statefs_mount
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
}

# --- admission and idempotency ---------------------------------------------

@test "touch admits an empty child with version 0" {
	touch "$C"
	run stat -c %s "$C"
	assert_output 0
	run ver "$C"
	assert_success
	assert_output 0
}

@test "echo > a new name admits a child whose first publication is version 1" {
	echo x >"$C"
	run cat "$C"
	assert_output x
	run ver "$C"
	assert_output 1
}

@test "exclusive create of an existing child fails with EEXIST and changes nothing" {
	echo first >"$C"
	run bash -c 'set -C; echo second >"$1"' _ "$C"
	assert_failure
	assert_output --partial 'cannot overwrite existing file'
	run py_errno 'os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)' "$C"
	assert_output EEXIST
	run cat "$C"
	assert_output first
	run ver "$C"
	assert_output 1
}

@test "exclusive create of a new name succeeds" {
	run bash -c 'set -C; echo only >"$1"' _ "$C"
	assert_success
	run cat "$C"
	assert_output only
}

@test "plain O_CREAT opens the existing child: same inode, content replaced" {
	echo x >"$C"
	local ino
	ino=$(stat -c %i "$C")
	echo y >"$C"
	run cat "$C"
	assert_output y
	run stat -c %i "$C"
	assert_output "$ino"
	run ver "$C"
	assert_output 2
	run ls "$MNT/t/p"
	assert_output c
}

# --- publications ---------------------------------------------------------------

@test "each publication increments the version: replace, append, truncate" {
	echo a >"$C"
	run ver "$C"
	assert_output 1
	echo b >>"$C"
	run ver "$C"
	assert_output 2
	run cat "$C"
	assert_output $'a\nb'
	# An O_TRUNC open that writes nothing publishes at release, which
	# the kernel sends after close(2) returns (store_stage_flush).
	: >"$C"
	for _ in $(seq 100); do
		[ "$(ver "$C")" = 3 ] && break
		sleep 0.05
	done
	run ver "$C"
	assert_output 3
	run stat -c %s "$C"
	assert_output 0
	echo c >>"$C"
	run cat "$C"
	assert_output c
	run ver "$C"
	assert_output 4
}

@test "touch of an existing child keeps its content and version" {
	echo keep >"$C"
	touch "$C"
	run cat "$C"
	assert_output keep
	run ver "$C"
	assert_output 1
}

@test "the version of a child is an extended attribute read by name, not listed" {
	echo x >"$C"
	echo y >>"$C"
	run getfattr --absolute-names -n user.statefs.version "$C"
	assert_success
	assert_output --partial 'user.statefs.version="2"'
	# Read-only: out of the listing, so copying tools do not try to set it.
	run getfattr --absolute-names -d -m - "$C"
	assert_success
	assert_output ''
	run setfattr -n user.statefs.version -v 9 "$C"
	assert_failure
	run ver "$C"
	assert_output 2
}

@test "only user.* attributes are kept: other namespaces are not supported" {
	echo x >"$C"
	# An unknown user.* name is absent; security.*, system.* and trusted.*
	# are not supported at all, so ls -l stops asking for labels and ACLs.
	run getfattr --absolute-names -n user.nope "$C"
	assert_failure
	assert_output --partial 'No such attribute'
	for name in security.selinux system.posix_acl_access trusted.x; do
		run getfattr --absolute-names -n "$name" "$C"
		assert_failure
		assert_output --partial 'Operation not supported'
		run setfattr -n "$name" -v 0sAgAAAA== "$C"
		assert_failure
		assert_output --partial 'Operation not supported'
		run setfattr -x "$name" "$C"
		assert_failure
		assert_output --partial 'Operation not supported'
	done
	run getfattr --absolute-names -n security.selinux "$MNT/t/p"
	assert_output --partial 'Operation not supported'
	run ls -l "$C"
	assert_success
	assert_output --regexp '^-rw-r--r-- 1 '
	run ver "$C"
	assert_output 1
}

@test "reading a child does not publish" {
	echo a >"$C"
	cat "$C" >/dev/null
	run cat "$C"
	assert_output a
	run ver "$C"
	assert_output 1
}

@test "a write through several write calls is published once, on close" {
	head -c 4096 /dev/zero | tr '\0' A >"$BATS_TEST_TMPDIR/src"
	dd if="$BATS_TEST_TMPDIR/src" of="$C" bs=512 status=none
	run ver "$C"
	assert_output 1
	run stat -c %s "$C"
	assert_output 4096
	run cmp "$BATS_TEST_TMPDIR/src" "$C"
	assert_success
}

@test "staged writes are invisible to other readers until close" {
	echo old >"$C"
	# One process writes and keeps its file open while it reads through
	# a second open file: a child process would not do, since a fork+exec
	# closes the inherited descriptor and every close(2) publishes.
	run python3 - "$C" <<'EOF'
import os, sys
path = sys.argv[1]
def cat():
    fd = os.open(path, os.O_RDONLY)
    data = os.read(fd, 4096).decode()
    os.close(fd)
    return data
fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
os.write(fd, b'ne')
os.write(fd, b'w\n')
print('open:', cat(), end='')
os.close(fd)
print('closed:', cat(), end='')
EOF
	assert_success
	assert_output $'open: old\nclosed: new'
	run ver "$C"
	assert_output 2
}

@test "an in-place edit without O_TRUNC publishes against the version at open" {
	echo hello >"$C"
	printf J | dd of="$C" conv=notrunc status=none
	run cat "$C"
	assert_output Jello
	run ver "$C"
	assert_output 2
}

@test "compare-and-swap: an in-place edit that lost the race fails with EAGAIN and changes nothing" {
	echo original >"$C"
	run python3 - "$C" <<'EOF'
import errno, os, subprocess, sys
path = sys.argv[1]
fd = os.open(path, os.O_RDWR)      # in place: no O_TRUNC, no O_APPEND
subprocess.run(['sh', '-c', 'echo other >"$1"', 'sh', path], check=True)
try:
    os.write(fd, b'MINE')
    os.close(fd)
    print('OK')
except OSError as e:
    print(errno.errorcode[e.errno])
EOF
	assert_output EAGAIN
	run cat "$C"
	assert_output other
	run ver "$C"
	assert_output 2
}

@test "compare-and-swap through dd reports the lost race on close" {
	echo original >"$C"
	# dd opens the child first, then reads its input: the publication made
	# while dd waits on the FIFO makes dd's edit stale.
	mkfifo "$BATS_TEST_TMPDIR/in"
	dd if="$BATS_TEST_TMPDIR/in" of="$C" conv=notrunc status=none \
		2>"$BATS_TEST_TMPDIR/dd.err" 3>&- &
	local dd_pid=$!
	exec 7>"$BATS_TEST_TMPDIR/in"
	# dd opens its input, then its output as its fd 1: wait for that.
	for _ in $(seq 50); do
		[ "$(readlink "/proc/$dd_pid/fd/1")" = "$C" ] && break
		sleep 0.05
	done
	echo other >"$C"
	printf MINE >&7
	exec 7>&-
	local rc=0
	wait "$dd_pid" || rc=$?
	assert_not_equal "$rc" 0
	run cat "$BATS_TEST_TMPDIR/dd.err"
	assert_output --partial 'Resource temporarily unavailable'
	run cat "$C"
	assert_output other
}

@test "appends from two open files both land, whole, in the order they are closed" {
	echo start >"$C"
	run python3 - "$C" <<'EOF'
import os, sys
path = sys.argv[1]
one = os.open(path, os.O_WRONLY | os.O_APPEND)
two = os.open(path, os.O_WRONLY | os.O_APPEND)
os.write(one, b'o')
os.write(two, b'tw')
os.write(one, b'ne\n')
os.write(two, b'o\n')
os.close(two)
os.close(one)
EOF
	assert_success
	run cat "$C"
	assert_output $'start\ntwo\none'
	run ver "$C"
	assert_output 3
}

# --- content limit --------------------------------------------------------------

@test "content over max_payload fails with EFBIG and the old content stays" {
	statefs_remount -o max_payload=16
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	echo old >"$C"
	run bash -c 'printf %020d 0 >"$1"' _ "$C"
	assert_failure
	assert_output --partial 'File too large'
	run cat "$C"
	assert_output old
	run ver "$C"
	assert_output 1
	run stat_of bytes
	assert_output 4
}

@test "content of exactly max_payload bytes is accepted" {
	statefs_remount -o max_payload=16
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	printf %016d 7 >"$C"
	run stat -c %s "$C"
	assert_output 16
}

@test "an append past max_payload fails with EFBIG and the old content stays" {
	statefs_remount -o max_payload=16
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	printf 0123456789 >"$C"
	run bash -c 'printf abcdefghij >>"$1"' _ "$C"
	assert_failure
	assert_output --partial 'File too large'
	run cat "$C"
	assert_output 0123456789
}

@test "truncate past max_payload fails with EFBIG; within it zero-extends" {
	statefs_remount -o max_payload=16
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	printf abc >"$C"
	run truncate -s 17 "$C"
	assert_failure
	assert_output --partial 'File too large'
	run stat -c %s "$C"
	assert_output 3
	truncate -s 5 "$C"
	run ver "$C"
	assert_output 2
	run od -An -c "$C"
	assert_output --regexp '^ +a +b +c +\\0 +\\0$'
}

@test "the failing write reports the limit even though bash ignores close errors" {
	statefs_remount -o max_payload=16
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	run dd if=/dev/zero of="$C" bs=8 count=3 status=none
	assert_failure
	assert_output --partial 'error writing'
	assert_output --partial 'File too large'
	run stat -c %s "$C"
	refute_output 24
}

# refused_then_close PATH HOW: open PATH with O_WRONLY|O_TRUNC, write "new",
# make one write that is refused (HOW: "far" writes past max_payload, "grow"
# writes 8 bytes after the first ones), then, when HOW ends in "+fsync",
# fsync; then close.  Prints what each step gave: a byte count, OK or the
# errno name.
refused_then_close() {
	python3 - "$1" "$2" <<'PY'
import errno, os, sys
path, how = sys.argv[1], sys.argv[2]
def step(f, *a):
    try:
        r = f(*a)
        return "OK" if r is None else str(r)
    except OSError as e:
        return errno.errorcode[e.errno]
fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
out = [step(os.write, fd, b"new")]
if how.startswith("far"):
    out.append(step(os.pwrite, fd, b"x", 1000))
else:
    out.append(step(os.pwrite, fd, b"12345678", 3))
if how.endswith("+fsync"):
    out.append(step(os.fsync, fd))
out.append(step(os.close, fd))
print(" ".join(out))
PY
}

@test "close after a refused write reports the refusal (EFBIG) and nothing is published" {
	statefs_remount -o max_payload=16
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	echo old >"$C"
	run refused_then_close "$C" far
	assert_output '3 EFBIG EFBIG'
	run cat "$C"
	assert_output old
	run ver "$C"
	assert_output 1
	run refused_then_close "$C" far+fsync
	assert_output '3 EFBIG EFBIG EFBIG'
	run cat "$C"
	assert_output old
	run ver "$C"
	assert_output 1
	run stat_of bytes
	assert_output 4
}

@test "close after a write refused by max_bytes reports ENOSPC and nothing is published" {
	statefs_remount -o max_payload=16,max_bytes=20,tenant_max_bytes=0
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	printf 012345678901 >"$MNT/t/p/d"
	echo old >"$C"
	run refused_then_close "$C" grow
	assert_output '3 ENOSPC ENOSPC'
	run refused_then_close "$C" grow+fsync
	assert_output '3 ENOSPC ENOSPC ENOSPC'
	run cat "$C"
	assert_output old
	run ver "$C"
	assert_output 1
	run stat_of bytes
	assert_output 16
}

# --- removal ---------------------------------------------------------------------

@test "rm removes a child and a second rm fails with ENOENT" {
	echo x >"$C"
	rm "$C"
	run rm "$C"
	assert_failure
	assert_output --partial 'No such file or directory'
	run ls "$MNT/t/p"
	assert_output ''
	run stat_of children
	assert_output 0
}

@test "a read through a handle of a removed incarnation fails with ESTALE" {
	echo old >"$C"
	exec 8<"$C"
	rm "$C"
	echo new >"$C"
	run cat <&8
	assert_failure
	assert_output --partial 'Stale file handle'
	exec 8<&-
	run cat "$C"
	assert_output new
	run ver "$C"
	assert_output 1
}

@test "a write through a handle of a removed child fails with ESTALE and changes nothing" {
	echo old >"$C"
	exec 8>>"$C"
	rm "$C"
	echo new >"$C"
	run bash -c 'echo late >&8'
	assert_failure
	assert_output --partial 'Stale file handle'
	exec 8>&-
	run cat "$C"
	assert_output new
}

@test "a write into a child whose parent left fails with ESTALE" {
	echo old >"$C"
	exec 8>>"$C"
	rmdir "$MNT/t/p"
	run bash -c 'echo late >&8'
	assert_failure
	assert_output --partial 'Stale file handle'
	exec 8>&-
	run ls "$MNT/t"
	assert_output ''
	run stat_of children
	assert_output 0
}

@test "a child removed while open is gone for everyone else at once" {
	echo x >"$C"
	exec 8<"$C"
	rm "$C"
	run stat "$C"
	assert_failure
	assert_output --partial 'No such file or directory'
	run ls "$MNT/t/p"
	assert_output ''
	exec 8<&-
}

@test "removing every child leaves the parent and its generation alone" {
	touch "$MNT/t/p/a" "$MNT/t/p/b"
	rm "$MNT/t/p/a" "$MNT/t/p/b"
	run ls "$MNT/t"
	assert_output p
	run gen "$MNT/t/p"
	assert_output 1
}
