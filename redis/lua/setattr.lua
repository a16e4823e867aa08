-- setattr.lua - a node's attributes set (sfs_setattr; do_setattr in
-- store/node.c): mode, owner and times; a size change, which is a
-- publication (content.lua); with RENEW, the lease renewed by a touch
-- (lease.lua).

-- sfs_setattr (do_setattr).
local function fn_setattr(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local kind, ino = args[4], ino_arg(args[5])
	local g1, mode = opt_unum(args[6])
	local g2, uid = opt_unum(args[7])
	local g3, gid = opt_unum(args[8])
	local atime = (args[9] or '') ~= '' and nstime(args[9]) or nil
	local mtime = (args[10] or '') ~= '' and nstime(args[10]) or nil
	local g4, size = opt_unum(args[11])
	local g5, kill = opt_unum(args[12])
	if kill == 0 then kill = nil end
	local renew = args[13] == '1' and (kind == 'parent' or kind == 'child')
	local R = ino and node_rec(ctx, T, kind, ino)
	if not (R and g1 and g2 and g3 and g4 and g5) or
		((args[9] or '') ~= '' and not atime) or
		((args[10] or '') ~= '' and not mtime) then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	if gone(ctx, R) then return finish(ctx, fail(ctx, 'ESTALE')) end
	if size and kind ~= 'child' then return finish(ctx, fail(ctx, 'EISDIR')) end
	-- The renewal of a touch (STORE_SET_RENEW): a node with a lease is
	-- refused while draining; one without is a plain touch.
	local ttl = renew and num(R, 'ttl') or 0
	if ttl > 0 and draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	local op, f, nlines = 'attr', { 'kind', kind, 'ino', ino }, 1
	if size then
		if size > ctx.lim.max_payload then return finish(ctx, refuse(ctx, 'EFBIG')) end
		local cur = data_len(R)
		local e = bytes_check(ctx, T, cur, size)
		if e then return finish(ctx, refuse(ctx, e)) end
		local data = data_of(R)
		if size <= cur then
			data = string.sub(data, 1, size)
		else
			data = data .. string.rep('\0', size - cur)
		end
		local _, pf, n = publish(ctx, T, R, data, cur)
		op, f, nlines = 'write', pf, n
		f[#f + 1] = 'kind'
		f[#f + 1] = 'child'
	end
	if mode or kill then
		-- The kill bits clear set-user-ID (1) and set-group-ID (2)
		-- from the mode as it is then, so a concurrent chmod stands.
		local m = mode and mode % 4096 or num(R, 'mode')
		if kill and bit.band(kill, 1) ~= 0 then m = bit.band(m, 4095 - 2048) end
		if kill and bit.band(kill, 2) ~= 0 then m = bit.band(m, 4095 - S_ISGID) end
		mode = m
	end
	if mode or uid or gid or atime or mtime then
		if mode then
			set(R, 'mode', mode)
			f[#f + 1] = 'mode'
			f[#f + 1] = mode
		end
		if uid then
			set(R, 'uid', uid)
			f[#f + 1] = 'uid'
			f[#f + 1] = uid
		end
		if gid then
			set(R, 'gid', gid)
			f[#f + 1] = 'gid'
			f[#f + 1] = gid
		end
		if atime then
			set(R, 'atime', atime)
			f[#f + 1] = 'atime'
			f[#f + 1] = atime
		end
		if mtime then
			set(R, 'mtime', mtime)
			f[#f + 1] = 'mtime'
			f[#f + 1] = mtime
		end
		set(R, 'ctime', ctx.ns)
		f[#f + 1] = 'ctime'
		f[#f + 1] = ctx.ns
	end
	if ttl > 0 then
		local deadline = ctx.now + ttl
		set(R, 'deadline', deadline)
		wr(ctx, 'zset', 'ZADD', tkey(T, 'due'), deadline,
			(kind == 'parent' and 'p:' or 's:') .. ino)
		f[#f + 1] = 'deadline'
		f[#f + 1] = deadline
	end
	tlog(ctx, T, op, nlines, f)
	return finish(ctx, ok(ctx))
end
