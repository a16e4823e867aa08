-- reaper.lua - what ends on its own (store_expire, store/reaper.c):
-- sfs_expire ends due leases, ages out due tombstones and settles due
-- drains, in that order, each pass within a budget.  The mount calls it
-- when its estimate of the store's clock says something is due
-- (redis/clock.c); what is past its deadline is gone before that all
-- the same (gone(), call.lua).

-- sfs_expire (store_expire, then the drains that are due).  A tenant's
-- call settles the tenant's drain, the store's call the store's: a mount
-- calls each tenant's, then the store's, so every lease that is due ends
-- as an expiry before a drain of the store clears what is left, as in
-- the embedded store (leases, tombstones, then drains).
local function fn_expire(keys, args)
	local ctx, early = begin(keys, args, scope_of(keys))
	if not ctx then return early end
	local T = ctx.T
	local budget = unum(args[4] or '')
	if not budget or budget < 1 then return finish(ctx, fail(ctx, 'EINVAL')) end
	local done = 0
	if T and T.live then done = leases_expire(ctx, T, budget) end
	local aged = tombs_reap(ctx, budget)
	if T then
		-- A tenant's meta (the tenant layout) holds the store's drain too.
		if ctx.tm and T.live and drain_due(ctx, nil) then drain_clear_store(ctx) end
		if T.live and drain_due(ctx, T) then drain_clear_tenant(ctx, T, false) end
	else
		drains_settle(ctx, nil)
	end
	-- DEAD 1 NAME: a tenant of the tenant layout that is gone, its name
	-- to be unlisted at the root (sfs_tenant_unlist).
	if ctx.tm and not T.live then
		return finish(ctx, ok(ctx, done, aged, 1, str(ctx.M, 'name')))
	end
	return finish(ctx, ok(ctx, done, aged))
end
