#!/usr/bin/env bats
# docs/shared-store.md, "Watching": a transition made through one mount
# raises, on every other mount of the store, the inotify events it raises
# on the mount that made it (fs/echo.c replays it through the mount).
# And a mount started the way mount(8) starts it, in the background,
# follows the shared store.  Each test starts its own redis-server and
# mounts it twice, A and B; watchers run on B, changes are made on A.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

setup() {
	redis_start
	BGMNT=
	STOPPED_PID=
}

teardown() {
	local rc=0
	[ -n "$STOPPED_PID" ] && kill -CONT "$STOPPED_PID" 2>/dev/null
	exec 5<&- 6<&- 7<&-
	bg_stop
	if [ -n "$BGMNT" ]; then
		fusermount3 -u "$BGMNT" 2>/dev/null || fusermount3 -uz "$BGMNT" 2>/dev/null
		# The daemon leaves once its mount is gone.
		for _ in $(seq 100); do
			pgrep -f "statefs.*$BGMNT" >/dev/null || break
			sleep 0.05
		done
	fi
	dead_teardown || rc=1
	redis_stop_all
	return "$rc"
}

@test "inotify on one mount sees another mount's join, create, publication, unlink and leave" {
	mount2
	mkdir "$A/t" "$A/t/p"
	# B's root first: a name another mount just made is B's a moment
	# later, at once after a fsync; then t, which B now follows.
	fsyncdir "$B" "$B/t"
	watch_start "$BATS_TEST_TMPDIR/t.ev" "$B/t"
	watch_start "$BATS_TEST_TMPDIR/p.ev" "$B/t/p"
	mkdir "$A/t/q"
	echo hello >"$A/t/p/c"
	wait_line "$BATS_TEST_TMPDIR/t.ev" "CREATE,ISDIR q"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "CREATE c"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "CLOSE_WRITE,CLOSE c"
	# The event comes once the content is there to read.
	run cat "$B/t/p/c"
	assert_output hello
	echo again >"$A/t/p/c"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "MODIFY c"
	[ "$(grep -c '^CLOSE_WRITE,CLOSE c$' "$BATS_TEST_TMPDIR/p.ev")" -ge 1 ]
	rm "$A/t/p/c"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "DELETE c"
	rmdir "$A/t/q"
	wait_line "$BATS_TEST_TMPDIR/t.ev" "DELETE,ISDIR q"
	# In that order: the parent's CREATE before the child's DELETE's
	# directory went, the child's CREATE before its DELETE.
	run grep -n -e '^CREATE c$' -e '^DELETE c$' "$BATS_TEST_TMPDIR/p.ev"
	assert_line --index 0 --partial "CREATE c"
	assert_line --index 1 --partial "DELETE c"
}

@test "inotify on one mount sees another mount's link, rename and exchange as on the mount that made them" {
	mount2
	mkdir "$A/t" "$A/t/p" "$A/t/q"
	echo one >"$A/t/p/a"
	echo two >"$A/t/q/b"
	fsyncdir "$B" "$B/t"
	ls "$B/t/p" "$B/t/q" >/dev/null
	watch_start "$BATS_TEST_TMPDIR/ev" "$B/t" -r
	ln "$A/t/p/a" "$A/t/p/l"
	wait_line "$BATS_TEST_TMPDIR/ev" "CREATE l"
	mv "$A/t/p/l" "$A/t/q/m"
	wait_line "$BATS_TEST_TMPDIR/ev" "MOVED_FROM l"
	wait_line "$BATS_TEST_TMPDIR/ev" "MOVED_TO m"
	python3 - "$A/t/p/a" "$A/t/q/b" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    raise OSError(ctypes.get_errno(), "renameat2")
EOF
	wait_line "$BATS_TEST_TMPDIR/ev" "MOVED_FROM a"
	wait_line "$BATS_TEST_TMPDIR/ev" "MOVED_TO b"
	fsyncdir "$B/t"
	# B shows what A shows: the kernel's view moved with the events.
	run cat "$B/t/p/a" "$B/t/q/b" "$B/t/q/m"
	assert_output "$(printf 'two\none\none')"
	[ "$(stat -c %i "$B/t/q/m")" = "$(stat -c %i "$A/t/q/m")" ]
	[ "$(stat -c %i "$B/t/q/b")" = "$(stat -c %i "$A/t/q/b")" ]
	[ "$(stat -c %h "$B/t/q/m")" = 2 ]
}

@test "inotify on one mount sees another mount's chmod, chown and lease as ATTRIB, and the new attributes" {
	mount2
	mkdir "$A/t" "$A/t/p"
	echo x >"$A/t/p/c"
	fsyncdir "$B" "$B/t"
	stat "$B/t/p/c" >/dev/null
	watch_start "$BATS_TEST_TMPDIR/t.ev" "$B/t"
	watch_start "$BATS_TEST_TMPDIR/p.ev" "$B/t/p"
	chmod 600 "$A/t/p/c"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "ATTRIB c"
	run stat -c %a "$B/t/p/c"
	assert_output 600
	chown 1234:1234 "$A/t/p/c"
	setfattr -n user.statefs.ttl -v 60 "$A/t/p/c"
	chmod 700 "$A/t/p"
	wait_line "$BATS_TEST_TMPDIR/t.ev" "ATTRIB,ISDIR p"
	fsyncdir "$B/t"
	run stat -c '%a %u %g' "$B/t/p/c"
	assert_output "600 1234 1234"
	run stat -c %a "$B/t/p"
	assert_output 700
	[ "$(grep -c '^ATTRIB c$' "$BATS_TEST_TMPDIR/p.ev")" -ge 2 ]
	[ -n "$(ttl "$B/t/p/c")" ]
	# No transition came of them: A made three attribute changes and
	# a lease, B none.
	[ "$(ver "$B/t/p/c")" = 1 ]
}

@test "an echo changes nothing: both mounts keep one tree, one .events and the same counters" {
	mount2
	mkdir "$A/t" "$A/t/p"
	fsyncdir "$B" "$B/t"
	exec 7<"$A/t/.events" 8<"$B/t/.events"
	watch_start "$BATS_TEST_TMPDIR/ev" "$B/t" -r
	for i in 1 2 3 4 5; do
		echo "v$i" >"$A/t/p/c$i"
	done
	ln "$A/t/p/c1" "$A/t/p/l1"
	mv "$A/t/p/c2" "$A/t/p/m2"
	rm "$A/t/p/c3"
	echo more >>"$A/t/p/c4"
	wait_line "$BATS_TEST_TMPDIR/ev" "DELETE c3"
	wait_line "$BATS_TEST_TMPDIR/ev" "MODIFY c4"
	fsyncdir "$A/t"
	fsyncdir "$B/t"
	run ls "$B/t/p"
	assert_output "$(ls "$A/t/p")"
	for f in c1 l1 m2 c4 c5; do
		[ "$(cat "$B/t/p/$f")" = "$(cat "$A/t/p/$f")" ]
		[ "$(stat -c '%s %i %h' "$B/t/p/$f")" = "$(stat -c '%s %i %h' "$A/t/p/$f")" ]
		[ "$(ver "$B/t/p/$f")" = "$(ver "$A/t/p/$f")" ]
	done
	for k in children links bytes admissions removals; do
		[ "$(stat_of "$k" "$B")" = "$(stat_of "$k" "$A")" ]
	done
	# B's reader got the lines A's did, and no more: the echo's own
	# requests are never transitions.  5 creates and 5 writes, a link,
	# a rename, an unlink, a write.
	timeout 2 cat <&7 >"$BATS_TEST_TMPDIR/a.lines" || true
	timeout 2 cat <&8 >"$BATS_TEST_TMPDIR/b.lines" || true
	exec 7<&- 8<&-
	[ "$(wc -l <"$BATS_TEST_TMPDIR/a.lines")" -eq 14 ]
	diff "$BATS_TEST_TMPDIR/a.lines" "$BATS_TEST_TMPDIR/b.lines"
}

# The daemon of mount MNT of this test.
daemon_of() {
	local e
	for e in "${STATEFS_MOUNTS[@]}"; do
		[ "$(echo "$e" | cut -d' ' -f2)" = "$1" ] && echo "${e%% *}" && return 0
	done
	return 1
}

@test "a mount that reloads a tenant (its log trimmed while the mount was stopped) raises the gap's changes for inotify, and its handles of nodes that live on still work" {
	local pid tid
	mount2
	mkdir -p "$A/t/p" "$A/t/q"
	echo one >"$A/t/p/keep"
	echo old >"$A/t/p/rw"
	echo x >"$A/t/p/gone"
	echo m >"$A/t/p/mv"
	echo a >"$A/t/p/attr"
	fsyncdir "$B" "$B/t" "$B/t/p"
	ls -l "$B/t/p" >/dev/null
	exec 5<"$B/t/p/keep" 6<"$B/t/p/gone" 7<"$B/t/p"
	# A .events reader of B's, in a process of its own: closing it
	# waits for the daemon, which must not be stopped then.
	python3 -c 'import os, select, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
out = open(sys.argv[2], "wb")
open(sys.argv[2] + ".ready", "w").close()
end = time.time() + 60
while time.time() < end:
    if select.select([fd], [], [], 0.2)[0]:
        try:
            out.write(os.read(fd, 65536))
            out.flush()
        except BlockingIOError:
            pass' "$B/t/.events" "$BATS_TEST_TMPDIR/ev.lines" 3>&- 5<&- 6<&- 7<&- &
	BG_PIDS+=($!)
	until [ -e "$BATS_TEST_TMPDIR/ev.lines.ready" ]; do sleep 0.05; done
	watch_start "$BATS_TEST_TMPDIR/t.ev" "$B/t"
	watch_start "$BATS_TEST_TMPDIR/p.ev" "$B/t/p"
	pid=$(daemon_of "$B")
	kill -STOP "$pid"
	STOPPED_PID=$pid
	# The gap.  B may still apply the first change: the reply to the
	# read it was blocked in when it stopped.
	mkdir "$A/t/first"
	echo new >"$A/t/p/rw"
	rm "$A/t/p/gone"
	echo fresh >"$A/t/p/fresh"
	mv "$A/t/p/mv" "$A/t/p/moved"
	chmod 600 "$A/t/p/attr"
	rmdir "$A/t/q"
	# Its entries leave the log: B must reload the tenant.
	tid=$(rcli HGET 'statefs:{statefs}:tenants' t)
	[ -n "$tid" ]
	run rcli XTRIM "statefs:{statefs.t$tid}:log" MAXLEN 0
	assert_success
	kill -CONT "$pid"
	STOPPED_PID=
	fsyncdir "$B/t"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "DELETE gone" 10
	wait_line "$BATS_TEST_TMPDIR/p.ev" "MODIFY rw"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "CLOSE_WRITE,CLOSE rw"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "CREATE fresh"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "MOVED_FROM mv"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "MOVED_TO moved"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "ATTRIB attr"
	wait_line "$BATS_TEST_TMPDIR/t.ev" "DELETE,ISDIR q"
	# Nothing for the child no one changed.
	run grep -E '^(CREATE|DELETE|MODIFY|CLOSE_WRITE|ATTRIB|MOVED)[A-Z_,]* keep$' \
		"$BATS_TEST_TMPDIR/p.ev"
	assert_failure
	# B shows A's tree.
	run ls "$B/t/p"
	assert_output "$(ls "$A/t/p")"
	run cat "$B/t/p/rw" "$B/t/p/fresh" "$B/t/p/moved"
	assert_output "$(printf 'new\nfresh\nm')"
	# A descriptor of an unchanged child still reads; one of a removed
	# child gets ESTALE; a working directory still finds its children,
	# the new one too.
	run py_errno 'assert os.pread(5, 10, 0) == b"one\n"'
	assert_output OK
	run py_errno 'os.pread(6, 10, 0)'
	assert_output ESTALE
	run py_errno 'os.stat("fresh", dir_fd=7); os.stat("moved", dir_fd=7)'
	assert_output OK
	# .events readers: the lines of the gap are not known, one overflow.
	sleep 1
	run grep -v -x -E '[0-9]+	join	t	first	-	1	-' "$BATS_TEST_TMPDIR/ev.lines"
	assert_output overflow
	exec 5<&- 6<&- 7<&-
	# And B follows the log from there on.
	echo later >"$A/t/p/keep"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "MODIFY keep"
}

@test "started in the background as mount(8) starts it, a mount follows the shared store" {
	local dir
	dir=$(mktemp -d "${TMPDIR:-/tmp}/statefs-bats.XXXXXX")
	mkdir "$dir/mnt"
	statefs_mount -o "store=unix:$REDIS_SOCK"
	A=$MNT
	BGMNT="$dir/mnt"
	# No -f: the command returns once the mount is live.
	run "$STATEFS_BIN" "unix:$REDIS_SOCK" "$BGMNT"
	assert_success
	grep -q " $dir/mnt fuse" /proc/mounts
	mkdir "$BGMNT/t" "$BGMNT/t/p"
	echo hi >"$BGMNT/t/p/c"
	fsyncdir "$A"
	run cat "$A/t/p/c"
	assert_output hi
	echo there >"$A/t/p/d"
	fsyncdir "$BGMNT"
	run cat "$BGMNT/t/p/d"
	assert_output there
}

@test "a background start that cannot reach its store says so and exits 1, mounting nothing" {
	local dir
	dir=$(mktemp -d "${TMPDIR:-/tmp}/statefs-bats.XXXXXX")
	mkdir "$dir/mnt"
	run "$STATEFS_BIN" -o store_timeout=1 "unix:$dir/no.sock" "$dir/mnt"
	assert_failure 1
	assert_output --partial "statefs:"
	! grep -q " $dir/mnt fuse" /proc/mounts
}

# unmount_at_once ROUND MNT PID EVENTS: one fusermount3 -u of MNT must
# succeed, and the daemon PID must exit within 10 s; EVENTS is the
# watcher's output, counted in the message when it does not.
unmount_at_once() {
	local round=$1 mnt=$2 pid=$3 ev=$4 i
	run fusermount3 -u "$mnt"
	if [ "$status" -ne 0 ]; then
		echo "round $round: $output ($(wc -l <"$ev") events seen)" >&2
		return 1
	fi
	for i in $(seq 200); do
		proc_alive "$pid" || break
		sleep 0.05
	done
	if proc_alive "$pid"; then
		echo "round $round: the daemon of $mnt still runs 10 s after its unmount" >&2
		return 1
	fi
}

# burst_then_unmount ROUND: a burst of N (300) of A's changes echoed
# through B, whose parent an inotifywait watches; B unmounted by
# fusermount3 -u while the echo replays them: it must succeed at the
# first try, and B's daemon must exit.
burst_then_unmount() {
	local round=$1 pid ev=$BATS_TEST_TMPDIR/ev.$1
	mount2
	pid=$STATEFS_PID
	mkdir -p "$A/t/p"
	# B's root first: B may not know t yet, and "$B/t" is looked up
	# before its fsync catches up.
	fsyncdir "$B" "$B/t"
	watch_start "$ev" "$B/t/p"
	python3 - "$A/t/p" <<'PY'
import os, sys
for i in range(300):
    os.close(os.open(os.path.join(sys.argv[1], "c%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
PY
	# The echo is under way on B.
	wait_line "$ev" "CREATE c0" 10
	unmount_at_once "$round" "$B" "$pid" "$ev" || return 1
	bg_stop || true
	statefs_unmount
	# A new round on a store of its own.
	redis_stop_all
	redis_start
}

@test "fusermount3 -u of a mount right after a burst of another mount's changes succeeds at once, with inotifywait on it, and its daemon exits" {
	local round
	for round in 1 2 3 4 5 6; do
		burst_then_unmount "$round"
	done
}

@test "on the embedded store, fusermount3 -u right after a burst of expiries succeeds at once, with inotifywait on the mount, and the daemon exits" {
	local round pid ev
	for round in 1 2 3; do
		ev=$BATS_TEST_TMPDIR/exp.$round
		statefs_mount -o testclock
		pid=$STATEFS_PID
		mkdir -p "$MNT/t/p"
		setfattr -n user.statefs.child_ttl -v 1 "$MNT/t/p"
		python3 - "$MNT/t/p" <<'PY'
import os, sys
for i in range(2000):
    os.close(os.open(os.path.join(sys.argv[1], "c%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
PY
		watch_start "$ev" "$MNT/t/p" -e delete
		echo 1000 >"$MNT/.clock"
		# The store removed them; the echo replays the removals.
		wait_line "$ev" "DELETE c0" 10
		unmount_at_once "$round" "$MNT" "$pid" "$ev" || return 1
		bg_stop || true
		statefs_unmount
	done
}
