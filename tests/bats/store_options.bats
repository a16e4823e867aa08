#!/usr/bin/env bats
# The shared store options (statefs(8) "Shared store options"): listed in
# --help, checked at start with one line naming the option, nothing
# mounted on a refusal; without them statefs mounts its embedded store.

# The tests of a Redis's maxmemory-policy start their own redis-server
# (redis_helpers.bash) and mount it themselves: no store of the redis run's.
STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

STORE_OPTIONS=(store store_user store_password_file store_prefix
	store_timeout store_limits)

setup() {
	DIR=$(mktemp -d "${TMPDIR:-/tmp}/statefs-bats.XXXXXX")
	PWFILE="$DIR.pw"
}

teardown() {
	local rc=0
	if _statefs_mounted "$DIR"; then
		fusermount3 -u "$DIR" 2>/dev/null || fusermount3 -uz "$DIR"
	fi
	rmdir "$DIR"
	rm -f "$PWFILE"
	statefs_unmount || rc=1
	redis_stop_all
	return "$rc"
}

# refused NAME ARGS...: statefs ARGS DIR exits non-zero at once with one
# line that names -o NAME, and mounts nothing.
refused() {
	local name=$1
	shift
	run timeout 10 "$STATEFS_BIN" "$@" "$DIR"
	assert_failure
	refute [ "$status" -eq 124 ]
	assert_equal "${#lines[@]}" 1
	assert_output --partial "-o $name"
	assert_output --regexp '^statefs: '
	# Not with run: the caller still checks this refusal's $output.
	if _statefs_mounted "$DIR"; then
		fail "statefs $* mounted $DIR"
	fi
}

@test "--help lists every shared store option with its default" {
	run "$STATEFS_BIN" --help
	assert_success
	local o
	for o in "${STORE_OPTIONS[@]}"; do
		assert_line --regexp "^ +-o $o(=[^ ]*)? .*\(default: [^)]+\)$"
	done
	assert_line --regexp '-o store_prefix=NAME .*\(default: statefs\)'
	assert_line --regexp '-o store_timeout=SECONDS .*\(default: 2\)'
}

@test "a store URL without a port, with port 0 or above 65535 is refused" {
	refused store -o store=redis://localhost
	refused store -o store=redis://localhost:0
	refused store -o store=redis://localhost:65536
	refused store -o store=redis://:6379
}

@test "an unknown scheme, an empty or relative socket path is refused" {
	refused store -o store=rediss://localhost:6380
	refused store -o store=localhost:6379
	refused store -o store=unix:
	refused store -o store=unix:redis.sock
}

@test "credentials in the URL are refused, pointing to the password file" {
	refused store -o store=redis://app:secret@localhost:6379
	assert_output --partial store_password_file
}

@test "a sentinel list needs an address and a master name" {
	refused store -o 'store=sentinel://'
	refused store -o 'store=sentinel://127.0.0.1:26379/'
	# The list as users write it: FUSE splits it at the comma.
	refused store -o 'store=sentinel://127.0.0.1:26379,127.0.0.1:26380'
	refused store -o 'store=sentinel://127.0.0.1:26379,127.0.0.1:0/m'
}

@test "a cluster seed list needs addresses, each HOST:PORT" {
	refused store -o 'store=cluster://'
	refused store -o 'store=clusters://'
	refused store -o 'store=cluster://127.0.0.1:7000/m'
	# The list as users write it: FUSE splits it at the commas.
	refused store -o 'store=cluster://127.0.0.1:7000,127.0.0.1:0'
	refused store -o 'store=cluster://127.0.0.1:7000,127.0.0.1:7001,[::1'
	refused store -o 'store=cluster://127.0.0.1:7000,127.0.0.1'
	refused store_tls_ca -o 'store=cluster://127.0.0.1:7000,store_tls_ca=/x.pem'
}

@test "a cluster that cannot be reached is refused at start, naming every seed" {
	refused store -o 'store=cluster://127.0.0.1:1,[::1]:1,127.0.0.1:2,store_timeout=1'
	assert_output --partial 'cluster://127.0.0.1:1,[::1]:1,127.0.0.1:2'
}

@test "a missing, empty or unreadable password file is one line at start" {
	refused store_password_file -o store=redis://127.0.0.1:6379 \
		-o "store_password_file=$PWFILE"
	assert_output --partial 'No such file or directory'
	: >"$PWFILE"
	refused store_password_file -o store=redis://127.0.0.1:6379 \
		-o "store_password_file=$PWFILE"
	assert_output --partial 'empty'
	refused store_password_file -o store=redis://127.0.0.1:6379 \
		-o "store_password_file=$DIR"
}

@test "bad store_prefix, store_timeout and store_limits values are refused" {
	refused store_prefix -o store=redis://127.0.0.1:6379,store_prefix=a{b}
	refused store_prefix -o 'store=redis://127.0.0.1:6379,store_prefix=a b'
	refused store_timeout -o store=redis://127.0.0.1:6379,store_timeout=0
	refused store_timeout -o store=redis://127.0.0.1:6379,store_timeout=301
	refused store_timeout -o store=redis://127.0.0.1:6379,store_timeout=soon
	refused store_limits -o store=redis://127.0.0.1:6379,store_limits=merge
}

@test "store_* options without a store are refused" {
	refused store_prefix -o store_prefix=app
	echo secret >"$PWFILE"
	refused store_user -o store_user=app,store_password_file="$PWFILE"
	refused store_user -o store=redis://127.0.0.1:6379,store_user=app
}

@test "a shared store that cannot be reached is refused at start, never replaced by the embedded one" {
	echo secret >"$PWFILE"
	# Port 1 on loopback: nothing listens there.
	refused store -o store=redis://127.0.0.1:1,store_timeout=1 \
		-o "store_user=app,store_password_file=$PWFILE"
	refute_output --partial secret
	refused store -o 'store=sentinel://127.0.0.1:1,[::1]:1/main,store_timeout=1'
	assert_output --partial 'sentinel://127.0.0.1:1,[::1]:1/main'
}

@test "a Redis whose maxmemory-policy may evict keys (allkeys-*, volatile-*) is refused at start with one line naming it; noeviction mounts" {
	redis_start --maxmemory-policy allkeys-lru
	refused store -o "store=unix:$REDIS_SOCK,store_timeout=1"
	assert_output --partial 'maxmemory-policy is allkeys-lru'
	assert_output --partial 'set maxmemory-policy noeviction'
	# volatile-*: op records and a removed tenant's log carry a TTL.
	rcli CONFIG SET maxmemory-policy volatile-lru
	refused store -o "store=unix:$REDIS_SOCK,store_timeout=1"
	assert_output --partial 'maxmemory-policy is volatile-lru'
	# Nothing was written to the store.
	[ "$(rcli DBSIZE)" = 0 ]
	rcli CONFIG SET maxmemory-policy noeviction
	statefs_mount -o "store=unix:$REDIS_SOCK,store_timeout=1"
	mkdir "$MNT/t"
	[ "$(stat_of store)" = connected ]
}

@test "an ACL user that may not run INFO is refused at start: the policy cannot be checked" {
	redis_start
	rcli ACL SETUSER statefs on '>s3cret' '~statefs:*' '&statefs:*' '+@all' '-@dangerous' \
		'+function|load' '+function|list' '+role'
	printf s3cret >"$PWFILE"
	chmod 600 "$PWFILE"
	refused store -o "store=unix:$REDIS_SOCK,store_timeout=1" \
		-o "store_user=statefs,store_password_file=$PWFILE"
	assert_output --partial '+info'
	rcli ACL SETUSER statefs '+info'
	statefs_mount -o "store=unix:$REDIS_SOCK,store_timeout=1" \
		-o "store_user=statefs,store_password_file=$PWFILE"
	mkdir "$MNT/t"
}

# store_is DIR STATE: wait (20 s at most) until DIR's .stats says store STATE.
store_is() {
	local i
	for i in $(seq 200); do
		[ "$(timeout 10 awk '$1 == "store" { print $2 }' "$1/.stats")" = "$2" ] && return 0
		sleep 0.1
	done
	fail "$1 still not 'store $2' after 20 s"
}

@test "a policy made evicting under a live mount: once its connections are made again the mount serves no call (EIO, store disconnected), and recovers when it is noeviction again" {
	redis_start
	statefs_mount -o "store=unix:$REDIS_SOCK,store_timeout=1"
	mkdir -p "$MNT/t/p"
	echo kept >"$MNT/t/p/c"
	rcli CONFIG SET maxmemory-policy allkeys-lru
	# Every connection of the mount is made again, and checked again.
	rcli CLIENT KILL TYPE normal >/dev/null
	run timeout 20 mkdir "$MNT/t/q"
	assert_failure
	assert_output --partial 'Input/output error'
	run timeout 20 rm "$MNT/t/p/c"
	assert_failure
	assert_output --partial 'Input/output error'
	[ "$(stat_of store)" = disconnected ]
	grep -q 'maxmemory-policy is allkeys-lru' "$STATEFS_LOG"
	# Nothing was done: the store has no q and still has c.
	rcli CONFIG SET maxmemory-policy noeviction
	store_is "$MNT" connected
	mkdir "$MNT/t/r"
	[ ! -e "$MNT/t/q" ]
	run cat "$MNT/t/p/c"
	assert_output kept
	# The log says it once, however many calls failed.
	[ "$(grep -c 'maxmemory-policy is allkeys-lru' "$STATEFS_LOG")" = 1 ]
}
