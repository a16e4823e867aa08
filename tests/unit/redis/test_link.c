/*
 * test_link.c - one connection to one Redis server (redis/link.c), plain
 * and over TLS, against real redis-server processes, and the pool of
 * redis/conn.c on rediss://: commands and pipelines formatted and parsed
 * by hiredis over both streams, a value far larger than one TLS record,
 * the server's certificate verified (its CA, its name, an address's IP
 * entry, store_tls_name), this mount's certificate shown to a server
 * that asks for one, every refusal named on one line (an unknown CA, a
 * name that does not match, a client certificate missing or refused, a
 * plain server behind rediss://, unusable TLS files), a read woken from
 * another thread, a read bounded by the link's timeout, a pool that
 * recovers from a restart of its TLS server, and sentinels:// (the
 * Sentinels and the primary over TLS).
 *
 * The group's setup makes two CAs and their certificates with openssl(1)
 * in a temporary directory (redis_certs_make); each test starts its own
 * servers on loopback ports in a world of tests/unit/redis/redis_procs.h,
 * and the teardown stops them, also after a failed test (each also dies
 * with this process).  Durations are only bounded from above, generously.
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
#include "redis/link.h"

#define SLACK_MS 2000

/* The certificates, made once for the group (redis_certs_make). */
static char certs[64];

struct world {
	struct redis_procs rp;    /* first: its servers, stopped at teardown */
	struct link *link;        /* closed by the teardown */
	struct link_tls *tls;     /* freed by the teardown */
	struct rconn_pool *pool;  /* closed by the teardown */
};

static int group_setup(void **state)
{
	(void)state;
	return redis_certs_make(certs, "link");
}

static int group_teardown(void **state)
{
	(void)state;
	redis_procs_rm(certs);
	return 0;
}

/* A file of the certificates' directory. */
static const char *cert(const char *name)
{
	static char paths[8][128];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, 128, "%s/%s", certs, name);
	return p;
}

/*
 * Start a redis-server on a loopback port: over TLS with the
 * certificate @server_cert (NULL: plain), asking for a client
 * certificate signed by ca when @clients.
 */
static struct redis_proc *start(struct world *w, const char *server_cert,
				bool clients)
{
	char name[16], crt[160], key[160];
	int port;

	redis_procs_ports(&port, 1);
	snprintf(name, sizeof(name), "r%d", w->rp.n);
	if (!server_cert)
		return redis_procs_server(&w->rp, name, port, false, NULL);
	snprintf(crt, sizeof(crt), "%s.crt", cert(server_cert));
	snprintf(key, sizeof(key), "%s.key", cert(server_cert));
	return redis_procs_server(&w->rp, name, port, true,
				  "--tls-cert-file", crt, "--tls-key-file", key,
				  "--tls-ca-cert-file", cert("ca.crt"),
				  "--tls-auth-clients", clients ? "yes" : "no",
				  NULL);
}

/* Start a Sentinel on a loopback TLS port (the certificate server's,
 * also shown to the primary), watching master "m" at @master's port
 * over TLS. */
static struct redis_proc *start_sentinel(struct world *w,
					 const struct redis_proc *master)
{
	char more[512];
	int port;

	redis_procs_ports(&port, 1);
	snprintf(more, sizeof(more), "tls-cert-file %s.crt\n"
		 "tls-key-file %s.key\ntls-ca-cert-file %s\n"
		 "tls-auth-clients no\ntls-replication yes\n",
		 cert("server"), cert("server"), cert("ca.crt"));
	return redis_procs_sentinel(&w->rp, "sentinel", port, true,
				    master->port, 1, more);
}

static int setup(void **state)
{
	return redis_procs_world_setup(state, sizeof(struct world), "link");
}

static int teardown(void **state)
{
	struct world *w = *state;

	redis_procs_stop(&w->rp);
	link_close(w->link);
	link_tls_free(w->tls);
	rconn_pool_close(w->pool);
	free(w);
	return 0;
}

/* Helpers ----------------------------------------------------------------- */

/* TLS settings for rediss://127.0.0.1:1 with extra options (NULL-ended). */
static struct link_tls *tls_of(const char *first, ...)
{
	const char *opts[8] = { "store=rediss://127.0.0.1:1" };
	struct store_remote r;
	struct link_tls *t = NULL;
	char why[WHY_MAX] = "", ca[200];
	int n = 1;
	va_list ap;

	snprintf(ca, sizeof(ca), "store_tls_ca=%s", cert("ca.crt"));
	opts[n++] = ca;
	va_start(ap, first);
	for (const char *o = first; o; o = va_arg(ap, const char *))
		opts[n++] = o;
	va_end(ap);
	opts[n] = NULL;
	redis_procs_options(&r, opts);
	if (link_tls_new(&r, &t, why) != 0)
		fail_msg("TLS settings: %s", why);
	assert_non_null(t);
	return t;
}

static void expect_str(redisReply *rep, const char *s)
{
	assert_non_null(rep);
	if (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_STATUS)
		fail_msg("reply type %d, wanted '%s'", rep->type, s);
	assert_string_equal(rep->str, s);
	freeReplyObject(rep);
}

/* Commands, a pipeline and a large binary value on @l. */
static void exercise(struct link *l)
{
	static const char *set[] = { "SET", "k", "v" };
	static const char *get[] = { "GET", "k" };
	static const char *ping[] = { "PING" };
	const size_t big = 3u << 20;
	char *value = malloc(big), why[WHY_MAX] = "";
	const char *bset[] = { "SET", "big", value };
	const size_t blen[] = { 3, 3, big };
	const char *bget[] = { "GET", "big" };
	redisReply *rep;

	assert_non_null(value);
	for (size_t i = 0; i < big; i++)
		value[i] = (char)(i * 7 + 3); /* NULs and CRLFs among them */
	expect_str(link_exchange(l, 1, ping, NULL, why), "PONG");
	/* A pipeline: three commands written, then three replies. */
	assert_int_equal(link_queue(l, 3, set, NULL), 0);
	assert_int_equal(link_queue(l, 2, get, NULL), 0);
	assert_int_equal(link_queue(l, 1, ping, NULL), 0);
	assert_int_equal(link_read(l, &rep), 0);
	expect_str(rep, "OK");
	assert_int_equal(link_read(l, &rep), 0);
	expect_str(rep, "v");
	assert_int_equal(link_read(l, &rep), 0);
	expect_str(rep, "PONG");
	expect_str(link_exchange(l, 3, bset, blen, why), "OK");
	rep = link_exchange(l, 2, bget, NULL, why);
	assert_non_null(rep);
	assert_int_equal(rep->type, REDIS_REPLY_STRING);
	assert_int_equal(rep->len, big);
	assert_memory_equal(rep->str, value, big);
	freeReplyObject(rep);
	assert_int_equal(link_failure(l), LINK_OK);
	free(value);
}

/* link_open to 127.0.0.1 (or @host) on @p's port must be refused with
 * @part in the message, within the budget. */
static void refused_at(struct world *w, const struct redis_proc *p,
		       const char *host, const char *part)
{
	char why[WHY_MAX] = "";
	uint64_t t0 = now_ms();
	int rc = link_open(host, (uint16_t)p->port, NULL, w->tls, 2000,
			   &w->link, why);
	redisReply *rep;
	static const char *ping[] = { "PING" };

	/* TLS 1.3: a client certificate is refused after the client's
	 * handshake, so the first reply is the refusal. */
	if (rc == 0) {
		rep = link_exchange(w->link, 1, ping, NULL, why);
		if (rep)
			fail_msg("no refusal (%s)", part);
		if (link_failure(w->link) != LINK_REFUSED)
			fail_msg("not a refusal: %s", why);
		link_close(w->link);
		w->link = NULL;
	} else {
		if (rc != -EPROTO)
			fail_msg("%d, not a refusal: %s", rc, why);
		assert_null(w->link);
	}
	if (!strstr(why, part))
		fail_msg("'%s' lacks '%s'", why, part);
	assert_null(strchr(why, '\n'));
	assert_true(now_ms() - t0 < 2000 + SLACK_MS);
}

/* Tests ----------------------------------------------------------------- */

static void test_plain(void **state)
{
	struct world *w = *state;
	struct redis_proc *p = start(w, NULL, false);
	char why[WHY_MAX] = "";
	struct redis_proc *u;

	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, NULL,
				   2000, &w->link, why), 0);
	exercise(w->link);
	link_close(w->link);
	w->link = NULL;
	/* A unix socket (every server of the world has one). */
	u = start(w, NULL, false);
	assert_int_equal(link_open(NULL, 0, u->sock, NULL, 2000, &w->link, why),
			 0);
	exercise(w->link);
	/* Nobody there: refused at once, with hiredis's words. */
	link_close(w->link);
	w->link = NULL;
	redis_procs_kill(p);
	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, NULL,
				   2000, &w->link, why), -EIO);
	assert_non_null(strstr(why, "Connection refused"));
}

static void test_tls(void **state)
{
	struct world *w = *state;
	struct redis_proc *p = start(w, "server", false);
	char why[WHY_MAX] = "";

	w->tls = tls_of(NULL);
	/* An address checks the certificate's IP entry... */
	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, w->tls,
				   2000, &w->link, why), 0);
	exercise(w->link);
	link_close(w->link);
	w->link = NULL;
	/* ...a name its DNS entry. */
	assert_int_equal(link_open("localhost", (uint16_t)p->port, NULL, w->tls,
				   2000, &w->link, why), 0);
	exercise(w->link);
	link_close(w->link);
	w->link = NULL;
	/* A plain link to a TLS port gets no reply, and does not hang. */
	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, NULL,
				   1000, &w->link, why), 0);
	{
		static const char *ping[] = { "PING" };
		uint64_t t0 = now_ms();

		assert_null(link_exchange(w->link, 1, ping, NULL, why));
		assert_true(now_ms() - t0 < 1000 + SLACK_MS);
	}
}

static void test_tls_name(void **state)
{
	struct world *w = *state;
	struct redis_proc *p = start(w, "wrongname", false);
	char why[WHY_MAX] = "";

	w->tls = tls_of(NULL);
	refused_at(w, p, "127.0.0.1", "not for '127.0.0.1'");
	refused_at(w, p, "localhost", "not for 'localhost'");
	/* store_tls_name: the name the certificate carries. */
	link_tls_free(w->tls);
	w->tls = tls_of("store_tls_name=other.example", NULL);
	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, w->tls,
				   2000, &w->link, why), 0);
	exercise(w->link);
	link_close(w->link);
	w->link = NULL;
	link_tls_free(w->tls);
	w->tls = tls_of("store_tls_name=third.example", NULL);
	refused_at(w, p, "127.0.0.1", "not for 'third.example'");
}

static void test_unknown_ca(void **state)
{
	struct world *w = *state;
	struct redis_proc *p = start(w, "stranger", false);

	w->tls = tls_of(NULL);
	refused_at(w, p, "127.0.0.1", "signed by no CA trusted");
}

static void test_client_certificate(void **state)
{
	struct world *w = *state;
	struct redis_proc *p = start(w, "server", true);
	char c[200], k[200], why[WHY_MAX] = "";

	w->tls = tls_of(NULL);
	refused_at(w, p, "127.0.0.1", "wants this mount's certificate");
	link_tls_free(w->tls);
	snprintf(c, sizeof(c), "store_tls_cert=%s", cert("badclient.crt"));
	snprintf(k, sizeof(k), "store_tls_key=%s", cert("badclient.key"));
	w->tls = tls_of(c, k, NULL);
	refused_at(w, p, "127.0.0.1", "refused this mount's certificate");
	link_tls_free(w->tls);
	snprintf(c, sizeof(c), "store_tls_cert=%s", cert("client.crt"));
	snprintf(k, sizeof(k), "store_tls_key=%s", cert("client.key"));
	w->tls = tls_of(c, k, NULL);
	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, w->tls,
				   2000, &w->link, why), 0);
	exercise(w->link);
}

static void test_plain_server(void **state)
{
	struct world *w = *state;
	struct redis_proc *p = start(w, NULL, false);

	w->tls = tls_of(NULL);
	refused_at(w, p, "127.0.0.1", "speaks plain Redis, not TLS");
}

static void test_tls_files(void **state)
{
	static const struct {
		const char *opt[3];
		const char *part;
	} bad[] = {
		{ { "store_tls_ca=/nonexistent/ca.pem" }, "-o store_tls_ca=/nonexistent" },
		{ { "store_tls_ca=/etc/hostname" }, "-o store_tls_ca=/etc/hostname" },
		{ { "store_tls_cert=/nonexistent.crt", "store_tls_key=/k" },
		  "-o store_tls_cert=/nonexistent.crt" },
		{ { "store_tls_cert=@client.crt", "store_tls_key=/nonexistent" },
		  "-o store_tls_key=/nonexistent" },
		{ { "store_tls_cert=@client.crt", "store_tls_key=@badclient.key" },
		  "is not the key of -o store_tls_cert" },
	};
	struct world *w = *state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *opts[4] = { "store=rediss://127.0.0.1:1" };
		char words[2][200], why[WHY_MAX] = "", err[400] = "";
		struct store_remote r;
		struct link_tls *t = NULL;

		for (int j = 0; j < 2 && bad[i].opt[j]; j++) {
			const char *at = strchr(bad[i].opt[j], '@');

			if (at)
				snprintf(words[j], sizeof(words[j]), "%.*s%s",
					 (int)(at - bad[i].opt[j]), bad[i].opt[j],
					 cert(at + 1));
			else
				snprintf(words[j], sizeof(words[j]), "%s",
					 bad[i].opt[j]);
			opts[j + 1] = words[j];
		}
		redis_procs_options(&r, opts);
		assert_int_equal(link_tls_new(&r, &t, why), -EINVAL);
		assert_null(t);
		if (!strstr(why, bad[i].part))
			fail_msg("'%s' lacks '%s'", why, bad[i].part);
		/* The pool refuses the same at once, on one line. */
		assert_int_equal(rconn_pool_open(&r, 2, &w->pool, err,
						 sizeof(err)), -EINVAL);
		assert_null(strchr(err, '\n'));
		assert_non_null(strstr(err, bad[i].part));
	}
}

struct waker {
	struct link *l;
	unsigned ms;
};

static void *wake_later(void *arg)
{
	struct waker *k = arg;

	nap(k->ms);
	link_wake(k->l);
	return NULL;
}

/* A read blocked on the server ends when another thread wakes it, and
 * a read of a stopped server ends with the link's timeout. */
static void blocked(struct world *w, struct redis_proc *p, struct link_tls *tls)
{
	static const char *blpop[] = { "BLPOP", "nothing", "0" };
	static const char *ping[] = { "PING" };
	char why[WHY_MAX] = "";
	struct waker k = { NULL, 300 };
	pthread_t t;
	uint64_t t0;

	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, tls,
				   2000, &w->link, why), 0);
	k.l = w->link;
	assert_int_equal(link_set_timeout(w->link, 20000), 0);
	t0 = now_ms();
	assert_int_equal(pthread_create(&t, NULL, wake_later, &k), 0);
	assert_null(link_exchange(w->link, 3, blpop, NULL, why));
	pthread_join(t, NULL);
	assert_true(now_ms() - t0 < 300 + SLACK_MS);
	assert_int_equal(link_failure(w->link), LINK_IO);
	/* Failed stays failed. */
	assert_null(link_exchange(w->link, 1, ping, NULL, why));
	link_close(w->link);
	w->link = NULL;

	assert_int_equal(link_open("127.0.0.1", (uint16_t)p->port, NULL, tls,
				   2000, &w->link, why), 0);
	assert_int_equal(link_set_timeout(w->link, 500), 0);
	kill(p->pid, SIGSTOP);
	t0 = now_ms();
	assert_null(link_exchange(w->link, 1, ping, NULL, why));
	assert_int_equal(link_failure(w->link), LINK_TIMEOUT);
	assert_string_equal(why, "no reply within the timeout");
	assert_true(now_ms() - t0 < 500 + SLACK_MS);
	kill(p->pid, SIGCONT);
	link_close(w->link);
	w->link = NULL;
}

static void test_wake_and_timeout(void **state)
{
	struct world *w = *state;

	blocked(w, start(w, NULL, false), NULL);
	w->tls = tls_of(NULL);
	blocked(w, start(w, "server", false), w->tls);
}

/* The pool on rediss://: calls, a restart, and each refusal at open. */
static void test_pool(void **state)
{
	static const char *ping[] = { "PING" };
	struct world *w = *state;
	struct redis_proc *p = start(w, "server", true), *q;
	char url[64], ca[200], c[200], k[200], err[400] = "";
	const char *opts[6] = { url, ca, c, k, NULL };
	struct store_remote r;
	redisReply *rep;

	snprintf(url, sizeof(url), "store=rediss://127.0.0.1:%d", p->port);
	snprintf(ca, sizeof(ca), "store_tls_ca=%s", cert("ca.crt"));
	snprintf(c, sizeof(c), "store_tls_cert=%s", cert("client.crt"));
	snprintf(k, sizeof(k), "store_tls_key=%s", cert("client.key"));
	redis_procs_options(&r, opts);
	assert_int_equal(rconn_pool_open(&r, 2, &w->pool, err, sizeof(err)), 0);
	assert_int_equal(rconn_pool_call(w->pool, 0, 1, ping, NULL, &rep), 0);
	expect_str(rep, "PONG");
	/* A restart of the server: the next call reconnects. */
	redis_procs_kill(p);
	redis_procs_restart(&w->rp, p);
	assert_int_equal(rconn_pool_call(w->pool, 10000, 1, ping, NULL, &rep), 0);
	expect_str(rep, "PONG");
	/* Stopped: the store is unreachable, as over plain TCP. */
	redis_procs_kill(p);
	assert_int_equal(rconn_pool_call(w->pool, 500, 1, ping, NULL, &rep), -EIO);
	assert_false(rconn_pool_connected(w->pool));
	rconn_pool_close(w->pool);
	w->pool = NULL;

	/* Refusals at open: final, one line naming the store and which. */
	redis_procs_restart(&w->rp, p);
	opts[2] = NULL;
	redis_procs_options(&r, opts);
	assert_int_equal(rconn_pool_open(&r, 2, &w->pool, err, sizeof(err)),
			 -EPROTO);
	assert_null(w->pool);
	assert_null(strchr(err, '\n'));
	assert_memory_equal(err, "statefs: -o store=rediss://127.0.0.1:", 37);
	assert_non_null(strstr(err, "wants this mount's certificate"));
	q = start(w, NULL, false);
	snprintf(url, sizeof(url), "store=rediss://127.0.0.1:%d", q->port);
	redis_procs_options(&r, opts);
	assert_int_equal(rconn_pool_open(&r, 2, &w->pool, err, sizeof(err)),
			 -EPROTO);
	assert_non_null(strstr(err, "speaks plain Redis"));
}

/* sentinels://: the Sentinels and the primary they name over TLS. */
static void test_sentinels(void **state)
{
	static const char *ping[] = { "PING" };
	struct world *w = *state;
	struct redis_proc *m = start(w, "server", true), *s = start_sentinel(w, m);
	char url[64], ca[200], c[200], k[200], err[400] = "";
	const char *opts[6] = { url, ca, c, k, NULL };
	struct store_remote r;
	redisReply *rep;

	snprintf(url, sizeof(url), "store=sentinels://127.0.0.1:%d/m", s->port);
	snprintf(ca, sizeof(ca), "store_tls_ca=%s", cert("ca.crt"));
	snprintf(c, sizeof(c), "store_tls_cert=%s", cert("client.crt"));
	snprintf(k, sizeof(k), "store_tls_key=%s", cert("client.key"));
	redis_procs_options(&r, opts);
	if (rconn_pool_open(&r, 2, &w->pool, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(rconn_pool_call(w->pool, 0, 1, ping, NULL, &rep), 0);
	expect_str(rep, "PONG");
	rconn_pool_close(w->pool);
	w->pool = NULL;
	/* A Sentinel whose certificate no CA given signs: refused, named. */
	snprintf(ca, sizeof(ca), "store_tls_ca=%s", cert("other.crt"));
	redis_procs_options(&r, opts);
	assert_int_equal(rconn_pool_open(&r, 2, &w->pool, err, sizeof(err)),
			 -EPROTO);
	assert_null(strchr(err, '\n'));
	if (!strstr(err, "Sentinel 127.0.0.1:") ||
	    !strstr(err, "signed by no CA trusted"))
		fail_msg("%s", err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_plain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tls_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_ca, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_certificate, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_plain_server, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tls_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wake_and_timeout, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pool, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sentinels, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
