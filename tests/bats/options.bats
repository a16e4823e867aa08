#!/usr/bin/env bats
# statefs(8), OPTIONS and ERRORS: mount options, --help, refusal of bad options.

load helpers

OPTIONS=(max_tenants max_parents max_children max_bytes max_payload max_name
	max_tombstones tombstone_ttl parent_quota tenant_quota default_ttl
	drain_window testclock tenant_max_parents tenant_max_children
	tenant_max_bytes tenant_max_tombstones max_snapshot_bytes
	user_max_snapshot_bytes)

setup() {
	DIR=$(mktemp -d "${TMPDIR:-/tmp}/statefs-bats.XXXXXX")
}

teardown() {
	# A statefs that wrongly mounted anyway is unmounted here (its daemon
	# exits on unmount).
	if _statefs_mounted "$DIR"; then
		fusermount3 -u "$DIR" 2>/dev/null || fusermount3 -uz "$DIR"
	fi
	rmdir "$DIR"
	statefs_unmount
}

# refused OPTS: statefs -o OPTS DIR must exit non-zero with exactly one
# line of output that names NAME ($2), and leave nothing mounted.
refused() {
	run timeout 10 "$STATEFS_BIN" -o "$1" "$DIR"
	assert_failure
	refute [ "$status" -eq 124 ] # timed out: it did not refuse at start
	assert_equal "${#lines[@]}" 1
	assert_output --partial "$2"
	run _statefs_mounted "$DIR"
	assert_failure
}

# bats test_tags=store-free
@test "--help lists every statefs option with its default" {
	run "$STATEFS_BIN" --help
	assert_success
	local o
	for o in "${OPTIONS[@]}"; do
		assert_output --regexp "(^|[^a-z_])$o([^a-z_]|$)"
		assert_line --regexp "(^|[^a-z_])$o([^a-z_].*)?default"
	done
}

# bats test_tags=store-free
@test "--help shows the documented defaults of max_name and max_payload" {
	run "$STATEFS_BIN" --help
	assert_line --regexp 'max_name.*255'
	assert_line --regexp 'max_payload.*(65536|64 ?Ki?B)'
	assert_line --regexp 'drain_window.*30'
}

# bats test_tags=store-free
@test "the rule for a source name is stated whole, in the same words, by --help, the refusal, the man page and the README" {
	local rule="name of 1 to 255 bytes with no ':', '/', white space or control character, not beginning with '.'"
	local root=$BATS_TEST_DIRNAME/../..
	run bash -c '"$1" --help | tr "\n" " "' _ "$STATEFS_BIN"
	assert_output --partial "or any other $rule, is the embedded store"
	run "$root/build/mangen" <"$root/docs/statefs.8.scd"
	assert_output --partial "or any other"$'\n'"$rule is the embedded store"
	run tr '\n' ' ' <"$root/README.md"
	assert_output --partial "or any other $rule, is the embedded one"
	# The rule is the code's: each clause refuses, 255 bytes do not.
	local src long
	long=$(printf 'a%.0s' {1..255})
	for src in a/b .hidden 'a b' $'a\tb' "${long}b"; do
		run timeout 10 "$STATEFS_BIN" -f "$src" "$DIR"
		assert_failure
		assert_equal "${#lines[@]}" 1
		assert_output --partial "or a $rule)"
		run _statefs_mounted "$DIR"
		assert_failure
	done
	# (Past the source, a missing mountpoint is what stops it.)
	run timeout 10 "$STATEFS_BIN" -f "$long" "$DIR/missing"
	assert_failure
	refute_output --partial 'bad source'
	assert_output --partial 'bad mount point'
}

# bats test_tags=store-free
@test "a non-numeric max_tenants is refused at start with a one-line message naming it" {
	refused max_tenants=abc max_tenants
}

# bats test_tags=store-free
@test "a negative max_payload is refused" {
	refused max_payload=-1 max_payload
}

# bats test_tags=store-free
@test "max_name above 255 or of 0 is refused" {
	refused max_name=256 max_name
	refused max_name=0 max_name
}

# bats test_tags=store-free
@test "an empty value is refused" {
	refused max_children= max_children
}

# bats test_tags=store-free
@test "a number that overflows is refused" {
	refused max_bytes=999999999999999999999999 max_bytes
}

# bats test_tags=store-free
@test "a duration that is not seconds is refused" {
	refused drain_window=soon drain_window
	refused tombstone_ttl=1.2345 tombstone_ttl
	refused default_ttl=-5 default_ttl
}

# bats test_tags=store-free
@test "a duration longer than 1000000000 s is refused, whatever the option" {
	refused default_ttl=1000000000.001 default_ttl
	refused default_ttl=18446744073709551.615 default_ttl
	refused tombstone_ttl=18446744073709551 tombstone_ttl
	refused drain_window=9223372036854775.808 drain_window
	refused cache_timeout=1000000001 cache_timeout
}

# bats test_tags=store-free
@test "--help says how long a duration may be" {
	run "$STATEFS_BIN" --help
	assert_line --regexp 'SECONDS.*at most 1000000000 '
}

@test "the longest durations mount" {
	statefs_mount -o default_ttl=1000000000,tombstone_ttl=1000000000,drain_window=1000000000,cache_timeout=1000000000
	run stat_of default_ttl_ms
	assert_output 1000000000000
	run stat_of drain_window_ms
	assert_output 1000000000000
}

# bats test_tags=store-free
@test "testclock takes no value" {
	refused testclock=1 testclock
}

# bats test_tags=store-free
@test "max_payload above max_bytes is refused" {
	refused max_payload=100,max_bytes=50 max_payload
}

# bats test_tags=store-free
@test "a tenant or user share above its ceiling is refused and named" {
	refused tenant_max_parents=100,max_parents=50 tenant_max_parents
	refused max_tombstones=10,tenant_max_tombstones=11 tenant_max_tombstones
	refused tenant_max_bytes=-1 tenant_max_bytes
	refused tenant_max_children=18446744073709551615 tenant_max_children
	refused max_snapshot_bytes=1000,user_max_snapshot_bytes=1001 user_max_snapshot_bytes
	refused max_snapshot_bytes=0 max_snapshot_bytes
}

# bats test_tags=store-free
@test "an unknown option is refused and named" {
	refused bogus_option=1 bogus_option
}

# bats test_tags=store-free
@test "statefs without a mountpoint exits non-zero and mounts nothing" {
	run timeout 10 "$STATEFS_BIN"
	assert_failure
	refute [ "$status" -eq 124 ]
}

@test "good options mount and take effect" {
	statefs_mount -o max_tenants=1,max_name=4,tombstone_ttl=1.5,default_ttl=0,drain_window=2
	mkdir "$MNT/abcd"
	run mkdir "$MNT/b"
	assert_failure
	assert_output --partial 'No space left on device'
	run stat_of tombstone_ttl_ms
	assert_output 1500
	run stat_of drain_window_ms
	assert_output 2000
}
