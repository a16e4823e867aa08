#!/usr/bin/env bats
# The kernel's caches (docs/design.md, "Caching"): names and attributes
# are cached for -o cache_timeout but never past a lease, and whatever the
# store changes behind the kernel's back is dropped from them before the
# request that caused it returns.  Every test first makes the kernel hold
# the node (a stat), then changes it without naming it, then looks again
# the way a user would: the answer must be the store's, never the cache's.

load helpers

# gone PATH: stat says ENOENT.
gone() {
	run stat "$1"
	assert_failure
	assert_output --partial 'No such file or directory'
}

# request_count CMD...: how many FUSE requests of this mount CMD makes
# (the kernel's fuse_request_send tracepoint).
request_count() {
	local t=/sys/kernel/tracing dev n
	[ -d $t/events/fuse ] || mount -t tracefs nodev $t 2>/dev/null || true
	[ -d $t/events/fuse ] || return 2
	dev=$(stat -c %d "$MNT")
	# The trace buffer is the machine's: another suite's run of this
	# one (make test runs suites at once) waits for the lock.
	exec 8>/tmp/statefs-test-tracing.lock
	flock 8
	echo >$t/trace
	echo 1 >$t/events/fuse/fuse_request_send/enable
	"$@" >/dev/null
	echo 0 >$t/events/fuse/fuse_request_send/enable
	n=$(grep -c "connection $dev " $t/trace || true)
	exec 8>&-
	echo "$n"
}

@test "a stat of an unchanged node is answered from the kernel's cache" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo hello >"$MNT/t/p/c"
	stat "$MNT/t/p/c" >/dev/null
	run request_count stat "$MNT/t/p/c"
	[ "$status" -ne 2 ] || skip "no fuse tracepoint on this kernel"
	assert_output 0
}

@test "with -o cache_timeout=0 every stat asks the daemon" {
	statefs_mount -o cache_timeout=0
	mkdir -p "$MNT/t/p"
	echo hello >"$MNT/t/p/c"
	stat "$MNT/t/p/c" >/dev/null
	run request_count stat "$MNT/t/p/c"
	[ "$status" -ne 2 ] || skip "no fuse tracepoint on this kernel"
	[ "$output" -ge 3 ]
}

@test "a publication is seen by the next stat, even one made between write and close" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	: >"$MNT/t/p/c"
	# One process, one descriptor: every close(2) publishes.
	run python3 -c '
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"hello")
before = os.stat(p).st_size
os.close(fd)
print(before, os.stat(p).st_size)' "$MNT/t/p/c"
	assert_success
	assert_output "0 5"
	run stat -c %s "$MNT/t/p/c"
	assert_output 5
}

@test "a lease given to a cached child ends it on time (testclock)" {
	statefs_mount -o testclock
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	stat "$MNT/t/p/c" >/dev/null
	setfattr -n user.statefs.ttl -v 2 "$MNT/t/p/c"
	echo 1999 >"$MNT/.clock"
	run stat -c %s "$MNT/t/p/c"
	assert_output 2
	echo 1 >"$MNT/.clock"
	gone "$MNT/t/p/c"
	run ls "$MNT/t/p"
	assert_output ''
}

@test "a lease given to a cached parent ends it and its children on time (testclock)" {
	statefs_mount -o testclock
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	stat "$MNT/t/p" "$MNT/t/p/c" >/dev/null
	setfattr -n user.statefs.ttl -v 1 "$MNT/t/p"
	echo 1000 >"$MNT/.clock"
	gone "$MNT/t/p/c"
	gone "$MNT/t/p"
	run mkdir "$MNT/t/p"
	assert_success
}

@test "a lease given to a cached child ends it on time (real clock)" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	stat "$MNT/t/p/c" >/dev/null
	setfattr -n user.statefs.ttl -v 0.5 "$MNT/t/p/c"
	sleep 0.6
	gone "$MNT/t/p/c"
}

@test "a child under a leased parent is never cached past the parent's deadline (real clock)" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	setfattr -n user.statefs.ttl -v 0.6 "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	stat "$MNT/t/p/c" >/dev/null
	sleep 0.7
	gone "$MNT/t/p/c"
	gone "$MNT/t/p"
}

@test "a .depart of a cached parent is seen as soon as the write returns" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	stat "$MNT/t/p" "$MNT/t/p/c" >/dev/null
	echo p >"$MNT/t/.depart"
	gone "$MNT/t/p/c"
	gone "$MNT/t/p"
	run mkdir "$MNT/t/p"
	assert_success
	run ls "$MNT/t/p"
	assert_output ''
}

@test "a drain's clear of cached tenants and parents is seen at once" {
	statefs_mount -o testclock,drain_window=5
	mkdir -p "$MNT/t/p" "$MNT/u/q"
	echo x >"$MNT/t/p/c"
	stat "$MNT/t" "$MNT/t/p" "$MNT/t/p/c" "$MNT/u/q" >/dev/null
	echo go >"$MNT/t/.drain"
	echo 5000 >"$MNT/.clock"
	run cat "$MNT/t/.drain"
	assert_output drained
	gone "$MNT/t/p/c"
	gone "$MNT/t/p"
	run stat -c %F "$MNT/u/q"
	assert_output directory
}

@test "a leave's cascade updates the link count of a state still linked elsewhere" {
	statefs_mount
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	echo x >"$MNT/t/p/c"
	ln "$MNT/t/p/c" "$MNT/t/q/c"
	run stat -c %h "$MNT/t/q/c"
	assert_output 2
	rmdir "$MNT/t/p"
	run stat -c %h "$MNT/t/q/c"
	assert_output 1
}

@test "an .events reader that sees a .depart line finds the parent gone" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	stat "$MNT/t/p" >/dev/null
	exec 4<"$MNT/t/.events"
	echo p >"$MNT/t/.depart"
	local seq op rest
	read -r -t 5 seq op rest <&4
	assert_equal "$op" depart
	gone "$MNT/t/p"
	exec 4<&-
}

# switches NAME: the voluntary context switches so far of the daemon's
# thread called NAME (its comm), i.e. how often it went to sleep.
switches() {
	local task
	for task in /proc/"$STATEFS_PID"/task/*; do
		if [ "$(cat "$task/comm" 2>/dev/null)" = "$1" ]; then
			awk '$1 == "voluntary_ctxt_switches:" { print $2 }' "$task/status"
			return 0
		fi
	done
	echo "no thread $1 in statefs (pid $STATEFS_PID)" >&2
	return 1
}

@test "with nothing happening, the cache and echo threads sleep: no wake-ups" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	local inval0 echo0 inval1 echo1
	inval0=$(switches statefs-inval)
	echo0=$(switches statefs-echo)
	# Idle: no request, no .events reader, no lease.
	sleep 4
	inval1=$(switches statefs-inval)
	echo1=$(switches statefs-echo)
	# A thread that sleeps until there is work does not wake at all;
	# one that looks once a second would have woken four times.
	[ $((inval1 - inval0)) -le 1 ] ||
		fail "the inval thread woke $((inval1 - inval0)) times in 4 idle seconds"
	[ $((echo1 - echo0)) -le 1 ] ||
		fail "the echo thread woke $((echo1 - echo0)) times in 4 idle seconds"
	# And they still do their work when there is some.
	stat "$MNT/t/p" >/dev/null
	watch_start "$BATS_TEST_TMPDIR/w" "$MNT/t" -e delete
	echo p >"$MNT/t/.depart"
	run stat "$MNT/t/p"
	assert_failure
	wait_line "$BATS_TEST_TMPDIR/w" 'DELETE,ISDIR p'
	bg_stop || true
}

@test "with no deadline the reaper sleeps, and a nearer lease set later still ends on time" {
	statefs_mount
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	local reap0 reap1
	reap0=$(switches statefs-reaper)
	# Idle: no lease, no tombstone, no drain.
	sleep 4
	reap1=$(switches statefs-reaper)
	[ $((reap1 - reap0)) -le 1 ] ||
		fail "the reaper woke $((reap1 - reap0)) times in 4 idle seconds"
	# A far deadline: the reaper sleeps until it.  A nearer one set
	# afterwards wakes it, and the child ends with nobody touching the
	# mount: the echo of its expiry is the watcher's DELETE.
	set_ttl 3600 "$MNT/t/p"
	sleep 0.5
	watch_start "$BATS_TEST_TMPDIR/w" "$MNT/t/p" -e delete
	set_ttl 1 "$MNT/t/p/c"
	wait_line "$BATS_TEST_TMPDIR/w" 'DELETE c' 15
	bg_stop || true
}
