#!/usr/bin/env bats
# docs/shared-store.md: several mounts of one shared store.  Each test starts
# its own redis-server (redis_helpers.bash) and mounts it twice with
# -o store=unix:SOCK, as two hosts would: one tree, one winner of a race
# across mounts, read-your-writes, fsync of a directory, the limits
# recorded by the first mount, SIGTERM leaving the store to the others,
# and a store that lost its data being a new instance.  The mounts are
# explicit here, whichever backend the rest of the run uses.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

setup() {
	redis_start
}

teardown() {
	local rc=0
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount || rc=1
	redis_stop_all
	return "$rc"
}

@test "two mounts of one store show one tree; each sees its own change at once, the other's after fsync of a directory" {
	mount2
	mkdir "$A/acme" "$A/acme/p"
	echo hello >"$A/acme/p/c"
	# Read-your-writes on A, at once.
	run cat "$A/acme/p/c"
	assert_output hello
	fsyncdir "$B"
	run cat "$B/acme/p/c"
	assert_output hello
	[ "$(ver "$B/acme/p/c")" = 1 ]
	[ "$(gen "$B/acme/p")" = 1 ]
	[ "$(stat -c %i "$A/acme/p/c")" = "$(stat -c %i "$B/acme/p/c")" ]
	echo more >>"$B/acme/p/c"
	fsyncdir "$A"
	run cat "$A/acme/p/c"
	assert_output "$(printf 'hello\nmore')"
	run stat_of children "$A"
	assert_output 1
	run stat_of store "$A"
	assert_output connected
}

@test "across mounts one create of a name wins (EEXIST), one rm wins (ENOENT), quotas are exact store-wide" {
	mount2 -o max_children=3,tenant_max_children=3
	mkdir -p "$A/t/p"
	fsyncdir "$B"
	run py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY))' "$A/t/p/c"
	assert_output OK
	run py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY))' "$B/t/p/c"
	assert_output EEXIST
	touch "$B/t/p/d" "$A/t/p/e"
	run py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY))' "$B/t/p/f"
	assert_output ENOSPC
	run stat_of refused_capacity "$A"
	assert_output 1
	rm "$A/t/p/c"
	run py_errno 'os.unlink(sys.argv[1])' "$B/t/p/c"
	assert_output ENOENT
}

@test "an edit whose base another mount replaced gets EAGAIN; a handle of a removed incarnation gets ESTALE" {
	mount2
	mkdir -p "$A/t/p"
	echo one >"$A/t/p/c"
	fsyncdir "$B"
	exec 5<>"$B/t/p/c"
	echo two >"$A/t/p/c"
	fsyncdir "$B"
	run py_errno 'os.write(5, b"x"); os.close(5)'
	assert_output EAGAIN
	exec 5>&-
	exec 6<"$B/t/p/c"
	rm "$A/t/p/c"
	fsyncdir "$B"
	run py_errno 'os.read(6, 10)'
	assert_output ESTALE
	exec 6<&-
	run cat "$B/t/p/c"
	assert_failure
}

@test "the first mount records the limits; a mount with others is refused naming the option, or adopts them" {
	statefs_mount -o "store=unix:$REDIS_SOCK" -o max_children=7
	run timeout 20 "$STATEFS_BIN" -f -o "store=unix:$REDIS_SOCK" -o max_children=8 "$BATS_TEST_TMPDIR"
	assert_failure
	assert_equal "${#lines[@]}" 1
	assert_output --partial '-o max_children'
	statefs_mount -o "store=unix:$REDIS_SOCK" -o max_children=8,store_limits=adopt
	run stat_of max_children
	assert_output 7
}

@test "SIGTERM of one mount does not drain the shared store: it unmounts and the other mount keeps everything" {
	mount2
	mkdir -p "$A/t/p"
	echo keep >"$A/t/p/c"
	MNT=$A
	STATEFS_PID=$(echo "${STATEFS_MOUNTS[0]}" | cut -d' ' -f1)
	kill -TERM "$STATEFS_PID"
	statefs_wait_exit 10
	assert_equal "$STATEFS_STATUS" 0
	fsyncdir "$B"
	run cat "$B/t/p/c"
	assert_output keep
	run cat "$B/.drain"
	assert_output ready
}

@test "a .drain write on one mount drains the shared store for every mount" {
	mount2 -o testclock,drain_window=1
	mkdir -p "$A/t/p"
	echo x >"$A/t/p/c"
	echo 1 >"$A/.drain"
	fsyncdir "$B"
	run py_errno 'os.mkdir(sys.argv[1])' "$B/u"
	assert_output EROFS
	echo 1000 >"$B/.clock"
	fsyncdir "$A"
	run cat "$A/.drain"
	assert_output drained
	run ls "$A"
	assert_output ''
}

@test "a lease runs on the store's clock: .clock on one mount expires the child on both" {
	mount2 -o testclock
	mkdir -p "$A/t/p"
	echo x >"$A/t/p/c"
	set_ttl 1 "$A/t/p/c"
	fsyncdir "$B"
	[ -e "$B/t/p/c" ]
	echo 999 >"$B/.clock"
	[ -e "$A/t/p/c" ]
	echo 1 >"$B/.clock"
	fsyncdir "$A"
	run ls "$A/t/p"
	assert_output ''
	run cat "$A/.clock"
	assert_output 1000
}

@test ".events of two mounts show a tenant's lines with the same sequence numbers" {
	mount2
	mkdir -p "$A/t/p"
	fsyncdir "$B"
	events_bg "$BATS_TEST_TMPDIR/a" 3 "$A/t"
	events_bg "$BATS_TEST_TMPDIR/b" 3 "$B/t"
	echo x >"$A/t/p/c"
	rm "$B/t/p/c"
	events_wait
	run cat "$BATS_TEST_TMPDIR/a"
	assert_output "$(printf '3\tcreate\tt\tp\tc\t1\t0\n4\twrite\tt\tp\tc\t1\t1\n5\tunlink\tt\tp\tc\t1\t1')"
	run diff "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
	assert_success
}

@test "a store that lost its data is a new instance: the instance changes, old handles get ESTALE, nothing is merged" {
	mount2
	mkdir -p "$A/t/p"
	echo x >"$A/t/p/c"
	fsyncdir "$B"
	old=$(stat_of instance "$B")
	exec 5<"$B/t/p/c"
	rcli FLUSHALL >/dev/null
	# The next call meets the new instance; the mount follows it.
	run py_errno 'os.mkdir(sys.argv[1])' "$A/u"
	for i in $(seq 100); do
		[ "$(stat_of instance "$B")" != "$old" ] && break
		sleep 0.1
	done
	refute [ "$(stat_of instance "$B")" = "$old" ]
	run py_errno 'os.read(5, 10)'
	assert_output ESTALE
	exec 5<&-
	fsyncdir "$B"
	run ls "$B/t/p"
	assert_failure
	mkdir -p "$B/t/p"
	echo new >"$B/t/p/c"
	fsyncdir "$A"
	run cat "$A/t/p/c"
	assert_output new
}

@test "after a store lost its data, the first operation of a path meets the new instance: only old handles get ESTALE" {
	statefs_mount -o "store=unix:$REDIS_SOCK"
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	exec 5<"$MNT/t/p/c"
	rcli FLUSHALL >/dev/null
	# At once, before the mount noticed: the root is every instance's.
	run py_errno 'os.mkdir(sys.argv[1])' "$MNT/u"
	assert_output OK
	run py_errno 'os.read(5, 10)'
	assert_output ESTALE
	exec 5<&-
	mkdir -p "$MNT/t/p"
	rcli FLUSHALL >/dev/null
	# Through the tenant the kernel still has: the old node is stale,
	# the kernel looks the path up again and finds the new instance.
	run py_errno 'os.mkdir(sys.argv[1])' "$MNT/t/q"
	assert_output ENOENT
	run py_errno 'os.mkdir(sys.argv[1])' "$MNT/t"
	assert_output OK
}

@test "after a store lost its data, a tenant's open .events gives the lines before, then ESTALE: a blocked cat ends, poll and O_NONBLOCK see it; the root's gets overflow" {
	local out=$BATS_TEST_TMPDIR/cat cpid old i st
	mount2
	mkdir -p "$A/t/p"
	fsyncdir "$B"
	# Opened here: each reader starts before the lines below.
	exec 6<"$B/t/.events" 7<"$B/.events" 8<"$B/t/.events"
	timeout 60 cat <&8 >"$out" 2>"$out.err" 3>&- 6<&- 7<&- 8<&- &
	cpid=$!
	exec 8<&-
	echo x >"$A/t/p/c"
	fsyncdir "$B"
	for i in $(seq 200); do
		[ "$(wc -l <"$out")" -ge 2 ] && break
		sleep 0.1
	done
	old=$(stat_of instance "$B")
	rcli FLUSHALL >/dev/null
	run py_errno 'os.mkdir(sys.argv[1])' "$A/u"
	for i in $(seq 100); do
		[ "$(stat_of instance "$B")" != "$old" ] && break
		sleep 0.1
	done
	refute [ "$(stat_of instance "$B")" = "$old" ]
	# The blocked read wakes with ESTALE (124 would be the timeout).
	st=0
	wait "$cpid" || st=$?
	assert_equal "$st" 1
	run cat "$out.err"
	assert_output --partial "Stale file handle"
	run cat "$out"
	assert_output "$(printf '3\tcreate\tt\tp\tc\t1\t0\n4\twrite\tt\tp\tc\t1\t1')"
	# A reader that had not read: poll says readable, the lines before
	# the end come first, then ESTALE, with O_NONBLOCK as without.
	run python3 -c '
import errno, os, select
os.set_blocking(6, False)
p = select.poll()
p.register(6, select.POLLIN)
print("poll", bool(p.poll(20000)))
print(os.read(6, 4096).decode(), end="")
for i in range(2):
    try:
        os.read(6, 4096)
        print("read")
    except OSError as e:
        print(errno.errorcode[e.errno])
os.set_blocking(6, True)
try:
    os.read(6, 4096)
except OSError as e:
    print(errno.errorcode[e.errno])'
	assert_output "$(printf 'poll True\n3\tcreate\tt\tp\tc\t1\t0\n4\twrite\tt\tp\tc\t1\t1\nESTALE\nESTALE\nESTALE')"
	# The root is every instance's: its reader gets overflow and goes on.
	run timeout 20 grep -m 1 -x overflow <&7
	assert_success
	exec 6<&- 7<&-
	# The new instance's tenant of the same name has a feed of its own.
	mkdir -p "$B/t/p"
	exec 6<"$B/t/.events"
	echo y >"$B/t/p/d"
	run timeout 20 head -n 1 <&6
	assert_output --partial "create	t	p	d"
	exec 6<&-
}

@test "Redis unreachable: an operation fails within store_timeout with EIO and changes nothing; .stats says disconnected; it recovers" {
	statefs_mount -o "store=unix:$REDIS_SOCK,store_timeout=1"
	mkdir -p "$MNT/t/p"
	pid=${REDIS_PIDS[0]}
	kill -STOP "$pid"
	run py_errno 'os.mkdir(sys.argv[1])' "$MNT/t/q"
	assert_output EIO
	run stat_of store
	assert_output disconnected
	kill -CONT "$pid"
	for i in $(seq 100); do
		[ "$(stat_of store)" = connected ] && break
		sleep 0.1
	done
	run stat_of store
	assert_output connected
	run ls "$MNT/t"
	assert_output p
	mkdir "$MNT/t/q"
}

@test "a Redis ACL user with the rules the man page gives mounts and makes every kind of transition" {
	rcli ACL SETUSER statefs on '>s3cret' '~statefs:*' '&statefs:*' '+@all' '-@dangerous' \
		'+function|load' '+function|list' '+role' '+info'
	printf s3cret >"$BATS_TEST_TMPDIR/pw"
	chmod 600 "$BATS_TEST_TMPDIR/pw"
	statefs_mount -o "store=unix:$REDIS_SOCK,store_user=statefs,store_password_file=$BATS_TEST_TMPDIR/pw,testclock"
	mkdir "$MNT/t" "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	setfattr -n user.statefs.ttl -v 5 "$MNT/t/p/c"
	ln "$MNT/t/p/c" "$MNT/t/p/d"
	mv "$MNT/t/p/d" "$MNT/t/p/e"
	rm "$MNT/t/p/e"
	echo 6000 >"$MNT/.clock"
	echo p >"$MNT/t/.depart"
	cat "$MNT/.snapshot" >/dev/null
	echo >"$MNT/t/.drain"
	run stat_of store
	assert_output connected
	# Nothing was refused by the ACL on the way.
	run rcli ACL LOG
	assert_output ""
	[ ! -e "$MNT/t/p/c" ]
}

@test "a store of the tenant layout: every call two mounts' work sends names the keys of one Redis Cluster slot, a tenant's never the store's meta" {
	mount2 -o store_layout=tenant,testclock
	timeout 8 redis-cli -s "$REDIS_SOCK" MONITOR >"$BATS_TEST_TMPDIR/mon" 2>/dev/null 3>&- &
	BG_PIDS+=($!)
	sleep 0.3
	mkdir -p "$A/t/p" "$A/u/q"
	echo x >"$A/t/p/c"
	ln "$A/t/p/c" "$A/t/p/d"
	run ln "$A/t/p/c" "$A/u/q/c"
	assert_output --partial 'Invalid cross-device link'
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$A/t/p/d" "$A/u/q/d"
	assert_output EXDEV
	mv "$A/t/p/d" "$A/t/p/e"
	fsyncdir "$B"
	[ "$(cat "$B/t/p/e")" = x ]
	cat "$B/.stats" "$B/t/.stats" >/dev/null
	echo 1 >"$B/.clock"
	rmdir "$A/u/q" "$A/u"
	echo 1 >"$A/.drain"
	fsyncdir "$A" "$B"
	sleep 0.5
	kill "${BG_PIDS[@]}" 2>/dev/null || true
	run python3 - "$BATS_TEST_TMPDIR/mon" <<'PY'
import re, sys

def crc16(b):
    c = 0
    for x in b:
        c ^= x << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) if c & 0x8000 else c << 1
            c &= 0xffff
    return c

def slot(k):
    s = k.find(b'{')
    if s >= 0:
        e = k.find(b'}', s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % 16384

def args(line):
    out = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', line):
        out.append(m.group(1).encode().decode('unicode_escape').encode('latin-1'))
    return out

calls = 0
for line in open(sys.argv[1], errors='replace'):
    a = args(line)
    if len(a) < 3 or a[0] not in (b'FCALL', b'FCALL_RO'):
        continue
    keys = a[3:3 + int(a[2])]
    if len({slot(k) for k in keys}) != 1:
        print('two slots:', line.strip())
    if len(keys) > 1 and keys[0] == b'statefs:{statefs}:meta':
        print("a tenant's call with the store's meta:", line.strip())
    calls += 1
print('calls', calls)
PY
	assert_success
	assert_output --regexp '^calls [0-9]+$'
	[ "${output#calls }" -ge 20 ]
}
