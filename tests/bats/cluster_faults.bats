#!/usr/bin/env bats
# docs/design.md, "The shared store on a Redis Cluster": real mounts
# (-o store=cluster://...) on a real cluster of 3 primaries and 3
# replicas under faults.  Each test starts its own cluster
# (cluster_helpers.bash) and mounts it twice, A and B, as two hosts: one
# store_prefix, a mount id each.  A tenant's keys are in one hash slot,
# {PREFIX.tTID}; the tests find each tenant's primary from the root's
# tenants hash (PREFIX:{PREFIX}:tenants, NAME -> TID) and then:
# every primary serves a tenant both mounts see; a manual failover, a
# killed primary and a slot moved while a writer works in a tenant lose
# nothing acknowledged, fail with EIO only, leave the other primaries'
# tenants alone, and the tenant works again after; two mounts racing on
# one name with O_EXCL have exactly one winner.
#
# What each checks is what a user sees: errno (by name, from python's
# os calls), the tree on the mounts, .stats.  Every wait is bounded (a
# poll with a limit; a hang is a failure, never a stuck run); every call
# a writer makes is timed and bounded too.  The teardown stops the
# writers, unmounts every mount and stops every node, also when the test
# failed half way.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

PFX=cf # the store_prefix of every mount of a test

setup() {
	STOP="$BATS_TEST_TMPDIR/stop"
}

teardown() {
	local rc=0
	touch "$STOP"
	dead_teardown || rc=1
	redis_stop_all
	return "$rc"
}

# mount_cluster NAME [OPTS...]: mount this test's cluster (store_prefix
# PFX) and set NAME to the mountpoint.
mount_cluster() {
	local name=$1
	shift
	statefs_mount -o "store=cluster://$CLUSTER_SEEDS,store_prefix=$PFX,store_layout=tenant" "$@" ||
		return 1
	printf -v "$name" '%s' "$MNT"
}

# a_primary: the port of a living primary.
a_primary() {
	local p
	for p in $(_cluster_living); do
		[ "$(_cluster_role "$p")" = master ] && echo "$p" && return 0
	done
	return 1
}

# tenant_tid NAME: the TID of tenant NAME (the root's tenants hash).
tenant_tid() {
	ccli "$(a_primary)" -c HGET "$PFX:{$PFX}:tenants" "$1" | tr -d '\r'
}

# tenant_slot NAME: the hash slot of tenant NAME's keys.
tenant_slot() {
	local tid
	tid=$(tenant_tid "$1")
	[ -n "$tid" ] || {
		echo "no tenant $1 in $PFX:{$PFX}:tenants" >&2
		return 1
	}
	ccli "$(a_primary)" CLUSTER KEYSLOT "{$PFX.t$tid}" | tr -d '\r'
}

# tenant_primary NAME: the port of the primary serving tenant NAME.
tenant_primary() {
	local slot
	slot=$(tenant_slot "$1") || return 1
	cluster_primary_of_slot "$slot"
}

# replica_of PORT: the port of a replica of the primary on PORT.
replica_of() {
	ccli "$1" ROLE | tr -d '\r' | sed -n 4p
}

# spread_tenants MNT: make tenants t1, t2, ... on MNT (a parent p in
# each) until every primary serves one; TEN[PORT] is a tenant of the
# primary on PORT.  Bounded: 60 tenants.
declare -A TEN
spread_tenants() {
	local mnt=$1 i port
	TEN=()
	for ((i = 1; i <= 60 && ${#TEN[@]} < 3; i++)); do
		mkdir "$mnt/t$i" "$mnt/t$i/p" || return 1
		port=$(tenant_primary "t$i") || return 1
		[ -n "$port" ] || {
			fail "no primary serves tenant t$i"
			return 1
		}
		[ -n "${TEN[$port]:-}" ] || TEN[$port]=t$i
	done
	[ "${#TEN[@]}" -eq 3 ] || fail "60 tenants, all on ${!TEN[*]}"
}

# The writer (python: each call's errno by name, each call timed):
# creates DIR/TAG-I with O_EXCL, writes "TAG I", closes, for I = 1, 2,
# ..., and removes every third one's predecessor when its create was
# acknowledged; until STOP exists.  Logs, a line each call:
#   c NAME MS          create, write and close returned 0
#   u NAME MS          unlink returned 0
#   e ERRNO OP NAME MS a call of OP (create, write, close, unlink) failed
# (MS: the call's milliseconds; a create's line counts open to close.)
# A failed call is followed by a pause of 20 ms: no spin on a tenant
# whose primary is away.
PYWRITER='
import errno, os, sys, time
d, tag, log, stop = sys.argv[1:5]
out = open(log, "a", buffering=1)
made = set()
def ms(t0):
    return int((time.monotonic() - t0) * 1000)
i = 0
while not os.path.exists(stop) and i < 100000:
    i += 1
    name = "%s-%d" % (tag, i)
    t0 = time.monotonic()
    op = "create"
    try:
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        err = None
        try:
            os.write(fd, ("%s %d\n" % (tag, i)).encode())
        except OSError as e:
            err, op = e, "write"
        try:
            os.close(fd)
        except OSError as e:
            if err is None:
                err, op = e, "close"
        if err is not None:
            raise err
        made.add(name)
        out.write("c %s %d\n" % (name, ms(t0)))
    except OSError as e:
        out.write("e %s %s %s %d\n" % (errno.errorcode.get(e.errno, e.errno), op, name, ms(t0)))
        time.sleep(0.02)
    if i % 3 == 0 and ("%s-%d" % (tag, i - 1)) in made:
        old = "%s-%d" % (tag, i - 1)
        t0 = time.monotonic()
        try:
            os.unlink(os.path.join(d, old))
            out.write("u %s %d\n" % (old, ms(t0)))
        except OSError as e:
            out.write("e %s unlink %s %d\n" % (errno.errorcode.get(e.errno, e.errno), old, ms(t0)))
            time.sleep(0.02)
'

# writer DIR TAG: the writer in the background (BG_PIDS: the teardown
# stops it), logging to $BATS_TEST_TMPDIR/TAG.log; WRITER[TAG] its pid.
declare -A WRITER
writer() {
	: >"$BATS_TEST_TMPDIR/$2.log"
	timeout 600 python3 -c "$PYWRITER" "$1" "$2" "$BATS_TEST_TMPDIR/$2.log" "$STOP" \
		</dev/null 3>&- &
	BG_PIDS+=($!)
	WRITER[$2]=$!
}

# writers_stop [SECS]: touch STOP and wait (default 60 s) until every
# writer exited; fails naming one that did not (a call that hangs).
writers_stop() {
	local secs=${1:-60} i tag
	touch "$STOP"
	for tag in "${!WRITER[@]}"; do
		for ((i = 0; i < secs * 20; i++)); do
			proc_alive "${WRITER[$tag]}" || break
			statefs_sleep 0.05
		done
		if proc_alive "${WRITER[$tag]}"; then
			fail "writer $tag still running $secs s after the stop: a call hangs ($(tail -n 3 "$BATS_TEST_TMPDIR/$tag.log"))"
			return 1
		fi
		wait "${WRITER[$tag]}" 2>/dev/null || :
	done
}

# made TAG: the writer's acknowledged creates so far.
made() {
	grep -c '^c ' "$BATS_TEST_TMPDIR/$1.log"
}

# made_at_least TAG N [SECS]: wait (default 60 s) until TAG's writer
# had N creates acknowledged.
made_at_least() {
	local i
	for ((i = 0; i < ${3:-60} * 20; i++)); do
		[ "$(made "$1")" -ge "$2" ] && return 0
		statefs_sleep 0.05
	done
	fail "writer $1 made $(made "$1") files, not $2, within ${3:-60} s; its last lines: $(tail -n 5 "$BATS_TEST_TMPDIR/$1.log")"
}

# failures TAG: the errno names of TAG's failed calls, one each, sorted.
failures() {
	awk '$1 == "e" { print $2 }' "$BATS_TEST_TMPDIR/$1.log" | sort -u
}

# slowest TAG: the longest call of TAG's writer, in ms.
slowest() {
	awk '{ if ($NF + 0 > m) m = $NF + 0 } END { print m + 0 }' "$BATS_TEST_TMPDIR/$1.log"
}

# lost DIR TAG: what TAG's log says DIR must hold and it does not, a
# line each: an acknowledged create (neither removed nor asked to be)
# missing or with other content, an acknowledged removal still there.
# A removal that failed may have been made or not: either is right.
lost() {
	python3 - "$1" "$2" "$BATS_TEST_TMPDIR/$2.log" <<'PY'
import os, sys
d, tag, log = sys.argv[1:4]
made, gone, asked = [], set(), set()
for line in open(log):
    f = line.split()
    if f[0] == "c":
        made.append(f[1])
    elif f[0] == "u":
        gone.add(f[1])
    elif f[0] == "e" and f[2] == "unlink":
        asked.add(f[3])
for name in made:
    p = os.path.join(d, name)
    if name in gone:
        if os.path.lexists(p):
            print("removed but there:", name)
    elif name not in asked:
        want = "%s %s\n" % (tag, name.rsplit("-", 1)[1])
        try:
            got = open(p).read()
        except OSError as e:
            print("acknowledged but", os.strerror(e.errno) + ":", name)
            continue
        if got != want:
            print("content of", name, repr(got), "not", repr(want))
PY
}

# wait_store MNT STATE [SECS]: wait (default 60 s) until MNT's .stats
# says store STATE.
wait_store() {
	local i s=
	for ((i = 0; i < ${3:-60} * 10; i++)); do
		s=$(timeout 10 awk '$1 == "store" { print $2 }' "$1/.stats")
		[ "$s" = "$2" ] && return 0
		statefs_sleep 0.1
	done
	fail "$1 still 'store $s', not '$2', after ${3:-60} s"
}

# create_within MNT PATH [SECS]: a create of PATH (O_EXCL, then close)
# succeeds within SECS s (default 30), tried again after each EIO;
# fails at once on any other errno.
create_within() {
	timeout $((${3:-30} + 20)) python3 - "$2" "${3:-30}" <<'PY'
import errno, os, sys, time
p, secs = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + secs
while True:
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"after\n")
        os.close(fd)
        sys.exit(0)
    except OSError as e:
        if e.errno != errno.EIO:
            print("create", p, errno.errorcode.get(e.errno, e.errno))
            sys.exit(1)
    if time.monotonic() > end:
        print("create", p, "still EIO after", secs, "s")
        sys.exit(1)
    time.sleep(0.1)
PY
}

# two_tenants_on MNT: X and Y, tenants of two different primaries, and
# XP, X's primary (spread_tenants first).
two_tenants_on() {
	local ports=("${!TEN[@]}")
	XP=${ports[0]}
	X=${TEN[$XP]}
	Y=${TEN[${ports[1]}]}
}

@test "routing: two mounts, a tenant on each primary; A's create is seen by B's ls, cat and inotifywait in each" {
	cluster_start
	mount_cluster A
	mount_cluster B
	spread_tenants "$A"
	local port t
	# Every primary holds its tenant's keys, and no other node does.
	for port in "${!TEN[@]}"; do
		t=${TEN[$port]}
		run ccli "$port" --scan --pattern "$PFX:{$PFX.t$(tenant_tid "$t")}:*"
		[ -n "$output" ] || fail "primary $port has no key of tenant $t"
		echo "$t from A" >"$A/$t/p/f"
	done
	fsyncdir "$B"
	for port in "${!TEN[@]}"; do
		t=${TEN[$port]}
		fsyncdir "$B/$t" "$B/$t/p"
		run ls "$B/$t/p"
		assert_output f
		run cat "$B/$t/p/f"
		assert_output "$t from A"
	done
	# B learns of A's creates by itself (the follower's link to each
	# primary), as inotify events on its watched parents.
	for port in "${!TEN[@]}"; do
		t=${TEN[$port]}
		watch_start "$BATS_TEST_TMPDIR/$t.ev" "$B/$t/p"
	done
	for port in "${!TEN[@]}"; do
		echo new >"$A/${TEN[$port]}/p/g"
	done
	for port in "${!TEN[@]}"; do
		t=${TEN[$port]}
		wait_line "$BATS_TEST_TMPDIR/$t.ev" "CREATE g" 20
		run cat "$B/$t/p/g"
		assert_output new
	done
}

# failover_under_load KIND: writers in X (whose primary KIND "failover"
# fails over to its replica, or "kill" kills) and Y on mount A, then
# the checks both tests share.
failover_under_load() {
	local kind=$1 repl n before
	cluster_start
	mount_cluster A -o store_timeout=2
	mount_cluster B -o store_timeout=2
	spread_tenants "$A"
	two_tenants_on
	repl=$(replica_of "$XP")
	[ -n "$repl" ] || fail "primary $XP has no replica"
	writer "$A/$X/p" x
	writer "$A/$Y/p" y
	made_at_least x 20
	made_at_least y 20
	if [ "$kind" = failover ]; then
		cluster_failover "$repl"
	else
		cluster_kill_primary "$XP"
	fi
	[ "$(tenant_primary "$X")" = "$repl" ] ||
		fail "tenant $X is served by $(tenant_primary "$X"), not $repl"
	# X works again: its writer goes on (20 creates within 15 s: each
	# call answered as its own, not at the follower's read of every log
	# each second), and so does a create of ours.
	n=$(made x)
	made_at_least x $((n + 20)) 15
	create_within "$A" "$A/$X/p/after" 30
	before=$(made y)
	made_at_least y $((before + 20))
	writers_stop
	# Every failure in X was EIO, none in Y; no call took longer than
	# store_timeout (2 s) with generous slack.
	run failures x
	[ -z "$output" ] || assert_output EIO
	run failures y
	assert_output ''
	[ "$(slowest x)" -le 15000 ] || fail "a call in X took $(slowest x) ms"
	[ "$(slowest y)" -le 15000 ] || fail "a call in Y took $(slowest y) ms"
	# Nothing acknowledged is lost, on A nor on B.
	fsyncdir "$A/$X/p" "$A/$Y/p"
	run lost "$A/$X/p" x
	assert_output ''
	run lost "$A/$Y/p" y
	assert_output ''
	fsyncdir "$B" "$B/$X" "$B/$Y"
	fsyncdir "$B/$X/p" "$B/$Y/p"
	run lost "$B/$X/p" x
	assert_output ''
	run lost "$B/$Y/p" y
	assert_output ''
	run cat "$B/$X/p/after"
	assert_output after
	wait_store "$A" connected
	wait_store "$B" connected
}

@test "manual failover of a tenant's primary under load: nothing acknowledged lost, only EIO meanwhile, the other primary's tenant unaffected, then it works" {
	failover_under_load failover
}

@test "a killed primary under load: EIO only while its replica takes over, then it works; the other tenant unaffected; the mount lives and says connected" {
	failover_under_load kill
	# statefs lives and answers on both mounts.
	local m
	for m in "$A" "$B"; do
		proc_alive "$(pid_of "$m")" || fail "the daemon of $m died"
		run timeout 20 ls "$m"
		assert_success
		assert_line "$X"
		assert_line "$Y"
	done
}

@test "a tenant's slot moved while mounted under a writer: nothing acknowledged lost, creates work after, and B follows the slot where it went" {
	cluster_start
	mount_cluster A -o store_timeout=2
	mount_cluster B -o store_timeout=2
	spread_tenants "$A"
	two_tenants_on
	local slot to p
	slot=$(tenant_slot "$X")
	for p in "${!TEN[@]}"; do
		[ "$p" != "$XP" ] && to=$p && break
	done
	# B uses X (so follows it), and watches its parent.
	fsyncdir "$B" "$B/$X" "$B/$X/p"
	run ls "$B/$X/p"
	assert_success
	watch_start "$BATS_TEST_TMPDIR/ev" "$B/$X/p"
	writer "$A/$X/p" x
	made_at_least x 20
	cluster_move_slot "$slot" "$to"
	[ "$(tenant_primary "$X")" = "$to" ]
	# 20 more creates within 15 s: each answered as its own.
	local n
	n=$(made x)
	made_at_least x $((n + 20)) 15
	writers_stop
	run failures x
	[ -z "$output" ] || assert_output EIO
	[ "$(slowest x)" -le 15000 ] || fail "a call in X took $(slowest x) ms"
	fsyncdir "$A/$X/p"
	run lost "$A/$X/p" x
	assert_output ''
	# A create after the move, on A: B's follower, whose link to the
	# slot's old primary was told MOVED, hears of it where it went.
	echo moved >"$A/$X/p/after-move"
	wait_line "$BATS_TEST_TMPDIR/ev" "CREATE after-move" 20
	run cat "$B/$X/p/after-move"
	assert_output moved
	fsyncdir "$B/$X/p"
	run lost "$B/$X/p" x
	assert_output ''
	# The tenant's keys are all on the new primary.
	[ "$(ccli "$XP" CLUSTER COUNTKEYSINSLOT "$slot")" -eq 0 ]
	[ "$(ccli "$to" CLUSTER COUNTKEYSINSLOT "$slot")" -gt 0 ]
}

@test "two mounts create one name with O_EXCL at once, 60 rounds over the primaries: exactly one wins each round, the other gets EEXIST" {
	cluster_start
	mount_cluster A
	mount_cluster B
	spread_tenants "$A"
	local dirs=() port t
	for port in "${!TEN[@]}"; do
		t=${TEN[$port]}
		dirs+=("$t/p")
	done
	fsyncdir "$B"
	for t in "${dirs[@]}"; do
		fsyncdir "$B/${t%/p}" "$B/$t"
	done
	# Two threads, one a mount, each round's opens released together by
	# a barrier; a round's line: its name, then each mount's outcome.
	run timeout 300 python3 - "$A" "$B" "${dirs[@]}" <<'PY'
import errno, os, sys, threading
a, b, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
rounds = 60
bar = threading.Barrier(2)
res = {}
def race(mnt, who):
    for r in range(rounds):
        p = os.path.join(mnt, dirs[r % len(dirs)], "race-%d" % r)
        bar.wait(timeout=60)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, who.encode())
            os.close(fd)
            res[(r, who)] = "OK"
        except OSError as e:
            res[(r, who)] = errno.errorcode.get(e.errno, str(e.errno))
ts = [threading.Thread(target=race, args=(a, "A")), threading.Thread(target=race, args=(b, "B"))]
for t in ts: t.start()
for t in ts: t.join()
for r in range(rounds):
    print(r, res.get((r, "A")), res.get((r, "B")))
PY
	assert_success
	[ "${#lines[@]}" -eq 60 ]
	local r ra rb w line
	for line in "${lines[@]}"; do
		read -r r ra rb <<<"$line"
		case "$ra $rb" in
		"OK EEXIST") w=A ;;
		"EEXIST OK") w=B ;;
		*) fail "round $r: A $ra, B $rb" ;;
		esac
		t=${dirs[r % ${#dirs[@]}]}
		fsyncdir "$A/$t" "$B/$t"
		[ "$(cat "$A/$t/race-$r")" = "$w" ] || fail "round $r: A reads $(cat "$A/$t/race-$r"), not $w"
		[ "$(cat "$B/$t/race-$r")" = "$w" ] || fail "round $r: B reads $(cat "$B/$t/race-$r"), not $w"
	done
}
