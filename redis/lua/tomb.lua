-- tomb.lua - tombstones (store/tomb.c): the generation a parent's name
-- had when it left, kept tombstone_ttl_ms so that a rejoin takes the
-- next one.
--
-- A tenant's tombstones are its map P:{P.tTID}:tombs (name -> "GEN
-- DEADLINE"), and every tombstone of the store is also in one queue,
-- P:{P}:tombq (member "TID/NAME", score its deadline), so that due ones
-- age out store-wide, oldest first (tombs_reap), without a scan of the
-- tenants.  Both change together (tomb_put, tomb_drop).  Tombstones
-- count in max_tombstones and in the tenant's share of it, checked
-- before one is filed (tomb_full), but for an expiry's, which cannot be
-- refused.

-- Tombstone @name of @T: { gen, deadline } or nil, due or not.
local function tomb_get(ctx, T, name)
	local tm = tmap(ctx, T, 'tombs')
	local v = get(tm, name)
	if not v then return nil end
	local g, d = string.match(v, '^(%d+) (%d+)$')
	if not g or #v > 32 then damaged(tm.key) end
	return { gen = tonumber(g), deadline = tonumber(d) }
end

-- The store's queue of tombstones, as this call has changed it.
local function tombq(ctx, m, deadline)
	local q = ctx.root .. ':tombq'
	ctx.tq = ctx.tq or {}
	if deadline then
		wr(ctx, 'zset', 'ZADD', q, deadline, m)
	else
		wr(ctx, 'zset', 'ZREM', q, m)
	end
	ctx.tq[m] = deadline or false
end

local function tomb_put(ctx, T, name, gen, deadline)
	mset(tmap(ctx, T, 'tombs'), name, dec(gen) .. ' ' .. dec(deadline))
	tombq(ctx, str(T, 'tid') .. '/' .. name, deadline)
end

local function tomb_drop(ctx, T, name)
	mset(tmap(ctx, T, 'tombs'), name, false)
	tombq(ctx, str(T, 'tid') .. '/' .. name, nil)
	gauge(ctx, T, 'tombstones', -1)
end

-- A tombstone past its deadline ages out (no .events line).
local function tomb_age(ctx, T, name)
	tomb_drop(ctx, T, name)
	tlog(ctx, T, 'tomb_age', 0, { 'name', name })
end

-- The live tombstone of @name, aging it out if due (tomb_find_locked).
local function tomb_find(ctx, T, name)
	local tb = tomb_get(ctx, T, name)
	if tb and tb.deadline <= ctx.now then
		tomb_age(ctx, T, name)
		return nil
	end
	return tb
end

-- File a tombstone whose place in the pool the caller has counted in
-- meta (reserved, or an expiry's overshoot).  Returns its deadline.
local function tomb_insert(ctx, T, name, gen)
	local deadline = ctx.now + ctx.lim.tombstone_ttl_ms
	tomb_put(ctx, T, name, gen, deadline)
	add(T, 'tombstones', 1)
	return deadline
end

-- Age out due tombstones store-wide, oldest first, at most @budget
-- (tombs_reap).  Returns how many.
local function tombs_reap(ctx, budget)
	local q = ctx.root .. ':tombq'
	local due = rd(ctx, 'ZRANGEBYSCORE', q, '-inf', ctx.now, 'LIMIT', 0, budget)
	-- What this call queued or took out is this call's.
	local tq, n = ctx.tq or {}, 0
	for m, d in pairs(tq) do
		if d and d <= ctx.now then due[#due + 1] = m end
	end
	for _, m in ipairs(due) do
		local tid, name = split(m)
		local d = tq[m]
		if not tid or not string.find(tid, '^%d+$') then damaged(q) end
		if n < budget and (d == nil or (d and d <= ctx.now)) then
			local T = tenant_rec(ctx, tenant_key(ctx, tid))
			local tb = T.live and tomb_get(ctx, T, name)
			if tb and tb.deadline <= ctx.now then
				tomb_age(ctx, T, name)
				n = n + 1
			else
				tombq(ctx, m, nil) -- left behind: never expected
			end
		end
	end
	return n
end

-- Would one more tombstone of @T pass the pool (ENOSPC) or the tenant's
-- share of it (EDQUOT)?  nil when it fits (tomb_reserve_locked).
local function tomb_full(ctx, T)
	if num(ctx.M, 'tombstones') + 1 > ctx.lim.max_tombstones then return 'ENOSPC' end
	local share = ctx.lim.tenant_max_tombstones
	if share > 0 and num(T, 'tombstones') + 1 > share then return 'EDQUOT' end
	return nil
end

-- Drop every tombstone of @T (tenant cleanup, drain clear).
local function tombs_drop_all(ctx, T)
	local all = map_all(tmap(ctx, T, 'tombs'))
	for i = 1, #all, 2 do tomb_drop(ctx, T, all[i]) end
end
