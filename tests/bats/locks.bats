#!/usr/bin/env bats
# docs/statefs.8.scd, LOCKS: on a shared store, flock(2) and fcntl(2)
# locks (record locks and open file description locks) on a child exclude
# every process on every mount of the store, through real mounts of one
# real redis-server (mount2: A and B, as two hosts), with shell tools
# (flock(1)) and the system calls themselves (tests/bats/lock.py): a
# conflict is refused (EAGAIN) while it lasts and granted after the
# release; a blocking request waits without a worker thread and is
# granted right after the release, in the order requests came; a signal
# ends a wait with EINTR; F_GETLK names the holder; a mount killed with
# SIGKILL loses its locks within lock_timeout; a removed child's locks
# end with it; .stats counts what a mount holds and waits for.  The
# embedded store keeps the kernel's own locks (its last tests).
# Waits are bounded; no time is asserted but generous bounds.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

LOCKPY="$BATS_TEST_DIRNAME/lock.py"

setup() {
	T=$BATS_TEST_TMPDIR
	HOLDERS=()
}

teardown() {
	local rc=0
	touch "$T/go"
	for p in "${HOLDERS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	dead_teardown || rc=1
	redis_stop_all
	return "$rc"
}

# shared [OPTS...]: one redis-server, mounts A and B of it, a child c.
shared() {
	redis_start
	mount2 "$@"
	mkdir -p "$A/t/p"
	echo data >"$A/t/p/c"
	fsyncdir "$B/t/p" "$B/t"
	[ -f "$B/t/p/c" ]
}

lockpy() { timeout 30 /usr/bin/python3 "$LOCKPY" "$@"; }

# hold NAME KIND PATH [START LEN]: a process that takes the lock and
# holds it until release NAME; returns once it holds it (20 s at most).
hold() {
	local tag=$1 i
	shift
	rm -f "$T/held.$tag" "$T/go.$tag"
	/usr/bin/python3 "$LOCKPY" hold "$1" "$2" "$T/held.$tag" "$T/go.$tag" "${@:3}" 3>&- &
	HOLDERS+=("$!")
	eval "PID_$tag=$!"
	for i in $(seq 400); do
		[ -e "$T/held.$tag" ] && return 0
		sleep 0.05
	done
	fail "holder $tag did not get its lock within 20 s"
}

# release NAME: the holder lets go (exits) and is reaped.
release() {
	local pid
	eval "pid=\$PID_$1"
	touch "$T/go.$1"
	wait "$pid"
}

# free_soon KIND PATH: a non-blocking KIND lock of PATH succeeds within
# 20 s.  A flock or OFD lock ends at the last close of its open file,
# which the kernel sends the daemon after close(2) returned (FUSE's
# RELEASE is asynchronous): "after the release" is a moment later.  A
# POSIX lock ends before close(2) returns (FLUSH is synchronous).
free_soon() {
	until_true 20 lock_is_free "$1" "$2"
}
lock_is_free() {
	[ "$(lockpy try "$1" "$2")" = OK ]
}

# stat_is KEY VALUE DIR: DIR/.stats shows KEY VALUE.
stat_is() {
	[ "$(stat_of "$1" "$3")" = "$2" ]
}

# no_lock_records: Redis holds no lock record (P:{P.tTID}:lk:SINO).
no_lock_records() {
	[ -z "$(rcli --scan --pattern '*:lk:*')" ]
}

# until_true SECS CMD...: run CMD every 0.05 s until it succeeds, SECS s
# at most.
until_true() {
	local secs=$1 i
	shift
	for i in $(seq $((secs * 20))); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

@test "flock -n on mount B fails while mount A holds the lock, and succeeds after its release" {
	shared
	hold a flock-ex "$A/t/p/c"
	run timeout 20 flock -n "$B/t/p/c" true
	assert_failure 1
	run timeout 20 flock -n -s "$B/t/p/c" true
	assert_failure 1
	run lockpy try flock-ex "$B/t/p/c"
	assert_output EAGAIN
	# Another process on A is excluded too (the store decides for A).
	run timeout 20 flock -n "$A/t/p/c" true
	assert_failure 1
	release a
	until_true 20 timeout 20 flock -n "$B/t/p/c" true
	until_true 20 timeout 20 flock -n "$A/t/p/c" true
}

@test "shared flocks are held together on two mounts; an exclusive one waits for both" {
	shared
	hold a flock-sh "$A/t/p/c"
	hold b flock-sh "$B/t/p/c"
	run lockpy try flock-ex "$B/t/p/c"
	assert_output EAGAIN
	release a
	run lockpy try flock-ex "$A/t/p/c"
	assert_output EAGAIN
	release b
	free_soon flock-ex "$A/t/p/c"
}

@test "lockf on mount B fails while mount A holds a record lock, over overlapping ranges only, and succeeds after its release" {
	shared
	hold a posix-ex "$A/t/p/c" 0 10
	run timeout 20 /usr/bin/python3 -c '
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("OK")
except OSError as e:
    print("refused")' "$B/t/p/c"
	assert_output refused
	run lockpy try posix-ex "$B/t/p/c" 5 10
	assert_output EAGAIN
	run lockpy try posix-sh "$B/t/p/c" 9 1
	assert_output EAGAIN
	run lockpy try posix-ex "$B/t/p/c" 10 10
	assert_output OK
	# flock and record locks do not meet, as on Linux.
	run lockpy try flock-ex "$B/t/p/c"
	assert_output OK
	release a
	run lockpy try posix-ex "$B/t/p/c"
	assert_output OK
}

@test "open file description locks exclude across mounts and between two opens of one process, and end at the last close" {
	shared
	hold a ofd-ex "$A/t/p/c" 0 10
	run lockpy try ofd-ex "$B/t/p/c"
	assert_output EAGAIN
	# A POSIX lock meets an OFD lock (both are record locks).
	run lockpy try posix-sh "$B/t/p/c"
	assert_output EAGAIN
	# One process, two opens: two open file descriptions, a conflict.
	run timeout 20 /usr/bin/python3 -c '
import sys
sys.path.insert(0, sys.argv[2])
import os, time, lock
fd1 = os.open(sys.argv[1], os.O_RDWR)
fd2 = os.open(sys.argv[1], os.O_RDWR)
print(lock.name(lock.raw_lock(fd1, "ofd-ex", False, 100, 1)),
      lock.name(lock.raw_lock(fd2, "ofd-ex", False, 100, 1)))
os.close(fd1)
# The last close of the first open file reaches the daemon after close(2).
for i in range(400):
    e = lock.raw_lock(fd2, "ofd-ex", False, 100, 1)
    if e == 0:
        break
    time.sleep(0.05)
print(lock.name(e))' \
		"$B/t/p/c" "$BATS_TEST_DIRNAME"
	assert_output "$(printf 'OK EAGAIN\nOK')"
	release a
	free_soon ofd-ex "$B/t/p/c"
}

@test "POSIX locks end at any close by their owner; a flock lasts while its open file does" {
	shared
	run lockpy closeone posix-ex "$A/t/p/c"
	assert_output FREE
	run lockpy closeone flock-ex "$A/t/p/c"
	assert_output HELD
	# Nothing is left behind on either mount.
	run lockpy try posix-ex "$B/t/p/c"
	assert_output OK
	free_soon flock-ex "$B/t/p/c"
	run stat_of locks_held "$A"
	assert_output 0
}

@test "a blocking flock on mount B returns right after mount A releases" {
	shared
	hold a flock-ex "$A/t/p/c"
	timeout 30 flock "$B/t/p/c" -c "date +%s%N >'$T/b.got'" 3>&- &
	waiter=$!
	HOLDERS+=("$waiter")
	until_true 20 stat_is lock_waiters 1 "$B"
	[ ! -e "$T/b.got" ]
	sleep 0.3
	[ ! -e "$T/b.got" ]
	released=$(date +%s%N)
	release a
	wait "$waiter"
	got=$(cat "$T/b.got")
	[ "$got" -ge "$released" ]
	# Right after: a waiter looks every 0.1 s; 5 s is a generous bound.
	[ $(((got - released) / 1000000)) -lt 5000 ]
	run stat_of lock_waiters "$B"
	assert_output 0
}

@test "fcntl F_SETLKW on mount B waits for mount A's record lock and gets it after the release" {
	shared
	hold a posix-ex "$A/t/p/c" 0 100
	lockpy wait posix-ex "$B/t/p/c" "$T/b.got" 50 10 3>&- &
	waiter=$!
	HOLDERS+=("$waiter")
	until_true 20 stat_is lock_waiters 1 "$B"
	[ ! -e "$T/b.got" ]
	release a
	wait "$waiter"
	run grep -E '^[0-9]+$' "$T/b.got"
	assert_success
}

@test "waiters are served in the order they came: a newcomer does not overtake a queued waiter" {
	shared
	hold a flock-sh "$A/t/p/c"
	# B waits for an exclusive lock, behind A's shared one.
	lockpy wait flock-ex "$B/t/p/c" "$T/b.got" 3>&- &
	waiter=$!
	HOLDERS+=("$waiter")
	until_true 20 stat_is lock_waiters 1 "$B"
	# A shared request is compatible with A's lock, but not with the
	# waiter queued first: refused, the waiter keeps its turn.
	run lockpy try flock-sh "$A/t/p/c"
	assert_output EAGAIN
	run lockpy try flock-sh "$B/t/p/c"
	assert_output EAGAIN
	release a
	wait "$waiter"
	run grep -E '^[0-9]+$' "$T/b.got"
	assert_success
}

@test "a signal interrupts a blocked waiter with EINTR, and the waiter leaves the queue" {
	shared
	hold a flock-ex "$A/t/p/c"
	hold r posix-ex "$A/t/p/c"
	run lockpy intr flock-ex "$B/t/p/c" 0.5
	assert_output EINTR
	run lockpy intr posix-ex "$B/t/p/c" 0.5
	assert_output EINTR
	run lockpy intr ofd-sh "$B/t/p/c" 0.5
	assert_output EINTR
	until_true 20 stat_is lock_waiters 0 "$B"
	release a
	release r
	# No interrupted waiter holds a place: every kind is free.
	free_soon flock-ex "$A/t/p/c"
	run lockpy try posix-ex "$A/t/p/c"
	assert_output OK
}

@test "F_GETLK reports the holder: its range and type, its pid on its own mount, 0 from another mount" {
	shared
	hold a posix-ex "$A/t/p/c" 10 20
	pid=$PID_a
	run lockpy getlk posix-ex "$A/t/p/c" 0 0
	assert_output "WRLCK 10 20 $pid"
	run lockpy getlk posix-ex "$B/t/p/c" 15 1
	assert_output "WRLCK 10 20 0"
	run lockpy getlk posix-ex "$B/t/p/c" 30 10
	assert_output UNLCK
	# An OFD query shows -1 for the pid, as the kernel does.
	run lockpy getlk ofd-ex "$B/t/p/c" 0 0
	assert_output "WRLCK 10 20 -1"
	release a
	run lockpy getlk posix-ex "$B/t/p/c" 0 0
	assert_output UNLCK
}

@test "SIGKILL of mount A's daemon frees its locks for mount B within lock_timeout" {
	shared -o lock_timeout=1
	hold a flock-ex "$A/t/p/c"
	hold r posix-ex "$A/t/p/c"
	run lockpy try flock-ex "$B/t/p/c"
	assert_output EAGAIN
	timeout 30 flock "$B/t/p/c" -c "date +%s%N >'$T/b.got'" 3>&- &
	waiter=$!
	HOLDERS+=("$waiter")
	until_true 20 stat_is lock_waiters 1 "$B"
	for e in "${STATEFS_MOUNTS[@]}"; do
		# shellcheck disable=SC2086
		set -- $e
		if [ "$2" = "$A" ]; then STATEFS_PID=$1; fi
	done
	killed=$(date +%s%N)
	statefs_kill9
	wait "$waiter"
	got=$(cat "$T/b.got")
	# lock_timeout is 1 s; 10 s is a generous bound on a loaded machine.
	[ $(((got - killed) / 1000000)) -lt 10000 ]
	run lockpy try posix-ex "$B/t/p/c"
	assert_output OK
}

@test "a locked child may be removed: its locks end with it, a waiter on it is told ESTALE" {
	shared
	hold a flock-ex "$A/t/p/c"
	lockpy wait flock-ex "$B/t/p/c" "$T/b.got" 3>&- &
	waiter=$!
	HOLDERS+=("$waiter")
	until_true 20 stat_is lock_waiters 1 "$B"
	rm "$B/t/p/c"
	wait "$waiter"
	run cat "$T/b.got"
	assert_output ESTALE
	# A new child of that name is another file, unlocked.
	echo new >"$B/t/p/c"
	run lockpy try flock-ex "$B/t/p/c"
	assert_output OK
	release a
	# The removed child's record is gone from Redis with its last lock.
	until_true 20 no_lock_records
}

@test ".stats counts the locks a mount holds and the requests it waits with" {
	shared
	run stat_of locks_held "$A"
	assert_output 0
	run stat_of lock_waiters "$A"
	assert_output 0
	hold a flock-ex "$A/t/p/c"
	hold r posix-sh "$A/t/p/c"
	run stat_of locks_held "$A"
	assert_output 2
	run stat_of locks_held "$A/t"
	assert_output 2
	run stat_of locks_held "$B"
	assert_output 0
	lockpy wait flock-ex "$B/t/p/c" "$T/b.got" 3>&- &
	waiter=$!
	HOLDERS+=("$waiter")
	until_true 20 stat_is lock_waiters 1 "$B"
	release a
	wait "$waiter"
	release r
	until_true 20 stat_is locks_held 0 "$A"
	run stat_of lock_waiters "$B"
	assert_output 0
	# The waiter that got it exited: its lock ends a moment later.
	until_true 20 stat_is locks_held 0 "$B"
}

@test "lock_timeout: a bad value, or one without a shared store, is a one-line refusal" {
	redis_start
	for v in 0 0.05 3601 abc -1; do
		run timeout 20 "$STATEFS_BIN" -f -o "store=unix:$REDIS_SOCK" \
			-o "lock_timeout=$v" "$T"
		assert_failure
		assert_output --partial "lock_timeout"
		assert_equal "${#lines[@]}" 1
	done
	run timeout 20 "$STATEFS_BIN" -f -o lock_timeout=5 "$T"
	assert_failure
	assert_output "statefs: -o lock_timeout needs -o store=URL (a shared store)"
}

@test "embedded store: the kernel's own locks still exclude on one mount" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo data >"$MNT/t/p/c"
	hold a flock-ex "$MNT/t/p/c"
	run timeout 20 flock -n "$MNT/t/p/c" true
	assert_failure 1
	release a
	run timeout 20 flock -n "$MNT/t/p/c" true
	assert_success
	hold r posix-ex "$MNT/t/p/c" 0 10
	run lockpy try posix-ex "$MNT/t/p/c" 5 1
	assert_output EAGAIN
	run lockpy getlk posix-ex "$MNT/t/p/c" 0 0
	assert_output "WRLCK 0 10 $PID_r"
	release r
	run lockpy try posix-ex "$MNT/t/p/c"
	assert_output OK
	run lockpy intr flock-ex "$MNT/t/p/c" 0.2
	assert_output OK
	# No lock lines: the kernel keeps these locks, not the store.
	run grep -c '^lock' "$MNT/.stats"
	assert_output 0
}
