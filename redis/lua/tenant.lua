-- tenant.lua - tenants (store/tenant.c): the isolation and quota
-- boundary, made by sfs_mkdir_tenant and cleaned up, with everything in
-- it, by sfs_rmdir_tenant.
--
-- The store's tenants are its map P:{P}:tenants (name -> TID); a
-- tenant's keys are all in its own slot, {P.tTID}, its hash
-- P:{P.tTID}:t holding its attributes, its log's seq, its drain and its
-- gauges (its shares of the store-wide ceilings).  A cleanup removes
-- every parent with its cascade and every tombstone (tenant_clear), then
-- the tenant's keys (tenant_delete), in one call; its log stays
-- LOG_KEEP_MS for its followers.  A drain's clear of a tenant
-- (drain.lua) clears it the same way and, but for a drain of the whole
-- store, leaves the tenant in place.

-- Remove every parent of @T with its cascade and every tombstone
-- (tenant_clear_locked).  Returns the removed parents' names.
local function tenant_clear(ctx, T)
	local names = {}
	for _, P in ipairs(parents_in_order(ctx, T)) do
		names[#names + 1] = str(P, 'name')
		parent_remove(ctx, T, P)
		add(ctx.M, 'leaves', 1)
	end
	tombs_drop_all(ctx, T)
	return names
end

-- @T is gone from the store: its keys go; its log stays a while for its
-- followers (they learn of the end from the root log too).
local function tenant_delete(ctx, T)
	mset(tenants_map(ctx), str(T, 'name'), false)
	add(ctx.M, 'tenants', -1)
	wr(ctx, nil, 'PEXPIRE', tkey(T, 'log'), LOG_KEEP_MS)
	T.lastseq = num(T, 'seq')
	rec_drop(T, tkey(T, 'parents'), tkey(T, 'tombs'), tkey(T, 'due'))
end

-- Could @cred empty tenant @T by hand (tenant_lock_for_cascade)?
local function may_clear_tenant(ctx, T, cred)
	local live = 0
	for _, P in ipairs(parents_in_order(ctx, T)) do
		if not expired(num(P, 'deadline'), ctx.now) then
			live = live + 1
			if not may_remove_parent(ctx, T, P, cred) then return false end
		end
	end
	if live > 0 then
		return cred_may(cred, num(T, 'uid'), num(T, 'gid'), num(T, 'mode'),
			MAY_W + MAY_X)
	end
	return true
end

-- The tenants of the store in the order they were made (ascending tid).
local function tenants_in_order(ctx)
	local tm = tenants_map(ctx)
	local all = map_all(tm)
	local ids = {}
	for i = 2, #all, 2 do
		if not ino_arg(all[i]) then damaged(tm.key) end
		ids[#ids + 1] = tonumber(all[i])
	end
	table.sort(ids)
	local ts = {}
	for _, tid in ipairs(ids) do
		local T = tenant_rec(ctx, tenant_key(ctx, tid))
		if not T.live then damaged(T.key) end
		ts[#ts + 1] = T
	end
	return ts
end

-- sfs_mkdir_tenant (tenant_create).
local function fn_mkdir_tenant(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local M = ctx.M
	local name = args[4] or ''
	local uid, gid, mode = unum(args[5]), unum(args[6]), unum(args[7])
	if not (uid and gid and mode) then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 1, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	if draining(ctx, nil) then return finish(ctx, refuse(ctx, 'EROFS')) end
	if get(tenants_map(ctx), name) then return finish(ctx, refuse(ctx, 'EEXIST')) end
	if num(M, 'tenants') + 1 > ctx.lim.max_tenants then
		return finish(ctx, refuse(ctx, 'ENOSPC'))
	end
	local tid = num(M, 'tid') + 1
	set(M, 'tid', tid)
	local ino = alloc_ino(ctx, 1 + NSPECIAL)
	mode = mode % 4096
	mset(tenants_map(ctx), name, dec(tid))
	local T = rec_new(ctx, tenant_key(ctx, tid), {
		'name', name, 'tid', tid, 'ino', ino, 'uid', uid, 'gid', gid,
		'mode', mode, 'atime', ctx.ns, 'mtime', ctx.ns, 'ctime', ctx.ns,
		'seq', 0, 'state', 'ready', 'drain_deadline', 0, 'parents', 0,
		'children', 0, 'links', 0, 'tombstones', 0, 'bytes', 0 })
	T.pre = string.sub(T.key, 1, -3)
	T.keys = {}
	check_type(ctx, 'new', tkey(T, 'log')) -- a new tenant's log is new too
	ctx.T = T
	add(M, 'tenants', 1)
	tlog(ctx, T, 'join', 1, { 'kind', 'tenant', 'name', name, 'tid', tid,
		'ino', ino, 'uid', uid, 'gid', gid, 'mode', mode })
	local rseq = rlog(ctx, 'tenant', { 'name', name, 'tid', tid, 'ino', ino })
	return finish(ctx, ok(ctx, tid, tonumber(ino), rseq))
end

-- sfs_rmdir_tenant (tenant_cleanup).
local function fn_rmdir_tenant(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local name = args[4] or ''
	local cred, good = cred_parse(args[5], args[6], args[7])
	if not good then return finish(ctx, fail(ctx, 'EINVAL')) end
	local tm = tenants_map(ctx)
	local tid = ino_of(tm, name)
	if not tid then return finish(ctx, fail(ctx, 'ENOENT')) end
	local T = tenant_rec(ctx, tenant_key(ctx, tid))
	if not T.live then damaged(T.key) end
	if cred and cred.uid ~= 0 and not may_clear_tenant(ctx, T, cred) then
		return finish(ctx, fail(ctx, 'EACCES'))
	end
	ctx.T = T
	tenant_clear(ctx, T)
	tlog(ctx, T, 'cleanup', 1, { 'name', name, 'tid', tid })
	tenant_delete(ctx, T)
	local rseq = rlog(ctx, 'cleanup', { 'name', name, 'tid', tid })
	return finish(ctx, ok(ctx, rseq))
end
