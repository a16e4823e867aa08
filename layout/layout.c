/*
 * layout.c - the user-visible shape of statefs: which names are valid,
 * which special files exist at which depth, the text of .stats and
 * .depart, and the statefs mount options.
 *
 * Owns two constant tables and nothing else: the special files and the
 * mount options.  Every function is pure (no locks, no state), so fs/ can
 * call any of them with or without store locks held, and the unit test
 * drives them directly.
 *
 * Adding a special file is one row in specials[] and its slot in
 * layout.h here, and, in fs/special.c, a case for what its open file
 * does (its text, or what a write to it starts); adding an option is one
 * row in options[] (parsing, range check, layout_limits_check and --help
 * all read the same row, and fs/main.c hands an adapter's option to fs/).
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "layout/layout.h"
#include "lib/text.h"

/* Names ------------------------------------------------------------------ */

/*
 * The rules of layout_name_check over @len bytes that need not be
 * NUL-terminated (a .depart write), so an embedded NUL is just another
 * control byte.  @dot_ok: a leading '.' is allowed ("." and ".." never).
 */
static int name_check_bytes(const char *name, size_t len, size_t max_name,
			    bool dot_ok)
{
	if (len == 0)
		return -EINVAL;
	if (len > max_name)
		return -ENAMETOOLONG;
	if (name[0] == '.' &&
	    (!dot_ok || len == 1 || (len == 2 && name[1] == '.')))
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		/* Bytes >= 0x80 pass: UTF-8 names are fine, and white space
		 * beyond ASCII does not break awk/cut field splitting. */
		if (c <= ' ' || c == 0x7f || c == '/')
			return -EINVAL;
	}
	return 0;
}

/*
 * A node's name: name_check_bytes's rules, and not "-", which .events and
 * .snapshot write in a field that does not apply (a tenant's line has
 * "-" for its parent and child), so that no line can be read two ways.
 */
static int node_name_check(const char *name, size_t len, size_t max_name,
			   bool dot_ok)
{
	int rc = name_check_bytes(name, len, max_name, dot_ok);

	if (rc == 0 && len == 1 && name[0] == '-')
		rc = -EINVAL;
	return rc;
}

int layout_name_check(const char *name, size_t max_name, int depth)
{
	return node_name_check(name, strlen(name), max_name,
			       depth == LAYOUT_CHILD);
}

/* Special files ---------------------------------------------------------- */

/* Listing order is table order. */
static const struct layout_special specials[] = {
	{ ".stats", LAYOUT_SLOT_STATS, LAYOUT_SCOPE_ROOT | LAYOUT_SCOPE_TENANT,
	  S_IFREG | 0444 },
	{ ".depart", LAYOUT_SLOT_DEPART, LAYOUT_SCOPE_TENANT, S_IFREG | 0200 },
	{ ".events", LAYOUT_SLOT_EVENTS, LAYOUT_SCOPE_ROOT | LAYOUT_SCOPE_TENANT,
	  S_IFREG | 0444 },
	{ ".clock", LAYOUT_SLOT_CLOCK, LAYOUT_SCOPE_ROOT, S_IFREG | 0644 },
	{ ".snapshot", LAYOUT_SLOT_SNAPSHOT, LAYOUT_SCOPE_ROOT | LAYOUT_SCOPE_TENANT,
	  S_IFREG | 0444 },
	{ ".drain", LAYOUT_SLOT_DRAIN, LAYOUT_SCOPE_ROOT | LAYOUT_SCOPE_TENANT,
	  S_IFREG | 0644 },
};

#define NSPECIALS (sizeof(specials) / sizeof(specials[0]))

/* Slots index the store's per-directory inode slots. */
_Static_assert(NSPECIALS <= STORE_NSPECIAL, "more special files than slots");

/* The scope bit of a directory depth; 0 where no special file lives. */
static unsigned depth_scope(int dir_depth)
{
	switch (dir_depth) {
	case LAYOUT_ROOT:
		return LAYOUT_SCOPE_ROOT;
	case LAYOUT_TENANT:
		return LAYOUT_SCOPE_TENANT;
	default:
		return 0;
	}
}

const struct layout_special *layout_special_find(const char *name,
						 int dir_depth)
{
	unsigned scope = depth_scope(dir_depth);

	for (size_t i = 0; i < NSPECIALS; i++)
		if ((specials[i].scope & scope) &&
		    strcmp(specials[i].name, name) == 0)
			return &specials[i];
	return NULL;
}

const struct layout_special *layout_special_slot(int slot)
{
	for (size_t i = 0; i < NSPECIALS; i++)
		if (specials[i].slot == slot)
			return &specials[i];
	return NULL;
}

const struct layout_special *layout_special_nth(int dir_depth, size_t i)
{
	unsigned scope = depth_scope(dir_depth);

	for (size_t k = 0; k < NSPECIALS; k++)
		if ((specials[k].scope & scope) && i-- == 0)
			return &specials[k];
	return NULL;
}

/* Contract in layout.h.  @name is written only on success. */
int layout_parse_depart(const char *buf, size_t len, size_t max_name,
			char *name, size_t cap)
{
	int rc;

	/* `echo P > .depart` writes "P\n"; printf '%s' writes "P". */
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	rc = node_name_check(buf, len, max_name, false);
	if (rc < 0)
		return rc;
	if (len >= cap)
		return -ENAMETOOLONG;
	memcpy(name, buf, len);
	name[len] = '\0';
	return 0;
}

/* Copy a control value into a NUL-terminated buffer, dropping one
 * trailing newline.  -EINVAL when it does not fit or holds a NUL. */
static int control_value(const char *buf, size_t len, char *out, size_t cap)
{
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len == 0 || len >= cap || memchr(buf, '\0', len))
		return -EINVAL;
	memcpy(out, buf, len);
	out[len] = '\0';
	return 0;
}

int layout_parse_control_ms(const char *buf, size_t len, uint64_t *ms)
{
	char v[32];
	uint64_t x;
	int rc = control_value(buf, len, v, sizeof(v));

	if (rc == 0)
		rc = layout_parse_u64(v, &x);
	if (rc == 0 && x > STORE_DURATION_MAX_MS)
		rc = -EINVAL;
	if (rc == 0)
		*ms = x;
	return rc;
}

int layout_parse_seconds_value(const char *buf, size_t len, uint64_t *ms)
{
	char v[32];
	int rc = control_value(buf, len, v, sizeof(v));

	return rc ? rc : layout_parse_seconds(v, ms);
}

size_t layout_format_seconds(char *buf, size_t cap, uint64_t ms)
{
	uint64_t frac = ms % 1000;
	int n;

	if (frac == 0)
		n = snprintf(buf, cap, "%" PRIu64, ms / 1000);
	else if (frac % 100 == 0)
		n = snprintf(buf, cap, "%" PRIu64 ".%" PRIu64, ms / 1000, frac / 100);
	else if (frac % 10 == 0)
		n = snprintf(buf, cap, "%" PRIu64 ".%02" PRIu64, ms / 1000, frac / 10);
	else
		n = snprintf(buf, cap, "%" PRIu64 ".%03" PRIu64, ms / 1000, frac);
	return n > 0 ? (size_t)n : 0;
}

/* .snapshot and .drain -------------------------------------------------------- */

const char layout_snapshot_header[] =
	"kind\ttenant\tparent\tchild\tgeneration\tversion\tsize\tnlink\t"
	"ttl_ms_left\tinode\n";

static const char *const snap_kinds[] = {
	[STORE_SNAP_TENANT] = "tenant",
	[STORE_SNAP_PARENT] = "parent",
	[STORE_SNAP_CHILD] = "child",
	[STORE_SNAP_TOMBSTONE] = "tombstone",
};

/* A snapshot field: "-" where it does not apply. */
static const char *snap_str(const char *s)
{
	return s && *s ? s : "-";
}

static const char *snap_num(char *buf, size_t cap, int64_t v)
{
	if (v < 0)
		return "-";
	snprintf(buf, cap, "%" PRId64, v);
	return buf;
}

size_t layout_format_snapshot_row(char *buf, size_t cap,
				  const struct store_snap_row *r)
{
	char g[24], v[24], sz[24], nl[24], ttl[24], ino[24];
	int n = snprintf(buf, cap, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			 snap_kinds[r->kind], snap_str(r->tenant),
			 snap_str(r->parent), snap_str(r->child),
			 snap_num(g, sizeof(g), r->generation),
			 snap_num(v, sizeof(v), r->version),
			 snap_num(sz, sizeof(sz), r->size),
			 snap_num(nl, sizeof(nl), r->nlink),
			 snap_num(ttl, sizeof(ttl), r->ttl_ms_left),
			 snap_num(ino, sizeof(ino), r->ino));

	return n > 0 ? (size_t)n : 0;
}

size_t layout_format_snapshot_seq(char *buf, size_t cap, int64_t seq)
{
	char v[24];
	int n = snprintf(buf, cap, "seq\t%s\t-\t-\t-\t-\t-\t-\t-\t-\n",
			 snap_num(v, sizeof(v), seq));

	return n > 0 ? (size_t)n : 0;
}

size_t layout_format_drain(char *buf, size_t cap, enum store_state st,
			   uint64_t ms_left)
{
	int n;

	if (st == STORE_DRAINING)
		n = snprintf(buf, cap, "draining %" PRIu64 "\n", ms_left);
	else
		n = snprintf(buf, cap, "%s\n", layout_state_name(st));
	return n > 0 ? (size_t)n : 0;
}

/* .stats ------------------------------------------------------------------ */

static void put_u64(struct text *t, const char *key, uint64_t v)
{
	text_put(t, "%s %" PRIu64 "\n", key, v);
}

/* Named in enum store_refusal order. */
static const char *const refusal_names[] = {
	[STORE_REFUSED_CAPACITY] = "refused_capacity",
	[STORE_REFUSED_QUOTA] = "refused_quota",
	[STORE_REFUSED_PAYLOAD] = "refused_payload",
	[STORE_REFUSED_DRAINING] = "refused_draining",
	[STORE_REFUSED_EXISTS] = "refused_exists",
	[STORE_REFUSED_STALE] = "refused_stale",
	[STORE_REFUSED_CONFLICT] = "refused_conflict",
	[STORE_REFUSED_GONE] = "refused_gone",
};

_Static_assert(sizeof(refusal_names) / sizeof(refusal_names[0]) ==
		       STORE_NREFUSAL,
	       "every store_refusal needs a .stats key");

/* A tenant's shares, as the store keeps them (0: no share). */
static void put_tenant_shares(struct text *t, const struct store_limits *l)
{
	put_u64(t, "tenant_max_parents", l->tenant_max_parents);
	put_u64(t, "tenant_max_children", l->tenant_max_children);
	put_u64(t, "tenant_max_bytes", l->tenant_max_bytes);
	put_u64(t, "tenant_max_tombstones", l->tenant_max_tombstones);
}

size_t layout_format_stats(char *buf, size_t cap,
			   const struct layout_stats_view *v)
{
	struct text t = text_start(buf, cap);
	const struct store_stats *s = &v->stats;
	const struct store_limits *l = v->limits;

	text_put(&t, "instance %016" PRIx64 "\n", v->instance);
	if (!v->tenant)
		put_u64(&t, "pid", v->pid); /* whom to send SIGTERM */
	text_put(&t, "state %s\n", layout_state_name(v->state));
	text_put(&t, "store %s\n", v->link == STORE_LINK_CONNECTED ? "connected" :
	    v->link == STORE_LINK_DISCONNECTED ? "disconnected" : "embedded");
	if (v->link != STORE_LINK_EMBEDDED) {
		put_u64(&t, "store_damaged", s->damaged);
		/* This mount's, of a shared store (the kernel keeps the
		 * embedded store's). */
		put_u64(&t, "locks_held", s->locks_held);
		put_u64(&t, "lock_waiters", s->lock_waiters);
	}
	put_u64(&t, "uptime_ms", v->uptime_ms);
	if (v->tenant)
		text_put(&t, "tenant %s\n", v->tenant);

	put_u64(&t, "tenants", s->tenants);
	put_u64(&t, "parents", s->parents);
	put_u64(&t, "children", s->children);
	put_u64(&t, "links", s->links);
	put_u64(&t, "tombstones", s->tombstones);
	put_u64(&t, "bytes", s->bytes);
	put_u64(&t, "staged_bytes", s->staged_bytes);
	if (!v->tenant)
		put_u64(&t, "snapshot_bytes", s->snapshot_bytes);

	if (!v->tenant) {
		put_u64(&t, "max_tenants", l->max_tenants);
		put_u64(&t, "max_parents", l->max_parents);
		put_u64(&t, "max_children", l->max_children);
		put_u64(&t, "max_bytes", l->max_bytes);
		put_u64(&t, "max_payload", l->max_payload);
		put_u64(&t, "max_name", l->max_name);
		put_u64(&t, "max_tombstones", l->max_tombstones);
		put_u64(&t, "tombstone_ttl_ms", l->tombstone_ttl_ms);
		put_u64(&t, "parent_quota", l->parent_quota);
		put_u64(&t, "tenant_quota", l->tenant_quota);
		put_tenant_shares(&t, l);
		put_u64(&t, "max_snapshot_bytes", l->max_snapshot_bytes);
		put_u64(&t, "user_max_snapshot_bytes",
			l->user_max_snapshot_bytes);
		put_u64(&t, "default_ttl_ms", l->default_ttl_ms);
		put_u64(&t, "drain_window_ms", l->drain_window_ms);
	} else {
		/* What bounds this tenant's own entries and content. */
		put_u64(&t, "parent_quota", l->parent_quota);
		put_u64(&t, "tenant_quota", l->tenant_quota);
		put_tenant_shares(&t, l);
		put_u64(&t, "max_payload", l->max_payload);
		put_u64(&t, "max_name", l->max_name);
	}

	put_u64(&t, "admissions", s->admissions);
	put_u64(&t, "removals", s->removals);
	put_u64(&t, "expiries", s->expiries);
	put_u64(&t, "joins", s->joins);
	put_u64(&t, "leaves", s->leaves);
	for (int r = 0; r < STORE_NREFUSAL; r++)
		put_u64(&t, refusal_names[r], s->refused[r]);

	return t.len;
}

const char *layout_state_name(enum store_state st)
{
	switch (st) {
	case STORE_READY:
		return "ready";
	case STORE_DRAINING:
		return "draining";
	case STORE_DRAINED:
		return "drained";
	}
	return "unknown";
}

/* Options ---------------------------------------------------------------- */

enum opt_type {
	OPT_NUMBER,  /* a whole number, stored as is */
	OPT_SECONDS, /* seconds with up to 3 decimals, stored in ms */
	OPT_FLAG,    /* bare flag, a bool */
};

struct option_def {
	const char *key;
	enum opt_type type;
	size_t off;          /* of the field in struct store_limits, or in
			      * struct layout_mount when mount is set */
	bool mount;          /* the adapter's option, not the store's */
	uint64_t min, max;   /* accepted range, in the stored unit */
	const char *expect;  /* what a good value is, for messages */
	const char *meaning; /* for --help */
};

/* A row's field: off and mount. */
#define LIM(f) offsetof(struct store_limits, f), false
#define MNT(f) offsetof(struct layout_mount, f), true
/* STORE_DURATION_MAX_MS in seconds, as messages and --help write it. */
#define MAX_SECONDS "1000000000"
_Static_assert(STORE_DURATION_MAX_MS == 1000000000ULL * 1000,
	       "MAX_SECONDS is STORE_DURATION_MAX_MS in seconds");
/* One child's content is held in memory and copied per publication. */
#define PAYLOAD_CEILING (16u << 20)

static const struct option_def options[] = {
	{ "max_tenants", OPT_NUMBER, LIM(max_tenants), 1, UINT64_MAX,
	  "a whole number >= 1", "most tenants in the store" },
	{ "max_parents", OPT_NUMBER, LIM(max_parents), 1, UINT64_MAX,
	  "a whole number >= 1", "most parents in the store" },
	{ "max_children", OPT_NUMBER, LIM(max_children), 1, UINT64_MAX,
	  "a whole number >= 1", "most children (states) in the store" },
	{ "max_bytes", OPT_NUMBER, LIM(max_bytes), 1, UINT64_MAX,
	  "a whole number >= 1", "most content bytes in the store" },
	{ "max_payload", OPT_NUMBER, LIM(max_payload), 1, PAYLOAD_CEILING,
	  "a whole number from 1 to 16777216",
	  "most content bytes in one child (at most 16 MiB)" },
	{ "max_name", OPT_NUMBER, LIM(max_name), 1, NAME_MAX,
	  "a whole number from 1 to 255", "most bytes in one name" },
	{ "max_tombstones", OPT_NUMBER, LIM(max_tombstones), 1, UINT64_MAX,
	  "a whole number >= 1", "most departed tombstones kept" },
	/* A tombstone that aged out at once would guard nothing. */
	{ "tombstone_ttl", OPT_SECONDS, LIM(tombstone_ttl_ms), 1,
	  STORE_DURATION_MAX_MS, "seconds from 0.001 to " MAX_SECONDS
	  ", at most 3 decimals", "seconds a departed tombstone is kept" },
	{ "parent_quota", OPT_NUMBER, LIM(parent_quota), 0, UINT64_MAX,
	  "a whole number, 0 = no quota",
	  "most entries in one parent, 0 = no quota" },
	{ "tenant_quota", OPT_NUMBER, LIM(tenant_quota), 0, UINT64_MAX,
	  "a whole number, 0 = no quota",
	  "most entries in one tenant, 0 = no quota" },
	/* UINT64_MAX is STORE_SHARE_AUTO, the default: not a number to
	 * give. */
	{ "tenant_max_parents", OPT_NUMBER, LIM(tenant_max_parents), 0,
	  UINT64_MAX - 1, "a whole number, at most max_parents, 0 = no share",
	  "most parents in one tenant, 0 = no share" },
	{ "tenant_max_children", OPT_NUMBER, LIM(tenant_max_children), 0,
	  UINT64_MAX - 1, "a whole number, at most max_children, 0 = no share",
	  "most children (states) in one tenant, 0 = no share" },
	{ "tenant_max_bytes", OPT_NUMBER, LIM(tenant_max_bytes), 0,
	  UINT64_MAX - 1, "a whole number, at most max_bytes, 0 = no share",
	  "most content bytes in one tenant, 0 = no share" },
	{ "tenant_max_tombstones", OPT_NUMBER, LIM(tenant_max_tombstones), 0,
	  UINT64_MAX - 1,
	  "a whole number, at most max_tombstones, 0 = no share",
	  "most departed tombstones in one tenant, 0 = no share" },
	{ "max_snapshot_bytes", OPT_NUMBER, LIM(max_snapshot_bytes), 1,
	  UINT64_MAX, "a whole number >= 1",
	  "most bytes open .snapshot files hold" },
	{ "user_max_snapshot_bytes", OPT_NUMBER, LIM(user_max_snapshot_bytes),
	  0, UINT64_MAX - 1,
	  "a whole number, at most max_snapshot_bytes, 0 = no share",
	  "most bytes one user's open .snapshot files hold, 0 = no share" },
	{ "default_ttl", OPT_SECONDS, LIM(default_ttl_ms), 0,
	  STORE_DURATION_MAX_MS, "seconds from 0 to " MAX_SECONDS
	  ", at most 3 decimals, 0 = none",
	  "seconds a new child lives unless renewed, 0 = none" },
	{ "drain_window", OPT_SECONDS, LIM(drain_window_ms), 0,
	  STORE_DURATION_MAX_MS, "seconds from 0 to " MAX_SECONDS
	  ", at most 3 decimals",
	  "seconds existing children stay writable in a drain" },
	{ "cache_timeout", OPT_SECONDS, MNT(cache_timeout_ms), 0,
	  STORE_DURATION_MAX_MS, "seconds from 0 to " MAX_SECONDS
	  ", at most 3 decimals, 0 = none",
	  "seconds the kernel may cache names and attributes" },
	{ "testclock", OPT_FLAG, LIM(testclock), 0, 0,
	  "a bare flag, it takes no value",
	  "manual clock, advanced by writing ms to MNT/.clock" },
};

#define NOPTIONS (sizeof(options) / sizeof(options[0]))

/* The value of @o in @base: a struct store_limits, or a struct
 * layout_mount for an adapter's option. */
static uint64_t field_get(const void *base, const struct option_def *o)
{
	return *(const uint64_t *)((const char *)base + o->off);
}

static const struct option_def *option_named(const char *key, size_t klen)
{
	for (size_t i = 0; i < NOPTIONS; i++)
		if (strlen(options[i].key) == klen &&
		    memcmp(options[i].key, key, klen) == 0)
			return &options[i];
	return NULL;
}

/*
 * A tenant's (or a user's) share is a share of a ceiling, which it must
 * not exceed; STORE_SHARE_AUTO, its default, is half of that ceiling.
 */
static const struct {
	const char *share, *ceiling;
} shares[] = {
	{ "tenant_max_parents", "max_parents" },
	{ "tenant_max_children", "max_children" },
	{ "tenant_max_bytes", "max_bytes" },
	{ "tenant_max_tombstones", "max_tombstones" },
	{ "user_max_snapshot_bytes", "max_snapshot_bytes" },
};

/* The ceiling @o is a tenant's share of, or NULL. */
static const struct option_def *share_ceiling(const struct option_def *o)
{
	for (size_t i = 0; i < sizeof(shares) / sizeof(shares[0]); i++)
		if (strcmp(shares[i].share, o->key) == 0)
			return option_named(shares[i].ceiling,
					    strlen(shares[i].ceiling));
	return NULL;
}

/* @ms as seconds, the way a user writes them: "600", "1.5", "0.001". */
static void fmt_seconds(char *b, size_t n, uint64_t ms)
{
	if (ms % 1000 == 0) {
		snprintf(b, n, "%" PRIu64, ms / 1000);
		return;
	}
	snprintf(b, n, "%" PRIu64 ".%03" PRIu64, ms / 1000, ms % 1000);
	for (char *end = b + strlen(b) - 1; *end == '0'; end--)
		*end = '\0';
}

/* The stored value of @o in @l as the user would write it. */
static void fmt_value(char *b, size_t n, const void *l,
		      const struct option_def *o)
{
	if (o->type == OPT_SECONDS)
		fmt_seconds(b, n, field_get(l, o));
	else
		snprintf(b, n, "%" PRIu64, field_get(l, o));
}

/*
 * "statefs: bad value for -o KEY: 'VALUE' (EXPECT)" into @err.  The value
 * comes from the command line, so control bytes in it are masked to keep
 * the message on one line.
 */
static int bad_value(char *err, size_t errlen, const char *key,
		     const char *value, const char *expect)
{
	if (errlen == 0)
		return -EINVAL;
	snprintf(err, errlen, "statefs: bad value for -o %s: '%s' (%s)", key,
		 value, expect);
	for (char *c = err; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = '?';
	return -EINVAL;
}

/*
 * Apply @opt to @l (the store's options, @mount false) or to a struct
 * layout_mount (the adapter's, @mount true): layout_option() and
 * layout_mount_option().  @l is written only on success, so a refused
 * option leaves it as it was; @err may be NULL when @errlen is 0.
 */
static int option_apply(void *l, bool mount, const char *opt, char *err,
			size_t errlen)
{
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	const struct option_def *o = option_named(opt, klen);
	uint64_t v;
	int rc;

	/* FUSE's, the other struct's, or unknown: not ours to judge. */
	if (!o || o->mount != mount)
		return 0;

	if (o->type == OPT_FLAG) {
		if (eq)
			return bad_value(err, errlen, o->key, eq + 1,
					 o->expect);
		*(bool *)((char *)l + o->off) = true;
		return 1;
	}

	if (!eq) {
		if (errlen > 0)
			snprintf(err, errlen, "statefs: -o %s needs a value (%s)",
				 o->key, o->expect);
		return -EINVAL;
	}
	if (o->type == OPT_SECONDS)
		rc = layout_parse_seconds(eq + 1, &v);
	else
		rc = layout_parse_u64(eq + 1, &v);
	if (rc < 0 || v < o->min || v > o->max)
		return bad_value(err, errlen, o->key, eq + 1, o->expect);
	*(uint64_t *)((char *)l + o->off) = v;
	return 1;
}

int layout_option(struct store_limits *l, const char *opt, char *err,
		  size_t errlen)
{
	return option_apply(l, false, opt, err, errlen);
}

void layout_mount_default(struct layout_mount *m)
{
	memset(m, 0, sizeof(*m));
	m->cache_timeout_ms = 3600 * 1000;
}

int layout_mount_option(struct layout_mount *m, const char *opt, char *err,
			size_t errlen)
{
	return option_apply(m, true, opt, err, errlen);
}

int layout_limits_check(const struct store_limits *l, char *err,
			size_t errlen)
{
	char value[32];

	/* The same ranges as layout_option, for limits built in code. */
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct option_def *o = &options[i], *ceiling;
		uint64_t v;

		if (o->type == OPT_FLAG || o->mount)
			continue;
		v = field_get(l, o);
		ceiling = share_ceiling(o);
		if (ceiling && v == STORE_SHARE_AUTO)
			continue;
		if (v < o->min || v > o->max) {
			fmt_value(value, sizeof(value), l, o);
			return bad_value(err, errlen, o->key, value, o->expect);
		}
		if (ceiling && v > field_get(l, ceiling)) {
			char expect[80];

			fmt_value(value, sizeof(value), l, o);
			snprintf(expect, sizeof(expect), "at most %s, %" PRIu64,
				 ceiling->key, field_get(l, ceiling));
			return bad_value(err, errlen, o->key, value, expect);
		}
	}
	if (l->max_payload > l->max_bytes) {
		char expect[64];

		snprintf(value, sizeof(value), "%" PRIu64, l->max_payload);
		snprintf(expect, sizeof(expect), "at most max_bytes, %" PRIu64,
			 l->max_bytes);
		return bad_value(err, errlen, "max_payload", value, expect);
	}
	return 0;
}

/*
 * How @o is written on a command line ("max_tenants=N") into @spec, and
 * its default as the user would write it into @value: what --help and
 * the man page both show.  @def holds the defaults: a struct
 * store_limits, or a struct layout_mount for the adapter's options.
 */
static void option_doc(const struct option_def *o, const void *def,
		       char *spec, size_t speccap, char *value,
		       size_t valuecap)
{
	switch (o->type) {
	case OPT_FLAG:
		snprintf(spec, speccap, "%s", o->key);
		snprintf(value, valuecap, "%s",
			 *(const bool *)((const char *)def + o->off) ? "on" : "off");
		break;
	case OPT_SECONDS:
		snprintf(spec, speccap, "%s=SECONDS", o->key);
		fmt_value(value, valuecap, def, o);
		break;
	case OPT_NUMBER:
		snprintf(spec, speccap, "%s=N", o->key);
		if (share_ceiling(o) && field_get(def, o) == STORE_SHARE_AUTO)
			snprintf(value, valuecap, "half of %s",
				 share_ceiling(o)->key);
		else
			fmt_value(value, valuecap, def, o);
		break;
	}
}

/* What every SECONDS above may be, after the list (--help, man page). */
static const char seconds_note[] =
	"SECONDS: up to 3 decimals, at most " MAX_SECONDS
	" (about 31.7 years); so are\n"
	"leases (user.statefs.ttl, user.statefs.child_ttl), and a "
	".clock write is at\nmost 1000000000000 ms.\n";

void layout_help(FILE *out)
{
	struct store_limits def;
	struct layout_mount mdef;
	char spec[40], value[32];

	store_limits_default(&def);
	layout_mount_default(&mdef);
	fprintf(out, "statefs options:\n");
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct option_def *o = &options[i];

		option_doc(o, o->mount ? (const void *)&mdef : &def, spec,
			   sizeof(spec), value, sizeof(value));
		fprintf(out, "    -o %-25s %s (default: %s)\n", spec,
			o->meaning, value);
	}
	for (const char *l = seconds_note; *l;) {
		const char *nl = strchr(l, '\n');

		fprintf(out, "    %.*s\n", (int)(nl - l), l);
		l = nl + 1;
	}
}

/* @s with scdoc's markup characters escaped, so it reads as written. */
static void scdoc_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '*' || *s == '_' || *s == '\\')
			fputc('\\', out);
		fputc(*s, out);
	}
}

/* One option in scdoc: "*-o key=*_N_": the key bold, the placeholder
 * underlined; then its meaning and default, as --help prints them. */
static void scdoc_row(void *arg, const char *spec, const char *meaning,
		      const char *value)
{
	FILE *out = arg;
	const char *eq = strchr(spec, '=');

	fputs("*-o ", out);
	if (eq) {
		char key[40];

		snprintf(key, sizeof(key), "%.*s", (int)(eq + 1 - spec), spec);
		scdoc_text(out, key);
		fputs("*_", out);
		scdoc_text(out, eq + 1);
		fputs("_\n", out);
	} else {
		scdoc_text(out, spec);
		fputs("*\n", out);
	}
	fputs("\t", out);
	scdoc_text(out, meaning);
	fputs(" (default: ", out);
	scdoc_text(out, value);
	fputs(")\n\n", out);
}

/*
 * Contract in layout.h.  The rows, meanings and defaults are the ones
 * layout_help() and layout_remote_help() print, so the man page and
 * --help cannot disagree.
 */
void layout_help_scdoc(FILE *out)
{
	struct store_limits def;
	struct layout_mount mdef;
	char spec[40], value[32];

	store_limits_default(&def);
	layout_mount_default(&mdef);
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct option_def *o = &options[i];

		option_doc(o, o->mount ? (const void *)&mdef : &def, spec,
			   sizeof(spec), value, sizeof(value));
		scdoc_row(out, spec, o->meaning, value);
	}
	scdoc_text(out, seconds_note);
	fputs("\nThe shared store's options:\n\n", out);
	layout_remote_rows(scdoc_row, out);
}

/* The source argument ------------------------------------------------------ */

/*
 * Contract in layout.h.  A name is checked by the rules of a tenant's
 * name (no white space or control bytes, so /proc/mounts and findmnt show
 * it as one field), without '/'.  An address is told apart by its ':'
 * ("redis://HOST:PORT", "unix:PATH", "sentinel://..."): the shared
 * store's, handed on as -o store=ADDRESS, whose parser checks it.
 */
int layout_source(const char *source, char *opt, size_t optcap, char *err,
		  size_t errlen)
{
	if (strchr(source, ':')) {
		/* A shared store's address: -o store=ADDRESS checks the rest. */
		const unsigned char *c = (const unsigned char *)source;

		while (*c > ' ' && *c != 0x7f)
			c++;
		if (!*c && (const char *)c - source <= NAME_MAX &&
		    (size_t)snprintf(opt, optcap, "store=%s", source) < optcap)
			return 1;
		if (errlen > 0)
			snprintf(err, errlen, "statefs: bad source '%s' (a shared "
				 "store's address of at most 255 bytes without "
				 "white space)", source);
		goto bad;
	}
	/* A node name's rules, but "-" is a source like any other: it is
	 * never in a line of .events or .snapshot. */
	if (name_check_bytes(source, strlen(source), NAME_MAX, false) != 0 ||
	    strchr(source, '/')) {
		if (errlen > 0)
			snprintf(err, errlen, "statefs: bad source '%s' (none, "
				 "a shared store's address, or a "
				 LAYOUT_SOURCE_RULE ")", source);
		goto bad;
	}
	return 0;
bad:
	for (char *c = err; errlen > 0 && *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = '?';
	return -EINVAL;
}
