-- lock.lua - advisory locks on a child that every mount of the store
-- honours: flock(2) and fcntl(2) record locks (POSIX and open file
-- description locks), decided here for every host as the kernel's
-- fs/locks.c decides them for one (the mount's side is redis/lock.c).
-- Last in the library: it registers its functions with register.lua's
-- reg().
--
-- Keys, each under its tenant's hash tag:
--   P:{P.tTID}:lk:SINO  string: state SINO's locks and its queue of
--                       waiters, cmsgpack of { h = {LOCK...}, w =
--                       {LOCK...} }, each LOCK { s = SID, o = OWNER,
--                       f = FH, k = KIND, t = TYPE, a = START, b = END,
--                       p = PID } (a waiter's also id = WAITID).  Its
--                       TTL is three lock timeouts of the longest of its
--                       holders' mounts, renewed with their sessions: a
--                       record nobody renews (its child removed, its
--                       holders' mounts dead) ends by itself.
--   P:{P.tTID}:ls:SID   string with a TTL (the mount's lock_timeout):
--                       mount session SID is alive in this tenant.
--                       Renewed by the mount; once it expired, every
--                       lock and waiter of SID is void, and the mount
--                       takes a new SID (it never revives an old one).
--
-- KIND 'f' (flock) or 'p' (POSIX and OFD: the kernel sends both as
-- record locks, an OFD lock's OWNER being its open file).  The kinds
-- never conflict with each other, as on Linux.  TYPE 'r', 'w', or 'u'
-- (unlock).  START and END are byte offsets, END inclusive; a lock to
-- the end of the file ends at 2^63 - 1 (doubles: exact below 2^53, and
-- only compared).  OWNER and FH are the kernel's numbers as decimal
-- strings, only compared.  A lock conflicts with another of its kind
-- held by another owner (another SID, or another OWNER) when their
-- ranges overlap and one of them is 'w'.
--
-- Fairness: a request waits behind every queued waiter it conflicts
-- with, not only behind holders, so no waiter starves behind a stream
-- of newcomers; a non-blocking request that would overtake one is
-- EAGAIN.  An owner that holds a lock of the kind on the child already
-- (a conversion, an unlock of part of a range) does not queue behind
-- waiters (they may be waiting for it).  No deadlock is detected.

local LK_SID = '^[%w.]+$'

-- The lock request in @args from @i: OWNER FH KIND TYPE START END PID.
local function lk_req(args, i)
	local o, f, k, t = args[i], args[i + 1], args[i + 2], args[i + 3]
	local a, b, p = tonumber(args[i + 4] or ''), tonumber(args[i + 5] or ''),
		tonumber(args[i + 6] or '')
	if type(o) ~= 'string' or not string.find(o, '^%d+$') or
		type(f) ~= 'string' or not string.find(f, '^%d+$') or
		(k ~= 'f' and k ~= 'p') or (t ~= 'r' and t ~= 'w' and t ~= 'u') or
		not a or not b or not p or a < 0 or b < a then
		return nil
	end
	return { o = o, f = f, k = k, t = t, a = a, b = b, p = p }
end

local function lk_key(T, sino) return T.pre .. ':lk:' .. sino end
local function ls_key(T, sid) return T.pre .. ':ls:' .. sid end

-- State @sino's lock record (empty when it has none); damage when the
-- key is not one statefs wrote.
local function lk_load(ctx, key)
	local v = rd(ctx, 'GET', key)
	if not v then return { h = {}, w = {} } end
	local good, L = pcall(cmsgpack.unpack, v)
	if not good or type(L) ~= 'table' or type(L.h) ~= 'table' or
		type(L.w) ~= 'table' then
		damaged(key)
	end
	for _, list in ipairs({ L.h, L.w }) do
		for _, x in ipairs(list) do
			if type(x) ~= 'table' or type(x.s) ~= 'string' or
				type(x.o) ~= 'string' or type(x.f) ~= 'string' or
				(x.k ~= 'f' and x.k ~= 'p') or
				(x.t ~= 'r' and x.t ~= 'w') or type(x.a) ~= 'number' or
				type(x.b) ~= 'number' or type(x.p) ~= 'number' or
				(list == L.w and type(x.id) ~= 'string') then
				damaged(key)
			end
		end
	end
	return L
end

-- Drop from @L every lock and waiter of a session that expired; @alive
-- caches what was learned (SID -> bool).  Whether anything went.
local function lk_clean(T, L, alive)
	local changed = false
	for _, list in ipairs({ L.h, L.w }) do
		local i = 1
		while i <= #list do
			local s = list[i].s
			if alive[s] == nil then
				alive[s] = redis.call('EXISTS', ls_key(T, s)) == 1
			end
			if alive[s] then
				i = i + 1
			else
				table.remove(list, i)
				changed = true
			end
		end
	end
	return changed
end

local function same_owner(x, y) return x.s == y.s and x.o == y.o end

local function conflicts(x, y)
	return x.k == y.k and not same_owner(x, y) and x.a <= y.b and
		y.a <= x.b and (x.t == 'w' or y.t == 'w')
end

-- Does @q's owner hold a lock of @q's kind on this child?
local function holds_kind(L, q)
	for _, x in ipairs(L.h) do
		if same_owner(x, q) and x.k == q.k then return true end
	end
	return false
end

-- Is request @q (@pos: its place in the queue, or past its end) held
-- back, by a holder or by a waiter ahead of it?
local function blocked(L, q, pos)
	for _, x in ipairs(L.h) do
		if conflicts(x, q) then return x end
	end
	if holds_kind(L, q) then return nil end
	for i = 1, pos - 1 do
		if conflicts(L.w[i], q) then return L.w[i] end
	end
	return nil
end

-- Set @q over its range for its owner: what the owner held of its kind
-- there goes (split at the range's ends), then @q unless an unlock.
local function lk_apply(L, q)
	local out = {}
	for _, x in ipairs(L.h) do
		if same_owner(x, q) and x.k == q.k and x.a <= q.b and q.a <= x.b then
			if x.a < q.a then
				out[#out + 1] = { s = x.s, o = x.o, f = x.f, k = x.k,
					t = x.t, a = x.a, b = q.a - 1, p = x.p }
			end
			if x.b > q.b then
				out[#out + 1] = { s = x.s, o = x.o, f = x.f, k = x.k,
					t = x.t, a = q.b + 1, b = x.b, p = x.p }
			end
		else
			out[#out + 1] = x
		end
	end
	if q.t ~= 'u' then
		out[#out + 1] = { s = q.s, o = q.o, f = q.f, k = q.k, t = q.t,
			a = q.a, b = q.b, p = q.p }
	end
	L.h = out
end

-- How many locks of its kind @q's owner holds on this child.
local function held_by(L, q)
	local n = 0
	for _, x in ipairs(L.h) do
		if same_owner(x, q) and x.k == q.k then n = n + 1 end
	end
	return n
end

local function waiter_at(L, id)
	for i, x in ipairs(L.w) do
		if x.id == id then return i end
	end
	return nil
end

-- Keep the write of @L at @key (its end when nothing is left), its TTL
-- at least 3 * @ttl ms.
local function lk_save(ctx, key, L, ttl)
	if #L.h == 0 and #L.w == 0 then
		wr(ctx, 'string', 'DEL', key)
		return
	end
	wr(ctx, 'string', 'SET', key, cmsgpack.pack(L), 'KEEPTTL')
	wr(ctx, 'string', 'PEXPIRE', key, 3 * ttl, 'NX')
	wr(ctx, 'string', 'PEXPIRE', key, 3 * ttl, 'GT')
end

local function lk_num(v) return string.format('%.0f', v) end

-- The common front of a lock call on state ARGS[4] of tenant KEYS[2]:
-- the context, the state's record key, or nil and the outcome.
local function lk_begin(keys, args, scope)
	local ctx, early = begin(keys, args, scope)
	if not ctx then return nil, early end
	if scope == 'read' then
		if #keys < 2 then return nil, fail(ctx, 'EINVAL') end
		ctx.T = tenant_rec(ctx, keys[2])
	end
	local T = ctx.T
	if not T or not ino_arg(args[4]) or type(args[5]) ~= 'string' or
		not string.find(args[5], LK_SID) then
		return nil, fail(ctx, 'EINVAL')
	end
	if not T.live then return nil, fail(ctx, 'ESTALE') end
	return ctx, lk_key(T, args[4])
end

--[[
  sfs_lock 2 META T ... SINO SID TTL WAITID OWNER FH KIND TYPE START END
                        PID WAIT NEW
  A lock set (or TYPE u: unlocked) on state SINO for OWNER of mount
  session SID, whose session key lives TTL ms (renewed by the call).
  NEW "1": SID is new in this tenant (its key is made); else a SID whose
  key expired is OK [lost]: its locks are void, nothing is done, and the
  mount takes a new one.  WAITID: this request's place in the queue
  ("" for none; WAIT "1" needs one).  Checks: bad arguments EINVAL; a
  dead tenant ESTALE; a state that is gone ESTALE (its record goes);
  then, past the holders and waiters of expired sessions (dropped), a
  conflict: with WAIT OK [queued] (the request keeps or takes its place),
  else EAGAIN.  OK [granted|unlocked|queued, the locks of its kind OWNER
  holds on SINO now].  Not counted in refused_*.  Past the checks (OK
  and EAGAIN) the session's key is made or renewed.
]]
local function fn_lock(keys, args)
	local ctx, key = lk_begin(keys, args, 'tenant')
	if not ctx then return key end
	local T, sid = ctx.T, args[5]
	local ttl, waitid = unum(args[6] or ''), args[7] or ''
	local q = lk_req(args, 8)
	local wait, new = args[15] == '1', args[16] == '1'
	if not q or not ttl or ttl == 0 or (wait and waitid == '') or
		(q.t == 'u' and wait) then
		return fail(ctx, 'EINVAL')
	end
	q.s = sid
	local S = state_rec(ctx, T, args[4])
	if gone(ctx, S) then
		-- The child ended: its locks ended with it.
		if redis.call('EXISTS', key) == 1 then
			check_type(ctx, 'string', key)
			wr(ctx, 'string', 'DEL', key)
		end
		return finish(ctx, fail(ctx, 'ESTALE'))
	end
	local skey = ls_key(T, sid)
	if not new and redis.call('EXISTS', skey) == 0 then
		return ok(ctx, 'lost', 0)
	end
	local L = lk_load(ctx, key)
	local alive = { [sid] = true }
	local changed = lk_clean(T, L, alive)
	local pos = waitid ~= '' and waiter_at(L, waitid) or nil
	local state
	if q.t == 'u' then
		if pos then table.remove(L.w, pos) end
		lk_apply(L, q)
		state = 'unlocked'
	elseif not blocked(L, q, pos or #L.w + 1) then
		if pos then table.remove(L.w, pos) end
		lk_apply(L, q)
		state = 'granted'
	elseif wait then
		if not pos then
			q.id = waitid
			L.w[#L.w + 1] = q
		end
		state = 'queued'
	else
		if changed then lk_save(ctx, key, L, ttl) end
		wr(ctx, 'string', 'SET', skey, '1', 'PX', ttl)
		return finish(ctx, fail(ctx, 'EAGAIN'))
	end
	lk_save(ctx, key, L, ttl)
	wr(ctx, 'string', 'SET', skey, '1', 'PX', ttl)
	return finish(ctx, ok(ctx, state, held_by(L, q)))
end

--[[
  sfs_lock_drop 2 META T ... SINO SID TTL BY VALUE
  The locks and waiters of session SID on state SINO go: BY owner, the
  POSIX locks of OWNER VALUE (a close by that owner: FUSE flush); fh,
  every lock taken through open file VALUE (its last close: FUSE
  release, which ends flock and OFD locks); wait, waiter VALUE (an
  interrupted wait).  A state that is gone loses its record.  Bad
  arguments EINVAL, dead tenant ESTALE.  OK [locks and waiters dropped].
]]
local function fn_lock_drop(keys, args)
	local ctx, key = lk_begin(keys, args, 'tenant')
	if not ctx then return key end
	local T, sid = ctx.T, args[5]
	local ttl, by, v = unum(args[6] or ''), args[7], args[8]
	if not ttl or ttl == 0 or type(v) ~= 'string' or
		(by ~= 'owner' and by ~= 'fh' and by ~= 'wait') then
		return fail(ctx, 'EINVAL')
	end
	local S = state_rec(ctx, T, args[4])
	if redis.call('EXISTS', key) == 0 then return ok(ctx, 0) end
	check_type(ctx, 'string', key)
	if gone(ctx, S) then
		wr(ctx, 'string', 'DEL', key)
		return finish(ctx, ok(ctx, 0))
	end
	local L = lk_load(ctx, key)
	local n = 0
	local function keep(x)
		if x.s ~= sid then return true end
		if by == 'owner' then return not (x.k == 'p' and x.o == v) end
		if by == 'fh' then return x.f ~= v end
		return x.id ~= v
	end
	for _, list in ipairs({ L.h, L.w }) do
		local i = 1
		while i <= #list do
			if keep(list[i]) then
				i = i + 1
			else
				table.remove(list, i)
				n = n + 1
			end
		end
	end
	local changed = lk_clean(T, L, { [sid] = true })
	if n == 0 and not changed then return ok(ctx, 0) end
	lk_save(ctx, key, L, ttl)
	return finish(ctx, ok(ctx, n))
end

--[[
  sfs_lock_test 2 META T ... SINO SID OWNER FH KIND TYPE START END PID
  (read-only) F_GETLK: the first lock of a live session that conflicts
  with the request.  Bad arguments EINVAL, dead tenant or gone state
  ESTALE.  OK [u] when none, else OK [TYPE, START, END, PID, MINE: "1"
  when SID holds it].
]]
local function fn_lock_test(keys, args)
	local ctx, key = lk_begin(keys, args, 'read')
	if not ctx then return key end
	local q = lk_req(args, 6)
	if not q or q.t == 'u' then return fail(ctx, 'EINVAL') end
	q.s = args[5]
	if gone(ctx, state_rec(ctx, ctx.T, args[4])) then
		return fail(ctx, 'ESTALE')
	end
	local L = lk_load(ctx, key)
	lk_clean(ctx.T, L, {})
	for _, x in ipairs(L.h) do
		if conflicts(x, q) then
			return ok(ctx, x.t, lk_num(x.a), lk_num(x.b), lk_num(x.p),
				x.s == q.s and '1' or '')
		end
	end
	return ok(ctx, 'u')
end

--[[
  sfs_lock_peek 2 META T ... SINO SID WAITID
  (read-only) Whether waiter WAITID should call sfs_lock again: OK [1]
  when nothing live holds it back (or it is no longer queued, or its
  state or tenant is gone: sfs_lock answers), else OK [0].  What a
  waiter polls, cheaply, between its sfs_lock calls.
]]
local function fn_lock_peek(keys, args)
	local ctx, key = lk_begin(keys, args, 'read')
	if not ctx then
		if key[1] == 'ESTALE' then key[1] = 'OK'; key[4] = '1' end
		return key
	end
	if gone(ctx, state_rec(ctx, ctx.T, args[4])) then return ok(ctx, '1') end
	local L = lk_load(ctx, key)
	lk_clean(ctx.T, L, {})
	local pos = waiter_at(L, args[6] or '')
	if not pos or not blocked(L, L.w[pos], pos) then return ok(ctx, '1') end
	return ok(ctx, '0')
end

--[[
  sfs_lock_renew 2 META T ... SID TTL [SINO...]
  Session SID lives TTL ms more, and the records of the states named
  (where it holds locks or waits) three TTLs at least.  OK [1], or OK [0]
  when SID's key had expired (its locks are void: nothing is renewed).
  Bad arguments EINVAL, dead tenant ESTALE.
]]
local function fn_lock_renew(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, sid, ttl = ctx.T, args[4], unum(args[5] or '')
	if type(sid) ~= 'string' or not string.find(sid, LK_SID) or
		not ttl or ttl == 0 then
		return fail(ctx, 'EINVAL')
	end
	for i = 6, #args do
		if not ino_arg(args[i]) then return fail(ctx, 'EINVAL') end
	end
	if not T.live then return fail(ctx, 'ESTALE') end
	local skey = ls_key(T, sid)
	if redis.call('EXISTS', skey) == 0 then return ok(ctx, '0') end
	check_type(ctx, 'string', skey)
	wr(ctx, 'string', 'PEXPIRE', skey, ttl)
	for i = 6, #args do
		wr(ctx, 'string', 'PEXPIRE', lk_key(T, args[i]), 3 * ttl, 'GT')
	end
	return finish(ctx, ok(ctx, '1'))
end

reg('sfs_lock', fn_lock)
reg('sfs_lock_drop', fn_lock_drop)
reg('sfs_lock_test', fn_lock_test, true)
reg('sfs_lock_peek', fn_lock_peek, true)
reg('sfs_lock_renew', fn_lock_renew)
