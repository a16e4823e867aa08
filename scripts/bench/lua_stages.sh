#!/usr/bin/env bash
# Where the Functions library's time goes in one sfs_create, stage by
# stage, and what the Lua it is written in costs a step.
#
#   scripts/bench/lua_stages.sh [CHILDREN] [CALLS] [ROUNDS]
#
# 1. Stages.  From the built library (build/gen/statefs.lua) it makes
#    four copies whose sfs_create returns a constant OK at one point of
#    its path, before any write (so each call is a new create of the
#    same tenant, which stays as it was): after TX.begin() (TIME, the
#    HMGETs of meta and of the tenant, the operation record), after the
#    parent's HMGET and the name's lookup in its bucket, after the
#    admission checks, and just before the writes (every check made,
#    the new state's key and the due set's type included, every number
#    made a string).  Each copy, then the library itself, runs
#    scripts/bench/redis_fcall.sh (STATEFS_LUA); the create column of
#    its last round is printed.  The difference between two rows is what
#    that stage costs; the last row less the fourth is the writes: the
#    XADD, the HSETs and the ZADD, the outcome kept for a retry and the
#    news.  A place in the library that moved makes the script stop and
#    say which.
# 2. Steps.  A function of its own (library "luastep", on a server of its
#    own) runs each step 1000 times in one FCALL: usec_per_call / 1000
#    is the step's cost in us (a loop's own cost is the "empty" row).
set -eu

cd "$(dirname "$0")/../.."
children=${1:-2000}
calls=${2:-5000}
rounds=${3:-2}
lib=build/gen/statefs.lua
[ -f "$lib" ] || { echo "lua_stages.sh: $lib is not built (make)" >&2; exit 1; }

# shellcheck source=scripts/bench/redis_bench.bash
. scripts/bench/redis_bench.bash
bench_dir stages

/usr/bin/python3 - "$lib" "$dir" <<'PY'
import sys
lib, out = sys.argv[1], sys.argv[2]
src = open(lib).read()
start = src.index('local function fn_create(keys, args)')
body = src[start:]
ret = "\tif true then return {'OK', 0, 0, 0, 0} end\n"
stages = [
    ('begin', "\tlocal m, t, mk, tk, lim = c.m, c.t, c.mk, c.tk, c.lim\n", True),
    ('lookup', "\t-- Admission (admit), in its order.\n", False),
    ('admit', "\tlocal ttl = decimal(p[6], pk)", False),
    ('prepared', "\t-- Every check made: the writes.", False),
]
for name, anchor, after in stages:
    if body.count(anchor) < 1:
        sys.exit('lua_stages.sh: sfs_create no longer has: ' + anchor.strip())
    j = body.index(anchor) + (len(anchor) if after else 0)
    open('%s/%s.lua' % (out, name), 'w').write(src[:start] + body[:j] + ret + body[j:])
PY

echo "sfs_create up to each stage: usec_per_call / main-thread CPU (us), $children children"
for s in begin lookup admit prepared whole; do
	f=$dir/$s.lua
	[ "$s" = whole ] && f=$lib
	line=$(STATEFS_LUA=$f scripts/bench/redis_fcall.sh "$children" "$calls" "$rounds" 2>&1 |
		grep "^round $rounds:") || { echo "lua_stages.sh: redis_fcall.sh failed for $s" >&2; exit 1; }
	printf 'tsv\tstage\t%s\t%s\n' "$s" "$(echo "$line" | awk '{ print $4 }')"
done

cat >"$dir/step.lua" <<'LUA'
#!lua name=luastep
local N = 1000
local steps = {
	empty = function() end,
	format_d = function(i) return string.format('%d', i) end,
	concat3 = function(i, s) return 'abc:' .. s .. ':def' end,
	find_digits = function() return string.find('12345678', '^%d+$') end,
	string_to_number = function() return ('12345678') + 0 end,
	table_10_fields = function() return { a = 1, b = 2, c = 3, d = 4, e = 5,
		f = 6, g = 7, h = 8, i = 9, j = 10 } end,
	table_10_items = function() return { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 } end,
	ipairs_10 = function(i, s, a) for _, v in ipairs(a) do s = v end return s end,
	msgpack_outcome = function(i, s, a, o) return cmsgpack.pack(o) end,
	call_time = function() return redis.call('TIME') end,
	call_hget = function() return redis.call('HGET', 'luastep:h', 'f') end,
	call_hget_number_arg = function() return redis.call('HGET', 'luastep:h', 1234567) end,
	call_hmget_6 = function() return redis.call('HMGET', 'luastep:h', 'a', 'b', 'c', 'd', 'e', 'f') end,
}
redis.register_function('luastep', function(keys, args)
	local fn, a, o = steps[args[1]], { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 },
		{ 'OK', 1796243263816, 1012, 1030, 1 }
	for i = 1, N do fn(i, 'x', a, o) end
	return 1
end)
LUA
rt=$(bench_rt)
# shellcheck disable=SC2086 # $rt: a command and its words, or nothing
bench_redis_start $rt
R FUNCTION LOAD REPLACE "$(cat "$dir/step.lua")" >/dev/null
R HSET luastep:h f v a 1 b 2 c 3 d 4 e 5 >/dev/null
echo "one step of Redis's Lua (us; 1000 a call, 20 calls)"
for s in empty format_d concat3 find_digits string_to_number table_10_fields \
	table_10_items ipairs_10 msgpack_outcome call_time call_hget \
	call_hget_number_arg call_hmget_6; do
	R CONFIG RESETSTAT >/dev/null
	for _ in $(seq 20); do R FCALL luastep 0 "$s" >/dev/null; done
	R INFO commandstats | awk -F'[=,]' -v s="$s" '/^cmdstat_fcall:/ {
		printf "tsv\tstep\t%s\t%.3f\n", s, $6 / 1000 }'
done
