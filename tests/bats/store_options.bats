#!/usr/bin/env bats
# The shared store options (statefs(8) "Shared store options"): listed in
# --help, checked at start with one line naming the option, nothing
# mounted on a refusal; without them statefs mounts its embedded store.

load helpers

STORE_OPTIONS=(store store_user store_password_file store_prefix
	store_timeout store_limits)

setup() {
	DIR=$(mktemp -d "${TMPDIR:-/tmp}/statefs-bats.XXXXXX")
	PWFILE="$DIR.pw"
}

teardown() {
	if _statefs_mounted "$DIR"; then
		fusermount3 -u "$DIR" 2>/dev/null || fusermount3 -uz "$DIR"
	fi
	rmdir "$DIR"
	rm -f "$PWFILE"
	statefs_unmount
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
