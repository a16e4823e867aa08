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
--
-- In the tenant layout (a call on the tenant's meta) the name stays in
-- the store's list, another slot: sfs_tenant_unlist takes it out after;
-- the tenant's meta stays, marked gone, so that a late call about the
-- tenant is its ESTALE, not a new instance's, and a mount that finds the
-- name still listed knows the tenant went (redis/tenants.c).
local function tenant_delete(ctx, T)
	if ctx.tm then
		set(ctx.M, 'gone', 1)
	else
		mset(tenants_map(ctx), str(T, 'name'), false)
		add(ctx.M, 'tenants', -1)
	end
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

-- The tenant layout ------------------------------------------------------------
--
-- A tenant is made and removed in two calls, each on one slot, that roll
-- forward (docs/design.md, "Tenants made and removed across two
-- slots"): sfs_mkdir_tenant lists it on the root slot (this), then
-- sfs_tenant_make makes its meta, its hash and its log's first entry in
-- its own; sfs_rmdir_tenant clears it in its slot, then
-- sfs_tenant_unlist takes its name out of the list.

-- The tenant's number (TID * TENANT_INO + n) as a decimal string.
function TL.ino(tid, n) return dec(tid) .. string.format('%010d', n) end

-- Step 1 of mkdir in the tenant layout: the checks are made (before
-- this), the TID taken, NAME -> TID listed, the root log's tenant entry
-- carries what step 2 needs.  OK TID INO ROOTSEQ CREATED_MS.
function TL.mkdir_listed(ctx, name, tid, uid, gid, mode)
	local M = ctx.M
	if tid > TL.tid_max then return finish(ctx, refuse(ctx, 'ENOSPC')) end
	set(M, 'tid', tid)
	local ino = TL.ino(tid, 1)
	mset(tenants_map(ctx), name, dec(tid))
	add(M, 'tenants', 1)
	local rseq = rlog(ctx, 'tenant', { 'name', name, 'tid', tid, 'ino', ino,
		'uid', uid, 'gid', gid, 'mode', mode })
	return finish(ctx, ok(ctx, tid, tonumber(ino), rseq, num(M, 'created_ms')))
end

-- sfs_tenant_make TMETA TKEY - INSTANCE OPID DEADLINE NAME TID UID GID
-- MODE CLOCK_MS CREATED_MS [LIMIT VALUE]...: step 2 of mkdir in the
-- tenant layout, on the tenant's slot.  Idempotent: a tenant already
-- made (this instance's) is OK with its seq; nothing is written then.
-- OK NOW SEQ INO.
function TL.fn_tenant_make(keys, args)
	local ctx = begin(keys, args, 'init')
	local M = ctx.M
	local inst = args[1] or ''
	local name, tid = args[4] or '', unum(args[5] or '')
	local uid, gid, mode = unum(args[6]), unum(args[7]), unum(args[8])
	local clock, created = unum(args[9]), unum(args[10])
	if not (tid and uid and gid and mode and clock and created) or
		dec(tid) ~= ctx.tm or not string.find(inst, '^%x+$') or #inst ~= 16 then
		return fail(ctx, 'EINVAL')
	end
	local e = name_check(name, 1, 255)
	if e then return fail(ctx, e) end
	local T = tenant_rec(ctx, keys[2])
	if M.live then
		if str(M, 'instance') ~= inst then
			return { 'ESTALEINST', ctx.now, 0, str(M, 'instance') }
		end
		-- Made already (by this mount or by another's roll-forward).
		return { 'OK', ctx.now, T.live and num(T, 'seq') or 0,
			tonumber(TL.ino(tid, 1)) }
	end
	if T.live then damaged(T.key) end -- a tenant hash with no meta
	ctx.by = string.match(args[2] or '', '^([^:]*):') or ''
	local fv = { 'instance', inst, 'state', 'ready', 'ino',
		TL.ino(tid, FIRST_INO), 'seq', 0, 'clock_ms', clock, 'tenants', 0,
		'tid', tid, 'name', name, 'layout', 'tenant', 'libversion', LIBVERSION,
		'created_ms', created, 'drain_deadline', 0 }
	for _, f in ipairs(META_ZERO) do
		if f ~= 'tenants' then fv[#fv + 1] = f; fv[#fv + 1] = 0 end
	end
	local given = {}
	for i = 11, #args, 2 do
		local l, v = args[i], unum(args[i + 1] or '')
		if v == nil then return fail(ctx, 'EINVAL', l) end
		given[l] = v
	end
	local lv = {}
	for i, l in ipairs(LIMITS) do
		lv[i] = dec(given[l[1]] or l[2])
		fv[#fv + 1] = 'lim_' .. l[1]
		fv[#fv + 1] = lv[i]
	end
	ctx.M = rec_new(ctx, M.key, fv)
	ctx.lim = limits_of(ctx, M.key, inst, lv)
	ctx.now = ctx.lim.testclock == 1 and clock or ctx.real_ms
	local ino = TL.ino(tid, 1)
	T = rec_new(ctx, keys[2], {
		'name', name, 'tid', tid, 'ino', ino, 'uid', uid, 'gid', gid,
		'mode', mode % 4096, 'atime', ctx.ns, 'mtime', ctx.ns, 'ctime', ctx.ns,
		'seq', 0, 'state', 'ready', 'drain_deadline', 0, 'parents', 0,
		'children', 0, 'links', 0, 'tombstones', 0, 'bytes', 0 })
	T.pre = string.sub(T.key, 1, -3)
	T.keys = {}
	check_type(ctx, 'new', tkey(T, 'log'))
	ctx.T = T
	tlog(ctx, T, 'join', 1, { 'kind', 'tenant', 'name', name, 'tid', tid,
		'ino', ino, 'uid', uid, 'gid', gid, 'mode', mode % 4096 })
	return finish(ctx, ok(ctx, tonumber(ino)))
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
	mode = mode % 4096
	if tenant_layout(ctx) then return TL.mkdir_listed(ctx, name, tid, uid, gid, mode) end
	set(M, 'tid', tid)
	local ino = alloc_ino(ctx, 1 + NSPECIAL)
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
--
-- In the tenant layout it is step 1, on the tenant's slot (TMETA TKEY):
-- ENOENT when the tenant there is gone or not of that name; OK NOW SEQ
-- (the tenant's), the name left for sfs_tenant_unlist.
local function fn_rmdir_tenant(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local name = args[4] or ''
	local cred, good = cred_parse(args[5], args[6], args[7])
	if not good then return finish(ctx, fail(ctx, 'EINVAL')) end
	local tid, T
	if ctx.tm then
		tid = ctx.tm
		T = tenant_rec(ctx, keys[2])
		if not T.live or str(T, 'name') ~= name then
			return finish(ctx, fail(ctx, 'ENOENT'))
		end
	else
		tid = ino_of(tenants_map(ctx), name)
		if not tid then return finish(ctx, fail(ctx, 'ENOENT')) end
		T = tenant_rec(ctx, tenant_key(ctx, tid))
		if not T.live then damaged(T.key) end
	end
	if cred and cred.uid ~= 0 and not may_clear_tenant(ctx, T, cred) then
		return finish(ctx, fail(ctx, 'EACCES'))
	end
	ctx.T = T
	tenant_clear(ctx, T)
	tlog(ctx, T, 'cleanup', 1, { 'name', name, 'tid', tid })
	tenant_delete(ctx, T)
	if ctx.tm then return finish(ctx, ok(ctx)) end
	local rseq = rlog(ctx, 'cleanup', { 'name', name, 'tid', tid })
	return finish(ctx, ok(ctx, rseq))
end
