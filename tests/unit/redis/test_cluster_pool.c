/*
 * test_cluster_pool.c - the transport on a Redis Cluster (redis/conn.c,
 * redis/route.c) against a real one: three primaries started by the
 * test (tests/unit/redis/cluster_fixture.h), stopped in the group's
 * teardown whatever happened.  A pool finds the cluster from one
 * redis:// node or a cluster:// seed list; its calls go to the primary
 * of their key's slot (no MOVED needed, counted by the nodes' own
 * errorstats), follow a MOVED after a slot moved (CLUSTER SETSLOT ...
 * NODE) and an ASK during a slot's migration (a key read only: a
 * function waits), load a Functions library on every primary and run
 * it there, and a killed primary stops only its own slots.
 *
 * The killed primary is the last test: the cluster is not whole after it.
 */
#include "tests/unit/unit.h"
#include "tests/unit/redis/cluster_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/cluster.h"
#include "redis/conn.h"
#include "redis/link.h"
#include "redis/wire.h"

static struct cluster_fixture cl;

static int group_setup(void **state)
{
	return cluster_fixture_start(&cl, "cpool", 3);
}

static int group_teardown(void **state)
{
	cluster_fixture_stop(&cl);
	return 0;
}

/* A pool on the cluster: through node 0 as redis:// (@seeds false), or
 * every node as cluster:// seeds. */
static struct rconn_pool *open_pool(bool seeds)
{
	struct store_remote r;
	struct rconn_pool *p = NULL;
	char err[400] = "";
	int rc;

	store_remote_default(&r);
	r.timeout_ms = 5000;
	if (seeds) {
		r.kind = STORE_REMOTE_CLUSTER;
		for (unsigned i = 0; i < cl.n; i++) {
			strcpy(r.sentinels[i].host, "127.0.0.1");
			r.sentinels[i].port = cl.port[i];
		}
		r.nsentinels = cl.n;
	} else {
		r.kind = STORE_REMOTE_TCP;
		strcpy(r.addr.host, "127.0.0.1");
		r.addr.port = cl.port[0];
	}
	rc = rconn_pool_open(&r, 2, &p, err, sizeof(err));
	if (rc != 0)
		fail_msg("rconn_pool_open: %d %s", rc, err);
	assert_true(rconn_pool_is_cluster(p));
	return p;
}

/* One command through @p, words separated by blanks. */
static int pcall(struct rconn_pool *p, uint64_t budget_ms, const char *cmd,
		 redisReply **rep)
{
	char buf[512], *save = NULL;
	const char *argv[16];
	int argc = 0;

	snprintf(buf, sizeof(buf), "%s", cmd);
	for (char *t = strtok_r(buf, " ", &save); t && argc < 16;
	     t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	return rconn_pool_call(p, budget_ms, argc, argv, NULL, rep);
}

/* @cmd through @p must answer the string or status @want. */
static void expect_str(struct rconn_pool *p, const char *cmd, const char *want)
{
	redisReply *rep = NULL;
	int rc = pcall(p, 10000, cmd, &rep);

	if (rc != 0)
		fail_msg("%s: %d", cmd, rc);
	if (rep->type == REDIS_REPLY_ERROR)
		fail_msg("%s: %s", cmd, rep->str);
	assert_true(rep->type == REDIS_REPLY_STRING ||
		    rep->type == REDIS_REPLY_STATUS);
	assert_string_equal(rep->str, want);
	freeReplyObject(rep);
}

/* Send @fmt to node @i and expect no error. */
static void on_ok(int i, const char *fmt, const char *a, const char *b)
{
	redisReply *r = redisCommand(cl.rc[i], fmt, a, b);

	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("%s", r->str);
	freeReplyObject(r);
}

/* The node (index in cl) that serves @key, by CLUSTER KEYSLOT and
 * CLUSTER SLOTS of node 0. */
static int owner_of(const char *key)
{
	redisReply *r = redisCommand(cl.rc[0], "CLUSTER SLOTS");
	struct cluster_map *m = NULL;
	char why[WHY_MAX] = "";
	int i;

	assert_non_null(r);
	assert_int_equal(cluster_map_parse(r, "127.0.0.1", &m, why), 0);
	freeReplyObject(r);
	i = cluster_fixture_node(&cl, cluster_map_node(m, cluster_key_slot(
					       key, strlen(key)))->port);
	cluster_map_free(m);
	assert_true(i >= 0);
	return i;
}

/* MOVED and ASK errors every node gave since the last reset. */
static long redirections(void)
{
	long n = 0;

	for (unsigned i = 0; i < cl.n; i++) {
		redisReply *r = redisCommand(cl.rc[i], "INFO errorstats");
		const char *f;

		if (!r)
			continue; /* a node killed */
		if (r->type == REDIS_REPLY_STRING) {
			if ((f = strstr(r->str, "errorstat_MOVED:count=")))
				n += strtol(f + 22, NULL, 10);
			if ((f = strstr(r->str, "errorstat_ASK:count=")))
				n += strtol(f + 20, NULL, 10);
		}
		freeReplyObject(r);
	}
	return n;
}

static void reset_stats(void)
{
	for (unsigned i = 0; i < cl.n; i++)
		on_ok((int)i, "CONFIG RESETSTAT", NULL, NULL);
}

/* The node ids of node @i into @id. */
static void myid(int i, char *id)
{
	redisReply *r = redisCommand(cl.rc[i], "CLUSTER MYID");

	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	snprintf(id, CLUSTER_ID_MAX + 1, "%s", r->str);
	freeReplyObject(r);
}

/* Routing ------------------------------------------------------------------ */

/* The key a command is routed by: after numkeys for a function, after
 * STREAMS for XREAD, else the first argument; none for TIME, FUNCTION,
 * a function given no key. */
static void test_first_key(void **state)
{
	static const struct {
		const char *cmd;
		const char *key; /* NULL: no key */
	} cases[] = {
		{ "FCALL sfs_join 2 P:{P.t1}:t P:{P}:meta x", "P:{P.t1}:t" },
		{ "FCALL_RO sfs_sync 0 x", NULL },
		{ "fcall f 01 k", "k" },
		{ "XREAD COUNT 10 BLOCK 5 STREAMS P:{P}:log 0", "P:{P}:log" },
		{ "XREAD COUNT 10", NULL },
		{ "XRANGE P:{P.t2}:log - +", "P:{P.t2}:log" },
		{ "HGET P:{P.t3}:t seq", "P:{P.t3}:t" },
		{ "TIME", NULL },
		{ "FUNCTION LIST LIBRARYNAME statefs", NULL },
		{ "info memory", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[200], *save = NULL;
		const char *argv[16];
		int argc = 0;

		snprintf(buf, sizeof(buf), "%s", cases[i].cmd);
		for (char *t = strtok_r(buf, " ", &save); t && argc < 16;
		     t = strtok_r(NULL, " ", &save))
			argv[argc++] = t;
		assert_int_equal(route_slot_of(argc, argv, NULL),
				 cases[i].key ? (int)cluster_key_slot(cases[i].key,
						strlen(cases[i].key)) : -1);
	}
}

/*
 * Keys of many slots, through a pool found from one node: each SET lands
 * on its slot's primary at once (no node answered MOVED or ASK), and
 * each GET reads it back; a dedicated connection for a key talks to
 * that key's primary.
 */
static void test_calls_routed(void **state)
{
	struct rconn_pool *p = open_pool(false);
	char cmd[128], key[64], val[16];
	struct rconn *c = NULL;
	redisReply *rep = NULL;
	int hit[CLUSTER_FIXTURE_NODES_MAX] = { 0 };

	reset_stats();
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "statefs:{statefs.t%d}:t", i);
		snprintf(cmd, sizeof(cmd), "SET %s v%d", key, i);
		expect_str(p, cmd, "OK");
		snprintf(val, sizeof(val), "v%d", i);
		snprintf(cmd, sizeof(cmd), "GET %s", key);
		expect_str(p, cmd, val);
		/* It is on its owner (the test's own connection). */
		rep = redisCommand(cl.rc[owner_of(key)], "GET %s", key);
		assert_int_equal(rep->type, REDIS_REPLY_STRING);
		assert_string_equal(rep->str, val);
		freeReplyObject(rep);
		hit[owner_of(key)]++;
	}
	for (unsigned i = 0; i < cl.n; i++)
		assert_true(hit[i] > 0);
	assert_int_equal(redirections(), 0);
	/* A command without a key goes to some primary, or to the one a
	 * slot names. */
	expect_str(p, "PING", "PONG");
	for (int i = 0; i < 20; i++) {
		const char *av[] = { "CLUSTER", "MYID" };
		char id[CLUSTER_ID_MAX + 1];

		snprintf(key, sizeof(key), "statefs:{statefs.t%d}:t", i);
		myid(owner_of(key), id);
		assert_int_equal(rconn_pool_call_slot(p, cluster_key_slot(key,
				 strlen(key)), 0, 2, av, NULL, &rep), 0);
		assert_int_equal(rep->type, REDIS_REPLY_STRING);
		assert_string_equal(rep->str, id);
		freeReplyObject(rep);
	}

	assert_int_equal(rconn_open_key(p, "statefs:{statefs.t7}:t", 0, &c), 0);
	{
		const char *av[] = { "GET", "statefs:{statefs.t7}:t" };

		assert_int_equal(rconn_call(c, 0, 2, av, NULL, &rep), 0);
		assert_int_equal(rep->type, REDIS_REPLY_STRING);
		assert_string_equal(rep->str, "v7");
		freeReplyObject(rep);
	}
	rconn_close(c);
	assert_int_equal(redirections(), 0);
	rconn_pool_close(p);
}

/*
 * A small library loaded by rconn_library_ensure on every primary, its
 * functions called with keys of every node's slots.
 */
static const char lib[] =
	"#!lua name=cpool\n"
	"redis.register_function{ function_name = 'sfs_version', callback = "
	"function() return 1 end, flags = { 'no-writes' } }\n"
	"redis.register_function('cp_set', function(keys, args) "
	"return redis.call('SET', keys[1], args[1]) end)\n"
	"redis.register_function{ function_name = 'cp_get', callback = "
	"function(keys, args) return redis.call('GET', keys[1]) end, "
	"flags = { 'no-writes' } }\n";

static void test_library_on_every_primary(void **state)
{
	struct rconn_pool *p = open_pool(true);
	char err[400] = "", cmd[160], val[16];

	assert_int_equal(rconn_library_ensure(p, "cpool", lib, 1, err,
					      sizeof(err)), 0);
	assert_string_equal(err, "");
	for (unsigned i = 0; i < cl.n; i++) {
		redisReply *r = redisCommand(cl.rc[i],
					     "FUNCTION LIST LIBRARYNAME cpool");

		assert_int_equal(r->type, REDIS_REPLY_ARRAY);
		assert_int_equal(r->elements, 1);
		freeReplyObject(r);
	}
	reset_stats();
	for (int i = 0; i < 100; i++) {
		snprintf(cmd, sizeof(cmd), "FCALL cp_set 1 fc:{t%d} x%d", i, i);
		expect_str(p, cmd, "OK");
		snprintf(cmd, sizeof(cmd), "FCALL_RO cp_get 1 fc:{t%d}", i);
		snprintf(val, sizeof(val), "x%d", i);
		expect_str(p, cmd, val);
	}
	assert_int_equal(redirections(), 0);
	/* Again: the same version is left alone. */
	assert_int_equal(rconn_library_ensure(p, "cpool", lib, 1, err,
					      sizeof(err)), 0);
	rconn_pool_close(p);
}

/* Threads calling at once, each its own keys of every shard: each
 * reads back what it wrote (one pool's nodes and map shared). */
struct runner {
	struct rconn_pool *p;
	int id;
	int bad;
};

static void *run(void *arg)
{
	struct runner *r = arg;

	for (int i = 0; i < 150; i++) {
		char key[64], val[32];
		const char *set[] = { "SET", key, val }, *get[] = { "GET", key };
		redisReply *rep = NULL;

		snprintf(key, sizeof(key), "th:{%d.%d}", r->id, i);
		snprintf(val, sizeof(val), "%d-%d", r->id, i);
		if (rconn_pool_call(r->p, 10000, 3, set, NULL, &rep) != 0) {
			r->bad++;
			continue;
		}
		freeReplyObject(rep);
		if (rconn_pool_call(r->p, 10000, 2, get, NULL, &rep) != 0) {
			r->bad++;
			continue;
		}
		r->bad += rep->type != REDIS_REPLY_STRING || strcmp(rep->str, val);
		freeReplyObject(rep);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct rconn_pool *p = open_pool(true);
	struct runner rs[6];
	pthread_t th[6];

	for (int i = 0; i < 6; i++) {
		rs[i] = (struct runner){ p, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, run, &rs[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(rs[i].bad, 0);
	}
	rconn_pool_close(p);
}

/* Redirections ------------------------------------------------------------- */

/*
 * A slot moved from A to B (SETSLOT IMPORTING/MIGRATING, MIGRATE):
 * during the move a GET of a key already at B follows the ASK; a FCALL
 * of it does not (it waits, and fails within its budget while the slot
 * moves); once the slot is B's (SETSLOT NODE) a call follows the MOVED,
 * and the next ones go to B at once (the map was read again).
 */
static void test_moved_and_ask(void **state)
{
	const char *kept = "mv:{slotmove}:kept", *moved = "mv:{slotmove}:moved";
	struct rconn_pool *p = open_pool(true);
	char ida[CLUSTER_ID_MAX + 1], idb[CLUSTER_ID_MAX + 1], sl[8], port[8];
	char err[400] = "", cmd[160];
	redisReply *rep = NULL;
	uint64_t t0;
	long before;
	int a, b;

	assert_int_equal(rconn_library_ensure(p, "cpool", lib, 1, err,
					      sizeof(err)), 0);
	a = owner_of(kept);
	b = (a + 1) % (int)cl.n;
	myid(a, ida);
	myid(b, idb);
	snprintf(sl, sizeof(sl), "%u", cluster_key_slot(kept, strlen(kept)));
	snprintf(port, sizeof(port), "%u", (unsigned)cl.port[b]);
	snprintf(cmd, sizeof(cmd), "SET %s 1", kept);
	expect_str(p, cmd, "OK");
	snprintf(cmd, sizeof(cmd), "SET %s 2", moved);
	expect_str(p, cmd, "OK");

	on_ok(b, "CLUSTER SETSLOT %s IMPORTING %s", sl, ida);
	on_ok(a, "CLUSTER SETSLOT %s MIGRATING %s", sl, idb);
	{
		redisReply *r = redisCommand(cl.rc[a], "MIGRATE 127.0.0.1 %s %s 0 5000",
					     port, moved);

		assert_non_null(r);
		assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
		freeReplyObject(r);
	}
	reset_stats();
	snprintf(cmd, sizeof(cmd), "GET %s", kept);
	expect_str(p, cmd, "1");
	snprintf(cmd, sizeof(cmd), "GET %s", moved);
	expect_str(p, cmd, "2");             /* after ASKING, at B */
	assert_int_equal(redirections(), 1); /* A's one ASK */
	/* A function on the moving slot is not sent to B: it waits. */
	snprintf(cmd, sizeof(cmd), "FCALL_RO cp_get 1 %s", moved);
	t0 = now_ms();
	assert_int_equal(pcall(p, 600, cmd, &rep), -EIO);
	assert_null(rep);
	assert_true(now_ms() - t0 < 600 + 2000);

	/* The move ends: the slot is B's everywhere. */
	{
		redisReply *r = redisCommand(cl.rc[a], "MIGRATE 127.0.0.1 %s %s 0 5000",
					     port, kept);

		assert_non_null(r);
		assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
		freeReplyObject(r);
	}
	for (unsigned i = 0; i < cl.n; i++)
		on_ok((int)((unsigned)b + i) % (int)cl.n,
		      "CLUSTER SETSLOT %s NODE %s", sl, idb);
	reset_stats();
	snprintf(cmd, sizeof(cmd), "FCALL_RO cp_get 1 %s", moved);
	expect_str(p, cmd, "2");             /* after A's MOVED */
	before = redirections();
	assert_int_equal(before, 1);
	snprintf(cmd, sizeof(cmd), "GET %s", kept);
	expect_str(p, cmd, "1");
	snprintf(cmd, sizeof(cmd), "FCALL_RO cp_get 1 %s", kept);
	expect_str(p, cmd, "1");
	assert_int_equal(redirections(), before); /* straight to B now */
	rconn_pool_close(p);
}

/* Failure ------------------------------------------------------------------ */

/*
 * A primary killed: calls for its slots fail with EIO within their
 * budget; every other primary's slots still answer at once (each has its
 * own connections; the survivors are told to keep serving a partial
 * cluster).  The last test: the cluster stays broken.
 */
static void test_killed_primary_stops_only_its_slots(void **state)
{
	struct rconn_pool *p = open_pool(true);
	char cmd[128], key[64];
	redisReply *rep = NULL;
	int dead;
	uint64_t t0;

	for (unsigned i = 0; i < cl.n; i++)
		on_ok((int)i, "CONFIG SET cluster-require-full-coverage no",
		      NULL, NULL);
	for (int i = 0; i < 60; i++) {
		snprintf(cmd, sizeof(cmd), "SET kp:{t%d} %d", i, i);
		expect_str(p, cmd, "OK");
	}
	dead = owner_of("kp:{t0}");
	kill(cl.pid[dead], SIGKILL);
	waitpid(cl.pid[dead], NULL, 0);
	cl.pid[dead] = 0;
	redisFree(cl.rc[dead]);
	cl.rc[dead] = NULL;

	for (int i = 0; i < 60; i++) {
		snprintf(key, sizeof(key), "kp:{t%d}", i);
		snprintf(cmd, sizeof(cmd), "GET %s", key);
		if (owner_of(key) == dead) {
			t0 = now_ms();
			assert_int_equal(pcall(p, 300, cmd, &rep), -EIO);
			assert_true(now_ms() - t0 < 300 + 2000);
		} else {
			char val[16];

			snprintf(val, sizeof(val), "%d", i);
			t0 = now_ms();
			expect_str(p, cmd, val);
			assert_true(now_ms() - t0 < 1000);
		}
	}
	rconn_pool_close(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_key),
		cmocka_unit_test(test_calls_routed),
		cmocka_unit_test(test_library_on_every_primary),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_moved_and_ask),
		cmocka_unit_test(test_killed_primary_stops_only_its_slots),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
