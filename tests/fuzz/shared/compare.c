/*
 * compare.c - what both sides of fuzz_shared must show after every step
 * (tests/fuzz/fuzz_shared.c says what the target checks): each side's
 * snapshot, listings, attributes, leases, contents, counters and drain
 * states described as text, the two texts compared, and inode numbers
 * paired one to one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"
#include "tests/unit/redis/redis_fixture.h"
#include "store/store.h"

#include "tests/fuzz/fuzz_shared.h"

/* What both sides must show ------------------------------------------------------- */

static void put(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(int i, const char *fmt, ...)
{
	size_t used = strlen(F.text[i]);
	va_list ap;

	if (used + 1 >= TEXT_MAX)
		die("%s: the description is too long", SIDE[i]);
	va_start(ap, fmt);
	vsnprintf(F.text[i] + used, TEXT_MAX - used, fmt, ap);
	va_end(ap);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_dirent(const void *a, const void *b)
{
	return strcmp(((const struct store_dirent *)a)->name,
		      ((const struct store_dirent *)b)->name);
}

/* @n lines of @lines, sorted (two stores need not share table order). */
static void put_sorted(int i, char **lines, size_t n)
{
	qsort(lines, n, sizeof(*lines), cmp_str);
	for (size_t k = 0; k < n; k++) {
		put(i, "%s", lines[k]);
		free(lines[k]);
	}
	free(lines);
}

static void put_snapshot(int i)
{
	struct store_snapshot snap;
	char **lines;
	int rc = store_snapshot_take(F.d[i].s, NULL, &snap);

	if (rc != 0) {
		put(i, "snapshot %d\n", rc);
		return;
	}
	lines = calloc(snap.n + 1, sizeof(*lines));
	for (size_t k = 0; lines && k < snap.n; k++) {
		const struct store_snap_row *r = &snap.rows[k];

		if (asprintf(&lines[k], "row %d %s/%s/%s gen %" PRId64 " ver %"
			     PRId64 " size %" PRId64 " nlink %" PRId64 " ttl %"
			     PRId64 " ino %" PRId64 " owner %u:%u %o\n",
			     (int)r->kind, r->tenant, r->parent, r->child,
			     r->generation, r->version, r->size, r->nlink,
			     r->ttl_ms_left, ino_as(i, r->ino),
			     (unsigned)r->tenant_uid,
			     (unsigned)r->tenant_gid,
			     (unsigned)r->tenant_mode) < 0)
			lines[k] = NULL;
		if (!lines[k])
			die("out of memory");
	}
	if (!lines)
		die("out of memory");
	put_sorted(i, lines, snap.n);
	store_snapshot_free(&snap);
}

static void put_stats(int i, struct store_node *t)
{
	struct store_stats st;
	int rc = store_stats(F.d[i].s, t, &st);

	if (rc != 0) {
		put(i, " stats %d\n", rc);
		return;
	}
	put(i, " stats tenants %" PRIu64 " parents %" PRIu64 " children %"
	    PRIu64 " links %" PRIu64 " tombstones %" PRIu64 " bytes %" PRIu64
	    "\n", st.tenants, st.parents, st.children, st.links,
	    st.tombstones, st.bytes);
	if (t)
		return;
	put(i, " counters admissions %" PRIu64 " removals %" PRIu64
	    " expiries %" PRIu64 " joins %" PRIu64 " leaves %" PRIu64
	    " refused", st.admissions, st.removals, st.expiries, st.joins,
	    st.leaves);
	for (int k = 0; k < STORE_NREFUSAL; k++)
		put(i, " %" PRIu64, st.refused[k]);
	put(i, "\n");
}

static void put_drain(int i, struct store_node *t)
{
	uint64_t left = 0;
	enum store_state st = store_drain_state(F.d[i].s, t, &left);

	put(i, " drain %d left %" PRIu64 "\n", (int)st, left);
}

/* A node: its attributes, lease, generation or version, content. */
static void put_node(int i, struct store_node *n)
{
	struct store *s = F.d[i].s;
	enum store_kind kind = store_node_kind(n);
	struct store_attr a;
	struct store_lease l;
	uint64_t v = 0;
	int rc = store_getattr(s, n, &a);

	if (rc == 0)
		put(i, " attr ino %" PRId64 " mode %o uid %u gid %u nlink %u"
		    " size %" PRIu64 "\n", ino_as(i, (int64_t)a.ino),
		    (unsigned)a.mode,
		    (unsigned)a.uid, (unsigned)a.gid, a.nlink, a.size);
	else
		put(i, " attr %d\n", rc);
	if (kind == STORE_PARENT || kind == STORE_CHILD) {
		rc = store_lease_get(s, n, &l);
		put(i, " lease %d ttl %" PRIu64 " deadline %" PRIu64
		    " child_ttl %" PRIu64 "\n", rc, rc ? 0 : l.ttl_ms,
		    rc ? 0 : l.deadline_ms, rc ? 0 : l.child_ttl_ms);
	}
	if (kind == STORE_PARENT) {
		rc = store_parent_generation(s, n, &v);
		put(i, " generation %d %" PRIu64 "\n", rc, v);
	}
	if (kind == STORE_CHILD) {
		struct store_stage *st;
		uint8_t buf[MAX_PAYLOAD + 8];
		ssize_t got = -1;

		rc = store_child_version(s, n, &v);
		put(i, " version %d %" PRIu64 "\n content", rc, v);
		rc = store_stage_open(s, n, STORE_STAGE_READ, &st);
		if (rc == 0) {
			got = store_stage_read(st, buf, sizeof(buf), 0);
			store_stage_close(st);
		}
		for (ssize_t k = 0; k < got; k++)
			put(i, " %02x", buf[k]);
		put(i, " (%d %zd)\n", rc, got);
	}
}

/* Directory @dir (named @path) and, depth first, what it holds. */
static void put_dir(int i, struct store_node *dir, const char *path)
{
	struct store *s = F.d[i].s;
	struct store_dirlist l;
	char **lines;
	int rc = store_list(s, dir, &l);

	put(i, "%s:\n", path);
	if (rc != 0) {
		put(i, " list %d\n", rc);
		return;
	}
	lines = calloc(l.n + 1, sizeof(*lines));
	if (!lines)
		die("out of memory");
	for (size_t k = 0; k < l.n; k++)
		if (asprintf(&lines[k], " entry %s ino %" PRId64 " kind %d\n",
			     l.e[k].name, ino_as(i, (int64_t)l.e[k].ino),
			     (int)l.e[k].kind) < 0)
			die("out of memory");
	put_sorted(i, lines, l.n);
	/* Then each entry, in name order. */
	if (l.n)
		qsort(l.e, l.n, sizeof(*l.e), cmp_dirent);
	for (size_t k = 0; k < l.n; k++) {
		struct store_node *n;
		char sub[64];

		snprintf(sub, sizeof(sub), "%s/%s", path, l.e[k].name);
		rc = store_lookup(s, dir, l.e[k].name, &n);
		if (rc != 0) {
			put(i, "%s: lookup %d\n", sub, rc);
			continue;
		}
		if (store_node_kind(n) == STORE_CHILD) {
			put(i, "%s:\n", sub);
			put_node(i, n);
		} else {
			put_dir(i, n, sub);
		}
		store_node_unref(s, n);
	}
	store_dirlist_free(&l);
	if (store_node_kind(dir) != STORE_ROOT)
		put_node(i, dir);
	if (store_node_kind(dir) == STORE_TENANT) {
		put_stats(i, dir);
		put_drain(i, dir);
	}
}

static void describe(int i)
{
	struct store *s = F.d[i].s;

	F.text[i][0] = '\0';
	put(i, "store state %d next_deadline %" PRIu64 " now %" PRIu64 "\n",
	    (int)store_state(s), store_next_deadline(s), store_now_ms(s));
	put_drain(i, NULL);
	put_stats(i, NULL);
	put_snapshot(i);
	put_dir(i, store_root(s), "");
}

/*
 * After each step: one reaper pass and a read of each drain state, as
 * the daemon's reaper and a reader of .drain would (a drain with no child
 * left ends then).
 */
void fz_settle(void)
{
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		store_expire(s, 4096);
		store_drain_state(s, NULL, NULL);
		for (int t = 0; t < NT; t++) {
			struct store_node *n;

			if (store_lookup(s, store_root(s), TN[t], &n) == 0) {
				store_drain_state(s, n, NULL);
				store_node_unref(s, n);
			}
		}
	}
}

/* Pair the inode numbers of the nodes both sides show under one path
 * (directory @dir of each side, and what it holds). */
static void pair_tree(struct store_node *dir[2], const char *path)
{
	struct store_dirlist l;
	struct store_attr at[2];

	if (store_getattr(F.d[EMB].s, dir[0], &at[0]) == 0 &&
	    store_getattr(F.d[SHR].s, dir[1], &at[1]) == 0)
		pair_ino(path[0] ? path : "/", at[0].ino, at[1].ino, false);
	if (store_node_kind(dir[0]) == STORE_CHILD ||
	    store_list(F.d[EMB].s, dir[0], &l) != 0)
		return;
	for (size_t k = 0; k < l.n; k++) {
		struct store_node *n[2] = { NULL, NULL };
		char sub[64];

		snprintf(sub, sizeof(sub), "%s/%s", path, l.e[k].name);
		for (int i = 0; i < 2; i++)
			if (store_lookup(F.d[i].s, dir[i], l.e[k].name, &n[i]))
				n[i] = NULL;
		if (n[0] && n[1])
			pair_tree(n, sub);
		unref2(n);
	}
	store_dirlist_free(&l);
}

void verify(void)
{
	struct store_node *root[2] = { store_root(F.d[EMB].s),
				       store_root(F.d[SHR].s) };
	const char *a, *b;

	pair_tree(root, "");
	describe(EMB);
	describe(SHR);
	if (strcmp(F.text[0], F.text[1]) == 0)
		return;
	a = F.text[0];
	b = F.text[1];
	/* the first line that differs */
	for (;;) {
		size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

		if (la != lb || memcmp(a, b, la) != 0) {
			fprintf(stderr, "embedded:\n%s\nshared:\n%s\n",
				F.text[0], F.text[1]);
			die("the stores differ: embedded \"%.*s\", shared \"%.*s\"",
			    (int)la, a, (int)lb, b);
		}
		a += la + (a[la] != '\0');
		b += lb + (b[lb] != '\0');
	}
}
