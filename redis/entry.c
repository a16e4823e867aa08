/*
 * entry.c - a log entry of the shared store parsed from the reply XREAD
 * gives (a stream entry's FIELD VALUE... array) into a plain struct
 * entry (redis/entry.h) (or from a call's outcome, which gives its own
 * entries with numbers as integers: redis/own.c), its fields read, and its place in the store's
 * order of all tenants (gseq), by which the follower merges the logs it
 * read: the one place of the mirror that knows how an entry travels.  redis/apply.c applies the
 * struct; the follower (redis/follow.c) parses each entry it reads.
 *
 * It owns nothing and takes no lock: an entry borrows the reply's
 * strings and is the caller's, valid while the reply is.
 */
#include <errno.h>
#include <stdio.h>
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
		if (fields->element[i]->type != REDIS_REPLY_STRING &&
		    (i % 2 == 0 || fields->element[i]->type != REDIS_REPLY_INTEGER))
			return -EPROTO;
	for (size_t i = 0; i + 1 < fields->elements; i += 2) {
		const redisReply *v = fields->element[i + 1];

		e->f[e->n].name = fields->element[i]->str;
		if (v->type == REDIS_REPLY_INTEGER) {
			/* A number a call's outcome gave (redis/own.c): the
			 * decimal the log holds for it. */
			snprintf(e->num[e->n], sizeof(e->num[e->n]), "%lld",
				 v->integer);
			e->f[e->n].value = e->num[e->n];
			e->f[e->n].len = strlen(e->num[e->n]);
		} else {
			e->f[e->n].value = v->str;
			e->f[e->n].len = v->len;
		}
		e->n++;
	}
	return entry_finish(e);
}

int entry_finish(struct entry *e)
{
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

uint64_t entry_gseq(const redisReply *ent)
{
	const redisReply *f;
	uint64_t v;

	if (ent->type != REDIS_REPLY_ARRAY || ent->elements != 2 ||
	    (f = ent->element[1])->type != REDIS_REPLY_ARRAY)
		return 0;
	for (size_t i = 0; i + 1 < f->elements; i += 2)
		if (f->element[i]->type == REDIS_REPLY_STRING &&
		    f->element[i + 1]->type == REDIS_REPLY_STRING &&
		    strcmp(f->element[i]->str, "gseq") == 0)
			return dec_u64(f->element[i + 1]->str, &v) ? v : 0;
	return 0;
}

static int by_gseq(const void *a, const void *b)
{
	const struct entry_ref *x = a, *y = b;

	return x->gseq < y->gseq ? -1 : x->gseq > y->gseq;
}

void entry_refs_sort(struct entry_ref *v, size_t n)
{
	qsort(v, n, sizeof(*v), by_gseq);
}
