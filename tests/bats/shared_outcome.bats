#!/usr/bin/env bats
# docs/shared-store.md, "Failure": an error returned to a caller means "not
# applied".  A Redis busy past store_timeout (DEBUG SLEEP, SIGSTOP) holds
# a mutation it has not read yet; when it wakes, the mutation must do
# nothing if its caller was told EIO, and must be there if its caller was
# told it succeeded.  Each test starts its own redis-server (with DEBUG
# enabled), two mounts of it (A makes the calls, B checks them once Redis
# is awake), under -o testclock (the leases' clock stands still while
# Redis is busy) and on the real clock.
#
# A call is made only once Redis is asleep (its main thread in
# nanosleep, as /proc says) or stopped, by a process started before;
# commands that meet a busy store run under `timeout` (a hang is a
# failure, status 124).  No timing is asserted: only what each outcome
# says against what the store holds.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

STOPPED=() # redis-servers this test stopped with SIGSTOP

teardown() {
	local rc=0
	local pid
	for pid in "${STOPPED[@]}"; do
		kill -CONT "$pid" 2>/dev/null
	done
	STOPPED=()
	exec 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount || rc=1
	redis_stop_all
	return "$rc"
}

# start OPTS...: a redis-server with DEBUG, mounts A and B of it with
# store_timeout=1 and OPTS, and the tree t/p holding the children each
# mutation below works on.
start() {
	redis_start --enable-debug-command yes
	RPID=${REDIS_PIDS[0]}
	mount2 -o store_timeout=1 "$@"
	mkdir -p "$A/t/p"
	NTH=0
}

# op CODE ARGS...: start python on one statement (CODE, its arguments
# ARGS in sys.argv) that, once started, waits for a line on its stdin (a
# FIFO this shell keeps open on fd 4) before it runs: a python that takes
# seconds to start on a loaded machine must not make the call after
# Redis woke.  go lets it run; done_ waits for it and sets OUT to its
# outcome (OK, or an errno name).
op() {
	rm -f "$BATS_TEST_TMPDIR/ready" "$BATS_TEST_TMPDIR/go"
	mkfifo "$BATS_TEST_TMPDIR/go"
	READY="$BATS_TEST_TMPDIR/ready" timeout 30 python3 -c "import os, sys, errno
open(os.environ['READY'], 'w').close()
sys.stdin.readline()
try:
    $1
    print('OK')
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))" "${@:2}" \
		<"$BATS_TEST_TMPDIR/go" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
	OP_PID=$!
	exec 4>"$BATS_TEST_TMPDIR/go"
	local i
	for i in $(seq 600); do
		[ -e "$BATS_TEST_TMPDIR/ready" ] && return 0
		sleep 0.05
	done
	fail "python did not start in 30 s"
}
go() {
	echo go >&4
	exec 4>&-
}
done_() {
	local st=0
	wait "$OP_PID" || st=$?
	[ "$st" -ne 124 ] || fail "hung for 30 s"
	OUT=$(cat "$BATS_TEST_TMPDIR/out")
}

# asleep SECS CODE ARGS...: op CODE ARGS, DEBUG SLEEP SECS, then, once
# Redis sleeps, go; returns when both are done.
asleep() {
	local secs=$1 i dp
	shift
	op "$@"
	rcli DEBUG SLEEP "$secs" >/dev/null 3>&- &
	dp=$!
	# Redis sleeps once its main thread waits in hrtimer_nanosleep.  On a
	# loaded machine a short sleep can come and go between two looks:
	# then redis-cli has ended, and the call meets an awake Redis, which
	# the judge checks all the same (the 3 s rounds make the EIOs).
	for i in $(seq 2000); do
		[ "$(cat "/proc/$RPID/wchan" 2>/dev/null)" = hrtimer_nanosleep ] && break
		proc_alive "$dp" || break
		sleep 0.01
	done
	[ "$(cat "/proc/$RPID/wchan" 2>/dev/null)" = hrtimer_nanosleep ] ||
		! proc_alive "$dp" ||
		fail "redis-server did not start its DEBUG SLEEP"
	go
	done_
	wait "$dp"
}

# stopped SECS CODE ARGS...: op CODE ARGS, SIGSTOP Redis, go, SIGCONT
# Redis SECS later (the call's EIO comes after store_timeout and its
# fence's: SECS below that wakes Redis while the call still waits), wait
# for the call.
stopped() {
	local secs=$1
	shift
	op "$@"
	kill -STOP "$RPID"
	STOPPED+=("$RPID")
	go
	sleep "$secs"
	kill -CONT "$RPID"
	STOPPED=()
	done_
}

# judge WHAT APPLIED: after a call (OUT), Redis awake, both mounts caught
# up: OUT must be OK when APPLIED (a shell test run on B) holds, EIO when
# it does not; a line in $BATS_TEST_TMPDIR/verdicts either way.
judge() {
	local what=$1 applied=no
	shift
	rcli PING >/dev/null
	fsyncdir "$A" "$B"
	if eval "$1"; then
		applied=yes
	fi
	echo "$what: $OUT, applied $applied" >>"$BATS_TEST_TMPDIR/verdicts"
	case "$OUT $applied" in
	"OK yes" | "EIO no") ;;
	*) fail "$what: the caller got $OUT, yet applied is $applied" ;;
	esac
}

# round HOW SECS: each mutation once (mkdir, create, a publication, rm)
# through A while Redis is busy (HOW: asleep or stopped) for SECS, each
# judged from B.  A mutation before each, Redis awake, keeps the mount's
# sample of the server's time fresh (as any busy mount's is).
round() {
	local how=$1 secs=$2 n
	NTH=$((NTH + 1))
	n=$NTH
	echo old >"$A/t/p/pub$n"
	echo x >"$A/t/p/rm$n"
	mkdir "$A/t/fresh$n"
	"$how" "$secs" 'os.mkdir(sys.argv[1])' "$A/t/q$n"
	judge "mkdir q$n" "[ -d '$B/t/q$n' ]"
	mkdir "$A/t/fresh$n.1"
	"$how" "$secs" 'os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL))' "$A/t/p/c$n"
	judge "create c$n" "[ -f '$B/t/p/c$n' ]"
	mkdir "$A/t/fresh$n.2"
	"$how" "$secs" 'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC); os.write(fd, b"new\n"); os.close(fd)' "$A/t/p/pub$n"
	judge "publish pub$n" "[ \"\$(cat '$B/t/p/pub$n')\" = new ]"
	mkdir "$A/t/fresh$n.3"
	"$how" "$secs" 'os.unlink(sys.argv[1])' "$A/t/p/rm$n"
	judge "rm rm$n" "[ ! -e '$B/t/p/rm$n' ]"
}

# the_end: the verdicts (shown on failure), at least one EIO among them
# (the test made Redis busy for long enough), and the two mounts agree.
the_end() {
	cat "$BATS_TEST_TMPDIR/verdicts"
	grep -q ': EIO, ' "$BATS_TEST_TMPDIR/verdicts" ||
		fail "no call met a busy Redis"
	fsyncdir "$A" "$B"
	assert_equal "$(cut -f1-8 "$A/.snapshot" | LC_ALL=C sort)" \
		"$(cut -f1-8 "$B/.snapshot" | LC_ALL=C sort)"
}

@test "testclock: a mutation answered EIO while Redis sleeps past store_timeout is not applied when it wakes (mkdir, create, publication, rm)" {
	start -o testclock
	round asleep 3
	round asleep 3
	the_end
}

@test "testclock: a mutation answered EIO while Redis is stopped past store_timeout is not applied after SIGCONT; one woken while it waits reports what it did" {
	start -o testclock
	round stopped 3
	round stopped 1.5
	the_end
}

@test "real clock: around store_timeout, every EIO is a mutation not applied, every success one applied (DEBUG SLEEP and SIGSTOP)" {
	start
	round asleep 3
	for secs in 1.1 1.2 1.25 1.3 1.35 1.4; do
		round asleep "$secs"
	done
	round stopped 3
	round stopped 1.2
	the_end
}
