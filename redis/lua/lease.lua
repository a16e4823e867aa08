-- lease.lua - leases (store/lease.c): when a parent or a state ends on
-- its own.  A node's ttl and deadline (sfs_set_ttl, sfs_renew), the
-- lease a parent's children start with (sfs_set_child_ttl), and the due
-- ones ended (leases_expire, for sfs_expire and sfs_drain_now).
--
-- A node's deadline is its own field; a tenant's sorted set
-- P:{P.tTID}:due (member "p:PINO" or "s:SINO", score the deadline) is an
-- index of them, changed in the same call as the deadline, so that the
-- due ones are found oldest first without a scan.  A node past its
-- deadline is gone for every function whether or not it was ended yet
-- (gone(), call.lua).

-- Expire @T's leases that are due, at most @budget, oldest deadline first.
local function leases_expire(ctx, T, budget)
	local dk = tkey(T, 'due')
	local due = rd(ctx, 'ZRANGEBYSCORE', dk, '-inf', ctx.now, 'LIMIT', 0, budget)
	local done = 0
	for _, m in ipairs(due) do
		local kind, ino = string.match(m, '^([ps]):([1-9]%d*)$')
		if not kind then damaged(dk) end
		local R = kind == 'p' and parent_rec(ctx, T, ino) or state_rec(ctx, T, ino)
		if R.live and expired(num(R, 'deadline'), ctx.now) then
			if kind == 'p' then parent_expire(ctx, T, R) else child_expire(ctx, T, R) end
			done = done + 1
		elseif not R.live then
			wr(ctx, 'zset', 'ZREM', dk, m)
		end
	end
	return done
end

-- sfs_set_ttl and sfs_renew (do_lease).
local function lease(keys, args, is_set)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local kind, ino = args[4], ino_arg(args[5])
	local ttl_arg = 0
	if is_set then ttl_arg = unum(args[6]) end
	if (kind ~= 'parent' and kind ~= 'child') or not ino or not ttl_arg or
		ttl_arg > DURATION_MAX_MS then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local R = node_rec(ctx, T, kind, ino)
	local ttl = is_set and ttl_arg or num(R, 'ttl')
	if gone(ctx, R) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if not is_set and ttl == 0 then
		return finish(ctx, ok(ctx, 0)) -- no lease to renew: a plain touch
	end
	if ttl > 0 and ctx.now > CLOCK_MAX_MS then return finish(ctx, fail(ctx, 'EINVAL')) end
	if draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	local deadline = ttl > 0 and ctx.now + ttl or 0
	local member = (kind == 'parent' and 'p:' or 's:') .. ino
	set(R, 'ttl', ttl)
	set(R, 'deadline', deadline)
	if deadline > 0 then
		wr(ctx, 'zset', 'ZADD', tkey(T, 'due'), deadline, member)
	else
		wr(ctx, 'zset', 'ZREM', tkey(T, 'due'), member)
	end
	tlog(ctx, T, is_set and 'ttl' or 'renew', 0, { 'kind', kind, 'ino', ino,
		'ttl', ttl, 'deadline', deadline })
	return finish(ctx, ok(ctx, deadline))
end

local function fn_set_ttl(keys, args) return lease(keys, args, true) end
local function fn_renew(keys, args) return lease(keys, args, false) end

-- sfs_set_child_ttl (store_set_child_ttl).
local function fn_set_child_ttl(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local pino, ttl = ino_arg(args[4]), unum(args[5])
	if not (pino and ttl) or ttl > DURATION_MAX_MS then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local P = parent_rec(ctx, T, pino)
	if gone(ctx, P) then return finish(ctx, fail(ctx, 'ESTALE')) end
	set(P, 'child_ttl', ttl)
	tlog(ctx, T, 'child_ttl', 0, { 'ino', pino, 'ttl', ttl })
	return finish(ctx, ok(ctx))
end
