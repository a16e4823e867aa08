-- content.lua - a state's content (store/content.c): a publication
-- (sfs_publish) replaces it whole, version + 1, mtime and ctime now.
--
-- The content is the state's field data, read and written apart from
-- its other fields (data_len, data_of: base.lua).  Its bytes count in
-- max_bytes and in the tenant's share of it, checked with max_payload
-- before it changes (bytes_check).  The stages a publication comes from
-- are the mount's own memory (store/content.c): only the publication
-- reaches Redis.

-- Would content of @newlen bytes in place of @oldlen in tenant @T fit?
-- (max_payload, then the growth in max_bytes and in the tenant's share
-- of it: bytes_charge_locked.)
local function bytes_check(ctx, T, oldlen, newlen)
	if newlen > ctx.lim.max_payload then return 'EFBIG' end
	if newlen > oldlen then
		local grow = newlen - oldlen
		if num(ctx.M, 'bytes') + grow > ctx.lim.max_bytes then return 'ENOSPC' end
		local share = ctx.lim.tenant_max_bytes
		if share > 0 and num(T, 'bytes') + grow > share then return 'EDQUOT' end
	end
	return nil
end

-- Publish @data as @S's content (publish_locked): version + 1, mtime and
-- ctime now.  Returns the new version and the entry fields that describe
-- it, and how many .events lines (one write line per link).
local function publish(ctx, T, S, data, oldlen)
	gauge(ctx, T, 'bytes', #data - oldlen)
	set(S, 'data', data)
	add(S, 'version', 1)
	touch(ctx, S)
	local lines = link_lines(ctx, T, S)
	return num(S, 'version'), { 'ino', S.ino, 'ver', num(S, 'version'),
		'data', data, 'lines', table.concat(lines, ' ') }, #lines
end

TX.MF_PUBLISH = { 'bytes', 'gseq' }
TX.TF_PUBLISH = { 'seq', 'bytes' }

-- sfs_publish (do_stage_publish), straight (call.lua).
local function fn_publish(keys, args)
	local c, early = TX.begin(keys, args, TX.MF_PUBLISH, TX.TF_PUBLISH)
	if not c then return early end
	local m, t, mk, tk, lim = c.m, c.t, c.mk, c.tk, c.lim
	local sino, mode = ino_arg(args[4]), args[5]
	local base, data = unum(args[6] or ''), args[7]
	local g1, seen_version = opt_unum(args[8])
	local seen_mtime = (args[9] or '') ~= '' and nstime(args[9]) or nil
	if not sino or data == nil or not g1 or
		((args[9] or '') ~= '' and not seen_mtime) or
		(mode ~= 'replace' and mode ~= 'append' and mode ~= 'cas') or
		(mode == 'cas' and not base) then
		return TX.fail(c, 'EINVAL')
	end
	local sk = c.pre .. ':s:' .. sino
	local s = rd(c, 'HMGET', sk, 'nlink', 'version', 'deadline', 'links',
		'mtime')
	if not s[1] or expired(decimal(s[3], sk), c.now) then
		return TX.refuse(c, 'ESTALE')
	end
	local ver = decimal(s[2], sk)
	if mode == 'cas' and ver ~= base then return TX.refuse(c, 'EAGAIN') end
	local cur = rd(c, 'HSTRLEN', sk, 'data')
	if mode == 'append' then data = (rd(c, 'HGET', sk, 'data') or '') .. data end
	-- bytes_check, in its order.
	local len = #data
	if len > lim.max_payload then return TX.refuse(c, 'EFBIG') end
	if len > cur then
		local grow = len - cur
		if decimal(m[2], mk) + grow > lim.max_bytes then
			return TX.refuse(c, 'ENOSPC')
		end
		local share = lim.tenant_max_bytes
		if share > 0 and decimal(t[3], tk) + grow > share then
			return TX.refuse(c, 'EDQUOT')
		end
	end
	local tbytes, mbytes = decimal(t[3], tk) + len - cur, decimal(m[2], mk) + len - cur
	if tbytes < 0 then damaged(tk) end
	if mbytes < 0 then damaged(mk) end
	-- An mtime set after the stage last wrote (SEEN_VERSION and
	-- SEEN_MTIME: the version and mtime it saw then), with no publication
	-- in between, survives it (cp -p sets it before close).
	local mtime = s[5] or ''
	local keep = seen_version and seen_mtime and ver == seen_version and
		mtime ~= seen_mtime
	-- One write line per link (link_lines), newest first.
	local lines, nlink = {}, decimal(s[1], sk)
	for _, l in ipairs(TX.links(s[4], sk)) do
		local pino, name = split(l)
		local pk = c.pre .. ':p:' .. pino
		local pname = rd(c, 'HGET', pk, 'name')
		if not pname then damaged(pk) end
		lines[#lines + 1] = pname .. '/' .. name
	end
	if #lines ~= nlink then damaged(sk) end
	local n = #lines > 1 and #lines or 1
	local seq = c.seq + 1
	local g, gseq = TX.order(c, m[3], n)
	local sver, ns = dec(ver + 1), c.ns
	local f = { 'ino', sino, 'ver', sver, 'data', data,
		'lines', table.concat(lines, ' ') }
	if keep then f[9], f[10] = 'mtime', mtime end
	-- Every check made: the writes.
	local id
	id, f = TX.append(c, seq, n, g, 'write', f)
	redis.call('HSET', sk, 'data', data, 'version', sver,
		'mtime', keep and mtime or ns, 'ctime', ns)
	redis.call('HSET', tk, 'bytes', dec(tbytes), 'seq', dec(seq + n - 1))
	TX.meta_set(c, gseq, 'bytes', dec(mbytes))
	return TX.done(c, { 'OK', c.now, seq + n - 1, ver + 1 }, id, f,
		seq + n - 1, g)
end
