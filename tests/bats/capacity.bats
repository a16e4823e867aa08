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
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		# The tenant layout: each tenant is admitted against the
		# ceiling as if it were the store alone.
		statefs_mount -o max_parents=2,tenant_max_parents=0
		mkdir -p "$MNT/t/p1" "$MNT/t/p2" "$MNT/u/p1" "$MNT/u/p2"
	else
		statefs_mount -o max_parents=2
		mkdir -p "$MNT/t/p1" "$MNT/u/p2"
	fi
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

# hold_open DIR N SIZE: open DIR/s0..s(N-1), write SIZE bytes into each
# in turn and keep them open, printing OK or the errno of each write; then
# wait for a line on stdin (the test reads .stats meanwhile), remove s1,
# and close the rest, printing each close's outcome.
hold_open() {
	python3 -c '
import errno, os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fds, out = [], []
for i in range(n):
    fd = os.open("%s/s%d" % (d, i), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    fds.append(fd)
    try:
        os.write(fd, b"z" * size)
        out.append("OK")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print("writes", *out, flush=True)
sys.stdin.readline()
os.unlink("%s/s1" % d)
out = []
for fd in fds:
    try:
        os.close(fd)
        out.append("OK")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print("closes", *out, flush=True)' "$@"
}

# staged_run DIR N SIZE: hold_open in the background; when its writes are
# done, print their line, .stats' bytes and staged_bytes (root, then the
# tenant of DIR), then let it close and print that line and the same.
staged_run() {
	local dir=$1 fifo out t
	fifo=$(mktemp -u "$BATS_TEST_TMPDIR/go.XXXXXX")
	out=$(mktemp "$BATS_TEST_TMPDIR/held.XXXXXX")
	t=$(dirname "$dir")
	mkfifo "$fifo"
	hold_open "$@" <"$fifo" >"$out" 3>&- &
	local pid=$!
	exec 7>"$fifo"
	until [ -s "$out" ]; do
		proc_alive "$pid" || break
		sleep 0.05
	done
	cat "$out"
	echo "root $(stat_of bytes) $(stat_of staged_bytes) tenant $(stat_of bytes "$t") $(stat_of staged_bytes "$t")"
	echo go >&7
	exec 7>&-
	wait "$pid"
	tail -n 1 "$out"
	echo "root $(stat_of bytes) $(stat_of staged_bytes) tenant $(stat_of bytes "$t") $(stat_of staged_bytes "$t")"
}

@test "max_bytes: what open files stage counts until they close; the write that would pass it fails with ENOSPC" {
	statefs_mount -o max_payload=65536,max_bytes=262144,tenant_max_bytes=0
	mkdir -p "$MNT/t/p"
	# Five files of 64 KiB: four fit 256 KiB staged and nothing
	# published; the fifth write is refused.  Closing publishes the four
	# but s1, removed first (its close is ESTALE), and the fifth, refused.
	run staged_run "$MNT/t/p" 5 65536
	assert_success
	assert_output "writes OK OK OK OK ENOSPC
root 0 262144 tenant 0 262144
closes OK ESTALE OK OK ENOSPC
root 196608 0 tenant 196608 0"
	run ls "$MNT/t/p"
	assert_output $'s0\ns2\ns3\ns4'
	run stat -c %s "$MNT/t/p/s4"
	assert_output 0
	[ "$(stat_of refused_capacity)" -ge 1 ]
	# Room is back: 64 KiB more fits beside the 192 KiB published.
	head -c 65536 /dev/zero >"$MNT/t/p/n"
	run stat_of bytes
	assert_output 262144
	run bash -c 'echo x >"$1/t/p/m"' _ "$MNT"
	assert_failure
	assert_output --partial 'No space left on device'
	# Replacing a child counts without the content it replaces.
	head -c 65536 /dev/urandom >"$MNT/t/p/n"
	run stat_of staged_bytes
	assert_output 0
}

@test "tenant_max_bytes: what a tenant's open files stage counts in its share (EDQUOT), not the others'" {
	statefs_mount -o max_payload=65536,max_bytes=1048576,tenant_max_bytes=131072
	mkdir -p "$MNT/t/p" "$MNT/u/q"
	run staged_run "$MNT/t/p" 3 65536
	assert_success
	assert_output "writes OK OK EDQUOT
root 0 131072 tenant 0 131072
closes OK ESTALE EDQUOT
root 65536 0 tenant 65536 0"
	[ "$(stat_of refused_quota)" -ge 1 ]
	# Another tenant's files stage in its own share.
	run staged_run "$MNT/u/q" 2 65536
	assert_success
	assert_output "writes OK OK
root 65536 131072 tenant 0 131072
closes OK ESTALE
root 131072 0 tenant 65536 0"
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
