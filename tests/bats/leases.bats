#!/usr/bin/env bats
# statefs(8), LEASES: leases (TTL) on children and parents, renewal by
# touch, expiry as unlink / rmdir, the manual clock of -o testclock.
#
# Most tests run on a manual clock: deadline = now + ttl, and a node is gone
# as soon as now >= deadline, so "ttl - 1 ms: still there, 1 ms more: gone"
# is exact.  Writing to MNT/.clock runs every due expiry before it returns.

load helpers

setup() {
	statefs_mount -o testclock
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
}

# gone PATH: PATH does not exist (stat says ENOENT).
gone() {
	run stat "$1"
	assert_failure
	assert_output --partial 'No such file or directory'
}

# --- the manual clock ------------------------------------------------------

@test "with testclock, MNT/.clock is a 0644 file at the root, listed by ls -a" {
	run stat -c %a "$MNT/.clock"
	assert_success
	assert_output 644
	run ls -A "$MNT"
	assert_line .clock
	run stat "$MNT/t/.clock"
	assert_failure
	assert_output --partial 'No such file or directory'
}

@test "reading .clock gives the clock in ms; writing a number advances it by that much" {
	local a b
	a=$(clock_ms)
	[[ $a =~ ^[0-9]+$ ]]
	advance 1500
	b=$(clock_ms)
	[[ $b =~ ^[0-9]+$ ]]
	assert_equal "$((b - a))" 1500
	advance 1
	assert_equal "$(clock_ms)" "$((b + 1))"
}

@test "the manual clock does not move by itself, and no lease expires on real time" {
	touch "$C"
	set_ttl 1 "$C"
	local a
	a=$(clock_ms)
	sleep 1.3
	assert_equal "$(clock_ms)" "$a"
	run ls "$MNT/t/p"
	assert_output c
	run stat_of expiries
	assert_output 0
}

@test "a bad number written to .clock is refused with EINVAL and the clock stays" {
	local a
	a=$(clock_ms)
	run bash -c 'echo abc >"$1/.clock"' _ "$MNT"
	assert_failure
	assert_output --partial 'Invalid argument'
	assert_equal "$(clock_ms)" "$a"
}

@test ".clock takes at most 10^12 ms a write and stops at 8 * 10^12 ms: past that EINVAL, the clock stays" {
	local v
	for v in 18446744073709550615 18446744073709551615 1000000000001; do
		run bash -c 'echo "$2" >"$1/.clock"' _ "$MNT" "$v"
		assert_failure
		assert_output --partial 'Invalid argument'
		assert_equal "$(clock_ms)" 0
	done
	touch "$C"
	for v in 1 2 3 4 5 6 7; do
		advance 1000000000000
	done
	assert_equal "$(clock_ms)" 7000000000000
	run bash -c 'echo 1000000000001 >"$1/.clock"' _ "$MNT"
	assert_failure
	advance 999999999999
	advance 1
	assert_equal "$(clock_ms)" 8000000000000
	run bash -c 'echo 1 >"$1/.clock"' _ "$MNT"
	assert_failure
	assert_output --partial 'Invalid argument'
	assert_equal "$(clock_ms)" 8000000000000
	# At the end of its range the clock still gives exact deadlines.
	set_ttl 5 "$C"
	run ttl "$C"
	assert_output 5
	run bash -c 'grep "^child" "$1/.snapshot" | cut -f9' _ "$MNT"
	assert_output 5000
	run ls "$MNT/t/p"
	assert_output c
}

@test "without testclock there is no .clock" {
	statefs_remount
	run stat "$MNT/.clock"
	assert_failure
	assert_output --partial 'No such file or directory'
	run ls -A "$MNT"
	refute_line .clock
}

# --- setting and reading a ttl ----------------------------------------------

@test "a child's ttl reads back in seconds in the shortest form" {
	touch "$C"
	set_ttl 5 "$C"
	run ttl "$C"
	assert_success
	assert_output 5
	set_ttl 1.5 "$C"
	run ttl "$C"
	assert_output 1.5
	set_ttl 0.25 "$C"
	run ttl "$C"
	assert_output 0.25
	set_ttl 0.001 "$C"
	run ttl "$C"
	assert_output 0.001
	set_ttl 2.500 "$C"
	run ttl "$C"
	assert_output 2.5
}

@test "a child without a lease has ttl 0 and never expires" {
	touch "$C"
	run ttl "$C"
	assert_success
	assert_output 0
	advance 3600000
	run ls "$MNT/t/p"
	assert_output c
}

@test "ttl 0 removes the lease" {
	touch "$C"
	set_ttl 1 "$C"
	set_ttl 0 "$C"
	run ttl "$C"
	assert_output 0
	advance 5000
	run ls "$MNT/t/p"
	assert_output c
	run stat_of expiries
	assert_output 0
}

@test "bad ttl values are refused with EINVAL and change nothing" {
	touch "$C"
	set_ttl 5 "$C"
	local v
	for v in abc -1 1.2345 '' 5s; do
		run setfattr -n user.statefs.ttl -v "$v" "$C"
		assert_failure
		assert_output --partial 'Invalid argument'
		run ttl "$C"
		assert_output 5
	done
	advance 4999
	run ls "$MNT/t/p"
	assert_output c
	advance 1
	run ls "$MNT/t/p"
	assert_output ''
}

@test "a ttl longer than 1000000000 s is refused with EINVAL and the node stays as it was" {
	touch "$C"
	set_ttl 5 "$C"
	local v
	for v in 1000000000.001 1000000001 18446744073709551.615 18446744073709551 \
		9223372036854775.808; do
		run setfattr -n user.statefs.ttl -v "$v" "$C"
		assert_failure
		assert_output --partial 'Invalid argument'
		run ttl "$C"
		assert_output 5
		run setfattr -n user.statefs.ttl -v "$v" "$MNT/t/p"
		assert_failure
		assert_output --partial 'Invalid argument'
		run ttl "$MNT/t/p"
		assert_output 0
	done
	run ls "$MNT/t/p"
	assert_output c
	run stat_of expiries
	assert_output 0
	# The longest is taken, and lasts that long.
	set_ttl 1000000000 "$MNT/t/p"
	run ttl "$MNT/t/p"
	assert_output 1000000000
	advance 5000
	run ls "$MNT/t"
	assert_output p
	advance 999999994999
	run ls "$MNT/t"
	assert_output p
	advance 1
	run ls "$MNT/t"
	assert_output ''
}

@test "a ttl on a tenant, the root or a special file is refused with EINVAL" {
	local f
	for f in "$MNT" "$MNT/t" "$MNT/.stats" "$MNT/t/.stats" "$MNT/.clock"; do
		run setfattr -n user.statefs.ttl -v 1 "$f"
		assert_failure
		assert_output --partial 'Invalid argument'
	done
	advance 10000
	run ls "$MNT"
	assert_output t
	run ls "$MNT/t"
	assert_output p
}

# --- expiry of a child ------------------------------------------------------

@test "a child expires exactly at its deadline: ttl - 1 ms still there, 1 ms more gone" {
	echo x >"$C"
	set_ttl 2 "$C"
	advance 1999
	run cat "$C"
	assert_success
	assert_output x
	run ls "$MNT/t/p"
	assert_output c
	advance 1
	gone "$C"
	run ls "$MNT/t/p"
	assert_output ''
}

@test "an expiry is a removal: gauges drop and the expiries counter counts it" {
	echo xyz >"$C"
	touch "$MNT/t/p/keep"
	set_ttl 1 "$C"
	run stat_of expiries
	assert_output 0
	advance 1000
	run stat_of expiries
	assert_output 1
	run stat_of children
	assert_output 1
	run stat_of bytes
	assert_output 0
	run stat_of children "$MNT/t"
	assert_output 1
	run ls "$MNT/t/p"
	assert_output keep
}

@test "an expired child's name is free: a re-create is a new incarnation with no lease" {
	echo old >"$C"
	echo again >>"$C"
	local ino
	ino=$(stat -c %i "$C")
	set_ttl 1 "$C"
	advance 1000
	set -C
	echo new >"$C"
	set +C
	run cat "$C"
	assert_output new
	run ver "$C"
	assert_output 1
	run ttl "$C"
	assert_output 0
	refute [ "$(stat -c %i "$C")" = "$ino" ]
}

@test "an old handle of an expired child gives ESTALE" {
	echo old >"$C"
	set_ttl 1 "$C"
	exec 8<"$C"
	advance 1000
	run cat <&8
	assert_failure
	assert_output --partial 'Stale file handle'
	exec 8<&-
}

@test "children expire in deadline order, each at its own deadline" {
	touch "$MNT/t/p/a" "$MNT/t/p/b" "$MNT/t/p/c"
	set_ttl 1 "$MNT/t/p/a"
	set_ttl 2.5 "$MNT/t/p/b"
	advance 999
	run ls "$MNT/t/p"
	assert_output $'a\nb\nc'
	advance 1
	run ls "$MNT/t/p"
	assert_output $'b\nc'
	advance 1499
	run ls "$MNT/t/p"
	assert_output $'b\nc'
	advance 1
	run ls "$MNT/t/p"
	assert_output c
	run stat_of expiries
	assert_output 2
}

@test "one advance past many deadlines removes every due child before it returns" {
	local i names=()
	for i in $(seq 200); do
		names+=("$MNT/t/p/c$i")
	done
	touch "${names[@]}"
	for i in $(seq 200); do
		set_ttl 1 "$MNT/t/p/c$i"
	done
	touch "$MNT/t/p/keep"
	advance 1000
	run ls "$MNT/t/p"
	assert_output keep
	run stat_of expiries
	assert_output 200
	run stat_of children
	assert_output 1
}

@test "setting a new ttl moves the deadline to now + the new ttl" {
	touch "$C"
	set_ttl 5 "$C"
	advance 1000
	set_ttl 2 "$C"
	run ttl "$C"
	assert_output 2
	advance 1999
	run ls "$MNT/t/p"
	assert_output c
	advance 1
	gone "$C"
}

# --- renewal ------------------------------------------------------------------

@test "touch renews a child's lease: deadline = now + ttl" {
	echo x >"$C"
	set_ttl 2 "$C"
	advance 1500
	touch "$C"
	advance 1999
	run cat "$C"
	assert_success
	assert_output x
	advance 1
	gone "$C"
}

@test "a renewal does not publish: version and content stay" {
	echo x >"$C"
	set_ttl 2 "$C"
	advance 1000
	touch "$C"
	run ver "$C"
	assert_output 1
	run cat "$C"
	assert_output x
	run ttl "$C"
	assert_output 2
}

@test "a renewal through an old handle of an earlier incarnation gives ESTALE and does not extend the new lease" {
	touch "$C"
	set_ttl 2 "$C"
	exec 8<"$C"
	rm "$C"
	touch "$C"
	set_ttl 2 "$C"
	advance 1000
	run py_errno 'os.utime(8)'
	assert_output ESTALE
	exec 8<&-
	advance 999
	run ls "$MNT/t/p"
	assert_output c
	advance 1
	gone "$C"
}

# --- parents --------------------------------------------------------------------

@test "a parent's lease reads back; at its deadline it leaves with its children, as by rmdir" {
	echo 1 >"$MNT/t/p/a"
	echo 2 >"$MNT/t/p/b"
	set_ttl 3 "$MNT/t/p"
	run ttl "$MNT/t/p"
	assert_output 3
	advance 2999
	run ls "$MNT/t"
	assert_output p
	run ls "$MNT/t/p"
	assert_output $'a\nb'
	advance 1
	run ls "$MNT/t"
	assert_output ''
	gone "$MNT/t/p"
	gone "$MNT/t/p/a"
	run stat_of parents
	assert_output 0
	run stat_of children
	assert_output 0
	run stat_of bytes
	assert_output 0
	run stat_of tombstones
	assert_output 1
}

@test "an expired parent left a tombstone: mkdir rejoins with generation + 1" {
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 2
	set_ttl 1 "$MNT/t/p"
	advance 1000
	gone "$MNT/t/p"
	mkdir "$MNT/t/p"
	run gen "$MNT/t/p"
	assert_output 3
	run ttl "$MNT/t/p"
	assert_output 0
	run ls "$MNT/t/p"
	assert_output ''
}

@test "touch renews a parent's lease" {
	set_ttl 2 "$MNT/t/p"
	advance 1500
	touch "$MNT/t/p"
	advance 1999
	run ls "$MNT/t"
	assert_output p
	advance 1
	run ls "$MNT/t"
	assert_output ''
}

@test "a write into a child of an expired parent through an old handle gives ESTALE" {
	echo x >"$C"
	set_ttl 1 "$MNT/t/p"
	exec 8>>"$C"
	advance 1000
	run bash -c 'echo late >&8'
	assert_failure
	assert_output --partial 'Stale file handle'
	exec 8>&-
	run stat_of children
	assert_output 0
}

# --- child_ttl and default_ttl -----------------------------------------------------

@test "child_ttl on a parent: new children start with it, existing ones keep theirs" {
	touch "$MNT/t/p/old"
	run child_ttl "$MNT/t/p"
	assert_success
	assert_output 0
	setfattr -n user.statefs.child_ttl -v 2 "$MNT/t/p"
	run child_ttl "$MNT/t/p"
	assert_output 2
	run ttl "$MNT/t/p"
	assert_output 0
	touch "$C"
	run ttl "$C"
	assert_output 2
	run ttl "$MNT/t/p/old"
	assert_output 0
	advance 1999
	run ls "$MNT/t/p"
	assert_output $'c\nold'
	advance 1
	run ls "$MNT/t/p"
	assert_output old
	run ls "$MNT/t"
	assert_output p
}

@test "child_ttl reads back in the shortest form and refuses bad values" {
	setfattr -n user.statefs.child_ttl -v 1.250 "$MNT/t/p"
	run child_ttl "$MNT/t/p"
	assert_output 1.25
	run setfattr -n user.statefs.child_ttl -v abc "$MNT/t/p"
	assert_failure
	assert_output --partial 'Invalid argument'
	run setfattr -n user.statefs.child_ttl -v 0.0001 "$MNT/t/p"
	assert_failure
	assert_output --partial 'Invalid argument'
	run child_ttl "$MNT/t/p"
	assert_output 1.25
	setfattr -n user.statefs.child_ttl -v 0 "$MNT/t/p"
	run child_ttl "$MNT/t/p"
	assert_output 0
	touch "$C"
	run ttl "$C"
	assert_output 0
}

@test "a child_ttl longer than 1000000000 s is refused; new children are admitted as before" {
	setfattr -n user.statefs.child_ttl -v 2 "$MNT/t/p"
	events_bg "$BATS_TEST_TMPDIR/ev" 1 "$MNT/t"
	local v
	for v in 1000000000.001 18446744073709551.615 9223372036854775.808; do
		run setfattr -n user.statefs.child_ttl -v "$v" "$MNT/t/p"
		assert_failure
		assert_output --partial 'Invalid argument'
		run child_ttl "$MNT/t/p"
		assert_output 2
	done
	echo data >"$C"
	events_wait
	run cut -f2-4 "$BATS_TEST_TMPDIR/ev"
	assert_output $'create\tt\tp'
	run ttl "$C"
	assert_output 2
	run cat "$C"
	assert_output data
	run stat_of expiries
	assert_output 0
}

@test "-o default_ttl: every new child starts with it; parents do not" {
	statefs_remount -o testclock,default_ttl=1.5
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	echo x >"$C"
	run ttl "$C"
	assert_output 1.5
	run ttl "$MNT/t/p"
	assert_output 0
	advance 1499
	run cat "$C"
	assert_output x
	advance 1
	gone "$C"
	advance 3600000
	run ls "$MNT/t"
	assert_output p
}

@test "a parent's child_ttl takes precedence over default_ttl" {
	statefs_remount -o testclock,default_ttl=1
	mkdir -p "$MNT/t/p" "$MNT/t/q"
	setfattr -n user.statefs.child_ttl -v 3 "$MNT/t/p"
	touch "$MNT/t/p/c" "$MNT/t/q/c"
	run ttl "$MNT/t/p/c"
	assert_output 3
	run ttl "$MNT/t/q/c"
	assert_output 1
	advance 1000
	run ls "$MNT/t/q"
	assert_output ''
	run ls "$MNT/t/p"
	assert_output c
	advance 2000
	run ls "$MNT/t/p"
	assert_output ''
}

# --- real time ---------------------------------------------------------------------

@test "without testclock a child with ttl 1 is reaped on time with nobody touching the mount" {
	statefs_remount
	mkdir -p "$MNT/t/p"
	C="$MNT/t/p/c"
	echo x >"$C"
	set_ttl 1 "$C"
	sleep 0.4
	run cat "$C"
	assert_output x
	# Nothing touches the mount now: only the daemon's timer can reap.
	sleep 1.2
	run stat_of expiries
	assert_output 1
	run stat_of children
	assert_output 0
	run ls "$MNT/t/p"
	assert_output ''
}
