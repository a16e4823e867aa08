-- bucket.lua - a bucket's links and the state's side of them
-- (store/bucket.c).
--
-- A parent's bucket, P:{P.tTID}:l:PINO, maps each child name to the
-- state it reaches (SINO); each state lists the links that reach it
-- (field links, "PINO/NAME" separated by spaces, newest first) and
-- counts them (nlink).  A link is added or taken in both at once, so a
-- state always finds its links and counts exactly them (state_links
-- checks it: a difference is damage).  A state ends with its last link
-- (state_end): its content's bytes, its lease and its place in the
-- gauges go with it, in the call that took the link.

-- State @S's last link went: account its end (@expiry: as an expiry, else
-- a removal) and delete it.
local function state_end(ctx, T, S, expiry)
	gauge(ctx, T, 'bytes', -data_len(S))
	gauge(ctx, T, 'children', -1)
	add(ctx.M, expiry and 'expiries' or 'removals', 1)
	if num(S, 'deadline') > 0 then wr(ctx, 'zset', 'ZREM', tkey(T, 'due'), 's:' .. S.ino) end
	rec_drop(S)
end

-- The links of @S, newest first, as "PINO/NAME" (the order the embedded
-- store reports them in: a new link goes to the front of its list);
-- with @counted, as many as its nlink, else damage.
local function state_links(S, counted)
	local all = TX.links(str(S, 'links'), S.key)
	if counted and #all ~= num(S, 'nlink') then damaged(S.key) end
	return all
end

-- Take @member, one of them, out of @S's links (its link count is the
-- caller's).
local function links_del(S, member)
	local rest, all = {}, state_links(S)
	for _, m in ipairs(all) do
		if m ~= member then rest[#rest + 1] = m end
	end
	if #rest ~= #all - 1 then damaged(S.key) end
	set(S, 'links', table.concat(rest, ' '))
end

-- State @S loses link @member ("PINO/NAME"); ends when it was the last
-- (state_unlink_locked).  Returns true then.
local function state_unlink(ctx, T, S, member, expiry)
	state_links(S, true)
	links_del(S, member)
	add(S, 'nlink', -1)
	if num(S, 'nlink') == 0 then
		state_end(ctx, T, S, expiry)
		return true
	end
	set(S, 'ctime', ctx.ns)
	return false
end

-- Add link @member to @S's links, as its newest.
local function state_link(S, member)
	local l = str(S, 'links')
	set(S, 'links', l == '' and member or member .. ' ' .. l)
end

-- The .events lines of @S's links: "PARENT/CHILD" each, newest link first.
local function link_lines(ctx, T, S)
	local lines = {}
	for _, m in ipairs(state_links(S, true)) do
		local pino, name = split(m)
		lines[#lines + 1] = str(parent_named(ctx, T, pino), 'name') .. '/' .. name
	end
	return lines
end

-- Insert link @name -> @S into @P (link_insert_locked and the state
-- side, unless @S was made with it).
local function link_insert(ctx, T, P, name, S, made)
	mset(bucket(ctx, T, P.ino), name, S.ino)
	if not made then state_link(S, P.ino .. '/' .. name) end
	add(P, 'links', 1)
	touch(ctx, P)
	gauge(ctx, T, 'links', 1)
end
