-- dump.lua - what a mount's mirror loads and waits for: one consistent
-- instant of the store's root or of a tenant, with its log's position
-- (sfs_dump, loaded by redis/load.c), and the seqs a mirror must have
-- applied to be as fresh as the store (sfs_sync, for store_sync in
-- redis/call.c).  No core file has them: the embedded store is its own
-- mirror.

local function last_id(key)
	local r = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
	return r[1] and r[1][1] or '0-0'
end

-- sfs_dump: see the essay (contract.lua).
local function fn_dump(keys, args)
	local ctx, early = begin(keys, args, 'read')
	if not ctx then return early end
	local M = ctx.M
	if #keys < 2 then
		return { 'OK', ctx.now, num(M, 'seq'), last_id(ctx.root .. ':log'),
			redis.call('HGETALL', M.key),
			redis.call('HGETALL', ctx.root .. ':tenants') }
	end
	local T = tenant_rec(ctx, keys[2])
	if not T.live then return { 'ESTALE', ctx.now, 0 } end
	local parents, states, seen = {}, {}, {}
	for _, P in ipairs(parents_in_order(ctx, T)) do
		local links = redis.call('HGETALL', nkey(T, 'l', P.ino))
		parents[#parents + 1] = { P.ino, redis.call('HGETALL', P.key), links }
		for i = 2, #links, 2 do
			local sino = links[i]
			if not seen[sino] then
				seen[sino] = true
				states[#states + 1] = { tonumber(sino),
					redis.call('HGETALL', nkey(T, 's', sino)) }
			end
		end
	end
	-- Then the store-wide order's number at this instant (STORE_ORDER):
	-- the tenant is as after that entry of the store.
	return { 'OK', ctx.now, num(T, 'seq'), last_id(tkey(T, 'log')),
		redis.call('HGETALL', T.key),
		parents, states, redis.call('HGETALL', tkey(T, 'tombs')),
		(STORE_ORDER and get(M, 'gseq')) and num(M, 'gseq') or nil }
end

-- sfs_sync: the seqs a mount must have applied to be as fresh as the store.
local function fn_sync(keys, args)
	local ctx, early = begin(keys, args, 'read')
	if not ctx then return early end
	local out = { 'OK', ctx.now, num(ctx.M, 'seq') }
	for i = 2, #keys do
		local s = rd(ctx, 'HGET', keys[i], 'seq')
		out[#out + 1] = s and (unum(s) or damaged(keys[i])) or -1
	end
	return out
end
