#!/usr/bin/env bats
# statefs(8), LEASES and WATCHING under load: leases that expire on the manual
# clock (-o testclock) while shells create, rewrite, renew, remove and
# re-lease children, all at once, with a root .events reader that records
# every line from before the first transition to after the last.
#
# Nothing here asserts on timing.  The shells race freely for a few
# seconds; then the clock is moved past every deadline and the test checks
# that everything agrees in the end:
#   - the gauges of .stats, a recount with find, and .snapshot;
#   - the recorded event stream, replayed name by name (create makes a
#     child present, unlink and expire make it absent, write needs it
#     present, versions count up by one), with the final listing and the
#     versions in .snapshot; its sequence numbers have no gap;
#   - the admissions, removals and expiries counters with the create,
#     unlink and expire lines.
#
# The shells are throttled so that the reader never falls 4096 lines
# behind (an "overflow" line fails the test: the replay would be
# incomplete).

load helpers

# How long the shells race, in seconds.
STRESS_SECS=6
# Names per parent: c0 .. c$((NAMES - 1)).
NAMES=40

setup() {
	statefs_mount -o testclock
	EV="$BATS_TEST_TMPDIR/events"
	STOP="$BATS_TEST_TMPDIR/stop"
	STRESS_PIDS=()
	mkfifo "$BATS_TEST_TMPDIR/nap"
}

teardown() {
	stress_stop
	bg_teardown
}

# stress_start NAME CMD...: run CMD in the background (fd 3 closed), its
# output to $BATS_TEST_TMPDIR/NAME.log.
stress_start() {
	local name=$1
	shift
	"$@" >"$BATS_TEST_TMPDIR/$name.log" 2>&1 3>&- &
	STRESS_PIDS+=($!)
}

# stress_stop: tell the loops to stop and wait for them (each loop also
# stops by itself at STRESS_END).  Safe to call twice.
stress_stop() {
	local p _
	touch "$STOP"
	for p in "${STRESS_PIDS[@]}"; do
		for _ in $(seq 200); do
			proc_alive "$p" || break
			sleep 0.05
		done
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	STRESS_PIDS=()
}

# The children's parents: t/p1 and t/p2 lease their children by default
# (child_ttl), u/p3 does not.
PARENTS=(t/p1 t/p2 u/p3)

# A random child path, into $REPLY.
pick() {
	REPLY="$MNT/${PARENTS[RANDOM % 3]}/c$((RANDOM % NAMES))"
}

# nap SECS: sleep without a fork (a read that times out on a FIFO nobody
# writes to; each loop opens its own descriptor with nap_open).
nap_open() {
	exec {NAP_FD}<>"$BATS_TEST_TMPDIR/nap"
}
nap() {
	read -r -t "$1" -u "$NAP_FD" _ || true
}

# running: true until the stop file appears or the loops' time is up
# (STRESS_END, in epoch seconds).
running() {
	[ ! -e "$STOP" ] && [ "${EPOCHREALTIME%.*}" -lt "$STRESS_END" ]
}

# creator: replace (echo >) or append to (echo >>) random names, which
# creates them when absent.  Bash builtins: no fork per operation.
creator() {
	nap_open
	local _
	while running; do
		for _ in 1 2 3 4 5 6 7 8; do
			pick
			if ((RANDOM % 4)); then
				echo "$RANDOM$RANDOM" >"$REPLY"
			else
				echo "+$RANDOM" >>"$REPLY"
			fi
		done 2>/dev/null
		nap 0.01
	done
}

# renewer: touch -c (renew, never create) a few random names at a time.
renewer() {
	nap_open
	local a b c d
	while running; do
		pick; a=$REPLY
		pick; b=$REPLY
		pick; c=$REPLY
		pick; d=$REPLY
		touch -c "$a" "$b" "$c" "$d" 2>/dev/null
		nap 0.005
	done
}

# remover: rm -f two random names at a time.
remover() {
	nap_open
	local a
	while running; do
		pick; a=$REPLY
		pick
		rm -f "$a" "$REPLY" 2>/dev/null
		nap 0.01
	done
}

# ttl_setter: a lease of 0.05 .. 0.30 s on a random name.
ttl_setter() {
	nap_open
	local v
	while running; do
		printf -v v '0.%02d' $((5 + RANDOM % 26))
		pick
		setfattr -n user.statefs.ttl -v "$v" "$REPLY" 2>/dev/null
		nap 0.005
	done
}

# clock_driver: move the manual clock 20 .. 50 ms at a time.
clock_driver() {
	nap_open
	while running; do
		echo $((20 + RANDOM % 31)) >"$MNT/.clock" || echo "clock write failed"
		nap 0.01
	done
}

# wait_sentinel FILE: wait (at most 10 s) for the join line of tenant z.
wait_sentinel() {
	local _
	for _ in $(seq 200); do
		grep -qE $'^[0-9]+\tjoin\tz\t-\t-\t-\t-$' "$1" && return 0
		sleep 0.05
	done
	fail "the .events reader did not see the sentinel (join z) within 10 s; last lines:
$(tail -n 5 "$1")"
}

# check_final EVENTS SNAPSHOT STATS: replay the recorded events and compare
# them, the snapshot, the counters and the tree under $MNT.  Prints every
# contradiction (exit 1) or one summary line.
check_final() {
	python3 - "$@" "$MNT" <<'PY'
import os, sys

evfile, snapfile, statsfile, mnt = sys.argv[1:5]
bad = []
def err(msg):
    if len(bad) < 40:
        bad.append(msg)
    elif len(bad) == 40:
        bad.append("... (more)")

# --- the event stream: well-formed, complete, no gap --------------------
lines = open(evfile, encoding="utf-8", errors="replace").read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
else:
    err("the event file does not end with a whole line")
if any(l == "overflow" for l in lines):
    print("the .events reader fell more than 4096 lines behind: "
          "'overflow' at line %d of %d; the replay would be incomplete "
          "(throttle the shells)" % (lines.index("overflow") + 1, len(lines)))
    sys.exit(1)

events = []
prev = None
for n, l in enumerate(lines, 1):
    f = l.split("\t")
    if len(f) != 7 or not f[0].isdigit():
        err("line %d malformed: %r" % (n, l))
        continue
    seq = int(f[0])
    if prev is not None and seq != prev + 1:
        err("line %d: sequence %d after %d (%s)" %
            (n, seq, prev, "gap" if seq > prev else "not increasing"))
    prev = seq
    events.append((n, seq, f[1], f[2], f[3], f[4], f[5], f[6]))
if not events:
    err("no event recorded")
elif events[0][2:5] != ("join", "t", "-"):
    err("first line is not the join of tenant t: %r" % lines[0])

# --- replay ---------------------------------------------------------------
tenants, parents = set(), {}
present = {}        # (t, p, c) -> version
counts = {}
for n, seq, op, t, p, c, g, v in events:
    counts[op] = counts.get(op, 0) + 1
    where = "line %d (seq %d) %s %s/%s/%s g=%s v=%s" % (n, seq, op, t, p, c, g, v)
    if op == "join" and p == "-":
        if t in tenants:
            err(where + ": tenant already present")
        tenants.add(t)
        continue
    if op == "join" and c == "-":
        if (t, p) in parents:
            err(where + ": parent already present")
        if t not in tenants:
            err(where + ": tenant absent")
        parents[(t, p)] = g
        continue
    if op not in ("create", "write", "unlink", "expire") or c == "-":
        err(where + ": unexpected in this test (no parent leaves, links, renames)")
        continue
    key = (t, p, c)
    if (t, p) not in parents:
        err(where + ": parent absent")
    elif g != parents[(t, p)]:
        err(where + ": generation, parent has %s" % parents[(t, p)])
    if not v.isdigit():
        err(where + ": version not a number")
        continue
    v = int(v)
    if op == "create":
        if key in present:
            err(where + ": create of a present child (version %d)" % present[key])
        if v != 0:
            err(where + ": a create has version 0")
        present[key] = v
    elif key not in present:
        err(where + ": %s of an absent child" % op)
        if op == "write":
            present[key] = v
    elif op == "write":
        if v != present[key] + 1:
            err(where + ": write after version %d" % present[key])
        present[key] = v
    else:
        if v != present[key]:
            err(where + ": removal of a child at version %d" % present[key])
        del present[key]

# --- the tree, as ls shows it ----------------------------------------------
listed = set()
for t in sorted(os.listdir(mnt)):
    if t.startswith("."):
        continue
    for p in sorted(os.listdir(os.path.join(mnt, t))):
        if p.startswith("."):
            continue
        for c in os.listdir(os.path.join(mnt, t, p)):
            listed.add((t, p, c))
if set(present) != listed:
    for k in sorted(set(present) - listed):
        err("replay has %s/%s/%s (version %d), ls does not" % (k + (present[k],)))
    for k in sorted(listed - set(present)):
        err("ls shows %s/%s/%s, the replay does not" % k)
for k in sorted(listed):
    if k[1] != "p3":
        err("%s/%s/%s survived the final advance: its parent has child_ttl" % k)

# --- the snapshot ------------------------------------------------------------
snap = open(snapfile).read().split("\n")
if snap and snap[-1] == "":
    snap.pop()
rows = [r.split("\t") for r in snap[1:]]
srows = {}
kinds = {}
size_sum = 0
for r in rows:
    if len(r) != 10:
        err("snapshot row malformed: %r" % r)
        continue
    kinds[r[0]] = kinds.get(r[0], 0) + 1
    if r[0] != "child":
        continue
    k = (r[1], r[2], r[3])
    if k in srows:
        err("snapshot lists %s/%s/%s twice" % k)
    srows[k] = r
    size_sum += int(r[6])
    if r[8] != "-":
        err("snapshot: %s/%s/%s still has a lease (%s ms left) after the "
            "final advance" % (k + (r[8],)))
    if r[7] != "1":
        err("snapshot: %s/%s/%s nlink %s" % (k + (r[7],)))
for k in sorted(set(srows) - listed):
    err("snapshot lists %s/%s/%s, ls does not" % k)
for k in sorted(listed - set(srows)):
    err("ls shows %s/%s/%s, the snapshot does not" % k)
for k in sorted(set(srows) & set(present)):
    if srows[k][5] != str(present[k]):
        err("%s/%s/%s: snapshot version %s, replay %d" %
            (k + (srows[k][5], present[k])))

# --- the counters --------------------------------------------------------------
stats = {}
for l in open(statsfile):
    f = l.split()
    if len(f) == 2:
        stats[f[0]] = f[1]
def stat(k):
    return int(stats.get(k, -1))
for key, want, what in (
        ("tenants", kinds.get("tenant", 0), "snapshot tenant rows"),
        ("parents", kinds.get("parent", 0), "snapshot parent rows"),
        ("children", kinds.get("child", 0), "snapshot child rows"),
        ("links", kinds.get("child", 0), "snapshot child rows"),
        ("children", len(listed), "children ls shows"),
        ("bytes", size_sum, "the sizes in the snapshot"),
        ("expiries", counts.get("expire", 0), "expire lines"),
        ("admissions", counts.get("create", 0), "create lines"),
        ("removals", counts.get("unlink", 0), "unlink lines")):
    if stat(key) != want:
        err(".stats %s is %d, %s: %d" % (key, stat(key), what, want))

if bad:
    print("\n".join(bad))
    sys.exit(1)
print("ok: %d lines (seq %d..%d), %s; %d children left" % (
    len(events), events[0][1], events[-1][1],
    " ".join("%s=%d" % kv for kv in sorted(counts.items())), len(listed)))
PY
}

# Embedded only: its replay checks one sequence without gaps; a shared store
# numbers each tenant's lines by its own log, where a lease change takes a
# number and has no line.
# bats test_tags=embedded-only
@test "leases expiring under concurrent creates, renewals, removals and ttl changes: events, counters, snapshot and tree agree" {
	# The reader is open before the first transition.
	events_record "$EV"
	mkdir -p "$MNT/t/p1" "$MNT/t/p2" "$MNT/u/p3"
	setfattr -n user.statefs.child_ttl -v 0.2 "$MNT/t/p1"
	setfattr -n user.statefs.child_ttl -v 0.1 "$MNT/t/p2"

	STRESS_END=$((${EPOCHREALTIME%.*} + STRESS_SECS + 20))
	stress_start creator1 creator
	stress_start creator2 creator
	stress_start renewer renewer
	stress_start remover remover
	stress_start ttl_setter ttl_setter
	stress_start clock clock_driver
	sleep "$STRESS_SECS"
	stress_stop
	run cat "$BATS_TEST_TMPDIR/clock.log"
	assert_output ''

	# Every lease is due now; .clock runs every due expiry before it returns.
	advance 10000
	# A sentinel: once the reader has its line it has every earlier one;
	# then nothing more may come.
	mkdir "$MNT/z"
	wait_sentinel "$EV"
	wait_quiet "$EV" 500
	bg_stop || true # the reader's status is that of the kill
	[ ! -s "$EV.err" ] || fail "the .events reader: $(cat "$EV.err")"
	if grep -qx overflow "$EV"; then
		fail "the .events reader fell more than 4096 lines behind ('overflow' at line $(grep -nx overflow "$EV" | head -n 1 | cut -d: -f1) of $(wc -l <"$EV")): the replay would be incomplete; throttle the shells"
	fi
	run tail -n 1 "$EV"
	assert_output --regexp $'^[0-9]+\tjoin\tz\t-\t-\t-\t-$'

	cat "$MNT/.snapshot" >"$BATS_TEST_TMPDIR/snapshot"
	cat "$MNT/.stats" >"$BATS_TEST_TMPDIR/stats"

	# (1) The gauges equal a recount.
	run stat_of children
	assert_output "$(find "$MNT" -mindepth 3 -maxdepth 3 -type f | wc -l)"
	run stat_of links
	assert_output "$(find "$MNT" -mindepth 3 -maxdepth 3 -type f | wc -l)"
	run stat_of parents
	assert_output "$(find "$MNT" -mindepth 2 -maxdepth 2 -type d | wc -l)"
	run stat_of parents
	assert_output 3
	run stat_of tenants
	assert_output 3
	# p1 and p2 lease every child they get: nothing of theirs survives.
	run ls -A "$MNT/t/p1"
	assert_output ''
	run ls -A "$MNT/t/p2"
	assert_output ''

	# (2) and (3): the replay of every recorded line against the end state.
	run check_final "$EV" "$BATS_TEST_TMPDIR/snapshot" "$BATS_TEST_TMPDIR/stats"
	assert_success
	echo "# $output" >&3
	# Enough happened for the test to mean something (low bars: a loaded
	# machine runs the shells slowly; typical runs have ~1000 expiries).
	[ "$(grep -c $'\texpire\t' "$EV")" -ge 20 ] || fail "only $(grep -c $'\texpire\t' "$EV") expiries"
	[ "$(grep -c $'\tunlink\t' "$EV")" -ge 10 ] || fail "only $(grep -c $'\tunlink\t' "$EV") unlinks"
}
