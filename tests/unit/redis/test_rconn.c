/*
 * test_rconn.c - the Redis transport (redis/conn.c) against real
 * redis-server processes: connecting over a unix socket and TCP, AUTH
 * with the default user and an ACL user, refused credentials, a command
 * bounded by its budget while the server is stopped (SIGSTOP), a pipeline,
 * reconnects after the server was killed and restarted, dedicated
 * connections for blocking reads and their interruption, Sentinel
 * discovery and failover, loading, upgrading and refusing the library.
 *
 * Each test starts its own servers, replicas and Sentinels in a world of
 * tests/unit/redis/redis_procs.h (a temporary directory of its own, unix
 * sockets, loopback ports for TCP; each process dies with this one), and
 * the teardown stops every one of them, also after a failed test.
 * Nothing leaves the machine.
 *
 * Durations are only bounded from above, generously ("within the budget
 * plus 2 s"), and waits for a server's state poll with bounds of tens of
 * seconds, so a loaded machine slows the test down but does not fail it.
 */
#define _GNU_SOURCE /* nftw, in redis_procs.h */
#include "tests/unit/unit.h"
#include "tests/unit/redis/redis_fixture.h"
#include "tests/unit/redis/redis_procs.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/conn.h"

/* The slack every "within the budget" check allows. */
#define SLACK_MS 2000
/* A Sentinel's view of a master it watches: down after 2 s. */
#define SENTINEL_TIMES "sentinel down-after-milliseconds m 2000\n" \
		       "sentinel failover-timeout m 10000\n"

struct world {
	struct redis_procs rp;   /* first: its servers, stopped at teardown */
	struct rconn_pool *pool; /* closed by the teardown */
	struct rconn *conn;      /* closed by the teardown */
};

static int setup(void **state)
{
	return redis_procs_world_setup(state, sizeof(struct world), "rconn");
}

static int teardown(void **state)
{
	struct world *w = *state;

	/* Servers first: a connection closes at once when its peer is gone
	 * (a SIGSTOPped one is killed as well). */
	redis_procs_stop(&w->rp);
	rconn_close(w->conn);
	rconn_pool_close(w->pool);
	free(w);
	return 0;
}

/* Helpers ----------------------------------------------------------------- */

static void open_pool(struct world *w, const char *const *opts)
{
	struct store_remote r;
	char err[400] = "";
	int rc;

	redis_procs_options(&r, opts);
	rc = rconn_pool_open(&r, 4, &w->pool, err, sizeof(err));
	if (rc != 0)
		fail_msg("rconn_pool_open: %d %s", rc, err);
	assert_string_equal(err, "");
}

/* rconn_pool_open on @opts must fail with @want; its message returned
 * in @err (one line, "statefs: "). */
static void open_refused(const char *const *opts, int want, char *err,
			 size_t errlen)
{
	struct store_remote r;
	struct rconn_pool *p = NULL;
	int rc;

	redis_procs_options(&r, opts);
	err[0] = '\0';
	rc = rconn_pool_open(&r, 2, &p, err, errlen);
	if (rc != want)
		fail_msg("rconn_pool_open: %d, not %d (%s)", rc, want, err);
	assert_null(p);
	assert_memory_equal(err, "statefs: ", 9);
	assert_null(strchr(err, '\n'));
}

/* One command through the pool, words separated by blanks; the reply. */
static redisReply *pcall(struct world *w, uint64_t budget_ms, const char *cmd,
			 int *rc)
{
	char buf[512], *save = NULL;
	const char *argv[16];
	int argc = 0;
	redisReply *rep = NULL;

	snprintf(buf, sizeof(buf), "%s", cmd);
	for (char *t = strtok_r(buf, " ", &save); t && argc < 16;
	     t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	*rc = rconn_pool_call(w->pool, budget_ms, argc, argv, NULL, &rep);
	return rep;
}

/* The pool's answer to @cmd must be the status or string @want. */
static void expect_str(struct world *w, const char *cmd, const char *want)
{
	int rc;
	redisReply *rep = pcall(w, 10000, cmd, &rc);

	char got[128];
	bool ok;

	if (rc != 0)
		fail_msg("%s: %d", cmd, rc);
	ok = (rep->type == REDIS_REPLY_STATUS ||
	      rep->type == REDIS_REPLY_STRING) && strcmp(rep->str, want) == 0;
	snprintf(got, sizeof(got), "type %d '%s'", rep->type,
		 rep->str ? rep->str : "");
	freeReplyObject(rep);
	if (!ok)
		fail_msg("%s: %s, not '%s'", cmd, got, want);
}

/* The port of the server the pool talks to (CONFIG GET port). */
static int pool_port(struct world *w)
{
	int rc, port;
	redisReply *rep = pcall(w, 15000, "CONFIG GET port", &rc);

	assert_int_equal(rc, 0);
	assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
	assert_int_equal(rep->elements, 2);
	port = atoi(rep->element[1]->str);
	freeReplyObject(rep);
	return port;
}

/* Connecting --------------------------------------------------------------- */

static void test_unix_socket(void **state)
{
	struct world *w = *state;
	struct redis_proc *s = redis_procs_server(&w->rp, "r", 0, false, NULL);
	char opt[160], why[64];
	const char *opts[] = { opt, NULL };
	/* Binary-safe: NUL and CR LF inside the key and the value. */
	static const char key[] = "k\0ey\r\n", val[] = "v\0a\r\nl";
	const char *set[] = { "SET", key, val }, *get[] = { "GET", key };
	size_t setlen[] = { 3, sizeof(key) - 1, sizeof(val) - 1 };
	size_t getlen[] = { 3, sizeof(key) - 1 };
	redisReply *rep;

	snprintf(opt, sizeof(opt), "store=unix:%s", s->sock);
	open_pool(w, opts);
	assert_true(rconn_pool_connected(w->pool));
	expect_str(w, "PING", "PONG");
	assert_int_equal(rconn_pool_call(w->pool, 0, 3, set, setlen, &rep), 0);
	assert_int_equal(rep->type, REDIS_REPLY_STATUS);
	freeReplyObject(rep);
	assert_int_equal(rconn_pool_call(w->pool, 0, 2, get, getlen, &rep), 0);
	assert_int_equal(rep->type, REDIS_REPLY_STRING);
	assert_int_equal(rep->len, sizeof(val) - 1);
	assert_memory_equal(rep->str, val, sizeof(val) - 1);
	freeReplyObject(rep);
	/* An error reply is the caller's, not a transport failure. */
	{
		int rc;

		rep = pcall(w, 0, "NOSUCHCOMMAND x", &rc);
		assert_int_equal(rc, 0);
		assert_int_equal(rep->type, REDIS_REPLY_ERROR);
		freeReplyObject(rep);
	}
	assert_true(rconn_pool_connected(w->pool));
	rconn_pool_last_error(w->pool, why, sizeof(why));
	assert_string_equal(why, "");
	/* No command at all. */
	assert_int_equal(rconn_pool_call(w->pool, 0, 0, get, NULL, &rep),
			 -EINVAL);
	assert_null(rep);
}

struct incr_arg {
	struct world *w;
	int fails;
};

static void *incr_many(void *arg)
{
	struct incr_arg *a = arg;
	const char *argv[] = { "INCR", "counter" };

	for (int i = 0; i < 200; i++) {
		redisReply *rep;

		if (rconn_pool_call(a->w->pool, 30000, 2, argv, NULL, &rep) != 0) {
			a->fails++;
			continue;
		}
		if (rep->type != REDIS_REPLY_INTEGER)
			a->fails++;
		freeReplyObject(rep);
	}
	return NULL;
}

static void test_tcp_and_threads(void **state)
{
	struct world *w = *state;
	int port;
	char opt[64];
	const char *opts[] = { opt, NULL };
	pthread_t t[8];
	struct incr_arg a[8];

	redis_procs_ports(&port, 1);
	redis_procs_server(&w->rp, "r", port, false, NULL);
	snprintf(opt, sizeof(opt), "store=redis://127.0.0.1:%d", port);
	open_pool(w, opts);
	expect_str(w, "PING", "PONG");
	assert_int_equal(pool_port(w), port);

	/* Eight threads share four connections. */
	for (int i = 0; i < 8; i++) {
		a[i].w = w;
		a[i].fails = 0;
		assert_int_equal(pthread_create(&t[i], NULL, incr_many, &a[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].fails, 0);
	}
	expect_str(w, "GET counter", "1600");
}

/* Credentials -------------------------------------------------------------- */

/* Write @pw to DIR/NAME and return the store_password_file option. */
static const char *pwfile(struct world *w, const char *name, const char *pw,
			  char *opt, size_t cap)
{
	char path[128];
	FILE *f;

	f = fopen(redis_procs_path(&w->rp, name, "", path, sizeof(path)), "w");
	assert_non_null(f);
	fprintf(f, "%s\n", pw);
	assert_int_equal(fclose(f), 0);
	snprintf(opt, cap, "store_password_file=%s", path);
	return opt;
}

static void test_auth(void **state)
{
	struct world *w = *state;
	struct redis_proc *s = redis_procs_server(&w->rp, "r", 0, false, NULL);
	char store[160], good[160], bad[160], err[400];
	redisReply *r;

	snprintf(store, sizeof(store), "store=unix:%s", s->sock);
	r = redis_procs_cmd(s, "ACL SETUSER alice on >s3cret ~* &* +@all");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	/* bob may not run ROLE (an @admin command): HELLO tells the role. */
	r = redis_procs_cmd(s, "ACL SETUSER bob on >b0b ~* &* +@all -role");
	assert_non_null(r);
	freeReplyObject(r);

	/* An ACL user: AUTH alice s3cret. */
	{
		const char *opts[] = { store, "store_user=alice",
				       pwfile(w, "alice", "s3cret", good,
					      sizeof(good)), NULL };

		open_pool(w, opts);
		expect_str(w, "ACL WHOAMI", "alice");
		rconn_pool_close(w->pool);
		w->pool = NULL;
	}
	{
		const char *opts[] = { store, "store_user=bob",
				       pwfile(w, "bob", "b0b", good,
					      sizeof(good)), NULL };

		open_pool(w, opts);
		expect_str(w, "ACL WHOAMI", "bob");
		rconn_pool_close(w->pool);
		w->pool = NULL;
	}
	/* A wrong password: refused at once, one clear line. */
	{
		const char *opts[] = { store, "store_user=alice",
				       pwfile(w, "wrong", "guess", bad,
					      sizeof(bad)), NULL };
		uint64_t t0 = now_ms();

		open_refused(opts, -EACCES, err, sizeof(err));
		assert_non_null(strstr(err, "AUTH as alice refused"));
		assert_non_null(strstr(err, "WRONGPASS"));
		assert_non_null(strstr(err, s->sock));
		assert_null(strstr(err, "guess"));
		assert_true(now_ms() - t0 < 2000 + SLACK_MS);
	}

	/* The default user with a password: AUTH pw. */
	r = redis_procs_cmd(s, "CONFIG SET requirepass pw");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	{
		const char *opts[] = { store, NULL };

		open_refused(opts, -EACCES, err, sizeof(err));
		assert_non_null(strstr(err, "store_password_file"));
	}
	{
		const char *opts[] = { store, pwfile(w, "default", "pw", good,
						     sizeof(good)), NULL };

		open_pool(w, opts);
		expect_str(w, "ACL WHOAMI", "default");
		expect_str(w, "PING", "PONG");
	}
}

/* Failures ----------------------------------------------------------------- */

static void test_stopped_server(void **state)
{
	struct world *w = *state;
	struct redis_proc *s = redis_procs_server(&w->rp, "r", 0, false, NULL);
	char opt[160], why[256], err[400];
	const char *opts[] = { opt, "store_timeout=1", NULL };
	uint64_t t0, took;
	int rc;
	redisReply *rep;

	snprintf(opt, sizeof(opt), "store=unix:%s", s->sock);
	open_pool(w, opts);
	expect_str(w, "PING", "PONG");

	assert_int_equal(kill(s->pid, SIGSTOP), 0);
	/* Budget 0: store_timeout, 1 s. */
	t0 = now_ms();
	rep = pcall(w, 0, "PING", &rc);
	took = now_ms() - t0;
	assert_int_equal(rc, -EIO);
	assert_null(rep);
	if (took > 1000 + SLACK_MS)
		fail_msg("a 1 s budget took %llu ms", (unsigned long long)took);
	assert_false(rconn_pool_connected(w->pool));
	rconn_pool_last_error(w->pool, why, sizeof(why));
	assert_true(strlen(why) > 0);

	/* An explicit budget bounds it the same way. */
	t0 = now_ms();
	rep = pcall(w, 1500, "PING", &rc);
	took = now_ms() - t0;
	assert_int_equal(rc, -EIO);
	if (took > 1500 + SLACK_MS)
		fail_msg("a 1.5 s budget took %llu ms", (unsigned long long)took);

	/* Opening a pool on the stopped server: the connection is accepted
	 * by the kernel, AUTH or ROLE never answered. */
	t0 = now_ms();
	open_refused(opts, -EIO, err, sizeof(err));
	took = now_ms() - t0;
	if (took > 1000 + SLACK_MS)
		fail_msg("opening took %llu ms", (unsigned long long)took);
	assert_non_null(strstr(err, "store_timeout"));

	/* Back: the next call reconnects. */
	assert_int_equal(kill(s->pid, SIGCONT), 0);
	expect_str(w, "PING", "PONG");
	assert_true(rconn_pool_connected(w->pool));
}

/* Commands of one pipeline run in order, each with its own reply (an
 * error among them is a reply); a stopped server gets -EIO within the
 * budget and no reply at all; a lost connection is dialled again. */
static void test_pipeline(void **state)
{
	struct world *w = *state;
	struct redis_proc *s = redis_procs_server(&w->rp, "r", 0, false, NULL);
	char opt[160];
	const char *opts[] = { opt, "store_timeout=1", NULL };
	const char *set[] = { "SET", "pk", "1" }, *incr[] = { "INCR", "pk" },
		   *bad[] = { "NOSUCH", "x" }, *get[] = { "GET", "pk" }, **argv[] = { set, incr, bad, get };
	int argc[] = { 3, 2, 2, 2 };
	redisReply *rep[4];
	uint64_t t0, took;

	snprintf(opt, sizeof(opt), "store=unix:%s", s->sock);
	open_pool(w, opts);
	for (int round = 0; round < 6; round++) {
		assert_int_equal(rconn_pool_pipeline(w->pool, 0, 4, argc, argv, rep), 0);
		assert_int_equal(rep[0]->type, REDIS_REPLY_STATUS);
		assert_int_equal(rep[1]->type, REDIS_REPLY_INTEGER);
		assert_int_equal(rep[1]->integer, 2);
		assert_int_equal(rep[2]->type, REDIS_REPLY_ERROR);
		assert_int_equal(rep[3]->type, REDIS_REPLY_STRING);
		assert_string_equal(rep[3]->str, "2");
		for (int i = 0; i < 4; i++)
			freeReplyObject(rep[i]);
	}
	assert_int_equal(rconn_pool_pipeline(w->pool, 0, 0, argc, argv, rep), -EINVAL);
	assert_int_equal(kill(s->pid, SIGSTOP), 0);
	t0 = now_ms();
	assert_int_equal(rconn_pool_pipeline(w->pool, 0, 4, argc, argv, rep), -EIO);
	took = now_ms() - t0;
	for (int i = 0; i < 4; i++)
		assert_null(rep[i]);
	if (took > 1000 + SLACK_MS)
		fail_msg("a 1 s budget took %llu ms", (unsigned long long)took);
	assert_int_equal(kill(s->pid, SIGCONT), 0);
	/* The connection the stop failed was dropped: dialled again. */
	for (int round = 0; round < 6; round++) {
		assert_int_equal(rconn_pool_pipeline(w->pool, 0, 2, argc + 1, argv + 1, rep), 0);
		assert_true(rep[0]->type == REDIS_REPLY_INTEGER && rep[1]->type == REDIS_REPLY_ERROR);
		freeReplyObject(rep[0]);
		freeReplyObject(rep[1]);
	}
	expect_str(w, "GET pk", "8");
}

struct restart_arg {
	struct world *w;
	int rc;
	redisReply *rep;
};

static void *call_long(void *arg)
{
	struct restart_arg *a = arg;
	const char *argv[] = { "GET", "a" };

	a->rc = rconn_pool_call(a->w->pool, 20000, 2, argv, NULL, &a->rep);
	return NULL;
}

static void test_restarted_server(void **state)
{
	struct world *w = *state;
	struct redis_proc *s;
	int port, rc;
	char opt[64];
	const char *opts[] = { opt, "store_timeout=1", NULL };
	uint64_t t0, took;
	redisReply *rep;
	pthread_t t;
	struct restart_arg a = { w, -1, NULL };

	redis_procs_ports(&port, 1);
	s = redis_procs_server(&w->rp, "r", port, false, NULL);
	snprintf(opt, sizeof(opt), "store=redis://127.0.0.1:%d", port);
	open_pool(w, opts);
	expect_str(w, "SET a 1", "OK");

	/* Killed and started again between two calls: the dead connection
	 * is noticed and replaced within one call. */
	redis_procs_kill(s);
	redis_procs_restart(&w->rp, s);
	rep = pcall(w, 10000, "GET a", &rc);
	assert_int_equal(rc, 0);
	/* A new server without persistence: the key is gone. */
	assert_int_equal(rep->type, REDIS_REPLY_NIL);
	freeReplyObject(rep);
	assert_true(rconn_pool_connected(w->pool));

	/* Gone for good: EIO within the budget. */
	redis_procs_kill(s);
	t0 = now_ms();
	rep = pcall(w, 0, "PING", &rc);
	took = now_ms() - t0;
	assert_int_equal(rc, -EIO);
	assert_null(rep);
	if (took > 1000 + SLACK_MS)
		fail_msg("a 1 s budget took %llu ms", (unsigned long long)took);
	assert_false(rconn_pool_connected(w->pool));

	/* Back while a call waits: it retries until the server answers. */
	assert_int_equal(pthread_create(&t, NULL, call_long, &a), 0);
	nap(300);
	redis_procs_restart(&w->rp, s);
	expect_str(w, "SET a 2", "OK");
	pthread_join(t, NULL);
	assert_int_equal(a.rc, 0);
	assert_non_null(a.rep);
	freeReplyObject(a.rep);
	assert_true(rconn_pool_connected(w->pool));
}

static void test_nothing_listening(void **state)
{
	struct world *w = *state;
	int port;
	char opt[160], err[400];
	const char *tcp[] = { opt, "store_timeout=0.5", NULL };
	uint64_t t0, took;
	struct store_remote none;
	struct rconn_pool *p = NULL;

	redis_procs_ports(&port, 1);
	snprintf(opt, sizeof(opt), "store=redis://127.0.0.1:%d", port);
	t0 = now_ms();
	open_refused(tcp, -EIO, err, sizeof(err));
	took = now_ms() - t0;
	assert_true(took <= 500 + SLACK_MS);
	assert_non_null(strstr(err, "Connection refused"));
	assert_non_null(strstr(err, opt));

	snprintf(opt, sizeof(opt), "store=unix:%s/none.sock", w->rp.dir);
	open_refused(tcp, -EIO, err, sizeof(err));
	assert_non_null(strstr(err, "none.sock"));

	/* No store: nothing to open. */
	store_remote_default(&none);
	assert_int_equal(rconn_pool_open(&none, 2, &p, err, sizeof(err)),
			 -EINVAL);
	assert_null(p);
	assert_memory_equal(err, "statefs: ", 9);
}

static void test_out_of_memory(void **state)
{
	struct world *w = *state;
	struct redis_proc *s = redis_procs_server(&w->rp, "r", 0, false, NULL);
	char opt[160], err[400];
	struct store_remote r;
	const char *opts[] = { opt, NULL };

	snprintf(opt, sizeof(opt), "store=unix:%s", s->sock);
	redis_procs_options(&r, opts);
	/* Each of the pool's allocations, then a dedicated connection's. */
	for (unsigned long n = 1; n <= 2; n++) {
		struct rconn_pool *p = NULL;

		store_fault_fail_nth(n);
		assert_int_equal(rconn_pool_open(&r, 2, &p, err, sizeof(err)),
				 -ENOMEM);
		assert_null(p);
		assert_false(store_fault_armed());
	}
	assert_int_equal(rconn_pool_open(&r, 2, &w->pool, err, sizeof(err)), 0);
	store_fault_fail_nth(1);
	assert_int_equal(rconn_open(w->pool, 0, &w->conn), -ENOMEM);
	assert_null(w->conn);
	assert_false(store_fault_armed());
}

/* Dedicated connections ------------------------------------------------------ */

struct reader_arg {
	struct rconn *conn;
	int rc;
	redisReply *rep;
};

static void *block_forever(void *arg)
{
	struct reader_arg *a = arg;
	const char *argv[] = { "XREAD", "BLOCK", "0", "STREAMS", "log", "$" };

	a->rc = rconn_call(a->conn, 60000, 6, argv, NULL, &a->rep);
	return NULL;
}

static void test_dedicated(void **state)
{
	struct world *w = *state;
	struct redis_proc *s = redis_procs_server(&w->rp, "r", 0, false, NULL);
	char opt[160];
	const char *opts[] = { opt, "store_timeout=1", NULL };
	const char *xread[] = { "XREAD", "BLOCK", "1500", "STREAMS", "log", "$" };
	struct reader_arg a = { 0 };
	redisReply *rep;
	uint64_t t0, took, end;
	pthread_t t;
	int rc;

	snprintf(opt, sizeof(opt), "store=unix:%s", s->sock);
	open_pool(w, opts);

	/* Its own timeout, longer than store_timeout and the BLOCK. */
	assert_int_equal(rconn_open(w->pool, 4000, &w->conn), 0);
	rc = rconn_call(w->conn, 0, 6, xread, NULL, &rep);
	assert_int_equal(rc, 0);
	assert_int_equal(rep->type, REDIS_REPLY_NIL);
	freeReplyObject(rep);
	rconn_close(w->conn);
	w->conn = NULL;

	/* A timeout shorter than the BLOCK: each attempt gives up, and the
	 * budget ends it. */
	assert_int_equal(rconn_open(w->pool, 300, &w->conn), 0);
	t0 = now_ms();
	rc = rconn_call(w->conn, 1000, 6, xread, NULL, &rep);
	took = now_ms() - t0;
	assert_int_equal(rc, -EIO);
	assert_null(rep);
	assert_true(took <= 1000 + SLACK_MS);
	rconn_close(w->conn);
	w->conn = NULL;

	/* Blocked for good: rconn_interrupt ends it from another thread. */
	assert_int_equal(rconn_open(w->pool, 60000, &w->conn), 0);
	a.conn = w->conn;
	assert_int_equal(pthread_create(&t, NULL, block_forever, &a), 0);
	end = now_ms() + REDIS_PROCS_READY_MS;
	for (bool blocked = false; !blocked;) {
		rep = redis_procs_cmd(s, "INFO clients");
		assert_non_null(rep);
		blocked = strstr(rep->str, "blocked_clients:1") != NULL;
		freeReplyObject(rep);
		if (!blocked) {
			assert_true(now_ms() < end);
			nap(20);
		}
	}
	t0 = now_ms();
	rconn_interrupt(w->conn);
	pthread_join(t, NULL);
	took = now_ms() - t0;
	assert_int_equal(a.rc, -ECANCELED);
	/* At once, not when the 60 s socket timeout ends the read. */
	if (took > 20000)
		fail_msg("the interrupted read returned after %llu ms",
			 (unsigned long long)took);
	assert_null(a.rep);
	/* And every later call. */
	assert_int_equal(rconn_call(w->conn, 0, 6, xread, NULL, &rep),
			 -ECANCELED);
	/* The pool is not affected. */
	expect_str(w, "PING", "PONG");
}

/* Sentinels ------------------------------------------------------------------- */

static void test_sentinel_discovery(void **state)
{
	struct world *w = *state;
	int ports[3]; /* primary, Sentinel, nobody */
	char opt[160], err[400];
	const char *opts[] = { opt, "store_timeout=1", NULL };

	redis_procs_ports(ports, 3);
	redis_procs_server(&w->rp, "primary", ports[0], false, NULL);
	redis_procs_sentinel(&w->rp, "s1", ports[1], false, ports[0], 1,
			     SENTINEL_TIMES);

	/* The first Sentinel does not answer: the next one is asked. */
	snprintf(opt, sizeof(opt),
		 "store=sentinel://127.0.0.1:%d,127.0.0.1:%d/m", ports[2],
		 ports[1]);
	open_pool(w, opts);
	assert_int_equal(pool_port(w), ports[0]);
	expect_str(w, "SET k v", "OK");
	rconn_pool_close(w->pool);
	w->pool = NULL;

	/* A master name no Sentinel knows. */
	snprintf(opt, sizeof(opt), "store=sentinel://127.0.0.1:%d/nosuch",
		 ports[1]);
	open_refused(opts, -EIO, err, sizeof(err));
	assert_non_null(strstr(err, "knows no master 'nosuch'"));

	/* No Sentinel answers. */
	snprintf(opt, sizeof(opt), "store=sentinel://127.0.0.1:%d/m", ports[2]);
	open_refused(opts, -EIO, err, sizeof(err));
	assert_non_null(strstr(err, "Sentinel 127.0.0.1:"));
}

/* Poll @p until INFO @section holds @text. */
static void wait_info(const struct redis_proc *p, const char *cmd,
		      const char *text)
{
	uint64_t end = now_ms() + REDIS_PROCS_READY_MS;

	for (;;) {
		redisReply *r = redis_procs_cmd(p, cmd);
		bool ok = r && r->type == REDIS_REPLY_STRING &&
			  strstr(r->str, text);

		if (r)
			freeReplyObject(r);
		if (ok)
			return;
		if (now_ms() > end)
			fail_msg("%s: '%s' never showed '%s'", p->name, cmd, text);
		nap(50);
	}
}

/* The port the Sentinel @s names for master m. */
static int sentinel_says(const struct redis_proc *s)
{
	redisReply *r = redis_procs_cmd(s,
					"SENTINEL get-master-addr-by-name m");
	int port = -1;

	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
		port = atoi(r->element[1]->str);
	if (r)
		freeReplyObject(r);
	return port;
}

/* Does Sentinel @s know a healthy replica of m? */
static bool sentinel_sees_replica(const struct redis_proc *s)
{
	redisReply *r = redis_procs_cmd(s, "SENTINEL REPLICAS m");
	bool ok = false;

	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
		const redisReply *rep = r->element[0];

		for (size_t i = 0; i + 1 < rep->elements; i += 2)
			if (strcmp(rep->element[i]->str, "flags") == 0)
				ok = strcmp(rep->element[i + 1]->str, "slave") == 0;
	}
	if (r)
		freeReplyObject(r);
	return ok;
}

static void test_sentinel_failover(void **state)
{
	struct world *w = *state;
	int ports[5]; /* primary, replica, three Sentinels */
	char opt[200], pstr[8];
	const char *opts[] = { opt, "store_timeout=1", NULL };
	struct redis_proc *primary, *replica, *s[3];
	uint64_t start = now_ms(), end;
	redisReply *r;

	redis_procs_ports(ports, 5);
	primary = redis_procs_server(&w->rp, "primary", ports[0], false, NULL);
	snprintf(pstr, sizeof(pstr), "%d", ports[0]);
	replica = redis_procs_server(&w->rp, "replica", ports[1], false,
				     "--replicaof", "127.0.0.1", pstr, NULL);
	wait_info(replica, "INFO replication", "master_link_status:up");
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "s%d", i + 1);
		s[i] = redis_procs_sentinel(&w->rp, name, ports[2 + i], false,
					    ports[0], 2, SENTINEL_TIMES);
	}
	snprintf(opt, sizeof(opt),
		 "store=sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/m",
		 ports[2], ports[3], ports[4]);
	open_pool(w, opts);
	assert_int_equal(pool_port(w), ports[0]);
	expect_str(w, "SET before failover", "OK");
	/* Replication is asynchronous (and a replica fresh from its first
	 * sync gets the stream only after its first ACK): wait until the
	 * write reached the replica, so the new primary holds it. */
	end = now_ms() + REDIS_PROCS_READY_MS;
	for (bool there = false; !there;) {
		r = redis_procs_cmd(replica, "GET before");
		there = r && r->type == REDIS_REPLY_STRING;
		if (r)
			freeReplyObject(r);
		if (!there) {
			assert_true(now_ms() < end);
			nap(50);
		}
	}

	/* s1 promotes a replica only once it has its INFO and it answers
	 * pings: until then it says NOGOODSLAVE, and is asked again. */
	end = now_ms() + REDIS_PROCS_READY_MS;
	for (;;) {
		bool ok;

		while (!sentinel_sees_replica(s[0])) {
			assert_true(now_ms() < end);
			nap(100);
		}
		r = redis_procs_cmd(s[0], "SENTINEL FAILOVER m");
		assert_non_null(r);
		ok = r->type == REDIS_REPLY_STATUS;
		if (!ok && (r->type != REDIS_REPLY_ERROR ||
			    !strstr(r->str, "NOGOODSLAVE") || now_ms() > end))
			fail_msg("SENTINEL FAILOVER: %s", r->str);
		freeReplyObject(r);
		if (ok)
			break;
		nap(200);
	}

	/* Done when s1 names the replica and the old primary follows it
	 * (Sentinel then also drops its clients: the pool's connection). */
	end = now_ms() + REDIS_PROCS_READY_MS;
	while (sentinel_says(s[0]) != ports[1]) {
		assert_true(now_ms() < end);
		nap(50);
	}
	wait_info(primary, "INFO replication", "role:slave");

	/* The pool follows: its next calls go to the new primary. */
	expect_str(w, "GET before", "failover");
	expect_str(w, "SET after failover", "OK");
	assert_int_equal(pool_port(w), ports[1]);
	assert_true(rconn_pool_connected(w->pool));
	r = redis_procs_cmd(replica, "GET after");
	assert_non_null(r);
	assert_string_equal(r->str, "failover");
	freeReplyObject(r);

	/* Named directly, the old primary is refused: a replica. */
	{
		char direct[64], err[400];
		const char *dopts[] = { direct, "store_timeout=0.5", NULL };

		snprintf(direct, sizeof(direct), "store=redis://127.0.0.1:%d",
			 ports[0]);
		open_refused(dopts, -EIO, err, sizeof(err));
		assert_non_null(strstr(err, "a replica, not the primary"));
	}
	print_message("  failover test took %llu ms\n",
		      (unsigned long long)(now_ms() - start));
}

/* The Functions library --------------------------------------------------------- */

/* A stand-in library: sfs_version returns @version, sfs_mark returns @mark. */
static const char *library(char *buf, size_t cap, const char *name,
			   unsigned version, const char *mark)
{
	snprintf(buf, cap,
		 "#!lua name=%s\n"
		 "redis.register_function{function_name='sfs_version', "
		 "callback=function() return %u end, flags={'no-writes'}}\n"
		 "redis.register_function{function_name='sfs_mark', "
		 "callback=function() return '%s' end, flags={'no-writes'}}\n",
		 name, version, mark);
	return buf;
}

static void expect_library(struct world *w, const char *version,
			   const char *mark)
{
	int rc;
	redisReply *rep = pcall(w, 0, "FCALL_RO sfs_version 0", &rc);
	char v[32];

	assert_int_equal(rc, 0);
	assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
	snprintf(v, sizeof(v), "%lld", rep->integer);
	assert_string_equal(v, version);
	freeReplyObject(rep);
	expect_str(w, "FCALL_RO sfs_mark 0", mark);
}

static void test_library(void **state)
{
	struct world *w = *state;
	struct redis_proc *s = redis_procs_server(&w->rp, "r", 0, false, NULL);
	char opt[160], code[600], err[400];
	const char *opts[] = { opt, NULL };
	redisReply *rep;
	int rc;

	snprintf(opt, sizeof(opt), "store=unix:%s", s->sock);
	open_pool(w, opts);

	/* Absent: loaded. */
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      library(code, sizeof(code),
						      "statefs", 1, "a"),
					      1, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	expect_library(w, "1", "a");

	/* The same version: left alone (the mark stays). */
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      library(code, sizeof(code),
						      "statefs", 1, "b"),
					      1, err, sizeof(err)), 0);
	expect_library(w, "1", "a");

	/* Older in the store: replaced. */
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      library(code, sizeof(code),
						      "statefs", 12, "c"),
					      12, err, sizeof(err)), 0);
	expect_library(w, "12", "c");

	/* Newer in the store: refused, naming both, nothing changed. */
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      library(code, sizeof(code),
						      "statefs", 3, "d"),
					      3, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "version 12"));
	assert_non_null(strstr(err, "version 3"));
	assert_memory_equal(err, "statefs: ", 9);
	assert_null(strchr(err, '\n'));
	expect_library(w, "12", "c");

	/* A library text that does not report the version it claims. */
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      library(code, sizeof(code),
						      "statefs", 13, "e"),
					      14, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "14"));

	/* Code the server refuses. */
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      "#!lua name=statefs\nthis is not lua",
					      20, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "cannot load"));

	/* A library of that name without sfs_version. */
	rep = pcall(w, 0, "FUNCTION FLUSH", &rc);
	assert_int_equal(rc, 0);
	freeReplyObject(rep);
	{
		const char *load[] = {
			"FUNCTION", "LOAD",
			"#!lua name=statefs\nredis.register_function('other', "
			"function() return 1 end)\n",
		};

		assert_int_equal(rconn_pool_call(w->pool, 0, 3, load, NULL,
						 &rep), 0);
		assert_int_equal(rep->type, REDIS_REPLY_STRING);
		freeReplyObject(rep);
	}
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      library(code, sizeof(code),
						      "statefs", 1, "f"),
					      1, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "sfs_version"));

	/* Another library whose name the pattern would match is not it. */
	rep = pcall(w, 0, "FUNCTION FLUSH", &rc);
	freeReplyObject(rep);
	{
		const char *load[] = {
			"FUNCTION", "LOAD",
			library(code, sizeof(code), "statefs2", 7, "x"),
		};

		assert_int_equal(rconn_pool_call(w->pool, 0, 3, load, NULL,
						 &rep), 0);
		freeReplyObject(rep);
	}
	rep = pcall(w, 0, "FUNCTION DELETE statefs2", &rc);
	freeReplyObject(rep);
	assert_int_equal(rconn_library_ensure(w->pool, "statefs",
					      library(code, sizeof(code),
						      "statefs", 2, "g"),
					      2, err, sizeof(err)), 0);
	expect_library(w, "2", "g");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_and_threads, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pipeline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stopped_server, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_restarted_server, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_nothing_listening, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_out_of_memory, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dedicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sentinel_discovery, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sentinel_failover, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_library, setup, teardown),
	};

	/* A write to a connection the server closed must fail, not kill. */
	signal(SIGPIPE, SIG_IGN);
	/* RCONN_TEST=test_library runs the tests matching that pattern. */
	if (getenv("RCONN_TEST"))
		cmocka_set_test_filter(getenv("RCONN_TEST"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
