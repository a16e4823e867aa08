#!/usr/bin/env bats
# docs/shared-store.md, "Failure" and "Restart": a shared store under faults.
# Each test starts its own redis-server(s) (redis_helpers.bash) and mounts
# them with -o store=...: a mount killed with SIGKILL under load beside
# another; redis-server killed and restarted with its append-only file,
# and without persistence; redis-server stopped with SIGSTOP; a Sentinel
# failover; a tenant's log trimmed while a mount was behind.  What each
# checks is what a user sees: errno, the tree on every mount, .stats
# against a recount with find.
#
# Every command that meets a store that is down runs under `timeout`: a
# hang is a failure (status 124), never a stuck run.  Elapsed times are
# checked against a generous bound (store_timeout plus seconds), never as
# a timing.  The teardown continues every stopped process, stops the
# background writers, unmounts (detaching killed mounts) and stops every
# redis-server the test started, also when the test failed half way.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

STOPPED=() # pids this test stopped with SIGSTOP

setup() {
	STOP="$BATS_TEST_TMPDIR/stop"
}

teardown() {
	local rc=0
	local pid
	for pid in "${STOPPED[@]}"; do
		kill -CONT "$pid" 2>/dev/null
	done
	STOPPED=()
	touch "$STOP"
	dead_teardown || rc=1
	redis_stop_all
	return "$rc"
}

# mount_store NAME OPTS...: mount this test's store (STORE, an -o store=
# value) and set NAME to the mountpoint.
mount_store() {
	local name=$1
	shift
	statefs_mount -o "store=$STORE" "$@" || return 1
	printf -v "$name" '%s' "$MNT"
}

# redis_again DIR [ARGS...]: start a redis-server again in DIR, on the
# socket DIR/redis.sock a killed one had, as redis_start does (extra ARGS
# after its own; the descriptors tests keep for old handles are not
# passed on: they would keep a mount busy).  Sets REDIS_SOCK; the
# teardown stops it.
redis_again() {
	local dir=$1 pid i
	shift
	redis-server --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
		--port 0 --save '' --appendonly no --dir "$dir" \
		--logfile "$dir/redis.log" "$@" </dev/null >/dev/null 2>&1 \
		3>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	pid=$!
	REDIS_PIDS+=("$pid")
	REDIS_SOCK="$dir/redis.sock"
	for i in $(seq 400); do
		[ "$(redis-cli -s "$REDIS_SOCK" PING 2>/dev/null)" = PONG ] && return 0
		proc_alive "$pid" || break
		sleep 0.05
	done
	tail -n 20 "$dir/redis.log" >&2
	fail "redis-server did not come back in $dir"
}

# redis_kill9 PID: SIGKILL a redis-server of this test and reap it.
redis_kill9() {
	kill -KILL "$1"
	wait "$1" 2>/dev/null || true
}

# wait_store MNT STATE [SECS]: wait (default 20 s) until MNT's .stats says
# store STATE.
wait_store() {
	local i
	for i in $(seq $((${3:-20} * 10))); do
		[ "$(timeout 10 awk '$1 == "store" { print $2 }' "$1/.stats")" = "$2" ] && return 0
		sleep 0.1
	done
	fail "$1 still not 'store $2' after ${3:-20} s"
}

# timed_errno MAXMS CODE ARGS...: py_errno under `timeout 20`, its output
# in OUT; fails unless it ended within MAXMS ms.
timed_errno() {
	local max=$1 t0 t1
	shift
	t0=$(now_ms)
	OUT=$(timeout 20 python3 -c "import os, sys
try:
    $1
    print('OK')
except OSError as e:
    print(__import__('errno').errorcode.get(e.errno, e.errno))" "${@:2}")
	local st=$?
	t1=$(now_ms)
	[ "$st" -ne 124 ] || fail "hung for 20 s: $1 ${*:2}"
	[ $((t1 - t0)) -le "$max" ] ||
		fail "took $((t1 - t0)) ms (bound $max ms): $1 ${*:2}"
}

# counted DIR: the gauges DIR/.stats shows (tenants parents children
# links bytes), one "key value" a line, in that order.
counted() {
	local k
	for k in tenants parents children links bytes; do
		echo "$k $(stat_of "$k" "$1")"
	done
}

# recount DIR: the same gauges counted with find through the mount
# (special files, whose names begin with '.', left out): a child's state
# is one inode however many parents link it.
recount() {
	find "$1" -mindepth 1 -name '.*' -prune -o -printf '%d %y %s %i\n' |
		awk '$1 == 1 && $2 == "d" { t++ } $1 == 2 && $2 == "d" { p++ }
		     $1 == 3 && $2 == "f" { l++; if (!seen[$4]++) { c++; b += $3 } }
		     END { printf "tenants %d\nparents %d\nchildren %d\nlinks %d\nbytes %d\n", t, p, c, l, b }'
}

# tree DIR: every node under DIR with its size and content, in order.
tree() {
	(cd "$1" && find . -name '.?*' -prune -o -printf '%P %y %s\n' | LC_ALL=C sort &&
		find . -mindepth 3 -type f -name '[!.]*' -print0 | LC_ALL=C sort -z |
		xargs -0r grep -H '')
}

# snap DIR: DIR/.snapshot without ttl_ms_left (a tombstone's runs on),
# its rows sorted (the order of a parent's children is not promised).
snap() {
	cut -f1-8,10 "$1/.snapshot" | { head -n 1 && LC_ALL=C sort; }
}

# writer DIR TAG LOG: create DIR/TAG-I (content "TAG I") for I = 1, 2,
# ... and remove every third one's predecessor, with coreutils (which
# report a failed close, where the publication happens), logging
# "c NAME" or "u NAME" once each succeeded, until $STOP exists or 20
# operations in a row failed.
writer() {
	local dir=$1 tag=$2 log=$3 i=0 fails=0
	while [ ! -e "$STOP" ] && [ "$fails" -lt 20 ] && [ "$i" -lt 100000 ]; do
		i=$((i + 1))
		if tee "$dir/$tag-$i" >/dev/null 2>&1 <<<"$tag $i"; then
			echo "c $tag-$i" >>"$log"
			fails=0
		else
			fails=$((fails + 1))
		fi
		if [ $((i % 3)) = 0 ]; then
			# Asked (LOG.asked): a removal whose daemon died
			# under it (ENOTCONN) may have been made or not.
			echo "$tag-$((i - 1))" >>"$log.asked"
			if rm "$dir/$tag-$((i - 1))" 2>/dev/null; then
				echo "u $tag-$((i - 1))" >>"$log"
			fi
		fi
	done
}

# appender FILE LOG: append the line I to FILE for I = 1, 2, ... with
# tee -a, logging I once it succeeded, until $STOP exists.
appender() {
	local file=$1 log=$2 i=0
	while [ ! -e "$STOP" ] && [ "$i" -lt 100000 ]; do
		i=$((i + 1))
		if timeout 20 tee -a "$file" >/dev/null 2>&1 <<<"$i"; then
			echo "$i" >>"$log"
		fi
	done
}

# bg FUNC ARGS...: run FUNC in the background; the teardown stops it.
bg() {
	"$@" 3>&- &
	BG_PIDS+=($!)
}

# bg_wait: wait for this test's background functions (after touch $STOP).
bg_wait() {
	local p
	for p in "${BG_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	BG_PIDS=()
}

# lines_at_least FILE N [SECS]: wait (default 30 s) until FILE has N lines.
lines_at_least() {
	local i
	for i in $(seq $((${3:-30} * 20))); do
		[ "$(cat "$1" 2>/dev/null | wc -l)" -ge "$2" ] && return 0
		sleep 0.05
	done
	fail "$1 has $(cat "$1" 2>/dev/null | wc -l) lines, not $2, after ${3:-30} s"
}

@test "SIGKILL of one mount under load: the other goes on, nothing it committed is lost, .stats equals a recount" {
	redis_start
	STORE="unix:$REDIS_SOCK"
	mount_store A
	mount_store B
	mkdir -p "$A/t/pa" "$A/t/pb"
	fsyncdir "$B"
	bg writer "$A/t/pa" a "$BATS_TEST_TMPDIR/a.log"
	bg writer "$B/t/pb" b "$BATS_TEST_TMPDIR/b.log"
	lines_at_least "$BATS_TEST_TMPDIR/a.log" 20
	lines_at_least "$BATS_TEST_TMPDIR/b.log" 20
	MNT=$A
	STATEFS_PID=$(pid_of "$A")
	statefs_kill9
	assert_equal "$STATEFS_STATUS" 137
	# B goes on: 30 more operations of its writer succeed after the kill.
	n=$(wc -l <"$BATS_TEST_TMPDIR/b.log")
	lines_at_least "$BATS_TEST_TMPDIR/b.log" $((n + 30))
	touch "$STOP"
	bg_wait
	fsyncdir "$B"
	# Everything either writer was told it made is there, with its
	# content; everything it was told it removed is gone.  A removal
	# under way when A was killed got ENOTCONN from the kernel, not an
	# answer: made or not, either is right (then the content is whole);
	# one at most, the one A was killed under.
	local unanswered=0
	for tag in a b; do
		while read -r op name; do
			if [ "$op" = c ] && ! grep -qx "u $name" "$BATS_TEST_TMPDIR/$tag.log"; then
				if [ "$tag" = a ] && grep -qx "$name" "$BATS_TEST_TMPDIR/$tag.log.asked" &&
					[ ! -e "$B/t/p$tag/$name" ]; then
					unanswered=$((unanswered + 1))
					continue
				fi
				run cat "$B/t/p$tag/$name"
				assert_output "$tag ${name#*-}"
			elif [ "$op" = u ]; then
				run stat "$B/t/p$tag/$name"
				assert_failure
			fi
		done <"$BATS_TEST_TMPDIR/$tag.log"
	done
	[ "$unanswered" -le 1 ]
	run counted "$B"
	assert_output "$(recount "$B")"
	# A new mount loads the same tree from the store.
	mount_store C
	assert_equal "$(tree "$C")" "$(tree "$B")"
	run counted "$C"
	assert_output "$(recount "$C")"
}

@test "redis-server killed and restarted with its append-only file: EIO within store_timeout meanwhile, then the mount recovers; nothing lost, nothing twice, same instance" {
	redis_start --appendonly yes --appendfsync always
	STORE="unix:$REDIS_SOCK"
	dir=$REDIS_DIR
	mount_store A -o store_timeout=1
	mount_store B -o store_timeout=1
	mkdir -p "$A/t/p"
	echo kept >"$A/t/p/c"
	touch "$A/t/p/log"
	inst=$(stat_of instance "$A")
	# B has read t, so it follows it (a mount follows what it uses,
	# -o follow_idle): its copy serves B's reads below.
	run cat "$B/t/p/c"
	assert_output kept
	bg appender "$A/t/p/log" "$BATS_TEST_TMPDIR/ok"
	lines_at_least "$BATS_TEST_TMPDIR/ok" 10
	redis_kill9 "${REDIS_PIDS[0]}"
	# Each call fails within store_timeout (1 s) and its wait for the
	# mirror, with generous slack: no hang.
	timed_errno 6000 'os.mkdir(sys.argv[1])' "$A/t/q"
	assert_equal "$OUT" EIO
	timed_errno 6000 'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL); os.close(fd)' "$B/t/p/d"
	assert_equal "$OUT" EIO
	timed_errno 6000 'os.unlink(sys.argv[1])' "$A/t/p/c"
	assert_equal "$OUT" EIO
	run stat_of store "$A"
	assert_output disconnected
	# Reads are served from the mount's copy.
	run timeout 20 cat "$B/t/p/c"
	assert_output kept
	redis_again "$dir" --appendonly yes --appendfsync always
	wait_store "$A" connected
	wait_store "$B" connected
	# The appender goes on by itself: 10 more appends succeed.
	n=$(wc -l <"$BATS_TEST_TMPDIR/ok")
	lines_at_least "$BATS_TEST_TMPDIR/ok" $((n + 10))
	touch "$STOP"
	bg_wait
	fsyncdir "$A"
	fsyncdir "$B"
	[ "$(stat_of instance "$A")" = "$inst" ]
	[ "$(stat_of instance "$B")" = "$inst" ]
	run ls "$B/t"
	assert_output p
	run ls "$A/t/p"
	assert_output "$(printf 'c\nlog')"
	run cat "$A/t/p/c"
	assert_output kept
	# Every append the appender was told succeeded is there once; no
	# line is there twice (a retried call applies at most once).
	run bash -c 'sort -n "$1" | uniq -d' _ "$B/t/p/log"
	assert_output ''
	run bash -c 'sort "$1" | comm -23 - <(sort "$2")' _ "$BATS_TEST_TMPDIR/ok" "$B/t/p/log"
	assert_output ''
	assert_equal "$(tree "$A")" "$(tree "$B")"
	run counted "$A"
	assert_output "$(recount "$A")"
	run counted "$B"
	assert_output "$(recount "$B")"
}

@test "redis-server restarted from an older snapshot of the same instance: a mount that applied its own later changes shows the store's, and goes on" {
	redis_start
	STORE="unix:$REDIS_SOCK"
	dir=$REDIS_DIR
	mount_store A -o store_timeout=1
	mkdir -p "$A/t/p"
	echo one >"$A/t/p/c1"
	run rcli SAVE
	assert_output OK
	# Applied by A from their calls' outcomes, then lost with the
	# server: the store is behind A's copy of t.
	for i in 2 3 4 5; do echo "$i" >"$A/t/p/c$i"; done
	redis_kill9 "${REDIS_PIDS[0]}"
	redis_again "$dir"
	wait_store "$A" connected
	for _ in $(seq 100); do
		[ "$(ls "$A/t/p")" = c1 ] && break
		sleep 0.1
	done
	run ls "$A/t/p"
	assert_output c1
	run cat "$A/t/p/c1"
	assert_output one
	echo again >"$A/t/p/c2"
	run cat "$A/t/p/c2"
	assert_output again
	run ls "$A/t/p"
	assert_output "$(printf 'c1\nc2')"
}

@test "redis-server killed and restarted without persistence: a new instance on every mount, old handles get ESTALE, nothing merged" {
	redis_start
	STORE="unix:$REDIS_SOCK"
	dir=$REDIS_DIR
	mount_store A -o store_timeout=1
	mount_store B -o store_timeout=1
	mkdir -p "$A/t/p"
	echo x >"$A/t/p/c"
	fsyncdir "$B"
	old=$(stat_of instance "$A")
	exec 5<"$B/t/p/c"
	exec 6<"$A/t/p"
	redis_kill9 "${REDIS_PIDS[0]}"
	redis_again "$dir"
	# Each mount finds the new instance by itself.
	for m in "$A" "$B"; do
		for i in $(seq 200); do
			[ "$(timeout 10 awk '$1 == "instance" { print $2 }' "$m/.stats")" != "$old" ] && break
			sleep 0.1
		done
		refute [ "$(stat_of instance "$m")" = "$old" ]
	done
	assert_equal "$(stat_of instance "$A")" "$(stat_of instance "$B")"
	run py_errno 'os.read(5, 10)'
	assert_output ESTALE
	run py_errno 'os.fstat(6); os.listdir(6)'
	assert_output ESTALE
	exec 5<&- 6<&-
	run ls "$A"
	assert_output ''
	run ls "$B"
	assert_output ''
	# The new instance works on both, from nothing.
	mkdir -p "$B/t/p"
	echo new >"$B/t/p/c"
	fsyncdir "$A"
	run cat "$A/t/p/c"
	assert_output new
	assert_equal "$(tree "$A")" "$(tree "$B")"
	run counted "$A"
	assert_output "$(recount "$A")"
}

@test "redis-server stopped with SIGSTOP: each mutation fails with EIO within store_timeout and, after SIGCONT, has changed nothing" {
	redis_start
	STORE="unix:$REDIS_SOCK"
	mount_store A -o store_timeout=1
	mkdir -p "$A/t/p"
	echo kept >"$A/t/p/c"
	before=$(snap "$A")
	gauges_before=$(gauges "$A")
	pid=${REDIS_PIDS[0]}
	kill -STOP "$pid"
	STOPPED+=("$pid")
	# Each is sent to a Redis that takes it only after SIGCONT, past
	# the call's deadline: it must then do nothing.
	timed_errno 6000 'os.mkdir(sys.argv[1])' "$A/t/q"
	assert_equal "$OUT" EIO
	timed_errno 6000 'os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL))' "$A/t/p/d"
	assert_equal "$OUT" EIO
	timed_errno 6000 'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC); os.write(fd, b"new\n"); os.close(fd)' "$A/t/p/c"
	assert_equal "$OUT" EIO
	timed_errno 6000 'os.unlink(sys.argv[1])' "$A/t/p/c"
	assert_equal "$OUT" EIO
	timed_errno 6000 'os.rmdir(sys.argv[1])' "$A/t/p"
	assert_equal "$OUT" EIO
	run stat_of store "$A"
	assert_output disconnected
	kill -CONT "$pid"
	STOPPED=()
	wait_store "$A" connected
	fsyncdir "$A"
	assert_equal "$(snap "$A")" "$before"
	assert_equal "$(gauges "$A")" "$gauges_before"
	run cat "$A/t/p/c"
	assert_output kept
	# A new mount, loaded from the store itself, shows the same.
	mount_store B
	assert_equal "$(snap "$B")" "$before"
	assert_equal "$(tree "$B")" "$(tree "$A")"
	# And the mount works again.
	mkdir "$A/t/q"
	echo new >"$A/t/p/c"
	run cat "$A/t/p/c"
	assert_output new
}

# trim_case N: mount twice, stop B's daemon, change tenant t through A,
# trim t's log to its last N entries, continue B: B reloads t and shows
# exactly A's tree.
trim_case() {
	local keep=$1 pid tid
	redis_start
	STORE="unix:$REDIS_SOCK"
	mount_store A
	mount_store B
	mkdir -p "$A/t/p" "$A/t/gone" "$A/u/p"
	echo one >"$A/t/p/c"
	echo drop >"$A/t/p/d"
	echo x >"$A/t/gone/c"
	fsyncdir "$B"
	exec 5<"$B/t/p/d"
	pid=$(pid_of "$B")
	kill -STOP "$pid"
	STOPPED+=("$pid")
	echo two >>"$A/t/p/c"
	rm "$A/t/p/d"
	rmdir "$A/t/gone"
	mkdir "$A/t/new"
	for i in $(seq 20); do echo "$i" >"$A/t/new/c$i"; done
	rm "$A/t/new/c7"
	ln "$A/t/new/c3" "$A/t/p/c3"
	echo u >"$A/u/p/c"
	tid=$(rcli HGET 'statefs:{statefs}:tenants' t)
	[ -n "$tid" ]
	run rcli XTRIM "statefs:{statefs.t$tid}:log" MAXLEN "$keep"
	assert_success
	kill -CONT "$pid"
	STOPPED=()
	fsyncdir "$B"
	assert_equal "$(snap "$B")" "$(snap "$A")"
	assert_equal "$(tree "$B")" "$(tree "$A")"
	run counted "$B"
	assert_output "$(recount "$B")"
	# A handle of a child removed while B was behind: ESTALE.
	run py_errno 'os.read(5, 10)'
	assert_output ESTALE
	exec 5<&-
	# B follows the log from there on.
	echo three >>"$B/t/p/c"
	fsyncdir "$A"
	run cat "$A/t/p/c"
	assert_output "$(printf 'one\ntwo\nthree')"
}

@test "a tenant's log trimmed to its last entry while a mount was stopped: the mount reloads the tenant and shows exactly the other's tree" {
	trim_case 1
}

@test "a tenant's log trimmed to nothing while a mount was stopped: the mount reloads the tenant and shows exactly the other's tree" {
	trim_case 0
}

# free_ports N: N loopback TCP ports nobody listens on (bound at once, so
# distinct), one a line.
free_ports() {
	python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
for s in socks:
    print(s.getsockname()[1])
for s in socks:
    s.close()' "$1"
}

# sentinel_start PORT MASTER_PORT: a Sentinel on PORT watching master
# "m" at 127.0.0.1:MASTER_PORT (quorum 2); the teardown stops it.
sentinel_start() {
	local port=$1 master=$2 dir pid i
	dir=$(mktemp -d "$BATS_TEST_TMPDIR/sentinel.XXXXXX")
	printf '%s\n' "port $port" "bind 127.0.0.1" "dir $dir" \
		"logfile $dir/sentinel.log" \
		"sentinel monitor m 127.0.0.1 $master 2" \
		"sentinel down-after-milliseconds m 2000" \
		"sentinel failover-timeout m 10000" >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >/dev/null 2>&1 \
		3>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	pid=$!
	REDIS_PIDS+=("$pid")
	for i in $(seq 400); do
		[ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && return 0
		proc_alive "$pid" || break
		sleep 0.05
	done
	fail "the Sentinel on port $port did not start: $(tail -n 5 "$dir/sentinel.log")"
}

# until_true SECS CMD...: run CMD every 0.1 s until it succeeds, at most
# SECS s.
until_true() {
	local secs=$1 i
	shift
	for i in $(seq $((secs * 10))); do
		"$@" && return 0
		sleep 0.1
	done
	fail "not true after $secs s: $*"
}

@test "a Sentinel failover: the mount follows the new primary, keeps what was committed and replicated, and writes again" {
	mapfile -t P < <(free_ports 5) # primary, replica, three Sentinels
	redis_start --port "${P[0]}" --bind 127.0.0.1
	primary_sock=$REDIS_SOCK
	redis_start --port "${P[1]}" --bind 127.0.0.1 --replicaof 127.0.0.1 "${P[0]}"
	until_true 30 eval '[[ "$(redis-cli -p "${P[1]}" INFO replication)" == *master_link_status:up* ]]'
	for i in 2 3 4; do
		sentinel_start "${P[i]}" "${P[0]}"
	done
	STORE="sentinel://127.0.0.1:${P[2]},127.0.0.1:${P[3]},127.0.0.1:${P[4]}/m"
	mount_store A
	mkdir -p "$A/t/p"
	echo before >"$A/t/p/c"
	echo more >>"$A/t/p/c"
	touch "$A/t/p/d"
	rm "$A/t/p/d"
	inst=$(stat_of instance "$A")
	# Committed, and on the replica (WAIT: one replica has it).
	run redis-cli -s "$primary_sock" WAIT 1 10000
	assert_output 1
	# The first Sentinel promotes the replica once it knows it.
	sees_replica() {
		redis-cli -p "${P[2]}" SENTINEL REPLICAS m |
			awk 'prev == "flags" { f = $0 } { prev = $0 } END { exit f != "slave" }'
	}
	until_true 30 sees_replica
	failover() {
		[ "$(redis-cli -p "${P[2]}" SENTINEL FAILOVER m)" = OK ]
	}
	until_true 30 failover
	# Done when the Sentinel names the replica and the old primary
	# follows it.
	named() {
		[ "$(redis-cli -p "${P[2]}" SENTINEL get-master-addr-by-name m | tail -n 1)" = "${P[1]}" ]
	}
	until_true 30 named
	until_true 30 eval '[[ "$(redis-cli -p "${P[0]}" INFO replication)" == *role:slave* ]]'
	# The mount writes again, on the new primary, at once.
	echo after >>"$A/t/p/c"
	mkdir "$A/t/q"
	run cat "$A/t/p/c"
	assert_output "$(printf 'before\nmore\nafter')"
	run redis-cli -p "${P[1]}" HGET "statefs:{statefs}:meta" instance
	assert_output "$inst"
	assert_equal "$(stat_of instance "$A")" "$inst"
	run stat_of store "$A"
	assert_output connected
	# A new mount, through the same Sentinels, shows the same tree.
	mount_store B
	assert_equal "$(tree "$B")" "$(tree "$A")"
	run counted "$A"
	assert_output "$(recount "$A")"
}
