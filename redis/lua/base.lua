-- base.lua - the ground floor of the library (redis/lua/, after
-- contract.lua): the numbers and tables the contract fixes (the limits,
-- the refusal counters, the one name rule), the arguments a function
-- parses, and the records through which a call reads and writes its
-- hashes, with the damage check and the write phase they rest on.  It
-- uses nothing of the files after it; every one of them uses it.
--
-- Its rules are the embedded store's, kept here in one place each:
-- LIMITS are store_limits_default()'s (store/store.c), REFUSED is enum
-- store_refusal (store/store.h), name_check() is layout_name_check()
-- (layout/layout.c), cred_may() and sticky_ok() are store/cred.c's.

-- Numbers, tables and the rules most likely to change ------------------------

local NSPECIAL = 8                -- STORE_NSPECIAL: inode slots of a directory's special files
local FIRST_INO = 2 + NSPECIAL    -- root = 1, the root's specials 2..9
-- The tenant layout (contract.lua): its numbers and its functions, in
-- one table (a chunk has at most 200 locals).  It numbers tenant TID's
-- nodes TID * 10^10 + n (n = 1 the tenant, its specials up to FIRST_INO -
-- 1), TID at most tid_max, so that every number is below 2^53 (ino_end_s)
-- and exact in a double.
local TL = { tid_max = 900000, ino_end_s = '9007199254740992' }
-- The transitions' own kit (call.lua, child.lua, content.lua), for the
-- same reason: the start every call shares and the fields each
-- transition reads at once.
local TX = {}
local OP_KEEP_MS_S = '120000'     -- OP_KEEP_MS: how long an operation's outcome is kept for a retry (SET's argument)
local LOG_KEEP_MS = 600000        -- how long a removed tenant's log stays for its followers
local DURATION_MAX_MS = 1000000000000 -- STORE_DURATION_MAX_MS: a ttl, a window, an advance
local CLOCK_MAX_MS = 8 * DURATION_MAX_MS -- STORE_CLOCK_MAX_MS: the testclock's ceiling
local S_ISGID, S_ISVTX = 1024, 512
local MAY_W, MAY_X = 2, 1
-- One order of all tenants: every entry takes its place in meta gseq
-- (its field gseq).  True wherever every call runs on one Redis; a
-- Redis Cluster mode, where tenants live in different slots, would set
-- it false, and its entries carry no gseq (no root order).
local STORE_ORDER = true

-- The store's limits, recorded in meta as lim_<name> by the first mount
-- (sfs_init) and compared, in this order, with every later mount's.  The
-- defaults are store_limits_default()'s.  A new limit is one line here
-- plus its check where the store makes it (admit() for admissions).
local LIMITS = {
	{ 'max_tenants', 1024 },
	{ 'max_parents', 65536 },
	{ 'max_children', 1048576 },
	{ 'max_bytes', 1073741824 },
	{ 'max_payload', 65536 },
	{ 'max_name', 255 },
	{ 'max_tombstones', 65536 },
	{ 'tombstone_ttl_ms', 600000 },
	{ 'parent_quota', 0 },
	{ 'tenant_quota', 0 },
	-- A tenant's shares of the store-wide ceilings (EDQUOT; 0: none).
	-- The defaults are STORE_SHARE_AUTO as store_new() makes it: half
	-- the default ceiling, rounded up.  A mount sends its own.
	{ 'tenant_max_parents', 32768 },
	{ 'tenant_max_children', 524288 },
	{ 'tenant_max_bytes', 536870912 },
	{ 'tenant_max_tombstones', 32768 },
	{ 'default_ttl_ms', 0 },
	{ 'drain_window_ms', 30000 },
	{ 'testclock', 0 },
	{ 'log_max', 65536 },
}

-- The store's refusal counters (enum store_refusal), by outcome.
local REFUSED = {
	ENOSPC = 'refused_capacity', EDQUOT = 'refused_quota',
	EFBIG = 'refused_payload', EROFS = 'refused_draining',
	EEXIST = 'refused_exists', ESTALE = 'refused_stale',
	EAGAIN = 'refused_conflict', ENOENT = 'refused_gone',
}

-- The limits that are durations: at most DURATION_MAX_MS (EINVAL).
local DURATIONS = { tombstone_ttl_ms = true, default_ttl_ms = true,
	drain_window_ms = true }

-- The order sfs_init writes a new meta in: the fields transitions read
-- and write first (Redis keeps a small hash as a list it searches from
-- the front), the limits, read once per instance, last.
local META_ORDER = { 'instance', 'state', 'ino', 'children', 'links',
	'bytes', 'admissions', 'removals', 'seq', 'gseq', 'clock_ms', 'tenants',
	'parents', 'tombstones', 'expiries', 'joins', 'leaves', 'tid',
	'libversion', 'created_ms', 'drain_deadline' }

-- The gauges and counters meta starts with.
local META_ZERO = {
	'tenants', 'parents', 'children', 'links', 'tombstones', 'bytes',
	'admissions', 'removals', 'expiries', 'joins', 'leaves',
	'refused_capacity', 'refused_quota', 'refused_payload',
	'refused_draining', 'refused_exists', 'refused_stale',
	'refused_conflict', 'refused_gone',
}

--[[
  The one name rule (layout_name_check): a tenant (depth 1), parent (2)
  or child (3) name is 1..max_name bytes and has no control byte (< 0x20,
  0x7f), no white space and no '/', and is not "-" (the "does not apply"
  field of .events and .snapshot); a tenant or parent name does not
  begin with '.', a child's may ("." and ".." never).  Returns nil or
  the errno name.
]]
local function name_check(name, depth, max_name)
	if #name == 0 or name == '-' then return 'EINVAL' end
	if #name > max_name then return 'ENAMETOOLONG' end
	if string.byte(name, 1) == 46 and
		(depth ~= 3 or name == '.' or name == '..') then
		return 'EINVAL'
	end
	if string.find(name, '[%z\1-\32\127/]') then return 'EINVAL' end
	return nil
end

-- Arguments ------------------------------------------------------------------

-- A whole number as a decimal string.  (Lua's own conversion, in ".." and
-- when a number is passed to Redis, goes through "%.14g" and costs more
-- than a Redis command here: numbers are made strings once.)
local function dec(n) return string.format('%d', n) end

-- A whole number in decimal below 10^15 (so every sum of two stays exact
-- in Lua's doubles), or nil.  (s + 0: the string is all digits, so the
-- conversion cannot fail; it costs less than tonumber, a call.)
local function unum(s)
	if type(s) ~= 'string' or #s > 15 or not string.find(s, '^%d+$') then
		return nil
	end
	return s + 0
end

-- An inode number argument, kept as the string it came as (it is only
-- ever put in key names and entries), or nil.  No leading zero: one
-- number, one key name.
-- Up to 16 digits below 2^53 (a tenant's range in the tenant layout,
-- TID * 10^10 + n, call.lua): every one exact in Lua's doubles.
local function ino_arg(s)
	if type(s) ~= 'string' or #s > 16 or not string.find(s, '^[1-9]%d*$') or
		(#s == 16 and s >= TL.ino_end_s) then
		return nil
	end
	return s
end

-- A time in ns since the epoch, kept as its decimal string (it does not
-- fit a double), or nil.
local function nstime(s)
	if type(s) ~= 'string' or #s > 20 or not string.find(s, '^%-?%d+$') then
		return nil
	end
	return s
end

-- "" is "not given"; anything else must be a unum.  Returns ok, value.
local function opt_unum(s)
	if s == nil or s == '' then return true, nil end
	local v = unum(s)
	return v ~= nil, v
end

-- Credentials: uid "" means none (the embedded store's NULL cred: no
-- check).  Returns cred (or nil) and whether the arguments were good.
local function cred_parse(uid, gid, groups)
	if uid == nil or uid == '' then return nil, true end
	local c = { uid = unum(uid), gid = unum(gid), groups = {} }
	if not c.uid or not c.gid then return nil, false end
	for g in string.gmatch(groups or '', '[^,]+') do
		local n = unum(g)
		if not n then return nil, false end
		c.groups[n] = true
	end
	return c, true
end

-- store_cred_may() (store/cred.c).
local function cred_may(c, uid, gid, mode, want)
	if c.uid == 0 then return true end
	local bits
	if c.uid == uid then
		bits = math.floor(mode / 64) % 8
	elseif c.gid == gid or c.groups[gid] then
		bits = math.floor(mode / 8) % 8
	else
		bits = mode % 8
	end
	return bit.band(bits, want) == want
end

-- store_cred_sticky_ok().
local function sticky_ok(c, dir_uid, dir_mode, uid)
	return bit.band(dir_mode, S_ISVTX) == 0 or c.uid == 0 or c.uid == uid or
		c.uid == dir_uid
end

-- Split "A/B" (a link "PINO/NAME", a tombstone "TID/NAME").
local function split(m)
	local a, b = string.match(m, '^([^/]*)/(.*)$')
	return a, b
end

-- Damage and the write phase ----------------------------------------------------
--
-- Redis never rolls a function back, so a call writes nothing until it
-- has read and checked all it needs: its hash writes wait in its records
-- (below) and its other commands in ctx.jr, in call order, and finish()
-- makes them at the end, once it has checked the type of every key they
-- write that the call did not read.  What a call finds that statefs did
-- not make (a key of another type, a field that is not a number, a
-- counter that would go below zero, a link to a state that is not
-- there, a tenant whose log says it lives and whose key is gone: another
-- client's damage, or Redis's own loss) stops it at once with outcome
-- EDAMAGED KEY, and nothing is written, not even a counter.

local function damaged(key) error({ damaged = key }, 0) end

-- The type each read command proves a key has (or none).
local RTYPE = { HMGET = 'hash', HGET = 'hash', HGETALL = 'hash',
	HSTRLEN = 'hash', ZRANGEBYSCORE = 'zset', GET = 'string' }

-- Read @cmd of @key: an error (WRONGTYPE) is damage.
local function rd(ctx, cmd, key, ...)
	local v = redis.pcall(cmd, key, ...)
	if type(v) == 'table' and v.err then damaged(key) end
	ctx.typed[key] = ctx.typed[key] or RTYPE[cmd]
	return v
end

-- Keep write @cmd of @key, on a key of type @kind ('new': none yet).
local function wr(ctx, kind, cmd, key, ...)
	ctx.jr[#ctx.jr + 1] = { kind = kind, cmd, key, ... }
end

-- Damage unless @key is of type @kind (or is none, but for 'new').
local function check_type(ctx, kind, key)
	if not kind or ctx.typed[key] == kind then return end
	local t = redis.call('TYPE', key).ok
	if t ~= 'none' and (kind == 'new' or t ~= kind) then damaged(key) end
	ctx.typed[key] = kind
end

-- @cmd KEY @list..., at most 1000 arguments a command.
local function call_chunked(cmd, key, list)
	for i = 1, #list, 1000 do
		redis.call(cmd, key, unpack(list, i, math.min(#list, i + 999)))
	end
end

-- Records ----------------------------------------------------------------------
--
-- A hash a call uses is a record: the fields the call needs are read once
-- (a list of them at once, HMGET, or one by one when first asked for),
-- changed in the record and written back in one HSET when the call ends
-- (finish), so every read in the call sees the call's own changes.  A
-- record that is deleted is never written back.  Whole hashes are never
-- loaded but the maps (a bucket, a tenant's parents and tombstones, the
-- store's tenants), whose fields are names: a map's field set to false
-- is deleted (HDEL).  Reading every field of a big hash costs more than
-- the transition.

-- The fields a call usually needs, read together; the first one of each
-- list is always present, so it tells whether the hash exists.
-- A field a call asks for that is not in its list costs one HGET; one
-- in the list that it does not use costs a field of the HMGET, so each
-- function names its own (begin, call.lua) and these are the default.
--
-- A list may carry mk, which makes the record's table from the HMGET
-- reply in one constructor, sized for the fields a call then adds (a
-- table grown field by field is rebuilt at every power of two, which
-- costs more than the command); fields_made() checks each mk against
-- its list when the library loads.
local MFIELDS = { 'instance', 'state', 'seq', 'ino', 'children',
	'links', 'bytes', 'admissions', 'removals', 'gseq',
	mk = function(v) return { instance = v[1], state = v[2], seq = v[3],
		ino = v[4], children = v[5], links = v[6], bytes = v[7],
		admissions = v[8], removals = v[9], gseq = v[10] } end }
local TFIELDS = { 'name', 'seq', 'state', 'links', 'children', 'bytes',
	mk = function(v) return { name = v[1], seq = v[2], state = v[3],
		links = v[4], children = v[5], bytes = v[6], mtime = nil,
		ctime = nil } end }
local PFIELDS = { 'name', 'gen', 'deadline', 'links', 'mode', 'child_ttl',
	mk = function(v) return { name = v[1], gen = v[2], deadline = v[3],
		links = v[4], mode = v[5], child_ttl = v[6], mtime = nil,
		ctime = nil } end }
-- A state's content is read and written apart: it can be max_payload bytes.
local SFIELDS = { 'nlink', 'version', 'deadline', 'links',
	mk = function(v) return { nlink = v[1], version = v[2], deadline = v[3],
		links = v[4], data = nil, mtime = nil, ctime = nil } end }

-- Check that @fields.mk makes field i of the list from reply element i.
local function fields_made(fields)
	local v = {}
	for i = 1, #fields do v[i] = 'v' .. i end
	local h = fields.mk(v)
	for i = 1, #fields do
		if h[fields[i]] ~= v[i] then error('statefs: mk of ' .. fields[1]) end
	end
	return fields
end
fields_made(MFIELDS)
fields_made(TFIELDS)
fields_made(PFIELDS)
fields_made(SFIELDS)

local function rec_add(ctx, r)
	r.ctx = ctx
	ctx.recs[r.key] = r
	ctx.order[#ctx.order + 1] = r
	return r
end

-- The record of hash @key.  A new record reads @fields (HMGET); a field
-- not read yet is read when asked for (HGET).  @fields[1] tells whether
-- the hash exists (r.live).  In r.h a field is nil until read and false
-- when the hash does not have it.
local function rec_open(ctx, key, fields)
	local r = ctx.recs[key]
	if r then return r end
	local v = rd(ctx, 'HMGET', key, unpack(fields))
	local h
	if fields.mk then
		h = fields.mk(v)
	else
		h = {}
		for i = 1, #fields do h[fields[i]] = v[i] end
	end
	return rec_add(ctx, { key = key, h = h, live = v[1] ~= false })
end

-- The map @key (a missing hash is an empty map).
local function map_open(ctx, key)
	return ctx.recs[key] or
		rec_add(ctx, { key = key, h = {}, live = true, fl = {} })
end

-- A hash this call makes: @fv lists every field and its value.
local function rec_new(ctx, key, fv)
	wr(ctx, 'new', 'HSET', key, unpack(fv))
	local h = {}
	for i = 1, #fv, 2 do h[fv[i]] = fv[i + 1] end
	return rec_add(ctx, { key = key, h = h, live = true, all = true,
		new = true })
end

-- Delete @r's hash and the keys @... that go with it.
local function rec_drop(r, ...)
	local ctx = r.ctx
	wr(ctx, nil, 'DEL', r.key, ...)
	for _, k in ipairs({ r.key, ... }) do
		local o = ctx.recs[k]
		if o then
			o.live = false
			o.d = nil
			if o.fl then o.h, o.fl, o.all = {}, {}, true end
		end
	end
end

-- The number field value @v of hash @key (0 when the hash lacks it, v
-- false): a whole decimal below 2^53, else damage.
local function decimal(v, key)
	if not v then return 0 end
	if #v > 16 or not string.find(v, '^%d+$') or
		(#v == 16 and v >= TL.ino_end_s) then
		damaged(key)
	end
	return v + 0
end

local function get(r, f)
	local v = r.h[f]
	if v == nil then
		if r.all or not r.live then return nil end
		v = rd(r.ctx, 'HGET', r.key, f)
		r.h[f] = v
	end
	return v or nil
end

-- A number field (0 when the hash lacks it): a whole decimal, else
-- damage.  The number is kept in place of the decimal, so a field is
-- parsed once a call.
local function num(r, f)
	local h = r.h
	local v = h[f]
	if v == nil then v = get(r, f) end
	if not v then return 0 end
	if type(v) == 'number' then return v end
	v = decimal(v, r.key)
	h[f] = v
	return v
end

-- A field as a string ('' when the hash lacks it).
local function str(r, f)
	local v = get(r, f)
	if type(v) == 'number' then return dec(v) end
	return v or ''
end

-- An inode number field (a map's value, a name's ino), else damage.
local function ino_of(r, f)
	local v = get(r, f)
	if v and not ino_arg(v) then damaged(r.key) end
	return v
end

local STATE_RANK = { ready = 0, draining = 1, drained = 2 }

-- The state field of the store or of a tenant, else damage.
local function state_of(r)
	local v = str(r, 'state')
	if not STATE_RANK[v] then damaged(r.key) end
	return v
end

-- r.d: the changed fields, in the order first changed (its array part)
-- and as a set (d[f] true), so flush() needs no table of its own.
local function set(r, f, v)
	r.h[f] = v
	local d = r.d
	if not d then
		r.d = { f, [f] = true }
	elseif not d[f] then
		d[#d + 1] = f
		d[f] = true
	end
end

-- Add @d to number field @f: going below zero is damage.
local function add(r, f, d)
	local v = num(r, f) + d
	if v < 0 then damaged(r.key) end
	set(r, f, v)
end

-- Every field of map @r and its value, as HGETALL gives them.
local function map_all(r)
	if not r.all and r.live then
		local all = rd(r.ctx, 'HGETALL', r.key)
		for i = 1, #all, 2 do
			if r.h[all[i]] == nil then r.h[all[i]] = all[i + 1] end
			r.fl[#r.fl + 1] = all[i]
		end
		for _, f in ipairs(r.d or {}) do r.fl[#r.fl + 1] = f end
		r.all = true
	end
	local out, seen = {}, {}
	for _, f in ipairs(r.fl) do
		if r.h[f] and not seen[f] then
			seen[f] = true
			out[#out + 1] = f
			out[#out + 1] = r.h[f]
		end
	end
	return out
end

local function mset(r, f, v)
	if r.all and r.h[f] == nil then r.fl[#r.fl + 1] = f end
	set(r, f, v)
end

-- The changed fields @d[@i..@n] of @h and their values, as arguments.
local function changed(h, d, i, n)
	if i > n then return end
	local f = d[i]
	return f, h[f], changed(h, d, i + 1, n)
end

-- Write back @r's changed fields: one HSET (and one HDEL for a map's
-- deleted names); the fields r.fo lists first, in its order.
local function flush(r)
	local d = r.d
	if not r.live or not d then return end
	local nd = #d
	if not r.fl and not r.fo and nd <= 64 then
		-- A record (not a map): no field is deleted.
		redis.call('HSET', r.key, changed(r.h, d, 1, nd))
		r.d = nil
		return
	end
	local h, a, n, del, done = r.h, {}, 0, nil, {}
	if r.fo then
		for _, f in ipairs(r.fo) do
			if d[f] and h[f] ~= false then
				a[n + 1], a[n + 2], n = f, h[f], n + 2
				done[f] = true
			end
		end
	end
	for _, f in ipairs(d) do
		local v = h[f]
		if done[f] then
			-- written above
		elseif v == false then
			del = del or {}
			del[#del + 1] = f
		else
			a[n + 1], a[n + 2], n = f, v, n + 2
		end
	end
	if n > 0 then
		if n <= 1000 then redis.call('HSET', r.key, unpack(a, 1, n))
		else call_chunked('HSET', r.key, a) end
	end
	if del then call_chunked('HDEL', r.key, del) end
	r.d = nil
end

-- The length of @S's content, and the content.
local function data_len(S)
	local d = S.h.data
	if type(d) == 'string' then return #d end
	return rd(S.ctx, 'HSTRLEN', S.key, 'data')
end

local function data_of(S)
	if S.h.data == nil then S.h.data = rd(S.ctx, 'HGET', S.key, 'data') end
	return S.h.data or ''
end
