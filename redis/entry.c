/*
 * entry.c - a log entry of the shared store parsed from the reply XREAD
 * gives (a stream entry's FIELD VALUE... array) into a plain struct
 * entry (redis/entry.h), and its fields read: the one place of the
 * mirror that knows how an entry travels.  redis/apply.c applies the
 * struct; the follower (redis/follow.c) parses each entry it reads.
 *
 * It owns nothing and takes no lock: an entry borrows the reply's
 * strings and is the caller's, valid while the reply is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/entry.h"

const char *entry_get(const struct entry *e, const char *name, size_t *len)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->f[i].name, name) == 0) {
			if (len)
				*len = e->f[i].len;
			return e->f[i].value;
		}
	return NULL;
}

const char *entry_str(const struct entry *e, const char *name)
{
	return entry_get(e, name, NULL);
}

bool dec_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

bool dec_i64(const char *s, int64_t *v)
{
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0';
}

bool entry_u64(const struct entry *e, const char *name, uint64_t *v)
{
	return dec_u64(entry_str(e, name), v);
}

int entry_parse(const redisReply *fields, struct entry *e)
{
	memset(e, 0, sizeof(*e));
	if (!fields || fields->type != REDIS_REPLY_ARRAY || fields->elements % 2 ||
	    fields->elements / 2 > ENTRY_FIELDS_MAX)
		return -EPROTO;
	for (size_t i = 0; i < fields->elements; i++)
		if (fields->element[i]->type != REDIS_REPLY_STRING)
			return -EPROTO;
	for (size_t i = 0; i + 1 < fields->elements; i += 2) {
		e->f[e->n].name = fields->element[i]->str;
		e->f[e->n].value = fields->element[i + 1]->str;
		e->f[e->n].len = fields->element[i + 1]->len;
		e->n++;
	}
	e->op = entry_str(e, "op");
	e->by = entry_str(e, "by");
	if (!e->by)
		e->by = "";
	if (!e->op || !entry_u64(e, "seq", &e->seq) || !entry_u64(e, "ms", &e->ms) ||
	    !dec_i64(entry_str(e, "ns"), &e->ns))
		return -EPROTO;
	if (!entry_u64(e, "nseq", &e->nseq))
		e->nseq = 1;
	if (!entry_u64(e, "gseq", &e->gseq))
		e->gseq = 0; /* no order of all tenants (a cluster's) */
	return 0;
}
