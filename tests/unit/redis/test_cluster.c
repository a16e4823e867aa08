/*
 * test_cluster.c - the pure part of routing on a Redis Cluster
 * (redis/cluster.c) against a real one: three primaries started by the
 * test on free loopback ports (tests/unit/redis/cluster_fixture.h),
 * stopped in the group's teardown whatever happened.  The slot of a key
 * is checked against the server's own CLUSTER KEYSLOT, the map against
 * CLUSTER SLOTS and against where each key's command is served, MOVED
 * and ASK against the redirections the nodes give while a slot moves;
 * replies no healthy server gives are made with hiredis's reader.
 */
#include "tests/unit/unit.h"
#include "tests/unit/redis/cluster_fixture.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/cluster.h"
#include "redis/link.h"

static struct cluster_fixture cl;

static int group_setup(void **state)
{
	return cluster_fixture_start(&cl, "cluster", 3);
}

static int group_teardown(void **state)
{
	cluster_fixture_stop(&cl);
	return 0;
}

/* A reply made from RESP text @resp by hiredis's reader (the caller
 * frees it). */
static redisReply *reply_of(const char *resp)
{
	redisReader *rd = redisReaderCreate();
	void *rep = NULL;

	assert_non_null(rd);
	assert_int_equal(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
	assert_int_equal(redisReaderGetReply(rd, &rep), REDIS_OK);
	assert_non_null(rep);
	redisReaderFree(rd);
	return rep;
}

/* The map node 0 gives now. */
static struct cluster_map *map_now(redisContext *c)
{
	redisReply *r = redisCommand(c, "CLUSTER SLOTS");
	struct cluster_map *m = NULL;
	char why[WHY_MAX] = "";

	assert_non_null(r);
	assert_int_equal(cluster_map_parse(r, "127.0.0.1", &m, why), 0);
	freeReplyObject(r);
	return m;
}

/* The node @port's id, from CLUSTER MYID, into @id. */
static void myid(unsigned port, char *id)
{
	int i = cluster_fixture_node(&cl, port);
	redisReply *r;

	assert_true(i >= 0);
	r = redisCommand(cl.rc[i], "CLUSTER MYID");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_true(r->len <= CLUSTER_ID_MAX);
	memcpy(id, r->str, r->len);
	id[r->len] = '\0';
	freeReplyObject(r);
}

/* Hash slots ------------------------------------------------------------------ */

static void test_crc16_and_tags(void **state)
{
	/* Redis's own test vector (src/crc16.c) and slots its docs give. */
	assert_int_equal(cluster_crc16("123456789", 9), 0x31c3);
	assert_int_equal(cluster_crc16("", 0), 0);
	assert_int_equal(cluster_key_slot("foo", 3), 12182);
	assert_int_equal(cluster_key_slot("bar", 3), 5061);
	/* The tag: the bytes between the first '{' and the first '}' after. */
	assert_int_equal(cluster_key_slot("{user1000}.following", 20),
			 cluster_key_slot("user1000", 8));
	assert_int_equal(cluster_key_slot("foo{bar}{zap}", 13),
			 cluster_key_slot("bar", 3));
	assert_int_equal(cluster_key_slot("foo{{bar}}zap", 13),
			 cluster_key_slot("{bar", 4));
	/* An empty tag, or none closed, is no tag. */
	assert_int_equal(cluster_key_slot("foo{}{bar}", 10),
			 cluster_crc16("foo{}{bar}", 10) & 16383);
	assert_int_equal(cluster_key_slot("foo{bar", 7),
			 cluster_crc16("foo{bar", 7) & 16383);
	assert_int_equal(cluster_key_slot("}{", 2), cluster_crc16("}{", 2) & 16383);
	/* A tenant is one slot, its keys whatever their suffix. */
	assert_int_equal(cluster_key_slot("statefs:{statefs.t7}:t", 22),
			 cluster_key_slot("statefs:{statefs.t7}:log", 24));
	assert_int_equal(cluster_key_slot("statefs:{statefs.t7}:s:123", 26),
			 cluster_key_slot("statefs.t7", 10));
}

/* Keys of every shape, binary ones too, against the server's answer. */
static void test_slot_matches_server(void **state)
{
	static const char alphabet[] = "{}ab:.t7\0\xff";
	unsigned seed = 20261202;

	for (int k = 0; k < 3000; k++) {
		char key[40];
		size_t len = (size_t)(rand_r(&seed) % 24);
		const char *argv[] = { "CLUSTER", "KEYSLOT", key };
		size_t lens[] = { 7, 7, 0 };
		redisReply *r;

		if (k % 5 == 0) {
			len = (size_t)snprintf(key, sizeof(key), "statefs:{statefs.t%d}:p:%d",
					       rand_r(&seed) % 100000, k);
		} else {
			for (size_t i = 0; i < len; i++)
				key[i] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
		}
		lens[2] = len;
		r = redisCommandArgv(cl.rc[k % cl.n], 3, argv, lens);
		assert_non_null(r);
		assert_int_equal(r->type, REDIS_REPLY_INTEGER);
		assert_int_equal(cluster_key_slot(key, len), r->integer);
		freeReplyObject(r);
	}
}

/* The slot map -------------------------------------------------------------- */

/* CLUSTER SLOTS as parsed: every slot a primary, the fixture's nodes
 * with their ids, and each key's command served where the map says,
 * MOVED there from anywhere else. */
static void test_map_routes(void **state)
{
	struct cluster_map *m = map_now(cl.rc[0]);

	assert_true(cluster_map_complete(m));
	assert_int_equal(m->nnodes, 3);
	for (unsigned i = 0; i < m->nnodes; i++) {
		char id[CLUSTER_ID_MAX + 1];

		assert_string_equal(m->nodes[i].host, "127.0.0.1");
		assert_true(cluster_fixture_node(&cl, m->nodes[i].port) >= 0);
		myid(m->nodes[i].port, id);
		assert_string_equal(m->nodes[i].id, id);
	}
	for (int k = 0; k < 300; k++) {
		char key[64];
		unsigned slot;
		const struct cluster_node *nd;
		struct cluster_redirect rd;
		int at, other;
		redisReply *r;

		snprintf(key, sizeof(key), "statefs:{statefs.t%d}:t", k);
		slot = cluster_key_slot(key, strlen(key));
		nd = cluster_map_node(m, slot);
		assert_non_null(nd);
		at = cluster_fixture_node(&cl, nd->port);
		assert_true(at >= 0);
		r = redisCommand(cl.rc[at], "SET %s v", key);
		assert_non_null(r);
		assert_int_equal(r->type, REDIS_REPLY_STATUS);
		assert_int_equal(cluster_redirect_parse(r, &rd), CLUSTER_REDIRECT_NONE);
		assert_int_equal(rd.kind, CLUSTER_REDIRECT_NONE);
		freeReplyObject(r);
		other = (at + 1 + k % 2) % (int)cl.n;
		r = redisCommand(cl.rc[other], "GET %s", key);
		assert_non_null(r);
		assert_int_equal(cluster_redirect_parse(r, &rd), CLUSTER_REDIRECT_MOVED);
		assert_int_equal(rd.slot, slot);
		assert_string_equal(rd.addr.host, "127.0.0.1");
		assert_int_equal(rd.addr.port, nd->port);
		freeReplyObject(r);
		r = redisCommand(cl.rc[at], "DEL %s", key);
		freeReplyObject(r);
	}
	cluster_map_free(m);
}

/* Send @fmt to node @i; its reply. */
static redisReply *on(int i, const char *fmt, const char *a, const char *b)
{
	redisReply *r = redisCommand(cl.rc[i], fmt, a, b);

	assert_non_null(r);
	return r;
}

static void expect_ok(redisReply *r)
{
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("%s", r->str);
	freeReplyObject(r);
}

/*
 * A slot moved by hand, as redis-cli --cluster reshard moves it: while
 * it migrates, a key still at the source is served there, a key moved
 * already (or never there) is ASK to the target, which answers only
 * after ASKING; once the slot is the target's, MOVED, and the map
 * changed by that MOVED is the map CLUSTER SLOTS then gives.
 */
static void test_ask_and_moved_while_a_slot_moves(void **state)
{
	const char *kept = "statefs:{statefs.t42}:t", *moved = "statefs:{statefs.t42}:log";
	const char *never = "statefs:{statefs.t42}:p:10";
	struct cluster_map *m = map_now(cl.rc[0]), *fresh;
	unsigned slot = cluster_key_slot(kept, strlen(kept));
	char ida[CLUSTER_ID_MAX + 1], idb[CLUSTER_ID_MAX + 1], port[8], sl[8];
	struct cluster_redirect rd;
	int a, b;
	redisReply *r;

	a = cluster_fixture_node(&cl, cluster_map_node(m, slot)->port);
	b = (a + 1) % (int)cl.n;
	myid(cl.port[a], ida);
	myid(cl.port[b], idb);
	snprintf(sl, sizeof(sl), "%u", slot);
	snprintf(port, sizeof(port), "%u", (unsigned)cl.port[b]);
	expect_ok(on(a, "SET %s %s", kept, "1"));
	expect_ok(on(a, "SET %s %s", moved, "2"));

	expect_ok(on(b, "CLUSTER SETSLOT %s IMPORTING %s", sl, ida));
	expect_ok(on(a, "CLUSTER SETSLOT %s MIGRATING %s", sl, idb));
	r = redisCommand(cl.rc[a], "MIGRATE 127.0.0.1 %s %s 0 5000", port, moved);
	expect_ok(r);

	/* Still at the source: served there. */
	r = on(a, "GET %s", kept, NULL);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_string_equal(r->str, "1");
	freeReplyObject(r);
	/* Moved already, or never there: ASK to the target. */
	for (int i = 0; i < 2; i++) {
		r = on(a, "GET %s", i ? never : moved, NULL);
		assert_int_equal(cluster_redirect_parse(r, &rd), CLUSTER_REDIRECT_ASK);
		assert_int_equal(rd.kind, CLUSTER_REDIRECT_ASK);
		assert_int_equal(rd.slot, slot);
		assert_string_equal(rd.addr.host, "127.0.0.1");
		assert_int_equal(rd.addr.port, cl.port[b]);
		freeReplyObject(r);
	}
	/* The target refuses without ASKING (MOVED back to the owner)... */
	r = on(b, "GET %s", moved, NULL);
	assert_int_equal(cluster_redirect_parse(r, &rd), CLUSTER_REDIRECT_MOVED);
	assert_int_equal(rd.slot, slot);
	assert_int_equal(rd.addr.port, cl.port[a]);
	freeReplyObject(r);
	/* ...and answers after it, this once. */
	expect_ok(on(b, "ASKING", NULL, NULL));
	r = on(b, "GET %s", moved, NULL);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_string_equal(r->str, "2");
	freeReplyObject(r);

	/* The rest moves, and the slot becomes the target's everywhere. */
	r = redisCommand(cl.rc[a], "MIGRATE 127.0.0.1 %s %s 0 5000", port, kept);
	expect_ok(r);
	expect_ok(on(b, "CLUSTER SETSLOT %s NODE %s", sl, idb));
	expect_ok(on(a, "CLUSTER SETSLOT %s NODE %s", sl, idb));
	expect_ok(on((b + 1) % (int)cl.n, "CLUSTER SETSLOT %s NODE %s", sl, idb));
	r = on(a, "GET %s", kept, NULL);
	assert_int_equal(cluster_redirect_parse(r, &rd), CLUSTER_REDIRECT_MOVED);
	assert_int_equal(rd.slot, slot);
	assert_int_equal(rd.addr.port, cl.port[b]);
	freeReplyObject(r);
	assert_int_equal(cluster_map_move(m, rd.slot, rd.addr.host, rd.addr.port), 0);
	assert_int_equal(cluster_map_node(m, slot)->port, cl.port[b]);
	assert_int_equal(m->nnodes, 3); /* a node it knew: not added again */

	fresh = map_now(cl.rc[b]);
	assert_true(cluster_map_complete(fresh));
	for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
		assert_int_equal(cluster_map_node(fresh, s)->port,
				 cluster_map_node(m, s)->port);
	r = on(b, "GET %s", kept, NULL);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	freeReplyObject(r);
	expect_ok(on(b, "DEL %s %s", kept, moved));
	cluster_map_free(fresh);
	cluster_map_free(m);
}

/* What the design rests on ----------------------------------------------------- */

/*
 * A library of two functions that touch a key of their tenant's slot
 * they were not given (as statefs's functions derive every key from
 * the tenant's), one of them publishing on the tenant's shard channel.
 */
static const char probe_lib[] =
	"#!lua name=statefs_probe\n"
	"local function rw(keys, args)\n"
	"  local p = string.sub(keys[1], 1, -3)\n"
	"  local v = redis.call('HGET', p .. ':other', 'f')\n"
	"  redis.call('HSET', p .. ':other', 'f', (tonumber(v) or 0) + 1)\n"
	"  redis.call('SPUBLISH', p .. ':news', 'seq')\n"
	"  return v or 'nil'\n"
	"end\n"
	"local function rd(keys, args)\n"
	"  local p = string.sub(keys[1], 1, -3)\n"
	"  return redis.call('HGET', p .. ':' .. args[1], 'f') or 'nil'\n"
	"end\n"
	"local function del(keys, args)\n"
	"  return redis.call('DEL', keys[1])\n"
	"end\n"
	"redis.register_function('probe_rw', rw)\n"
	"redis.register_function{ function_name = 'probe_del', callback = del, "
	"flags = { 'allow-oom' } }\n"
	"redis.register_function{ function_name = 'probe_rd', callback = rd, "
	"flags = { 'no-writes' } }\n";

/* The reply @r is the string @s. */
static void expect_str(redisReply *r, const char *s)
{
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("%s", r->str);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_string_equal(r->str, s);
	freeReplyObject(r);
}

/* The reply @r is an error that says @what. */
static void expect_err(redisReply *r, const char *what)
{
	assert_int_equal(r->type, REDIS_REPLY_ERROR);
	if (!strstr(r->str, what))
		fail_msg("%s: not \"%s\"", r->str, what);
	freeReplyObject(r);
}

/*
 * What docs/design.md ("The shared store on a Redis Cluster") takes from
 * Redis, held against real nodes: a function may touch any key of its
 * first key's slot; SPUBLISH from a function reaches that shard's
 * SSUBSCRIBE; while the slot moves, a function on the source fails on
 * the first key it does not hold (a moved one, or a new one) before it
 * writes anything; and on the importing node, after ASKING, a function
 * reads a key not moved yet as absent, which is why a function is
 * never sent on after an ASK.
 */
static void test_what_the_design_rests_on(void **state)
{
	const char *t = "statefs:{statefs.t77}:t", *o = "statefs:{statefs.t77}:other";
	const char *q = "statefs:{statefs.t77}:q", *ch = "statefs:{statefs.t77}:news";
	struct cluster_map *m = map_now(cl.rc[0]);
	unsigned slot = cluster_key_slot(t, strlen(t));
	char ida[CLUSTER_ID_MAX + 1], idb[CLUSTER_ID_MAX + 1], port[8], sl[8];
	struct timeval tv = { 10, 0 };
	redisContext *sub;
	redisReply *r;
	int a, b;

	for (unsigned i = 0; i < cl.n; i++)
		expect_ok(on((int)i, "FUNCTION LOAD REPLACE %s", probe_lib, NULL));
	a = cluster_fixture_node(&cl, cluster_map_node(m, slot)->port);
	b = (a + 1) % (int)cl.n;
	myid(cl.port[a], ida);
	myid(cl.port[b], idb);
	snprintf(sl, sizeof(sl), "%u", slot);
	snprintf(port, sizeof(port), "%u", (unsigned)cl.port[b]);
	expect_ok(on(a, "HSET %s name %s", t, "x"));
	expect_ok(on(a, "HSET %s f %s", o, "7"));
	expect_ok(on(a, "HSET %s f %s", q, "5"));

	/* Keys not given, of the slot; a message on its shard channel. */
	sub = redisConnectWithTimeout("127.0.0.1", cl.port[a], tv);
	assert_true(sub && !sub->err);
	redisSetTimeout(sub, tv);
	r = redisCommand(sub, "SSUBSCRIBE %s", ch);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	freeReplyObject(r);
	expect_str(on(a, "FCALL probe_rw 1 %s", t, NULL), "7");
	assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->elements, 3);
	assert_string_equal(r->element[0]->str, "smessage");
	assert_string_equal(r->element[1]->str, ch);
	assert_string_equal(r->element[2]->str, "seq");
	freeReplyObject(r);
	redisFree(sub);

	/* The slot starts moving: what the source holds, it serves. */
	expect_ok(on(b, "CLUSTER SETSLOT %s IMPORTING %s", sl, ida));
	expect_ok(on(a, "CLUSTER SETSLOT %s MIGRATING %s", sl, idb));
	expect_str(on(a, "FCALL probe_rw 1 %s", t, NULL), "8");
	r = redisCommand(cl.rc[a], "MIGRATE 127.0.0.1 %s %s 0 5000", port, o);
	expect_ok(r);
	/* A moved key stops the function before its write... */
	expect_err(on(a, "FCALL probe_rw 1 %s", t, NULL), "non local key");
	expect_ok(on(b, "ASKING", NULL, NULL));
	expect_str(on(b, "HGET %s f", o, NULL), "9");
	/* ...and so does a new one. */
	expect_err(on(a, "EVAL %s 1 %s", "return redis.call('HSET', "
		   "string.sub(KEYS[1], 1, -3) .. ':new', 'f', 1)", t), "non local key");

	/* The tenant's hash moved, q not yet: the importing node, asked,
	 * runs the function and finds q absent, though the source has it. */
	r = redisCommand(cl.rc[a], "MIGRATE 127.0.0.1 %s %s 0 5000", port, t);
	expect_ok(r);
	r = on(a, "FCALL probe_rd 1 %s q", t, NULL);
	assert_int_equal(cluster_redirect_parse(r, &(struct cluster_redirect){ 0 }),
			 CLUSTER_REDIRECT_ASK);
	freeReplyObject(r);
	expect_ok(on(b, "ASKING", NULL, NULL));
	expect_str(on(b, "FCALL probe_rd 1 %s q", t, NULL), "nil");
	expect_str(on(a, "HGET %s f", q, NULL), "5");

	/* The move ends; the slot is the target's, everything there. */
	r = redisCommand(cl.rc[a], "MIGRATE 127.0.0.1 %s %s 0 5000", port, q);
	expect_ok(r);
	expect_ok(on(b, "CLUSTER SETSLOT %s NODE %s", sl, idb));
	expect_ok(on(a, "CLUSTER SETSLOT %s NODE %s", sl, idb));
	expect_ok(on((b + 1) % (int)cl.n, "CLUSTER SETSLOT %s NODE %s", sl, idb));
	expect_str(on(b, "FCALL probe_rd 1 %s q", t, NULL), "5");
	expect_str(on(b, "FCALL probe_rd 1 %s other", t, NULL), "9");
	expect_ok(on(b, "DEL %s %s", t, o));
	expect_ok(on(b, "DEL %s %s", q, q));
	cluster_map_free(m);
}

/*
 * A shard past its maxmemory (noeviction) refuses a function that may
 * write before it runs (OOM), and runs one registered allow-oom, which
 * the functions that only remove are to be: the cluster design's
 * per-shard ceiling.
 */
static void test_a_full_shard(void **state)
{
	const char *t = "statefs:{statefs.t78}:t", *big = "statefs:{statefs.t78}:big";
	struct cluster_map *m = map_now(cl.rc[0]);
	int a = cluster_fixture_node(&cl, cluster_map_node(m, cluster_key_slot(t, strlen(t)))->port);
	size_t len = 3u << 20;
	char *blob = calloc(1, len);
	const char *argv[] = { "SET", big, blob };
	size_t lens[] = { 3, strlen(big), len };
	redisReply *r;

	assert_non_null(blob);
	for (unsigned i = 0; i < cl.n; i++)
		expect_ok(on((int)i, "FUNCTION LOAD REPLACE %s", probe_lib, NULL));
	r = redisCommandArgv(cl.rc[a], 3, argv, lens);
	assert_non_null(r);
	expect_ok(r);
	free(blob);
	expect_ok(on(a, "HSET %s name %s", t, "x"));
	expect_ok(on(a, "CONFIG SET maxmemory %s", "1mb", NULL));
	expect_err(on(a, "FCALL probe_rw 1 %s", t, NULL), "OOM");
	r = on(a, "FCALL probe_del 1 %s", t, NULL);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	assert_int_equal(r->integer, 1);
	freeReplyObject(r);
	expect_ok(on(a, "CONFIG SET maxmemory %s", "0", NULL));
	expect_ok(on(a, "DEL %s", big, NULL));
	cluster_map_free(m);
}

/* Replies no healthy server gives ------------------------------------------- */

static int parse_text(const char *resp, struct cluster_map **m)
{
	redisReply *r = reply_of(resp);
	char why[WHY_MAX] = "";
	int rc = cluster_map_parse(r, "10.0.0.9", m, why);

	if (rc < 0) {
		assert_true(strncmp(why, "CLUSTER SLOTS: ", 15) == 0);
		assert_null(*m);
	}
	freeReplyObject(r);
	return rc;
}

/* A node "1":7000. */
#define NODE7000 "*2\r\n$1\r\n1\r\n:7000\r\n"

static void test_map_refusals(void **state)
{
	struct cluster_map *m = NULL;
	const char *bad[] = {
		"-ERR This instance has cluster support disabled\r\n",
		"$3\r\nabc\r\n",
		"*1\r\n:5\r\n",
		"*1\r\n*2\r\n:0\r\n:5\r\n",                           /* no primary */
		"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:7000\r\n", /* past 16383 */
		"*1\r\n*3\r\n:9\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n",     /* START > END */
		"*1\r\n*3\r\n:-1\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n",
		"*1\r\n*3\r\n$1\r\n0\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n", /* not an integer */
		"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:0\r\n",        /* port 0 */
		"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:65536\r\n",
		"*1\r\n*3\r\n:0\r\n:5\r\n*1\r\n$1\r\nh\r\n",              /* no port */
		"*1\r\n*3\r\n:0\r\n:5\r\n$1\r\nh\r\n",                    /* not an array */
		"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n:1\r\n:7000\r\n",          /* host a number */
		"*1\r\n*3\r\n:0\r\n:5\r\n*3\r\n$1\r\nh\r\n:7000\r\n$0\r\n\r\n", /* empty id */
		"*1\r\n*3\r\n:0\r\n:5\r\n*3\r\n$1\r\nh\r\n:7000\r\n"
			"$41\r\n01234567890123456789012345678901234567890\r\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse_text(bad[i], &m), -EPROTO);

	/* An empty or nil host is the endpoint asked; "?" serves nothing;
	 * a later range over an earlier one wins; a node is there once. */
	assert_int_equal(parse_text("*4\r\n"
		"*3\r\n:0\r\n:99\r\n" NODE7000
		"*3\r\n:100\r\n:199\r\n*2\r\n$0\r\n\r\n:7001\r\n"
		"*3\r\n:200\r\n:299\r\n*2\r\n$-1\r\n:7002\r\n"
		"*4\r\n:50\r\n:60\r\n*2\r\n$1\r\n?\r\n:7003\r\n" NODE7000, &m), 0);
	assert_false(cluster_map_complete(m));
	assert_int_equal(m->nnodes, 3);
	assert_string_equal(cluster_map_node(m, 0)->host, "1");
	assert_int_equal(cluster_map_node(m, 99)->port, 7000);
	assert_null(cluster_map_node(m, 50));
	assert_null(cluster_map_node(m, 60));
	assert_non_null(cluster_map_node(m, 61));
	assert_string_equal(cluster_map_node(m, 100)->host, "10.0.0.9");
	assert_int_equal(cluster_map_node(m, 100)->port, 7001);
	assert_string_equal(cluster_map_node(m, 299)->host, "10.0.0.9");
	assert_int_equal(cluster_map_node(m, 299)->port, 7002);
	assert_string_equal(cluster_map_node(m, 0)->id, "");
	assert_null(cluster_map_node(m, 300));
	assert_null(cluster_map_node(m, CLUSTER_SLOTS));
	assert_int_equal(cluster_map_move(m, 300, "::1", 7004), 0);
	assert_int_equal(m->nnodes, 4);
	assert_string_equal(cluster_map_node(m, 300)->host, "::1");
	assert_int_equal(cluster_map_move(m, CLUSTER_SLOTS, "h", 1), -EINVAL);
	assert_int_equal(cluster_map_move(m, 1, "h", 0), -EINVAL);
	assert_int_equal(cluster_map_move(m, 1, "", 1), -EINVAL);
	cluster_map_free(m);
	m = NULL;

	/* The endpoint asked, when there is none to put: refused. */
	{
		redisReply *r = reply_of("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$0\r\n\r\n:7000\r\n");
		char why[WHY_MAX];

		assert_int_equal(cluster_map_parse(r, NULL, &m, why), -EPROTO);
		freeReplyObject(r);
	}
	/* An empty reply is a map of nothing. */
	assert_int_equal(parse_text("*0\r\n", &m), 0);
	assert_int_equal(m->nnodes, 0);
	assert_false(cluster_map_complete(m));
	cluster_map_free(m);
	cluster_map_free(NULL);
}

static void test_redirect_parse(void **state)
{
	static const struct {
		const char *resp;
		int kind;
		unsigned slot;
		const char *host;
		unsigned port;
	} cases[] = {
		{ "-MOVED 3999 127.0.0.1:6381\r\n", CLUSTER_REDIRECT_MOVED, 3999, "127.0.0.1", 6381 },
		{ "-ASK 0 redis.example:7000\r\n", CLUSTER_REDIRECT_ASK, 0, "redis.example", 7000 },
		{ "-MOVED 16383 ::1:7000\r\n", CLUSTER_REDIRECT_MOVED, 16383, "::1", 7000 },
		{ "-ASK 12 [fe80::1]:65535\r\n", CLUSTER_REDIRECT_ASK, 12, "fe80::1", 65535 },
		{ "-MOVED 7 :7001\r\n", CLUSTER_REDIRECT_MOVED, 7, "", 7001 },
		{ "-ERR unknown command\r\n", CLUSTER_REDIRECT_NONE, 0, "", 0 },
		{ "-MOVEDX 1 h:1\r\n", CLUSTER_REDIRECT_NONE, 0, "", 0 },
		{ "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
		  CLUSTER_REDIRECT_NONE, 0, "", 0 },
		{ "+MOVED 1 h:1\r\n", CLUSTER_REDIRECT_NONE, 0, "", 0 },
		{ "$11\r\nMOVED 1 h:1\r\n", CLUSTER_REDIRECT_NONE, 0, "", 0 },
		{ "-MOVED 16384 h:1\r\n", -EPROTO, 0, "", 0 },
		{ "-MOVED x h:1\r\n", -EPROTO, 0, "", 0 },
		{ "-MOVED -1 h:1\r\n", -EPROTO, 0, "", 0 },
		{ "-MOVED 1 h\r\n", -EPROTO, 0, "", 0 },
		{ "-MOVED 1\r\n", -EPROTO, 0, "", 0 },
		{ "-ASK 1 h:0\r\n", -EPROTO, 0, "", 0 },
		{ "-ASK 1 h:65536\r\n", -EPROTO, 0, "", 0 },
		{ "-ASK 1 h:12x\r\n", -EPROTO, 0, "", 0 },
		{ "-ASK 1 h:\r\n", -EPROTO, 0, "", 0 },
		{ "-ASK 1 h:1 more\r\n", -EPROTO, 0, "", 0 },
		{ "-MOVED 99999999999999999999 h:1\r\n", -EPROTO, 0, "", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		redisReply *r = reply_of(cases[i].resp);
		struct cluster_redirect rd;

		assert_int_equal(cluster_redirect_parse(r, &rd), cases[i].kind);
		if (cases[i].kind <= 0)
			assert_int_equal(rd.kind, CLUSTER_REDIRECT_NONE);
		else
			assert_int_equal((int)rd.kind, cases[i].kind);
		assert_int_equal(rd.slot, cases[i].slot);
		assert_string_equal(rd.addr.host, cases[i].host);
		assert_int_equal(rd.addr.port, cases[i].port);
		freeReplyObject(r);
	}
	{
		/* A host longer than any statefs keeps. */
		char resp[600];
		redisReply *r;
		struct cluster_redirect rd;

		snprintf(resp, sizeof(resp), "-MOVED 1 %0300d:7000\r\n", 0);
		r = reply_of(resp);
		assert_int_equal(cluster_redirect_parse(r, &rd), -EPROTO);
		freeReplyObject(r);
	}
	assert_int_equal(cluster_redirect_parse(NULL, &(struct cluster_redirect){ 0 }),
			 CLUSTER_REDIRECT_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc16_and_tags),
		cmocka_unit_test(test_map_refusals),
		cmocka_unit_test(test_redirect_parse),
		cmocka_unit_test(test_slot_matches_server),
		cmocka_unit_test(test_map_routes),
		cmocka_unit_test(test_ask_and_moved_while_a_slot_moves),
		cmocka_unit_test(test_what_the_design_rests_on),
		cmocka_unit_test(test_a_full_shard),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
