/*
 * dump.c - a dump of the shared store (sfs_dump's reply: OK now seq
 * lastid T PARENTS STATES TOMBS, redis/lua/contract.lua's essay says every
 * field) read, and what its rows say set on the mirror's nodes: the one
 * place of the mirror that knows how a dump travels.  Loading
 * (redis/load.c) and the difference (redis/diff.c) see a dump as an
 * opaque struct dump_val, read through the functions here, and know no
 * hiredis.
 *
 * What it owns
 * ------------
 * Nothing that lasts.  A dump is the store's word, but each reader
 * checks the type of what it reads (a reply of another shape gives NULL
 * or false, never a crash), and a name is checked against this mount's
 * limits as a request's would be.
 *
 * Threads and locks
 * -----------------
 * The readers take no lock.  The setters run on the applying thread
 * and set what a row says with the core's own functions (engine.h:
 * node_set_meta, lease_load, tomb_load, tenant_set_drain), which take
 * the node's own locks.
 */
#include "store/engine.h"
#include "redis/mirror.h"

#include <errno.h>

#include <hiredis/hiredis.h>

/* Reading ------------------------------------------------------------------- */

/* The reply a dump value is (see dump_of). */
static const redisReply *reply_of(const struct dump_val *v)
{
	return (const redisReply *)v;
}

const struct dump_val *dump_of(const redisReply *rep)
{
	return (const struct dump_val *)rep;
}

size_t dump_len(const struct dump_val *v)
{
	const redisReply *r = reply_of(v);

	return r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
}

/* Field @name of a dump's K V array @v, or NULL; its length in *@len
 * (binary-safe: a state's data). */
const char *dump_kv_len(const struct dump_val *v, const char *name,
			size_t *len)
{
	const redisReply *r = reply_of(v);

	if (!r || r->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(r->element[i]->str, name) == 0 &&
		    r->element[i + 1]->type == REDIS_REPLY_STRING) {
			*len = r->element[i + 1]->len;
			return r->element[i + 1]->str;
		}
	return NULL;
}

/* The same without its length. */
const char *dump_kv(const struct dump_val *v, const char *name)
{
	size_t len;

	return dump_kv_len(v, name, &len);
}

bool dump_kvu(const struct dump_val *r, const char *name, uint64_t *v)
{
	return dec_u64(dump_kv(r, name), v);
}

/*
 * Is @name one this mount could show (1..max_name bytes, no '/', no
 * NUL, not a special file's leading '.')?  A dump is the store's word,
 * but it is checked against this mount's limits as a request would be:
 * a store written by another version, or by hand, must not make the
 * mirror hold what no path can name.
 */
bool dump_name_ok(const struct store *s, const char *name)
{
	size_t len = name ? strlen(name) : 0;

	return len > 0 && len <= store_limits(s)->max_name && name[0] != '.' &&
	       !strchr(name, '/');
}

/* An owner as the dump has it: ids that fit, a mode of 12 bits. */
bool dump_owner(const struct dump_val *r, struct store_owner *o)
{
	uint64_t uid, gid, mode;

	if (!dump_kvu(r, "uid", &uid) || !dump_kvu(r, "gid", &gid) || !dump_kvu(r, "mode", &mode))
		return false;
	if (uid > UINT32_MAX || gid > UINT32_MAX || mode > 07777)
		return false;
	o->uid = (uid_t)uid;
	o->gid = (gid_t)gid;
	o->mode = (mode_t)mode;
	return true;
}

/* The element of array @r at @i when it is an array (else NULL). */
const struct dump_val *dump_arr(const struct dump_val *v, size_t i)
{
	const redisReply *r = reply_of(v);

	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
	    r->element[i]->type != REDIS_REPLY_ARRAY)
		return NULL;
	return dump_of(r->element[i]);
}

const char *dump_str(const struct dump_val *v, size_t i)
{
	const redisReply *r = reply_of(v);

	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return NULL;
	if (r->element[i]->type == REDIS_REPLY_STRING ||
	    r->element[i]->type == REDIS_REPLY_STATUS)
		return r->element[i]->str;
	return NULL;
}

bool dump_u64(const struct dump_val *d, size_t i, uint64_t *v)
{
	const redisReply *r = reply_of(d);

	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return false;
	if (r->element[i]->type == REDIS_REPLY_INTEGER) {
		*v = (uint64_t)r->element[i]->integer;
		return r->element[i]->integer >= 0;
	}
	return dec_u64(dump_str(d, i), v);
}

/* Setting ------------------------------------------------------------------- */

/* Node @n's owner, mode and times as the dump has them (its lock taken
 * here): what a setgid directory gave it at its making may have been
 * changed since. */
void dump_times(struct store *s, struct store_node *n,
		const struct dump_val *r)
{
	struct store_owner o;
	int64_t a, mt, c;

	if (!dec_i64(dump_kv(r, "atime"), &a) || !dec_i64(dump_kv(r, "mtime"), &mt) ||
	    !dec_i64(dump_kv(r, "ctime"), &c) || !dump_owner(r, &o))
		return;
	node_set_meta(s, n, &o, a, mt, c);
}

/* @n's lease as the dump has it (ttl and deadline). */
int dump_lease(struct store *s, struct store_node *n, const struct dump_val *r)
{
	uint64_t ttl = 0, deadline = 0;

	dump_kvu(r, "ttl", &ttl);
	dump_kvu(r, "deadline", &deadline);
	return lease_load(s, n, ttl, deadline);
}

/* Tenant @t's tombstones from the dump's TOMBS array @tombs, by
 * deadline, so the store's queue stays in order. */
int dump_tombs(struct store *s, struct tenant *t, const struct dump_val *tombs)
{
	int rc = 0;

	for (size_t i = 0; i + 1 < dump_len(tombs) && rc == 0; i += 2) {
		const char *name = dump_str(tombs, i), *gd = dump_str(tombs, i + 1);
		unsigned long long g, d;

		if (!dump_name_ok(s, name) || !gd ||
		    sscanf(gd, "%llu %llu", &g, &d) != 2)
			return -EPROTO;
		rc = tomb_load(s, t, name, g, d);
	}
	return rc;
}

/* Tenant @t's drain as tenant row @T has it (its state and deadline). */
void dump_drain(struct store *s, struct tenant *t, const struct dump_val *T)
{
	const char *state = dump_kv(T, "state");
	enum store_state want = STORE_READY;
	uint64_t dd = 0;

	dump_kvu(T, "drain_deadline", &dd);
	if (state && strcmp(state, "draining") == 0)
		want = STORE_DRAINING;
	else if (state && strcmp(state, "ready") != 0)
		want = STORE_DRAINED;
	tenant_set_drain(s, t, want, dd);
}
