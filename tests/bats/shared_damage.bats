#!/usr/bin/env bats
# docs/shared-store.md, "A damaged store": a key of the
# shared store damaged by another client (a field set to a bad value, a
# key of the wrong type).  Redis never rolls a function back, so every
# function of redis/lua/*.lua checks all it reads before its first
# write: each operation below, run through a real mount with one key
# damaged by a second redis-cli client, fails with EIO and leaves Redis
# byte for byte as it was (DEBUG DIGEST of the test's own server), is
# counted in .stats (store_damaged) and logged once by the daemon naming
# the key; once the key is restored a mount loaded fresh shows the same
# tree as the first, and the same operation succeeds (no wedge).

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

setup() {
	redis_start --enable-debug-command yes
	statefs_mount -o "store=unix:$REDIS_SOCK" -o testclock
	A=$MNT
	A_LOG=$STATEFS_LOG
	mkdir "$A/t" "$A/t/p" "$A/t/q"
	echo one >"$A/t/p/c"
	echo two >"$A/t/p/d"
	echo three >"$A/t/q/e"
	PRE=$(rcli --scan --pattern 'statefs:{statefs.t*}:t' | head -1)
	PRE=${PRE%:t}
}

teardown() {
	local rc=0
	statefs_unmount || rc=1
	redis_stop_all
	return "$rc"
}

# The key of node PATH's hash: s (a child's state) or p (a parent).
nkey() { echo "$PRE:$1:$(stat -c %i "$2")"; }

# What a mount shows: every node's path, inode, links, size and content.
tree() {
	(cd "$1" && find . -mindepth 1 -name '.*' -prune -o -printf '%p %i %n %s\n' |
		sort | while read -r f rest; do
			if [ -f "$f" ]; then
				echo "$f $rest $(md5sum <"$f")"
			else
				echo "$f $rest"
			fi
		done)
}

# damage KEY field FIELD VALUE | damage KEY type: damage KEY as another
# client would, keeping it as it was in damage.bak (a key that was not
# there is a string now, and goes again on restore).
damage() {
	local key=$1 how=$2
	if [ "$how" = field ]; then
		[ "$(rcli COPY "$key" damage.bak)" = 1 ]
		rcli HSET "$key" "$3" "$4" >/dev/null
	elif [ "$(rcli EXISTS "$key")" = 0 ]; then
		rcli SET "$key" garbage >/dev/null
	else
		[ "$(rcli RENAME "$key" damage.bak)" = OK ]
		rcli SET "$key" garbage >/dev/null
	fi
}

restore() {
	if [ "$(rcli EXISTS damage.bak)" = 0 ]; then
		rcli DEL "$1" >/dev/null
		return
	fi
	[ "$(rcli COPY damage.bak "$1" REPLACE)" = 1 ]
	rcli DEL damage.bak >/dev/null
}

# damage_case KEY field FIELD VALUE|type -- PYCODE ARGS...: the operation
# PYCODE (py_errno) on mount A with KEY damaged is EIO twice and changes
# nothing; the damage is counted, logged once; restored, a new mount
# shows A's tree and the operation succeeds.
damage_case() {
	local key=$1 d=() code before
	shift
	while [ "$1" != -- ]; do
		d+=("$1")
		shift
	done
	shift
	code=$1
	shift
	damage "$key" "${d[@]}"
	before=$(rcli DEBUG DIGEST)
	run py_errno "$code" "$@"
	assert_output EIO
	run py_errno "$code" "$@"
	assert_output EIO
	[ "$(rcli DEBUG DIGEST)" = "$before" ]
	run stat_of store_damaged "$A"
	assert_output 2
	run grep -cF "key $key " "$A_LOG"
	assert_output 1
	restore "$key"
	fsyncdir "$A"
	statefs_mount -o "store=unix:$REDIS_SOCK" -o testclock
	B=$MNT
	[ "$(tree "$A")" = "$(tree "$B")" ]
	run py_errno "$code" "$@"
	assert_output OK
	fsyncdir "$A" "$B"
	[ "$(tree "$A")" = "$(tree "$B")" ]
	run stat_of store_damaged "$B"
	assert_output 0
}

RM='os.unlink(sys.argv[1])'
MV='os.rename(sys.argv[1], sys.argv[2])'
LN='os.link(sys.argv[1], sys.argv[2])'
MKDIR='os.mkdir(sys.argv[1])'
RMDIR='os.rmdir(sys.argv[1])'
DEPART='fd = os.open(sys.argv[1], os.O_WRONLY); os.write(fd, b"p\n"); os.close(fd)'
SETTTL='os.setxattr(sys.argv[1], "user.statefs.ttl", b"100")'
TOUCH='os.utime(sys.argv[1])'
CREATE='os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))'
PUBLISH='fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC); os.write(fd, b"new\n"); os.close(fd)'

@test "rm with its state's nlink set to 0: EIO, nothing changed, the link stays" {
	damage_case "$(nkey s "$A/t/p/c")" field nlink 0 -- "$RM" "$A/t/p/c"
}

@test "rm with its state a string: EIO, nothing changed" {
	damage_case "$(nkey s "$A/t/p/c")" type -- "$RM" "$A/t/p/c"
}

@test "mv with the source parent's link count not a number: EIO, nothing changed" {
	damage_case "$(nkey p "$A/t/p")" field links -7 -- "$MV" "$A/t/p/c" "$A/t/q/c"
}

@test "mv with the destination bucket a string: EIO, nothing changed" {
	damage_case "$PRE:l:$(stat -c %i "$A/t/q")" type -- "$MV" "$A/t/p/c" "$A/t/q/c"
}

@test "ln with the destination parent's link count not a number: EIO, nothing changed" {
	damage_case "$(nkey p "$A/t/q")" field links -7 -- "$LN" "$A/t/p/c" "$A/t/q/l"
}

@test "mkdir of a parent with the tenant's parent count not a number: EIO, nothing changed" {
	damage_case "$PRE:t" field parents -7 -- "$MKDIR" "$A/t/n"
}

@test "mkdir of a tenant whose key-to-be already holds a string: EIO, nothing changed" {
	damage_case "statefs:{statefs.t2}:t" type -- "$MKDIR" "$A/u"
}

@test "rmdir of a parent with a child's nlink not a number: EIO, nothing changed" {
	damage_case "$(nkey s "$A/t/p/d")" field nlink -7 -- "$RMDIR" "$A/t/p"
}

@test "rmdir of a tenant with a state of its second parent a string: EIO, nothing changed" {
	damage_case "$(nkey s "$A/t/q/e")" type -- "$RMDIR" "$A/t"
}

@test ".depart of a live parent with a child's links not as its nlink says: EIO, nothing changed" {
	damage_case "$(nkey s "$A/t/p/d")" field links garbage -- "$DEPART" "$A/t/.depart"
}

@test "a lease (setfattr ttl) with the tenant's log a string: EIO, nothing changed" {
	damage_case "$PRE:log" type -- "$SETTTL" "$A/t/p/c"
}

@test "a renewal (touch) of a lease with the tenant's log a string: EIO, nothing changed" {
	setfattr -n user.statefs.ttl -v 100 "$A/t/p/c"
	damage_case "$PRE:log" type -- "$TOUCH" "$A/t/p/c"
}

@test "a create with the parent's link count not a number: EIO, nothing changed" {
	damage_case "$(nkey p "$A/t/p")" field links -7 -- "$CREATE" "$A/t/p/new"
}

@test "a publication with the tenant's byte count not a number: EIO, nothing changed" {
	damage_case "$PRE:t" field bytes -7 -- "$PUBLISH" "$A/t/p/c"
}

@test "a tenant whose key is gone while its log lives is damaged, not a dead tenant" {
	damage_case "$PRE:t" type -- "$CREATE" "$A/t/p/new"
	rcli RENAME "$PRE:t" damage.bak >/dev/null
	run py_errno "$CREATE" "$A/t/p/new2"
	assert_output EIO
	run grep -cF "key $PRE:t " "$A_LOG"
	assert_output 2
	restore "$PRE:t"
	run py_errno "$CREATE" "$A/t/p/new2"
	assert_output OK
}

@test "a tenant's log of the wrong type stops only that tenant: the follower reads the others', so another tenant's mkdir is no EIO that was applied" {
	damage "$PRE:log" type
	run py_errno "$MKDIR" "$A/u"
	assert_output OK
	mkdir "$A/u/p"
	echo x >"$A/u/p/c"
	run cat "$A/u/p/c"
	assert_output x
	run py_errno "$CREATE" "$A/t/p/new"
	assert_output EIO
	run grep -cF "key $PRE:log " "$A_LOG"
	assert_output 1
	restore "$PRE:log"
	run py_errno "$CREATE" "$A/t/p/new"
	assert_output OK
	statefs_mount -o "store=unix:$REDIS_SOCK" -o testclock
	fsyncdir "$A"
	[ "$(tree "$A")" = "$(tree "$MNT")" ]
}

@test "a child or a parent whose key Redis lost while the log says it lives is damaged (EIO), not a stale handle" {
	local k
	k=$(nkey s "$A/t/p/c")
	rcli RENAME "$k" damage.bak >/dev/null
	run py_errno "$PUBLISH" "$A/t/p/c"
	assert_output EIO
	run grep -cF "key $k " "$A_LOG"
	assert_output 1
	restore "$k"
	run py_errno "$PUBLISH" "$A/t/p/c"
	assert_output OK
	k=$(nkey p "$A/t/q")
	rcli RENAME "$k" damage.bak >/dev/null
	run py_errno "$CREATE" "$A/t/q/new"
	assert_output EIO
	run grep -cF "key $k " "$A_LOG"
	assert_output 1
	restore "$k"
	run py_errno "$CREATE" "$A/t/q/new"
	assert_output OK
}
