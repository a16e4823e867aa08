-- parent.lua - parents (store/parent.c): a member joins (sfs_join),
-- leaves (sfs_leave), departs (sfs_depart, even before it joined) or
-- expires.
--
-- A tenant's parents are its map P:{P.tTID}:parents (name -> PINO), each
-- one its hash P:{P.tTID}:p:PINO, with its generation: 1 on a first
-- join, the departed tombstone's + 1 on a rejoin (tomb.lua), so that a
-- member's incarnations are told apart.  A parent leaves in one call:
-- every link of its bucket goes (the cascade, parent_remove), then the
-- parent, and its tombstone is filed; an expiry leaves the same way, its
-- tombstone filed even over max_tombstones.  A parent found past its
-- deadline is expired on the way (parent_find).

-- Parent @P leaves the tenant: every link of its bucket goes (a state
-- shared with another parent loses only this link; states that end are
-- removals), then the parent (parent_unhook_locked).  No log entry: the
-- caller's entry stands for the whole cascade.
local function parent_remove(ctx, T, P)
	local B = bucket(ctx, T, P.ino)
	local links = map_all(B)
	if #links / 2 ~= num(P, 'links') then damaged(P.key) end
	for i = 1, #links, 2 do
		local S = linked_state(ctx, T, B, links[i + 1])
		state_unlink(ctx, T, S, P.ino .. '/' .. links[i], false)
	end
	gauge(ctx, T, 'links', -num(P, 'links'))
	wr(ctx, 'zset', 'ZREM', tkey(T, 'due'), 'p:' .. P.ino)
	mset(tmap(ctx, T, 'parents'), str(P, 'name'), false)
	rec_drop(P, B.key)
	gauge(ctx, T, 'parents', -1)
	touch(ctx, T)
end

-- Parent @P has passed its deadline: it leaves as by rmdir, with its
-- tombstone even over max_tombstones (an expiry cannot be refused).
local function parent_expire(ctx, T, P)
	local name, gen = str(P, 'name'), num(P, 'gen')
	local tomb = tomb_insert(ctx, T, name, gen)
	add(ctx.M, 'tombstones', 1)
	add(ctx.M, 'expiries', 1)
	add(ctx.M, 'leaves', 1)
	tlog(ctx, T, 'expire', 1, { 'kind', 'parent', 'name', name,
		'ino', P.ino, 'gen', gen, 'tomb', tomb })
	parent_remove(ctx, T, P)
end

-- The live parent @name of @T, reaping an expired one on the way
-- (parent_find_locked).
local function parent_find(ctx, T, name)
	local pino = ino_of(tmap(ctx, T, 'parents'), name)
	if not pino then return nil end
	local P = parent_named(ctx, T, pino)
	if expired(num(P, 'deadline'), ctx.now) then
		parent_expire(ctx, T, P)
		return nil
	end
	return P
end

-- Could @cred remove parent @P with what it holds by hand, emptying it
-- first (may_remove_parent_locked)?
local function may_remove_parent(ctx, T, P, cred)
	if not cred or cred.uid == 0 then return true end
	local pmode, puid = num(P, 'mode'), num(P, 'uid')
	if not sticky_ok(cred, num(T, 'uid'), num(T, 'mode'), puid) then
		return false
	end
	local wx = cred_may(cred, puid, num(P, 'gid'), pmode, MAY_W + MAY_X)
	local sticky = bit.band(pmode, S_ISVTX) ~= 0 and cred.uid ~= puid
	if wx and not sticky then return true end
	local B = bucket(ctx, T, P.ino)
	local links = map_all(B)
	for i = 2, #links, 2 do
		local S = linked_state(ctx, T, B, links[i])
		if not expired(num(S, 'deadline'), ctx.now) then
			if not wx then return false end
			if num(S, 'uid') ~= cred.uid then return false end
		end
	end
	return true
end

-- The parents of @T in the order they joined (ascending inode number).
local function parents_in_order(ctx, T)
	local pm = tmap(ctx, T, 'parents')
	local all = map_all(pm)
	local ps = {}
	for i = 2, #all, 2 do
		if not ino_arg(all[i]) then damaged(pm.key) end
		ps[#ps + 1] = tonumber(all[i])
	end
	table.sort(ps)
	for i, pino in ipairs(ps) do ps[i] = parent_named(ctx, T, dec(pino)) end
	return ps
end

-- sfs_join (parent_join).
local function fn_join(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local name = args[4] or ''
	local uid, gid, mode = unum(args[5]), unum(args[6]), unum(args[7])
	if not (uid and gid and mode) then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 2, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	if not T.live then return finish(ctx, refuse(ctx, 'ESTALE')) end
	local old = parent_find(ctx, T, name)
	if draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	if old then return finish(ctx, refuse(ctx, 'EEXIST')) end
	if num(M, 'parents') + 1 > ctx.lim.max_parents then
		return finish(ctx, refuse(ctx, 'ENOSPC'))
	end
	local share = ctx.lim.tenant_max_parents
	if share > 0 and num(T, 'parents') + 1 > share then
		return finish(ctx, refuse(ctx, 'EDQUOT'))
	end
	local tb = tomb_find(ctx, T, name)
	local gen = tb and tb.gen + 1 or 1
	mode = mode % 4096
	local tmode = num(T, 'mode')
	if bit.band(tmode, S_ISGID) ~= 0 then
		gid = num(T, 'gid')
		mode = bit.bor(mode, S_ISGID)
	end
	local pino = alloc_ino(ctx, 1)
	rec_new(ctx, nkey(T, 'p', pino), {
		'name', name, 'gen', gen, 'uid', uid, 'gid', gid, 'mode', mode,
		'atime', ctx.ns, 'mtime', ctx.ns, 'ctime', ctx.ns, 'ttl', 0,
		'deadline', 0, 'child_ttl', 0, 'links', 0 })
	mset(tmap(ctx, T, 'parents'), name, pino)
	if tb then tomb_drop(ctx, T, name) end
	gauge(ctx, T, 'parents', 1)
	add(M, 'joins', 1)
	touch(ctx, T)
	tlog(ctx, T, 'join', 1, { 'kind', 'parent', 'name', name, 'ino', pino,
		'gen', gen, 'uid', uid, 'gid', gid, 'mode', mode })
	return finish(ctx, ok(ctx, tonumber(pino), gen))
end

-- sfs_leave and sfs_depart (parent_leave).
local function parent_leave(keys, args, must_exist)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local op = must_exist and 'leave' or 'depart'
	local name = args[4] or ''
	local cred, good = cred_parse(args[5], args[6], args[7])
	if not good then return finish(ctx, fail(ctx, 'EINVAL')) end
	if not must_exist then
		-- .depart: the name was parsed by layout_parse_depart().
		local e = name_check(name, 2, ctx.lim.max_name)
		if e then return finish(ctx, fail(ctx, e)) end
	end
	if not T.live then return finish(ctx, refuse(ctx, 'ESTALE')) end
	local P = parent_find(ctx, T, name)
	local tb = tomb_find(ctx, T, name)
	if not P and must_exist then return finish(ctx, refuse(ctx, 'ENOENT')) end
	if not P and tb then
		-- Departed again before a rejoin: the tombstone's age starts over.
		local deadline = ctx.now + ctx.lim.tombstone_ttl_ms
		tomb_put(ctx, T, name, tb.gen, deadline)
		tlog(ctx, T, op, 1, { 'name', name, 'gen', tb.gen, 'tomb', deadline,
			'refresh', 1 })
		return finish(ctx, ok(ctx, tb.gen))
	end
	local full = tomb_full(ctx, T)
	if full then
		-- The pool, or the tenant's share of it, is full: age out what
		-- is due store-wide, once.
		if tombs_reap(ctx, ctx.lim.max_tombstones) == 0 then
			return finish(ctx, refuse(ctx, full))
		end
		full = tomb_full(ctx, T)
		if full then return finish(ctx, refuse(ctx, full)) end
	end
	if P and not may_remove_parent(ctx, T, P, cred) then
		return finish(ctx, fail(ctx, 'EACCES'))
	end
	local gen = P and num(P, 'gen') or 0
	add(M, 'tombstones', 1)
	local deadline = tomb_insert(ctx, T, name, gen)
	local f = { 'name', name, 'gen', gen, 'tomb', deadline }
	if P then
		f[#f + 1] = 'ino'
		f[#f + 1] = P.ino
	end
	tlog(ctx, T, op, 1, f)
	if P then
		parent_remove(ctx, T, P)
		add(M, 'leaves', 1)
	end
	return finish(ctx, ok(ctx, gen))
end

local function fn_leave(keys, args) return parent_leave(keys, args, true) end
local function fn_depart(keys, args) return parent_leave(keys, args, false) end
