#!/usr/bin/env bats
# statefs(8), SPECIAL FILES, .drain (and LEASES and WATCHING for leases
# and watchers during a drain), and the signals that drain the whole
# store.
#
# MNT/.drain and MNT/T/.drain read "ready", "draining MS_LEFT" or
# "drained".  A write starts a drain of that scope (a second write changes
# nothing).  While it runs, every new tenant, parent, child, link, move
# into a parent, lease and lease renewal in scope is refused with EROFS;
# existing children may be written and removed.  At the deadline, or as
# soon as no child remains in scope, everything in scope is cleared in one
# transition: a root drain removes every tenant, a tenant drain leaves the
# tenant, empty.  The drained scope keeps refusing.
#
# Most tests run on the manual clock with a 5 s window, so MS_LEFT is exact.
# The signal tests run on the real clock: SIGTERM/SIGINT start a root drain,
# the daemon serves during the window, then unmounts itself and exits 0; a
# second signal ends the window at once.

load helpers

setup() {
	statefs_mount -o testclock,drain_window=5
	W="$BATS_TEST_TMPDIR/watch"
	OUT="$BATS_TEST_TMPDIR/events"
	S="$BATS_TEST_TMPDIR/snap"
}

teardown() {
	bg_stop
	if [ -z "${BATS_TEST_COMPLETED:-}" ]; then
		local log
		for log in "${STATEFS_GONE_LOGS[@]}"; do
			echo "--- statefs log (daemon exited by itself):" >&2
			tail -n 50 "$log" >&2
		done
	fi
	bg_teardown
}

EROFS='Read-only file system'

# erofs CMD...: CMD fails with EROFS.
erofs() {
	run "$@"
	assert_failure
	assert_output --partial "$EROFS"
}

# drain_of DIR: what DIR/.drain reads (the whole file, newline included,
# shown as $'...' so that a missing newline shows).
drain_of() {
	local v
	v=$(cat "$1/.drain"; echo .)
	printf '%q\n' "${v%.}"
}

# assert_drain DIR TEXT: DIR/.drain reads exactly TEXT and a newline.
assert_drain() {
	run drain_of "$1"
	assert_success
	assert_output "$(printf '%q' "$2"$'\n')"
}

# events_cat OUT [DIR]: open DIR/.events now and copy everything it gives
# to OUT in the background, until bg_stop (never events_wait: it does not
# end by itself).
events_cat() {
	local out=$1 dir=${2:-$MNT}
	exec 9<"$dir/.events" || return 1
	cat <&9 >"$out" 2>"$out.err" 9<&- 3>&- &
	BG_PIDS+=($!)
	exec 9<&-
}

# wait_lines FILE N [SECS]: wait (default 3 s) until FILE has N lines.
wait_lines() {
	local i
	for i in $(seq $((${3:-3} * 20))); do
		[ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	fail "$1 has not $2 lines within ${3:-3} s: $(cat "$1")"
}

# specials_only DIR: ls -A DIR lists special files only.
specials_only() {
	run ls -A "$1"
	assert_success
	local l
	for l in "${lines[@]}"; do
		[[ $l == .* ]] || fail "$1 still has $l: $output"
	done
	run ls "$1"
	assert_output ''
}

# A store with two tenants, parents and children:
#   t/a (generation 1): c ("hello"), k     t/b (generation 2): d
#   u/p (generation 1): e
populate() {
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/u/p"
	rmdir "$MNT/t/b"
	mkdir "$MNT/t/b"
	echo hello >"$MNT/t/a/c"
	touch "$MNT/t/a/k" "$MNT/t/b/d" "$MNT/u/p/e"
}

# --- the file -----------------------------------------------------------------

@test ".drain is a 0644 file at the root and in each tenant, listed by ls -a; parents have none" {
	mkdir -p "$MNT/t/p"
	run stat -c %a "$MNT/.drain" "$MNT/t/.drain"
	assert_success
	assert_output $'644\n644'
	run ls -A "$MNT"
	assert_line .drain
	run ls -A "$MNT/t"
	assert_line .drain
	run stat "$MNT/t/p/.drain"
	assert_failure
	assert_output --partial 'No such file or directory'
}

@test "a new store and its tenants read ready, and .stats says state ready" {
	mkdir -p "$MNT/t/p"
	assert_drain "$MNT" ready
	assert_drain "$MNT/t" ready
	run stat_of state
	assert_output ready
	run stat_of state "$MNT/t"
	assert_output ready
	# reading changes nothing
	mkdir "$MNT/t/q"
	touch "$MNT/t/q/c"
}

# --- a drain of the whole store ------------------------------------------------

@test "writing .drain starts a root drain; MS_LEFT counts down with the clock" {
	populate
	echo 1 >"$MNT/.drain"
	assert_drain "$MNT" 'draining 5000'
	assert_drain "$MNT/t" 'draining 5000'
	run stat_of state
	assert_output draining
	run stat_of state "$MNT/t"
	assert_output draining
	advance 1234
	assert_drain "$MNT" 'draining 3766'
	assert_drain "$MNT/u" 'draining 3766'
	advance 3765
	assert_drain "$MNT" 'draining 1'
	run ls "$MNT"
	assert_output $'t\nu'
}

@test "a second write to .drain does not move the deadline" {
	statefs_remount -o testclock
	populate
	printf 'whatever' >"$MNT/.drain"
	assert_drain "$MNT" 'draining 30000'
	advance 10000
	echo 1 >"$MNT/.drain"
	assert_drain "$MNT" 'draining 20000'
	advance 5000
	echo 2 >"$MNT/.drain"
	assert_drain "$MNT" 'draining 15000'
	advance 14999
	run ls "$MNT"
	assert_output $'t\nu'
	advance 1
	assert_drain "$MNT" drained
}

@test "a second write to a tenant's .drain does not move its deadline" {
	populate
	echo 1 >"$MNT/t/.drain"
	advance 2000
	echo 1 >"$MNT/t/.drain"
	assert_drain "$MNT/t" 'draining 3000'
	advance 2999
	run ls "$MNT/t"
	assert_output $'a\nb'
	advance 1
	assert_drain "$MNT/t" drained
}

@test "while the store drains, every new tenant, parent, child, link, move, lease and renewal gets EROFS and changes nothing" {
	populate
	set_ttl 100 "$MNT/t/a/c"
	set_ttl 100 "$MNT/t/b"
	echo 1 >"$MNT/.drain"
	cat "$MNT/.snapshot" >"$S.1"
	gauges >"$S.g1"
	erofs mkdir "$MNT/v"
	erofs mkdir "$MNT/t/q"
	erofs bash -c 'echo x >"$1/t/a/new"' _ "$MNT"
	erofs touch "$MNT/u/p/new"
	erofs ln "$MNT/t/a/c" "$MNT/t/b/c"
	erofs mv "$MNT/t/a/k" "$MNT/t/b/k"
	erofs set_ttl 5 "$MNT/t/a/k"
	erofs set_ttl 5 "$MNT/u/p"
	erofs touch "$MNT/t/a/c"
	erofs touch "$MNT/t/b"
	cat "$MNT/.snapshot" >"$S.2"
	run diff "$S.1" "$S.2"
	assert_success
	run gauges
	assert_output "$(cat "$S.g1")"
	run ttl "$MNT/t/a/c"
	assert_output 100
	run ttl "$MNT/t/a/k"
	assert_output 0
	run ls "$MNT/t/a"
	assert_output $'c\nk'
	local n
	n=$(stat_of refused_draining)
	[ "$n" -ge 10 ] || fail "refused_draining is $n"
	assert_drain "$MNT" 'draining 5000'
}

@test "while the store drains, existing children can be written and removed" {
	populate
	echo 1 >"$MNT/.drain"
	local v
	v=$(ver "$MNT/t/a/c")
	echo x >"$MNT/t/a/c"
	run cat "$MNT/t/a/c"
	assert_output x
	run ver "$MNT/t/a/c"
	assert_output $((v + 1))
	echo y >>"$MNT/t/a/c"
	run cat "$MNT/t/a/c"
	assert_output $'x\ny'
	run ver "$MNT/t/a/c"
	assert_output $((v + 2))
	rm "$MNT/t/a/k"
	run ls "$MNT/t/a"
	assert_output c
	assert_drain "$MNT" 'draining 5000'
}

@test "at the deadline a root drain clears every tenant in one transition, and the store stays drained" {
	populate
	rmdir "$MNT/u/p" # a tombstone
	mkdir -p "$MNT/u/q"
	touch "$MNT/u/q/e"
	echo 1 >"$MNT/.drain"
	advance 4999
	run ls "$MNT"
	assert_output $'t\nu'
	advance 1
	specials_only "$MNT"
	run stat "$MNT/t"
	assert_failure
	assert_output --partial 'No such file or directory'
	assert_drain "$MNT" drained
	run stat_of state
	assert_output drained
	run gauges
	assert_output "$(printf '%s 0\n' tenants parents children links tombstones bytes)"
	run grep -v $'^seq\t' "$MNT/.snapshot"
	assert_output "$(head -n 1 "$MNT/.snapshot")"
	assert_equal "$(wc -l <"$MNT/.snapshot")" 2
	erofs mkdir "$MNT/t"
	erofs mkdir "$MNT/v"
	advance 60000
	assert_drain "$MNT" drained
	erofs mkdir "$MNT/v"
}

# --- a drain of one tenant -------------------------------------------------

@test "a tenant drain refuses new parents, children, links and renewals in that tenant only" {
	populate
	set_ttl 100 "$MNT/t/a/k"
	echo 1 >"$MNT/t/.drain"
	assert_drain "$MNT/t" 'draining 5000'
	assert_drain "$MNT" ready
	assert_drain "$MNT/u" ready
	run stat_of state "$MNT/t"
	assert_output draining
	run stat_of state
	assert_output ready
	run stat_of state "$MNT/u"
	assert_output ready
	erofs mkdir "$MNT/t/q"
	erofs touch "$MNT/t/a/new"
	erofs ln "$MNT/t/a/c" "$MNT/t/b/c"
	erofs mv "$MNT/t/a/k" "$MNT/t/b/k"
	erofs set_ttl 5 "$MNT/t/a"
	erofs touch "$MNT/t/a/k"
	run ttl "$MNT/t/a/k"
	assert_output 100
	# existing children of t are still writable
	echo x >"$MNT/t/a/c"
	run cat "$MNT/t/a/c"
	assert_output x
	# u and the root admit as usual
	mkdir "$MNT/u/q"
	echo y >"$MNT/u/q/new"
	ln "$MNT/u/q/new" "$MNT/u/p/new"
	set_ttl 50 "$MNT/u/p/e"
	touch "$MNT/u/p/e"
	mkdir "$MNT/v"
	run ls "$MNT/u/p"
	assert_output $'e\nnew'
	advance 1000
	assert_drain "$MNT/t" 'draining 4000'
	assert_drain "$MNT/v" ready
}

@test "at the deadline a tenant drain empties the tenant, which stays, drained and refusing" {
	populate
	echo 1 >"$MNT/t/.drain"
	advance 4999
	run ls "$MNT/t"
	assert_output $'a\nb'
	advance 1
	run ls "$MNT"
	assert_output $'t\nu'
	specials_only "$MNT/t"
	run stat "$MNT/t/a"
	assert_failure
	assert_output --partial 'No such file or directory'
	assert_drain "$MNT/t" drained
	run stat_of state "$MNT/t"
	assert_output drained
	run stat_of parents "$MNT/t"
	assert_output 0
	run stat_of children "$MNT/t"
	assert_output 0
	erofs mkdir "$MNT/t/a"
	erofs mkdir "$MNT/t/q"
	# the rest of the store is untouched and ready
	assert_drain "$MNT" ready
	assert_drain "$MNT/u" ready
	run stat_of state
	assert_output ready
	run ls "$MNT/u/p"
	assert_output e
	mkdir "$MNT/u/z"
	touch "$MNT/u/z/f"
	run stat_of children
	assert_output 2
}

# --- early end ---------------------------------------------------------------

@test "a root drain ends as soon as the last child in the store is removed" {
	populate
	echo 1 >"$MNT/.drain"
	local c0
	c0=$(clock_ms)
	rm "$MNT/t/a/c" "$MNT/t/a/k" "$MNT/t/b/d"
	assert_drain "$MNT" 'draining 5000'
	run ls "$MNT/t"
	assert_output $'a\nb'
	rm "$MNT/u/p/e"
	assert_drain "$MNT" drained
	specials_only "$MNT"
	run stat_of state
	assert_output drained
	erofs mkdir "$MNT/t"
	assert_equal "$(clock_ms)" "$c0"
}

@test "a tenant drain ends as soon as its last child is removed; other tenants' children do not count" {
	populate
	echo 1 >"$MNT/t/.drain"
	rm "$MNT/t/a/c" "$MNT/t/a/k"
	assert_drain "$MNT/t" 'draining 5000'
	rm "$MNT/t/b/d"
	assert_drain "$MNT/t" drained
	specials_only "$MNT/t"
	erofs mkdir "$MNT/t/a"
	run ls "$MNT/u/p"
	assert_output e
	assert_drain "$MNT" ready
	assert_drain "$MNT/u" ready
}

@test "a drain with no child in scope ends at once" {
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/u/p"
	touch "$MNT/u/p/e"
	echo 1 >"$MNT/t/.drain"
	assert_drain "$MNT/t" drained
	specials_only "$MNT/t"
	assert_drain "$MNT/u" ready
	echo 1 >"$MNT/.drain"
	assert_drain "$MNT" 'draining 5000'
	rm "$MNT/u/p/e"
	assert_drain "$MNT" drained
	specials_only "$MNT"
}

@test "an expiry that removes the last child ends the drain" {
	mkdir -p "$MNT/t/a"
	touch "$MNT/t/a/c"
	set_ttl 2 "$MNT/t/a/c"
	echo 1 >"$MNT/.drain"
	advance 1999
	assert_drain "$MNT" 'draining 3001'
	run ls "$MNT/t/a"
	assert_output c
	advance 1
	assert_drain "$MNT" drained
	specials_only "$MNT"
}

# --- watchers ----------------------------------------------------------------

@test "a watcher of a tenant sees DELETE,ISDIR for each parent a tenant drain clears" {
	populate
	mkdir "$MNT/t/empty"
	watch_start "$W" "$MNT/t" -e create,delete
	echo 1 >"$MNT/t/.drain"
	advance 5000
	wait_line "$W" 'DELETE,ISDIR a'
	wait_line "$W" 'DELETE,ISDIR b'
	wait_line "$W" 'DELETE,ISDIR empty'
	sleep 0.3
	run sort "$W"
	assert_output $'DELETE,ISDIR a\nDELETE,ISDIR b\nDELETE,ISDIR empty'
}

@test "a watcher of a tenant sees DELETE,ISDIR for each parent a root drain clears" {
	populate
	watch_start "$W" "$MNT/t" -e create,delete
	echo 1 >"$MNT/.drain"
	advance 5000
	wait_line "$W" 'DELETE,ISDIR a'
	wait_line "$W" 'DELETE,ISDIR b'
	run grep -c CREATE "$W"
	assert_output 0
}

@test "a watcher of the root sees DELETE,ISDIR for each tenant a root drain removes" {
	populate
	watch_start "$W" "$MNT" -e create,delete
	echo 1 >"$MNT/.drain"
	advance 5000
	wait_line "$W" 'DELETE,ISDIR t'
	wait_line "$W" 'DELETE,ISDIR u'
	sleep 0.3
	run sort "$W"
	assert_output $'DELETE,ISDIR t\nDELETE,ISDIR u'
}

@test ".events: a tenant drain is one drain line at its start and one per parent at the clear" {
	populate
	events_bg "$OUT" 4
	events_bg "$OUT.t" 3 "$MNT/t"
	echo 1 >"$MNT/t/.drain"
	advance 5000
	mkdir "$MNT/u/z"
	events_wait
	run cut -f2- "$OUT"
	assert_line --index 0 "$(evlines drain t - - - -)"
	assert_line --index 3 "$(evlines join u z - 1 -)"
	run bash -c 'cut -f2- "$1" | sed -n 2,3p | LC_ALL=C sort' _ "$OUT"
	assert_output "$(evlines drain t a - 1 - drain t b - 2 -)"
	# the tenant's own stream has the same three lines
	run bash -c 'cut -f2- "$1" | LC_ALL=C sort' _ "$OUT.t"
	assert_output "$(evlines drain t - - - - drain t a - 1 - drain t b - 2 - | LC_ALL=C sort)"
}

@test ".events: a root drain is 'drain - - - - -', then one drain line per parent and one cleanup line per tenant cleared" {
	populate
	events_cat "$OUT"
	echo 1 >"$MNT/.drain"
	advance 5000
	wait_lines "$OUT" 6
	sleep 0.5
	run cut -f2- "$OUT"
	assert_line --index 0 "$(evlines drain - - - - -)"
	run bash -c 'cut -f2- "$1" | tail -n +2 | LC_ALL=C sort' _ "$OUT"
	assert_output "$(evlines \
		cleanup t - - - - \
		drain t a - 1 - \
		drain t b - 2 - \
		cleanup u - - - - \
		drain u p - 1 - | LC_ALL=C sort)"
}

# --- signals -------------------------------------------------------------------

# wait_draining: wait up to 2 s until MNT/.drain reads "draining ..."
# (a signal is handled asynchronously).
wait_draining() {
	local i
	for i in $(seq 100); do
		[[ $(cat "$MNT/.drain" 2>/dev/null) == draining* ]] && return 0
		sleep 0.02
	done
	fail "no drain 2 s after the signal; .drain reads $(cat "$MNT/.drain" 2>&1)"
}

# assert_exited_cleanly: the daemon exited 0 and left no mount behind.
assert_exited_cleanly() {
	assert_equal "$STATEFS_STATUS" 0
	assert_equal "$STATEFS_LEFT_MOUNTED" 0
	run grep -F " $MNT " /proc/mounts
	assert_failure
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "SIGTERM drains the store: the daemon serves during the window, then unmounts itself and exits 0" {
	statefs_remount -o drain_window=3
	populate
	local t0 left
	t0=$(now_ms)
	kill -TERM "$STATEFS_PID"
	wait_draining
	left=$(cat "$MNT/.drain")
	left=${left#draining }
	[ "$left" -gt 0 ] && [ "$left" -le 3000 ] || fail "draining $left"
	run stat_of state
	assert_output draining
	run cat "$MNT/t/a/c"
	assert_output hello
	run ls "$MNT/t"
	assert_output $'a\nb'
	echo again >"$MNT/t/a/c"
	erofs mkdir "$MNT/t/q"
	erofs mkdir "$MNT/v"
	erofs touch "$MNT/t/a/new"
	statefs_wait_exit 8
	assert_exited_cleanly
	local took=$((STATEFS_EXIT_MS - t0))
	[ "$took" -ge 2500 ] || fail "the daemon exited after $took ms, before the 3 s window"
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "SIGINT drains the store like SIGTERM" {
	statefs_remount -o drain_window=3
	populate
	local t0
	t0=$(now_ms)
	kill -INT "$STATEFS_PID"
	wait_draining
	run cat "$MNT/t/a/c"
	assert_output hello
	erofs mkdir "$MNT/t/q"
	statefs_wait_exit 8
	assert_exited_cleanly
	local took=$((STATEFS_EXIT_MS - t0))
	[ "$took" -ge 2500 ] || fail "the daemon exited after $took ms, before the 3 s window"
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "a second SIGTERM during the window ends it at once" {
	statefs_remount -o drain_window=30
	populate
	kill -TERM "$STATEFS_PID"
	wait_draining
	run cat "$MNT/t/a/c"
	assert_output hello
	local t0
	t0=$(now_ms)
	kill -TERM "$STATEFS_PID"
	statefs_wait_exit 3
	assert_exited_cleanly
	local took=$((STATEFS_EXIT_MS - t0))
	[ "$took" -le 1500 ] || fail "the daemon took $took ms after the second SIGTERM"
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "SIGINT after SIGTERM ends the window at once" {
	statefs_remount -o drain_window=30
	populate
	kill -TERM "$STATEFS_PID"
	wait_draining
	local t0
	t0=$(now_ms)
	kill -INT "$STATEFS_PID"
	statefs_wait_exit 3
	assert_exited_cleanly
	local took=$((STATEFS_EXIT_MS - t0))
	[ "$took" -le 1500 ] || fail "the daemon took $took ms after SIGINT"
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "SIGTERM on a store with no children exits promptly" {
	statefs_remount -o drain_window=30
	mkdir -p "$MNT/t/a" "$MNT/u"
	local t0
	t0=$(now_ms)
	kill -TERM "$STATEFS_PID"
	statefs_wait_exit 3
	assert_exited_cleanly
	local took=$((STATEFS_EXIT_MS - t0))
	[ "$took" -le 1500 ] || fail "the daemon took $took ms"
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "SIGTERM on an empty store exits promptly" {
	statefs_remount -o drain_window=30
	local t0
	t0=$(now_ms)
	kill -TERM "$STATEFS_PID"
	statefs_wait_exit 3
	assert_exited_cleanly
	local took=$((STATEFS_EXIT_MS - t0))
	[ "$took" -le 1500 ] || fail "the daemon took $took ms"
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "SIGTERM after the root was looked at (its attributes cached) still exits" {
	statefs_remount -o drain_window=30
	stat "$MNT" >/dev/null
	ls -la "$MNT" >/dev/null
	kill -TERM "$STATEFS_PID"
	statefs_wait_exit 3
	assert_exited_cleanly
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "fusermount3 -u during a signal drain ends it cleanly: the daemon exits 0" {
	statefs_remount -o drain_window=30
	populate
	kill -TERM "$STATEFS_PID"
	wait_draining
	fusermount3 -u "$MNT"
	statefs_wait_exit 3
	assert_exited_cleanly
}

@test "fusermount3 -u during a .drain drain ends it cleanly: the daemon exits 0" {
	populate
	echo 1 >"$MNT/.drain"
	assert_drain "$MNT" 'draining 5000'
	fusermount3 -u "$MNT"
	statefs_wait_exit 3
	assert_exited_cleanly
}

# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "SIGTERM during a tenant drain drains the rest of the store too" {
	statefs_remount -o drain_window=3
	populate
	echo 1 >"$MNT/t/.drain"
	kill -TERM "$STATEFS_PID"
	wait_draining
	erofs mkdir "$MNT/u/q"
	run cat "$MNT/t/a/c"
	assert_output hello
	statefs_wait_exit 8
	assert_exited_cleanly
}

# The clear of a signal drain runs on the daemon's signal thread and, with
# a state linked from many parents that the kernel holds, sends a
# notification per lost link through the session.  An unmount racing it
# ends the session loop at the same moment; the daemon must still end
# cleanly and promptly, with nothing sent through a session already gone.
# Embedded only: SIGTERM of a mount on a shared store does not drain it.
# bats test_tags=embedded-only
@test "an unmount racing a signal drain's clear of linked states: the daemon exits 0, every time" {
	local i j
	for i in 1 2 3 4 5 6; do
		statefs_remount -o drain_window=30
		mkdir -p "$MNT/t/p0"
		echo x >"$MNT/t/p0/c"
		for j in $(seq 1 40); do
			mkdir "$MNT/t/p$j"
			ln "$MNT/t/p0/c" "$MNT/t/p$j/c"
		done
		stat "$MNT"/t/p*/c >/dev/null
		kill -TERM "$STATEFS_PID"
		wait_draining
		kill -TERM "$STATEFS_PID"
		fusermount3 -u "$MNT" 2>/dev/null || true
		statefs_wait_exit 3
		assert_equal "$STATEFS_STATUS" 0
	done
}
