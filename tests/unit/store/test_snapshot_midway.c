/*
 * test_snapshot_midway.c - unit tests of snapshots (store/snapshot.c)
 * taken while transitions run: each kind of transition before the first
 * bucket is copied, between every two and after the last, at both
 * scopes, compared with a snapshot taken just before; and snapshots
 * taken while threads move a child between parents.  A snapshot is the
 * store at one instant.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"
#include "tests/unit/store/snapshot.h"

/* Snapshot with transitions in the middle of its copy ---------------------- */

/*
 * One transition (or a few) that changes what build_world() made.  Alone,
 * each must succeed; in a sequence (one per step) an earlier one may have
 * taken away what a later one needs, so only a lone run checks codes.
 */
typedef void (*mutation)(struct ctx *c, struct world *w);

static bool midway_alone;

#define OK(call)                                                      \
	do {                                                          \
		int rc_ = (call);                                     \
		if (midway_alone && rc_ != 0)                         \
			fail_msg("%s: %d", #call, rc_);               \
	} while (0)

static void mut_publish_shared(struct ctx *c, struct world *w)
{
	OK(publish_rc(c, w->a, STORE_STAGE_REPLACE,
		      "a much longer state than before"));
}

static void mut_truncate_shared(struct ctx *c, struct world *w)
{
	struct store_attr in = { .size = 1 };

	OK(store_setattr(c->s, w->a, STORE_SET_SIZE, &in, NULL));
}

static void mut_unlink(struct ctx *c, struct world *w)
{
	OK(store_unlink(c->s, w->q, "b"));
}

static void mut_unlink_shared(struct ctx *c, struct world *w)
{
	OK(store_unlink(c->s, w->q, "shared"));
}

static void mut_create(struct ctx *c, struct world *w)
{
	OK(create_rc(c, w->p, "new", true));
}

static void mut_link(struct ctx *c, struct world *w)
{
	OK(store_link(c->s, w->b, w->p, "b2"));
}

static void mut_rename_across(struct ctx *c, struct world *w)
{
	OK(store_rename(c->s, w->p, "a", w->q, "moved", 0));
}

static void mut_rename_over(struct ctx *c, struct world *w)
{
	OK(store_rename(c->s, w->q, "b", w->p, "a", 0));
}

static void mut_exchange(struct ctx *c, struct world *w)
{
	OK(store_rename(c->s, w->q, "b", w->p, "a", STORE_RENAME_EXCHANGE));
}

/* Give @n a 1 ms lease, let it run out, reap: @n must be gone. */
static void expire_now(struct ctx *c, struct store_node *n)
{
	OK(store_set_ttl(c->s, n, 1));
	advance(c, 5);
	(void)store_expire(c->s, 100);
	OK(store_node_live(n) ? -EEXIST : 0);
}

static void mut_child_expires(struct ctx *c, struct world *w)
{
	expire_now(c, w->l);
}

static void mut_shared_lease(struct ctx *c, struct world *w)
{
	OK(store_set_ttl(c->s, w->a, 700));
}

static void mut_renew_parent(struct ctx *c, struct world *w)
{
	advance(c, 100);
	OK(store_renew(c->s, w->q));
}

static void mut_parent_expires(struct ctx *c, struct world *w)
{
	expire_now(c, w->q);
}

static void mut_leave(struct ctx *c, struct world *w)
{
	OK(store_rmdir(c->s, w->t, "p", NULL));
}

static void mut_depart_again(struct ctx *c, struct world *w)
{
	advance(c, 50);
	OK(store_depart(c->s, w->t, "ghost", NULL));
}

static void mut_rejoin(struct ctx *c, struct world *w)
{
	OK(mkdir_rc(c, w->t, "ghost"));
}

static void mut_tombstone_ages_out(struct ctx *c, struct world *w)
{
	(void)w;
	advance(c, c->lim.tombstone_ttl_ms);
	/* Ages out "ghost"; q's lease runs out too and leaves its own. */
	(void)store_expire(c->s, 100);
	OK(stats(c, NULL).tombstones == 1 ? 0 : -1);
}

static void mut_chmod_tenant(struct ctx *c, struct world *w)
{
	struct store_attr in = { .mode = 0700, .uid = 77 };

	OK(store_setattr(c->s, w->t, STORE_SET_MODE | STORE_SET_UID, &in,
			 NULL));
}

static void mut_cleanup_tenant(struct ctx *c, struct world *w)
{
	(void)w;
	OK(store_rmdir(c->s, root(c), "u", NULL));
}

static void mut_new_nodes(struct ctx *c, struct world *w)
{
	struct store_node *v = NULL, *n = NULL;

	OK(store_mkdir(c->s, root(c), "v", &DOWN, &v));
	if (v)
		OK(store_mkdir(c->s, v, "n", &DOWN, &n));
	if (n)
		OK(create_rc(c, n, "x", true));
	OK(mkdir_rc(c, w->t, "late"));
	if (n)
		put(c, n);
	if (v)
		put(c, v);
}

static void mut_drain_tenant(struct ctx *c, struct world *w)
{
	OK(store_drain_now(c->s, w->t));
}

static void mut_drain_store(struct ctx *c, struct world *w)
{
	(void)w;
	OK(store_drain_now(c->s, NULL));
}

static const struct {
	const char *name;
	mutation fn;
} mutations[] = {
#define M(f) { #f, f }
	M(mut_publish_shared), M(mut_truncate_shared), M(mut_unlink),
	M(mut_unlink_shared), M(mut_create), M(mut_link),
	M(mut_rename_across), M(mut_rename_over), M(mut_exchange),
	M(mut_child_expires), M(mut_shared_lease), M(mut_renew_parent),
	M(mut_parent_expires), M(mut_leave), M(mut_depart_again),
	M(mut_rejoin), M(mut_tombstone_ages_out), M(mut_chmod_tenant),
	M(mut_cleanup_tenant), M(mut_new_nodes), M(mut_drain_tenant),
	M(mut_drain_store),
#undef M
};

#define NMUT (sizeof mutations / sizeof mutations[0])

struct midway {
	struct ctx *c;
	struct world *w;
	unsigned at;          /* run at this step (UINT_MAX: each step one) */
	size_t first;         /* with at == UINT_MAX: the mutation of step 0 */
	unsigned ran, steps;
	bool wrap;            /* the snapshot's epoch wraps (see below) */
};

static void midway_step(void *arg, unsigned step)
{
	struct midway *m = arg;

	m->steps = step + 1;
	if (m->at == step) {
		mutations[m->first].fn(m->c, m->w);
		m->ran++;
	} else if (m->at == UINT_MAX && m->first + step < NMUT) {
		mutations[m->first + step].fn(m->c, m->w);
		m->ran++;
	}
}

/*
 * The snapshot is the store at the instant it was taken, whatever
 * transitions run while it is copied: before any unit is copied, between
 * any two units, after the last.  Reference: a snapshot taken just before
 * with nothing running (its rows are checked by the tests above).  And
 * the store did move on: a snapshot after differs.
 */
static void check_midway(struct ctx *c, struct midway *m, bool tenant_scope)
{
	struct store_limits l;
	struct store_snapshot before, during, after;
	struct world w;
	char *sb, *sd, *sa;

	store_limits_default(&l);
	reopen(c, &l);
	if (m->wrap)
		store_snapshot_epochs(c->s, 1);
	build_world(c, &w);
	m->c = c;
	m->w = &w;
	m->ran = m->steps = 0;
	take(c, tenant_scope ? w.t : NULL, &before);
	if (m->wrap)
		store_snapshot_epochs(c->s, (1ull << 32) - 1);
	store_snapshot_step_hook(c->s, midway_step, m);
	assert_int_equal(store_snapshot_take(c->s, tenant_scope ? w.t : NULL,
					     &during), 0);
	store_snapshot_step_hook(c->s, NULL, NULL);
	assert_sorted(&during);
	sb = snap_text(&before, true);
	sd = snap_text(&during, true);
	if (strcmp(sb, sd) != 0) {
		print_error("%s at step %u (%s scope)\nbefore:\n%sduring:\n%s",
			    mutations[m->first].name, m->at,
			    tenant_scope ? "tenant" : "root", sb, sd);
		fail_msg("the snapshot is not the store at its instant");
	}
	assert_int_equal(during.taken_ms, before.taken_ms);
	if (m->ran) {
		assert_int_equal(store_snapshot_take(c->s, NULL, &after), 0);
		sa = snap_text(&after, true);
		if (tenant_scope && m->at != UINT_MAX &&
		    (mutations[m->first].fn == mut_cleanup_tenant ||
		     mutations[m->first].fn == mut_new_nodes))
			; /* changes outside the tenant's scope only */
		else if (strcmp(sa, sb) == 0 && !tenant_scope)
			fail_msg("%s at step %u changed nothing",
				 mutations[m->first].name, m->at);
		free(sa);
		store_snapshot_free(&after);
	}
	free(sb);
	free(sd);
	store_snapshot_free(&before);
	store_snapshot_free(&during);
	check_ok(c);
}

static void test_snapshot_midway_each_transition(void **state)
{
	struct ctx *c = *state;
	unsigned runs = 0;

	for (size_t i = 0; i < NMUT; i++) {
		for (int scope = 0; scope < 2; scope++) {
			for (unsigned at = 0;; at++) {
				struct midway m = { .at = at, .first = i };

				midway_alone = true;
				check_midway(c, &m, scope);
				if (!m.ran)
					break; /* past the last step */
				runs++;
			}
		}
	}
	print_message("# %u snapshots with a transition midway\n", runs);
	/*
	 * build_world() has tenants t, u and buckets p, q (in t), r (in u):
	 * steps 0 to 5 at the root, 0 to 3 in t; fewer when the transition
	 * removed a unit before the taker reached it.
	 */
	assert_true(runs >= NMUT * 8);
}

/* Many transitions, one at each step, starting from each mutation. */
static void test_snapshot_midway_one_per_step(void **state)
{
	struct ctx *c = *state;

	for (size_t i = 0; i < NMUT; i++) {
		struct midway m = { .at = UINT_MAX, .first = i };

		midway_alone = false;
		check_midway(c, &m, false);
		assert_true(m.ran >= 1);
		m = (struct midway){ .at = UINT_MAX, .first = i };
		check_midway(c, &m, true);
	}
}

/*
 * States keep the low 32 bits of the epoch that froze them.  The world is
 * built at epoch 1 and the snapshot's epoch is the one after 2^32 - 1:
 * 2^32 would be 0 there, so it is 2^32 + 1, whose low bits (1) are the
 * world's.  Only the reset at the wrap keeps every transition midway from
 * finding its state "already frozen" and showing through.
 */
static void test_snapshot_midway_epoch_wrap(void **state)
{
	struct ctx *c = *state;

	for (size_t i = 0; i < NMUT; i++) {
		struct midway m = { .at = 0, .first = i, .wrap = true };

		midway_alone = true;
		check_midway(c, &m, false);
		assert_true(m.ran == 1);
	}
}

/* Snapshot while threads move a child ------------------------------------- */

struct mover {
	struct store *s;
	struct store_node *from, *to;
	atomic_bool *stop;
	unsigned long moves;
	int bad;           /* first unexpected return code, 0 for none */
};

static void *mover_main(void *arg)
{
	struct mover *m = arg;

	while (!atomic_load(m->stop)) {
		int rc = store_rename(m->s, m->from, "x", m->to, "x", 0);

		if (rc == 0)
			m->moves++;
		else if (rc != -ENOENT && !m->bad)
			m->bad = rc;
	}
	return NULL;
}

struct churner {
	struct store *s;
	struct store_node *p;
	atomic_bool *stop;
	int bad;
};

/* Creates and unlinks other children, so the bucket changes shape. */
static void *churner_main(void *arg)
{
	struct churner *ch = arg;
	unsigned i = 0;

	while (!atomic_load(ch->stop)) {
		char name[16];
		struct store_node *n = NULL;
		bool created;
		int rc;

		snprintf(name, sizeof name, "y%u", i++ % 8);
		rc = store_create(ch->s, ch->p, name, &FOWN, true, &n,
				  &created);
		if (rc == 0)
			store_node_unref(ch->s, n);
		else if (!ch->bad)
			ch->bad = rc;
		rc = store_unlink(ch->s, ch->p, name);
		if (rc != 0 && !ch->bad)
			ch->bad = rc;
	}
	return NULL;
}

static void test_snapshot_consistent_under_renames(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *a, *b, *x;
	struct mover m[2];
	struct churner ch;
	pthread_t th[3];
	atomic_bool stop;
	int64_t xino;
	unsigned long in_a = 0, in_b = 0;
	int rounds = 1500;
	char msg[512] = "";

	t = mk(c, root(c), "t");
	a = mk(c, t, "a");
	b = mk(c, t, "b");
	x = cr(c, a, "x");
	publish(c, x, STORE_STAGE_REPLACE, "payload");
	xino = ino(x);
	atomic_init(&stop, false);
	m[0] = (struct mover){ c->s, a, b, &stop, 0, 0 };
	m[1] = (struct mover){ c->s, b, a, &stop, 0, 0 };
	ch = (struct churner){ c->s, b, &stop, 0 };
	assert_int_equal(pthread_create(&th[0], NULL, mover_main, &m[0]), 0);
	assert_int_equal(pthread_create(&th[1], NULL, mover_main, &m[1]), 0);
	assert_int_equal(pthread_create(&th[2], NULL, churner_main, &ch), 0);

	/*
	 * No cmocka assertion while the threads run: a failure would jump
	 * out of this frame, which the threads still use.  Record the first
	 * problem, stop, join, then fail.
	 */
	for (int i = 0; i < rounds && !msg[0]; i++) {
		struct store_snapshot sn;
		size_t seen = 0, tenants = 0, parents = 0;
		const struct store_snap_row *xr = NULL;
		int rc = store_snapshot_take(c->s, i % 2 ? t : NULL, &sn);

		if (rc != 0) {
			snprintf(msg, sizeof msg, "snapshot %d: %d", i, rc);
			break;
		}
		for (size_t k = 0; k < sn.n; k++) {
			const struct store_snap_row *r = &sn.rows[k];

			tenants += r->kind == STORE_SNAP_TENANT;
			parents += r->kind == STORE_SNAP_PARENT;
			if (r->kind == STORE_SNAP_CHILD &&
			    strcmp(r->child, "x") == 0) {
				seen++;
				xr = r;
			}
		}
		if (seen != 1 || tenants != 1 || parents != 2) {
			dump_snap(&sn);
			snprintf(msg, sizeof msg,
				 "snapshot %d: x %zu times, %zu tenants, "
				 "%zu parents", i, seen, tenants, parents);
		} else if (xr->ino != xino || xr->nlink != 1 ||
			   xr->size != 7 || xr->version != 1) {
			char row[256];

			row_str(row, sizeof row, xr);
			snprintf(msg, sizeof msg, "snapshot %d: x is %s", i,
				 row);
		} else if (strcmp(xr->parent, "a") == 0) {
			in_a++;
		} else if (strcmp(xr->parent, "b") == 0) {
			in_b++;
		} else {
			snprintf(msg, sizeof msg, "snapshot %d: x in %s", i,
				 xr->parent);
		}
		store_snapshot_free(&sn);
		if (i == rounds / 2) {
			char why[256] = "";

			if (store_check_all(c->s, why, sizeof why) != 0)
				snprintf(msg, sizeof msg, "check_all: %s", why);
		}
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	if (msg[0])
		fail_msg("%s", msg);
	assert_int_equal(m[0].bad, 0);
	assert_int_equal(m[1].bad, 0);
	assert_int_equal(ch.bad, 0);
	print_message("# %lu + %lu moves; x seen in a %lu, in b %lu times\n",
		      m[0].moves, m[1].moves, in_a, in_b);
	assert_true(m[0].moves + m[1].moves > 0);
	assert_int_equal(stats(c, NULL).children, 1);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_snapshot_midway_each_transition),
		TEST_HOOKED(test_snapshot_midway_one_per_step),
		TEST_HOOKED(test_snapshot_midway_epoch_wrap),
		TEST_HOOKED(test_snapshot_consistent_under_renames),
	};

	return run_store_tests("snapshot_midway", tests);
}
