#!/usr/bin/env bats
# Memory: the daemon under valgrind memcheck runs a session of every kind
# of operation, error paths included, is unmounted, and exits 0 with no
# memory error and nothing definitely or indirectly lost; and the same for
# the other way a daemon ends, a SIGTERM drain.
#
# --sim-hints=fuse-compatible: statefs's echo thread makes system calls on
# its own mount (fstatfs, unlinkat) that other threads of the same process
# answer.  Without the hint valgrind keeps its one big lock across such a
# call and the daemon deadlocks against itself (a valgrind limitation, not
# a statefs one).  A watchdog aborts the FUSE connection if the session
# wedges anyway, so a hang is a failure, not a stuck run.

load helpers

teardown() {
	watchdog_stop
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount
}

# op CMD...: CMD must succeed (under a timeout: valgrind is slow).
op() {
	timeout 20 "$@" || fail "failed ($?): $*"
}

# refused TEXT CMD...: CMD fails with the strerror TEXT.
refused() {
	local text=$1
	shift
	run timeout 20 "$@"
	assert_failure
	assert_output --partial "$text"
}

@test "a session of every operation under valgrind memcheck: exit 0, no errors, nothing lost" {
	local vglog="$BATS_TEST_TMPDIR/valgrind.log"
	statefs_mount_under 30 valgrind --sim-hints=fuse-compatible \
		--leak-check=full --errors-for-leak-kinds=definite,indirect \
		--error-exitcode=99 --log-file="$vglog" -- \
		-o testclock,max_tenants=3,max_payload=64,parent_quota=4,drain_window=600
	local M=$MNT
	watchdog_start 90 "$M"

	# Tenants and parents; an event reader open from the start.
	op mkdir "$M/t" "$M/u" "$M/v"
	refused 'No space left on device' mkdir "$M/w"
	op mkdir "$M/t/p" "$M/t/q" "$M/t/r" "$M/u/p"
	refused 'File exists' mkdir "$M/t/p"
	exec 9<"$M/t/.events"

	# Children: replace, append, in-place compare-and-swap (won and lost).
	op bash -c 'echo one >"$1"' _ "$M/t/p/a"
	op bash -c 'echo two >>"$1"' _ "$M/t/p/a"
	run py_errno 'fd = os.open(sys.argv[1], os.O_RDWR); os.write(fd, b"ONE"); os.close(fd)' "$M/t/p/a"
	assert_output OK
	run py_errno '
    fd = os.open(sys.argv[1], os.O_RDWR)
    os.write(fd, b"lost")
    g = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
    os.write(g, b"won\n")
    os.close(g)
    os.close(fd)' "$M/t/p/a"
	assert_output EAGAIN
	run op cat "$M/t/p/a"
	assert_output won
	refused 'cannot overwrite existing file' bash -c 'set -C; echo x >"$1"' _ "$M/t/p/a"
	run py_errno 'os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL))' "$M/t/p/a"
	assert_output EEXIST
	refused 'File too large' bash -c 'head -c 100 /dev/zero >"$1"' _ "$M/t/p/big"
	op rm "$M/t/p/big" # admitted by the open, empty
	op truncate -s 3 "$M/t/p/a"

	# Links and hand-overs.
	op ln "$M/t/p/a" "$M/t/q/a"
	refused 'Invalid cross-device link' ln "$M/t/p/a" "$M/u/p/a"
	op mv "$M/t/q/a" "$M/t/r/a"
	op bash -c 'echo z >"$1"' _ "$M/t/r/z"
	op mv -f "$M/t/p/a" "$M/t/r/z"
	run op stat -c %h "$M/t/r/a"
	assert_output 2
	op rm "$M/t/r/z"
	refused 'No such file or directory' rm "$M/t/r/z"
	refused 'Operation not permitted' mv "$M/t/r" "$M/t/s"
	refused 'Operation not permitted' ln -s a "$M/t/r/sym"

	# Quota, an old handle of an earlier incarnation, leaving with children.
	local i
	for i in 1 2 3 4; do
		op touch "$M/t/q/c$i"
	done
	refused 'Disk quota exceeded' touch "$M/t/q/c5"
	exec 6>>"$M/t/q/c1"
	op rmdir "$M/t/q"
	op mkdir "$M/t/q"
	run py_errno 'os.write(6, b"late\n")'
	assert_output ESTALE
	exec 6>&-
	op rmdir "$M/t/r"
	run gen "$M/t/q"
	assert_output 2

	# .depart: a parent that never joined, and one with children.
	op bash -c 'echo never >"$1"' _ "$M/t/.depart"
	op bash -c 'echo x >"$1"' _ "$M/u/p/x"
	op bash -c 'echo p >"$1"' _ "$M/u/.depart"
	refused 'Invalid argument' bash -c 'echo "a b" >"$1"' _ "$M/u/.depart"

	# Leases: a child's, a parent's, the TTL new children start with;
	# renewal; expiry on the manual clock.
	op bash -c 'echo l >"$1"' _ "$M/t/p/lease"
	op setfattr -n user.statefs.ttl -v 5 "$M/t/p/lease"
	op setfattr -n user.statefs.child_ttl -v 2 "$M/t/p"
	op bash -c 'echo e >"$1"' _ "$M/t/p/e"
	op setfattr -n user.statefs.ttl -v 3 "$M/t/q"
	op touch "$M/t/q/c"
	run ttl "$M/t/p/lease"
	assert_output 5
	run ver "$M/t/p/e"
	assert_output 1
	refused 'Invalid argument' setfattr -n user.statefs.ttl -v 1 "$M/t"
	refused 'Operation not supported' setfattr -n user.other -v 1 "$M/t/p/e"
	op bash -c 'echo 2500 >"$1"' _ "$M/.clock"
	op touch "$M/t/p/lease"
	op bash -c 'echo 2500 >"$1"' _ "$M/.clock"
	run op ls "$M/t" "$M/t/p"
	assert_output "$M/t:
p

$M/t/p:
lease"
	run op cat "$M/.clock"
	assert_output 5000

	# Observation: snapshots, stats, the event stream (blocking and not).
	op cat "$M/.snapshot" "$M/t/.snapshot" "$M/.stats" "$M/t/.stats" >/dev/null
	local line lines=()
	for i in 1 2 3 4 5; do
		read -r -t 20 line <&9 || fail "no event line $i"
		lines+=("$line")
	done
	local first
	first=$(printf '%s\t' create t p a 1)0
	[[ "${lines[0]}" =~ ^[0-9]+$'\t'"$first"$ ]] || fail "first event: ${lines[0]}"
	exec 9<&-
	run py_errno 'os.read(os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK), 100)' "$M/.events"
	assert_output EAGAIN

	# A tenant's drain: refusals while children remain, then the early
	# clear when the last one goes.
	op mkdir "$M/v/p"
	op bash -c 'echo d >"$1"' _ "$M/v/p/c"
	op bash -c 'echo >"$1"' _ "$M/v/.drain"
	refused 'Read-only file system' mkdir "$M/v/q"
	op bash -c 'echo still >"$1"' _ "$M/v/p/c"
	op rm "$M/v/p/c"
	run op cat "$M/v/.drain"
	assert_output drained

	# Tenant cleanup.
	op rmdir "$M/u"
	run op cat "$M/.stats"
	assert_line 'tenants 2'

	# Unmount and let valgrind finish its report.
	op fusermount3 -u "$M"
	statefs_wait_exit 40
	watchdog_stop
	vg_clean "$vglog"
	assert_equal "$STATEFS_STATUS" 0
}

# vg_clean LOG: valgrind ran the daemon to its end and found nothing.
vg_clean() {
	run cat "$1"
	assert_line --regexp '^==[0-9]+== Command: .*/statefs -f '
	assert_line --partial 'HEAP SUMMARY:'
	assert_line --partial 'ERROR SUMMARY: 0 errors from 0 contexts'
	refute_line --regexp 'definitely lost: [1-9]'
	refute_line --regexp 'indirectly lost: [1-9]'
	refute_line --partial 'Invalid read'
	refute_line --partial 'Invalid write'
	refute_line --partial 'uninitialised'
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "the SIGTERM shutdown under valgrind memcheck: drain, unmount, exit 0, nothing lost" {
	local vglog="$BATS_TEST_TMPDIR/valgrind.log"
	statefs_mount_under 30 valgrind --sim-hints=fuse-compatible \
		--leak-check=full --errors-for-leak-kinds=definite,indirect \
		--error-exitcode=99 --log-file="$vglog" -- -o drain_window=1
	local M=$MNT
	watchdog_start 60 "$M"
	op mkdir -p "$M/t/p" "$M/t/q" "$M/u/p"
	op bash -c 'echo a >"$1"' _ "$M/t/p/a"
	op ln "$M/t/p/a" "$M/t/q/a"
	op bash -c 'echo b >"$1"' _ "$M/u/p/b"
	op setfattr -n user.statefs.ttl -v 600 "$M/u/p"
	op bash -c 'echo p >"$1"' _ "$M/t/.depart"
	op cat "$M/.snapshot" "$M/.stats" >/dev/null
	kill -TERM "$STATEFS_PID"
	statefs_wait_exit 40
	watchdog_stop
	vg_clean "$vglog"
	assert_equal "$STATEFS_STATUS" 0
	assert_equal "$STATEFS_LEFT_MOUNTED" 0
}
