-- call.lua - one call of a function, on the server's side (the mount's
-- side is redis/call.c): the key names of a store and of its tenants,
-- the records of the keys a call is about, begin() (TIME once, the
-- instance, the operation record, the deadline) and finish() (the write
-- phase, the outcome kept for a retry), the outcomes (ok, refuse, fail),
-- sfs_fence, the logs a call appends to, the gauges it moves and the
-- inode numbers it hands out.  The calling convention itself is the
-- essay's (contract.lua).
--
-- A call's context (ctx) lives for one FCALL: every record it opens is
-- read once and written back once, by finish(), so every read in the
-- call sees the call's own changes, and a call that ends without
-- finish() (an outcome of begin(), damage) has written nothing.

-- The call ---------------------------------------------------------------------

local cur_ctx -- the call that runs, for its EDAMAGED outcome

-- The limits of a store instance never change once recorded, so they are
-- read once per instance and kept here, by meta key, between calls.
local limits_seen = {}

-- The limits of meta @mk of instance @inst: its lim_ fields, read at
-- once, or @v, their values as decimals when the call makes the meta.
local function limits_of(ctx, mk, inst, v)
	local c = limits_seen[mk]
	if inst and c and c.instance == inst and not v then return c.lim end
	if not v then
		local f = {}
		for i, l in ipairs(LIMITS) do f[i] = 'lim_' .. l[1] end
		v = rd(ctx, 'HMGET', mk, unpack(f))
	end
	local lim = {}
	for i, l in ipairs(LIMITS) do
		lim[l[1]] = v[i] and decimal(v[i], mk) or l[2]
	end
	-- log_max as the argument XADD takes (a number would be formatted
	-- again by every call).
	lim.log_max_s = dec(lim.log_max)
	if inst then limits_seen[mk] = { instance = inst, lim = lim } end
	return lim
end

-- The tenant keys seen well formed (begin), each with the head of the
-- store prefix it was checked against, kept between calls; forgotten all
-- at once when there are many.
local tkeys_seen, tkeys_n = {}, 0

-- The names a store prefix makes, by meta key, also kept between calls.
local names_seen = {}

-- A tenant's own meta (the tenant layout, contract.lua) names the
-- tenant (n.tid); its root is the tenant's hash tag, so what a call keeps
-- "at the root" (the tombstone queue, a root-scope op record) is the
-- tenant's, in its slot.
local function names_of(mk)
	local n = names_seen[mk]
	if n then return n end
	local P, tag = string.match(mk, '^(.*):{(.*)}:meta$')
	local tid = nil
	if P and tag ~= P then
		tid = string.match(tag, '^.*%.t([1-9]%d*)$')
		if tid and tag ~= P .. '.t' .. tid then tid = nil end
		if not tid then P = nil end
	end
	if not P then
		error('statefs: the first key must be PREFIX:{PREFIX}:meta or PREFIX:{PREFIX.tTID}:meta')
	end
	-- subs: how many subscribers each news channel had at its last
	-- message (publish), kept between calls.
	n = { P = P, root = P .. ':{' .. tag .. '}', head = P .. ':{' .. P .. '.t',
		tid = tid, tkey = tid and P .. ':{' .. tag .. '}:t',
		subs = {}, nsubs = 0 }
	names_seen[mk] = n
	return n
end

local function expired(deadline, now)
	return deadline > 0 and deadline <= now
end

local function tenant_key(ctx, tid)
	return ctx.P .. ':{' .. ctx.P .. '.t' .. tid .. '}:t'
end

-- The tenant whose record is @key (a tenant that does not exist, or no
-- longer, has live = false; one whose log lives on with no end in
-- sight, as only a live tenant's does, is damage).
local function tenant_rec(ctx, key, fields)
	local T = rec_open(ctx, key, fields or TFIELDS)
	if not T.pre then
		T.pre = string.sub(key, 1, -3)
		T.keys = {}
		if not T.live and redis.call('PTTL', T.pre .. ':log') == -1 then
			damaged(key)
		end
	end
	return T
end

-- The key of tenant @T's @what ('parents', 'tombs', 'due', 'log').
local function tkey(T, what)
	local k = T.keys[what]
	if not k then
		k = T.pre .. ':' .. what
		T.keys[what] = k
	end
	return k
end
local function nkey(T, what, ino) return T.pre .. ':' .. what .. ':' .. ino end

local function parent_rec(ctx, T, pino)
	local P = rec_open(ctx, nkey(T, 'p', pino), PFIELDS)
	P.ino = pino
	return P
end

local function state_rec(ctx, T, sino)
	local S = rec_open(ctx, nkey(T, 's', sino), SFIELDS)
	S.ino = sino
	return S
end

-- The live parent record of @pino that a link or a map names, else damage.
local function parent_named(ctx, T, pino)
	local P = parent_rec(ctx, T, pino)
	if not P.live then damaged(P.key) end
	return P
end

-- The state entry @i of bucket @B's fields names, else damage.
local function linked_state(ctx, T, B, sino)
	if not ino_arg(sino) then damaged(B.key) end
	local S = state_rec(ctx, T, sino)
	if not S.live then damaged(S.key) end
	return S
end

-- The record of node @kind @ino (tenant, parent, child) of @T.
local function node_rec(ctx, T, kind, ino)
	if kind == 'tenant' then
		if str(T, 'ino') ~= ino then return { live = false, h = {} } end
		return T
	elseif kind == 'parent' then
		return parent_rec(ctx, T, ino)
	elseif kind == 'child' then
		return state_rec(ctx, T, ino)
	end
	return nil
end

-- Dead (removed) or past its deadline at now: no operation may use it.
local function gone(ctx, r)
	return not r.live or expired(num(r, 'deadline'), ctx.now)
end

-- Does the store, or tenant @T, refuse new things (a drain)?
local function draining(ctx, T)
	return state_of(ctx.M) ~= 'ready' or
		(T ~= nil and T.live and state_of(T) ~= 'ready')
end

-- Is the store of the tenant layout (each tenant's facts in a meta of
-- its own, in its slot: contract.lua)?  A tenant meta is; the root meta
-- says so in its field layout.
local function tenant_layout(ctx)
	if ctx.tm then return true end
	if ctx.tl == nil then ctx.tl = str(ctx.M, 'layout') == 'tenant' end
	return ctx.tl
end

-- The outcome's seq: the tenant's when the call has one, else the root's.
local function cur_seq(ctx)
	if ctx.T and ctx.T.live then return num(ctx.T, 'seq') end
	if ctx.T then return ctx.T.lastseq or 0 end
	return num(ctx.M, 'seq')
end

-- OK and its results: up to three with no table of the arguments
-- made (the transitions' case), more as the lock calls give them.
local function ok(ctx, a, b, c, ...)
	if a == nil then return { 'OK', ctx.now, cur_seq(ctx) } end
	if b == nil then return { 'OK', ctx.now, cur_seq(ctx), a } end
	if c == nil then return { 'OK', ctx.now, cur_seq(ctx), a, b } end
	local out = { 'OK', ctx.now, cur_seq(ctx), a, b, c }
	for i = 1, select('#', ...) do out[#out + 1] = (select(i, ...)) end
	return out
end

-- A refusal the embedded store counts (refuse(), store/store.c).
local function refuse(ctx, code)
	add(ctx.M, REFUSED[code], 1)
	return { code, ctx.now, cur_seq(ctx) }
end

-- A refusal the embedded store does not count, or a bad argument.
local function fail(ctx, code, ...)
	local out = { code, ctx.now, cur_seq(ctx) }
	for _, v in ipairs({ ... }) do out[#out + 1] = v end
	return out
end

-- Keep the XADD of one entry; its fields are unpacked only when it is
-- made (finish), not copied into the kept command.
local function xadd(ctx, key, seq, nseq, op, fields)
	ctx.jr[#ctx.jr + 1] = { kind = 'stream', xadd = true, key, seq, nseq,
		op, fields }
end

-- The FIELD VALUE list of a log entry: seq @seq standing for @n seqs
-- (nseq when more than one), gseq @g (none: nil), op, ms @ms, ns, by,
-- then @fields; every number a decimal string.
function TX.entry(seq, n, g, op, ms, ns, by, fields)
	local f = { 'seq', dec(seq) }
	if n > 1 then f[3], f[4] = 'nseq', dec(n) end
	if g then f[#f + 1], f[#f + 2] = 'gseq', dec(g) end
	local k = #f
	f[k + 1], f[k + 2], f[k + 3], f[k + 4] = 'op', op, 'ms', dec(ms)
	f[k + 5], f[k + 6], f[k + 7], f[k + 8] = 'ns', ns, 'by', by
	k = k + 8
	for i = 1, #fields do f[k + i] = fields[i] end
	return f
end

-- Make kept XADD @w (xadd above): its place in the store-wide order
-- (gseq) is the next of the call's numbers (order_take).  The entry's
-- id and fields stay in @w for the outcome (finish).
local function xadd_now(ctx, w)
	local key, seq, nseq, op, fields = w[1], w[2], w[3], w[4], w[5]
	local g = ctx.gnext
	if g then ctx.gnext = g + nseq end
	local f = TX.entry(seq, nseq, g, op, ctx.now, ctx.ns, ctx.by or '', fields)
	w.id = redis.call('XADD', key, 'MAXLEN', '~', ctx.lim.log_max_s, '*',
		unpack(f))
	w.f, w.g = f, g
end

-- The store-wide order (STORE_ORDER, and a meta with gseq: not a store
-- of the tenant layout, whose tenants order apart): the entries the call appends,
-- tenant logs and root log alike, take the next numbers of meta gseq,
-- each as many as its seq numbers (nseq), in the order they are made,
-- all with one change of meta (written back with its record).  Checked
-- (a gseq that is not a number is damage) before the first write.
local function order_take(ctx)
	if not STORE_ORDER or ctx.tm or not get(ctx.M, 'gseq') then return end
	local n = 0
	for _, w in ipairs(ctx.jr) do
		if w.xadd then n = n + w[3] end
	end
	if n == 0 then return end
	local g = num(ctx.M, 'gseq')
	ctx.gnext = g + 1
	set(ctx.M, 'gseq', g + n)
end

-- Tell the followers of each log the call appended to, after every
-- write: one SPUBLISH per log, on its slot's shard channel (the log's
-- key with :news for :log), of "SEQ BY [GSEQ]": the last seq appended
-- there, the mount that asked (whose own follower leaves a tenant's to
-- the caller, which applies its own entries: redis/own.c) and the
-- store-wide number of the first entry appended there, when the store
-- has that order.  A message only wakes a follower, which reads the log
-- itself (XRANGE): one lost costs it a BLOCK_MS at most
-- (redis/follow.c).
--
-- When the entries appended there are small (their values 1024 bytes at
-- most) and the channel's last message reached more than one follower
-- (the asking mount's own needs none: its caller has the outcome), the
-- message carries them too, after a newline: for each, its stream ID, a
-- newline, its count of names and values, a newline, then each name and
-- value as LEN:BYTES.  A follower applies them from the message when
-- they are the next (redis/own.c), and reads the log only when they are
-- not; a follower new to the channel reads the log after the first
-- message it gets.
--
-- TX.news: the news of log @key, @last the last seq appended there,
-- @g the store-wide number of the first (nil: no store-wide order), the
-- entries @ents (its stream ID, then its FIELD VALUE list, for each)
-- carried when they are small and the channel had more than one
-- subscriber.
function TX.news(names, key, last, by, g, ents)
	local subs = names.subs
	local ch = string.sub(key, 1, -4) .. 'news'
	local msg = dec(last) .. ' ' .. by .. (g and ' ' .. dec(g) or '')
	if (subs[ch] or 2) > 1 then
		local p, k, size = { msg, '\n' }, 2, 0
		for j = 1, #ents, 2 do
			if size > 1024 then break end
			local f = ents[j + 1]
			p[k + 1], p[k + 2], p[k + 3], p[k + 4] = ents[j], '\n', #f, '\n'
			k = k + 4
			for i = 1, #f do
				local v = f[i]
				if type(v) == 'number' then
					if v % 1 ~= 0 then size = 1025 break end
					v = dec(v)
				end
				size = size + #v
				p[k + 1], p[k + 2], p[k + 3] = #v, ':', v
				k = k + 3
			end
		end
		if size <= 1024 then msg = table.concat(p) end
	end
	-- pcall: a user whose ACL has no channels (&) still gets its
	-- outcome; its followers then read every BLOCK_MS.
	local n = redis.pcall('SPUBLISH', ch, msg)
	if type(n) == 'number' then
		if not subs[ch] then
			if names.nsubs >= 4096 then
				names.subs, names.nsubs = {}, 0
				subs = names.subs
			end
			names.nsubs = names.nsubs + 1
		end
		subs[ch] = n
	end
end

-- The news of every log the call appended to, from its journal.
local function publish(ctx)
	local last, first, keys, ents = {}, {}, {}, {}
	for _, w in ipairs(ctx.jr) do
		if w.xadd then
			local key = w[1]
			if not last[key] then
				keys[#keys + 1] = key
				first[key] = w.g
				ents[key] = {}
			end
			last[key] = w[2] + w[3] - 1
			local e = ents[key]
			e[#e + 1], e[#e + 2] = w.id, w.f
		end
	end
	for _, key in ipairs(keys) do
		TX.news(ctx.names, key, last[key], ctx.by or '', first[key], ents[key])
	end
end

-- The write phase: check the type of every key to be written that the
-- call did not read (damage stops it before its first write), make the
-- kept commands in order, write back every changed record, keep the
-- outcome for a retry, return it.
--
-- A successful call of a mount (its operation id names it) returns its
-- own entries in its tenant's log too, for that mount to apply without
-- reading the log (redis/own.c): the outcome's last element is
-- { 'sfs.entries', ID, FIELDS, ... }, each entry's stream ID and its
-- FIELD VALUE list as the log holds it.  Not in the recorded outcome: a
-- retry's reply has none, and its mount reads the log.
local function finish(ctx, out)
	order_take(ctx)
	for _, w in ipairs(ctx.jr) do
		check_type(ctx, w.kind, w.xadd and w[1] or w[2])
	end
	for _, r in ipairs(ctx.order) do
		if r.live and r.d then check_type(ctx, r.new and 'new' or 'hash', r.key) end
	end
	for _, w in ipairs(ctx.jr) do
		if w.xadd then xadd_now(ctx, w) else redis.call(unpack(w)) end
	end
	for _, r in ipairs(ctx.order) do flush(r) end
	if ctx.opkey then
		redis.call('SET', ctx.opkey, cmsgpack.pack(out), 'PX', OP_KEEP_MS_S)
	end
	publish(ctx)
	if out[1] == 'OK' and ctx.T and ctx.T.pre and ctx.by ~= '' then
		local log, t = tkey(ctx.T, 'log'), nil
		for _, w in ipairs(ctx.jr) do
			if w.id and w[1] == log then
				t = t or { 'sfs.entries' }
				t[#t + 1], t[#t + 2] = w.id, w.f
			end
		end
		if t then out[#out + 1] = t end
	end
	return out
end

-- The keys of a call well formed (an error, else: a bug of the mount),
-- and TIME, once: returns the names of its store, and the time in ms and
-- in ns (a decimal string).
function TX.call_head(keys)
	local mk = keys[1] or ''
	local names = names_of(mk)
	local head = names.head
	for i = 2, #keys do
		local k = keys[i]
		if tkeys_seen[k] ~= head then
			if string.find(k, head, 1, true) ~= 1 or
				not string.find(k, '^%d+}:t$', #head + 1) then
				error('statefs: a tenant key must be PREFIX:{PREFIX.tTID}:t')
			end
			if tkeys_n >= 4096 then tkeys_seen, tkeys_n = {}, 0 end
			tkeys_seen[k], tkeys_n = head, tkeys_n + 1
		end
	end
	-- A tenant's meta goes with its tenant: none, and the call is
	-- about no tenant (the store's own meta tells a new instance).
	if names.tid and (#keys < 2 or keys[2] ~= names.tkey) then
		error('statefs: a tenant meta goes with its own tenant key only')
	end
	local t = redis.call('TIME')
	local usec = tonumber(t[2])
	return names, tonumber(t[1]) * 1000 + math.floor(usec / 1000),
		t[1] .. string.format('%06d', usec) .. '000'
end

-- The operation record of @opid (args[2]) under @pre: its key (nil: no
-- id), the mount that asks ("MOUNT:N": every entry names it, by) and the
-- outcome recorded, if any.
function TX.op_open(pre, opid)
	local by = string.match(opid, '^([^:]*):') or ''
	if opid == '' then return nil, by end
	local opkey = pre .. ':op:' .. opid
	local rec = redis.call('GET', opkey)
	return opkey, by, rec and cmsgpack.unpack(rec)
end

-- Is the call's deadline (@arg, ms of TIME; "" or 0: none) past at
-- @real_ms?  The deadline is on TIME, not on the store's clock: under
-- testclock that clock stands still while Redis is busy, so a call held
-- up past store_timeout would still be in time by it.  Not recorded:
-- nothing was decided, and no later run of the operation can be before
-- its deadline either.
function TX.late(arg, real_ms)
	local deadline = unum(arg or '')
	return deadline and deadline > 0 and real_ms > deadline
end

-- The outcome of a call of instance @inst on a meta of instance @have
-- (false: no meta) when it is not that store's, else nil.  No meta of
-- a tenant: the tenant is not there (gone long ago, or not made yet), or
-- the store lost its data, which only the root's meta tells: the mount
-- asks it (redis/call.c).
function TX.stale(names, now, inst, have)
	if names.tid and not have then return { 'ESTALE', now, 0, 'nometa' } end
	if not have or inst ~= have then return { 'ESTALEINST', now, 0, have or '' } end
	return nil
end

--[[
  The common start of every function: keys, TIME (once), the instance,
  the operation record, the deadline.  @scope: 'root' (keys[1] only is
  the call's), 'tenant' (keys[2] is the tenant the call is about), 'init'
  (no instance yet), 'read' (read-only: no record, no deadline).  @mf
  and @tf: the fields of meta and of the tenant the function reads
  together (MFIELDS, TFIELDS when nil; the first of each must be
  'instance' and 'name').  Returns the context, or nil and the outcome to
  return at once.
]]
local function begin(keys, args, scope, mf, tf)
	local mk = keys[1] or ''
	local names, real_ms, ns = TX.call_head(keys)
	local ctx = { keys = keys, args = args, P = names.P, root = names.root,
		tm = names.tid, recs = {}, order = {}, typed = {}, jr = {},
		names = names, real_ms = real_ms, ns = ns, now = real_ms }
	cur_ctx = ctx
	ctx.M = rec_open(ctx, mk, mf or MFIELDS)
	local M = ctx.M
	ctx.lim = limits_of(ctx, mk, M.h.instance)
	if ctx.lim.testclock == 1 then ctx.now = num(M, 'clock_ms') end
	if scope == 'init' then return ctx end
	local stale = TX.stale(names, ctx.now, args[1], M.live and str(M, 'instance'))
	if stale then return nil, stale end
	if scope == 'read' then return ctx end
	if scope == 'tenant' then
		ctx.T = tenant_rec(ctx, keys[2], tf)
	end
	local rec
	ctx.opkey, ctx.by, rec = TX.op_open(scope == 'tenant' and ctx.T.pre or
		ctx.root, args[2] or '')
	if rec then return nil, rec end
	if TX.late(args[3], real_ms) then
		return nil, { 'ETIMEDOUT', ctx.now, cur_seq(ctx), real_ms }
	end
	return ctx
end

-- The straight-line transitions ---------------------------------------------
--
-- The busiest transitions (sfs_create, sfs_unlink, sfs_publish, a plain
-- sfs_rename) skip
-- the records: each reads what it needs in a few HMGETs, uses the
-- replies as they come (c.m: meta, c.t: the tenant, in the order of
-- their field lists), makes every check, then writes each key once in
-- place.  The rules are the records' (begin, finish): the same checks in
-- the same order, damage before the first write, one XADD first (its
-- WRONGTYPE is damage, with nothing written), the outcome kept for a
-- retry, the news.  What is rare takes the records' way (an expired
-- state at the name: TX.expire_named, child.lua).

-- begin() for a transition of one tenant: @mf and @tf, the fields read
-- from meta after instance and from the tenant after name ('seq' first).
-- Returns the call, or nil and the outcome to return at once.
function TX.begin(keys, args, mf, tf)
	local mk, tk = keys[1] or '', keys[2]
	local names, real_ms, ns = TX.call_head(keys)
	-- Every field named at once: the table is made at its size.
	local c = { names = names, real_ms = real_ms, ns = ns, now = real_ms,
		typed = {}, mk = mk, tk = tk, seq = 0, by = '', m = nil, t = nil,
		lim = nil, pre = nil, log = nil, opkey = nil }
	cur_ctx = c
	local m = rd(c, 'HMGET', mk, 'instance', unpack(mf))
	c.m = m
	c.lim = limits_of(c, mk, m[1])
	if c.lim.testclock == 1 then
		c.now = decimal(rd(c, 'HGET', mk, 'clock_ms'), mk)
	end
	local stale = TX.stale(names, c.now, args[1], m[1])
	if stale then return nil, stale end
	if not tk then error('statefs: a tenant function takes the tenant key') end
	local t = rd(c, 'HMGET', tk, 'name', unpack(tf))
	c.t = t
	c.pre = string.sub(tk, 1, -3)
	c.log = c.pre .. ':log'
	if not t[1] and redis.call('PTTL', c.log) == -1 then damaged(tk) end
	local rec
	c.opkey, c.by, rec = TX.op_open(c.pre, args[2] or '')
	if rec then return nil, rec end
	if t[1] then c.seq = decimal(t[2], tk) end
	if TX.late(args[3], real_ms) then
		return nil, { 'ETIMEDOUT', c.now, c.seq, real_ms }
	end
	return c
end

-- Outcome @out of call @c, kept for a retry.
function TX.kept(c, out)
	if c.opkey then
		redis.call('SET', c.opkey, cmsgpack.pack(out), 'PX', OP_KEEP_MS_S)
	end
	return out
end

-- fail(), refuse() and ok() with nothing else written.
function TX.fail(c, code) return TX.kept(c, { code, c.now, c.seq }) end

function TX.refuse(c, code)
	local f = REFUSED[code]
	local v = decimal(rd(c, 'HGET', c.mk, f), c.mk)
	redis.call('HSET', c.mk, f, dec(v + 1))
	return TX.fail(c, code)
end

function TX.ok(c, a, b) return TX.kept(c, { 'OK', c.now, c.seq, a, b }) end

-- Is the store or tenant state @v of @key ready?  (Not a state: damage.)
function TX.ready(v, key)
	local r = STATE_RANK[v or '']
	if not r then damaged(key) end
	return r == 0
end

-- The store-wide number (meta gseq, @v: its value) of the first of @n
-- entries the call appends, and meta's gseq after them; nil when the
-- store has no such order.
function TX.order(c, v, n)
	if not STORE_ORDER or c.names.tid or not v then return nil end
	local g = decimal(v, c.mk)
	return g + 1, dec(g + n)
end

-- Number field value @v of hash @key as it is kept ('0' when the hash
-- lacks it), checked as decimal() checks it.
function TX.decimal_s(v, key)
	if not v then return '0' end
	decimal(v, key)
	return v
end

-- The links "PINO/NAME" of a state's links field @v (hash @key), in
-- their order; one that is not a link is damage.
function TX.links(v, key)
	local all = {}
	for m in string.gmatch(v or '', '%S+') do
		if not string.find(m, '^[1-9]%d*/[^/]+$') then damaged(key) end
		all[#all + 1] = m
	end
	return all
end

-- HSET of meta's fields @... and, when the store has its order, gseq.
function TX.meta_set(c, gseq, ...)
	if gseq then redis.call('HSET', c.mk, 'gseq', gseq, ...)
	else redis.call('HSET', c.mk, ...) end
end

-- The first write of a transition: entry @op (@fields after its head)
-- in the tenant's log, seq @seq standing for @n seqs, gseq @g.  Returns
-- its stream ID and its FIELD VALUE list.
function TX.append(c, seq, n, g, op, fields)
	local f = TX.entry(seq, n, g, op, c.now, c.ns, c.by, fields)
	local id = redis.pcall('XADD', c.log, 'MAXLEN', '~', c.lim.log_max_s, '*',
		unpack(f))
	if type(id) ~= 'string' then damaged(c.log) end
	return id, f
end

-- The end of a transition that appended entry @id, @f (seqs up to
-- @last, gseq @g): @out kept, the news, the caller's own entry.
function TX.done(c, out, id, f, last, g)
	TX.kept(c, out)
	TX.news(c.names, c.log, last, c.by, g, { id, f })
	if c.by ~= '' then out[#out + 1] = { 'sfs.entries', id, f } end
	return out
end

-- The scope of a function that takes one key (the store) or two (a tenant).
local function scope_of(keys) return #keys >= 2 and 'tenant' or 'root' end

-- sfs_fence (see the calling convention): the recorded outcome of the
-- operation, or its refusal, recorded now.  begin() returns the record
-- when there is one; else the refusal is recorded as an outcome, so a
-- later run of the call finds it (begin) and does nothing.
local function fn_fence(keys, args)
	local ctx, early = begin(keys, { args[1], args[2], '' },
		#keys >= 2 and 'tenant' or 'root')
	if not ctx then return early end
	if not ctx.opkey then return fail(ctx, 'EINVAL') end
	return finish(ctx, fail(ctx, 'ETIMEDOUT', ctx.real_ms))
end

-- Logs ------------------------------------------------------------------------

-- Append one entry standing for @nlines .events lines (at least one seq
-- is consumed) to tenant @T's log.  Returns its first seq.
local function tlog(ctx, T, op, nlines, fields)
	local n = nlines > 1 and nlines or 1
	local seq = num(T, 'seq') + 1
	set(T, 'seq', seq + n - 1)
	T.lastseq = seq + n - 1
	xadd(ctx, tkey(T, 'log'), seq, n, op, fields)
	return seq
end

-- Append one entry to the root log.
local function rlog(ctx, op, fields)
	if ctx.tm then error('statefs: a root log entry from a tenant meta') end
	local seq = num(ctx.M, 'seq') + 1
	set(ctx.M, 'seq', seq)
	xadd(ctx, ctx.root .. ':log', seq, 1, op, fields)
	return seq
end

-- Gauges -------------------------------------------------------------------------

-- A gauge kept per tenant and store-wide.
local function gauge(ctx, T, f, d)
	add(T, f, d)
	add(ctx.M, f, d)
end

-- Hand out @n inode numbers; the first, as a decimal string (inode
-- numbers are only ever compared and put in names).
local function alloc_ino(ctx, n)
	local v = num(ctx.M, 'ino')
	if v < FIRST_INO then damaged(ctx.M.key) end
	set(ctx.M, 'ino', v + n)
	return dec(v)
end

local function touch(ctx, r)
	set(r, 'mtime', ctx.ns)
	set(r, 'ctime', ctx.ns)
end

-- The maps of tenant @T: its parents, its tombstones, a bucket.
local function tmap(ctx, T, what) return map_open(ctx, tkey(T, what)) end
local function bucket(ctx, T, pino) return map_open(ctx, nkey(T, 'l', pino)) end
local function tenants_map(ctx) return map_open(ctx, ctx.root .. ':tenants') end
