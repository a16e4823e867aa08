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

-- State @S past its deadline, found at @name of parent @pino by @fn, a
-- straight-line transition (call.lua): its expiry is a transition of its
-- own, on records, in the same call (and in the same log, just before),
-- after which @fn runs again.  Found there again: damage.
function TX.expire_named(fn, keys, args, pino, name)
	if args.again then damaged(keys[2]) end
	args.again = true
	local ctx = begin(keys, { args[1], '', '' }, 'tenant')
	local T = ctx.T
	local _, S = link_find(ctx, T, parent_rec(ctx, T, pino), name)
	if not S then damaged(nkey(T, 'l', pino)) end
	child_expire(ctx, T, S)
	finish(ctx, ok(ctx))
	return fn(keys, args)
end

-- The fields of meta and of the tenant each function reads at once
-- (after instance and name).
TX.MF_CREATE = { 'state', 'ino', 'children', 'links', 'admissions', 'gseq' }
TX.TF_CREATE = { 'seq', 'state', 'links', 'children' }
TX.MF_UNLINK = { 'links', 'bytes', 'children', 'removals', 'gseq' }
TX.TF_UNLINK = { 'seq', 'links', 'bytes', 'children' }
TX.MF_RENAME = fields_made{ 'instance', 'state', 'gseq',
	mk = function(v) return { instance = v[1], state = v[2], gseq = v[3] } end }
TX.TF_RENAME = fields_made{ 'name', 'seq', 'state',
	mk = function(v) return { name = v[1], seq = v[2], state = v[3] } end }
TX.MF_MOVE = { 'state', 'gseq' }
TX.TF_MOVE = { 'seq', 'state' }

-- The parent @pino of call @c: its key, its fields (name, gen, deadline,
-- links, mode, child_ttl) and whether it is gone (departed or expired).
function TX.parent(c, pino)
	local pk = c.pre .. ':p:' .. pino
	local p = rd(c, 'HMGET', pk, 'name', 'gen', 'deadline', 'links', 'mode',
		'child_ttl')
	return pk, p, not p[1] or expired(decimal(p[3], pk), c.now)
end

-- The state bucket @bk links at @name (linked_state): its ino, key and
-- fields (nlink, version, deadline, links), or nil.
function TX.linked(c, bk, name)
	local sino = rd(c, 'HGET', bk, name)
	if not sino then return nil end
	if not ino_arg(sino) then damaged(bk) end
	local sk = c.pre .. ':s:' .. sino
	local s = rd(c, 'HMGET', sk, 'nlink', 'version', 'deadline', 'links')
	if not s[1] then damaged(sk) end
	return sino, sk, s
end

-- sfs_create (do_create), straight (call.lua).
local function fn_create(keys, args)
	local c, early = TX.begin(keys, args, TX.MF_CREATE, TX.TF_CREATE)
	if not c then return early end
	local m, t, mk, tk, lim = c.m, c.t, c.mk, c.tk, c.lim
	local pino, name = ino_arg(args[4]), args[5] or ''
	local uid, gid, mode = unum(args[6]), unum(args[7]), unum(args[8])
	local excl = args[9] == '1'
	if not (pino and uid and gid and mode) then return TX.fail(c, 'EINVAL') end
	local e = name_check(name, 3, lim.max_name)
	if e then return TX.fail(c, e) end
	local pk, p, pgone = TX.parent(c, pino)
	local bk = c.pre .. ':l:' .. pino
	-- Through a departed or expired parent nothing happens, not even the
	-- reaping of what it held.
	if not pgone then
		local sino, sk, s = TX.linked(c, bk, name)
		if sino and expired(decimal(s[3], sk), c.now) then
			return TX.expire_named(fn_create, keys, args, pino, name)
		end
		if sino then
			if excl then return TX.refuse(c, 'EEXIST') end
			return TX.ok(c, tonumber(sino), 0)
		end
	end
	-- Admission (admit), in its order.
	if not TX.ready(m[2], mk) or (t[1] and not TX.ready(t[3], tk)) then
		return TX.refuse(c, 'EROFS')
	end
	if pgone then return TX.refuse(c, 'ESTALE') end
	local mchildren = decimal(m[4], mk)
	if mchildren + 1 > lim.max_children then return TX.refuse(c, 'ENOSPC') end
	local pq, tq = lim.parent_quota, lim.tenant_quota
	if (pq > 0 and decimal(p[4], pk) + 1 > pq) or
		(tq > 0 and decimal(t[4], tk) + 1 > tq) then
		return TX.refuse(c, 'EDQUOT')
	end
	local share = lim.tenant_max_children
	if share > 0 and decimal(t[5], tk) + 1 > share then
		return TX.refuse(c, 'EDQUOT')
	end
	local ttl = decimal(p[6], pk)
	if ttl == 0 then ttl = lim.default_ttl_ms end
	mode = mode % 4096
	if bit.band(decimal(p[5], pk), S_ISGID) ~= 0 then
		gid = decimal(rd(c, 'HGET', pk, 'gid'), pk)
	end
	local ino = decimal(m[3], mk)
	if ino < FIRST_INO then damaged(mk) end
	local sino = dec(ino)
	local sk = c.pre .. ':s:' .. sino
	if redis.call('EXISTS', sk) == 1 then damaged(sk) end
	local due = c.pre .. ':due'
	if ttl > 0 then check_type(c, 'zset', due) end
	local plinks, tlinks = decimal(p[4], pk) + 1, decimal(t[4], tk) + 1
	local tchildren = decimal(t[5], tk) + 1
	local mlinks, madm = decimal(m[5], mk) + 1, decimal(m[6], mk) + 1
	local seq = c.seq + 1
	local g, gseq = TX.order(c, m[7], 1)
	local gen = TX.decimal_s(p[2], pk)
	-- Each number goes to the state and to the entry: made a string once.
	local suid, sgid, smode = dec(uid), dec(gid), dec(mode)
	local deadline = ttl > 0 and c.now + ttl or 0
	local sttl, sdeadline, ns = dec(ttl), dec(deadline), c.ns
	-- Every check made: the writes.
	local id, f = TX.append(c, seq, 1, g, 'create', { 'parent', p[1],
		'pino', pino, 'child', name, 'ino', sino, 'gen', gen, 'uid', suid,
		'gid', sgid, 'mode', smode, 'ttl', sttl, 'deadline', sdeadline })
	redis.call('HSET', sk, 'data', '', 'version', '0', 'nlink', '1',
		'uid', suid, 'gid', sgid, 'mode', smode, 'atime', ns, 'mtime', ns,
		'ctime', ns, 'ttl', sttl, 'deadline', sdeadline,
		'links', pino .. '/' .. name)
	if ttl > 0 then redis.call('ZADD', due, sdeadline, 's:' .. sino) end
	redis.call('HSET', bk, name, sino)
	redis.call('HSET', pk, 'links', dec(plinks), 'mtime', ns, 'ctime', ns)
	redis.call('HSET', tk, 'links', dec(tlinks), 'children', dec(tchildren),
		'seq', dec(seq))
	TX.meta_set(c, gseq, 'ino', dec(ino + 1), 'links', dec(mlinks),
		'children', dec(mchildren + 1), 'admissions', dec(madm))
	return TX.done(c, { 'OK', c.now, seq, tonumber(sino), 1 }, id, f, seq, g)
end

-- sfs_unlink (do_unlink), straight (call.lua).
local function fn_unlink(keys, args)
	local c, early = TX.begin(keys, args, TX.MF_UNLINK, TX.TF_UNLINK)
	if not c then return early end
	local m, t, mk, tk = c.m, c.t, c.mk, c.tk
	local pino, name = ino_arg(args[4]), args[5] or ''
	if not pino then return TX.fail(c, 'EINVAL') end
	local pk, p, pgone = TX.parent(c, pino)
	if pgone then return TX.refuse(c, 'ESTALE') end
	local bk = c.pre .. ':l:' .. pino
	local sino, sk, s = TX.linked(c, bk, name)
	if not sino then return TX.refuse(c, 'ENOENT') end
	local sdeadline = decimal(s[3], sk)
	if expired(sdeadline, c.now) then
		-- An expired child is gone already; it is reaped on the way.
		return TX.expire_named(fn_unlink, keys, args, pino, name)
	end
	local ver = decimal(s[2], sk)
	local plinks = decimal(p[4], pk) - 1
	local tlinks, mlinks = decimal(t[3], tk) - 1, decimal(m[2], mk) - 1
	if plinks < 0 then damaged(pk) end
	if tlinks < 0 then damaged(tk) end
	if mlinks < 0 then damaged(mk) end
	-- The state's side (state_unlink): its links counted, this one out.
	local member, all, rest = pino .. '/' .. name, TX.links(s[4], sk), {}
	for _, l in ipairs(all) do
		if l ~= member then rest[#rest + 1] = l end
	end
	local n, nlink = #all, decimal(s[1], sk)
	if n ~= nlink or #rest ~= n - 1 then damaged(sk) end
	local last = nlink == 1
	local tbytes, mbytes, tchildren, mchildren, removals, due
	if last then
		-- Its last link: the state ends (state_end), its bytes and its
		-- place in the gauges with it.
		local len = rd(c, 'HSTRLEN', sk, 'data')
		tbytes, mbytes = decimal(t[4], tk) - len, decimal(m[3], mk) - len
		tchildren, mchildren = decimal(t[5], tk) - 1, decimal(m[4], mk) - 1
		if tbytes < 0 or tchildren < 0 then damaged(tk) end
		if mbytes < 0 or mchildren < 0 then damaged(mk) end
		removals = decimal(m[5], mk) + 1
		if sdeadline > 0 then
			due = c.pre .. ':due'
			check_type(c, 'zset', due)
		end
	end
	local seq = c.seq + 1
	local g, gseq = TX.order(c, m[6], 1)
	local gen = TX.decimal_s(p[2], pk)
	local ns = c.ns
	-- Every check made: the writes.
	local id, f = TX.append(c, seq, 1, g, 'unlink', { 'parent', p[1],
		'pino', pino, 'child', name, 'ino', sino, 'gen', gen,
		'ver', dec(ver) })
	redis.call('HDEL', bk, name)
	redis.call('HSET', pk, 'links', dec(plinks), 'mtime', ns, 'ctime', ns)
	if last then
		redis.call('DEL', sk)
		if due then redis.call('ZREM', due, 's:' .. sino) end
		redis.call('HSET', tk, 'links', dec(tlinks), 'bytes', dec(tbytes),
			'children', dec(tchildren), 'seq', dec(seq))
		TX.meta_set(c, gseq, 'links', dec(mlinks), 'bytes', dec(mbytes),
			'children', dec(mchildren), 'removals', dec(removals))
	else
		redis.call('HSET', sk, 'links', table.concat(rest, ' '),
			'nlink', dec(nlink - 1), 'ctime', ns)
		redis.call('HSET', tk, 'links', dec(tlinks), 'seq', dec(seq))
		TX.meta_set(c, gseq, 'links', dec(mlinks))
	end
	return TX.done(c, { 'OK', c.now, seq }, id, f, seq, g)
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

-- sfs_rename (do_rename), on records: all but a plain move (fn_rename).
local function rename_rec(keys, args)
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

-- sfs_rename (do_rename).  A plain move, the common case, straight
-- (call.lua): a name of a live state to a free name in a live parent of
-- the same tenant (flags 0 or RENAME_NOREPLACE), nothing refused.  Every
-- other case, each refusal included, is rename_rec's, which reads
-- everything again (nothing is written before it).
local function fn_rename(keys, args)
	local c, early = TX.begin(keys, args, TX.MF_MOVE, TX.TF_MOVE)
	if not c then return early end
	local m, t, mk, tk, lim = c.m, c.t, c.mk, c.tk, c.lim
	local apino, name = ino_arg(args[4]), args[5] or ''
	local bpino, to_name = ino_arg(args[6]), args[7] or ''
	local tid = c.names.tid
	local same = keys[3] == tk or (not keys[3] and tid and args[9] == tid)
	if not (apino and bpino and same and (args[8] == '0' or args[8] == '1')) or
		name_check(to_name, 3, lim.max_name) then
		return rename_rec(keys, args)
	end
	local moved = apino ~= bpino
	local apk, a, agone = TX.parent(c, apino)
	local bpk, b, bgone = apk, a, agone
	if moved then bpk, b, bgone = TX.parent(c, bpino) end
	if agone or bgone then return rename_rec(keys, args) end
	local abk, bbk = c.pre .. ':l:' .. apino, c.pre .. ':l:' .. bpino
	local sino, sk, s = TX.linked(c, abk, name)
	if not sino or expired(decimal(s[3], sk), c.now) or
		rd(c, 'HGET', bbk, to_name) or not TX.ready(m[2], mk) or
		(t[1] and not TX.ready(t[3], tk)) then
		return rename_rec(keys, args)
	end
	local alinks, blinks = decimal(a[4], apk), decimal(b[4], bpk)
	local pq = lim.parent_quota
	if moved and pq > 0 and blinks + 1 > pq then return rename_rec(keys, args) end
	if moved and alinks < 1 then damaged(apk) end
	-- The state's links: this one out, the new one first (links_del,
	-- state_link).
	local xm, ym = apino .. '/' .. name, bpino .. '/' .. to_name
	local all, links = TX.links(s[4], sk), { ym }
	for _, l in ipairs(all) do
		if l ~= xm then links[#links + 1] = l end
	end
	if #links ~= #all then damaged(sk) end
	local ver = decimal(s[2], sk)
	local seq = c.seq + 1
	local g, gseq = TX.order(c, m[3], 1)
	local gen = TX.decimal_s(b[2], bpk)
	local ns = c.ns
	-- Every check made: the writes.
	local id, f = TX.append(c, seq, 1, g, 'rename', { 'parent', a[1],
		'pino', apino, 'child', name, 'to_parent', b[1], 'to_pino', bpino,
		'to_child', to_name, 'ino', sino, 'gen', gen, 'ver', dec(ver) })
	redis.call('HSET', bbk, to_name, sino)
	redis.call('HDEL', abk, name)
	if moved then
		redis.call('HSET', apk, 'links', dec(alinks - 1), 'mtime', ns, 'ctime', ns)
		redis.call('HSET', bpk, 'links', dec(blinks + 1), 'mtime', ns, 'ctime', ns)
	else
		redis.call('HSET', apk, 'mtime', ns, 'ctime', ns)
	end
	redis.call('HSET', sk, 'links', table.concat(links, ' '), 'ctime', ns)
	redis.call('HSET', tk, 'seq', dec(seq))
	if gseq then redis.call('HSET', mk, 'gseq', gseq) end
	return TX.done(c, { 'OK', c.now, seq }, id, f, seq, g)
end
