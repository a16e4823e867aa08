/*
 * statefs_lua.h - the shared store's Redis Functions library (the .lua
 * parts of redis/lua/; the first, contract.lua, opens with the essay that
 * is its contract), built into the program: the Makefile joins the parts,
 * in the order of LUA_SRC, into build/gen/statefs.lua and turns that into
 * build/gen/statefs_lua.c, so a mount installs exactly the library its
 * code was written against.
 */
#ifndef STATEFS_STATEFS_LUA_H
#define STATEFS_STATEFS_LUA_H

#include <stddef.h>

/* The library's text, as FUNCTION LOAD takes it, followed by a NUL. */
extern const char store_statefs_lua[];

/* Its length in bytes, the NUL not counted. */
extern const size_t store_statefs_lua_len;

#endif /* STATEFS_STATEFS_LUA_H */
