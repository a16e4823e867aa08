#!/usr/bin/env bats
# No tenant can starve the others of a store-wide resource (statefs(8)
# "Options", "Errors"): each tenant may hold at most its share of the
# parents, children, bytes and tombstones ceilings (tenant_max_*, half of
# each ceiling by default), refused with EDQUOT and changing nothing,
# while the ceiling itself still answers ENOSPC.  Nor can one user take
# the daemon's memory with open .snapshot files: what they hold is bounded
# store-wide (max_snapshot_bytes, ENFILE) and per uid
# (user_max_snapshot_bytes, EMFILE).
#
# Users: uid 1001 and 1002 (setpriv needs no passwd entry) own a tenant
# each, with -o allow_other,default_permissions, as a shared host would.

load helpers

U1=1001
U2=1002

# as_uid UID CMD...: run CMD as that uid (and gid), no supplementary groups.
as_uid() {
	local uid=$1
	shift
	setpriv --reuid="$uid" --regid="$uid" --clear-groups -- "$@"
}

# two_tenants: tenants one (uid 1001) and two (uid 1002).
two_tenants() {
	mkdir "$MNT/one" "$MNT/two"
	chown "$U1:$U1" "$MNT/one"
	chown "$U2:$U2" "$MNT/two"
}

# fill_depart UID DIR N: write N made-up names to DIR/.depart as UID, one
# write each, until one is refused; prints how many were recorded and the
# errno name of the refusal (or "-").
fill_depart() {
	as_uid "$1" /usr/bin/python3 -c '
import os, sys, errno
fd = os.open(sys.argv[1] + "/.depart", os.O_WRONLY)
n, why = 0, "-"
for i in range(int(sys.argv[2])):
    try:
        os.write(fd, b"ghost%d\n" % i)
        n += 1
    except OSError as e:
        why = errno.errorcode[e.errno]
        break
print(n, why)' "$2" "$3"
}

@test "made-up .depart names fill only their tenant's share of the tombstone pool: another user's rmdir still works" {
	statefs_mount -o allow_other,default_permissions,max_tombstones=100
	two_tenants
	as_uid "$U2" mkdir "$MNT/two/worker"
	as_uid "$U2" bash -c 'echo job >"$1"' _ "$MNT/two/worker/job"
	as_uid "$U1" mkdir "$MNT/one/mine"
	run fill_depart "$U1" "$MNT/one" 200
	assert_output '50 EDQUOT'
	run stat_of tombstones
	assert_output 50
	run stat_of tombstones "$MNT/one"
	assert_output 50
	# The owner of the other tenant leaves as usual.
	as_uid "$U2" rmdir "$MNT/two/worker"
	run ls "$MNT/two"
	assert_output ''
	run stat_of tombstones "$MNT/two"
	assert_output 1
	# The tenant at its share: its own leave is refused whole.
	local before
	before=$(gauges)
	run as_uid "$U1" rmdir "$MNT/one/mine"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run as_uid "$U1" bash -c 'echo mine >"$1"' _ "$MNT/one/.depart"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run ls "$MNT/one"
	assert_output mine
	run gauges
	assert_output "$before"
	# Departing a name that has a tombstone already takes nothing more.
	as_uid "$U1" bash -c 'echo ghost7 >"$1"' _ "$MNT/one/.depart"
	run stat_of tombstones
	assert_output 51
}

@test "the tombstone share ages out with the tombstones" {
	statefs_mount -o testclock,max_tombstones=4,tombstone_ttl=10
	mkdir -p "$MNT/t/p"
	echo a >"$MNT/t/.depart"
	echo b >"$MNT/t/.depart"
	run rmdir "$MNT/t/p"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	advance 10000
	rmdir "$MNT/t/p"
	run stat_of tombstones "$MNT/t"
	assert_output 1
}

@test "a tenant at its share of max_parents gets EDQUOT from mkdir; another tenant still joins" {
	statefs_mount -o allow_other,default_permissions,max_parents=4
	two_tenants
	as_uid "$U1" mkdir "$MNT/one/a" "$MNT/one/b"
	local before
	before=$(gauges)
	run as_uid "$U1" mkdir "$MNT/one/c"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run gauges
	assert_output "$before"
	as_uid "$U2" mkdir "$MNT/two/x" "$MNT/two/y"
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		# The tenant layout: each tenant meets the ceiling as if
		# it were the store alone, so its share answers first.
		run as_uid "$U2" mkdir "$MNT/two/z"
		assert_failure
		assert_output --partial 'Disk quota exceeded'
		run stat_of refused_quota
		assert_output 2
		run stat_of refused_capacity
		assert_output 0
		return
	fi
	# The ceiling, reached, answers first.
	run as_uid "$U2" mkdir "$MNT/two/z"
	assert_failure
	assert_output --partial 'No space left on device'
	run stat_of refused_quota
	assert_output 1
	run stat_of refused_capacity
	assert_output 1
}

@test "a tenant at its share of max_children gets EDQUOT from touch and echo; links add no state" {
	statefs_mount -o allow_other,default_permissions,max_children=4
	two_tenants
	as_uid "$U1" mkdir "$MNT/one/p" "$MNT/one/q"
	as_uid "$U1" touch "$MNT/one/p/a" "$MNT/one/p/b"
	local before
	before=$(gauges)
	run as_uid "$U1" touch "$MNT/one/p/c"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run as_uid "$U1" bash -c 'echo x >"$1"' _ "$MNT/one/q/c"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run gauges
	assert_output "$before"
	run ls "$MNT/one/p" "$MNT/one/q"
	assert_output "$(printf '%s\n' "$MNT/one/p:" a b '' "$MNT/one/q:")"
	as_uid "$U1" ln "$MNT/one/p/a" "$MNT/one/q/a"
	as_uid "$U2" mkdir "$MNT/two/p"
	as_uid "$U2" touch "$MNT/two/p/a" "$MNT/two/p/b"
	run as_uid "$U2" touch "$MNT/two/p/c"
	assert_failure
	# The tenant layout: the ceiling is each tenant's alone, so the
	# share answers first.
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		assert_output --partial 'Disk quota exceeded'
	else
		assert_output --partial 'No space left on device'
	fi
}

@test "a tenant at its share of max_bytes: the failing write reports EDQUOT and nothing changes" {
	statefs_mount -o allow_other,default_permissions,max_bytes=100,max_payload=60
	two_tenants
	as_uid "$U1" mkdir "$MNT/one/p"
	as_uid "$U1" bash -c 'printf %040d 1 >"$1"' _ "$MNT/one/p/a"
	as_uid "$U1" bash -c 'echo old >"$1"' _ "$MNT/one/p/b"
	local before
	before=$(gauges)
	run as_uid "$U1" bash -c 'printf %020d 2 >"$1"' _ "$MNT/one/p/b"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run as_uid "$U1" bash -c 'printf %010d 2 >>"$1"' _ "$MNT/one/p/b"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run as_uid "$U1" truncate -s 20 "$MNT/one/p/b"
	assert_failure
	assert_output --partial 'Disk quota exceeded'
	run cat "$MNT/one/p/b"
	assert_output old
	run gauges
	assert_output "$before"
	# The other tenant has its own room.
	as_uid "$U2" mkdir "$MNT/two/p"
	as_uid "$U2" bash -c 'printf %050d 3 >"$1"' _ "$MNT/two/p/a"
	run stat_of bytes "$MNT/two"
	assert_output 50
}

@test "0 takes a tenant's share away, a number sets it; .stats shows each share" {
	statefs_mount -o max_parents=10,max_children=7,tenant_max_parents=0,tenant_max_bytes=1000
	run grep -E '^tenant_max_' "$MNT/.stats"
	assert_output "tenant_max_parents 0
tenant_max_children 4
tenant_max_bytes 1000
tenant_max_tombstones 32768"
	mkdir "$MNT/t"
	run grep -E '^tenant_max_' "$MNT/t/.stats"
	assert_output "tenant_max_parents 0
tenant_max_children 4
tenant_max_bytes 1000
tenant_max_tombstones 32768"
	local i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		mkdir "$MNT/t/p$i"
	done
	run mkdir "$MNT/t/p11"
	assert_failure
	assert_output --partial 'No space left on device'
}

@test "the default shares are half of the default ceilings" {
	statefs_mount
	run grep -E '^tenant_max_' "$MNT/.stats"
	assert_output "tenant_max_parents 32768
tenant_max_children 524288
tenant_max_bytes 536870912
tenant_max_tombstones 32768"
}

teardown() {
	bg_stop
	rm -f "$(dirname "$MNT")/go"
	statefs_unmount
}

# hold_snapshots UID PATH OUT: as UID, open PATH again and again, keeping
# every descriptor, until an open is refused; print "COUNT ERRNO" to OUT,
# then keep them open until release (60 s at most).  The go file lives
# beside the mountpoint, where every uid may look.
HOLD_PY='
import os, sys, errno, time
fds, why = [], "-"
for i in range(100000):
    try:
        fds.append(os.open(sys.argv[1], os.O_RDONLY))
    except OSError as e:
        why = errno.errorcode[e.errno]
        break
print(len(fds), why, flush=True)
t0 = time.monotonic()
while not os.path.exists(sys.argv[2]) and time.monotonic() - t0 < 60:
    time.sleep(0.05)
'
hold_snapshots() {
	as_uid "$1" /usr/bin/python3 -c "$HOLD_PY" "$2" "$(dirname "$MNT")/go" \
		>"$3" 3>&- &
	BG_PIDS+=($!)
	local i
	for i in $(seq 200); do
		[ -s "$3" ] && return 0
		sleep 0.05
	done
	fail "no result from the holder of $2"
}

# release: let the holder close its descriptors, and wait for it.
release() {
	touch "$(dirname "$MNT")/go"
	events_wait
	rm -f "$(dirname "$MNT")/go"
}

# open_errno UID PATH: one open of PATH as UID: OK or the errno name.
open_errno() {
	as_uid "$1" /usr/bin/python3 -c '
import os, sys, errno
try:
    os.close(os.open(sys.argv[1], os.O_RDONLY))
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])' "$2"
}

# a_tenant_of_size: tenant one (uid 1001, 0755) with 40 parents; prints
# what one open of its .snapshot holds (its text and one byte).
a_tenant_of_size() {
	two_tenants
	local i
	for i in $(seq 40); do
		mkdir "$MNT/one/member-$i"
	done
	echo $(($(wc -c <"$MNT/one/.snapshot") + 1))
}

@test "one user's open .snapshot files hold at most its share (EMFILE); others still open theirs; closing frees it" {
	statefs_mount -o allow_other,default_permissions,max_snapshot_bytes=40000
	local size d=$BATS_TEST_TMPDIR
	size=$(a_tenant_of_size)
	run stat_of user_max_snapshot_bytes
	assert_output 20000
	hold_snapshots "$U1" "$MNT/one/.snapshot" "$d/u1"
	run cat "$d/u1"
	assert_output "$((20000 / size)) EMFILE"
	run stat_of snapshot_bytes
	assert_output "$((20000 / size * size))"
	run as_uid "$U1" cat "$MNT/one/.snapshot"
	assert_failure
	assert_output --partial 'Too many open files'
	# Another user, and root, have their own room.
	run open_errno "$U2" "$MNT/one/.snapshot"
	assert_output OK
	run open_errno 0 "$MNT/.snapshot"
	assert_output OK
	release
	run stat_of snapshot_bytes
	assert_output 0
	run open_errno "$U1" "$MNT/one/.snapshot"
	assert_output OK
}

@test "open .snapshot files of all users together hold at most max_snapshot_bytes (ENFILE), root's included" {
	statefs_mount -o allow_other,default_permissions,max_snapshot_bytes=40000,user_max_snapshot_bytes=0
	local size d=$BATS_TEST_TMPDIR
	size=$(a_tenant_of_size)
	hold_snapshots "$U1" "$MNT/one/.snapshot" "$d/u1"
	run cat "$d/u1"
	assert_output "$((40000 / size)) ENFILE"
	run open_errno "$U2" "$MNT/one/.snapshot"
	assert_output ENFILE
	run cat "$MNT/.snapshot"
	assert_failure
	assert_output --partial 'Too many open files in system'
	# .stats and .events are not snapshots.
	run open_errno "$U2" "$MNT/.stats"
	assert_output OK
	release
	run open_errno 0 "$MNT/.snapshot"
	assert_output OK
	run stat_of snapshot_bytes
	assert_output 0
}

@test "a tenant share under concurrency: exactly the share is admitted, then the other tenant fills the rest" {
	statefs_mount -o max_children=30
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/u/a"
	local d=$BATS_TEST_TMPDIR i pids=()
	for i in $(seq 40); do
		(py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))' \
			"$MNT/t/$([ $((i % 2)) -eq 0 ] && echo a || echo b)/c$i" >"$d/r.$i") 3>&- &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	run bash -c 'cat "$1"/r.* | sort | uniq -c | awk "{ print \$2 \"=\" \$1 }" | paste -sd " "' _ "$d"
	assert_output 'EDQUOT=25 OK=15'
	run bash -c 'find "$1/t" -mindepth 2 -type f | wc -l' _ "$MNT"
	assert_output 15
	run stat_of children "$MNT/t"
	assert_output 15
	for i in $(seq 15); do
		touch "$MNT/u/a/c$i"
	done
	run touch "$MNT/u/a/c16"
	assert_failure
	# The tenant layout: each tenant alone under the ceiling, its
	# share answers.
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		assert_output --partial 'Disk quota exceeded'
	else
		assert_output --partial 'No space left on device'
	fi
	run stat_of children
	assert_output 30
}
