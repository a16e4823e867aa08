#!/usr/bin/env bats
# docs/shared-store.md, "What every mount sees": two and three mounts of one shared store,
# as hosts would have, racing each other.  Each test starts its own
# redis-server (redis_helpers.bash) and mounts it two or three times with
# -o store=unix:SOCK.  shared.bats holds the one-shot cases (one create
# against one, one rm, one edit); here the races are repeated over many
# rounds from three mounts at once and the outcome is counted: one winner
# a round, ceilings and quotas exact store-wide, every mount's .stats and
# .events the same, old handles and working directories refused, a lease
# ending without the mount that set it, links and renames seen everywhere.
# A mount waits for the others' changes with fsync of a directory, never
# with a sleep.  The mounts are explicit here, whichever backend the rest
# of the run uses.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

setup() {
	redis_start
	OUT=$BATS_TEST_TMPDIR
}

# dead_teardown stops background readers, unmounts the live mounts and
# detaches the mountpoint of a daemon a test killed.
teardown() {
	local rc=0
	dead_teardown || rc=1
	redis_stop_all
	return "$rc"
}

# race OP ROUNDS PATH_FMT MNT...: one thread per mountpoint; in each round
# r the threads meet at a barrier, then each runs OP on MNT/(PATH_FMT % r)
# at once.  Prints one line a round: r and each mount's outcome (OK or the
# errno name), in the order of the mounts.  OPs: create (O_CREAT|O_EXCL,
# then writes the mount's index), unlink, mkdir, rmdir, rename (to
# PATH_FMT % r with ".mI" appended, I the mount's index).
race() {
	python3 - "$@" <<'EOF'
import errno, os, sys, threading
op, rounds, fmt, mnts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
barrier = threading.Barrier(len(mnts))
out = [[None] * len(mnts) for _ in range(rounds)]

def one(i, path):
    if op == "create":
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            os.write(fd, b"%d\n" % i)
        finally:
            os.close(fd)
    elif op == "unlink":
        os.unlink(path)
    elif op == "mkdir":
        os.mkdir(path)
    elif op == "rmdir":
        os.rmdir(path)
    elif op == "rename":
        os.rename(path, "%s.m%d" % (path, i))

def run(i):
    for r in range(rounds):
        path = os.path.join(mnts[i], fmt % r)
        barrier.wait()
        try:
            one(i, path)
            out[r][i] = "OK"
        except OSError as e:
            out[r][i] = errno.errorcode.get(e.errno, str(e.errno))

threads = [threading.Thread(target=run, args=(i,)) for i in range(len(mnts))]
for t in threads:
    t.start()
for t in threads:
    t.join()
for r in range(rounds):
    print(r, *out[r])
EOF
}

# one_winner LOSER: every line of $output (from race) has exactly one OK
# and LOSER for every other mount.
one_winner() {
	local loser=$1 bad
	bad=$(awk -v l="$loser" '{
			ok = 0; other = 0
			for (i = 2; i <= NF; i++)
				if ($i == "OK") ok++; else if ($i != l) other++
			if (ok != 1 || other) print
		}' <<<"$output")
	[ -z "$bad" ] || fail "rounds without exactly one winner and $loser losers:
$bad"
}

# attempt OP PATH: run the shell tool (touch or mkdir) and print OK or the
# message's errno text (after the last ': ').  Exported for xargs.
attempt() {
	local msg
	if msg=$("$1" "$2" 2>&1); then
		echo OK
	else
		echo "${msg##*: }"
	fi
}
export -f attempt

# same_stats DIR MNT...: the gauges of DIR's .stats (DIR relative to each
# mount, "" for the root) are the same on every mount; then $output holds
# them, for assert_line.
same_stats() {
	local dir=$1 m
	shift
	run gauges "$1$dir"
	for m in "$@"; do
		assert_equal "$(gauges "$m$dir")" "$output"
	done
}

# --- one winner a round ---------------------------------------------------

@test "three mounts race exclusive creates of one name, 40 rounds: one winner each, the losers EEXIST, every mount shows the winner's state" {
	mount3
	mkdir -p "$A/t/p"
	fsyncdir "$B" "$C"
	run race create 40 t/p/c%d "$A" "$B" "$C"
	assert_success
	assert_equal "${#lines[@]}" 40
	one_winner EEXIST
	fsyncdir "$A" "$B" "$C"
	# The winner's index is what each round's child holds, on every mount.
	local r want m
	for r in $(seq 0 39); do
		want=$(awk -v r="$r" '$1 == r { for (i = 2; i <= NF; i++) if ($i == "OK") print i - 2 }' <<<"$output")
		for m in "$A" "$B" "$C"; do
			assert_equal "$(cat "$m/t/p/c$r")" "$want"
			assert_equal "$(ver "$m/t/p/c$r")" 1
		done
	done
	run stat_of children "$C"
	assert_output 40
	run stat_of admissions "$B"
	assert_output 40
}

@test "three mounts race rm of one child, 40 rounds: exactly one rm succeeds, the others get ENOENT" {
	mount3
	mkdir -p "$A/t/p"
	for r in $(seq 0 39); do
		echo "$r" >"$A/t/p/c$r"
	done
	fsyncdir "$B" "$C"
	run ls "$C/t/p"
	assert_equal "${#lines[@]}" 40
	run race unlink 40 t/p/c%d "$A" "$B" "$C"
	assert_success
	one_winner ENOENT
	fsyncdir "$A" "$B" "$C"
	for m in "$A" "$B" "$C"; do
		run ls "$m/t/p"
		assert_output ''
	done
	run stat_of removals "$B"
	assert_output 40
	run stat_of children "$C"
	assert_output 0
}

@test "three mounts race mv of one child to different names, 30 rounds: one rename wins (ENOENT for the others), one state at the end" {
	mount3
	mkdir -p "$A/t/p"
	for r in $(seq 0 29); do
		echo "$r" >"$A/t/p/c$r"
	done
	fsyncdir "$B" "$C"
	run race rename 30 t/p/c%d "$A" "$B" "$C"
	assert_success
	one_winner ENOENT
	fsyncdir "$A" "$B" "$C"
	# Each state lives on under the winner's name only, on every mount.
	local r i m
	for r in $(seq 0 29); do
		i=$(awk -v r="$r" '$1 == r { for (i = 2; i <= NF; i++) if ($i == "OK") print i - 2 }' <<<"$output")
		for m in "$A" "$B" "$C"; do
			assert_equal "$(cat "$m/t/p/c$r.m$i")" "$r"
			[ ! -e "$m/t/p/c$r" ]
		done
	done
	for m in "$A" "$B" "$C"; do
		run bash -c 'ls "$1" | wc -l' _ "$m/t/p"
		assert_output 30
	done
	run stat_of children "$B"
	assert_output 30
}

@test "three mounts race mkdir of one parent and its rmdir, 30 rounds: one join and one leave a round" {
	mount3
	mkdir "$A/t"
	fsyncdir "$B" "$C"
	run race mkdir 30 t/p%d "$A" "$B" "$C"
	assert_success
	one_winner EEXIST
	fsyncdir "$A" "$B" "$C"
	for m in "$A" "$B" "$C"; do
		assert_equal "$(gen "$m/t/p7")" 1
	done
	run race rmdir 30 t/p%d "$A" "$B" "$C"
	assert_success
	one_winner ENOENT
	fsyncdir "$A" "$B" "$C"
	for m in "$A" "$B" "$C"; do
		run ls "$m/t"
		assert_output ''
	done
	# Parents only: a tenant's mkdir is no join.
	run stat_of joins "$C"
	assert_output 30
	run stat_of leaves "$A"
	assert_output 30
	run stat_of tombstones "$B"
	assert_output 30
}

# --- ceilings and quotas, filled from three mounts at once -----------------

# fill OP MNT...: for each path read from stdin (relative to a mount), one
# attempt of OP (touch or mkdir) on it, the mounts taken in turn, six
# attempts at a time with xargs -P; prints one outcome a line (OK or the
# error text).
fill() {
	local op=$1 i=0 path
	shift
	local mnts=("$@")
	while read -r path; do
		echo "$op ${mnts[i % ${#mnts[@]}]}/$path"
		i=$((i + 1))
	done | xargs -P 6 -L 1 bash -c 'attempt "$@"' _
}

# count TEXT: how many lines of $output are TEXT.
count() {
	grep -cxF -- "$1" <<<"$output" || true
}

@test "max_children filled from three mounts with xargs -P: exactly the ceiling admitted, the rest ENOSPC; every mount's .stats agrees with find" {
	mount3 -o max_children=24,tenant_max_children=0
	mkdir -p "$A/t/p1" "$A/t/p2" "$A/t/p3"
	fsyncdir "$B" "$C"
	run fill touch "$A" "$B" "$C" < <(for i in $(seq 90); do echo "t/p$((i % 3 + 1))/c$i"; done)
	assert_success
	assert_equal "${#lines[@]}" 90
	assert_equal "$(count OK)" 24
	assert_equal "$(count 'No space left on device')" 66
	fsyncdir "$A/t" "$B/t" "$C/t"
	same_stats "" "$A" "$B" "$C"
	assert_line 'children 24'
	local m
	for m in "$A" "$B" "$C"; do
		assert_equal "$(find "$m/t" -mindepth 2 -type f | wc -l)" 24
		assert_equal "$(stat_of refused_capacity "$m")" 66
	done
	# A place freed on one mount is taken on another, and only one.
	rm "$(find "$B/t" -mindepth 2 -type f | head -n 1)"
	run fill touch "$C" "$A" < <(for i in $(seq 6); do echo "t/p1/d$i"; done)
	assert_equal "$(count OK)" 1
	fsyncdir "$A" "$B" "$C"
	same_stats "" "$A" "$B" "$C"
	assert_line 'children 24'
}

@test "tenant_quota and parent_quota filled from three mounts with xargs -P: exact, the rest EDQUOT; .stats agrees everywhere" {
	mount3 -o tenant_quota=15,parent_quota=6
	mkdir -p "$A/t/p1" "$A/t/p2" "$A/t/p3" "$A/u/p"
	fsyncdir "$B" "$C"
	# Three parents of 6 would hold 18: the tenant's 15 binds.
	run fill touch "$A" "$B" "$C" < <(for i in $(seq 60); do echo "t/p$((i % 3 + 1))/c$i"; done)
	assert_success
	assert_equal "$(count OK)" 15
	assert_equal "$(count 'Disk quota exceeded')" 45
	# One parent: its 6 bind.
	run fill touch "$B" "$C" "$A" < <(for i in $(seq 30); do echo "u/p/c$i"; done)
	assert_equal "$(count OK)" 6
	assert_equal "$(count 'Disk quota exceeded')" 24
	fsyncdir "$A/t" "$B/t" "$C/t"
	local m p
	for m in "$A" "$B" "$C"; do
		assert_equal "$(find "$m/t" -mindepth 2 -type f | wc -l)" 15
		assert_equal "$(find "$m/u" -mindepth 2 -type f | wc -l)" 6
		for p in p1 p2 p3; do
			[ "$(find "$m/t/$p" -mindepth 1 | wc -l)" -le 6 ] || fail "$m/t/$p holds more than 6"
		done
		assert_equal "$(stat_of refused_quota "$m")" 69
	done
	same_stats /t "$A" "$B" "$C"
	assert_line 'children 15'
	same_stats /u "$A" "$B" "$C"
	assert_line 'children 6'
	same_stats "" "$A" "$B" "$C"
	assert_line 'children 21'
}

@test "max_tenants and max_parents filled with mkdir from three mounts with xargs -P: exact, the rest ENOSPC; .stats agrees with find" {
	mount3 -o max_tenants=4,max_parents=10,tenant_max_parents=0
	run fill mkdir "$A" "$B" "$C" < <(for i in $(seq 12); do echo "t$i"; done)
	assert_success
	assert_equal "$(count OK)" 4
	assert_equal "$(count 'No space left on device')" 8
	fsyncdir "$A" "$B" "$C"
	local ts
	ts=$(ls "$A")
	assert_equal "$(ls "$B")" "$ts"
	assert_equal "$(ls "$C")" "$ts"
	# The tenant layout (each tenant in its own slot): a store-wide
	# ceiling bounds each tenant as if it were the store alone, so the
	# four tenants take 10 parents each, 15 tried each.
	local tries=40 made=10
	if [ "${STATEFS_STORE_LAYOUT:-}" = tenant ]; then
		tries=60 made=40
	fi
	run fill mkdir "$C" "$B" "$A" < <(for i in $(seq 40); do for t in $ts; do echo "$t/p$i"; done; done | head -n $tries)
	assert_equal "$(count OK)" $made
	assert_equal "$(count 'No space left on device')" $((tries - made))
	fsyncdir "$A" "$B" "$C"
	local m
	for m in "$A" "$B" "$C"; do
		assert_equal "$(find "$m" -mindepth 2 -maxdepth 2 -type d | wc -l)" $made
		assert_equal "$(find "$m" -mindepth 1 -maxdepth 1 -type d | wc -l)" 4
	done
	same_stats "" "$A" "$B" "$C"
	assert_line 'tenants 4'
	assert_line "parents $made"
}

# --- compare-and-swap across mounts ---------------------------------------

@test "in-place edits opened on three mounts against one version: the first close wins, the other two get EAGAIN and change nothing" {
	mount3
	mkdir -p "$A/t/p"
	echo base >"$A/t/p/c"
	fsyncdir "$B" "$C"
	run python3 - "$A/t/p/c" "$B/t/p/c" "$C/t/p/c" <<'PY'
import errno, os, sys
fds = [os.open(p, os.O_RDWR) for p in sys.argv[1:]]
for fd, label in zip(fds, b"ABC"):
    os.pwrite(fd, bytes([label]), 0)
out = []
for fd in fds:
    try:
        os.close(fd)
        out.append("OK")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(*out)
PY
	assert_output 'OK EAGAIN EAGAIN'
	fsyncdir "$A" "$B" "$C"
	for m in "$A" "$B" "$C"; do
		assert_equal "$(cat "$m/t/p/c")" Aase
		assert_equal "$(ver "$m/t/p/c")" 2
	done
	# An append from another mount moves the base too.
	exec 5<>"$C/t/p/c"
	echo more >>"$B/t/p/c"
	run py_errno 'os.pwrite(5, b"C", 0); os.close(5)'
	assert_output EAGAIN
	exec 5>&-
	# With nothing in between, an in-place edit on a third mount wins.
	fsyncdir "$A"
	exec 5<>"$A/t/p/c"
	run py_errno 'os.pwrite(5, b"a", 0); os.close(5)'
	assert_output OK
	exec 5>&-
	fsyncdir "$B" "$C"
	for m in "$A" "$B" "$C"; do
		assert_equal "$(cat "$m/t/p/c")" "$(printf 'aase\nmore')"
		assert_equal "$(ver "$m/t/p/c")" 4
	done
}

@test "a counter incremented by compare-and-swap from three mounts at once loses no increment" {
	mount3
	mkdir -p "$A/t/p"
	echo 0 >"$A/t/p/n"
	fsyncdir "$B" "$C"
	# Each mount adds 1 twenty times: open, read, write in place, close;
	# on EAGAIN it catches up (fsync of the parent) and tries again.
	run python3 - 20 "$A" "$B" "$C" <<'PY'
import errno, os, sys, threading
n, mnts = int(sys.argv[1]), sys.argv[2:]
conflicts = [0] * len(mnts)
errors = []

def work(i):
    path = mnts[i] + "/t/p/n"
    done = tries = 0
    while done < n and tries < 100 * n:
        tries += 1
        fd = os.open(path, os.O_RDWR)
        try:
            v = int(os.pread(fd, 64, 0))
            os.pwrite(fd, b"%d\n" % (v + 1), 0)
        except OSError as e:
            errors.append(errno.errorcode[e.errno])
        try:
            os.close(fd)
            done += 1
        except OSError as e:
            if e.errno != errno.EAGAIN:
                errors.append(errno.errorcode[e.errno])
                return
            conflicts[i] += 1
            d = os.open(mnts[i] + "/t/p", os.O_RDONLY)
            os.fsync(d)
            os.close(d)
    if done < n:
        errors.append("gave up after %d tries" % tries)

threads = [threading.Thread(target=work, args=(i,)) for i in range(len(mnts))]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("errors", len(errors), *errors)
print("conflicts", sum(conflicts))
PY
	assert_success
	assert_line 'errors 0'
	fsyncdir "$A" "$B" "$C"
	for m in "$A" "$B" "$C"; do
		assert_equal "$(cat "$m/t/p/n")" 60
		# One publication per increment, after the first echo.
		assert_equal "$(ver "$m/t/p/n")" 61
	done
}

# --- old incarnations across mounts ---------------------------------------

# stale_or_gone FILE: FILE holds a tool's failure, ESTALE, or ENOENT (once
# the kernel has been told the directory went, it answers ENOENT in it
# itself, as after a local rmdir; tree.bats accepts the same).
stale_or_gone() {
	grep -qE 'Stale file handle|No such file or directory' "$1" ||
		fail "expected ESTALE or ENOENT in $1, got: $(cat "$1")"
	grep -qx 'status 0' "$1" && fail "$1: the tool succeeded: $(cat "$1")"
	return 0
}

@test "open handles of a child that another mount removed and re-created get ESTALE on two mounts, and never touch the new one" {
	mount3
	mkdir -p "$A/t/p"
	echo old >"$A/t/p/c"
	fsyncdir "$B" "$C"
	old=$(stat -c %i "$A/t/p/c")
	exec 5<>"$A/t/p/c"
	exec 6<"$C/t/p/c"
	rm "$B/t/p/c"
	echo new >"$B/t/p/c"
	chmod 640 "$B/t/p/c"
	# No catching up on A first: what goes to the store through A's old
	# handle reaches the store's newer incarnation, and is refused there.
	run py_errno 'os.utime(5)'
	assert_output ESTALE
	run py_errno 'os.fchmod(5, 0o600)'
	assert_output ESTALE
	run py_errno 'os.pwrite(5, b"X", 0); os.close(5)'
	assert_output ESTALE
	exec 5>&-
	fsyncdir "$C"
	run py_errno 'os.read(6, 10)'
	assert_output ESTALE
	exec 6<&-
	fsyncdir "$A"
	for m in "$A" "$B" "$C"; do
		assert_equal "$(cat "$m/t/p/c")" new
		assert_equal "$(ver "$m/t/p/c")" 1
		assert_equal "$(stat -c %a "$m/t/p/c")" 640
		refute [ "$(stat -c %i "$m/t/p/c")" = "$old" ]
	done
	run stat_of children "$A"
	assert_output 1
}

@test "a directory handle of a parent that left and rejoined on another mount admits nothing and removes nothing" {
	mount3
	mkdir -p "$A/t/p"
	touch "$A/t/p/c"
	fsyncdir "$B" "$C"
	exec 7<"$A/t/p"
	rmdir "$B/t/p"
	mkdir "$C/t/p"
	echo new >"$C/t/p/c"
	run python3 - <<'PY'
import os
for what, f in (("create", lambda: os.close(os.open("x", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=7))),
                ("unlink", lambda: os.unlink("c", dir_fd=7)),
                ("rename", lambda: os.rename("c", "z", src_dir_fd=7, dst_dir_fd=7))):
    try:
        f()
        print(what, "OK")
    except OSError as e:
        print(what, os.strerror(e.errno))
PY
	exec 7<&-
	refute_line --partial OK
	for l in "${lines[@]}"; do
		[[ $l == *'Stale file handle' || $l == *'No such file or directory' ]] ||
			fail "unexpected: $l"
	done
	fsyncdir "$A" "$B" "$C"
	for m in "$A" "$B" "$C"; do
		run ls "$m/t/p"
		assert_output c
		assert_equal "$(cat "$m/t/p/c")" new
		assert_equal "$(gen "$m/t/p")" 2
	done
}

@test "a shell whose working directory is a parent that left on another mount: ls, touch, cat and rm fail with ESTALE or ENOENT, also after a rejoin" {
	mount3
	mkdir -p "$A/t/p"
	echo x >"$A/t/p/c"
	fsyncdir "$B"
	# One shell, in A/t/p throughout; each tool's output and status to a
	# file (a wrapper script may complain about the lost cwd: dropped).
	# The fsync runs from / (python3 may be a wrapper that changes to its
	# working directory first).
	run env A="$A" B="$B" OUT="$OUT" bash -c '
		try() { local f=$1; shift; "$@" >"$OUT/$f" 2>&1; echo "status $?" >>"$OUT/$f"; }
		cd "$A/t/p" || exit 9
		try ls0 ls
		rmdir "$B/t/p" || exit 8
		(cd / && python3 -c "import os; os.fsync(os.open(\"$A/t\", os.O_RDONLY))") || exit 7
		try ls1 ls
		try touch1 touch x
		try cat1 cat c
		mkdir "$B/t/p" && echo new >"$B/t/p/c" || exit 6
		(cd / && python3 -c "import os; os.fsync(os.open(\"$A/t\", os.O_RDONLY))") || exit 5
		try ls2 ls
		try touch2 touch y
		try rm2 rm c
		try cat2 cat c
		exit 0' _ 2>/dev/null
	assert_success
	run cat "$OUT/ls0"
	assert_output "$(printf 'c\nstatus 0')"
	local f
	for f in ls1 touch1 cat1 ls2 touch2 rm2 cat2; do
		stale_or_gone "$OUT/$f"
		# Nothing of either incarnation is listed through the old directory.
		run grep -x c "$OUT/$f"
		assert_failure
	done
	for m in "$A" "$B" "$C"; do
		run ls "$m/t/p"
		assert_output c
		assert_equal "$(cat "$m/t/p/c")" new
	done
}

# --- one order on every mount ---------------------------------------------

# wait_grep FILE REGEX [SECS]: wait (default 10 s) until a line of FILE
# matches REGEX (a reader hands a line out once its mount has applied it).
wait_grep() {
	local file=$1 re=$2 secs=${3:-10} i
	for i in $(seq $((secs * 20))); do
		grep -qE -- "$re" "$file" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "no line matching '$re' in $file within $secs s; it has:
$(cat "$file")"
}

@test "a mixed workload from three mounts at once: every mount's tenant .events has the same lines, the same numbers, no gaps" {
	mount3
	mkdir -p "$A/t/s"
	echo start >"$A/t/s/log"
	fsyncdir "$B" "$C"
	events_record "$OUT/a" "$A/t"
	events_record "$OUT/b" "$B/t"
	events_record "$OUT/c" "$C/t"
	# Each mount: a join, ten new children (create and write each), five
	# appends to one shared child, a link, a rename, an unlink, a leave:
	# 30 lines; no lease, attribute or refused call (those take no line).
	work() {
		local m=$1 i=$2 k
		mkdir "$m/t/p$i"
		for k in $(seq 10); do
			echo "$i.$k" >"$m/t/p$i/c$k"
		done
		for k in $(seq 5); do
			echo "$i.$k" >>"$m/t/s/log"
		done
		ln "$m/t/p$i/c1" "$m/t/s/l$i"
		mv "$m/t/p$i/c2" "$m/t/s/m$i"
		rm "$m/t/p$i/c3"
		rmdir "$m/t/p$i"
	}
	work "$A" 1 3>&- &
	local w1=$!
	work "$B" 2 3>&- &
	local w2=$!
	work "$C" 3 3>&- &
	local w3=$!
	wait "$w1"
	wait "$w2"
	wait "$w3"
	mkdir "$C/t/end"
	fsyncdir "$A/t" "$B/t" "$C/t"
	local f
	for f in a b c; do
		wait_grep "$OUT/$f" $'\tjoin\tt\tend\t'
	done
	bg_stop || true # the readers' status is that of the kill
	run diff "$OUT/a" "$OUT/b"
	assert_success
	run diff "$OUT/a" "$OUT/c"
	assert_success
	run wc -l <"$OUT/a"
	assert_output 91
	run awk 'NR > 1 && $1 != prev + 1 { print "gap after " prev ": " $0 } { prev = $1 }' "$OUT/a"
	assert_output ''
	run bash -c 'cut -f2 "$1" | sort | uniq -c | awk "{ print \$2, \$1 }"' _ "$OUT/a"
	assert_output "$(printf '%s\n' 'create 30' 'join 4' 'leave 3' 'link 3' 'rename 3' 'unlink 3' 'write 45')"
	# The shared child took every append, and every mount shows it.
	for m in "$A" "$B" "$C"; do
		assert_equal "$(wc -l <"$m/t/s/log")" 16
		assert_equal "$(ver "$m/t/s/log")" 16
		run ls "$m/t/s"
		assert_output "$(printf '%s\n' l1 l2 l3 log m1 m2 m3)"
	done
}

# --- leases without the mount that set them --------------------------------

@test "leases set on a mount that is then SIGKILLed still run out: the other mount sees the child and the parent expire" {
	statefs_mount -o "store=unix:$REDIS_SOCK,testclock"
	A=$MNT A_PID=$STATEFS_PID
	statefs_mount -o "store=unix:$REDIS_SOCK,testclock"
	B=$MNT
	mkdir -p "$A/t/p" "$A/t/q"
	echo x >"$A/t/p/c"
	echo y >"$A/t/q/d"
	set_ttl 5 "$A/t/p/c"
	set_ttl 10 "$A/t/q"
	fsyncdir "$B"
	events_record "$OUT/b" "$B/t"
	MNT=$A STATEFS_PID=$A_PID
	statefs_kill9
	# The dead daemon's mountpoint answers nothing; detach it.
	run fusermount3 -u -z "$A"
	assert_success
	run _statefs_mounted "$A"
	assert_failure
	MNT=$B
	[ -e "$B/t/p/c" ]
	advance 5000
	fsyncdir "$B/t"
	run ls "$B/t/p"
	assert_output ''
	run ls "$B/t"
	assert_output "$(printf 'p\nq')"
	advance 5000
	fsyncdir "$B/t"
	run ls "$B/t"
	assert_output p
	wait_grep "$OUT/b" $'\texpire\tt\tq\t-\t'
	bg_stop || true # the readers' status is that of the kill
	run cut -f2- "$OUT/b"
	assert_output "$(evlines expire t p c 1 1 expire t q - 1 -)"
	run stat_of expiries "$B"
	assert_output 2
	run gauges "$B"
	assert_line 'parents 1'
	assert_line 'children 0'
	assert_line 'tombstones 1'
	# A mount at the dead one's mountpoint finds the store as B left it.
	statefs_mount_at "$A" -o "store=unix:$REDIS_SOCK,testclock"
	run ls "$A/t"
	assert_output p
	assert_equal "$(gauges "$A")" "$(gauges "$B")"
}

# --- links and renames across mounts --------------------------------------

# renameat2 FROM TO FLAGS: rename(2) with flags (1 RENAME_NOREPLACE,
# 2 RENAME_EXCHANGE) through python's ctypes (coreutils' mv has no
# --exchange before 9.5); prints OK or the errno name.
renameat2() {
	python3 -c '
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(),
                   int(sys.argv[3]))
print("OK" if r == 0 else errno.errorcode[ctypes.get_errno()])' "$@"
}

@test "a link made on one mount, a rename on another and an exchange on a third are seen by all, with one inode and its nlink" {
	mount3
	mkdir -p "$A/t/a" "$A/t/b" "$A/u/x"
	echo s >"$A/t/a/c"
	fsyncdir "$B" "$C"
	ino=$(stat -c %i "$A/t/a/c")
	ln "$A/t/a/c" "$A/t/b/c"
	fsyncdir "$B" "$C"
	for m in "$A" "$B" "$C"; do
		assert_equal "$(stat -c '%i %h' "$m/t/a/c")" "$ino 2"
		assert_equal "$(stat -c '%i %h' "$m/t/b/c")" "$ino 2"
	done
	run gauges "$B"
	assert_line 'children 1'
	assert_line 'links 2'
	# A publication through one name on B is the state of both names on A.
	echo more >>"$B/t/b/c"
	fsyncdir "$A"
	assert_equal "$(cat "$A/t/a/c")" "$(printf 's\nmore')"
	assert_equal "$(ver "$A/t/a/c")" 2
	# The last-but-one link goes on C: one name left, nlink 1, everywhere.
	rm "$C/t/a/c"
	fsyncdir "$A" "$B"
	for m in "$A" "$B" "$C"; do
		run stat -c '%i %h' "$m/t/a/c"
		assert_failure
		assert_output --partial 'No such file or directory'
		assert_equal "$(stat -c '%i %h' "$m/t/b/c")" "$ino 1"
	done
	# A rename on B: the same state under its new name on A and C.
	mv "$B/t/b/c" "$B/t/a/r"
	fsyncdir "$A" "$C"
	for m in "$A" "$C"; do
		[ ! -e "$m/t/b/c" ]
		assert_equal "$(stat -c '%i %h' "$m/t/a/r")" "$ino 1"
		assert_equal "$(cat "$m/t/a/r")" "$(printf 's\nmore')"
	done
	# RENAME_NOREPLACE onto a name another mount has just created, before
	# this mount has seen it: the store refuses, EEXIST.
	echo o >"$A/t/b/o"
	oino=$(stat -c %i "$A/t/b/o")
	run renameat2 "$C/t/a/r" "$C/t/b/o" 1
	assert_output EEXIST
	# An exchange on C trades the two states; A and B see it.
	run renameat2 "$C/t/a/r" "$C/t/b/o" 2
	assert_output OK
	fsyncdir "$A" "$B"
	for m in "$A" "$B" "$C"; do
		assert_equal "$(stat -c %i "$m/t/a/r")" "$oino"
		assert_equal "$(cat "$m/t/a/r")" o
		assert_equal "$(stat -c %i "$m/t/b/o")" "$ino"
		assert_equal "$(cat "$m/t/b/o")" "$(printf 's\nmore')"
	done
	# Across tenants: EXDEV, from any mount.
	run py_errno 'os.link(sys.argv[1], sys.argv[2])' "$B/t/a/r" "$B/u/x/r"
	assert_output EXDEV
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$C/t/a/r" "$C/u/x/r"
	assert_output EXDEV
	# mv onto an existing child replaces it: its state ends everywhere.
	mv "$A/t/a/r" "$A/t/b/o"
	fsyncdir "$B" "$C"
	for m in "$A" "$B" "$C"; do
		run ls "$m/t/a"
		assert_output ''
		assert_equal "$(stat -c '%i %h' "$m/t/b/o")" "$oino 1"
		assert_equal "$(cat "$m/t/b/o")" o
	done
	same_stats "" "$A" "$B" "$C"
	assert_line 'children 1'
	assert_line 'links 1'
}

@test "names another mount removed or moved leave this mount's kernel caches: after fsync of a directory stat and cat agree with ls" {
	mount3
	mkdir -p "$A/t/a" "$A/t/b" "$A/t/q"
	for f in c d m x y; do
		echo "$f" >"$A/t/a/$f"
	done
	ln "$A/t/a/d" "$A/t/b/d"
	fsyncdir "$B" "$C"
	# B and C look at every name, so their kernels hold them all.
	for m in "$B" "$C"; do
		stat "$m"/t/a/* "$m"/t/b/d "$m"/t/q >/dev/null
	done
	dino=$(stat -c %i "$A/t/a/d")
	mino=$(stat -c %i "$A/t/a/m")
	xino=$(stat -c %i "$A/t/a/x")
	yino=$(stat -c %i "$A/t/a/y")
	rm "$A/t/a/c"
	mv "$A/t/a/m" "$A/t/b/m"
	rm "$A/t/b/d"
	run renameat2 "$A/t/a/x" "$A/t/a/y" 2
	assert_output OK
	rmdir "$A/t/q"
	fsyncdir "$B" "$C"
	for m in "$B" "$C"; do
		for gone in t/a/c t/a/m t/b/d t/q; do
			run stat -c %i "$m/$gone"
			assert_failure
			assert_output --partial 'No such file or directory'
		done
		run cat "$m/t/a/m"
		assert_failure
		assert_equal "$(stat -c '%i %h' "$m/t/a/d")" "$dino 1"
		assert_equal "$(stat -c '%i %h' "$m/t/b/m")" "$mino 1"
		assert_equal "$(stat -c %i "$m/t/a/x")" "$yino"
		assert_equal "$(cat "$m/t/a/x")" y
		assert_equal "$(stat -c %i "$m/t/a/y")" "$xino"
		run ls "$m/t/a"
		assert_output "$(printf 'd\nx\ny')"
	done
}
