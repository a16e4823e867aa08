-- drain.lua - draining the store or one tenant (store/drain.c): refuse
-- what is new, let what is there finish or expire for drain_window_ms,
-- then clear the scope in one call.
--
-- The state (ready, draining, drained) and drain_deadline are fields of
-- meta for the store's drain, of the tenant's hash for a tenant's.  A
-- drain in scope makes every admission refuse with EROFS (draining(),
-- call.lua).  sfs_drain and sfs_drain_now start one; a due drain is
-- cleared by them or by sfs_expire (reaper.lua).

-- In the tenant layout the store's drain is recorded on the root meta and
-- fanned out to each tenant's (sfs_drain_store, by the mount that asked):
-- a tenant's meta clears its own tenant when the store's drain is due
-- there (its own children all gone, or the deadline), the name then
-- unlisted at the root (sfs_tenant_unlist); the root's drain is drained
-- with its last tenant unlisted.
local function drain_due(ctx, T)
	local r = T or ctx.M
	if state_of(r) ~= 'draining' then return false end
	if ctx.now >= num(r, 'drain_deadline') then return true end
	if not T and not ctx.tm and tenant_layout(ctx) then
		return num(ctx.M, 'tenants') == 0
	end
	return num(r, 'children') == 0
end

-- Clear tenant @T for a drain: every parent (one drain line each, in
-- join order), every tombstone; with @dead (a drain of the whole store)
-- the tenant goes too, with one more drain line.
local function drain_clear_tenant(ctx, T, dead)
	local names = tenant_clear(ctx, T)
	set(T, 'state', 'drained')
	local n = #names + (dead and 1 or 0)
	local f = { 'clear', 1, 'parents', table.concat(names, ' ') }
	if dead then
		f[#f + 1] = 'dead'
		f[#f + 1] = 1
	end
	tlog(ctx, T, 'drain', n, f)
	if dead then tenant_delete(ctx, T) end
end

-- Clear the store for its drain: every tenant goes; the store is drained.
local function drain_clear_store(ctx)
	if ctx.tm then
		-- A tenant's meta: the store's drain clears this tenant.
		if ctx.T and ctx.T.live then drain_clear_tenant(ctx, ctx.T, true) end
		set(ctx.M, 'state', 'drained')
		return
	end
	if tenant_layout(ctx) then
		-- The root of the tenant layout: drained with its last tenant.
		if num(ctx.M, 'tenants') > 0 then return end
		set(ctx.M, 'state', 'drained')
		rlog(ctx, 'drained', { 'tenants', 0 })
		return
	end
	local n = 0
	for _, T in ipairs(tenants_in_order(ctx)) do
		drain_clear_tenant(ctx, T, true)
		n = n + 1
	end
	set(ctx.M, 'state', 'drained')
	rlog(ctx, 'drained', { 'tenants', n })
end

-- Settle what is due: the store's drain, then @T's (drains_settle_all).
local function drains_settle(ctx, T)
	if drain_due(ctx, nil) then drain_clear_store(ctx) end
	if T and T.live and drain_due(ctx, T) then drain_clear_tenant(ctx, T, false) end
end

-- Start a drain of @T (nil: the store); a running one is left as it is.
local function drain_start(ctx, T)
	local r = T or ctx.M
	if state_of(r) ~= 'ready' then return end
	local deadline = ctx.now + ctx.lim.drain_window_ms
	set(r, 'state', 'draining')
	set(r, 'drain_deadline', deadline)
	if T then
		tlog(ctx, T, 'drain', 1, { 'deadline', deadline })
	else
		rlog(ctx, 'drain', { 'deadline', deadline })
	end
end

-- How far the drain of @T's scope is: the further of its own and the
-- store's (store_drain_state).
local function scope_state(ctx, T)
	local ms = state_of(ctx.M)
	if T and T.live and STATE_RANK[state_of(T)] > STATE_RANK[ms] then
		return state_of(T)
	end
	return ms
end

-- sfs_drain (store_drain) and sfs_drain_now (store_drain_now).
local function drain(keys, args, now)
	local ctx, early = begin(keys, args, scope_of(keys))
	if not ctx then return early end
	local T = ctx.T
	local cred, good = nil, true
	if not now then cred, good = cred_parse(args[4], args[5], args[6]) end
	if not good then return finish(ctx, fail(ctx, 'EINVAL')) end
	if T and not T.live then return finish(ctx, fail(ctx, 'ESTALE')) end
	-- A tenant's clear removes what its cleanup would: the drain starts
	-- only for who could do that by hand (store_drain_as); one that runs
	-- already is not judged again.
	if T and cred and cred.uid ~= 0 and state_of(T) == 'ready' and
		not may_clear_tenant(ctx, T, cred) then
		return finish(ctx, fail(ctx, 'EACCES'))
	end
	drain_start(ctx, T)
	if now then
		-- Leases past their deadline go first (store_drain_state), then
		-- the scope is cleared at once.
		local ts = T and { T } or (tenant_layout(ctx) and {} or tenants_in_order(ctx))
		for _, t in ipairs(ts) do leases_expire(ctx, t, 4096) end
		drains_settle(ctx, T)
		if T then
			if T.live and state_of(T) == 'draining' then
				drain_clear_tenant(ctx, T, false)
			end
		elseif state_of(ctx.M) == 'draining' then
			drain_clear_store(ctx)
		end
	else
		if T then
			if drain_due(ctx, T) then drain_clear_tenant(ctx, T, false) end
		elseif drain_due(ctx, nil) then
			drain_clear_store(ctx)
		end
	end
	return finish(ctx, ok(ctx, scope_state(ctx, T)))
end

local function fn_drain(keys, args) return drain(keys, args, false) end
local function fn_drain_now(keys, args) return drain(keys, args, true) end

-- The counters a gone tenant leaves to the root, in the order of
-- sfs_tenant_unlist's COUNTS (redis/tenants.c, unlist_counters).
local UNLIST_COUNTERS = { 'admissions', 'removals', 'expiries', 'joins',
	'leaves', 'refused_capacity', 'refused_quota', 'refused_payload',
	'refused_draining', 'refused_exists', 'refused_stale',
	'refused_conflict', 'refused_gone' }

-- sfs_tenant_unlist NAME TID [COUNTS...] (root): step 2 of rmdir in the
-- tenant layout, and the end of a tenant a drain of the store cleared:
-- NAME leaves the list when it still maps to TID (else nothing:
-- idempotent), with the root log's cleanup, and the tenant's counters
-- (COUNTS, UNLIST_COUNTERS' order, as its gone meta keeps them) become
-- the root's, so that the store's .stats still counts what the tenant
-- did (it sums the listed tenants only); the store's drain is drained
-- with its last tenant.  OK NOW ROOTSEQ.
function TL.fn_tenant_unlist(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local M = ctx.M
	local name, tid = args[4] or '', unum(args[5] or '')
	if not tid or ctx.tm then return finish(ctx, fail(ctx, 'EINVAL')) end
	local counts = {}
	for i = 1, #UNLIST_COUNTERS do
		counts[i] = 0
		if args[5 + i] then counts[i] = unum(args[5 + i]) end
		if not counts[i] then return finish(ctx, fail(ctx, 'EINVAL')) end
	end
	local tm = tenants_map(ctx)
	if get(tm, name) == dec(tid) then
		mset(tm, name, false)
		add(M, 'tenants', -1)
		for i, c in ipairs(UNLIST_COUNTERS) do
			if counts[i] > 0 then add(M, c, counts[i]) end
		end
		rlog(ctx, 'cleanup', { 'name', name, 'tid', tid })
	end
	drains_settle(ctx, nil)
	return finish(ctx, ok(ctx))
end

-- sfs_drain_store TMETA TKEY - INSTANCE OPID DEADLINE STATE DRAIN_DEADLINE
-- NOW: the store's drain (STATE draining or drained, as the root
-- recorded it) made the tenant's, in the tenant layout; with NOW 1 (a
-- drain_now) the tenant is cleared at once, else when its drain is due.
-- A tenant that has it already is left as it is.  OK NOW SEQ DEAD NAME
-- (DEAD 1: the tenant is gone, NAME to be unlisted).
function TL.fn_drain_store(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local M, T = ctx.M, ctx.T
	local st, deadline, now = args[4] or '', unum(args[5] or ''), args[6] == '1'
	if not ctx.tm or not deadline or not STATE_RANK[st] or st == 'ready' then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	if not T.live then return finish(ctx, ok(ctx, 1, str(M, 'name'))) end
	if state_of(M) == 'ready' then
		set(M, 'state', 'draining')
		set(M, 'drain_deadline', deadline)
	end
	if now or st == 'drained' then
		leases_expire(ctx, T, 4096)
		drain_clear_store(ctx)
	elseif drain_due(ctx, nil) then
		drain_clear_store(ctx)
	end
	return finish(ctx, ok(ctx, T.live and 0 or 1, str(M, 'name')))
end

-- sfs_clock_set TMETA TKEY - INSTANCE OPID DEADLINE CLOCK_MS: the store's
-- test clock (sfs_clock_advance, on the root) made the tenant's, in the
-- tenant layout: the tenant's becomes the larger.  OK NOW SEQ.
function TL.fn_clock_set(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local ms = unum(args[4] or '')
	if not ctx.tm or not ms then return finish(ctx, fail(ctx, 'EINVAL')) end
	if ctx.lim.testclock ~= 1 then return finish(ctx, fail(ctx, 'EPERM')) end
	if ms > num(ctx.M, 'clock_ms') then
		set(ctx.M, 'clock_ms', ms)
		ctx.now = ms
	end
	return finish(ctx, ok(ctx))
end
