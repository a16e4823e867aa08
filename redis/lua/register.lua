-- register.lua - the registration, last in the library: every function
-- under its FCALL name, the read-only ones flagged no-writes, each
-- guarded so that damage (base.lua) is outcome EDAMAGED, not an error.

-- A call that finds damage answers EDAMAGED KEY (see "Damage", in
-- base.lua), having written nothing; any other error is a bug and stays
-- an error.
local function guarded(fn)
	return function(keys, args)
		cur_ctx = nil
		local good, out = pcall(fn, keys, args)
		if good then return out end
		if type(out) == 'table' and out.damaged then
			return { 'EDAMAGED', cur_ctx and cur_ctx.now or 0, 0, out.damaged }
		end
		error(out, 0)
	end
end

local function reg(name, fn, ro)
	redis.register_function{ function_name = name, callback = guarded(fn),
		flags = ro and { 'no-writes' } or {} }
end

reg('sfs_version', fn_version, true)
reg('sfs_fence', fn_fence)
reg('sfs_init', fn_init)
reg('sfs_mkdir_tenant', fn_mkdir_tenant)
reg('sfs_rmdir_tenant', fn_rmdir_tenant)
reg('sfs_tenant_make', TL.fn_tenant_make)
reg('sfs_tenant_unlist', TL.fn_tenant_unlist)
reg('sfs_drain_store', TL.fn_drain_store)
reg('sfs_clock_set', TL.fn_clock_set)
reg('sfs_join', fn_join)
reg('sfs_leave', fn_leave)
reg('sfs_depart', fn_depart)
reg('sfs_create', fn_create)
reg('sfs_unlink', fn_unlink)
reg('sfs_link', fn_link)
reg('sfs_rename', fn_rename)
reg('sfs_publish', fn_publish)
reg('sfs_setattr', fn_setattr)
reg('sfs_set_ttl', fn_set_ttl)
reg('sfs_set_child_ttl', fn_set_child_ttl)
reg('sfs_renew', fn_renew)
reg('sfs_expire', fn_expire)
reg('sfs_drain', fn_drain)
reg('sfs_drain_now', fn_drain_now)
reg('sfs_clock_advance', fn_clock_advance)
reg('sfs_dump', fn_dump, true)
reg('sfs_stats', fn_stats, true)
reg('sfs_sync', fn_sync, true)
