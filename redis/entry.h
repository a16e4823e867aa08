/*
 * entry.h - one entry of a shared store's log as a plain value: its
 * common fields parsed, the rest as name/value pairs.  What applies an
 * entry (redis/apply.c) reads this struct only and knows no hiredis: the
 * parse from the reply XREAD gives is redis/entry.c's, and an engine of
 * another transport would give the same struct from its own parser.
 *
 * Every field of a log entry is told by redis/lua/contract.lua's essay.
 * No lock: a value of the caller's.
 */
#ifndef STATEFS_REDIS_ENTRY_H
#define STATEFS_REDIS_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* More pairs than any entry of redis/lua/contract.lua carries. */
#define ENTRY_FIELDS_MAX 64

/* One field: its name and value, borrowed from what the entry was
 * parsed from (valid while it is); @len is the value's length in bytes
 * (binary-safe: a write's data). */
struct entry_field {
	const char *name, *value;
	size_t len;
};

/* One log entry, parsed: the common fields, and every field (the
 * common ones too) in the log's order. */
struct entry {
	uint64_t seq, nseq, ms;
	uint64_t gseq;                 /* its first number in the store's
					* order of all tenants; 0: none */
	int64_t ns;
	const char *op, *by;           /* by: "" when absent */
	size_t n;
	struct entry_field f[ENTRY_FIELDS_MAX];
	/* The decimals of values given as integers (an outcome's). */
	char num[ENTRY_FIELDS_MAX][24];
};

struct redisReply;

/* redis/entry.c */

/*
 * Parse the field array @fields of one stream entry (an XREAD reply's
 * FIELD VALUE... array) into @e, whose strings borrow from @fields.
 * A value may be an integer (a call's outcome gives its own entries so,
 * redis/own.c): @e keeps its decimal.
 * -EPROTO when it is not an array of strings in pairs, has more than
 * ENTRY_FIELDS_MAX pairs, or a common field is missing or malformed.
 */
int entry_parse(const struct redisReply *fields, struct entry *e);

/* The common fields of @e, whose pairs f[0..n) are set: -EPROTO when
 * one is missing or malformed (entry_parse ends with it). */
int entry_finish(struct entry *e);

/* The value of field @name of @e, or NULL; its length in *@len (when
 * @len is not NULL). */
const char *entry_get(const struct entry *e, const char *name, size_t *len);

/* The same without its length. */
const char *entry_str(const struct entry *e, const char *name);

/* Field @name of @e as a decimal into *@v; false when absent or
 * malformed. */
bool entry_u64(const struct entry *e, const char *name, uint64_t *v);

/* One stream entry of a tenant's log (0: the root log's) as read, by
 * its number in the store's order of all tenants. */
struct entry_ref {
	uint64_t gseq, tid;
	const struct redisReply *ent;
};

/* The gseq field of stream entry @ent (an ID and its fields): 0 when
 * it has none, or is not an entry. */
uint64_t entry_gseq(const struct redisReply *ent);

/* Sort @v[0..n) by gseq. */
void entry_refs_sort(struct entry_ref *v, size_t n);

/* Decimal @s into *@v; false when absent (NULL) or malformed. */
bool dec_u64(const char *s, uint64_t *v);
bool dec_i64(const char *s, int64_t *v);

#endif /* STATEFS_REDIS_ENTRY_H */
