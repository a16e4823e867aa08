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

TX.MF_PUBLISH = fields_made{ 'instance', 'bytes', 'gseq',
	mk = function(v) return { instance = v[1], bytes = v[2], gseq = v[3] } end }
TX.TF_PUBLISH = fields_made{ 'name', 'seq', 'bytes',
	mk = function(v) return { name = v[1], seq = v[2], bytes = v[3] } end }

-- sfs_publish (do_stage_publish).
local function fn_publish(keys, args)
	local ctx, early = begin(keys, args, 'tenant', TX.MF_PUBLISH, TX.TF_PUBLISH)
	if not ctx then return early end
	local T = ctx.T
	local sino, mode = ino_arg(args[4]), args[5]
	local base, data = unum(args[6] or ''), args[7]
	local g1, seen_version = opt_unum(args[8])
	local seen_mtime = (args[9] or '') ~= '' and nstime(args[9]) or nil
	if not sino or data == nil or not g1 or
		((args[9] or '') ~= '' and not seen_mtime) or
		(mode ~= 'replace' and mode ~= 'append' and mode ~= 'cas') or
		(mode == 'cas' and not base) then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local S = state_rec(ctx, T, sino)
	if gone(ctx, S) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if mode == 'cas' and num(S, 'version') ~= base then
		return finish(ctx, refuse(ctx, 'EAGAIN'))
	end
	local cur = data_len(S)
	if mode == 'append' then data = data_of(S) .. data end
	local e = bytes_check(ctx, T, cur, #data)
	if e then return finish(ctx, refuse(ctx, e)) end
	-- An mtime set after the stage last wrote (SEEN_VERSION and
	-- SEEN_MTIME: the version and mtime it saw then), with no publication
	-- in between, survives it (cp -p sets it before close).
	local keep = seen_version and seen_mtime and num(S, 'version') == seen_version and
		str(S, 'mtime') ~= seen_mtime and str(S, 'mtime')
	local ver, f, nlines = publish(ctx, T, S, data, cur)
	if keep then
		set(S, 'mtime', keep)
		f[#f + 1] = 'mtime'
		f[#f + 1] = keep
	end
	tlog(ctx, T, 'write', nlines, f)
	return finish(ctx, ok(ctx, ver))
end
