#!/usr/bin/env bats
# docs/shared-store.md: the shared store's transitions, as the Redis Functions
# library redis/lua/*.lua makes them (contract.lua's essay is the contract
# these tests hold it to).  Each test starts from an empty redis-server
# (one for the file, flushed), loads the library and drives it with
# redis-cli FCALL: every outcome of every
# function, in the embedded store's order of checks, the state it leaves
# (keys, counters) and the log entries a mount's mirror applies.
#
# Inode numbers are predictable in a new store: the first tenant is 10
# (its special files 11..18), then every parent or state takes the next.
# The store runs on its manual test clock (testclock 1), which starts at
# 0 and moves only by sfs_clock_advance, so deadlines are exact.

load redis_helpers

META='statefs:{statefs}:meta'
ROOTLOG='statefs:{statefs}:log'
INST=0123456789abcdef
# The library's version: what a mount of this statefs sends to sfs_init.
LIBV=$(sed -n 's/^local LIBVERSION = \([0-9]*\)$/\1/p' "$REDIS_LIBRARY")

# One redis-server for the file: no test stops, breaks or reconfigures
# it, and each starts from an empty one (FLUSHALL: no key of another
# test) with the library loaded afresh.  Its start and stop were most of
# a test's cost.
setup_file() {
	TMPDIR=$BATS_FILE_TMPDIR redis_start
	export REDIS_SOCK REDIS_DIR
}

teardown_file() {
	redis_stop_all
}

setup() {
	# Thousands of commands in this suite: one connection, not a
	# redis-cli each (redis_helpers.bash).
	redis_client
	run rcli FLUSHALL
	assert_output OK
	run rcli DBSIZE
	assert_output 0
	run redis_load_library
	assert_success
	assert_output statefs
}

teardown() {
	# This test's connection; the file's server stays (teardown_file).
	redis_stop_all
}

# --- calling the library ------------------------------------------------------

tkey() { echo "statefs:{statefs.t$1}:t"; }
tpre() { echo "statefs:{statefs.t$1}"; }

# fc FN NKEYS KEY... ARG...: FCALL with the common arguments (this test's
# instance, a fresh op id, no deadline).  The op id (the retry tests pick
# their own): the time in microseconds (a call is a round trip to the
# server), the process and a random number, without starting a process.
fc() {
	local fn=$1 n=$2
	shift 2
	local keys=("${@:1:$n}")
	shift "$n"
	rcli FCALL "$fn" "$n" "${keys[@]}" "$INST" "op${EPOCHREALTIME/./}.$BASHPID.$RANDOM" "" "$@"
}
root() { local fn=$1; shift; fc "$fn" 1 "$META" "$@"; }
ten() { local t=$1 fn=$2; shift 2; fc "$fn" 2 "$META" "$(tkey "$t")" "$@"; }
two() { local a=$1 b=$2 fn=$3; shift 3; fc "$fn" 3 "$META" "$(tkey "$a")" "$(tkey "$b")" "$@"; }
ro() { local fn=$1 n=$2; shift 2; rcli FCALL_RO "$fn" "$n" "$@"; }

# store_init [NAME VALUE]...: a new store on the test clock.
store_init() {
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 testclock 1 "$@"
	assert_line -n 0 OK
}

# The Nth line (0 first) of what a command printed, which must start OK.
okval() {
	local n=$1 out lines
	shift
	out=$("$@")
	mapfile -t lines <<<"$out"
	if [ "${lines[0]}" != OK ]; then
		echo "expected OK from $*: $out" >&2
		return 1
	fi
	[ "$n" -ge "${#lines[@]}" ] || echo "${lines[n]}"
}

# Helpers that make things and print the new node's number.
mk_tenant() { okval 3 root sfs_mkdir_tenant "$1" "${2:-0}" "${3:-0}" "${4:-493}"; }
join() { okval 3 ten "$1" sfs_join "$2" "${3:-0}" "${4:-0}" "${5:-493}"; }
create() { okval 3 ten "$1" sfs_create "$2" "$3" "${4:-0}" "${5:-0}" "${6:-420}" 1; }
publish() { okval 3 ten "$1" sfs_publish "$2" replace "" "$3"; }
advance() { okval 3 root sfs_clock_advance "$1" >/dev/null; }
expire() { okval 3 ten "$1" sfs_expire 100 >/dev/null; }

# expect CODE CMD...: CMD's outcome is CODE.
expect() {
	local code=$1
	shift
	run "$@"
	assert_line -n 0 "$code"
}

# --- looking at the store -------------------------------------------------------

meta() { rcli HGET "$META" "$1"; }
tget() { rcli HGET "$(tkey "$1")" "$2"; }
pget() { rcli HGET "$(tpre "$1"):p:$2" "$3"; }
sget() { rcli HGET "$(tpre "$1"):s:$2" "$3"; }
entry_count() { rcli XLEN "$(tpre "$1"):log"; }

# stat KEY [TID]: one value of sfs_stats (the store's, or the tenant's).
stat() {
	if [ -n "${2:-}" ]; then
		ro sfs_stats 2 "$META" "$(tkey "$2")" "$INST" "" ""
	else
		ro sfs_stats 1 "$META" "$INST" "" ""
	fi | awk -v k="$1" 'NR > 3 && NR % 2 == 0 && $0 == k { getline; print; exit }'
}

# The entries of a log, one line each, "f=v" pairs without ms, ns, by and
# gseq (each tested on its own).
ENTRIES='local out = {}
for _, e in ipairs(redis.call("XRANGE", KEYS[1], "-", "+")) do
	local f, s = e[2], {}
	for i = 1, #f, 2 do
		if f[i] ~= "ms" and f[i] ~= "ns" and f[i] ~= "by" and f[i] ~= "gseq" then s[#s + 1] = f[i] .. "=" .. f[i + 1] end
	end
	out[#out + 1] = table.concat(s, " ")
end
return out'
entries() { rcli EVAL "$ENTRIES" 1 "$(tpre "$1"):log"; }
root_entries() { rcli EVAL "$ENTRIES" 1 "$ROOTLOG"; }
last_entry() { entries "$1" | tail -n 1; }

# Everything the store holds but the logs, the op records and the refusal
# counters, one sorted line per fact: a refusal must leave it as it was.
DIGEST='local out = {}
for _, k in ipairs(redis.call("KEYS", "statefs:*")) do
	if not string.find(k, ":op:", 1, true) and not string.find(k, ":log", 1, true) then
		local t = redis.call("TYPE", k).ok
		if t == "hash" then
			local h = redis.call("HGETALL", k)
			for i = 1, #h, 2 do
				if not string.find(h[i], "^refused_") then
					out[#out + 1] = k .. " " .. h[i] .. "=" .. h[i + 1]
				end
			end
		elseif t == "zset" then
			local z = redis.call("ZRANGE", k, 0, -1, "WITHSCORES")
			for i = 1, #z, 2 do out[#out + 1] = k .. " " .. z[i] .. "@" .. z[i + 1] end
		else
			out[#out + 1] = k .. " " .. t
		end
	end
end
table.sort(out)
return out'
digest() {
	rcli EVAL "$DIGEST" 0
	local t
	for t in $(rcli KEYS 'statefs:*:log'); do
		echo "$t $(rcli XLEN "$t")"
	done | sort
}

# A tenant "acme" (tid 1, ino 10) with parent p (19) holding child c (20).
acme() {
	store_init "$@"
	[ "$(mk_tenant acme)" = 1 ]
	[ "$(join 1 p)" = 19 ]
	[ "$(create 1 19 c)" = 20 ]
}

# --- the library, the instance, at-most-once, deadlines ---------------------------

@test "the library loads; sfs_version is LIBVERSION; read-only functions run under FCALL_RO only" {
	want=$(sed -n 's/^local LIBVERSION = \([0-9]*\)$/\1/p' "$REDIS_LIBRARY")
	run rcli FCALL_RO sfs_version 0
	assert_output "$want"
	store_init
	run ro sfs_stats 1 "$META" "$INST" "" ""
	assert_line -n 0 OK
	run ro sfs_dump 1 "$META" "$INST" "" ""
	assert_line -n 0 OK
	run ro sfs_sync 1 "$META" "$INST" "" ""
	assert_line -n 0 OK
	# A mutation is refused by FCALL_RO: it has no no-writes flag.
	run rcli FCALL_RO sfs_mkdir_tenant 1 "$META" "$INST" "" "" acme 0 0 493
	assert_output --partial 'write flag'
	[ -z "$(rcli HGET statefs:{statefs}:tenants acme)" ]
}

@test "sfs_init records the instance and the limits; a later mount with the same limits joins it" {
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 max_tenants 5 testclock 1
	assert_line -n 0 OK
	assert_line -n 3 "$INST"
	assert_line -n 4 1
	assert_line -n 5 max_tenants
	assert_line -n 6 5
	[ "$(meta ino)" = 10 ]
	[ "$(meta lim_max_tenants)" = 5 ]
	[ "$(meta lim_max_parents)" = 65536 ]
	[ "$(meta state)" = ready ]
	# Another mount, another candidate instance: the recorded one stands.
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" fedcba9876543210 0 testclock 1 max_tenants 5
	assert_line -n 0 OK
	assert_line -n 3 "$INST"
	assert_line -n 4 0
}

@test "sfs_init: other limits are refused naming the first that differs, unless adopted; bad ones are EINVAL" {
	store_init max_tenants 5 tombstone_ttl_ms 1000
	before=$(digest)
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 testclock 1 max_tenants 6 tombstone_ttl_ms 1000
	assert_output "$(printf 'ELIMITS\n0\n0\nmax_tenants\n5\n6')"
	# An option not given is its default, which differs too.
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 testclock 1 max_tenants 5
	assert_line -n 0 ELIMITS
	assert_line -n 3 tombstone_ttl_ms
	assert_line -n 4 1000
	assert_line -n 5 600000
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 testclock 1 no_such_limit 1
	assert_output "$(printf 'EINVAL\n0\n0\nno_such_limit')"
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 max_tenants 1x
	assert_line -n 0 EINVAL
	[ "$(digest)" = "$before" ]
	# store_limits=adopt: the store's limits, whatever this mount asked.
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 1 max_tenants 99
	assert_line -n 0 OK
	assert_line -n 5 max_tenants
	assert_line -n 6 5
	[ "$(meta lim_max_tenants)" = 5 ]
}

@test "sfs_init: a mount older than the library is refused with ELIBVERSION" {
	store_init
	want=$(sed -n 's/^local LIBVERSION = \([0-9]*\)$/\1/p' "$REDIS_LIBRARY")
	run rcli FCALL sfs_init 1 "$META" "" "" "" $((want - 1)) "$INST" 0 testclock 1
	assert_output "$(printf 'ELIBVERSION\n0\n0\n%s' "$want")"
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$want" "$INST" 0 testclock 1
	assert_line -n 0 OK
}

@test "another instance, or a store that lost its data, is ESTALEINST and nothing changes" {
	acme
	before=$(digest)
	run rcli FCALL sfs_join 2 "$META" "$(tkey 1)" fedcba9876543210 "" "" q 0 0 493
	assert_line -n 0 ESTALEINST
	assert_line -n 3 "$INST"
	run rcli FCALL sfs_unlink 2 "$META" "$(tkey 1)" fedcba9876543210 "" "" 19 c
	assert_line -n 0 ESTALEINST
	run rcli FCALL_RO sfs_dump 2 "$META" "$(tkey 1)" fedcba9876543210 "" ""
	assert_line -n 0 ESTALEINST
	[ "$(digest)" = "$before" ]
	rcli FLUSHALL >/dev/null
	expect ESTALEINST ten 1 sfs_join q 0 0 493
	expect ESTALEINST root sfs_mkdir_tenant other 0 0 493
	[ -z "$(rcli KEYS '*')" ]
}

@test "a mount's successful call ends its outcome with its own entries as the log holds them; a retry's, a refusal's and a call naming no mount have none" {
	acme
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" m1:1 "" 19 d 0 0 420 1
	assert_line -n 0 OK
	assert_line -n 5 sfs.entries
	id=${lines[6]}
	# Everything after the id is the entry's FIELD VALUE list, as XRANGE
	# gives it, the mount named (by m1).
	given=$(printf '%s\n' "${lines[@]:7}")
	logged=$(rcli XRANGE "$(tpre 1):log" "$id" "$id" | tail -n +2)
	assert_equal "$given" "$logged"
	grep -qx 'by' <<<"$given"
	assert_equal "$(grep -A1 -x by <<<"$given" | tail -1)" m1
	assert_equal "$(grep -A1 -x op <<<"$given" | tail -1)" create
	# The retry gets the recorded outcome: no entries.
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" m1:1 "" 19 d 0 0 420 1
	assert_equal "${#lines[@]}" 5
	refute_line sfs.entries
	# A refusal appended nothing.
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" m1:2 "" 19 d 0 0 420 1
	assert_line -n 0 EEXIST
	refute_line sfs.entries
	okval 0 ten 1 sfs_create 19 e 0 0 420 1 >/dev/null
	# A call that names no mount (its operation id has no MOUNT:): none.
	run ten 1 sfs_unlink 19 e
	assert_line -n 0 OK
	refute_line sfs.entries
}

@test "a retried operation returns its recorded outcome and applies nothing twice" {
	acme
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" retry-1 "" 19 d 0 0 420 1
	assert_line -n 0 OK
	first=$output
	n=$(entry_count 1)
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" retry-1 "" 19 d 0 0 420 1
	assert_output "$first"
	[ "$(entry_count 1)" = "$n" ]
	[ "$(stat admissions)" = 2 ]
	[ "$(stat children)" = 2 ]
	# Removed since, the retry still answers what happened then and
	# does not make it again.
	run ten 1 sfs_unlink 19 d
	assert_line -n 0 OK
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" retry-1 "" 19 d 0 0 420 1
	assert_output "$first"
	[ "$(stat children)" = 1 ]
	[ -z "$(rcli HGET "$(tpre 1):l:19" d)" ]
	# A refusal is an outcome too: its retry does not count it again.
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" retry-2 "" 19 c 0 0 420 1
	assert_line -n 0 EEXIST
	refused=$output
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" retry-2 "" 19 c 0 0 420 1
	assert_output "$refused"
	[ "$(stat refused_exists)" = 1 ]
	# Root-level operations too.
	run rcli FCALL sfs_mkdir_tenant 1 "$META" "$INST" retry-3 "" other 0 0 493
	assert_line -n 0 OK
	t=$output
	run rcli FCALL sfs_mkdir_tenant 1 "$META" "$INST" retry-3 "" other 0 0 493
	assert_output "$t"
	[ "$(stat tenants)" = 2 ]
}

# The server's real time (TIME) in ms.
real_ms() { rcli TIME | { read -r s; read -r u; echo $((s * 1000 + u / 1000)); }; }

@test "past its deadline_ms on the server's real time a mutation is ETIMEDOUT, changes nothing and is not recorded" {
	acme
	advance 5000
	before=$(digest)
	past=$(($(real_ms) - 1))
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" late-1 "$past" 19 d 0 0 420 1
	assert_line -n 0 ETIMEDOUT
	assert_line -n 1 5000
	assert_line -n 2 3
	[ "${lines[3]}" -gt "$past" ]
	run rcli FCALL sfs_mkdir_tenant 1 "$META" "$INST" late-2 1 other 0 0 493
	assert_line -n 0 ETIMEDOUT
	[ "$(digest)" = "$before" ]
	# Not recorded: the same operation within its deadline happens.
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" late-1 $(($(real_ms) + 60000)) 19 d 0 0 420 1
	assert_line -n 0 OK
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" late-4 "" 19 e 0 0 420 1
	assert_line -n 0 OK
}

@test "the deadline is on the server's real time under testclock: the manual clock standing still does not keep a late call in time" {
	acme
	# The manual clock is at 0, far below any real time: a deadline a
	# second ago is past however the manual clock stands.
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" late-1 $(($(real_ms) - 1000)) 19 d 0 0 420 1
	assert_line -n 0 ETIMEDOUT
	[ -z "$(rcli HGET "$(tpre 1):l:19" d)" ]
}

@test "sfs_fence: before the call it records a refusal the call then returns, doing nothing; after the call it returns the call's outcome" {
	acme
	before=$(digest)
	run rcli FCALL sfs_fence 2 "$META" "$(tkey 1)" "$INST" fenced-1
	assert_line -n 0 ETIMEDOUT
	fenced=$output
	# Only the op record was written.
	[ "$(digest)" = "$before" ]
	[ -n "$(rcli GET "$(tpre 1):op:fenced-1")" ]
	# The call, run late (even within its deadline), finds the refusal.
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" fenced-1 "" 19 d 0 0 420 1
	assert_output "$fenced"
	[ "$(digest)" = "$before" ]
	[ -z "$(rcli HGET "$(tpre 1):l:19" d)" ]
	# A call that ran first: the fence returns what it did.
	run rcli FCALL sfs_create 2 "$META" "$(tkey 1)" "$INST" ran-1 "" 19 e 0 0 420 1
	assert_line -n 0 OK
	ran=$output
	run rcli FCALL sfs_fence 2 "$META" "$(tkey 1)" "$INST" ran-1
	assert_output "$ran"
	# Root-level operations keep their record in the root's keys.
	run rcli FCALL sfs_fence 1 "$META" "$INST" fenced-2
	assert_line -n 0 ETIMEDOUT
	run rcli FCALL sfs_mkdir_tenant 1 "$META" "$INST" fenced-2 "" other 0 0 493
	assert_line -n 0 ETIMEDOUT
	[ -z "$(rcli HGET 'statefs:{statefs}:tenants' other)" ]
	run rcli FCALL sfs_mkdir_tenant 1 "$META" "$INST" ran-2 "" other 0 0 493
	assert_line -n 0 OK
	ran=$output
	run rcli FCALL sfs_fence 1 "$META" "$INST" ran-2
	assert_output "$ran"
	# Another instance, or no operation id: refused, nothing recorded.
	run rcli FCALL sfs_fence 1 "$META" fedcba9876543210 fenced-3
	assert_line -n 0 ESTALEINST
	run rcli FCALL sfs_fence 1 "$META" "$INST" ""
	assert_line -n 0 EINVAL
	[ -z "$(rcli GET 'statefs:{statefs}:op:fenced-3')" ]
}

# --- tenants ---------------------------------------------------------------------------

@test "sfs_mkdir_tenant: tenant ids and inode blocks, its first log entry, the root log" {
	store_init
	run root sfs_mkdir_tenant acme 1000 100 1517
	assert_output "$(printf 'OK\n0\n1\n1\n10\n1')"
	run root sfs_mkdir_tenant beta 0 0 493
	assert_line -n 3 2
	assert_line -n 4 19
	[ "$(tget 1 name)" = acme ]
	[ "$(tget 1 uid)" = 1000 ]
	[ "$(tget 1 gid)" = 100 ]
	[ "$(tget 1 mode)" = 1517 ]
	[ "$(tget 1 state)" = ready ]
	[ "$(rcli HGET statefs:{statefs}:tenants beta)" = 2 ]
	[ "$(meta ino)" = 28 ]
	[ "$(stat tenants)" = 2 ]
	run entries 1
	assert_output 'seq=1 op=join kind=tenant name=acme tid=1 ino=10 uid=1000 gid=100 mode=1517'
	run root_entries
	assert_output "$(printf 'seq=1 op=tenant name=acme tid=1 ino=10\nseq=2 op=tenant name=beta tid=2 ino=19')"
	# Only the permission bits of a mode are kept.
	run root sfs_mkdir_tenant gamma 0 0 $((8#100755))
	[ "$(tget 3 mode)" = 493 ]
}

@test "sfs_mkdir_tenant: an existing name is EEXIST, a bad name EINVAL or ENAMETOOLONG, and nothing changes" {
	store_init max_name 8
	mk_tenant acme >/dev/null
	before=$(digest)
	expect EEXIST root sfs_mkdir_tenant acme 0 0 493
	[ "$(stat refused_exists)" = 1 ]
	for bad in "" - .hidden "a b" "a/b" $'a\tb' $'a\x7fb' $'a\x01b'; do
		run root sfs_mkdir_tenant "$bad" 0 0 493
		assert_line -n 0 EINVAL
	done
	expect ENAMETOOLONG root sfs_mkdir_tenant abcdefghi 0 0 493
	[ "$(digest)" = "$before" ]
	# Only a leading dot is reserved; UTF-8 bytes are fine.
	expect OK root sfs_mkdir_tenant abcdefgh 0 0 493
	expect OK root sfs_mkdir_tenant a. 0 0 493
	expect OK root sfs_mkdir_tenant $'caf\xc3\xa9' 0 0 493
}

@test "sfs_mkdir_tenant: max_tenants is exact; a draining store is EROFS" {
	store_init max_tenants 2
	mk_tenant a >/dev/null
	mk_tenant b >/dev/null
	before=$(digest)
	expect ENOSPC root sfs_mkdir_tenant c 0 0 493
	[ "$(stat refused_capacity)" = 1 ]
	[ "$(digest)" = "$before" ]
	expect OK root sfs_rmdir_tenant b "" "" ""
	expect OK root sfs_mkdir_tenant c 0 0 493
	rcli HSET "$META" state draining >/dev/null
	expect EROFS root sfs_mkdir_tenant d 0 0 493
	[ "$(stat refused_draining)" = 1 ]
}

@test "sfs_rmdir_tenant: everything in the tenant goes in one step; an unknown tenant is ENOENT, not counted" {
	acme tombstone_ttl_ms 1000
	q=$(join 1 q)
	okval 0 two 1 1 sfs_link 20 "$q" c2 >/dev/null
	create 1 "$q" d >/dev/null
	publish 1 20 hello >/dev/null
	okval 0 ten 1 sfs_depart gone "" "" "" >/dev/null
	[ "$(stat tombstones)" = 1 ]
	expect ENOENT root sfs_rmdir_tenant nosuch "" "" ""
	[ "$(stat refused_gone)" = 0 ]
	run root sfs_rmdir_tenant acme "" "" ""
	assert_line -n 0 OK
	for g in tenants parents children links tombstones bytes; do
		[ "$(stat $g)" = 0 ]
	done
	[ "$(stat leaves)" = 2 ]
	[ "$(stat removals)" = 2 ]
	# What is left of tenant 1: its log (for a while) and op records.
	run rcli KEYS "$(tpre 1):*"
	refute_output --regexp ':(t|parents|tombs|due|p:[0-9]+|l:[0-9]+|s:[0-9]+)$'
	[ "$(rcli EXISTS statefs:{statefs}:tombq)" = 0 ]
	[ "$(rcli PTTL "$(tpre 1):log")" -gt 0 ]
	run last_entry 1
	assert_output --regexp '^seq=[0-9]+ op=cleanup name=acme tid=1$'
	run root_entries
	assert_line -n 1 'seq=2 op=cleanup name=acme tid=1'
	# The old tenant is dead for every function; the name is free.
	expect ESTALE ten 1 sfs_join p 0 0 493
	[ "$(stat refused_stale)" = 1 ]
	run root sfs_mkdir_tenant acme 0 0 493
	assert_line -n 3 2
}

@test "sfs_rmdir_tenant with a credential: only a cascade the caller could do by hand (EACCES, nothing removed)" {
	store_init
	mk_tenant t 1000 1000 493 >/dev/null
	p=$(join 1 p 1001 1001 493)
	create 1 "$p" c 1001 1001 420 >/dev/null
	before=$(digest)
	# Neither the tenant's owner (no write on p) nor a stranger may.
	expect EACCES root sfs_rmdir_tenant t 1000 1000 ""
	expect EACCES root sfs_rmdir_tenant t 1002 1002 ""
	[ "$(digest)" = "$before" ]
	[ "$(stat refused_capacity)$(stat refused_gone)$(stat refused_stale)" = 000 ]
	# A supplementary group with write on p and the tenant is enough.
	ten 1 sfs_setattr parent "$p" $((8#775)) "" "" "" "" "" >/dev/null
	ten 1 sfs_setattr tenant 10 $((8#775)) "" 50 "" "" "" >/dev/null
	ten 1 sfs_setattr parent "$p" "" "" 50 "" "" "" >/dev/null
	expect EACCES root sfs_rmdir_tenant t 1002 1002 ""
	expect OK root sfs_rmdir_tenant t 1002 1002 7,50
}

@test "sfs_rmdir_tenant: a sticky tenant is emptied only by its owner or the owner of every parent" {
	store_init
	mk_tenant t 1000 1000 $((8#1777)) >/dev/null
	p=$(join 1 p 1001 1001 $((8#777)))
	create 1 "$p" c 1001 1001 420 >/dev/null
	expect EACCES root sfs_rmdir_tenant t 1002 1002 ""
	expect OK root sfs_rmdir_tenant t 1000 1000 ""
	# root may anything; an empty tenant is the kernel's to judge.
	mk_tenant u 1000 1000 493 >/dev/null
	expect OK root sfs_rmdir_tenant u 1002 1002 ""
}

# --- parents -------------------------------------------------------------------------------

@test "sfs_join: generation 1, the parent's record and entry; EEXIST; dead tenant ESTALE; bad names" {
	store_init max_name 8
	mk_tenant acme >/dev/null
	run ten 1 sfs_join p 1000 100 493
	assert_output "$(printf 'OK\n0\n2\n19\n1')"
	[ "$(pget 1 19 name)" = p ]
	[ "$(pget 1 19 gen)" = 1 ]
	[ "$(pget 1 19 uid)" = 1000 ]
	[ "$(pget 1 19 links)" = 0 ]
	[ "$(rcli HGET "$(tpre 1):parents" p)" = 19 ]
	[ "$(tget 1 mtime)" = "$(pget 1 19 ctime)" ]
	run last_entry 1
	assert_output 'seq=2 op=join kind=parent name=p ino=19 gen=1 uid=1000 gid=100 mode=493'
	[ "$(stat joins)" = 1 ]
	[ "$(stat parents 1)" = 1 ]
	before=$(digest)
	expect EEXIST ten 1 sfs_join p 0 0 493
	[ "$(stat refused_exists)" = 1 ]
	expect EINVAL ten 1 sfs_join .p 0 0 493
	expect EINVAL ten 1 sfs_join - 0 0 493
	expect ENAMETOOLONG ten 1 sfs_join abcdefghi 0 0 493
	expect ESTALE ten 7 sfs_join q 0 0 493
	[ "$(stat refused_stale)" = 1 ]
	[ "$(digest)" = "$before" ]
}

@test "sfs_join: max_parents is exact store-wide; a draining tenant or store is EROFS" {
	store_init max_parents 2
	mk_tenant a >/dev/null
	mk_tenant b >/dev/null
	join 1 p >/dev/null
	join 2 p >/dev/null
	before=$(digest)
	expect ENOSPC ten 1 sfs_join q 0 0 493
	[ "$(stat refused_capacity)" = 1 ]
	[ "$(digest)" = "$before" ]
	expect OK ten 2 sfs_leave p "" "" ""
	expect OK ten 1 sfs_join q 0 0 493
	okval 0 ten 1 sfs_drain >/dev/null
	expect EROFS ten 1 sfs_join r 0 0 493
	# Draining comes before exists (parent_join's order).
	expect EROFS ten 1 sfs_join q 0 0 493
	[ "$(stat refused_draining)" = 2 ]
}

@test "sfs_join: a setgid tenant gives a new parent its group and the setgid bit" {
	store_init
	mk_tenant t 0 50 $((8#2775)) >/dev/null
	join 1 p 1000 1000 493 >/dev/null
	[ "$(pget 1 19 gid)" = 50 ]
	[ "$(pget 1 19 mode)" = $((8#2755)) ]
}

@test "sfs_leave: cascade in one step, a shared state keeps its other link, a tombstone; rejoin is generation + 1" {
	acme
	q=$(join 1 q)
	create 1 19 own >/dev/null
	okval 0 two 1 1 sfs_link 20 "$q" shared >/dev/null
	publish 1 20 keep >/dev/null
	run ten 1 sfs_leave p "" "" ""
	assert_line -n 0 OK
	assert_line -n 3 1
	[ -z "$(rcli HGET "$(tpre 1):parents" p)" ]
	[ "$(rcli EXISTS "$(tpre 1):p:19" "$(tpre 1):l:19")" = 0 ]
	[ "$(sget 1 20 nlink)" = 1 ]
	[ "$(sget 1 20 links)" = "$q/shared" ]
	[ "$(sget 1 20 data)" = keep ]
	[ "$(rcli EXISTS "$(tpre 1):s:22")" = 0 ]
	[ "$(stat children)" = 1 ]
	[ "$(stat links)" = 1 ]
	[ "$(stat parents)" = 1 ]
	[ "$(stat tombstones)" = 1 ]
	[ "$(stat bytes)" = 4 ]
	[ "$(stat leaves)" = 1 ]
	[ "$(stat removals)" = 1 ]
	run last_entry 1
	assert_output --regexp '^seq=[0-9]+ op=leave name=p gen=1 tomb=600000 ino=19$'
	[ "$(rcli HGET "$(tpre 1):tombs" p)" = "1 600000" ]
	[ "$(rcli ZSCORE statefs:{statefs}:tombq 1/p)" = 600000 ]
	expect ENOENT ten 1 sfs_leave p "" "" ""
	[ "$(stat refused_gone)" = 1 ]
	# Rejoin: generation 2, the tombstone cleared.
	run ten 1 sfs_join p 0 0 493
	assert_line -n 4 2
	[ "$(stat tombstones)" = 0 ]
	[ -z "$(rcli HGET "$(tpre 1):tombs" p)" ]
	expect ENOENT ten 1 sfs_leave nosuch "" "" ""
	expect ESTALE ten 5 sfs_leave p "" "" ""
	[ "$(stat refused_gone)$(stat refused_stale)" = 21 ]
}

@test "sfs_leave: a full tombstone pool is ENOSPC and removes nothing, until due tombstones age out" {
	acme max_tombstones 2 tombstone_ttl_ms 1000
	b=$(mk_tenant other)
	join "$b" x >/dev/null
	okval 0 ten 1 sfs_depart ghost1 "" "" "" >/dev/null
	advance 10
	okval 0 ten "$b" sfs_leave x "" "" "" >/dev/null
	before=$(digest)
	expect ENOSPC ten 1 sfs_leave p "" "" ""
	expect ENOSPC ten 1 sfs_depart ghost2 "" "" ""
	[ "$(stat refused_capacity)" = 2 ]
	[ "$(digest)" = "$before" ]
	# ghost1 is due at 1000, x at 1010: one ages out, store-wide, and
	# makes room.
	advance 990
	run ten 1 sfs_leave p "" "" ""
	assert_line -n 0 OK
	[ "$(stat tombstones)" = 2 ]
	[ -z "$(rcli HGET "$(tpre 1):tombs" ghost1)" ]
	run entries 1
	assert_line --regexp '^seq=[0-9]+ op=tomb_age name=ghost1$'
	[ "$(rcli HGET "$(tpre "$b"):tombs" x)" = "1 1010" ]
}

@test "sfs_depart: a tombstone whether or not the parent exists; again before a rejoin restarts its age" {
	acme tombstone_ttl_ms 1000 max_name 8
	run ten 1 sfs_depart later "" "" ""
	assert_output "$(printf 'OK\n0\n4\n0')"
	run last_entry 1
	assert_output 'seq=4 op=depart name=later gen=0 tomb=1000'
	[ "$(rcli HGET "$(tpre 1):tombs" later)" = "0 1000" ]
	advance 500
	run ten 1 sfs_depart later "" "" ""
	assert_line -n 0 OK
	run last_entry 1
	assert_output 'seq=5 op=depart name=later gen=0 tomb=1500 refresh=1'
	[ "$(stat tombstones)" = 1 ]
	# A rejoin after a depart of a name that never joined: generation 1.
	run ten 1 sfs_join later 0 0 493
	assert_line -n 4 1
	# A live parent: the same cascade as leave.
	run ten 1 sfs_depart p "" "" ""
	assert_line -n 3 1
	run last_entry 1
	assert_output 'seq=7 op=depart name=p gen=1 tomb=1500 ino=19'
	[ "$(stat children)" = 0 ]
	before=$(digest)
	expect EINVAL ten 1 sfs_depart .x "" "" ""
	expect EINVAL ten 1 sfs_depart - "" "" ""
	expect EINVAL ten 1 sfs_depart "" "" "" ""
	expect ENAMETOOLONG ten 1 sfs_depart abcdefghi "" "" ""
	expect ESTALE ten 9 sfs_depart x "" "" ""
	[ "$(digest)" = "$before" ]
}

@test "sfs_leave and sfs_depart with a credential: EACCES (not counted) unless the caller could empty the parent" {
	store_init
	mk_tenant t 0 0 $((8#777)) >/dev/null
	p=$(join 1 p 1000 1000 493)
	create 1 "$p" c 1000 1000 420 >/dev/null
	e=$(join 1 empty 1000 1000 493)
	before=$(digest)
	expect EACCES ten 1 sfs_leave p 1001 1001 ""
	expect EACCES ten 1 sfs_depart p 1001 1001 ""
	[ "$(digest)" = "$before" ]
	[ "$(stat refused_capacity)$(stat refused_gone)" = 00 ]
	# An empty parent: nothing to remove by hand.
	expect OK ten 1 sfs_leave empty 1001 1001 ""
	# A sticky parent: only the caller's own children.
	ten 1 sfs_setattr parent "$p" $((8#1777)) "" "" "" "" "" >/dev/null
	okval 0 ten 1 sfs_setattr child 20 "" 1001 "" "" "" "" >/dev/null
	create 1 "$p" d 1002 1002 420 >/dev/null
	expect EACCES ten 1 sfs_leave p 1001 1001 ""
	expect OK ten 1 sfs_unlink "$p" d
	expect OK ten 1 sfs_leave p 1001 1001 ""
	[ -n "$e" ]
}

@test "an expired parent is reaped on the way: leave is ENOENT, join makes the next generation" {
	acme
	okval 0 ten 1 sfs_set_ttl parent 19 100 >/dev/null
	advance 100
	expect ENOENT ten 1 sfs_leave p "" "" ""
	run entries 1
	assert_line --regexp '^seq=[0-9]+ op=expire kind=parent name=p ino=19 gen=1 tomb=600100$'
	[ "$(stat expiries)" = 1 ]
	[ "$(stat leaves)" = 1 ]
	[ "$(stat removals)" = 1 ]
	[ "$(stat children)" = 0 ]
	run ten 1 sfs_join p 0 0 493
	assert_line -n 4 2
	[ "$(stat tombstones)" = 0 ]
}

# --- children ------------------------------------------------------------------------------

@test "sfs_create: the new state and its entry; an existing name is returned, or EEXIST when exclusive" {
	store_init
	mk_tenant acme >/dev/null
	join 1 p 0 0 493 >/dev/null
	run ten 1 sfs_create 19 c 1000 100 $((8#100644)) 1
	assert_output "$(printf 'OK\n0\n3\n20\n1')"
	[ "$(sget 1 20 version)" = 0 ]
	[ "$(sget 1 20 nlink)" = 1 ]
	[ "$(sget 1 20 mode)" = 420 ]
	[ "$(sget 1 20 uid)" = 1000 ]
	[ "$(sget 1 20 links)" = 19/c ]
	[ "$(rcli HGET "$(tpre 1):l:19" c)" = 20 ]
	[ "$(pget 1 19 links)" = 1 ]
	[ "$(pget 1 19 mtime)" = "$(sget 1 20 ctime)" ]
	run last_entry 1
	assert_output 'seq=3 op=create parent=p pino=19 child=c ino=20 gen=1 uid=1000 gid=100 mode=420 ttl=0 deadline=0'
	[ "$(stat admissions)" = 1 ]
	before=$(digest)
	run ten 1 sfs_create 19 c 0 0 420 0
	assert_output "$(printf 'OK\n0\n3\n20\n0')"
	expect EEXIST ten 1 sfs_create 19 c 0 0 420 1
	[ "$(stat refused_exists)" = 1 ]
	expect EINVAL ten 1 sfs_create 19 . 0 0 420 1
	expect EINVAL ten 1 sfs_create 19 .. 0 0 420 1
	expect EINVAL ten 1 sfs_create 19 "c d" 0 0 420 1
	expect EINVAL ten 1 sfs_create 19 - 0 0 420 1
	[ "$(digest)" = "$before" ]
	# A child's name may begin with a dot (a tenant's or a parent's not).
	[ "$(create 1 19 .c)" = 21 ]
	expect EINVAL ten 1 sfs_join .q 0 0 493
	expect EINVAL root sfs_mkdir_tenant .t 0 0 493
}

@test "sfs_create: through a departed parent ESTALE, but a draining tenant is EROFS first" {
	acme
	okval 0 ten 1 sfs_leave p "" "" "" >/dev/null
	join 1 p >/dev/null
	before=$(digest)
	expect ESTALE ten 1 sfs_create 19 d 0 0 420 1
	expect ESTALE ten 1 sfs_unlink 19 c
	[ "$(stat refused_stale)" = 2 ]
	[ "$(digest)" = "$before" ]
	okval 0 ten 1 sfs_drain >/dev/null
	expect EROFS ten 1 sfs_create 19 d 0 0 420 1
	expect EROFS ten 1 sfs_create 21 d 0 0 420 1
	[ "$(stat refused_draining)" = 2 ]
}

@test "sfs_create: max_children, parent_quota and tenant_quota are exact; links count in quotas" {
	store_init max_children 3 parent_quota 2 tenant_quota 3
	mk_tenant a >/dev/null
	mk_tenant b >/dev/null
	p=$(join 1 p)
	q=$(join 1 q)
	bp=$(join 2 p)
	c1=$(create 1 "$p" c1)
	create 1 "$p" c2 >/dev/null
	before=$(digest)
	expect EDQUOT ten 1 sfs_create "$p" c3 0 0 420 1
	expect EDQUOT two 1 1 sfs_link "$c1" "$p" l1
	[ "$(stat refused_quota)" = 2 ]
	[ "$(digest)" = "$before" ]
	okval 0 two 1 1 sfs_link "$c1" "$q" l1 >/dev/null
	# Tenant a holds 3 entries: its quota.
	expect EDQUOT ten 1 sfs_create "$q" c4 0 0 420 1
	create 2 "$bp" x >/dev/null
	# 3 states in the store: the ceiling, checked before quotas.
	expect ENOSPC ten 2 sfs_create "$bp" y 0 0 420 1
	expect ENOSPC ten 1 sfs_create "$q" c4 0 0 420 1
	[ "$(stat refused_capacity)" = 2 ]
	[ "$(stat children)" = 3 ]
	[ "$(stat links)" = 4 ]
}

@test "sfs_create: the lease a child starts with is its parent's child_ttl, else default_ttl" {
	store_init default_ttl_ms 5000
	mk_tenant a >/dev/null
	p=$(join 1 p)
	create 1 "$p" plain >/dev/null
	[ "$(sget 1 20 ttl)" = 5000 ]
	[ "$(sget 1 20 deadline)" = 5000 ]
	[ "$(rcli ZSCORE "$(tpre 1):due" s:20)" = 5000 ]
	run ten 1 sfs_set_child_ttl "$p" 700
	assert_line -n 0 OK
	run last_entry 1
	assert_output --regexp '^seq=[0-9]+ op=child_ttl ino=19 ttl=700$'
	advance 10
	create 1 "$p" short >/dev/null
	[ "$(sget 1 21 ttl)" = 700 ]
	[ "$(sget 1 21 deadline)" = 710 ]
	run last_entry 1
	assert_output --regexp 'ttl=700 deadline=710$'
	okval 0 ten 1 sfs_set_child_ttl "$p" 0 >/dev/null
	create 1 "$p" back >/dev/null
	[ "$(sget 1 22 ttl)" = 5000 ]
	# A departed parent: ESTALE, not a counted refusal.
	okval 0 ten 1 sfs_leave p "" "" "" >/dev/null
	expect ESTALE ten 1 sfs_set_child_ttl "$p" 5
	[ "$(stat refused_stale)" = 0 ]
}

@test "sfs_create: a setgid parent gives a new child its group" {
	store_init
	mk_tenant a >/dev/null
	join 1 p 0 50 $((8#2775)) >/dev/null
	create 1 19 c 1000 1000 420 >/dev/null
	[ "$(sget 1 20 gid)" = 50 ]
	[ "$(sget 1 20 mode)" = 420 ]
}

@test "sfs_unlink: exactly one wins, the next is ENOENT; the state, its bytes and its entry go" {
	acme
	publish 1 20 hello >/dev/null
	run ten 1 sfs_unlink 19 c
	assert_output "$(printf 'OK\n0\n5')"
	run last_entry 1
	assert_output 'seq=5 op=unlink parent=p pino=19 child=c ino=20 gen=1 ver=1'
	[ "$(rcli EXISTS "$(tpre 1):s:20")" = 0 ]
	[ "$(pget 1 19 links)" = 0 ]
	for g in children links bytes; do [ "$(stat $g)" = 0 ]; done
	[ "$(stat removals)" = 1 ]
	before=$(digest)
	expect ENOENT ten 1 sfs_unlink 19 c
	expect ENOENT ten 1 sfs_unlink 19 nosuch
	[ "$(stat refused_gone)" = 2 ]
	[ "$(digest)" = "$before" ]
}

@test "sfs_unlink of a child past its deadline is ENOENT: it expired, and is reaped as an expiry" {
	acme
	okval 0 ten 1 sfs_set_ttl child 20 50 >/dev/null
	advance 50
	expect ENOENT ten 1 sfs_unlink 19 c
	run last_entry 1
	assert_output --regexp '^seq=[0-9]+ op=expire kind=child ino=20 ver=0 lines=p/c$'
	[ "$(stat expiries)" = 1 ]
	[ "$(stat removals)" = 0 ]
	[ "$(stat children)" = 0 ]
	[ "$(rcli ZCARD "$(tpre 1):due")" = 0 ]
}

# --- links -------------------------------------------------------------------------------

@test "sfs_link: one state, two links; a publication is one write line per link, newest first; the last unlink ends it" {
	acme
	q=$(join 1 q)
	run two 1 1 sfs_link 20 "$q" c2
	assert_line -n 0 OK
	run last_entry 1
	assert_output "seq=5 op=link parent=q pino=$q child=c2 ino=20 gen=1 ver=0"
	[ "$(sget 1 20 nlink)" = 2 ]
	[ "$(sget 1 20 links)" = "$q/c2 19/c" ]
	[ "$(stat children)" = 1 ]
	[ "$(stat links)" = 2 ]
	[ "$(stat admissions)" = 2 ]
	run ten 1 sfs_publish 20 replace "" both
	assert_output "$(printf 'OK\n0\n7\n1')"
	run last_entry 1
	assert_output 'seq=6 nseq=2 op=write ino=20 ver=1 data=both lines=q/c2 p/c'
	okval 0 ten 1 sfs_unlink 19 c >/dev/null
	[ "$(sget 1 20 nlink)" = 1 ]
	[ "$(sget 1 20 data)" = both ]
	[ "$(stat removals)" = 0 ]
	okval 0 ten 1 sfs_unlink "$q" c2 >/dev/null
	[ "$(rcli EXISTS "$(tpre 1):s:20")" = 0 ]
	[ "$(stat removals)" = 1 ]
}

@test "sfs_link: EEXIST, EXDEV across tenants (not counted), ESTALE for a removed state, EROFS while draining" {
	acme max_name 8
	q=$(join 1 q)
	create 1 "$q" taken >/dev/null
	b=$(mk_tenant other)
	bp=$(join "$b" p)
	before=$(digest)
	expect EEXIST two 1 1 sfs_link 20 "$q" taken
	[ "$(stat refused_exists)" = 1 ]
	expect EXDEV two "$b" 1 sfs_link 20 "$bp" x
	expect EINVAL two 1 1 sfs_link 20 "$q" ..
	expect EINVAL two 1 1 sfs_link 20 "$q" -
	expect ENAMETOOLONG two 1 1 sfs_link 20 "$q" abcdefghi
	[ "$(digest)" = "$before" ]
	okval 0 ten 1 sfs_unlink 19 c >/dev/null
	expect ESTALE two 1 1 sfs_link 20 "$q" x
	[ "$(stat refused_stale)" = 1 ]
	d=$(create 1 19 d)
	okval 0 ten 1 sfs_drain >/dev/null
	expect EROFS two 1 1 sfs_link "$d" "$q" x
	[ "$(stat refused_draining)" = 1 ]
}

# --- rename --------------------------------------------------------------------------------

@test "sfs_rename: a move hands the link to another parent, in one entry" {
	acme
	q=$(join 1 q)
	run two 1 1 sfs_rename 19 c "$q" moved 0
	assert_line -n 0 OK
	[ -z "$(rcli HGET "$(tpre 1):l:19" c)" ]
	[ "$(rcli HGET "$(tpre 1):l:$q" moved)" = 20 ]
	[ "$(sget 1 20 links)" = "$q/moved" ]
	[ "$(pget 1 19 links)" = 0 ]
	[ "$(pget 1 "$q" links)" = 1 ]
	[ "$(stat links)" = 1 ]
	run last_entry 1
	assert_output "seq=5 op=rename parent=p pino=19 child=c to_parent=q to_pino=$q to_child=moved ino=20 gen=1 ver=0"
	# Within one parent, to a new name.
	okval 0 two 1 1 sfs_rename "$q" moved "$q" again 0 >/dev/null
	[ "$(sget 1 20 links)" = "$q/again" ]
	[ "$(pget 1 "$q" links)" = 1 ]
}

@test "sfs_rename over an existing name: the replaced state loses its link (unlink line, then rename line)" {
	acme
	q=$(join 1 q)
	z=$(create 1 "$q" z)
	publish 1 "$z" old >/dev/null
	run two 1 1 sfs_rename 19 c "$q" z 0
	assert_line -n 0 OK
	run last_entry 1
	assert_output "seq=7 nseq=2 op=rename parent=p pino=19 child=c to_parent=q to_pino=$q to_child=z ino=20 gen=1 replaced=$z replaced_ver=1 ver=0"
	[ "$(tget 1 seq)" = 8 ]
	[ "$(rcli EXISTS "$(tpre 1):s:$z")" = 0 ]
	[ "$(rcli HGET "$(tpre 1):l:$q" z)" = 20 ]
	[ "$(stat children)" = 1 ]
	[ "$(stat links)" = 1 ]
	[ "$(stat bytes)" = 0 ]
	[ "$(stat removals)" = 1 ]
}

@test "sfs_rename: NOREPLACE EEXIST, missing source ENOENT, EXCHANGE swaps or is ENOENT, both flags EINVAL, EXDEV" {
	acme
	q=$(join 1 q)
	z=$(create 1 "$q" z)
	b=$(mk_tenant other)
	bp=$(join "$b" p)
	before=$(digest)
	expect EEXIST two 1 1 sfs_rename 19 c "$q" z 1
	expect ENOENT two 1 1 sfs_rename 19 nosuch "$q" y 0
	expect ENOENT two 1 1 sfs_rename 19 c "$q" nosuch 2
	[ "$(stat refused_exists)$(stat refused_gone)" = 12 ]
	expect EINVAL two 1 1 sfs_rename 19 c "$q" y 3
	expect EXDEV two 1 "$b" sfs_rename 19 c "$bp" y 0
	expect EINVAL two 1 1 sfs_rename 19 c "$q" . 0
	expect EINVAL two 1 1 sfs_rename 19 c "$q" - 0
	expect ESTALE two 1 1 sfs_rename 19 c 99 y 0
	expect ESTALE two 1 1 sfs_rename 98 c "$q" y 0
	[ "$(stat refused_stale)" = 2 ]
	[ "$(digest)" = "$before" ]
	run two 1 1 sfs_rename 19 c "$q" z 2
	assert_line -n 0 OK
	[ "$(rcli HGET "$(tpre 1):l:19" c)" = "$z" ]
	[ "$(rcli HGET "$(tpre 1):l:$q" z)" = 20 ]
	[ "$(sget 1 20 links)" = "$q/z" ]
	[ "$(sget 1 "$z" links)" = 19/c ]
	run last_entry 1
	assert_output "seq=6 op=exchange parent=p pino=19 child=c to_parent=q to_pino=$q to_child=z ino=20 gen=1 ino2=$z ver=0"
}

@test "sfs_rename: two links of one state is a no-op; a full destination parent is EDQUOT; draining is EROFS" {
	acme parent_quota 1
	q=$(join 1 q)
	okval 0 two 1 1 sfs_link 20 "$q" c2 >/dev/null
	n=$(entry_count 1)
	before=$(digest)
	run two 1 1 sfs_rename 19 c "$q" c2 0
	assert_line -n 0 OK
	[ "$(entry_count 1)" = "$n" ]
	[ "$(digest)" = "$before" ]
	r=$(join 1 r)
	okval 0 ten 1 sfs_unlink "$q" c2 >/dev/null
	create 1 "$r" full >/dev/null
	before=$(digest)
	expect EDQUOT two 1 1 sfs_rename 19 c "$r" x 0
	[ "$(stat refused_quota)" = 1 ]
	[ "$(digest)" = "$before" ]
	okval 0 ten 1 sfs_drain >/dev/null
	expect EROFS two 1 1 sfs_rename 19 c "$q" x 0
	[ "$(stat refused_draining)" = 1 ]
}

# --- publication and attributes ----------------------------------------------------------------

@test "sfs_publish: replace, append and compare-and-swap; a lost CAS is EAGAIN and changes nothing" {
	acme
	run ten 1 sfs_publish 20 replace "" hello
	assert_output "$(printf 'OK\n0\n4\n1')"
	run ten 1 sfs_publish 20 append "" ", world"
	assert_line -n 3 2
	[ "$(sget 1 20 data)" = "hello, world" ]
	[ "$(stat bytes)" = 12 ]
	[ "$(stat bytes 1)" = 12 ]
	run ten 1 sfs_publish 20 cas 2 "cas"
	assert_line -n 3 3
	before=$(digest)
	expect EAGAIN ten 1 sfs_publish 20 cas 2 late
	[ "$(stat refused_conflict)" = 1 ]
	[ "$(digest)" = "$before" ]
	run last_entry 1
	assert_output 'seq=6 op=write ino=20 ver=3 data=cas lines=p/c'
	[ "$(sget 1 20 mtime)" = "$(sget 1 20 ctime)" ]
	expect EINVAL ten 1 sfs_publish 20 cas "" x
	expect EINVAL ten 1 sfs_publish 20 bogus "" x
}

@test "sfs_publish: max_payload and max_bytes are exact (EFBIG, ENOSPC); a removed child is ESTALE" {
	acme max_payload 8 max_bytes 10
	d=$(create 1 19 d)
	expect OK ten 1 sfs_publish 20 replace "" 12345678
	before=$(digest)
	expect EFBIG ten 1 sfs_publish 20 replace "" 123456789
	expect EFBIG ten 1 sfs_publish 20 append "" 9
	expect ENOSPC ten 1 sfs_publish "$d" replace "" 123
	[ "$(stat refused_payload)$(stat refused_capacity)" = 21 ]
	[ "$(digest)" = "$before" ]
	expect OK ten 1 sfs_publish "$d" replace "" 12
	[ "$(stat bytes)" = 10 ]
	# Shrinking gives bytes back; the ceiling is exact.
	expect OK ten 1 sfs_publish 20 replace "" 1
	expect OK ten 1 sfs_publish "$d" replace "" 12345678
	expect OK ten 1 sfs_publish 20 append "" 2
	[ "$(stat bytes)" = 10 ]
	expect ENOSPC ten 1 sfs_publish 20 append "" 3
	[ "$(stat refused_capacity)" = 2 ]
	okval 0 ten 1 sfs_unlink 19 c >/dev/null
	expect ESTALE ten 1 sfs_publish 20 replace "" x
	[ "$(stat refused_stale)" = 1 ]
}

@test "sfs_setattr: mode, owner and times of a child, a parent and a tenant, one attr entry each" {
	acme
	run ten 1 sfs_setattr child 20 $((8#100600)) 1000 100 "-5000000000" 123 ""
	assert_line -n 0 OK
	[ "$(sget 1 20 mode)" = 384 ]
	[ "$(sget 1 20 uid)" = 1000 ]
	[ "$(sget 1 20 gid)" = 100 ]
	[ "$(sget 1 20 atime)" = -5000000000 ]
	[ "$(sget 1 20 mtime)" = 123 ]
	[ "$(sget 1 20 version)" = 0 ]
	run last_entry 1
	assert_output --regexp '^seq=4 op=attr kind=child ino=20 mode=384 uid=1000 gid=100 atime=-5000000000 mtime=123 ctime=[0-9]+$'
	okval 0 ten 1 sfs_setattr parent 19 "" 7 "" "" "" "" >/dev/null
	[ "$(pget 1 19 uid)" = 7 ]
	okval 0 ten 1 sfs_setattr tenant 10 $((8#700)) "" "" "" "" "" >/dev/null
	[ "$(tget 1 mode)" = 448 ]
	run last_entry 1
	assert_output --regexp '^seq=6 op=attr kind=tenant ino=10 mode=448 ctime=[0-9]+$'
}

@test "sfs_setattr: a size change is a publication (truncate or zero-extend); limits EFBIG, ENOSPC; EISDIR; ESTALE not counted" {
	acme max_payload 8 max_bytes 9
	publish 1 20 hello >/dev/null
	run ten 1 sfs_setattr child 20 "" "" "" "" "" 2
	assert_line -n 0 OK
	[ "$(sget 1 20 data)" = he ]
	[ "$(sget 1 20 version)" = 2 ]
	run last_entry 1
	assert_output 'seq=5 op=write ino=20 ver=2 data=he lines=p/c kind=child'
	okval 0 ten 1 sfs_setattr child 20 420 "" "" "" "" 4 >/dev/null
	[ "$(rcli HSTRLEN "$(tpre 1):s:20" data)" = 4 ]
	[ "$(rcli EVAL "return redis.call('HGET', KEYS[1], 'data') == 'he\\0\\0' and 1 or 0" 1 "$(tpre 1):s:20")" = 1 ]
	run last_entry 1
	assert_output --regexp '^seq=6 op=write ino=20 ver=3 data=.* lines=p/c kind=child mode=420 ctime=[0-9]+$'
	[ "$(stat bytes)" = 4 ]
	d=$(create 1 19 d)
	publish 1 "$d" 1234 >/dev/null
	before=$(digest)
	expect EFBIG ten 1 sfs_setattr child 20 "" "" "" "" "" 9
	expect ENOSPC ten 1 sfs_setattr child 20 "" "" "" "" "" 6
	[ "$(stat refused_payload)$(stat refused_capacity)" = 11 ]
	expect EISDIR ten 1 sfs_setattr parent 19 "" "" "" "" "" 0
	expect EISDIR ten 1 sfs_setattr tenant 10 "" "" "" "" "" 0
	expect EINVAL ten 1 sfs_setattr socket 19 "" "" "" "" "" ""
	[ "$(digest)" = "$before" ]
	okval 0 ten 1 sfs_unlink 19 c >/dev/null
	expect ESTALE ten 1 sfs_setattr child 20 420 "" "" "" "" ""
	expect ESTALE ten 1 sfs_setattr tenant 11 420 "" "" "" "" ""
	[ "$(stat refused_stale)" = 0 ]
}

# --- leases ----------------------------------------------------------------------------------------

@test "a child lease: alive until ttl - 1 ms, gone at ttl whether or not it was reaped; its name is free" {
	acme
	run ten 1 sfs_set_ttl child 20 1000
	assert_output "$(printf 'OK\n0\n4\n1000')"
	run last_entry 1
	assert_output 'seq=4 op=ttl kind=child ino=20 ttl=1000 deadline=1000'
	[ "$(rcli ZSCORE "$(tpre 1):due" s:20)" = 1000 ]
	advance 999
	expect EEXIST ten 1 sfs_create 19 c 0 0 420 1
	advance 1
	expect ESTALE ten 1 sfs_publish 20 replace "" x
	run ten 1 sfs_create 19 c 0 0 420 1
	assert_line -n 3 21
	run entries 1
	assert_line -n 4 'seq=5 op=expire kind=child ino=20 ver=0 lines=p/c'
	assert_line -n 5 --regexp '^seq=6 op=create parent=p pino=19 child=c ino=21 '
	[ "$(stat expiries)" = 1 ]
	[ "$(stat children)" = 1 ]
}

@test "sfs_expire: due children and parents go, oldest first, within the budget; a parent's children are removals" {
	acme
	q=$(join 1 q)
	x=$(create 1 "$q" x)
	okval 0 two 1 1 sfs_link 20 "$q" c2 >/dev/null
	okval 0 ten 1 sfs_set_ttl child 20 300 >/dev/null
	okval 0 ten 1 sfs_set_ttl parent "$q" 200 >/dev/null
	okval 0 ten 1 sfs_set_ttl child "$x" 100 >/dev/null
	advance 300
	run ten 1 sfs_expire 2
	assert_line -n 0 OK
	assert_line -n 3 2
	run entries 1
	assert_line --regexp "op=expire kind=child ino=$x ver=0 lines=q/x\$"
	assert_line --regexp "op=expire kind=parent name=q ino=$q gen=1 tomb=600300\$"
	refute_line --regexp 'op=expire kind=child ino=20 '
	[ "$(sget 1 20 nlink)" = 1 ]
	run ten 1 sfs_expire 2
	assert_line -n 3 1
	run last_entry 1
	assert_output --regexp 'op=expire kind=child ino=20 ver=0 lines=p/c$'
	[ "$(stat expiries)" = 3 ]
	[ "$(stat removals)" = 0 ]
	[ "$(stat children)" = 0 ]
	[ "$(rcli ZCARD "$(tpre 1):due")" = 0 ]
	run ten 1 sfs_expire 2
	assert_line -n 3 0
	expect EINVAL ten 1 sfs_expire 0
}

@test "sfs_renew and sfs_set_ttl: renew moves the deadline, a node without a lease is left alone, draining is EROFS, expired ESTALE" {
	acme
	okval 0 ten 1 sfs_set_ttl parent 19 1000 >/dev/null
	advance 600
	run ten 1 sfs_renew parent 19
	assert_output "$(printf 'OK\n600\n5\n1600')"
	run last_entry 1
	assert_output 'seq=5 op=renew kind=parent ino=19 ttl=1000 deadline=1600'
	[ "$(rcli ZSCORE "$(tpre 1):due" p:19)" = 1600 ]
	n=$(entry_count 1)
	run ten 1 sfs_renew child 20
	assert_output "$(printf 'OK\n600\n5\n0')"
	[ "$(entry_count 1)" = "$n" ]
	okval 0 ten 1 sfs_set_ttl parent 19 0 >/dev/null
	[ "$(rcli ZCARD "$(tpre 1):due")" = 0 ]
	[ "$(pget 1 19 deadline)" = 0 ]
	okval 0 ten 1 sfs_set_ttl child 20 10 >/dev/null
	okval 0 ten 1 sfs_drain >/dev/null
	before=$(digest)
	expect EROFS ten 1 sfs_renew child 20
	expect EROFS ten 1 sfs_set_ttl child 20 0
	[ "$(stat refused_draining)" = 2 ]
	[ "$(digest)" = "$before" ]
	advance 10
	expect ESTALE ten 1 sfs_renew child 20
	expect ESTALE ten 1 sfs_set_ttl child 20 5
	[ "$(stat refused_stale)" = 2 ]
	expect EINVAL ten 1 sfs_set_ttl tenant 10 5
	expect EINVAL ten 1 sfs_set_ttl child 20 1000000000000000
}

@test "tombstones age out at tombstone_ttl: the reaper drops them and a rejoin starts at generation 1" {
	acme tombstone_ttl_ms 1000
	okval 0 ten 1 sfs_leave p "" "" "" >/dev/null
	advance 999
	run ten 1 sfs_expire 10
	assert_line -n 4 0
	[ "$(stat tombstones)" = 1 ]
	advance 1
	run ten 1 sfs_expire 10
	assert_line -n 4 1
	run last_entry 1
	assert_output --regexp '^seq=[0-9]+ op=tomb_age name=p$'
	[ "$(stat tombstones)" = 0 ]
	[ "$(rcli ZCARD statefs:{statefs}:tombq)" = 0 ]
	run ten 1 sfs_join p 0 0 493
	assert_line -n 4 1
}

@test "sfs_clock_advance: only with testclock; the clock moves forward and the root log says so" {
	store_init
	run root sfs_clock_advance 250
	assert_output "$(printf 'OK\n250\n1\n250')"
	run root_entries
	assert_output 'seq=1 op=clock clock_ms=250'
	expect EINVAL root sfs_clock_advance -5
	rcli FLUSHALL >/dev/null
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0
	assert_line -n 0 OK
	expect EPERM root sfs_clock_advance 10
}

# --- drain ----------------------------------------------------------------------------------------

@test "a tenant drain: new things are EROFS, existing children stay writable and removable, the last removal ends it" {
	acme drain_window_ms 10000
	q=$(join 1 q)
	run ten 1 sfs_drain
	assert_output "$(printf 'OK\n0\n5\ndraining')"
	run last_entry 1
	assert_output 'seq=5 op=drain deadline=10000'
	expect EROFS ten 1 sfs_join r 0 0 493
	expect EROFS ten 1 sfs_create 19 d 0 0 420 1
	expect EROFS two 1 1 sfs_link 20 "$q" l
	[ "$(stat refused_draining)" = 3 ]
	expect OK ten 1 sfs_publish 20 replace "" still
	# A second drain does not move the deadline.
	advance 100
	okval 0 ten 1 sfs_drain >/dev/null
	[ "$(tget 1 drain_deadline)" = 10000 ]
	# Other tenants are not draining.
	b=$(mk_tenant other)
	expect OK ten "$b" sfs_join p 0 0 493
	expect OK ten 1 sfs_unlink 19 c
	[ "$(tget 1 state)" = draining ]
	run ten 1 sfs_expire 10
	assert_line -n 0 OK
	[ "$(tget 1 state)" = drained ]
	run last_entry 1
	assert_output 'seq=8 nseq=2 op=drain clear=1 parents=p q'
	[ "$(stat parents 1)" = 0 ]
	[ "$(stat leaves)" = 2 ]
	expect EROFS ten 1 sfs_join r 0 0 493
	run ro sfs_stats 2 "$META" "$(tkey 1)" "$INST" "" ""
	assert_line -n 5 state
	assert_line -n 6 drained
}

@test "a drain's window ends by the clock: everything in scope is cleared, tombstones too" {
	acme drain_window_ms 1000
	okval 0 ten 1 sfs_depart ghost "" "" "" >/dev/null
	okval 0 ten 1 sfs_drain >/dev/null
	run ro sfs_stats 2 "$META" "$(tkey 1)" "$INST" "" ""
	assert_line -n 7 drain_ms_left
	assert_line -n 8 1000
	advance 999
	run ten 1 sfs_expire 10
	[ "$(tget 1 state)" = draining ]
	advance 1
	run ten 1 sfs_expire 10
	[ "$(tget 1 state)" = drained ]
	for g in parents children links tombstones bytes; do [ "$(stat $g 1)" = 0 ]; done
	[ "$(stat removals)" = 1 ]
	run last_entry 1
	assert_output 'seq=6 op=drain clear=1 parents=p'
}

@test "sfs_drain of a scope with no child ends at once; sfs_drain_now clears at once; a dead tenant is ESTALE" {
	store_init
	mk_tenant empty >/dev/null
	join 1 p >/dev/null
	run ten 1 sfs_drain
	assert_line -n 3 drained
	run entries 1
	assert_line -n 2 'seq=3 op=drain deadline=30000'
	assert_line -n 3 'seq=4 op=drain clear=1 parents=p'
	b=$(mk_tenant busy)
	p=$(join "$b" p)
	create "$b" "$p" c >/dev/null
	run ten "$b" sfs_drain_now
	assert_line -n 3 drained
	[ "$(stat children)" = 0 ]
	expect ESTALE ten 9 sfs_drain
	[ "$(stat refused_stale)" = 0 ]
}

@test "a store drain: every tenant goes, the store is drained and refuses new tenants; the root log tells" {
	acme drain_window_ms 1000
	b=$(mk_tenant other)
	join "$b" x >/dev/null
	run root sfs_drain
	assert_output "$(printf 'OK\n0\n3\ndraining')"
	expect EROFS root sfs_mkdir_tenant new 0 0 493
	expect EROFS ten 1 sfs_join q 0 0 493
	expect OK ten 1 sfs_publish 20 replace "" x
	advance 1000
	run root sfs_expire 10
	assert_line -n 0 OK
	[ "$(meta state)" = drained ]
	for g in tenants parents children links bytes; do [ "$(stat $g)" = 0 ]; done
	run last_entry 1
	assert_output 'seq=5 nseq=2 op=drain clear=1 parents=p dead=1'
	run last_entry "$b"
	assert_output 'seq=3 nseq=2 op=drain clear=1 parents=x dead=1'
	run root_entries
	assert_line -n 2 'seq=3 op=drain deadline=1000'
	assert_line -n 3 'seq=4 op=clock clock_ms=1000'
	assert_line -n 4 'seq=5 op=drained tenants=2'
	expect EROFS root sfs_mkdir_tenant new 0 0 493
	expect ESTALE ten 1 sfs_join q 0 0 493
	run ro sfs_stats 1 "$META" "$INST" "" ""
	assert_line -n 5 state
	assert_line -n 6 drained
}

@test "sfs_drain_now of the store: due leases expire first, then the store is cleared" {
	acme
	okval 0 ten 1 sfs_set_ttl child 20 10 >/dev/null
	advance 10
	run root sfs_drain_now
	assert_line -n 3 drained
	run entries 1
	assert_line --regexp '^seq=[0-9]+ op=expire kind=child ino=20 ver=0 lines=p/c$'
	[ "$(stat expiries)" = 1 ]
	[ "$(meta state)" = drained ]
}

# --- the logs ---------------------------------------------------------------------------------------

@test "every change is one entry; seqs run without a hole, an entry with nseq taking that many" {
	acme
	q=$(join 1 q)
	okval 0 two 1 1 sfs_link 20 "$q" c2 >/dev/null
	publish 1 20 x >/dev/null
	okval 0 ten 1 sfs_set_ttl child 20 5 >/dev/null
	z=$(create 1 "$q" z)
	okval 0 two 1 1 sfs_rename 19 c "$q" z 0 >/dev/null
	okval 0 ten 1 sfs_leave q "" "" "" >/dev/null
	run rcli EVAL 'local n, want = 0, 1
		for _, e in ipairs(redis.call("XRANGE", KEYS[1], "-", "+")) do
			local f, seq, nseq = e[2], nil, 1
			for i = 1, #f, 2 do
				if f[i] == "seq" then seq = tonumber(f[i + 1]) end
				if f[i] == "nseq" then nseq = tonumber(f[i + 1]) end
			end
			if seq ~= want then return "hole at " .. want .. ": " .. seq end
			want = seq + nseq
			n = n + 1
		end
		return n .. " entries, next " .. want' 1 "$(tpre 1):log"
	assert_output "10 entries, next $(($(tget 1 seq) + 1))"
	[ -n "$z" ]
}

# Every entry of every log as "GSEQ NSEQ LOG SEQ OP", by GSEQ.
GENTRIES='local out = {}
for _, k in ipairs(redis.call("KEYS", "statefs:*:log")) do
	for _, e in ipairs(redis.call("XRANGE", k, "-", "+")) do
		local f, v = e[2], { nseq = "1" }
		for i = 1, #f, 2 do v[f[i]] = f[i + 1] end
		out[#out + 1] = { tonumber(v.gseq or 0), v.nseq .. " " .. k .. " " .. v.seq .. " " .. v.op }
	end
end
table.sort(out, function(a, b) return a[1] < b[1] end)
local s = {}
for i, o in ipairs(out) do s[i] = o[1] .. " " .. o[2] end
return s'

@test "every entry, of every tenant's log and the root log, takes its place in one order of all tenants (gseq, meta gseq)" {
	store_init
	[ "$(meta gseq)" = 0 ]
	[ "$(mk_tenant a)" = 1 ]
	[ "$(mk_tenant b)" = 2 ]
	ja=$(join 1 p)
	jb=$(join 2 q)
	ca=$(create 1 "$ja" c)
	z=$(create 1 "$ja" z)
	cb=$(create 2 "$jb" c)
	publish 1 "$z" old >/dev/null
	# An entry of two lines takes two numbers.
	okval 0 two 1 1 sfs_rename "$ja" c "$ja" z 0 >/dev/null
	okval 0 root sfs_rmdir_tenant b "" "" "" >/dev/null
	# A refusal appends nothing and takes no number.
	g=$(meta gseq)
	expect EEXIST ten 1 sfs_join p 0 0 493
	[ "$(meta gseq)" = "$g" ]
	# The numbers run from 1 to meta gseq without a hole or an overlap,
	# across the logs, each entry as many as its seq numbers.
	run rcli EVAL "$GENTRIES" 0
	assert_success
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/g"
	run awk -v last="$g" '
		$1 != want + 0 && NR > 1 { print "hole or overlap at " $0; bad = 1 }
		NR == 1 && $1 != 1 { print "first " $0; bad = 1 }
		{ want = $1 + $2 }
		END { if (want - 1 != last) { print "ends at " want - 1 " not " last; bad = 1 }; exit bad }' \
		"$BATS_TEST_TMPDIR/g"
	assert_success
	# In the order the calls ran: b's join after a's, the rename's two.
	grep -q "^[0-9]* 2 statefs:{statefs.t1}:log [0-9]* rename$" "$BATS_TEST_TMPDIR/g"
	[ "$(awk '$5 == "join" && $3 ~ /t2/ && $4 == 2 { print $1 }' "$BATS_TEST_TMPDIR/g")" -gt \
	  "$(awk '$5 == "join" && $3 ~ /t1/ && $4 == 2 { print $1 }' "$BATS_TEST_TMPDIR/g")" ]
	# A tenant's dump says the number it is as of.
	run ro sfs_dump 2 "$META" "$(tkey 1)" "$INST" "" ""
	assert_line "$g"
	[ -n "$ca$cb" ]
}

@test "a meta gseq that is not a number is damage: the call writes nothing" {
	acme
	rcli HSET "$META" gseq bogus >/dev/null
	before=$(digest)
	run ten 1 sfs_join q 0 0 493
	assert_line -n 0 EDAMAGED
	assert_line -n 3 "$META"
	[ "$(digest)" = "$before" ]
}

@test "a log is trimmed to about log_max entries; its seqs go on" {
	acme log_max 10
	for i in $(seq 60); do
		echo "FCALL sfs_publish 2 $META $(tkey 1) $INST w$i \"\" 20 replace \"\" v$i"
	done | rcli >/dev/null
	[ "$(tget 1 seq)" = 63 ]
	n=$(entry_count 1)
	# MAXLEN ~ trims whole nodes: never below log_max, far below 63.
	[ "$n" -ge 10 ]
	[ "$n" -lt 63 ]
	run last_entry 1
	assert_output 'seq=63 op=write ino=20 ver=60 data=v60 lines=p/c'
}

# --- read-only functions -------------------------------------------------------------------------------

@test "sfs_dump, sfs_stats and sfs_sync read the store as it is" {
	acme
	publish 1 20 hello >/dev/null
	okval 0 ten 1 sfs_depart ghost "" "" "" >/dev/null
	run ro sfs_dump 2 "$META" "$(tkey 1)" "$INST" "" ""
	assert_line -n 0 OK
	assert_line -n 2 5
	assert_line -n 3 "$(rcli XREVRANGE "$(tpre 1):log" + - COUNT 1 | head -n 1)"
	assert_line 19
	assert_line hello
	assert_line ghost
	assert_line '0 600000'
	run ro sfs_dump 1 "$META" "$INST" "" ""
	assert_line -n 0 OK
	assert_line acme
	run ro sfs_stats 2 "$META" "$(tkey 1)" "$INST" "" ""
	assert_line -n 3 instance
	assert_line -n 4 "$INST"
	[ "$(stat tenant 1)" = acme ]
	[ "$(stat children 1)" = 1 ]
	[ "$(stat bytes 1)" = 5 ]
	[ "$(stat max_payload)" = 65536 ]
	b=$(mk_tenant other)
	run ro sfs_sync 3 "$META" "$(tkey 1)" "$(tkey 9)" "$INST" "" ""
	assert_output "$(printf 'OK\n0\n2\n5\n-1')"
	run ro sfs_dump 2 "$META" "$(tkey 9)" "$INST" "" ""
	assert_line -n 0 ESTALE
	[ -n "$b" ]
}

# --- rules kept in step with the embedded store -------------------------------------------------

@test "every entry names the mount that made it (by, from the op id MOUNT:N); a reaper's is empty" {
	store_init
	run rcli FCALL sfs_mkdir_tenant 1 "$META" "$INST" "m1:1" "" acme 0 0 493
	assert_line -n 0 OK
	run rcli FCALL sfs_join 2 "$META" "$(tkey 1)" "$INST" "m2:7" "" p 0 0 493
	assert_line -n 0 OK
	BY='local out = {}
for _, e in ipairs(redis.call("XRANGE", KEYS[1], "-", "+")) do
	local f, op, by = e[2], "", "?"
	for i = 1, #f, 2 do
		if f[i] == "op" then op = f[i + 1] elseif f[i] == "by" then by = f[i + 1] end
	end
	out[#out + 1] = op .. " " .. by
end
return out'
	run rcli EVAL "$BY" 1 "$(tpre 1):log"
	assert_output "$(printf 'join m1\njoin m2')"
	run rcli EVAL "$BY" 1 "$ROOTLOG"
	assert_output 'tenant m1'
	okval 0 ten 1 sfs_set_ttl parent 19 5 >/dev/null
	advance 5
	run rcli FCALL sfs_expire 2 "$META" "$(tkey 1)" "$INST" "" "" 10
	assert_line -n 0 OK
	run rcli EVAL "$BY" 1 "$(tpre 1):log"
	assert_line -n 3 'expire '
}

@test "a tenant's shares of the ceilings are EDQUOT (counted), each after its ceiling's ENOSPC, and change nothing" {
	store_init max_parents 4 tenant_max_parents 2 max_children 10 tenant_max_children 1 \
		max_bytes 100 tenant_max_bytes 5 max_tombstones 10 tenant_max_tombstones 1
	mk_tenant a >/dev/null
	p=$(join 1 p)
	join 1 q >/dev/null
	before=$(digest)
	expect EDQUOT ten 1 sfs_join r 0 0 493
	c=$(create 1 "$p" c)
	expect EDQUOT ten 1 sfs_create "$p" d 0 0 420 1
	expect EDQUOT ten 1 sfs_publish "$c" replace "" 123456
	expect EDQUOT ten 1 sfs_setattr child "$c" "" "" "" "" "" 6
	expect OK ten 1 sfs_publish "$c" replace "" 12345
	expect OK ten 1 sfs_depart gone "" "" ""
	expect EDQUOT ten 1 sfs_depart gone2 "" "" ""
	[ "$(stat refused_quota)" = 5 ]
	# Another tenant has shares of its own.
	mk_tenant b >/dev/null
	bp=$(join 2 p)
	create 2 "$bp" c >/dev/null
	expect OK ten 2 sfs_depart x "" "" ""
	# The sfs_init option names the share; 0 is no share.
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 testclock 1 max_parents 4 \
		tenant_max_parents 3 max_children 10 tenant_max_children 1 max_bytes 100 \
		tenant_max_bytes 5 max_tombstones 10 tenant_max_tombstones 1
	assert_line -n 0 ELIMITS
	assert_line -n 3 tenant_max_parents
}

@test "durations past 10^12 ms are EINVAL: limits, leases, a parent's child_ttl, a clock advance" {
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 testclock 1 tombstone_ttl_ms 1000000000001
	assert_line -n 0 EINVAL
	assert_line -n 3 tombstone_ttl_ms
	run rcli FCALL sfs_init 1 "$META" "" "" "" "$LIBV" "$INST" 0 testclock 1 drain_window_ms 1000000000001
	assert_line -n 3 drain_window_ms
	acme
	before=$(digest)
	expect EINVAL ten 1 sfs_set_ttl child 20 1000000000001
	expect EINVAL ten 1 sfs_set_ttl parent 19 1000000000001
	expect EINVAL ten 1 sfs_set_child_ttl 19 1000000000001
	expect EINVAL root sfs_clock_advance 1000000000001
	[ "$(digest)" = "$before" ]
	expect OK ten 1 sfs_set_ttl child 20 1000000000000
}

@test "sfs_drain of a tenant with a credential starts only for who could empty it by hand (EACCES, not counted)" {
	acme
	okval 0 ten 1 sfs_setattr parent 19 $((8#755)) 1000 1000 "" "" "" >/dev/null
	before=$(digest)
	expect EACCES ten 1 sfs_drain 2000 2000 ""
	[ "$(tget 1 state)" = ready ]
	[ "$(digest)" = "$before" ]
	run ten 1 sfs_drain 0 0 ""
	assert_output --partial draining
	# Running already: not judged again.
	expect OK ten 1 sfs_drain 2000 2000 ""
}

@test "sfs_setattr: kill bits clear set-user-ID and set-group-ID from the mode as it is; renew moves a lease (EROFS draining)" {
	acme
	okval 0 ten 1 sfs_setattr child 20 $((8#6755)) "" "" "" "" "" >/dev/null
	okval 0 ten 1 sfs_setattr child 20 "" "" "" "" "" "" 1 >/dev/null
	[ "$(sget 1 20 mode)" = $((8#2755)) ]
	okval 0 ten 1 sfs_setattr child 20 "" "" "" "" "" "" 2 >/dev/null
	[ "$(sget 1 20 mode)" = $((8#755)) ]
	okval 0 ten 1 sfs_set_ttl child 20 1000 >/dev/null
	advance 400
	run ten 1 sfs_setattr child 20 "" "" "" "" 77 "" "" 1
	assert_line -n 0 OK
	[ "$(sget 1 20 deadline)" = 1400 ]
	[ "$(sget 1 20 mtime)" = 77 ]
	run last_entry 1
	assert_output --regexp '^seq=[0-9]+ op=attr kind=child ino=20 mtime=77 ctime=[0-9]+ deadline=1400$'
	# A touch of a node without a lease changes only its times.
	okval 0 ten 1 sfs_setattr parent 19 "" "" "" "" 5 "" "" 1 >/dev/null
	[ "$(pget 1 19 deadline)" = 0 ]
	okval 0 ten 1 sfs_drain >/dev/null
	before=$(digest)
	expect EROFS ten 1 sfs_setattr child 20 "" "" "" "" 78 "" "" 1
	[ "$(digest)" = "$before" ]
	expect OK ten 1 sfs_setattr parent 19 "" "" "" "" 6 "" "" 1
}

@test "sfs_publish keeps an mtime set after the stage's last write, with no publication in between" {
	acme
	publish 1 20 one >/dev/null
	v=$(sget 1 20 version)
	m=$(sget 1 20 mtime)
	okval 0 ten 1 sfs_setattr child 20 "" "" "" "" 42 "" >/dev/null
	run ten 1 sfs_publish 20 replace "" two "$v" "$m"
	assert_line -n 0 OK
	[ "$(sget 1 20 mtime)" = 42 ]
	run last_entry 1
	assert_output --regexp ' mtime=42$'
	# The stage saw the mtime as it is now: a publication stamps it.
	run ten 1 sfs_publish 20 replace "" three "$((v + 1))" 42
	[ "$(sget 1 20 mtime)" != 42 ]
	# Another publication in between: stamped too.
	okval 0 ten 1 sfs_setattr child 20 "" "" "" "" 43 "" >/dev/null
	run ten 1 sfs_publish 20 replace "" four "$v" 1
	[ "$(sget 1 20 mtime)" != 43 ]
}

# --- the tenant layout (contract.lua) ----------------------------------------------

tmeta() { echo "statefs:{statefs.t$1}:meta"; }
# tl TID FN ARG...: a tenant function on the tenant's own meta and key.
tl() { local t=$1 fn=$2; shift 2; fc "$fn" 2 "$(tmeta "$t")" "$(tkey "$t")" "$@"; }

@test "the tenant layout: sfs_init records it (no gseq); a tenant is listed at the root, then made in its slot, idempotent, numbered in its own range" {
	store_init layout tenant
	[ "$(meta layout)" = tenant ]
	[ -z "$(meta gseq)" ]
	run root sfs_mkdir_tenant t 0 0 493
	assert_line -n 0 OK
	assert_line -n 3 1
	assert_line -n 4 10000000001
	[ "$(rcli EXISTS "$(tkey 1)")" = 0 ]
	[ "$(rcli HGET "statefs:{statefs}:tenants" t)" = 1 ]
	run tl 1 sfs_tenant_make t 1 0 0 493 0 0 max_parents 5 testclock 1
	assert_line -n 0 OK
	assert_line -n 3 10000000001
	[ "$(rcli HGET "$(tmeta 1)" lim_max_parents)" = 5 ]
	[ "$(rcli HGET "$(tmeta 1)" ino)" = 10000000010 ]
	[ "$(rcli HGET "$(tmeta 1)" instance)" = "$INST" ]
	[ "$(tget 1 name)" = t ]
	# Made already: OK, nothing written.
	run tl 1 sfs_tenant_make t 1 0 0 493 0 0
	assert_line -n 0 OK
	[ "$(entry_count 1)" = 1 ]
	run tl 1 sfs_join p 0 0 493
	assert_line -n 0 OK
	assert_line -n 3 10000000010
	# The tenant's gauges and counters are its meta's; the root's none.
	[ "$(rcli HGET "$(tmeta 1)" parents)" = 1 ]
	[ "$(rcli HGET "$(tmeta 1)" joins)" = 1 ]
	[ "$(meta parents)" = 0 ]
	# No entry carries a number of an order of all tenants.
	run rcli XRANGE "$(tpre 1):log" - +
	refute_output --partial gseq
	run rcli XRANGE "$ROOTLOG" - +
	refute_output --partial gseq
}

@test "the tenant layout: a TID past 900000 is ENOSPC (counted); a tenant's meta goes with its own key alone" {
	store_init layout tenant
	rcli HSET "$META" tid 900000 >/dev/null
	expect ENOSPC root sfs_mkdir_tenant t 0 0 493
	[ "$(meta refused_capacity)" = 1 ]
	run fc sfs_join 2 "$(tmeta 1)" "$(tkey 2)" p 0 0 493
	assert_output --partial 'a tenant meta goes with its own tenant key only'
	# No meta of the tenant: ESTALE, which names it.
	run tl 7 sfs_join p 0 0 493
	assert_line -n 0 ESTALE
	assert_line -n 3 nometa
}

@test "the tenant layout: rmdir clears the tenant in its slot, then sfs_tenant_unlist takes the name out at the root, once, with its counters; a drain of the store is drained with its last tenant" {
	store_init layout tenant
	root sfs_mkdir_tenant t 0 0 493 >/dev/null
	tl 1 sfs_tenant_make t 1 0 0 493 0 0 testclock 1 >/dev/null
	root sfs_mkdir_tenant u 0 0 493 >/dev/null
	tl 2 sfs_tenant_make u 2 0 0 493 0 0 testclock 1 >/dev/null
	tl 1 sfs_join p 0 0 493 >/dev/null
	expect OK tl 1 sfs_rmdir_tenant t "" "" ""
	[ "$(rcli EXISTS "$(tkey 1)")" = 0 ]
	[ "$(rcli HGET "$(tmeta 1)" gone)" = 1 ]
	[ "$(rcli HGET "statefs:{statefs}:tenants" t)" = 1 ]
	expect ESTALE tl 1 sfs_join q 0 0 493
	# The counters t's gone meta keeps (a join, COUNTS in
	# UNLIST_COUNTERS' order) become the root's, once.
	[ "$(rcli HGET "$(tmeta 1)" joins)" = 1 ]
	joins=$(meta joins)
	expect EINVAL root sfs_tenant_unlist t 1 0 0 0 x
	expect OK root sfs_tenant_unlist t 1 0 0 0 1 0 0 0 0 0 0 0 0 0
	[ "$(meta tenants)" = 1 ]
	[ "$(meta joins)" = $((joins + 1)) ]
	[ -z "$(rcli HGET "statefs:{statefs}:tenants" t)" ]
	expect OK root sfs_tenant_unlist t 1 0 0 0 1 0 0 0 0 0 0 0 0 0
	[ "$(meta tenants)" = 1 ]
	[ "$(meta joins)" = $((joins + 1)) ]
	# The store's drain: recorded at the root, made u's, which clears
	# it at once (now 1); unlisted, the root is drained.
	expect OK root sfs_drain "" "" ""
	[ "$(meta state)" = draining ]
	run tl 2 sfs_drain_store draining "$(meta drain_deadline)" 1
	assert_line -n 0 OK
	assert_line -n 3 1
	assert_line -n 4 u
	expect OK root sfs_tenant_unlist u 2
	[ "$(meta state)" = drained ]
	[ "$(meta tenants)" = 0 ]
}
