/*
 * stress_mixed.c - a mixed random workload: N threads for a bounded number
 * of operations doing admissions, unlinks, links, renames, leaves,
 * rejoins, departs, tenant cleanups, stage publications (REPLACE,
 * APPEND, CAS), truncations, reads, listings, the kernel's inode table's
 * traffic (fs/inode.c, as the adapter drives it) and clock ticks, on a
 * few overlapping names in two tenants with small ceilings and quotas, so
 * that links and renames collide and refusals happen.  Every return code
 * is checked against the set the operation may return; content is
 * written in uniform 8-byte blocks so a reader that saw a mix of two
 * publications is caught.  After the threads join, store_check_all()
 * must pass and the stats gauges must equal a recount through
 * store_list() of every tenant and parent (stress_check.c).  Also
 * store_check_all() and snapshots run concurrently with the workload.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "fs/inode.h"
#include "redis/mirror.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/stress/stress.h"

static const char *const TEN[NTEN] = { "t0", "t1" };
static const char *const PAR[NPAR] = { "p0", "p1", "p2", "p3" };
static const char *const CHI[NCHILD] = { "c0", "c1", "c2", "c3", "c4", "c5" };

/* Allowed return codes -------------------------------------------------- */

enum op {
	OP_CREATE, OP_UNLINK, OP_LINK, OP_LINK_XDEV, OP_RENAME, OP_RENAME_XDEV,
	OP_RMDIR, OP_MKDIR, OP_DEPART, OP_STAGE_OPEN, OP_STAGE_WRITE,
	OP_PUBLISH, OP_READ, OP_TRUNC, OP_GETATTR, OP_LIST, OP_LOOKUP,
	OP_CLEANUP, OP_NOPS
};

static const char *const OPNAME[OP_NOPS] = {
	"create", "unlink", "link", "link-xdev", "rename", "rename-xdev",
	"rmdir", "mkdir", "depart", "stage_open", "stage_write", "publish",
	"read", "truncate", "getattr", "list", "lookup", "cleanup",
};

/* The negative errnos each operation may return (0 / success aside). */
#define MAXALLOW 8
static const int ALLOWED[OP_NOPS][MAXALLOW] = {
	[OP_CREATE] = { EEXIST, ESTALE, ENOENT, ENOSPC, EDQUOT, EROFS },
	[OP_UNLINK] = { ENOENT, ESTALE },
	[OP_LINK] = { EEXIST, ESTALE, ENOENT, ENOSPC, EDQUOT, EROFS },
	[OP_LINK_XDEV] = { EXDEV, ESTALE },
	[OP_RENAME] = { ENOENT, EEXIST, ESTALE, ENOSPC, EDQUOT, EROFS },
	[OP_RENAME_XDEV] = { EXDEV, ESTALE, ENOENT },
	[OP_RMDIR] = { ENOENT, ENOSPC, EDQUOT, ESTALE },
	[OP_MKDIR] = { EEXIST, ENOSPC, EDQUOT, ESTALE, EROFS },
	[OP_DEPART] = { ENOSPC, EDQUOT, ESTALE },
	[OP_STAGE_OPEN] = { ESTALE },
	[OP_STAGE_WRITE] = { EFBIG, ENOSPC, EDQUOT, ESTALE },
	[OP_PUBLISH] = { EAGAIN, ESTALE, EFBIG, ENOSPC, EDQUOT },
	[OP_READ] = { ESTALE },
	[OP_TRUNC] = { ESTALE, EFBIG, ENOSPC, EDQUOT },
	[OP_GETATTR] = { ESTALE },
	[OP_LIST] = { ESTALE },
	[OP_LOOKUP] = { ENOENT, ESTALE },
	[OP_CLEANUP] = { ENOENT },
};

/* Per-run histogram of outcomes: [op][0] = success, [op][e] = -e. */
#define NERR 134
static long g_hist[OP_NOPS][NERR];
static pthread_mutex_t g_hist_mu = PTHREAD_MUTEX_INITIALIZER;

/* An extra errno allowed in a run with child leases (expiry: ENOENT). */
static int g_extra_allowed;

static bool rc_allowed(enum op op, long e)
{
	if (e == g_extra_allowed)
		return true;
	for (int i = 0; i < MAXALLOW && ALLOWED[op][i]; i++)
		if (ALLOWED[op][i] == e)
			return true;
	return false;
}

/* The mixed random workload ------------------------------------------------ */

static void rc_check(struct worker *w, enum op op, long rc)
{
	long e = rc < 0 ? -rc : 0;

	if (rc < 0 && !rc_allowed(op, e))
		failf("thread %d: %s returned %ld (%s)", w->id, OPNAME[op], rc,
		      strerror((int)e));
	pthread_mutex_lock(&g_hist_mu);
	g_hist[op][e < NERR ? e : NERR - 1]++;
	pthread_mutex_unlock(&g_hist_mu);
}

static unsigned rnd(struct worker *w, unsigned n)
{
	return (unsigned)rand_r(&w->seed) % n;
}

static void record_ino(struct worker *w, struct store_node *n)
{
	if (w->ninos == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 256;
		w->inos = realloc(w->inos, w->cap * sizeof *w->inos);
		if (!w->inos) {
			failf("oom");
			w->cap = w->ninos = 0;
			return;
		}
	}
	w->inos[w->ninos++] = store_node_ino(n);
}

/* The live tenant @ti (new reference), making it when it is missing. */
static struct store_node *get_tenant(struct worker *w, int ti)
{
	struct store *s = w->m->s;

	for (int tries = 0; tries < 4; tries++) {
		struct store_node *n = NULL;
		int rc = store_lookup(s, store_root(s), TEN[ti], &n);

		if (rc == 0)
			return n;
		if (rc != -ENOENT) {
			failf("lookup tenant: %d", rc);
			return NULL;
		}
		rc = store_mkdir(s, store_root(s), TEN[ti], &DOWN, &n);
		if (rc == 0) {
			record_ino(w, n);
			return n;
		}
		if (rc != -EEXIST) {
			failf("mkdir tenant: %d", rc);
			return NULL;
		}
	}
	return NULL;
}

/* A parent handle: a cached one (maybe of an earlier incarnation) or a
 * fresh lookup; NULL when the parent is absent. */
static struct store_node *get_parent(struct worker *w, int ti, int pi)
{
	struct store *s = w->m->s;
	struct store_node *t, *n = NULL;
	int rc;

	if (w->pcache[ti][pi] && rnd(w, 3) == 0) {
		store_node_ref(w->pcache[ti][pi]);
		return w->pcache[ti][pi];
	}
	t = get_tenant(w, ti);
	if (!t)
		return NULL;
	rc = store_lookup(s, t, PAR[pi], &n);
	rc_check(w, OP_LOOKUP, rc);
	put(w, t);
	if (rc != 0)
		return NULL;
	put(w, w->pcache[ti][pi]);
	store_node_ref(n);
	w->pcache[ti][pi] = n;
	return n;
}

/* A child handle: cached or through a parent; NULL when absent.  With
 * @tenant, the tenant it was found in (borrowed from the cache). */
static struct store_node *get_child(struct worker *w, int ti,
				    struct store_node **tenant)
{
	struct store *s = w->m->s;
	struct store_node *p, *n = NULL;
	int slot = rnd(w, 4);
	int rc;

	if (w->ccache[ti][slot] && rnd(w, 3) == 0) {
		store_node_ref(w->ccache[ti][slot]);
		if (tenant)
			*tenant = w->ctenant[ti][slot];
		return w->ccache[ti][slot];
	}
	p = get_parent(w, ti, rnd(w, NPAR));
	if (!p)
		return NULL;
	rc = store_lookup(s, p, CHI[rnd(w, NCHILD)], &n);
	rc_check(w, OP_LOOKUP, rc);
	if (rc != 0) {
		put(w, p);
		return NULL;
	}
	if (store_node_kind(n) != STORE_CHILD)
		failf("lookup in a parent gave kind %d", store_node_kind(n));
	put(w, w->ccache[ti][slot]);
	put(w, w->ctenant[ti][slot]);
	store_node_ref(n);
	w->ccache[ti][slot] = n;
	w->ctenant[ti][slot] = store_node_tenant(p);
	store_node_ref(w->ctenant[ti][slot]);
	put(w, p);
	if (tenant)
		*tenant = w->ctenant[ti][slot];
	return n;
}

/* Content is uniform 8-byte blocks; a reader seeing a mix fails this. */
static void check_blocks(struct worker *w, const char *buf, size_t n)
{
	if (n % 8) {
		failf("content of %zu bytes is not whole blocks", n);
		return;
	}
	for (size_t b = 0; b < n; b += 8)
		for (size_t i = 1; i < 8; i++)
			if (buf[b + i] != buf[b]) {
				failf("torn content at block %zu", b / 8);
				return;
			}
	if (n > MAXPAY)
		failf("content of %zu bytes over max_payload", n);
}

static void do_stage(struct worker *w, int ti)
{
	struct store_node *c = get_child(w, ti, NULL);
	struct store_stage *st = NULL;
	enum store_stage_mode mode;
	char blk[24];
	int rc;

	if (!c)
		return;
	mode = (enum store_stage_mode)(1 + rnd(w, 3));
	rc = store_stage_open(w->m->s, c, mode, &st);
	rc_check(w, OP_STAGE_OPEN, rc);
	if (rc == 0) {
		int nblk = 1 + rnd(w, 3);
		uint64_t off = mode == STORE_STAGE_CAS ? 8 * rnd(w, 3) : 0;
		ssize_t wr;

		memset(blk, 'A' + rnd(w, 26), sizeof blk);
		if (rnd(w, 8) == 0)
			nblk = 0; /* REPLACE: truncate to empty */
		if (nblk) {
			wr = store_stage_write(st, blk, 8 * nblk, off);
			rc_check(w, OP_STAGE_WRITE, wr < 0 ? wr : 0);
			if (wr >= 0 && wr != 8 * nblk)
				failf("short stage write %zd", wr);
		}
		if (rnd(w, 4) == 0)
			sched_yield(); /* let others publish in between */
		rc = store_stage_publish(st);
		rc_check(w, OP_PUBLISH, rc);
		if (rc == -EAGAIN && mode != STORE_STAGE_CAS)
			failf("publish -EAGAIN in mode %d", mode);
		store_stage_close(st);
	}
	put(w, c);
}

static void do_read(struct worker *w, int ti)
{
	struct store_node *c = get_child(w, ti, NULL);
	struct store_stage *st = NULL;
	char buf[4 * MAXPAY];
	int rc;

	if (!c)
		return;
	rc = store_stage_open(w->m->s, c, STORE_STAGE_READ, &st);
	rc_check(w, OP_STAGE_OPEN, rc);
	if (rc == 0) {
		size_t got = 0;
		ssize_t r;

		/* Small reads, so a publication can land between them. */
		while ((r = store_stage_read(st, buf + got, 5, got)) > 0 &&
		       got + 5 < sizeof buf)
			got += (size_t)r;
		rc_check(w, OP_READ, r < 0 ? r : 0);
		if (r >= 0)
			check_blocks(w, buf, got);
		store_stage_close(st);
	}
	put(w, c);
}

static void do_remember(struct worker *w, int ti)
{
	struct store *s = w->m->s;
	struct fs_inodes *t = &w->m->inodes;
	int slot = rnd(w, NREM);
	struct store_node *n;

	if (w->rem[slot].n && rnd(w, 2)) {
		/* The kernel still knows it: the table must too. */
		n = fs_inode_get(t, s, w->rem[slot].ino);
		if (!n) {
			failf("fs_inode_get(%llu) NULL with %llu lookups",
			      (unsigned long long)w->rem[slot].ino,
			      (unsigned long long)w->rem[slot].n);
			return;
		}
		if (store_node_ino(n) != w->rem[slot].ino)
			failf("fs_inode_get gave another inode");
		put(w, n);
		fs_inode_forget(t, s, w->rem[slot].ino, w->rem[slot].n);
		w->rem[slot].n = 0;
		return;
	}
	n = rnd(w, 2) ? get_child(w, ti, NULL) : get_parent(w, ti, rnd(w, NPAR));
	if (!n)
		return;
	if (w->rem[slot].n && w->rem[slot].ino != store_node_ino(n)) {
		fs_inode_forget(t, s, w->rem[slot].ino, w->rem[slot].n);
		w->rem[slot].n = 0;
	}
	if (fs_inode_remember(t, n) != 0) {
		failf("fs_inode_remember: out of memory");
		put(w, n);
		return;
	}
	w->rem[slot].ino = store_node_ino(n);
	w->rem[slot].n++;
	put(w, n);
}

/*
 * -EXDEV between two nodes of one tenant name: allowed only when they
 * belong to different incarnations of the tenant (a cached handle from
 * before a cleanup), where the contract would rather say -ESTALE
 * (test_tenant.c checks that single-threaded); counted apart, then
 * treated as -ESTALE.  Within one tenant incarnation it is a bug.
 * Success across tenant names is always a bug.
 */
static long g_xdev_dead;

/* @a and @b: the tenants the two sides were found in. */
static int xdev_filter(struct worker *w, int rc, bool xdev,
		       struct store_node *a, struct store_node *b)
{
	if (xdev && rc == 0)
		failf("thread %d: link/rename across tenants succeeded", w->id);
	if (rc != -EXDEV || xdev)
		return rc;
	if (a == b) {
		failf("thread %d: -EXDEV within one tenant", w->id);
		return rc;
	}
	__atomic_fetch_add(&g_xdev_dead, 1, __ATOMIC_RELAXED);
	return -ESTALE;
}

static void one_op(struct worker *w)
{
	struct store *s = w->m->s;
	int ti = rnd(w, NTEN);
	unsigned dice = rnd(w, 10000);
	struct store_node *p, *q, *c, *t, *n = NULL;
	bool created = false;
	int rc;

	if (dice < 1800) { /* admission */
		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		rc = store_create(s, p, CHI[rnd(w, NCHILD)], &FOWN,
				  rnd(w, 2), &n, &created);
		rc_check(w, OP_CREATE, rc);
		if (rc == 0) {
			if (store_node_kind(n) != STORE_CHILD)
				failf("create gave kind %d",
				      store_node_kind(n));
			if (created)
				record_ino(w, n);
			put(w, n);
		}
		put(w, p);
	} else if (dice < 2600) { /* terminal removal */
		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		rc = store_unlink(s, p, CHI[rnd(w, NCHILD)]);
		rc_check(w, OP_UNLINK, rc);
		put(w, p);
	} else if (dice < 3500) { /* link, sometimes across tenants */
		bool xdev = rnd(w, 16) == 0;

		struct store_node *ct;

		c = get_child(w, ti, &ct);
		if (!c)
			return;
		q = get_parent(w, xdev ? 1 - ti : ti, rnd(w, NPAR));
		if (q) {
			rc = store_link(s, c, q, CHI[rnd(w, NCHILD)]);
			rc = xdev_filter(w, rc, xdev, ct, store_node_tenant(q));
			rc_check(w, xdev ? OP_LINK_XDEV : OP_LINK, rc);
			put(w, q);
		}
		put(w, c);
	} else if (dice < 4400) { /* rename */
		bool xdev = rnd(w, 16) == 0;
		static const unsigned flags[] = {
			0, 0, STORE_RENAME_NOREPLACE, STORE_RENAME_EXCHANGE
		};

		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		q = get_parent(w, xdev ? 1 - ti : ti, rnd(w, NPAR));
		if (q) {
			rc = store_rename(s, p, CHI[rnd(w, NCHILD)], q,
					  CHI[rnd(w, NCHILD)], flags[rnd(w, 4)]);
			rc = xdev_filter(w, rc, xdev, store_node_tenant(p),
					 store_node_tenant(q));
			rc_check(w, xdev ? OP_RENAME_XDEV : OP_RENAME, rc);
			put(w, q);
		}
		put(w, p);
	} else if (dice < 4650) { /* leave */
		t = get_tenant(w, ti);
		if (!t)
			return;
		rc = store_rmdir(s, t, PAR[rnd(w, NPAR)], NULL);
		rc_check(w, OP_RMDIR, rc);
		put(w, t);
	} else if (dice < 5150) { /* join / rejoin */
		t = get_tenant(w, ti);
		if (!t)
			return;
		rc = store_mkdir(s, t, PAR[rnd(w, NPAR)], &DOWN, &n);
		rc_check(w, OP_MKDIR, rc);
		if (rc == 0) {
			uint64_t g = 0;

			record_ino(w, n);
			rc = store_parent_generation(s, n, &g);
			if (rc != 0 && rc != -ESTALE)
				failf("generation: %d", rc);
			if (rc == 0 && g == 0)
				failf("joined with generation 0");
			put(w, n);
		}
		put(w, t);
	} else if (dice < 5300) { /* out-of-order member-left */
		t = get_tenant(w, ti);
		if (!t)
			return;
		rc = store_depart(s, t, PAR[rnd(w, NPAR)], NULL);
		rc_check(w, OP_DEPART, rc);
		put(w, t);
	} else if (dice < 6800) {
		do_stage(w, ti);
	} else if (dice < 7600) {
		do_read(w, ti);
	} else if (dice < 7900) { /* truncate */
		struct store_attr in, out;

		c = get_child(w, ti, NULL);
		if (!c)
			return;
		memset(&in, 0, sizeof in);
		in.size = 8 * rnd(w, 10);
		rc = store_setattr(s, c, STORE_SET_SIZE, &in, &out);
		rc_check(w, OP_TRUNC, rc);
		put(w, c);
	} else if (dice < 8400) { /* getattr through cached handles */
		struct store_attr a;

		n = rnd(w, 2) ? get_child(w, ti, NULL)
			      : get_parent(w, ti, rnd(w, NPAR));
		if (!n)
			return;
		rc = store_getattr(s, n, &a);
		rc_check(w, OP_GETATTR, rc);
		if (rc == 0 && a.ino != store_node_ino(n))
			failf("getattr ino mismatch");
		put(w, n);
	} else if (dice < 8800) { /* listing */
		struct store_dirlist dl;

		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		rc = store_list(s, p, &dl);
		rc_check(w, OP_LIST, rc);
		if (rc == 0) {
			for (size_t i = 0; i < dl.n; i++)
				if (dl.e[i].kind != STORE_CHILD)
					failf("listed kind %d", dl.e[i].kind);
			if (dl.n > NCHILD)
				failf("parent lists %zu entries", dl.n);
			store_dirlist_free(&dl);
		}
		put(w, p);
	} else if (dice < 9300) {
		do_remember(w, ti);
	} else if (dice < 9500) {
		struct store_stats st;

		rc = store_stats(s, NULL, &st);
		if (rc != 0)
			failf("stats: %d", rc);
		t = get_tenant(w, ti);
		if (t) {
			if (store_stats(s, t, &st) != 0 && store_node_live(t))
				failf("tenant stats failed");
			put(w, t);
		}
	} else if (dice < 9700) {
		atomic_clock_advance(&w->m->clk, 250);
	} else if (dice < 9710) { /* tenant cleanup */
		rc = store_rmdir(s, store_root(s), TEN[ti], NULL);
		rc_check(w, OP_CLEANUP, rc);
	} else if (dice >= 9710 && dice < 9710 + w->m->check_every) {
		char why[256] = "";

		/* Takes every lock in order: must see a consistent store. */
		rc = store_check_all(s, why, sizeof why);
		if (rc != 0)
			failf("concurrent store_check_all: %d (%s)", rc, why);
	} else if (dice >= 9710 + w->m->check_every &&
		   dice < 9710 + w->m->check_every + w->m->snap_every) {
		snapshot_check(w, rnd(w, 2) ? get_tenant(w, ti) : NULL);
	} else { /* drop cached handles */
		for (int i = 0; i < 4; i++) {
			put(w, w->ccache[ti][i]);
			put(w, w->ctenant[ti][i]);
			w->ccache[ti][i] = NULL;
			w->ctenant[ti][i] = NULL;
		}
	}
}

static void *mixed_thread(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < w->m->iters; i++) {
		one_op(w);
		w->ops++;
	}
	for (int i = 0; i < NREM; i++)
		if (w->rem[i].n)
			fs_inode_forget(&w->m->inodes, w->m->s, w->rem[i].ino,
					w->rem[i].n);
	for (int i = 0; i < NTEN; i++)
		for (int k = 0; k < NPAR; k++)
			put(w, w->pcache[i][k]);
	for (int i = 0; i < NTEN; i++)
		for (int k = 0; k < 4; k++) {
			put(w, w->ccache[i][k]);
			put(w, w->ctenant[i][k]);
		}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void run_mixed(const struct store_limits *l, int iters, bool leases,
		      unsigned check_every, unsigned snap_every)
{
	struct mixed m;
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	struct timespec t0, t1;
	struct store_stats st, tst;
	struct store_dirlist tl;
	struct recount all = { 0 };
	uint64_t *inos = NULL;
	size_t ninos = 0;

	failures_reset();
	memset(g_hist, 0, sizeof g_hist);
	g_xdev_dead = 0;
	g_extra_allowed = leases ? ENOENT : -1;
	memset(&m, 0, sizeof m);
	m.clk = 5000;
	m.iters = iters;
	m.leases = leases;
	m.check_every = check_every;
	m.snap_every = snap_every;
	atomic_init(&m.snaps, 0);
	m.s = new_store(l, &m.clk);
	fs_inodes_init(&m.inodes);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].m = &m;
		w[i].id = i;
		w[i].seed = seed_base() + 7919u * (unsigned)i + (leases ? 1 : 0);
		assert_int_equal(pthread_create(&th[i], NULL, mixed_thread,
						&w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	/* Outcome histogram: shows which paths the run exercised. */
	printf("# mixed%s: %d threads x %d ops (seed %#x) in %.2f s\n",
	       leases ? " (leases)" : "", NTHREADS, iters, seed_base(),
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	for (int op = 0; op < OP_NOPS; op++) {
		printf("#   %-12s", OPNAME[op]);
		for (int e = 0; e < NERR; e++)
			if (g_hist[op][e])
				printf(" %s=%ld", e ? strerror(e) : "ok",
				       g_hist[op][e]);
		printf("\n");
	}

	if (snap_every)
		printf("#   snapshots taken and checked: %ld\n",
		       atomic_load(&m.snaps));
	printf("#   -EXDEV through a handle of an earlier tenant: %ld\n",
	       __atomic_load_n(&g_xdev_dead, __ATOMIC_RELAXED));
	assert_no_failures();
	check_all_ok(m.s);
	/* Children past their deadline are invisible but may not have been
	 * reaped yet; the gauges count them until they are, so reap what
	 * is due before recounting through the listings. */
	if (leases)
		while (store_expire(m.s, 64))
			;

	/* Inode numbers are never reused. */
	for (int i = 0; i < NTHREADS; i++) {
		inos = realloc(inos, (ninos + w[i].ninos + 1) * sizeof *inos);
		assert_non_null(inos);
		memcpy(inos + ninos, w[i].inos, w[i].ninos * sizeof *inos);
		ninos += w[i].ninos;
		free(w[i].inos);
	}
	qsort(inos, ninos, sizeof *inos, cmp_u64);
	for (size_t i = 1; i < ninos; i++)
		if (inos[i] == inos[i - 1])
			fail_msg("inode %llu handed out twice",
				 (unsigned long long)inos[i]);
	free(inos);

	/* The gauges equal a recount through the listings. */
	assert_int_equal(store_list(m.s, store_root(m.s), &tl), 0);
	for (size_t i = 0; i < tl.n; i++) {
		struct store_node *t = NULL;
		struct recount one = { 0 };

		assert_int_equal(tl.e[i].kind, STORE_TENANT);
		assert_int_equal(store_lookup(m.s, store_root(m.s),
					      tl.e[i].name, &t), 0);
		recount_tenant(m.s, t, l, &one);
		assert_int_equal(store_stats(m.s, t, &tst), 0);
		assert_int_equal(tst.tenants, 1);
		assert_int_equal(tst.parents, one.parents);
		assert_int_equal(tst.children, one.children);
		assert_int_equal(tst.links, one.links);
		assert_int_equal(tst.bytes, one.bytes);
		all.tenants += one.tenants;
		all.parents += one.parents;
		all.children += one.children;
		all.links += one.links;
		all.bytes += one.bytes;
		store_node_unref(m.s, t);
	}
	store_dirlist_free(&tl);
	assert_int_equal(store_stats(m.s, NULL, &st), 0);
	printf("#   end: tenants %llu parents %llu children %llu links %llu "
	       "tombstones %llu bytes %llu; admissions %llu removals %llu "
	       "expiries %llu joins %llu leaves %llu\n",
	       (unsigned long long)st.tenants, (unsigned long long)st.parents,
	       (unsigned long long)st.children, (unsigned long long)st.links,
	       (unsigned long long)st.tombstones, (unsigned long long)st.bytes,
	       (unsigned long long)st.admissions,
	       (unsigned long long)st.removals,
	       (unsigned long long)st.expiries, (unsigned long long)st.joins,
	       (unsigned long long)st.leaves);
	assert_int_equal(st.tenants, all.tenants);
	assert_int_equal(st.parents, all.parents);
	assert_int_equal(st.children, all.children);
	assert_int_equal(st.links, all.links);
	assert_int_equal(st.bytes, all.bytes);
	assert_true(st.tenants <= l->max_tenants);
	assert_true(st.parents <= l->max_parents);
	assert_true(st.children <= l->max_children);
	assert_true(st.bytes <= l->max_bytes);
	assert_true(st.tombstones <= l->max_tombstones);
	/* Every state admitted was removed or is still here. */
	assert_true(st.admissions >= st.children);

	/* Every lookup was forgotten: the table is empty. */
	assert_int_equal(m.inodes.n, 0);
	fs_inodes_clear(&m.inodes, m.s);
	store_free(m.s);
}

static void mixed_limits(struct store_limits *l)
{
	store_limits_default(l);
	l->max_parents = 7;          /* 2 tenants x 4 names: joins collide */
	l->max_children = 16;
	l->max_bytes = 256;
	l->max_payload = MAXPAY;
	l->max_tombstones = 5;
	l->tombstone_ttl_ms = 3000;  /* ages out as threads tick the clock */
	l->parent_quota = 5;
	l->tenant_quota = 18;
}

static void test_mixed_workload(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	run_mixed(&l, mixed_iters(), false, 0, 0);
}

/* The same with child leases that expire while the threads run. */
static void test_mixed_workload_with_leases(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	l.default_ttl_ms = 2000;
	run_mixed(&l, mixed_iters() / 2, true, 0, 0);
}

/*
 * store_check_all() takes every lock in order, so it may run while the
 * store is in use (a diagnostic scan of a live mount) and must then see a
 * consistent store and touch no freed memory.  Last in the list: under
 * ASan a use-after-free ends the program.
 */
static void test_check_all_concurrent(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	run_mixed(&l, mixed_iters() / 2, false, 200, 0);
}

/*
 * Snapshots taken by the workers themselves, between their transitions,
 * with leases running out: each must be one state of the store
 * (snapshot_check), and the copy-before-write hooks race the taker.
 */
static void test_snapshots_concurrent(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	l.default_ttl_ms = 2000;
	run_mixed(&l, mixed_iters() / 2, true, 0, 100);
}

const struct CMUnitTest stress_mixed_tests[] = {
	cmocka_unit_test(test_mixed_workload),
	cmocka_unit_test(test_mixed_workload_with_leases),
	cmocka_unit_test(test_check_all_concurrent),
	cmocka_unit_test(test_snapshots_concurrent),
};
const size_t stress_mixed_ntests = sizeof(stress_mixed_tests) / sizeof(stress_mixed_tests[0]);
