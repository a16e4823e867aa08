#!/usr/bin/env bats
# A daemon that dies: killed with SIGKILL, statefs cannot drain or unmount.
# What a user sees then is the kernel's: every operation on the mount fails
# at once with ENOTCONN ("Transport endpoint is not connected"), requests
# that were waiting in the daemon end with ECONNABORTED ("Software caused
# connection abort"), nothing hangs; `fusermount3 -u` (or -uz when a
# process still sits in the mount) detaches it, and a new mount at the same
# path is a new, empty store instance (statefs(8), DESCRIPTION).
#
# Every command that touches the mount runs under `timeout 5`: a hang is a
# failure (status 124), never a stuck test run.

load helpers

ENOTCONN='Transport endpoint is not connected'
ECONNABORTED='Software caused connection abort'

setup() {
	OUT="$BATS_TEST_TMPDIR/out"
	mkdir -p "$OUT"
}

teardown() {
	dead_teardown
}

# t5 CMD...: run CMD under `timeout 5` (status 124 = it hung).
t5() {
	timeout 5 "$@"
}

# dead_op CMD...: CMD on the dead mount fails with ENOTCONN, within 5 s.
dead_op() {
	run timeout 5 "$@"
	if [ "$status" -eq 124 ]; then
		fail "hung for 5 s: $*"
	fi
	assert_failure
	assert_output --partial "$ENOTCONN"
	refute_output --partial 'Input/output error'
}

@test "SIGKILL: stat, ls, cat, mkdir, writes and removals fail at once with ENOTCONN" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo state >"$MNT/t/p/c"
	statefs_kill9
	assert_equal "$STATEFS_STATUS" 137
	# The mount is still there, answering for the dead daemon.
	run _statefs_mounted "$MNT"
	assert_success
	dead_op stat "$MNT"
	dead_op stat "$MNT/t/p/c"
	dead_op ls "$MNT"
	dead_op ls -a "$MNT/t/p"
	dead_op cat "$MNT/t/p/c"
	dead_op cat "$MNT/.stats"
	dead_op cat "$MNT/.snapshot"
	dead_op mkdir "$MNT/u"
	dead_op mkdir "$MNT/t/q"
	dead_op bash -c 'echo x >"$1"' _ "$MNT/t/p/c"
	dead_op bash -c 'echo x >>"$1"' _ "$MNT/t/p/d"
	dead_op touch "$MNT/t/p/c"
	dead_op ln "$MNT/t/p/c" "$MNT/t/p/e"
	dead_op mv "$MNT/t/p/c" "$MNT/t/p/f"
	dead_op rm "$MNT/t/p/c"
	dead_op rmdir "$MNT/t/p"
	dead_op getfattr -n user.statefs.generation "$MNT/t/p"
	dead_op setfattr -n user.statefs.ttl -v 5 "$MNT/t/p"
	dead_op bash -c 'echo p >"$1"' _ "$MNT/t/.depart"
	dead_op bash -c 'echo >"$1"' _ "$MNT/.drain"
	dead_op find "$MNT"
	# df and a mount listing do not hang on it either.
	run t5 df "$MNT"
	refute [ "$status" -eq 124 ]
	run t5 findmnt -n -o FSTYPE "$MNT"
	assert_success
	assert_output fuse.statefs
}

@test "SIGKILL: a blocked .events reader, an open child and busy writers all return within 5 s" {
	statefs_mount
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	echo state >"$MNT/t/p/c"
	# A reader parked in the daemon (nothing pending on .events).
	exec 9<"$MNT/.events"
	(
		timeout 10 cat <&9 >"$OUT/events" 2>"$OUT/events.err" 9<&-
		echo "status $?" >>"$OUT/events.err"
	) 3>&- &
	BG_PIDS+=($!)
	exec 9<&-
	# An open child, read and written after the kill.
	exec 7<>"$MNT/t/p/c"
	# Eight writers that keep every kind of transition going until the
	# mount fails under them.
	local w
	for w in 1 2 3 4 5 6 7 8; do
		(
			i=0
			while [ $i -lt 100000 ]; do
				i=$((i + 1))
				timeout 5 bash -c 'echo "$1" >"$2"' _ "$i" "$MNT/t/q/c$w" || break
				timeout 5 mv "$MNT/t/q/c$w" "$MNT/t/p/c$w" || break
				timeout 5 rm "$MNT/t/p/c$w" || break
			done 2>"$OUT/writer.$w.err"
			echo "ended $i" >"$OUT/writer.$w"
		) 3>&- &
		BG_PIDS+=($!)
	done
	# Let them run until every writer has gone round at least once.
	local i
	for i in $(seq 100); do
		[ "$(stat_of admissions)" -ge 40 ] && break
		sleep 0.05
	done
	local t0
	t0=$(now_ms)
	statefs_kill9
	# Every background job ends by itself, well within 5 s.
	local p
	for p in "${BG_PIDS[@]}"; do
		wait "$p" || true
	done
	BG_PIDS=()
	local took=$(($(now_ms) - t0))
	[ "$took" -lt 5000 ] || fail "background jobs took $took ms to end after the kill"
	# The parked reader got the abort, not a timeout.
	run cat "$OUT/events.err"
	assert_output --regexp "($ECONNABORTED|$ENOTCONN)"
	refute_output --partial 'status 124'
	refute_output --partial 'Input/output error'
	# Every writer stopped on ENOTCONN, or on ECONNABORTED when the kill
	# caught its request in flight, and got no other error on the way.
	for w in 1 2 3 4 5 6 7 8; do
		run cat "$OUT/writer.$w"
		assert_output --regexp '^ended [0-9]+$'
		run grep -vE "($ENOTCONN|$ECONNABORTED)" "$OUT/writer.$w.err"
		assert_output ''
		run grep -cE "($ENOTCONN|$ECONNABORTED)" "$OUT/writer.$w.err"
		assert_success
	done
	# The open child: read and write both fail with ENOTCONN.
	run t5 cat <&7
	assert_failure
	assert_output --partial "$ENOTCONN"
	run t5 bash -c 'echo more >&7'
	assert_failure
	assert_output --partial "$ENOTCONN"
	exec 7>&-
}

@test "after SIGKILL, fusermount3 -u and a new mount at the same path give a fresh, empty instance" {
	statefs_mount -o max_tenants=5
	local mnt=$MNT old
	old=$(stat_of instance)
	mkdir -p "$MNT/t/p" "$MNT/u/p"
	echo state >"$MNT/t/p/c"
	statefs_kill9
	dead_op ls "$mnt"
	run t5 fusermount3 -u "$mnt"
	assert_success
	run _statefs_mounted "$mnt"
	assert_failure
	# The mountpoint is an ordinary empty directory again.
	run t5 ls -A "$mnt"
	assert_success
	assert_output ''
	statefs_mount_at "$mnt" -o max_tenants=5
	assert_equal "$MNT" "$mnt"
	run stat_of instance
	assert_success
	refute_output "$old"
	run gauges
	assert_output "$(printf '%s\n' 'tenants 0' 'parents 0' 'children 0' \
		'links 0' 'tombstones 0' 'bytes 0')"
	run stat_of state
	assert_output ready
	run t5 ls -A "$MNT"
	assert_output "$(printf '%s\n' .drain .events .snapshot .stats)"
	run t5 cat "$MNT/.snapshot"
	assert_line -n 0 "$(printf 'kind\ttenant\tparent\tchild\tgeneration\tversion\tsize\tnlink\tttl_ms_left\tinode')"
	# Its seq line, and not one node.
	assert_line -n 1 --regexp $'^seq\t(0|-)\t'
	[ "${#lines[@]}" -eq 2 ]
	# The new instance works and knows nothing of the old one's names.
	run t5 cat "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'No such file or directory'
	t5 mkdir -p "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 1
	t5 bash -c 'echo fresh >"$1"' _ "$MNT/t/p/c"
	run t5 cat "$MNT/t/p/c"
	assert_output fresh
	run stat_of max_tenants
	assert_output 5
}

@test "after SIGKILL with a shell still inside the mount: -u is busy, -uz detaches, the new mount is fresh" {
	statefs_mount
	local mnt=$MNT old
	old=$(stat_of instance)
	mkdir -p "$MNT/t/p"
	echo state >"$MNT/t/p/c"
	mkfifo "$OUT/go"
	# A shell whose working directory is the parent; it lists it when told.
	(
		cd "$MNT/t/p" || exit 1
		echo in >"$OUT/ready"
		read -r _ <"$OUT/go"
		timeout 5 ls . >"$OUT/ls" 2>&1
		echo "status $?" >>"$OUT/ls"
	) 3>&- &
	BG_PIDS+=($!)
	local i
	for i in $(seq 100); do
		[ -s "$OUT/ready" ] && break
		sleep 0.05
	done
	statefs_kill9
	run t5 fusermount3 -u "$mnt"
	assert_failure
	assert_output --partial 'busy'
	run t5 fusermount3 -uz "$mnt"
	assert_success
	run _statefs_mounted "$mnt"
	assert_failure
	statefs_mount_at "$mnt"
	run stat_of instance
	refute_output "$old"
	run stat_of tenants
	assert_output 0
	run t5 ls "$mnt"
	assert_output ''
	# The old shell still sits in the detached, dead mount.
	echo go >"$OUT/go"
	for p in "${BG_PIDS[@]}"; do
		wait "$p" || true
	done
	BG_PIDS=()
	run cat "$OUT/ls"
	assert_output --partial "$ENOTCONN"
	refute_output --partial 'status 124'
	# And the new instance is untouched by it.
	run stat_of tenants
	assert_output 0
}

@test "SIGKILL of a daemon mid-drain: the mount fails with ENOTCONN and a remount is ready, not draining" {
	statefs_mount -o drain_window=600
	local mnt=$MNT
	mkdir -p "$MNT/t/p"
	echo state >"$MNT/t/p/c"
	echo >"$MNT/.drain"
	run cat "$MNT/.drain"
	assert_output --regexp '^draining [0-9]+$'
	statefs_kill9
	dead_op cat "$mnt/.drain"
	run t5 fusermount3 -u "$mnt"
	assert_success
	statefs_mount_at "$mnt"
	run t5 cat "$MNT/.drain"
	assert_output ready
	t5 mkdir "$MNT/t"
	run t5 ls "$MNT"
	assert_output t
}
