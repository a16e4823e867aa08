-- child.lua - children (store/child.c): admission (sfs_create), removal
-- (sfs_unlink), a second link (sfs_link), rename and exchange
-- (sfs_rename), and the expiry of a state (child_expire).
--
-- A child is a link in a bucket reaching a state (bucket.lua).
-- Admission (admit) makes its refusals in the contract's order before
-- anything changes: drain, a parent gone, max_children, the quotas
-- (parent_quota, tenant_quota, the tenant's share of max_children).  A
-- state past its deadline that a call finds at a name is expired from
-- every bucket that links it, as by unlink, so the name is free at once.

-- Find @name in @P: the state, or nil and, when the entry's state has
-- expired, that state (link_find_locked).
local function link_find(ctx, T, P, name)
	local B = bucket(ctx, T, P.ino)
	local sino = get(B, name)
	if not sino then return nil end
	local S = linked_state(ctx, T, B, sino)
	if expired(num(S, 'deadline'), ctx.now) then return nil, S end
	return S
end

-- State @S has passed its deadline: every link goes, in one step, each
-- reported as an expire line (child_expire).
local function child_expire(ctx, T, S)
	local lines = {}
	local ver = num(S, 'version')
	for _, m in ipairs(state_links(S, true)) do
		local pino, name = split(m)
		local P = parent_named(ctx, T, pino)
		mset(bucket(ctx, T, pino), name, false)
		add(P, 'links', -1)
		touch(ctx, P)
		gauge(ctx, T, 'links', -1)
		lines[#lines + 1] = str(P, 'name') .. '/' .. name
	end
	set(S, 'nlink', 0)
	set(S, 'links', '')
	state_end(ctx, T, S, true)
	tlog(ctx, T, 'expire', #lines, { 'kind', 'child', 'ino', S.ino,
		'ver', ver, 'lines', table.concat(lines, ' ') })
end

-- The admission checks of a new entry in @P (admit_locked), in the
-- contract's order: store ready, parent alive, ceilings, quotas.  Per
-- tenant shares of a ceiling go here too.
local function admit(ctx, T, P, new_state)
	if draining(ctx, T) then return 'EROFS' end
	if gone(ctx, P) then return 'ESTALE' end
	if new_state and num(ctx.M, 'children') + 1 > ctx.lim.max_children then
		return 'ENOSPC'
	end
	local pq, tq = ctx.lim.parent_quota, ctx.lim.tenant_quota
	if (pq > 0 and num(P, 'links') + 1 > pq) or
		(tq > 0 and num(T, 'links') + 1 > tq) then
		return 'EDQUOT'
	end
	local share = ctx.lim.tenant_max_children
	if new_state and share > 0 and num(T, 'children') + 1 > share then
		return 'EDQUOT'
	end
	return nil
end

-- The fields of meta and of the tenant each function reads at once.
TX.MF_CREATE = fields_made{ 'instance', 'state', 'ino', 'children', 'links',
	'admissions', 'gseq', mk = function(v) return { instance = v[1],
		state = v[2], ino = v[3], children = v[4], links = v[5],
		admissions = v[6], gseq = v[7] } end }
TX.TF_CREATE = fields_made{ 'name', 'seq', 'state', 'links', 'children',
	mk = function(v) return { name = v[1], seq = v[2], state = v[3],
		links = v[4], children = v[5] } end }
TX.MF_UNLINK = fields_made{ 'instance', 'links', 'bytes', 'children',
	'removals', 'gseq', mk = function(v) return { instance = v[1],
		links = v[2], bytes = v[3], children = v[4], removals = v[5],
		gseq = v[6] } end }
TX.TF_UNLINK = fields_made{ 'name', 'seq', 'links', 'bytes', 'children',
	mk = function(v) return { name = v[1], seq = v[2], links = v[3],
		bytes = v[4], children = v[5] } end }
TX.MF_RENAME = fields_made{ 'instance', 'state', 'gseq',
	mk = function(v) return { instance = v[1], state = v[2], gseq = v[3] } end }
TX.TF_RENAME = fields_made{ 'name', 'seq', 'state',
	mk = function(v) return { name = v[1], seq = v[2], state = v[3] } end }

-- sfs_create (do_create).
local function fn_create(keys, args)
	local ctx, early = begin(keys, args, 'tenant', TX.MF_CREATE, TX.TF_CREATE)
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local pino, name = ino_arg(args[4]), args[5] or ''
	local uid, gid, mode = unum(args[6]), unum(args[7]), unum(args[8])
	local excl = args[9] == '1'
	if not (pino and uid and gid and mode) then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 3, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	local P = parent_rec(ctx, T, pino)
	local old, exp
	-- Through a departed or expired parent nothing happens, not even the
	-- reaping of what it held.
	if not gone(ctx, P) then
		old, exp = link_find(ctx, T, P, name)
		if exp then child_expire(ctx, T, exp) end
	end
	if old then
		if excl then return finish(ctx, refuse(ctx, 'EEXIST')) end
		return finish(ctx, ok(ctx, tonumber(old.ino), 0))
	end
	e = admit(ctx, T, P, true)
	if e then return finish(ctx, refuse(ctx, e)) end
	local ttl = num(P, 'child_ttl')
	if ttl == 0 then ttl = ctx.lim.default_ttl_ms end
	mode = mode % 4096
	if bit.band(num(P, 'mode'), S_ISGID) ~= 0 then gid = num(P, 'gid') end
	local sino = alloc_ino(ctx, 1)
	local deadline = ttl > 0 and ctx.now + ttl or 0
	-- Each number goes to the state and to the entry: made a string once.
	local suid, sgid, smode = dec(uid), dec(gid), dec(mode)
	local sttl, sdeadline = dec(ttl), dec(deadline)
	-- The state is written whole, its one link included.
	local S = rec_new(ctx, nkey(T, 's', sino), {
		'data', '', 'version', '0', 'nlink', '1', 'uid', suid, 'gid', sgid,
		'mode', smode, 'atime', ctx.ns, 'mtime', ctx.ns, 'ctime', ctx.ns,
		'ttl', sttl, 'deadline', sdeadline, 'links', P.ino .. '/' .. name })
	S.ino = sino
	link_insert(ctx, T, P, name, S, true)
	gauge(ctx, T, 'children', 1)
	add(M, 'admissions', 1)
	if ttl > 0 then wr(ctx, 'zset', 'ZADD', tkey(T, 'due'), deadline, 's:' .. sino) end
	tlog(ctx, T, 'create', 1, { 'parent', str(P, 'name'), 'pino', P.ino,
		'child', name, 'ino', sino, 'gen', num(P, 'gen'), 'uid', suid,
		'gid', sgid, 'mode', smode, 'ttl', sttl, 'deadline', sdeadline })
	return finish(ctx, ok(ctx, tonumber(sino), 1))
end

-- sfs_unlink (do_unlink).
local function fn_unlink(keys, args)
	local ctx, early = begin(keys, args, 'tenant', TX.MF_UNLINK, TX.TF_UNLINK)
	if not ctx then return early end
	local T = ctx.T
	local pino, name = ino_arg(args[4]), args[5] or ''
	if not pino then return finish(ctx, fail(ctx, 'EINVAL')) end
	local P = parent_rec(ctx, T, pino)
	if gone(ctx, P) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	local S, exp = link_find(ctx, T, P, name)
	if not S then
		-- An expired child is gone already; it is reaped on the way.
		if exp then child_expire(ctx, T, exp) end
		return finish(ctx, refuse(ctx, 'ENOENT'))
	end
	local ver = num(S, 'version')
	mset(bucket(ctx, T, P.ino), name, false)
	add(P, 'links', -1)
	touch(ctx, P)
	gauge(ctx, T, 'links', -1)
	state_unlink(ctx, T, S, P.ino .. '/' .. name, false)
	tlog(ctx, T, 'unlink', 1, { 'parent', str(P, 'name'), 'pino', P.ino,
		'child', name, 'ino', S.ino, 'gen', num(P, 'gen'), 'ver', ver })
	return finish(ctx, ok(ctx))
end

-- The other tenant of a link or a rename: keys[3] (on one Redis), or in
-- the tenant layout, where a call is on one tenant's slot, the other's
-- TID @xtid: this tenant (ctx.T) when it is the call's, else false (a
-- tenant of another slot, not read: EXDEV).  nil: neither given.
function TL.other_tenant(ctx, keys, xtid)
	if keys[3] then return tenant_rec(ctx, keys[3]) end
	if not ctx.tm or not unum(xtid or '') then return nil end
	return xtid == ctx.tm and ctx.T or false
end

-- sfs_link (do_link).
local function fn_link(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local sino, pino, name = ino_arg(args[4]), ino_arg(args[5]), args[6] or ''
	local CT = TL.other_tenant(ctx, keys, args[7])
	if not (sino and pino) or CT == nil then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 3, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	-- Another tenant's state (the tenant layout): its ESTALE is the
	-- mirror's, the mount's check before the call.
	local S = CT and state_rec(ctx, CT, sino)
	local P = parent_rec(ctx, T, pino)
	if (S and gone(ctx, S)) or gone(ctx, P) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if CT ~= T then return finish(ctx, fail(ctx, 'EXDEV')) end
	local old, exp = link_find(ctx, T, P, name)
	if exp then child_expire(ctx, T, exp) end
	if old then return finish(ctx, refuse(ctx, 'EEXIST')) end
	e = admit(ctx, T, P, false)
	if e then return finish(ctx, refuse(ctx, e)) end
	-- The state must still live (an expiry on the way may have ended it).
	if gone(ctx, S) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	link_insert(ctx, T, P, name, S)
	add(S, 'nlink', 1)
	set(S, 'ctime', ctx.ns)
	add(M, 'admissions', 1)
	tlog(ctx, T, 'link', 1, { 'parent', str(P, 'name'), 'pino', P.ino,
		'child', name, 'ino', S.ino, 'gen', num(P, 'gen'),
		'ver', num(S, 'version') })
	return finish(ctx, ok(ctx))
end

local RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2

-- sfs_rename (do_rename).
local function fn_rename(keys, args)
	local ctx, early = begin(keys, args, 'tenant', TX.MF_RENAME, TX.TF_RENAME)
	if not ctx then return early end
	local T = ctx.T
	local apino, name = ino_arg(args[4]), args[5] or ''
	local bpino, to_name = ino_arg(args[6]), args[7] or ''
	local flags = unum(args[8] or '0')
	local BT = TL.other_tenant(ctx, keys, args[9])
	if not (apino and bpino and flags) or BT == nil or flags > 3 then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local e = name_check(to_name, 3, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	local A = parent_rec(ctx, T, apino)
	local B = BT and parent_rec(ctx, BT, bpino)
	if gone(ctx, A) or (B and gone(ctx, B)) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if BT ~= T then return finish(ctx, fail(ctx, 'EXDEV')) end
	if flags == RENAME_NOREPLACE + RENAME_EXCHANGE then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local src, dst, exp
	repeat
		src, exp = link_find(ctx, T, A, name)
		if not exp then dst, exp = link_find(ctx, T, B, to_name) end
		if exp then child_expire(ctx, T, exp) end
	until not exp
	if not src then return finish(ctx, refuse(ctx, 'ENOENT')) end
	local exchange = flags == RENAME_EXCHANGE
	if exchange then
		if not dst then return finish(ctx, refuse(ctx, 'ENOENT')) end
	elseif dst and flags == RENAME_NOREPLACE then
		return finish(ctx, refuse(ctx, 'EEXIST'))
	elseif dst and dst == src then
		-- POSIX: two links to one state: nothing happens.
		return finish(ctx, ok(ctx))
	end
	if draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	local X = src
	local xm, ym = A.ino .. '/' .. name, B.ino .. '/' .. to_name
	local f = { 'parent', str(A, 'name'), 'pino', A.ino, 'child', name,
		'to_parent', str(B, 'name'), 'to_pino', B.ino, 'to_child', to_name,
		'ino', X.ino, 'gen', num(B, 'gen') }
	local nlines = 1
	if exchange then
		-- The two entries trade states.
		if xm ~= ym then
			local Y = dst
			mset(bucket(ctx, T, A.ino), name, Y.ino)
			mset(bucket(ctx, T, B.ino), to_name, X.ino)
			links_del(X, xm)
			links_del(Y, ym)
			state_link(Y, xm)
			state_link(X, ym)
		end
		touch(ctx, A)
		touch(ctx, B)
		f[#f + 1] = 'ino2'
		f[#f + 1] = dst.ino
		f[#f + 1] = 'ver'
		f[#f + 1] = num(X, 'version')
		tlog(ctx, T, 'exchange', 1, f)
		return finish(ctx, ok(ctx))
	end
	if dst then
		-- The destination entry takes the source's state; its old state
		-- loses the link (a terminal removal when it was the last).
		local Y = dst
		f[#f + 1] = 'replaced'
		f[#f + 1] = Y.ino
		f[#f + 1] = 'replaced_ver'
		f[#f + 1] = num(Y, 'version')
		state_unlink(ctx, T, Y, ym, false)
		mset(bucket(ctx, T, B.ino), to_name, X.ino)
		links_del(X, xm)
		state_link(X, ym)
		mset(bucket(ctx, T, A.ino), name, false)
		add(A, 'links', -1)
		gauge(ctx, T, 'links', -1)
		nlines = 2
	else
		-- Admission at the destination: it gains an entry.
		local pq = ctx.lim.parent_quota
		if A ~= B and pq > 0 and num(B, 'links') + 1 > pq then
			return finish(ctx, refuse(ctx, 'EDQUOT'))
		end
		mset(bucket(ctx, T, B.ino), to_name, X.ino)
		add(B, 'links', 1)
		mset(bucket(ctx, T, A.ino), name, false)
		add(A, 'links', -1)
		links_del(X, xm)
		state_link(X, ym)
	end
	touch(ctx, A)
	touch(ctx, B)
	set(X, 'ctime', ctx.ns)
	f[#f + 1] = 'ver'
	f[#f + 1] = num(X, 'version')
	tlog(ctx, T, 'rename', nlines, f)
	return finish(ctx, ok(ctx))
end
