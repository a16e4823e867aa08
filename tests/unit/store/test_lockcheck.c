/*
 * test_lockcheck.c - unit tests of the lock order checks of test builds
 * (store/lockcheck.c, the wrappers and levels of store/internal.h).
 *
 * Paths that keep the order run through; each way of breaking it aborts
 * with a report that names the place and both levels.  A breaking path
 * runs in a child process, so the abort it must end in is watched from
 * here, with what it wrote to stderr.
 */
#include "tests/unit/unit.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/internal.h"

#ifndef STORE_LOCKCHECK
#error "the unit tests are built with the lock order checks (-DSTORE_LOCKCHECK)"
#endif

static pthread_mutex_t m[8] = {
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
};

/* Just what the bucket wrappers read of a parent. */
struct fake_parent {
	struct store_node node;
	pthread_mutex_t lock;
};

static void fake_parent_init(struct fake_parent *p, uint64_t ino)
{
	memset(p, 0, sizeof(*p));
	p->node.ino = ino;
	pthread_mutex_init(&p->lock, NULL);
}

/*
 * Run @fn in a child process; it must die of SIGABRT having written
 * @want (and "statefs: ") to stderr.
 */
static void expect_abort(void (*fn)(void), const char *want)
{
	char out[1024] = "";
	size_t len = 0;
	ssize_t n;
	int fd[2], status;
	pid_t pid;

	assert_int_equal(pipe(fd), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], 2);
		fn();
		_exit(0); /* the check let it through */
	}
	close(fd[1]);
	while (len < sizeof(out) - 1 &&
	       (n = read(fd[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("no abort (status %d), stderr: %s", status, out);
	assert_non_null(strstr(out, "statefs: "));
	if (!strstr(out, want))
		fail_msg("expected \"%s\" in: %s", want, out);
	/* The place is the one that took the lock. */
	assert_non_null(strstr(out, "test_lockcheck.c:"));
}

/* The whole order, outermost first, then released: nothing to report,
 * and each level is held while it is. */
static void test_order_kept(void **state)
{
	struct fake_parent p1, p2;
	pthread_mutex_t *lo = &m[4] < &m[5] ? &m[4] : &m[5];
	pthread_mutex_t *hi = lo == &m[4] ? &m[5] : &m[4];

	(void)state;
	fake_parent_init(&p1, 10);
	fake_parent_init(&p2, 20);
	lock(&m[0], LOCK_SNAP_TAKER);
	lock(&m[1], LOCK_STORE);
	lock(&m[2], LOCK_TENANT);
	bucket_lock(&p1);
	bucket_lock(&p2);
	store_assert_held(LOCK_PARENT);
	lock(&m[3], LOCK_STAGE);
	lock(lo, LOCK_STRIPE);
	lock(hi, LOCK_STRIPE);
	lock(&m[6], LOCK_HEAP);
	store_assert_held(LOCK_HEAP);
	unlock(&m[6], LOCK_HEAP);
	/* Another leaf once the first is let go. */
	lock(&m[6], LOCK_EVLOG);
	unlock(&m[6], LOCK_EVLOG);
	unlock(hi, LOCK_STRIPE);
	unlock(lo, LOCK_STRIPE);
	unlock(&m[3], LOCK_STAGE);
	/* Buckets may go in any order. */
	bucket_unlock(&p1);
	bucket_unlock(&p2);
	unlock(&m[2], LOCK_TENANT);
	unlock(&m[1], LOCK_STORE);
	unlock(&m[0], LOCK_SNAP_TAKER);
	/* Nothing held: any level may come first, the transport's too. */
	lock(&m[7], LOCK_ENGINE_POOL);
	unlock(&m[7], LOCK_ENGINE_POOL);
	lock(&m[2], LOCK_STRIPE);
	unlock(&m[2], LOCK_STRIPE);
	pthread_mutex_destroy(&p1.lock);
	pthread_mutex_destroy(&p2.lock);
}

static void outer_after_inner(void)
{
	lock(&m[0], LOCK_TENANT);
	lock(&m[1], LOCK_STORE);
}

static void two_tenants(void)
{
	lock(&m[0], LOCK_TENANT);
	lock(&m[1], LOCK_TENANT);
}

static void buckets_descending(void)
{
	struct fake_parent p1, p2;

	fake_parent_init(&p1, 10);
	fake_parent_init(&p2, 20);
	bucket_lock(&p2);
	bucket_lock(&p1);
}

static void stripes_descending(void)
{
	pthread_mutex_t *lo = &m[4] < &m[5] ? &m[4] : &m[5];
	pthread_mutex_t *hi = lo == &m[4] ? &m[5] : &m[4];

	lock(hi, LOCK_STRIPE);
	lock(lo, LOCK_STRIPE);
}

static void stripe_twice(void)
{
	lock(&m[4], LOCK_STRIPE);
	lock(&m[4], LOCK_STRIPE); /* would wait for itself */
}

static void under_a_leaf(void)
{
	lock(&m[0], LOCK_HEAP);
	lock(&m[1], LOCK_TOMBQ); /* above it, but a leaf takes nothing */
}

static void transport_under_store_lock(void)
{
	lock(&m[0], LOCK_STRIPE);
	lock(&m[1], LOCK_ENGINE_POOL);
}

static void store_lock_under_transport(void)
{
	lock(&m[0], LOCK_ENGINE_CONN);
	lock(&m[1], LOCK_STORE);
}

static void not_held(void)
{
	lock(&m[0], LOCK_TENANT);
	store_assert_held(LOCK_PARENT);
}

static void release_not_held(void)
{
	lock(&m[0], LOCK_TENANT);
	unlock(&m[0], LOCK_TENANT);
	LOCKCHECK_DROP(LOCK_TENANT);
}

/* A highest bucket let go first does not let a lower one in. */
static void bucket_between(void)
{
	struct fake_parent p1, p2, p3;

	fake_parent_init(&p1, 10);
	fake_parent_init(&p2, 20);
	fake_parent_init(&p3, 30);
	bucket_lock(&p1);
	bucket_lock(&p3);
	bucket_unlock(&p3);
	bucket_lock(&p2);
}

static void test_violations(void **state)
{
	(void)state;
	expect_abort(outer_after_inner,
		     "taking 4 (store) while holding 5 (tenant): an outer "
		     "lock after an inner one");
	expect_abort(two_tenants, "two locks of one level");
	expect_abort(buckets_descending,
		     "taking 6 (parent bucket) while holding 6 (parent "
		     "bucket): not in ascending order");
	expect_abort(stripes_descending, "not in ascending order");
	expect_abort(stripe_twice, "not in ascending order");
	expect_abort(under_a_leaf, "a leaf is held");
	expect_abort(transport_under_store_lock,
		     "taken with no store lock held");
	expect_abort(store_lock_under_transport, "held alone");
	expect_abort(not_held, "expects the parent bucket lock held");
	expect_abort(release_not_held, "releasing tenant");
	expect_abort(bucket_between, "not in ascending order");
}

/* A full transition leaves nothing recorded as held: every wrapper that
 * took a level gave it back (else this thread's next lock would be
 * reported). */
static void test_store_paths_balanced(void **state)
{
	struct store_limits lim;
	struct store *s;
	struct store_node *t, *p, *c;
	struct store_snapshot snap;
	struct store_owner dir = { 0, 0, 0755 }, file = { 0, 0, 0644 };
	bool created;

	(void)state;
	store_limits_default(&lim);
	assert_int_equal(store_new(&lim, NULL, &s), 0);
	assert_int_equal(store_mkdir(s, store_root(s), "t", &dir, &t), 0);
	assert_int_equal(store_mkdir(s, t, "p", &dir, &p), 0);
	assert_int_equal(store_create(s, p, "c", &file, true, &c, &created), 0);
	assert_int_equal(store_snapshot_take(s, NULL, &snap), 0);
	store_snapshot_free(&snap);
	assert_int_equal(store_rmdir(s, store_root(s), "t", NULL), 0);
	store_node_unref(s, c);
	store_node_unref(s, p);
	store_node_unref(s, t);
	store_free(s);
	/* Every level free: the outermost and a leaf are both takeable. */
	lock(&m[0], LOCK_SNAP_TAKER);
	unlock(&m[0], LOCK_SNAP_TAKER);
	lock(&m[0], LOCK_ENGINE_POOL);
	unlock(&m[0], LOCK_ENGINE_POOL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_kept),
		cmocka_unit_test(test_violations),
		cmocka_unit_test(test_store_paths_balanced),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
