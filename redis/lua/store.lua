-- store.lua - the store itself (store/store.c): its instance, limits and
-- library version, recorded by the first mount and compared by every
-- later one (sfs_init); the library's version (sfs_version); the test
-- clock (sfs_clock_advance); and the gauges and counters behind .stats
-- (sfs_stats).

local function fn_version(keys, args)
	return LIBVERSION
end

-- sfs_init: see the essay (contract.lua).
local function fn_init(keys, args)
	local ctx = begin(keys, args, 'init')
	local M = ctx.M
	local client = unum(args[4] or '')
	local candidate = args[5] or ''
	local adopt = args[6] == '1'
	local given, layout = {}, 'root'
	for _, l in ipairs(LIMITS) do given[l[1]] = l[2] end
	if not client then return fail(ctx, 'EINVAL', 'libversion') end
	if ctx.tm then return fail(ctx, 'EINVAL', 'meta') end
	for i = 7, #args, 2 do
		local name, v = args[i], unum(args[i + 1] or '')
		if name == 'layout' then
			-- The layout a store made now takes (contract.lua).
			layout = args[i + 1]
			if layout ~= 'root' and layout ~= 'tenant' then
				return fail(ctx, 'EINVAL', 'layout')
			end
		elseif given[name] == nil or v == nil then
			return fail(ctx, 'EINVAL', name)
		else
			given[name] = v
		end
	end
	if given.testclock > 1 then return fail(ctx, 'EINVAL', 'testclock') end
	for _, l in ipairs(LIMITS) do
		if DURATIONS[l[1]] and given[l[1]] > DURATION_MAX_MS then
			return fail(ctx, 'EINVAL', l[1])
		end
	end
	if given.log_max < 1 then return fail(ctx, 'EINVAL', 'log_max') end
	local created = 0
	if M.live and str(M, 'instance') ~= '' then
		if client < LIBVERSION then
			return fail(ctx, 'ELIBVERSION', LIBVERSION)
		end
		if not adopt then
			for _, l in ipairs(LIMITS) do
				local rec = ctx.lim[l[1]]
				if rec ~= given[l[1]] then
					return fail(ctx, 'ELIMITS', l[1], rec, given[l[1]])
				end
			end
		end
		-- A limit a later library added is recorded at its default.
		for _, l in ipairs(LIMITS) do
			if get(M, 'lim_' .. l[1]) == nil then set(M, 'lim_' .. l[1], ctx.lim[l[1]]) end
		end
		if num(M, 'libversion') < LIBVERSION then set(M, 'libversion', LIBVERSION) end
		-- A store made by a library before the order of all tenants
		-- starts it here (its older entries carry none).
		if STORE_ORDER and get(M, 'gseq') == nil and str(M, 'layout') ~= 'tenant' then
			set(M, 'gseq', 0)
		end
	else
		if not string.find(candidate, '^%x+$') or #candidate ~= 16 then
			return fail(ctx, 'EINVAL', 'instance')
		end
		-- A store made anew (flushed, or a new Redis) may reuse the
		-- instance id a mount offers again: forget what was kept.
		limits_seen[M.key] = nil
		M.live = true
		set(M, 'instance', string.lower(candidate))
		set(M, 'libversion', LIBVERSION)
		set(M, 'ino', FIRST_INO)
		set(M, 'tid', 0)
		set(M, 'seq', 0)
		-- The tenant layout has no order of all tenants: each tenant's
		-- meta is in its own slot.
		if layout == 'tenant' then set(M, 'layout', 'tenant')
		elseif STORE_ORDER then set(M, 'gseq', 0) end
		set(M, 'created_ms', ctx.real_ms)
		set(M, 'state', 'ready')
		set(M, 'drain_deadline', 0)
		set(M, 'clock_ms', 0)
		for _, f in ipairs(META_ZERO) do set(M, f, 0) end
		for _, l in ipairs(LIMITS) do set(M, 'lim_' .. l[1], given[l[1]]) end
		M.fo = META_ORDER
		created = 1
		ctx.now = given.testclock == 1 and 0 or ctx.real_ms
	end
	local out = { 'OK', ctx.now, num(M, 'seq'), str(M, 'instance'), created }
	for _, l in ipairs(LIMITS) do
		out[#out + 1] = l[1]
		out[#out + 1] = num(M, 'lim_' .. l[1])
	end
	out[#out + 1] = 'layout'
	out[#out + 1] = str(M, 'layout') == 'tenant' and 'tenant' or 'root'
	return finish(ctx, out)
end

-- sfs_clock_advance (fs_clock_advance, -o testclock).
local function fn_clock_advance(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local ms = unum(args[4] or '')
	if ctx.lim.testclock ~= 1 then return finish(ctx, fail(ctx, 'EPERM')) end
	if not ms or ms > DURATION_MAX_MS or num(ctx.M, 'clock_ms') + ms > CLOCK_MAX_MS then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	add(ctx.M, 'clock_ms', ms)
	ctx.now = num(ctx.M, 'clock_ms')
	rlog(ctx, 'clock', { 'clock_ms', num(ctx.M, 'clock_ms') })
	return finish(ctx, ok(ctx, num(ctx.M, 'clock_ms')))
end

local STAT_GAUGES = { 'tenants', 'parents', 'children', 'links', 'tombstones', 'bytes' }
local STAT_COUNTERS = { 'admissions', 'removals', 'expiries', 'joins', 'leaves',
	'refused_capacity', 'refused_quota', 'refused_payload', 'refused_draining',
	'refused_exists', 'refused_stale', 'refused_conflict', 'refused_gone' }

-- sfs_stats: see the essay (contract.lua).
local function fn_stats(keys, args)
	local ctx, early = begin(keys, args, 'read')
	if not ctx then return early end
	local M, T = ctx.M, nil
	-- Every counter is asked for: read them all at once.
	local all = redis.call('HGETALL', M.key)
	for i = 1, #all, 2 do M.h[all[i]] = all[i + 1] end
	if #keys >= 2 then
		T = tenant_rec(ctx, keys[2])
		if not T.live then return { 'ESTALE', ctx.now, 0 } end
	end
	local st = scope_state(ctx, T)
	local deadline = num(M, 'drain_deadline')
	if T and str(T, 'state') == 'draining' and
		(str(M, 'state') ~= 'draining' or num(T, 'drain_deadline') < deadline) then
		deadline = num(T, 'drain_deadline')
	end
	local left = 0
	if st == 'draining' and deadline > ctx.now then left = deadline - ctx.now end
	local out = { 'OK', ctx.now, T and num(T, 'seq') or num(M, 'seq'),
		'instance', str(M, 'instance'), 'state', st, 'drain_ms_left', left,
		'uptime_ms', ctx.real_ms - num(M, 'created_ms') }
	if T then
		out[#out + 1] = 'tenant'
		out[#out + 1] = str(T, 'name')
	end
	for _, g in ipairs(STAT_GAUGES) do
		out[#out + 1] = g
		out[#out + 1] = (T and g == 'tenants') and 1 or num(T or M, g)
	end
	for _, l in ipairs(LIMITS) do
		out[#out + 1] = l[1]
		out[#out + 1] = ctx.lim[l[1]]
	end
	for _, c in ipairs(STAT_COUNTERS) do
		out[#out + 1] = c
		out[#out + 1] = num(M, c)
	end
	return out
end
