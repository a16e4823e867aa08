#!/usr/bin/env bats
# docs/shared-store.md, "What a mount follows": a mount of a shared store
# follows the logs of the tenants it uses and stops following one it has
# not used for -o follow_idle once the kernel holds nothing of it; the
# root listing and .stats stay complete, a tenant not followed is loaded
# again when used (with what other mounts changed meanwhile, under the
# same inode numbers), and an inotify watch keeps its tenant followed.
# A tenant not followed shows the link count a followed one does (also
# with parents another mount added, and after it was unloaded), and its
# first use while Redis is stopped is EIO, tried again at the next use.
# Each test starts its own redis-server and two mounts: A changes, B is
# the mount under test.  What B reads from Redis is seen with MONITOR:
# B connects over TCP to 127.0.0.1:$PORT, A over the unix socket, so
# B's commands are the MONITOR lines naming 127.0.0.1.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

STOPPED=() # redis-servers this test stopped with SIGSTOP

setup() {
	PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	redis_start --port "$PORT" --bind 127.0.0.1
}

teardown() {
	local rc=0
	local pid
	for pid in "${STOPPED[@]}"; do
		kill -CONT "$pid" 2>/dev/null
	done
	STOPPED=()
	bg_stop
	exec 5<&- 6<&- 7<&-
	statefs_unmount || rc=1
	redis_stop_all
	return "$rc"
}

# monitor SECS OUT: the commands Redis runs for SECS seconds, into OUT.
monitor() {
	timeout "$1" redis-cli -s "$REDIS_SOCK" MONITOR >"$2" 2>/dev/null || true
}

# monitor_start SECS OUT: monitor in the background (its pid in mon, for
# `wait "$mon"`), once it had a moment to connect.
monitor_start() {
	monitor "$1" "$2" &
	mon=$!
	sleep 0.3
}

# A and B: A follows every tenant (follow_idle=0), B forgets one after
# IDLE seconds.  Tenants t1..tN, each with a parent p.
mounts() {
	local idle=$1 n=$2 i
	statefs_mount -o "store=unix:$REDIS_SOCK,follow_idle=0"
	A=$MNT
	for i in $(seq "$n"); do
		mkdir "$A/t$i" "$A/t$i/p"
	done
	statefs_mount -o "store=redis://127.0.0.1:$PORT,follow_idle=$idle"
	B=$MNT
}

# links MNT: each tenant's name and link count, as find shows them.
links() {
	find "$1" -mindepth 1 -maxdepth 1 -name '.*' -prune -o -printf '%f %n\n' | sort
}

# unfollowed MNT TENANT: wait until mount MNT's reads leave TENANT's
# log (it was idle past follow_idle: a shell now).
unfollowed() {
	local _
	for _ in $(seq 15); do
		monitor 1.2 "$BATS_TEST_TMPDIR/mon"
		if b_reads "$BATS_TEST_TMPDIR/mon" | grep -q '"XRANGE"' &&
			! b_reads "$BATS_TEST_TMPDIR/mon" | grep -q "statefs\.$2}:log"; then
			return 0
		fi
	done
	fail "$1 still follows $2"
}

# B's reads of the logs in OUT (its commands come over TCP).
b_reads() {
	grep '127\.0\.0\.1:' "$1" | grep '"XRANGE"' || true
}

# A's reads of the logs in OUT (its commands come over the unix socket).
a_reads() {
	grep ' unix:' "$1" | grep '"XRANGE"' || true
}

# a_calls OUT FN: how many calls of library function FN A made in OUT.
a_calls() {
	grep ' unix:' "$1" | grep -c "\"FCALL\" \"$2\"" || true
}

@test "a mount that used one tenant of many reads only that tenant's log" {
	mounts 30 6
	run ls "$B/t4/p"
	assert_success
	# A busy tenant B never used: its entries never wake B.
	monitor_start 3 "$BATS_TEST_TMPDIR/mon"
	for i in $(seq 40); do : >"$A/t1/p/c$i"; rm "$A/t1/p/c$i"; done
	wait "$mon"
	run b_reads "$BATS_TEST_TMPDIR/mon"
	# B's follower reads the root log and t4's, nothing else.
	[ -n "$output" ]
	b_reads "$BATS_TEST_TMPDIR/mon" | grep -q 'statefs:{statefs}:log'
	b_reads "$BATS_TEST_TMPDIR/mon" | grep -q 'statefs:{statefs\.t4}:log'
	while read -r line; do
		[[ "$line" == *'statefs:{statefs}:log'* ||
			"$line" == *'statefs:{statefs.t4}:log'* ]]
	done < <(b_reads "$BATS_TEST_TMPDIR/mon")
	# A's transitions of t1 were many (A applies its own from their
	# outcomes, without reading the log); B's reads were not (two logs
	# about once a second).
	a=$(a_calls "$BATS_TEST_TMPDIR/mon" sfs_unlink)
	b=$(b_reads "$BATS_TEST_TMPDIR/mon" | wc -l)
	[ "$a" -ge 20 ]
	[ "$b" -le 10 ]
	# Nor does B load the others: no dump of them.
	run grep -c '"sfs_dump" "2" "statefs:{statefs}:meta" "statefs:{statefs.t[12356]}:t"' "$BATS_TEST_TMPDIR/mon"
	assert_output 0
}

@test "the follower's traffic is SSUBSCRIBE and XRANGE, never XREAD; an idle mount sends nothing per transition of a tenant it does not follow" {
	monitor_start 4 "$BATS_TEST_TMPDIR/mon0"
	mounts 30 3
	run ls "$B/t2/p"
	assert_success
	wait "$mon"
	run grep -c '"XREAD"' "$BATS_TEST_TMPDIR/mon0"
	assert_output 0
	# B subscribed the root's channel and t2's, one command each.
	grep '127\.0\.0\.1:' "$BATS_TEST_TMPDIR/mon0" | grep -q '"SSUBSCRIBE" "statefs:{statefs}:news"'
	grep '127\.0\.0\.1:' "$BATS_TEST_TMPDIR/mon0" | grep -q '"SSUBSCRIBE" "statefs:{statefs\.t2}:news"'
	# B idle for 3 s, then 3 s while A makes 100 transitions of t1: B
	# sends about as much (its reads every second), not more.
	monitor 3 "$BATS_TEST_TMPDIR/idle"
	monitor_start 3 "$BATS_TEST_TMPDIR/busy"
	for i in $(seq 50); do : >"$A/t1/p/c$i"; rm "$A/t1/p/c$i"; done
	wait "$mon"
	idle=$(grep -c '127\.0\.0\.1:' "$BATS_TEST_TMPDIR/idle" || true)
	busy=$(grep -c '127\.0\.0\.1:' "$BATS_TEST_TMPDIR/busy" || true)
	[ "$(a_calls "$BATS_TEST_TMPDIR/busy" sfs_unlink)" -ge 20 ]
	[ "$busy" -le $((idle + 6)) ]
	run grep -c '"XREAD"' "$BATS_TEST_TMPDIR/busy"
	assert_output 0
	# B's channel for t1 has no subscriber but A.
	[ "$(rcli PUBSUB SHARDNUMSUB 'statefs:{statefs.t1}:news' | tail -1)" = 1 ]
	[ "$(rcli PUBSUB SHARDNUMSUB 'statefs:{statefs.t2}:news' | tail -1)" = 2 ]
}

@test "the root listing and .stats are complete on a mount that follows no tenant" {
	mounts 30 5
	run ls "$B"
	assert_output "$(printf 't1\nt2\nt3\nt4\nt5')"
	[ "$(stat_of tenants "$B")" = 5 ]
	[ "$(stat_of parents "$B")" = 5 ]
	# A tenant made afterwards by another mount is listed too, and one
	# removed is not.
	mkdir "$A/t9"
	rmdir "$A/t5/p" "$A/t5"
	for _ in $(seq 100); do
		[ "$(ls "$B" | tr '\n' ' ')" = "t1 t2 t3 t4 t9 " ] && break
		sleep 0.05
	done
	run ls "$B"
	assert_output "$(printf 't1\nt2\nt3\nt4\nt9')"
	[ "$(stat_of tenants "$B")" = 5 ]
	[ "$(stat_of parents "$B")" = 4 ]
}

@test "an idle tenant stops being followed and is loaded again, as it is now, when used" {
	mounts 1 3
	echo one >"$A/t2/p/c"
	run cat "$B/t2/p/c"
	assert_output one
	ino_p=$(stat -c %i "$B/t2/p")
	ino_c=$(stat -c %i "$B/t2/p/c")
	# Idle for 1 s, the kernel told to forget it: B's reads leave t2.
	gone=
	for _ in $(seq 15); do
		monitor 1.2 "$BATS_TEST_TMPDIR/mon"
		if b_reads "$BATS_TEST_TMPDIR/mon" | grep -q '"XRANGE"' &&
			! b_reads "$BATS_TEST_TMPDIR/mon" | grep -q 'statefs\.t2}:log'; then
			gone=1
			break
		fi
	done
	[ -n "$gone" ]
	# Changed meanwhile by A: B sees it as it is now, under the same
	# inode numbers.
	echo two >"$A/t2/p/c"
	echo new >"$A/t2/p/d"
	mkdir "$A/t2/q"
	run cat "$B/t2/p/c"
	assert_output two
	run cat "$B/t2/p/d"
	assert_output new
	run ls "$B/t2"
	assert_output "$(printf 'p\nq')"
	[ "$(stat -c %i "$B/t2/p")" = "$ino_p" ]
	[ "$(stat -c %i "$B/t2/p/c")" = "$ino_c" ]
	# Followed again: A's next change reaches B without a new load.
	echo three >"$A/t2/p/c"
	fsyncdir "$B/t2"
	run cat "$B/t2/p/c"
	assert_output three
}

@test "an inotify watch keeps its tenant followed past follow_idle" {
	mounts 1 2
	fsyncdir "$B/t2/p"
	watch_start "$BATS_TEST_TMPDIR/p.ev" "$B/t2/p"
	# Past follow_idle, several passes of the follower.
	sleep 3
	monitor 1.5 "$BATS_TEST_TMPDIR/mon"
	b_reads "$BATS_TEST_TMPDIR/mon" | grep -q 'statefs\.t2}:log'
	echo hello >"$A/t2/p/c"
	wait_line "$BATS_TEST_TMPDIR/p.ev" "CREATE c"
	run cat "$B/t2/p/c"
	assert_output hello
}

@test "a cwd keeps its tenant followed; follow_idle=0 follows every tenant" {
	mounts 1 2
	cd "$B/t2/p"
	sleep 3
	monitor 1.5 "$BATS_TEST_TMPDIR/mon"
	b_reads "$BATS_TEST_TMPDIR/mon" | grep -q 'statefs\.t2}:log'
	echo x >"$A/t2/p/c"
	fsyncdir .
	run cat c
	assert_output x
	cd /
	# A follows both without having used t2 since its start.
	a_reads "$BATS_TEST_TMPDIR/mon" | grep -q 'statefs\.t1}:log'
	a_reads "$BATS_TEST_TMPDIR/mon" | grep -q 'statefs\.t2}:log'
}

@test "follow_idle takes seconds" {
	run "$STATEFS_BIN" -o "store=unix:$REDIS_SOCK,follow_idle=soon" "$BATS_TEST_TMPDIR"
	assert_failure
	assert_output --partial follow_idle
}

@test "a tenant not followed has the link count of a followed one: at start, after parents another mount added, loaded, unloaded" {
	mounts 1 3
	mkdir "$A/t2/q" "$A/t3/q" "$A/t3/r"
	fsyncdir "$B"
	# B follows none of them: their link counts are the store's.
	assert_equal "$(links "$B")" "$(links "$A")"
	[ "$(stat -c %h "$B/t3")" = 5 ]
	# Parents added and removed by A while B does not follow t2: B's
	# count after an fsync is the store's, and t2 is still not read.
	mkdir "$A/t2/r" "$A/t2/s"
	rmdir "$A/t2/p"
	fsyncdir "$B"
	[ "$(stat -c %h "$B/t2")" = 5 ]
	assert_equal "$(links "$B")" "$(links "$A")"
	monitor 1.2 "$BATS_TEST_TMPDIR/mon"
	b_reads "$BATS_TEST_TMPDIR/mon" >"$BATS_TEST_TMPDIR/b"
	grep -q '"XRANGE"' "$BATS_TEST_TMPDIR/b"
	run grep -c 'statefs\.t2}:log' "$BATS_TEST_TMPDIR/b"
	assert_output 0
	# And without an fsync, a moment later (the root listed).
	mkdir "$A/t2/u"
	for _ in $(seq 100); do
		[ "$(links "$B")" = "$(links "$A")" ] && break
		sleep 0.05
	done
	assert_equal "$(links "$B")" "$(links "$A")"
	# Used (loaded), then idle again (unloaded): the same count.
	run ls "$B/t2"
	assert_output "$(printf 'q\nr\ns\nu')"
	[ "$(stat -c %h "$B/t2")" = 6 ]
	unfollowed "$B" t2
	assert_equal "$(links "$B")" "$(links "$A")"
	rmdir "$A/t2/u"
	fsyncdir "$B"
	[ "$(stat -c %h "$B/t2")" = 5 ]
	# A mount made now shows the same counts.
	statefs_mount -o "store=unix:$REDIS_SOCK"
	assert_equal "$(links "$MNT")" "$(links "$A")"
}

@test "the first use of a tenant not followed while Redis is stopped is EIO, keeps it a shell, and succeeds once Redis is back" {
	statefs_mount -o "store=unix:$REDIS_SOCK,follow_idle=0"
	A=$MNT
	mkdir "$A/t1" "$A/t1/p"
	echo kept >"$A/t1/p/c"
	# B with the default follow_idle: t1 is a shell.
	statefs_mount -o "store=unix:$REDIS_SOCK,store_timeout=1"
	B=$MNT
	run ls "$B"
	assert_output t1
	pid=${REDIS_PIDS[0]}
	kill -STOP "$pid"
	STOPPED+=("$pid")
	# The load cannot reach Redis: EIO, as a call of a followed tenant.
	run timeout 20 python3 -c 'import os, sys
try:
    os.listdir(sys.argv[1]); print("OK")
except OSError as e:
    print(__import__("errno").errorcode[e.errno])' "$B/t1"
	assert_output EIO
	run py_errno 'open(sys.argv[1]).read()' "$B/t1/p/c"
	assert_output EIO
	kill -CONT "$pid"
	STOPPED=()
	# Tried again at the next use.
	run cat "$B/t1/p/c"
	assert_output kept
	run ls "$B/t1"
	assert_output p
	echo new >"$A/t1/p/c"
	fsyncdir "$B/t1"
	run cat "$B/t1/p/c"
	assert_output new
}

# root_from MNT N OUT: copy MNT/.events from number N into OUT in the
# background, for 20 s at most.
root_from() {
	timeout 20 dd if="$1/.events" iflag=skip_bytes skip="$2" bs=64K \
		status=none >"$3" 2>/dev/null 3>&- &
	BG_PIDS+=($!)
}

@test "a root reader started at a number gets every line since, also those of a tenant the mount stopped following meanwhile" {
	mounts 1 3
	# B keeps t2 (a cwd in it); t1 and t3 it uses only through its
	# root snapshot.
	(cd "$B/t2/p" && exec sleep 60) 3>&- &
	BG_PIDS+=($!)
	local n
	n=$(awk -F'\t' '$1 == "seq" { print $2 }' "$B/.snapshot")
	# The tenant layout (STATEFS_STORE_LAYOUT=tenant) has no order of
	# all tenants to start a root reader at: its seq row says -.
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		[ "$n" = - ]
		return 0
	fi
	[[ $n =~ ^[0-9]+$ ]]
	unfollowed "$B" t3
	# Lines of a tenant B followed throughout and of one it did not.
	echo 1 >"$A/t2/p/c1"
	echo 2 >"$A/t3/p/c2"
	echo 3 >"$A/t2/p/c3"
	mkdir "$A/t2/end"
	root_from "$A" $((n + 1)) "$BATS_TEST_TMPDIR/a"
	root_from "$B" $((n + 1)) "$BATS_TEST_TMPDIR/b"
	local i
	for i in $(seq 200); do
		grep -q $'\tjoin\tt2\tend\t' "$BATS_TEST_TMPDIR/a" 2>/dev/null &&
			grep -q $'\tjoin\tt2\tend\t' "$BATS_TEST_TMPDIR/b" 2>/dev/null && break
		sleep 0.05
	done
	grep -q $'\tt3\tp\tc2\t' "$BATS_TEST_TMPDIR/b"
	run diff "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
	assert_success
}

@test "a subscribed link killed: the follower subscribes again, and every change reaches it" {
	mounts 30 2
	run ls "$B/t2/p"
	assert_success
	[ "$(rcli PUBSUB SHARDNUMSUB 'statefs:{statefs.t2}:news' | tail -1)" = 2 ]
	# Every subscribed connection of both mounts ends.
	rcli CLIENT KILL TYPE pubsub >/dev/null
	echo one >"$A/t2/p/c"
	for _ in $(seq 100); do
		[ "$(cat "$B/t2/p/c" 2>/dev/null)" = one ] && break
		sleep 0.05
	done
	run cat "$B/t2/p/c"
	assert_output one
	for _ in $(seq 100); do
		[ "$(rcli PUBSUB SHARDNUMSUB 'statefs:{statefs.t2}:news' | tail -1)" = 2 ] && break
		sleep 0.05
	done
	[ "$(rcli PUBSUB SHARDNUMSUB 'statefs:{statefs.t2}:news' | tail -1)" = 2 ]
	# Subscribed again: a change is news at once, not after a second.
	for i in $(seq 5); do
		echo "v$i" >"$A/t2/p/c"
	done
	fsyncdir "$B/t2"
	run cat "$B/t2/p/c"
	assert_output v5
}

@test "follow_gather: a mount that watches a tenant another mount keeps busy reads it once for many changes, and misses none" {
	statefs_mount -o "store=unix:$REDIS_SOCK,follow_idle=0"
	A=$MNT
	mkdir "$A/t1" "$A/t1/p"
	statefs_mount -o "store=redis://127.0.0.1:$PORT,follow_gather=0.2"
	B=$MNT
	watch_start "$BATS_TEST_TMPDIR/ev" "$B/t1/p" -e create
	monitor_start 4 "$BATS_TEST_TMPDIR/mon"
	# 200 creates with content: 400 transitions of A, within a second
	# or two; B reads at most every 0.2 s (and every second whatever).
	python3 - "$A/t1/p" <<'PY'
import os, sys
for i in range(200):
    with open(os.path.join(sys.argv[1], "c%d" % i), "w") as f:
        f.write("x")
PY
	wait "$mon"
	n=$(b_reads "$BATS_TEST_TMPDIR/mon" | grep -c 'statefs\.t1}:log' || true)
	echo "B read t1's log $n times" >&3
	[ "$n" -ge 1 ]
	[ "$n" -lt 60 ]
	fsyncdir "$B"
	[ "$(find "$B/t1/p" -type f | wc -l)" = 200 ]
	run cat "$B/t1/p/c199"
	assert_output x
	for _ in $(seq 100); do
		[ "$(grep -c '^CREATE ' "$BATS_TEST_TMPDIR/ev")" = 200 ] && break
		sleep 0.1
	done
	assert_equal "$(grep -c '^CREATE ' "$BATS_TEST_TMPDIR/ev")" 200
}

@test "follow_gather takes seconds, at most 1: another value is a one-line refusal" {
	for v in 1.5 abc -1 0.0001; do
		run timeout 20 "$STATEFS_BIN" -f -o "store=unix:$REDIS_SOCK,follow_gather=$v" "$BATS_TEST_TMPDIR"
		assert_failure
		assert_output --partial follow_gather
		assert_equal "${#lines[@]}" 1
	done
}

@test "a mount that follows more logs than one read's pipeline takes (40 tenants) asks its links which grew, and sees every change" {
	mounts 0 40
	run ls "$B/t40/p"
	assert_success
	monitor_start 3 "$BATS_TEST_TMPDIR/mon"
	for i in 1 20 40; do echo "v$i" >"$A/t$i/p/c"; done
	wait "$mon"
	# The barrier: a PING on B's subscribed link after each gseq read,
	# then only the logs that grew; a log that did not is read with
	# every log once a second (BLOCK_MS), not at each of the six
	# transitions' rounds.
	grep '127\.0\.0\.1:' "$BATS_TEST_TMPDIR/mon" | grep -q '"PING"'
	n=$(b_reads "$BATS_TEST_TMPDIR/mon" | grep -c 'statefs\.t7}:log' || true)
	[ "$n" -le 5 ]
	for i in 1 20 40; do
		run cat "$B/t$i/p/c"
		assert_output "v$i"
	done
}

@test "a mount applies its own changes from their outcomes: it does not read its tenant's log for them, and another mount's changes between still reach it" {
	mounts 0 1
	run ls "$B/t1/p"
	assert_success
	monitor_start 4 "$BATS_TEST_TMPDIR/mon"
	# 100 creates with content, 50 renames and 50 unlinks of B's: 300
	# transitions, each answered from its own outcome.
	python3 - "$B/t1/p" <<'PY'
import os, sys
d = sys.argv[1]
for i in range(100):
    with open(os.path.join(d, "c%d" % i), "w") as f:
        f.write("v%d" % i)
for i in range(50):
    os.rename(os.path.join(d, "c%d" % i), os.path.join(d, "r%d" % i))
for i in range(50, 100):
    os.unlink(os.path.join(d, "c%d" % i))
PY
	wait "$mon"
	n=$(b_reads "$BATS_TEST_TMPDIR/mon" | grep -c 'statefs\.t1}:log' || true)
	echo "B read t1's log $n times for 300 of its own transitions" >&3
	# The follower's reads once a second (BLOCK_MS) are left.
	[ "$n" -lt 20 ]
	run ls "$B/t1/p"
	assert_output "$(printf 'r%d\n' $(seq 0 49) | sort)"
	run cat "$B/t1/p/r7"
	assert_output v7
	fsyncdir "$A"
	run ls "$A/t1/p"
	assert_output "$(printf 'r%d\n' $(seq 0 49) | sort)"
	# Both mounts changing the tenant at once: a mount's own entry that is
	# not the next one is the follower's, and nothing is lost or doubled.
	python3 - "$B/t1/p" b <<'PY' &
import os, sys
d, w = sys.argv[1], sys.argv[2]
for i in range(150):
    with open(os.path.join(d, "%s%d" % (w, i)), "w") as f:
        f.write(w)
    if i % 3 == 0:
        os.unlink(os.path.join(d, "%s%d" % (w, i)))
PY
	pb=$!
	python3 - "$A/t1/p" a <<'PY'
import os, sys
d, w = sys.argv[1], sys.argv[2]
for i in range(150):
    with open(os.path.join(d, "%s%d" % (w, i)), "w") as f:
        f.write(w)
    if i % 3 == 0:
        os.unlink(os.path.join(d, "%s%d" % (w, i)))
PY
	wait "$pb"
	fsyncdir "$A"
	fsyncdir "$B"
	for m in "$A" "$B"; do
		assert_equal "$(find "$m/t1/p" -type f -name 'a*' | wc -l)" 100
		assert_equal "$(find "$m/t1/p" -type f -name 'b*' | wc -l)" 100
		assert_equal "$(cat "$m/t1/p/a149" "$m/t1/p/b149")" ab
	done
	[ ! -e "$B/t1/p/a0" ]
	[ ! -e "$A/t1/p/b147" ]
}

@test "another mount's small changes reach a mount in their news, without a read of the log; large ones are read, and none is missed" {
	statefs_mount -o "store=unix:$REDIS_SOCK,follow_idle=0"
	A=$MNT
	mkdir "$A/t1" "$A/t1/p"
	statefs_mount -o "store=redis://127.0.0.1:$PORT"
	B=$MNT
	run ls "$B/t1/p"
	assert_success
	watch_start "$BATS_TEST_TMPDIR/ev" "$B/t1/p" -e create -e delete
	# B subscribed: the news of A's changes reaches two followers now.
	echo first >"$A/t1/p/c"
	monitor_start 4 "$BATS_TEST_TMPDIR/mon"
	python3 - "$A/t1/p" <<'PY'
import os, sys
d = sys.argv[1]
for i in range(100):
    with open(os.path.join(d, "n%d" % i), "w") as f:
        f.write("v%d" % i)
for i in range(0, 100, 2):
    os.unlink(os.path.join(d, "n%d" % i))
with open(os.path.join(d, "big"), "w") as f:
    f.write("x" * 5000)
PY
	wait "$mon"
	n=$(b_reads "$BATS_TEST_TMPDIR/mon" | grep -c 'statefs\.t1}:log' || true)
	echo "B read t1's log $n times for 250 of A's transitions" >&3
	[ "$n" -lt 40 ]
	fsyncdir "$B"
	assert_equal "$(find "$B/t1/p" -name 'n*' | wc -l)" 50
	run cat "$B/t1/p/n99"
	assert_output v99
	assert_equal "$(wc -c <"$B/t1/p/big")" 5000
	assert_equal "$(ls -l --time-style=+ "$A/t1/p")" "$(ls -l --time-style=+ "$B/t1/p")"
	for _ in $(seq 100); do
		[ "$(grep -c '^CREATE n' "$BATS_TEST_TMPDIR/ev")" = 100 ] &&
			[ "$(grep -c '^DELETE n' "$BATS_TEST_TMPDIR/ev")" = 50 ] && break
		sleep 0.1
	done
	assert_equal "$(grep -c '^CREATE n' "$BATS_TEST_TMPDIR/ev")" 100
	assert_equal "$(grep -c '^DELETE n' "$BATS_TEST_TMPDIR/ev")" 50
}
