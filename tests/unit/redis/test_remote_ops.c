/*
 * test_remote_ops.c - the transitions of a mount on a shared store
 * (redis/ops.c) and their waits (redis/call.c), a real
 * mount (redis_store_new) on a real redis-server, against changes
 * another mount makes at the same time: whatever a transition answers,
 * the mount's own reads agree with it at once (read-your-writes),
 * refusals included; after a sync (the fsync of a directory), the mount
 * shows every change made before it.
 *
 * Each test starts its own redis-server on a unix socket in a temporary
 * directory (no TCP, no persistence; tests/unit/redis/redis_fixture.h); the
 * teardown unmounts, kills it, and it dies with this process
 * (PR_SET_PDEATHSIG).  The other mount is the test's own connection,
 * calling the Functions library as a mount does.  Waits are bounded by
 * store_timeout, set generously for a loaded machine.
 */
#define _GNU_SOURCE
#include "tests/unit/unit.h"
#include "tests/unit/redis/redis_fixture.h"
#include "tests/unit/redis/redis_world.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis/cluster.h"
#include "redis/redis.h"
#include "store/store.h"

static int setup(void **state)
{
	return world_setup(state, "rops");
}

/* Tenant @name made by the other mount: its key into @key. */
static void other_mkdir_tenant(struct world *w, const char *name, char *key,
			       size_t len)
{
	redisReply *r = fcall(w, "sfs_mkdir_tenant", 0, name, "0", "0", "493",
			      NULL);

	snprintf(key, len, "statefs:{statefs.t%lld}:t", r->element[3]->integer);
	freeReplyObject(r);
}

/* @count parents joined in tenant @key by the other mount, sent at once
 * (the follower of the mount under test has them all to apply). */
static void other_joins(struct world *w, const char *key, int count)
{
	for (int i = 0; i < count; i++) {
		char opid[32], name[16];
		const char *argv[] = { "FCALL", "sfs_join", "2", META, key,
				       w->inst, opid, "", name, "0", "0", "493" };

		snprintf(opid, sizeof(opid), "t:%u", ++w->opn);
		snprintf(name, sizeof(name), "p%d", i);
		assert_int_equal(redisAppendCommandArgv(w->redis.rc, 12, argv, NULL),
				 REDIS_OK);
	}
	for (int i = 0; i < count; i++) {
		redisReply *r = NULL;

		assert_int_equal(redisGetReply(w->redis.rc, (void **)&r), REDIS_OK);
		assert_non_null(r);
		assert_int_equal(r->type, REDIS_REPLY_ARRAY);
		assert_string_equal(r->element[0]->str, "OK");
		freeReplyObject(r);
	}
}

#define ROUNDS 50

/* Another mount made a tenant a moment ago: after this mount's sync
 * (the fsync of a directory), its lookup finds the tenant. */
static void test_sync_then_lookup(void **state)
{
	struct world *w = *state;
	struct store_node *n = NULL;
	char key[64];

	mount(w, 1024);
	for (int i = 0; i < ROUNDS; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "t%d", i);
		other_mkdir_tenant(w, name, key, sizeof(key));
		assert_int_equal(store_sync(w->s, NULL), 0);
		rc = store_lookup(w->s, store_root(w->s), name, &n);
		if (rc != 0)
			fail_msg("round %d: synced, lookup %d", i, rc);
		store_node_unref(w->s, n);
	}
}

/* A mount that follows only what it uses (follow_idle): a tenant another
 * mount made is a shell here, whose link count is the store's (2 + its
 * parents, also those joined since), and a lookup or a listing in it
 * after its use (store_use, as fs/ makes before each request on one of
 * its nodes) finds what it holds. */
static void test_shell_links_and_lookup(void **state)
{
	struct world *w = *state;
	struct store_node *t = NULL, *p = NULL;
	struct store_dirlist l;
	struct store_attr a;
	char key[64];

	mount_idle(w, 16, 30000);
	other_mkdir_tenant(w, "t", key, sizeof(key));
	other_joins(w, key, 2);
	assert_int_equal(store_sync(w->s, NULL), 0);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "t", &t), 0);
	assert_int_equal(store_getattr(w->s, t, &a), 0);
	assert_int_equal(a.nlink, 4);
	freeReplyObject(fcall(w, "sfs_join", 1, key, "p2", "0", "0", "493",
			      NULL));
	assert_int_equal(store_sync(w->s, NULL), 0);
	assert_int_equal(store_getattr(w->s, t, &a), 0);
	assert_int_equal(a.nlink, 5);
	assert_int_equal(store_use(w->s, t), 0);
	assert_int_equal(store_lookup(w->s, t, "p2", &p), 0);
	store_node_unref(w->s, p);
	assert_int_equal(store_list(w->s, t, &l), 0);
	assert_int_equal(l.n, 3);
	store_dirlist_free(&l);
	assert_int_equal(store_getattr(w->s, t, &a), 0);
	assert_int_equal(a.nlink, 5);
	store_node_unref(w->s, t);
}

/* Another mount made a tenant a moment ago: this mount's mkdir of it is
 * EEXIST, and its lookup right after finds the tenant. */
static void test_mkdir_eexist_then_lookup(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *n = NULL;
	char key[64];

	mount(w, 1024);
	for (int i = 0; i < ROUNDS; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "t%d", i);
		other_mkdir_tenant(w, name, key, sizeof(key));
		assert_int_equal(store_mkdir(w->s, store_root(w->s), name, &own,
					     &n), -EEXIST);
		rc = store_lookup(w->s, store_root(w->s), name, &n);
		if (rc != 0)
			fail_msg("round %d: mkdir said EEXIST, lookup %d", i, rc);
		store_node_unref(w->s, n);
	}
}

/* Another mount removed a tenant (after a thousand joins in it, which
 * this mount's follower applies first): this mount's rmdir of it is
 * ENOENT, and its lookup right after does not find the tenant. */
static void test_rmdir_enoent_then_lookup(void **state)
{
	struct world *w = *state;
	struct store_node *n = NULL;
	char key[64];

	mount(w, 1024);
	for (int i = 0; i < 5; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "t%d", i);
		other_mkdir_tenant(w, name, key, sizeof(key));
		assert_int_equal(store_sync(w->s, NULL), 0);
		assert_int_equal(store_lookup(w->s, store_root(w->s), name, &n), 0);
		store_node_unref(w->s, n);
		other_joins(w, key, 1000);
		freeReplyObject(fcall(w, "sfs_rmdir_tenant", 0, name, "", "", "",
				      NULL));
		assert_int_equal(store_rmdir(w->s, store_root(w->s), name, NULL),
				 -ENOENT);
		rc = store_lookup(w->s, store_root(w->s), name, &n);
		if (rc == 0) {
			store_node_unref(w->s, n);
			fail_msg("round %d: rmdir said ENOENT, lookup found it", i);
		}
		assert_int_equal(rc, -ENOENT);
	}
}

struct instance_reader {
	struct store *s;
	atomic_bool stop;
};

/* .stats's part: the store's instance, read again and again. */
static void *read_instance(void *arg)
{
	struct instance_reader *r = arg;
	uint64_t sum = 0;

	while (!atomic_load(&r->stop))
		sum += store_instance_id(r->s);
	return (void *)(uintptr_t)sum;
}

/* The store loses its data (FLUSHALL) while .stats is read: the mount
 * becomes a new instance under the reader's feet, and the reader sees
 * the old instance or the new one.  (Under TSan: no race.) */
static void test_new_instance_while_read(void **state)
{
	struct world *w = *state;
	struct instance_reader r = { .s = NULL };
	uint64_t old;
	pthread_t th;
	redisReply *rep;
	int i;

	mount(w, 1024);
	r.s = w->s;
	atomic_store(&r.stop, false);
	old = store_instance_id(w->s);
	assert_int_equal(pthread_create(&th, NULL, read_instance, &r), 0);
	rep = redisCommand(w->redis.rc, "FLUSHALL");
	assert_non_null(rep);
	freeReplyObject(rep);
	/* The follower finds out within a second or so; generous. */
	for (i = 0; i < 3000 && store_instance_id(w->s) == old; i++)
		nap(20);
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	assert_int_not_equal(store_instance_id(w->s), old);
}

/* The store loses its data (FLUSHALL): the mount's first calls are
 * made before its follower noticed.  A call about the root alone (a
 * tenant's mkdir, its rmdir) succeeds on the new instance; a call
 * through a node of the old one gets ESTALE, and a lookup right after
 * it (the kernel's retry of a path) sees the new instance, not the
 * old node. */
static void test_first_call_after_new_instance(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *a = NULL, *b = NULL, *p = NULL, *n = NULL;
	struct timespec t0, t1;
	uint64_t inst;
	redisReply *r;

	mount(w, 1024);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "acme", &own, &a), 0);
	inst = store_instance_id(w->s);
	r = redisCommand(w->redis.rc, "FLUSHALL");
	assert_non_null(r);
	freeReplyObject(r);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "beta", &own, &b), 0);
	assert_int_not_equal(store_instance_id(w->s), inst);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "beta", &n), 0);
	store_node_unref(w->s, n);
	/* acme was the old instance's: its old node is stale, its name
	 * free. */
	assert_int_equal(store_mkdir(w->s, a, "p", &own, &p), -ESTALE);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "acme", &n),
			 -ENOENT);
	store_node_unref(w->s, a);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "acme", &own, &a), 0);

	/* Again, and the first call is through a node: ESTALE, then the
	 * path finds the new instance.  The ESTALE comes once the new
	 * instance is loaded, long before store_timeout (no wait for a seq
	 * of the old instance's logs). */
	inst = store_instance_id(w->s);
	r = redisCommand(w->redis.rc, "FLUSHALL");
	assert_non_null(r);
	freeReplyObject(r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(store_mkdir(w->s, a, "p", &own, &p), -ESTALE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (t1.tv_sec - t0.tv_sec > 30)
		fail_msg("ESTALE after %ld s", (long)(t1.tv_sec - t0.tv_sec));
	assert_int_not_equal(store_instance_id(w->s), inst);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "acme", &n),
			 -ENOENT);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "beta", &n),
			 -ENOENT);
	/* And a tenant's rmdir as the first call: ENOENT on the new one. */
	r = redisCommand(w->redis.rc, "FLUSHALL");
	assert_non_null(r);
	freeReplyObject(r);
	assert_int_equal(store_rmdir(w->s, store_root(w->s), "acme", NULL),
			 -ENOENT);
	store_node_unref(w->s, a);
	store_node_unref(w->s, b);
}

/* The follower keeps following the right logs as tenants come and go:
 * with 40 tenants followed and every third removed, another mount's
 * joins in each remaining tenant are all seen after a sync, and none in
 * a removed one. */
static void test_follows_tenants_as_they_go(void **state)
{
	struct world *w = *state;
	char keys[40][64], name[16];
	struct store_node *t = NULL, *p = NULL;

	mount(w, 1024);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		other_mkdir_tenant(w, name, keys[i], sizeof(keys[i]));
	}
	assert_int_equal(store_sync(w->s, NULL), 0);
	for (int i = 0; i < 40; i += 3) {
		snprintf(name, sizeof(name), "t%d", i);
		freeReplyObject(fcall(w, "sfs_rmdir_tenant", 0, name, "", "", "",
				      NULL));
	}
	for (int i = 0; i < 40; i++)
		if (i % 3)
			freeReplyObject(fcall(w, "sfs_join", 1, keys[i], "p", "0",
					      "0", "493", NULL));
	assert_int_equal(store_sync(w->s, NULL), 0);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		if (i % 3 == 0) {
			assert_int_equal(store_lookup(w->s, store_root(w->s),
						      name, &t), -ENOENT);
			continue;
		}
		assert_int_equal(store_lookup(w->s, store_root(w->s), name, &t), 0);
		if (store_lookup(w->s, t, "p", &p) != 0)
			fail_msg("tenant %s: its join not applied", name);
		store_node_unref(w->s, p);
		store_node_unref(w->s, t);
	}
}

/* .stats's refused_stale of the store, as this mount shows it. */
static uint64_t stale_refusals(struct world *w)
{
	struct store_stats st;

	assert_int_equal(store_stats(w->s, NULL, &st), 0);
	return st.refused[STORE_REFUSED_STALE];
}

/* An operation through a node of an earlier incarnation is an ESTALE
 * refusal, counted in .stats as the embedded store counts it, whether
 * the store refused it (a create in a parent that left) or the mount
 * did before asking (a join in a removed tenant, a lease of a node of
 * it, a depart in it). */
static void test_stale_refusals_counted(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 }, fown = { 0, 0, 0644 };
	struct store_node *a = NULL, *p = NULL, *c = NULL, *q = NULL;
	uint64_t n0;
	bool created;

	mount(w, 1024);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "acme", &own, &a), 0);
	assert_int_equal(store_mkdir(w->s, a, "p", &own, &p), 0);
	assert_int_equal(store_rmdir(w->s, a, "p", NULL), 0);
	n0 = stale_refusals(w);
	assert_int_equal(store_create(w->s, p, "c", &fown, true, &c, &created),
			 -ESTALE);
	assert_int_equal(stale_refusals(w), n0 + 1);
	assert_int_equal(store_rmdir(w->s, store_root(w->s), "acme", NULL), 0);
	assert_int_equal(store_mkdir(w->s, a, "q", &own, &q), -ESTALE);
	assert_int_equal(stale_refusals(w), n0 + 2);
	assert_int_equal(store_set_ttl(w->s, p, 1000), -ESTALE);
	assert_int_equal(stale_refusals(w), n0 + 3);
	assert_int_equal(store_depart(w->s, a, "x", NULL), -ESTALE);
	assert_int_equal(stale_refusals(w), n0 + 4);
	store_node_unref(w->s, p);
	store_node_unref(w->s, a);
}

/* How many times the server ran command @cmd (lower case) so far. */
static unsigned long long calls_of(struct world *w, const char *cmd)
{
	redisReply *r = redisCommand(w->redis.rc, "INFO commandstats");
	char pat[64];
	const char *at;
	unsigned long long n = 0;

	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	snprintf(pat, sizeof(pat), "cmdstat_%s:calls=", cmd);
	at = strstr(r->str, pat);
	if (at)
		n = strtoull(at + strlen(pat), NULL, 10);
	freeReplyObject(r);
	return n;
}

/* The CPU time (clock ticks) this process's follower thread has used. */
static unsigned long long follower_ticks(void)
{
	char path[300], buf[512];
	unsigned long long sum = 0;
	bool seen = false;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		FILE *f;
		const char *p;
		unsigned long long ut, st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f) ||
		    strncmp(buf, "statefs-follow", 14) != 0) {
			fclose(f);
			continue;
		}
		fclose(f);
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		f = fopen(path, "r");
		assert_non_null(f);
		assert_non_null(fgets(buf, sizeof(buf), f));
		fclose(f);
		/* Fields 14 and 15, after the ")" that ends the name. */
		p = strrchr(buf, ')');
		assert_non_null(p);
		assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u "
					"%*u %*u %*u %*u %llu %llu", &ut, &st), 2);
		sum += ut + st;
		seen = true;
	}
	closedir(d);
	assert_true(seen);
	return sum;
}

/* For @ms, the follower of a failing store: how many XREADs it sends
 * and how much CPU it uses.  A follower that spins sends thousands and
 * uses most of a core; one that backs off (50 ms doubling to 1 s) sends
 * a handful and uses next to none. */
static void follower_must_back_off(struct world *w, unsigned ms)
{
	unsigned long long x0 = calls_of(w, "xread"), t0 = follower_ticks();
	unsigned long long x1, t1;

	nap(ms);
	x1 = calls_of(w, "xread");
	t1 = follower_ticks();
	if (x1 - x0 > 20)
		fail_msg("%llu XREADs in %u ms", x1 - x0, ms);
	/* Clock ticks are 10 ms: at most a tenth of the period. */
	if (t1 - t0 > ms / 100)
		fail_msg("%llu ticks of CPU in %u ms", t1 - t0, ms);
}

/* A pass of expiry asks the store about the tenants that have
 * something due, not about every tenant: with 60 tenants and one lease
 * due, the clock's move makes a handful of calls, and the lease ends. */
static void test_expiry_asks_due_tenants_only(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *t = NULL, *p = NULL, *n = NULL;
	unsigned long long f0, f1;

	mount(w, 1024);
	for (int i = 0; i < 60; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%d", i);
		assert_int_equal(store_mkdir(w->s, store_root(w->s), name, &own,
					     &t), 0);
		if (i == 30) {
			assert_int_equal(store_mkdir(w->s, t, "p", &own, &p), 0);
			assert_int_equal(store_set_ttl(w->s, p, 1000), 0);
		}
		store_node_unref(w->s, t);
	}
	f0 = calls_of(w, "fcall");
	assert_int_equal(store_clock_advance(w->s, 2000), 0);
	f1 = calls_of(w, "fcall");
	/* The move, the tenant's expiry, the store's scope. */
	if (f1 - f0 > 5)
		fail_msg("%llu calls for one due lease", f1 - f0);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "t30", &t), 0);
	assert_int_equal(store_lookup(w->s, t, "p", &n), -ENOENT);
	store_node_unref(w->s, t);
	store_node_unref(w->s, p);
}

/* A tenant's log is a key of another type (WRONGTYPE for every XREAD):
 * the follower backs off instead of spinning, and goes on once the key
 * is right again. */
static void test_follower_backs_off_wrong_reply(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *t = NULL, *u = NULL;
	redisReply *r;

	mount(w, 1024);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "acme", &own, &t), 0);
	r = redisCommand(w->redis.rc, "DEL statefs:{statefs.t1}:log");
	assert_non_null(r);
	assert_int_equal(r->integer, 1);
	freeReplyObject(r);
	r = redisCommand(w->redis.rc, "SET statefs:{statefs.t1}:log x");
	assert_non_null(r);
	freeReplyObject(r);
	/* Its first failures, then the period. */
	nap(200);
	follower_must_back_off(w, 2000);
	r = redisCommand(w->redis.rc, "DEL statefs:{statefs.t1}:log");
	freeReplyObject(r);
	/* The follower applies the root log again: a new tenant appears. */
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "beta", &own, &u), 0);
	store_node_unref(w->s, u);
	store_node_unref(w->s, t);
}

/* The store is gone (its server killed: every connection refused):
 * the follower waits between its attempts instead of spinning. */
static void test_follower_backs_off_store_gone(void **state)
{
	struct world *w = *state;
	unsigned long long t0, t1;

	mount(w, 1024);
	redis_fixture_kill(&w->redis.pid);
	nap(200);
	t0 = follower_ticks();
	nap(2000);
	t1 = follower_ticks();
	if (t1 - t0 > 20)
		fail_msg("%llu ticks of CPU in 2 s", t1 - t0);
}

/* The library is gone (FUNCTION DELETE) and a tenant's log has an entry
 * past a gap: the follower cannot reload the tenant (sfs_dump fails),
 * and backs off instead of reading the entry and failing again at
 * once. */
static void test_follower_backs_off_no_library(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *t = NULL;
	redisReply *r;

	mount(w, 1024);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "acme", &own, &t), 0);
	r = redisCommand(w->redis.rc, "FUNCTION DELETE statefs");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = redisCommand(w->redis.rc, "XADD statefs:{statefs.t1}:log * op join "
			 "seq 99 ms 1 ns 1");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	freeReplyObject(r);
	nap(200);
	follower_must_back_off(w, 2000);
	store_node_unref(w->s, t);
}


/* The tenant layout ------------------------------------------------------- */

/* Token @i (0: the first after the "[db client]" part) of MONITOR line
 * @line, its quotes and escapes undone, into @out; false past the last. */
static bool monitor_arg(const char *line, int i, char *out, size_t len)
{
	const char *p = strchr(line, ']');

	for (int k = 0; p && *p; k++) {
		size_t n = 0;

		p = strchr(p, '"');
		if (!p)
			return false;
		for (p++; *p && *p != '"'; p++) {
			char c = *p;

			if (c == '\\' && p[1]) {
				p++;
				c = *p == 'n' ? '\n' : *p;
				if (*p == 'x' && p[1] && p[2]) {
					char hex[3] = { p[1], p[2], 0 };

					c = (char)strtol(hex, NULL, 16);
					p += 2;
				}
			}
			if (k == i && n + 1 < len)
				out[n++] = c;
		}
		if (k == i) {
			out[n] = '\0';
			return true;
		}
		if (*p)
			p++;
	}
	return false;
}

/* Mount a store of the tenant layout (-o store_layout=tenant), every
 * tenant followed, testclock. */
static void mount_tenant_layout(struct world *w)
{
	redisReply *r;

	mount_store(w, 0, 0, true);
	r = redisCommand(w->redis.rc, "HMGET %s layout instance", META);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_string_equal(r->element[0]->str, "tenant");
	assert_string_equal(r->element[1]->str, w->inst);
	freeReplyObject(r);
}

/* A mkdir of a tenant that stopped between its two steps (another mount
 * listed it at the root, then died): this mount's mkdir of the name is
 * EEXIST, and completes the second step, so that the tenant it names is
 * there, as a refusal holds; an rmdir likewise stopped is completed by
 * the next mkdir of the name. */
static void test_tenant_layout_mkdir_rolls_forward(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *t = NULL, *p = NULL;
	redisReply *r;

	mount_tenant_layout(w);
	/* Step 1 alone, as the dead mount made it. */
	freeReplyObject(fcall(w, "sfs_mkdir_tenant", 0, "t", "0", "0", "493",
			      NULL));
	r = redisCommand(w->redis.rc, "EXISTS statefs:{statefs.t1}:t");
	assert_int_equal(r->integer, 0);
	freeReplyObject(r);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "t", &own, &t),
			 -EEXIST);
	r = redisCommand(w->redis.rc, "EXISTS statefs:{statefs.t1}:t");
	assert_int_equal(r->integer, 1);
	freeReplyObject(r);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "t", &t), 0);
	assert_int_equal(store_mkdir(w->s, t, "p", &own, &p), 0);
	store_node_unref(w->s, p);
	store_node_unref(w->s, t);
	/* An rmdir that stopped after its first step (the tenant cleared
	 * in its slot, its name still listed): a mkdir of the name unlists
	 * it and makes a new tenant. */
	r = redisCommandArgv(w->redis.rc, 12, (const char *[]){
		"FCALL", "sfs_rmdir_tenant", "2", "statefs:{statefs.t1}:meta",
		"statefs:{statefs.t1}:t", w->inst, "t:rm", "", "t", "", "", "" },
		NULL);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_string_equal(r->element[0]->str, "OK");
	freeReplyObject(r);
	r = redisCommand(w->redis.rc, "HGET statefs:{statefs}:tenants t");
	assert_string_equal(r->str, "1");
	freeReplyObject(r);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "t", &own, &t), 0);
	store_node_unref(w->s, t);
	r = redisCommand(w->redis.rc, "HGET statefs:{statefs}:tenants t");
	assert_string_equal(r->str, "2");
	freeReplyObject(r);
}

/* A mount of a store of the tenant layout (-o store_layout=tenant) makes
 * every kind of transition, and every FCALL it sends names keys of one
 * Redis Cluster slot (cluster_key_slot, as CLUSTER KEYSLOT): a tenant's
 * call its own meta and hash, a root call the store's meta alone.  Its
 * answers are the root layout's: EXDEV across tenants, the root .stats
 * summed over the tenants, the store's drain cleared in every tenant. */
static void test_tenant_layout_one_slot_per_call(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *t = NULL, *u = NULL, *p = NULL, *q = NULL, *c = NULL;
	struct store_stats st;
	redisContext *mon;
	redisReply *r;
	int calls = 0;
	bool made = false;

	mount_tenant_layout(w);
	mon = redisConnectUnix(w->redis.sock);
	assert_non_null(mon);
	assert_int_equal(mon->err, 0);
	r = redisCommand(mon, "MONITOR");
	assert_non_null(r);
	freeReplyObject(r);

	assert_int_equal(store_mkdir(w->s, store_root(w->s), "t", &own, &t), 0);
	assert_int_equal(store_mkdir(w->s, store_root(w->s), "u", &own, &u), 0);
	assert_int_equal(store_mkdir(w->s, t, "p", &own, &p), 0);
	assert_int_equal(store_mkdir(w->s, u, "q", &own, &q), 0);
	assert_int_equal(store_create(w->s, p, "c", &own, true, &c, &made), 0);
	assert_int_equal(store_link(w->s, c, p, "d"), 0);
	assert_int_equal(store_link(w->s, c, q, "c"), -EXDEV);
	assert_int_equal(store_rename(w->s, p, "d", q, "d", 0), -EXDEV);
	assert_int_equal(store_rename(w->s, p, "d", p, "e", 0), 0);
	assert_int_equal(store_set_ttl(w->s, q, 1000), 0);
	assert_int_equal(store_clock_advance(w->s, 2000), 0);
	assert_int_equal(store_sync(w->s, NULL), 0);
	assert_int_equal(store_stats(w->s, NULL, &st), 0);
	assert_int_equal(st.tenants, 2);
	assert_int_equal(st.parents, 1); /* u/q expired */
	assert_int_equal(st.children, 1);
	assert_int_equal(st.links, 2);
	assert_int_equal(store_rmdir(w->s, store_root(w->s), "u", NULL), 0);
	assert_int_equal(store_drain_now(w->s, NULL), 0);
	assert_int_equal(store_stats(w->s, NULL, &st), 0);
	assert_int_equal(st.tenants, 0);
	assert_int_equal(st.parents, 0);

	/* What MONITOR saw, until it is quiet. */
	redisSetTimeout(mon, (struct timeval){ 0, 500000 });
	while (redisGetReply(mon, (void **)&r) == REDIS_OK && r) {
		char cmd[16], nk[8], key[256], first[256];
		unsigned slot = 0;
		int n;

		if (r->type == REDIS_REPLY_STATUS &&
		    monitor_arg(r->str, 0, cmd, sizeof(cmd)) &&
		    (strcmp(cmd, "FCALL") == 0 || strcmp(cmd, "FCALL_RO") == 0) &&
		    monitor_arg(r->str, 2, nk, sizeof(nk)) && (n = atoi(nk)) > 0) {
			for (int i = 0; i < n; i++) {
				assert_true(monitor_arg(r->str, 3 + i, key, sizeof(key)));
				if (i == 0) {
					slot = cluster_key_slot(key, strlen(key));
					snprintf(first, sizeof(first), "%s", key);
				} else if (cluster_key_slot(key, strlen(key)) != slot) {
					fail_msg("keys of two slots in one call: %s", r->str);
				}
			}
			/* A tenant's call never names the store's meta. */
			if (n > 1 && strcmp(first, META) == 0)
				fail_msg("a tenant call with the store's meta: %s", r->str);
			calls++;
		}
		freeReplyObject(r);
	}
	redisFree(mon);
	if (calls < 20)
		fail_msg("only %d FCALLs seen", calls);
	store_node_unref(w->s, c);
	store_node_unref(w->s, q);
	store_node_unref(w->s, p);
	store_node_unref(w->s, u);
	store_node_unref(w->s, t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_shell_links_and_lookup,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_then_lookup,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_eexist_then_lookup,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_rmdir_enoent_then_lookup,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_instance_while_read,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_call_after_new_instance,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry_asks_due_tenants_only,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_follows_tenants_as_they_go,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_refusals_counted,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_follower_backs_off_wrong_reply,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_follower_backs_off_no_library,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_tenant_layout_one_slot_per_call,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_tenant_layout_mkdir_rolls_forward,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_follower_backs_off_store_gone,
						setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
