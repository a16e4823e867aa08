# helpers.bash - what every statefs bats suite loads.
#
# Each test mounts its own statefs (a new, empty store instance) with
# statefs_mount and the teardown below unmounts every mount the test made,
# also when the test failed half way.  Assertions come from bats-assert.
#
# One suite, two backends: with STATEFS_STORE=redis every mount is a
# mount of a shared store of its own: a store_prefix of its own on one
# redis-server for the file's tests (redis_helpers.bash: a unix socket,
# no persistence), stopped after the file's last test
# (_redis_file_server below).  Tests that cannot
# apply to a shared store carry the bats tag embedded-only, and the
# redis run leaves them out (scripts/run-tests.sh; tests/README.md says
# which and why).
#
# With STATEFS_STORE=cluster the same, on a Redis Cluster: one cluster of
# 3 primaries and 3 replicas for the file (cluster_helpers.bash),
# started in setup_file and stopped in teardown_file, also when a test
# failed; each mount -o store=cluster://$CLUSTER_SEEDS with a
# store_prefix of its own and store_layout=tenant (each tenant's call
# touches one slot).  Tests see CLUSTER_SEEDS, CLUSTER_PORTS and ccli.
#
#   statefs_mount [-o opts]...  mount; sets MNT, STATEFS_PID, STATEFS_LOG
#                               (STATEFS_STORE_LAYOUT=tenant: a shared
#                               store is made in the tenant layout)
#   statefs_unmount             unmount everything this test mounted
#   pid_of MNT                  the daemon of one of this test's live mounts
#   statefs_remount [-o opts]   unmount, then mount anew with these options
#   py_errno CODE ARGS...       run one python statement; prints OK or the
#                               errno name (ENOENT, ESTALE, ...)
#   xattr NAME PATH             the value of an extended attribute
#   gen PATH / ver PATH         user.statefs.generation / .version
#   stat_of KEY [DIR]           one value of DIR/.stats (default $MNT)
#   gauges [DIR]                the gauge lines of DIR/.stats (for "nothing
#                               changed" comparisons)
#   as_nobody CMD...            run a command as uid/gid 65534
#   statefs_sleep SECS          sleep without starting a process
#   file_has_line FILE LINE     whether a line of FILE is LINE (grep -qxF)
#
# The helpers start as few processes as they can (assert.bash says why):
# the shell's own reads and tests where they do, a wait in statefs_sleep.
#
# Error names: coreutils and bash print strerror(); the texts tests match:
#   ENOENT "No such file or directory"  EEXIST "File exists"
#   ESTALE "Stale file handle"          EAGAIN "Resource temporarily unavailable"
#   ENOSPC "No space left on device"    EDQUOT "Disk quota exceeded"
#   EFBIG  "File too large"             EROFS  "Read-only file system"
#   EPERM  "Operation not permitted"    EXDEV  "Invalid cross-device link"
#   EINVAL "Invalid argument"           EACCES "Permission denied"
#   ENAMETOOLONG "File name too long"

# bats-support, bats-assert and the waits below (statefs_sleep,
# file_has_line): assert.bash, which says why they start no process.
load assert

case ${STATEFS_STORE:-embedded} in
redis | cluster)
	# shellcheck source=tests/bats/redis_helpers.bash
	source "$BATS_TEST_DIRNAME/redis_helpers.bash"
	;;
esac

STATEFS_BIN="${STATEFS_BIN:-$BATS_TEST_DIRNAME/../../build/statefs}"

# Every mount of the current test: "pid mountpoint log" per entry.
STATEFS_MOUNTS=()
STATEFS_NMOUNTS=0 # mounts made by this test so far (names the logs)

# _statefs_mounted DIR: whether DIR is a FUSE mount (fuse or fuse.*) in
# /proc/mounts ("DEV DIR TYPE OPTS 0 0" lines; /proc/mounts escapes
# blanks as \040 and our mountpoints have none), read by the shell.
_statefs_mounted() {
	local m=
	IFS= read -r -d '' m </proc/mounts || :
	[[ $m == *" $1 fuse "* || $m == *" $1 fuse."* ]]
}

# statefs_mount [args...]: start statefs in the foreground (-f) in the
# background of this test, wait until its mountpoint is a FUSE mount and
# export MNT, STATEFS_PID and STATEFS_LOG.  Extra arguments (-o ...) go to
# statefs before the mountpoint.  Fails with the daemon's log when the
# mount does not appear within 10 s.
statefs_mount() {
	_statefs_mkdir || return 1
	_statefs_start 10 "$_STATEFS_DIR/mnt" -- "$@"
}

# _statefs_mkdir: a new directory for a mount, DIR/mnt, in TMPDIR, both
# mode 0755 (the mountpoint lives in a world-traversable directory so that
# other uids, as_nobody, can reach it; BATS_TEST_TMPDIR is mode 0700); DIR
# in _STATEFS_DIR.  One mkdir: the name is this process's (its pid, a
# count, a random number), and a name taken already is tried again.
_STATEFS_NDIRS=0
_statefs_mkdir() {
	local i
	for ((i = 0; i < 20; i++)); do
		_STATEFS_NDIRS=$((_STATEFS_NDIRS + 1))
		_STATEFS_DIR=${TMPDIR:-/tmp}/statefs-bats.$BASHPID.$_STATEFS_NDIRS.$RANDOM
		mkdir -m 0755 -- "$_STATEFS_DIR" "$_STATEFS_DIR/mnt" 2>/dev/null && return 0
	done
	fail "cannot make a mount directory in ${TMPDIR:-/tmp}"
}

# _statefs_unmount_one PID MNT LOG: unmount one mount, wait for its daemon.
# Returns non-zero (with a message) when the daemon died from a signal or
# would not exit after the unmount (then, before SIGKILL, its threads'
# stacks: _statefs_stacks).
_statefs_unmount_one() {
	local pid=$1 mnt=$2 log=$3 i rc=0 status
	for ((i = 0; i < 10; i++)); do
		_statefs_mounted "$mnt" || break
		fusermount3 -u "$mnt" 2>/dev/null && break
		statefs_sleep 0.1
	done
	if _statefs_mounted "$mnt"; then
		echo "statefs: $mnt was busy; lazily unmounted" >&2
		fusermount3 -uz "$mnt" 2>/dev/null
	fi
	# 20 s: a daemon's exit is not timed (a loaded machine may take
	# seconds to schedule it), a daemon that does not exit is a defect.
	for ((i = 0; i < 290; i++)); do
		proc_alive "$pid" || break
		if ((i < 100)); then statefs_sleep 0.01; else statefs_sleep 0.1; fi
	done
	if proc_alive "$pid"; then
		echo "statefs (pid $pid) still running 20 s after unmount; its threads, then killing it" >&2
		_statefs_stacks "$pid" >&2
		proc_alive "$pid" ||
			echo "statefs (pid $pid) exited while its threads were read" >&2
		kill -KILL "$pid" 2>/dev/null
		rc=1
	fi
	wait "$pid" 2>/dev/null
	status=$?
	if [ "$rc" -eq 0 ] && [ "$status" -gt 128 ] && [ "$status" -ne 255 ]; then
		echo "statefs (pid $pid) died from signal $((status - 128))" >&2
		rc=1
	fi
	if [ "$rc" -ne 0 ] || [ -z "${BATS_TEST_COMPLETED:-}" ]; then
		if [ -s "$log" ]; then
			echo "--- statefs log ($mnt):" >&2
			tail -n 50 "$log" >&2
		fi
	fi
	rmdir "$mnt" "${mnt%/*}" 2>/dev/null
	return "$rc"
}

# _statefs_stacks PID: what each thread of a daemon that would not exit
# is doing, for the failure's output: its kernel stack and state
# (/proc/PID/task/TID/stack, wchan), then gdb's backtrace of every
# thread when gdb is installed.  Each bounded by timeout: a daemon stuck
# in the kernel must not hang the teardown too.
_statefs_stacks() {
	local pid=$1 task tid child
	# Its echo's process too (fs/echo_call.c), whose clone of the mount
	# keeps the connection alive until it sees the mount go.
	for child in $(pgrep -P "$pid"); do
		echo "--- child $child ($(timeout 2 cat "/proc/$child/comm" 2>/dev/null)), state $(timeout 2 awk '/^State/ { print $2 }' "/proc/$child/status" 2>/dev/null), wchan $(timeout 2 cat "/proc/$child/wchan" 2>/dev/null):"
		timeout 2 cat "/proc/$child/stack" 2>&1
	done
	for task in /proc/"$pid"/task/*; do
		[ -d "$task" ] || continue
		tid=${task##*/}
		echo "--- thread $tid ($(timeout 2 cat "$task/comm" 2>/dev/null)), wchan $(timeout 2 cat "$task/wchan" 2>/dev/null):"
		timeout 2 cat "$task/stack" 2>&1
	done
	if command -v gdb >/dev/null 2>&1; then
		echo "--- gdb: thread apply all bt"
		timeout 30 gdb -p "$pid" -batch -nx -iex 'set auto-load off' -ex 'thread apply all bt' </dev/null 2>&1 |
			grep -v '^\[New LWP\|^warning: \|^$'
	fi
}

# pid_of MNT: the daemon of one of this test's live mounts.
pid_of() {
	local e
	for e in "${STATEFS_MOUNTS[@]}"; do
		if [ "$(echo "$e" | cut -d' ' -f2)" = "$1" ]; then
			echo "${e%% *}"
			return 0
		fi
	done
	return 1
}

# statefs_unmount: unmount every mount this test made (newest first) and
# wait for the daemons.  Safe to call twice.
statefs_unmount() {
	local rc=0 i entry
	for ((i = ${#STATEFS_MOUNTS[@]} - 1; i >= 0; i--)); do
		entry=${STATEFS_MOUNTS[i]}
		# shellcheck disable=SC2086
		_statefs_unmount_one $entry || rc=1
	done
	STATEFS_MOUNTS=()
	# The shared stores of this test's mounts go with them (not the
	# file's cluster: no test's REDIS_PIDS has its nodes).
	if [ "${STATEFS_STORE:-embedded}" != embedded ]; then
		redis_stop_all
	fi
	return "$rc"
}

# The shared store's run (STATEFS_STORE=redis): every mount is a store of
# its own, a store_prefix of its own (the test's number in the file and
# the mount's in the test) on one redis-server for the file's tests,
# started at the file's first mount, in BATS_FILE_TMPDIR, and stopped by
# teardown_file.  (A server a mount cost a quarter of a second of
# processor time, its start and the library's load, which the next mounts
# of the file find loaded.)  No test of that run stops, breaks or
# reconfigures the server: those that do start their own (redis_start).
# Sets REDIS_SOCK and REDIS_DIR to the file's server.
_redis_file_server() {
	local f=$BATS_FILE_TMPDIR/redis-file pid= sock=
	if [ -r "$f" ]; then
		{ read -r pid; read -r sock; } <"$f"
		if proc_alive "$pid" && [ -S "$sock" ]; then
			REDIS_SOCK=$sock
			REDIS_DIR=${sock%/*}
			return 0
		fi
	fi
	# Not this test's: redis_stop_all (statefs_unmount) leaves it.
	local pids=("${REDIS_PIDS[@]}") socks=("${REDIS_SOCKS[@]}")
	BATS_TEST_TMPDIR=$BATS_FILE_TMPDIR redis_start || return 1
	printf '%s\n' "${REDIS_PIDS[-1]}" "$REDIS_SOCK" >"$f"
	REDIS_PIDS=("${pids[@]}")
	REDIS_SOCKS=("${socks[@]}")
}

# teardown_file: the file's redis-server of the shared store's run, if
# one was started (not a child of this process: its end is seen by
# kill -0).  A suite with a teardown_file of its own calls it.
teardown_file() {
	_redis_file_stop
	_cluster_file_stop
}

# The file's cluster of the cluster run (STATEFS_STORE=cluster): started
# here, before the first test, with the library loaded on every primary;
# what the tests need of it exported (a test is a process of its own):
# CLUSTER_SEEDS, CLUSTER_PORT_LIST and CLUSTER_PID_LIST, which each test
# finds again as CLUSTER_PORTS and CLUSTER_PIDS.  A start that fails
# stops what it started.  A suite with a setup_file of its own calls
# _cluster_file_start from it.
if [ "${STATEFS_STORE:-embedded}" = cluster ]; then
	# A store on a cluster is of the tenant layout: the tests that
	# assert that layout's meaning (ceilings, the root's order) ask this.
	export STATEFS_STORE_LAYOUT=tenant
	setup_file() {
		_cluster_file_start
	}
	if [ -n "${CLUSTER_PORT_LIST:-}" ]; then
		read -r -a CLUSTER_PORTS <<<"$CLUSTER_PORT_LIST"
		read -r -a CLUSTER_PIDS <<<"$CLUSTER_PID_LIST"
	fi
fi
_cluster_file_start() {
	local saved=("${REDIS_PIDS[@]}")
	BATS_TEST_TMPDIR=$BATS_FILE_TMPDIR cluster_start 3 1 || {
		redis_stop_all
		return 1
	}
	if [ -r "$REDIS_LIBRARY" ]; then
		cluster_load_library || {
			redis_stop_all
			return 1
		}
	fi
	CLUSTER_PORT_LIST="${CLUSTER_PORTS[*]}"
	CLUSTER_PID_LIST="${CLUSTER_PIDS[*]}"
	export CLUSTER_SEEDS CLUSTER_PORT_LIST CLUSTER_PID_LIST
	printf '%s\n' "${CLUSTER_PIDS[@]}" >"$BATS_FILE_TMPDIR/cluster-file"
	REDIS_PIDS=("${saved[@]}")
}
_cluster_file_stop() {
	local f=$BATS_FILE_TMPDIR/cluster-file pid
	[ -r "$f" ] || return 0
	while read -r pid; do
		_redis_stop_one "$pid"
	done <"$f"
	rm -f "$f"
	return 0
}
_redis_file_stop() {
	local f=$BATS_FILE_TMPDIR/redis-file pid sock i
	[ -r "$f" ] || return 0
	{ read -r pid; read -r sock; } <"$f"
	rm -f "$f"
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 500; i++)); do
		proc_alive "$pid" || return 0
		statefs_sleep 0.02
	done
	kill -KILL "$pid" 2>/dev/null
	return 0
}

# statefs_remount [args...]: replace this test's mount(s) with a new one.
statefs_remount() {
	statefs_unmount || return 1
	statefs_mount "$@"
}

# The default teardown: close the descriptors tests use for old handles
# (an open file keeps the mount busy), then unmount.  A suite that needs
# more must call statefs_unmount itself.
teardown() {
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount
}

# py_errno CODE [ARGS...]: run one python statement (sys.argv[1:] are
# ARGS; os, sys, stat and errno are imported) and print OK, or the errno
# name of the OSError it raised.
py_errno() {
	local code=$1
	shift
	python3 -c "import os, sys, stat, errno
try:
    $code
    print('OK')
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))" "$@"
}

# xattr NAME PATH: print the value of extended attribute NAME of PATH.
xattr() {
	getfattr --absolute-names -n "$1" --only-values -- "$2"
}
gen() { xattr user.statefs.generation "$1"; }
ver() { xattr user.statefs.version "$1"; }

# stat_of KEY [DIR]: the value of KEY in DIR/.stats (DIR defaults to $MNT).
stat_of() {
	awk -v k="$1" '$1 == k { print $2; f = 1 } END { exit !f }' "${2:-$MNT}/.stats"
}

# gauges [DIR]: the lines of DIR/.stats that count what exists.
gauges() {
	grep -E '^(tenants|parents|children|links|tombstones|bytes)[[:space:]]' "${1:-$MNT}/.stats"
}

# as_nobody CMD...: run CMD as uid 65534, gid 65534, no supplementary groups.
as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
}

# --- Leases, the event stream and inotify (leases/events/watch suites) ---
#
#   advance MS                  move the manual clock (-o testclock) MS ms on
#   clock_ms                    the manual clock's reading, in ms
#   ttl PATH / child_ttl PATH   user.statefs.ttl / .child_ttl, in seconds
#   set_ttl S PATH              setfattr user.statefs.ttl
#   evlines OP T P C G V ...    the expected event lines without their
#                               sequence numbers (6 fields a line, tabs)
#   events_bg OUT N [DIR]       open DIR/.events (default $MNT) now, then copy
#                               its next N lines to OUT in the background
#                               (gives up after 5 s); events_wait waits
#   watch_start OUT DIR [OPTS]  inotifywait -m DIR in the background, "%e %f"
#                               lines to OUT; returns once watches are set
#   wait_line FILE LINE [SECS]  wait (default 3 s) until FILE has LINE
#   bg_stop                     stop every background reader of this test
#   bg_teardown                 teardown for suites with background readers

# Background processes (readers, watchers) of the current test.
BG_PIDS=()

advance() {
	echo "$1" >"$MNT/.clock"
}
clock_ms() {
	cat "$MNT/.clock"
}
ttl() { xattr user.statefs.ttl "$1"; }
child_ttl() { xattr user.statefs.child_ttl "$1"; }
set_ttl() {
	setfattr -n user.statefs.ttl -v "$1" -- "$2"
}

evlines() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@"
}

events_bg() {
	local out=$1 n=$2 dir=${3:-$MNT}
	# Opened here, synchronously: the reader starts at this point.
	exec 9<"$dir/.events" || return 1
	timeout 5 head -n "$n" <&9 >"$out" 2>"$out.err" 9<&- 3>&- &
	BG_PIDS+=($!)
	exec 9<&-
}

events_wait() {
	local p
	for p in "${BG_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	BG_PIDS=()
}

watch_start() {
	local out=$1 dir=$2 i
	shift 2
	inotifywait -m --format '%e %f' "$@" "$dir" >"$out" 2>"$out.err" 3>&- &
	BG_PIDS+=($!)
	local text
	for ((i = 0; i < 100; i++)); do
		text=
		IFS= read -r -d '' text <"$out.err" 2>/dev/null || :
		[[ $text == *'Watches established'* ]] && return 0
		statefs_sleep 0.05
	done
	fail "inotifywait $dir did not start: $(cat "$out.err")"
}

wait_line() {
	local file=$1 line=$2 secs=${3:-3} i
	for ((i = 0; i < secs * 20; i++)); do
		file_has_line "$file" "$line" && return 0
		statefs_sleep 0.05
	done
	fail "no line '$line' in $file within $secs s; it has:
$(cat "$file")"
}

bg_stop() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	BG_PIDS=()
}

bg_teardown() {
	bg_stop
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount
}

# --- Drain and signals (drain suite) ---
#
#   now_ms                      the real time in ms (for elapsed times)
#   statefs_wait_exit SECS      wait up to SECS s for this test's newest
#                               daemon ($STATEFS_PID) to exit by itself (as
#                               it does after a signal drain); sets
#                               STATEFS_STATUS (its exit status) and
#                               STATEFS_EXIT_MS (when it was seen gone, by
#                               now_ms), then forgets the mount so that the
#                               teardown does not unmount it or wait for that
#                               pid again (its log is kept in
#                               STATEFS_GONE_LOGS).  Fails, leaving the mount
#                               to the teardown, when the daemon still runs.
#                               STATEFS_LEFT_MOUNTED is 1 when the daemon
#                               exited but its mountpoint was still in
#                               /proc/mounts (the helper then unmounts it).

STATEFS_GONE_LOGS=()

now_ms() {
	local t=${EPOCHREALTIME/./}
	echo $((t / 1000))
}

statefs_wait_exit() {
	local secs=$1 i entry keep=()
	for ((i = 0; i < secs * 50; i++)); do
		proc_alive "$STATEFS_PID" || break
		statefs_sleep 0.02
	done
	if proc_alive "$STATEFS_PID"; then
		fail "statefs (pid $STATEFS_PID) still running $secs s later"
		return 1
	fi
	STATEFS_EXIT_MS=$(now_ms)
	STATEFS_STATUS=0
	wait "$STATEFS_PID" || STATEFS_STATUS=$?
	for entry in "${STATEFS_MOUNTS[@]}"; do
		if [ "${entry%% *}" = "$STATEFS_PID" ]; then
			STATEFS_GONE_LOGS+=("${entry##* }")
		else
			keep+=("$entry")
		fi
	done
	STATEFS_MOUNTS=("${keep[@]}")
	# A daemon that exited and left its mount behind: record it for the
	# test, and unmount it here (the teardown no longer knows it).
	STATEFS_LEFT_MOUNTED=0
	local mounts=
	IFS= read -r -d '' mounts </proc/mounts || :
	if [[ $mounts == *" $MNT "* ]]; then
		STATEFS_LEFT_MOUNTED=1
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
	fi
	rmdir "$MNT" "${MNT%/*}" 2>/dev/null
	return 0
}

# --- Whole-run recording (lease_stress suite) ---
#
#   events_record OUT [DIR]     open DIR/.events (default $MNT) now, then copy
#                               every line it gives to OUT in the background
#                               until bg_stop (no line count, no time limit)
#   wait_quiet FILE MS [SECS]   wait (at most SECS s, default 10) until FILE
#                               has not grown for MS ms

events_record() {
	local out=$1 dir=${2:-$MNT}
	# Opened here, synchronously: the recording starts at this point.
	exec 9<"$dir/.events" || return 1
	cat <&9 >"$out" 2>"$out.err" 9<&- 3>&- &
	BG_PIDS+=($!)
	exec 9<&-
}

wait_quiet() {
	local file=$1 ms=$2 secs=${3:-10} size last t0 since
	t0=$(now_ms)
	last=$(stat -c %s "$file")
	since=$t0
	while :; do
		statefs_sleep 0.05
		size=$(stat -c %s "$file")
		if [ "$size" != "$last" ]; then
			last=$size
			since=$(now_ms)
		elif [ $(($(now_ms) - since)) -ge "$ms" ]; then
			return 0
		fi
		if [ $(($(now_ms) - t0)) -ge $((secs * 1000)) ]; then
			fail "$file still growing after $secs s (size $size)"
			return 1
		fi
	done
}

# --- Special mounts and dead daemons (faults, leaks suites) ---
#
#   statefs_mount_at DIR [args]   statefs_mount at an existing empty directory
#                                 DIR (e.g. the mountpoint of a killed
#                                 daemon) instead of a new temporary one
#   statefs_mount_under SECS CMD... -- [args]
#                                 statefs_mount with the daemon run under CMD
#                                 (valgrind ...); waits up to SECS s for the
#                                 mount.  STATEFS_PID is CMD's pid (valgrind
#                                 runs the daemon in its own process)
#   statefs_kill9                 SIGKILL this test's newest daemon, reap it
#                                 (STATEFS_STATUS: its wait status) and hand
#                                 its mountpoint to dead_teardown instead of
#                                 the ordinary unmount (whose status check
#                                 would count the kill as a crash)
#   dead_teardown                 teardown for suites that kill daemons:
#                                 stops BG_PIDS, unmounts the live mounts,
#                                 then detaches the dead ones (-u, else -uz)

STATEFS_DEAD=() # mountpoints of daemons killed by statefs_kill9

# _statefs_start SECS MNT WRAP... -- ARGS...: start the daemon (under WRAP,
# which may be empty) at MNT and wait up to SECS s for the FUSE mount.
_statefs_start() {
	local secs=$1 mnt=$2 wrap=() i
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		wrap+=("$1")
		shift
	done
	[ "${1:-}" = -- ] && shift
	if [ ! -x "$STATEFS_BIN" ]; then
		fail "statefs binary not found at $STATEFS_BIN (run make)"
		return 1
	fi
	MNT=$mnt
	STATEFS_NMOUNTS=$((STATEFS_NMOUNTS + 1))
	STATEFS_LOG="${BATS_TEST_TMPDIR:-${mnt%/*}}/statefs.$STATEFS_NMOUNTS.log"
	local store=()
	if [ "${STATEFS_STORE:-embedded}" = redis ]; then
		_redis_file_server || return 1
		store=(-o "store=unix:$REDIS_SOCK,store_prefix=m$BATS_TEST_NUMBER.$STATEFS_NMOUNTS")
	elif [ "${STATEFS_STORE:-embedded}" = cluster ]; then
		[ -n "${CLUSTER_SEEDS:-}" ] || {
			fail "STATEFS_STORE=cluster: no cluster (setup_file: _cluster_file_start)"
			return 1
		}
		store=(-o "store=cluster://$CLUSTER_SEEDS,store_prefix=m$BATS_TEST_NUMBER.$STATEFS_NMOUNTS,store_layout=tenant")
	fi
	# STATEFS_STORE_LAYOUT=tenant: every shared store a mount makes is
	# of the tenant layout (each tenant's facts in its own slot).
	if [ -n "${STATEFS_STORE_LAYOUT:-}" ] &&
		{ [ ${#store[@]} -gt 0 ] || [[ " $* " == *store=* ]]; }; then
		store+=(-o "store_layout=$STATEFS_STORE_LAYOUT")
	fi
	# fd 3 is bats' output channel: a background child must not keep it.
	"${wrap[@]}" "$STATEFS_BIN" -f "${store[@]}" "$@" "$MNT" </dev/null >"$STATEFS_LOG" 2>&1 3>&- &
	STATEFS_PID=$!
	STATEFS_MOUNTS+=("$STATEFS_PID $MNT $STATEFS_LOG")
	export MNT STATEFS_PID STATEFS_LOG
	for ((i = 0; i < secs * 100; i++)); do
		_statefs_mounted "$MNT" && return 0
		proc_alive "$STATEFS_PID" || break
		statefs_sleep 0.01
	done
	# The teardown shows the daemon's log.
	fail "statefs did not mount at $MNT within $secs s (${wrap[*]} args: ${store[*]} $*)"
}

statefs_mount_at() {
	local dir=$1
	shift
	if [ ! -d "$dir" ] || _statefs_mounted "$dir"; then
		fail "statefs_mount_at: $dir is not an unmounted directory"
		return 1
	fi
	_statefs_start 5 "$dir" -- "$@"
}

statefs_mount_under() {
	local secs=$1
	shift
	_statefs_mkdir || return 1
	_statefs_start "$secs" "$_STATEFS_DIR/mnt" "$@"
}

statefs_kill9() {
	local i entry keep=()
	kill -KILL "$STATEFS_PID" 2>/dev/null
	for ((i = 0; i < 500; i++)); do
		proc_alive "$STATEFS_PID" || break
		statefs_sleep 0.01
	done
	if proc_alive "$STATEFS_PID"; then
		fail "statefs (pid $STATEFS_PID) still running 5 s after SIGKILL"
		return 1
	fi
	STATEFS_STATUS=0
	wait "$STATEFS_PID" 2>/dev/null || STATEFS_STATUS=$?
	for entry in "${STATEFS_MOUNTS[@]}"; do
		if [ "${entry%% *}" = "$STATEFS_PID" ]; then
			entry=${entry#* }
			STATEFS_DEAD+=("${entry%% *}")
		else
			keep+=("$entry")
		fi
	done
	STATEFS_MOUNTS=("${keep[@]}")
}

dead_teardown() {
	local rc=0 mnt
	bg_stop
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount || rc=1
	for mnt in "${STATEFS_DEAD[@]}"; do
		if _statefs_mounted "$mnt"; then
			timeout 5 fusermount3 -u "$mnt" 2>/dev/null ||
				timeout 5 fusermount3 -uz "$mnt" 2>/dev/null
		fi
		if _statefs_mounted "$mnt"; then
			echo "dead mount $mnt could not be detached" >&2
			rc=1
		fi
		rmdir "$mnt" "${mnt%/*}" 2>/dev/null
	done
	STATEFS_DEAD=()
	return "$rc"
}

# --- Last resort against a wedged mount (leaks suite) ---
#
#   fuse_abort MNT               abort MNT's FUSE connection through fusectl
#                                (/sys/fs/fuse/connections/N/abort, mounting
#                                fusectl there when it is not): every request
#                                waiting on the daemon, even in an
#                                uninterruptible wait, ends with ENOTCONN.
#   watchdog_start SECS MNT      fuse_abort MNT in the background after SECS s
#                                (a hang becomes a failure instead of a stuck
#                                run); watchdog_stop cancels it

fuse_abort() {
	local mnt=$1 minor
	# mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE ...
	minor=$(awk -v m="$mnt" '$5 == m {
			for (i = 7; i < NF; i++) if ($i == "-") break
			if ($(i + 1) ~ /^fuse/) { split($3, d, ":"); print d[2] }
		}' /proc/self/mountinfo | tail -n 1)
	[ -n "$minor" ] || return 1
	if [ ! -e /sys/fs/fuse/connections/"$minor"/abort ]; then
		mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null
	fi
	echo 1 >/sys/fs/fuse/connections/"$minor"/abort
}

WATCHDOG_PID=
watchdog_start() {
	local secs=$1 mnt=$2
	(
		trap 'kill "$s" 2>/dev/null; exit 0' TERM
		sleep "$secs" &
		s=$!
		wait "$s"
		echo "watchdog: $mnt still busy after $secs s; aborting its connection" >&2
		fuse_abort "$mnt"
	) 3>&- &
	WATCHDOG_PID=$!
}
watchdog_stop() {
	if [ -n "$WATCHDOG_PID" ]; then
		kill "$WATCHDOG_PID" 2>/dev/null
		wait "$WATCHDOG_PID" 2>/dev/null
	fi
	WATCHDOG_PID=
}
