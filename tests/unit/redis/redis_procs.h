/*
 * redis_procs.h - a world of several redis-server and Sentinel
 * processes, for the tests of the Redis transport that need more than
 * the one server of redis_fixture.h (test_rconn.c, test_link.c): TCP on
 * loopback ports, plain or TLS, primaries with replicas, Sentinels,
 * servers killed, stopped and restarted on the same port.
 *
 * A world owns a temporary directory /tmp/statefs-NAME.XXXXXX and the
 * processes started in it, each with its files there: DIR/P.sock (a
 * unix socket, always plain Redis, also on a TLS server: the test's own
 * looks go through it), DIR/P.log (its log, printed when it fails to
 * come up), DIR/P.conf (a Sentinel's configuration).  Each process is
 * spawned by redis_fixture_spawn, so it dies with the test process should
 * that one crash; redis_procs_stop(), which a test's teardown calls
 * whatever the test did, kills and reaps every one (a SIGSTOPped one
 * too) and removes the directory.  Nothing listens beyond 127.0.0.1.
 *
 * A test's world begins with its struct redis_procs, beside what the
 * test opens on it (redis_procs_world_setup is its cmocka setup); the
 * store's options of a test reach it as a mount parses them
 * (redis_procs_options).
 *
 * TLS: redis_certs_make() makes, once for a group of tests, two CAs and
 * their certificates with openssl(1) in a directory of their own;
 * a server or Sentinel started with @tls serves its port over TLS, with
 * the certificate arguments the caller gives.
 *
 * A Redis Cluster's nodes start as any server, with their extra
 * arguments: "--cluster-enabled", "yes", "--cluster-config-file",
 * redis_procs_path(w, "n1", ".nodes", ...), and "--cluster-port" with a
 * second port of redis_procs_ports() (so the bus port is a free one too);
 * REDIS_PROCS_MAX has room for three primaries and their replicas.
 *
 * Every wait for a process is bounded by REDIS_PROCS_READY_MS, generous
 * for a loaded machine.  Each function that starts, waits or parses
 * fails the running cmocka test when it cannot do what it says (the
 * setups and redis_certs_make return -1 instead): include it after
 * tests/unit/unit.h and redis_fixture.h, with _GNU_SOURCE defined before
 * any include (nftw).
 */
#ifndef STATEFS_UNIT_REDIS_PROCS_H
#define STATEFS_UNIT_REDIS_PROCS_H

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "layout/layout.h"

#define REDIS_PROCS_MAX 8
/* Ports redis_procs_ports() finds at once: a cluster's nodes and buses. */
#define REDIS_PROCS_PORTS 16
/* How long a process may take to come up or reach a state. */
#define REDIS_PROCS_READY_MS 30000

/* One redis-server or Sentinel of a world.  pid 0: not running. */
struct redis_proc {
	pid_t pid;
	char name[16];
	int port;           /* its loopback port; 0: the unix socket only */
	bool tls;           /* the port speaks TLS (the socket never does) */
	char sock[128];     /* DIR/NAME.sock */
	char *argv[48];     /* how it was started, for a restart */
	char args[2048];    /* the strings argv points into */
	size_t used;        /* of args */
};

struct redis_procs {
	char dir[64];
	struct redis_proc procs[REDIS_PROCS_MAX];
	int n;
};

/* "DIR/NAMEEXT" in @buf: a file of @w's directory. */
static inline char *redis_procs_path(const struct redis_procs *w,
				     const char *name, const char *ext,
				     char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s%s", w->dir, name, ext);
	return buf;
}

/* @n distinct loopback ports nobody listens on (all bound at once). */
static inline void redis_procs_ports(int *ports, int n)
{
	int fds[REDIS_PROCS_PORTS];

	assert_true(n <= REDIS_PROCS_PORTS);
	for (int i = 0; i < n; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		socklen_t len = sizeof(a);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(fds[i] >= 0);
		assert_int_equal(bind(fds[i], (struct sockaddr *)&a, sizeof(a)), 0);
		assert_int_equal(getsockname(fds[i], (struct sockaddr *)&a, &len), 0);
		ports[i] = ntohs(a.sin_port);
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

static inline int redis_procs_rm_entry(const char *path, const struct stat *st,
				       int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* rm -r @dir; nothing when it is "". */
static inline void redis_procs_rm(const char *dir)
{
	if (dir[0])
		nftw(dir, redis_procs_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* A world with no process yet, in a new /tmp/statefs-@name.XXXXXX: 0,
 * or -1 when the directory cannot be made (for a cmocka setup). */
static inline int redis_procs_setup(struct redis_procs *w, const char *name)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->dir, sizeof(w->dir), "/tmp/statefs-%s.XXXXXX", name);
	if (!mkdtemp(w->dir)) {
		w->dir[0] = '\0';
		return -1;
	}
	return 0;
}

/*
 * cmocka's setup of a test's world: *@state a zeroed world of @size
 * bytes whose first member is its struct redis_procs, in a new
 * /tmp/statefs-@name.XXXXXX.  0, or -1 with nothing made.  The test's
 * teardown calls redis_procs_stop() on that member and frees the world.
 */
static inline int redis_procs_world_setup(void **state, size_t size,
					  const char *name)
{
	struct redis_procs *w = calloc(1, size);

	if (!w)
		return -1;
	if (redis_procs_setup(w, name) != 0) {
		free(w);
		return -1;
	}
	*state = w;
	return 0;
}

/* Kill @p (SIGKILL, even a stopped one) and reap it; it can restart. */
static inline void redis_procs_kill(struct redis_proc *p)
{
	redis_fixture_kill(&p->pid);
}

/* Kill and reap every process of @w, and remove its directory; safe on
 * a world zeroed, half started or stopped already. */
static inline void redis_procs_stop(struct redis_procs *w)
{
	for (int i = 0; i < w->n; i++)
		redis_procs_kill(&w->procs[i]);
	redis_procs_rm(w->dir);
	w->dir[0] = '\0';
}

/* A connection of the test's own to @p's unix socket (1 s timeouts);
 * NULL when it does not answer. */
static inline redisContext *redis_procs_connect(const struct redis_proc *p)
{
	struct timeval tv = { 1, 0 };
	redisContext *c = redisConnectUnixWithTimeout(p->sock, tv);

	if (c && !c->err && redisSetTimeout(c, tv) == REDIS_OK)
		return c;
	if (c)
		redisFree(c);
	return NULL;
}

/* Run a command on @p over a connection of its own; the reply (the
 * caller's to free), or NULL when @p does not answer. */
static inline redisReply *redis_procs_cmd(const struct redis_proc *p,
					  const char *fmt, ...)
{
	redisContext *c = redis_procs_connect(p);
	redisReply *r = NULL;
	va_list ap;

	if (!c)
		return NULL;
	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	redisFree(c);
	return r;
}

static inline void redis_procs_print_log(const struct redis_procs *w,
					 const struct redis_proc *p)
{
	char path[128], line[512];
	FILE *f = fopen(redis_procs_path(w, p->name, ".log", path,
					 sizeof(path)), "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  %s: %s", p->name, line);
	fclose(f);
}

/* Start @p as its argv says, and wait until it answers PING; fail the
 * test with its log when it exits or never does. */
static inline void redis_procs_spawn(struct redis_procs *w,
				     struct redis_proc *p)
{
	uint64_t end = now_ms() + REDIS_PROCS_READY_MS;

	p->pid = redis_fixture_spawn(p->argv);
	assert_true(p->pid > 0);
	while (now_ms() < end) {
		redisReply *r = redis_procs_cmd(p, "PING");
		int status;

		if (r) {
			bool pong = r->type == REDIS_REPLY_STATUS &&
				    strcmp(r->str, "PONG") == 0;

			freeReplyObject(r);
			if (pong)
				return;
		}
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			p->pid = 0;
			redis_procs_print_log(w, p);
			fail_msg("%s exited at start", p->name);
		}
		nap(20);
	}
	redis_procs_print_log(w, p);
	fail_msg("%s did not come up", p->name);
}

/* Start @p again as it was started before: same port, socket, files. */
static inline void redis_procs_restart(struct redis_procs *w,
				       struct redis_proc *p)
{
	assert_int_equal(p->pid, 0);
	redis_procs_spawn(w, p);
}

/* Append @a to @p's arguments. */
static inline void redis_procs_arg(struct redis_proc *p, const char *a)
{
	size_t len = strlen(a) + 1, argc = 0;

	while (p->argv[argc])
		argc++;
	assert_true(argc + 1 < sizeof(p->argv) / sizeof(p->argv[0]));
	assert_true(p->used + len <= sizeof(p->args));
	p->argv[argc] = memcpy(p->args + p->used, a, len);
	p->argv[argc + 1] = NULL;
	p->used += len;
}

/* A new slot of @w for a process @name on @port. */
static inline struct redis_proc *redis_procs_new(struct redis_procs *w,
						 const char *name, int port,
						 bool tls)
{
	struct redis_proc *p;
	char sock[sizeof(p->sock)];

	assert_true(w->n < REDIS_PROCS_MAX);
	/* (Made aside: the compiler cannot tell w->dir from p->sock.) */
	redis_procs_path(w, name, ".sock", sock, sizeof(sock));
	p = &w->procs[w->n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->port = port;
	p->tls = tls;
	memcpy(p->sock, sock, sizeof(sock));
	redis_procs_arg(p, "redis-server");
	return p;
}

/*
 * Start a redis-server called @name in @w's directory, on its unix
 * socket and, when @port, on that loopback port (over TLS when @tls, the
 * certificates among the extra arguments), without persistence; the
 * extra arguments follow (NULL-terminated).  Returns it once it answers.
 */
static inline struct redis_proc *redis_procs_server(struct redis_procs *w,
						    const char *name, int port,
						    bool tls, ...)
{
	struct redis_proc *p = redis_procs_new(w, name, port, tls);
	char portarg[16], path[128];
	va_list ap;

	snprintf(portarg, sizeof(portarg), "%d", port);
	redis_procs_arg(p, "--port");
	redis_procs_arg(p, tls ? "0" : portarg);
	if (tls) {
		redis_procs_arg(p, "--tls-port");
		redis_procs_arg(p, portarg);
	}
	redis_procs_arg(p, "--bind");
	redis_procs_arg(p, "127.0.0.1");
	redis_procs_arg(p, "--unixsocket");
	redis_procs_arg(p, p->sock);
	redis_procs_arg(p, "--save");
	redis_procs_arg(p, "");
	redis_procs_arg(p, "--appendonly");
	redis_procs_arg(p, "no");
	redis_procs_arg(p, "--dir");
	redis_procs_arg(p, w->dir);
	redis_procs_arg(p, "--logfile");
	redis_procs_arg(p, redis_procs_path(w, name, ".log", path,
					    sizeof(path)));
	redis_procs_arg(p, "--repl-diskless-sync-delay");
	redis_procs_arg(p, "0");
	va_start(ap, tls);
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;)
		redis_procs_arg(p, a);
	va_end(ap);
	redis_procs_spawn(w, p);
	return p;
}

/*
 * Start a Sentinel called @name on loopback port @port (over TLS when
 * @tls), watching master "m" at 127.0.0.1:@master_port with @quorum;
 * @more is added to its configuration as it is (lines, each ending in a
 * newline: timeouts, TLS files).  Returns it once it answers.
 */
static inline struct redis_proc *redis_procs_sentinel(struct redis_procs *w,
						      const char *name,
						      int port, bool tls,
						      int master_port,
						      int quorum,
						      const char *more)
{
	struct redis_proc *p = redis_procs_new(w, name, port, tls);
	char conf[128], log[128];
	FILE *f;

	redis_procs_path(w, name, ".conf", conf, sizeof(conf));
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "%s %d\n%s\nbind 127.0.0.1\ndir %s\nunixsocket %s\n"
		"logfile %s\nsentinel monitor m 127.0.0.1 %d %d\n%s",
		tls ? "tls-port" : "port", port, tls ? "port 0" : "",
		w->dir, p->sock, redis_procs_path(w, name, ".log", log,
						  sizeof(log)),
		master_port, quorum, more);
	assert_int_equal(fclose(f), 0);
	redis_procs_arg(p, conf);
	redis_procs_arg(p, "--sentinel");
	redis_procs_spawn(w, p);
	return p;
}

/* The store's options @opts (NULL-ended) in @r as a mount would have
 * them: each "-o" word through layout/, then its checks. */
static inline void redis_procs_options(struct store_remote *r,
				       const char *const *opts)
{
	char err[400] = "";

	store_remote_default(r);
	for (; *opts; opts++)
		if (layout_remote_option(r, *opts, err, sizeof(err)) != 1)
			fail_msg("option '%s': %s", *opts, err);
	if (layout_remote_finish(r, err, sizeof(err)) != 0)
		fail_msg("options: %s", err);
}

/*
 * The certificates of the TLS tests, made in a new directory
 * /tmp/statefs-@name-certs.XXXXXX named in @dir (64 bytes), each as
 * NAME.crt and NAME.key: ca and other, two CAs; server, ca's, for
 * localhost and 127.0.0.1; wrongname, ca's, for other.example only;
 * stranger, other's, for localhost and 127.0.0.1; client, ca's;
 * badclient, other's.  0, or -1 (said on stderr) with nothing left.
 */
static inline int redis_certs_make(char *dir, const char *name)
{
	static const char script[] =
		"set -e; cd '%s'\n"
		"key() { openssl genpkey -algorithm EC -pkeyopt "
		"ec_paramgen_curve:P-256 -out $1.key 2>/dev/null; }\n"
		"ca() { key $1; openssl req -x509 -new -key $1.key -out $1.crt "
		"-days 2 -subj /CN=$1 2>/dev/null; }\n"
		"cert() { key $1; openssl req -new -key $1.key -out $1.csr "
		"-subj /CN=$1 2>/dev/null; printf 'subjectAltName=%%s\\n' \"$3\" "
		">$1.ext; openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key "
		"-CAcreateserial -days 2 -out $1.crt -extfile $1.ext 2>/dev/null; }\n"
		"ca ca; ca other\n"
		"cert server ca DNS:localhost,IP:127.0.0.1\n"
		"cert wrongname ca DNS:other.example\n"
		"cert stranger other DNS:localhost,IP:127.0.0.1\n"
		"cert client ca DNS:client\n"
		"cert badclient other DNS:client\n";
	char cmd[2048];

	snprintf(dir, 64, "/tmp/statefs-%s-certs.XXXXXX", name);
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		return -1;
	}
	snprintf(cmd, sizeof(cmd), script, dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "openssl could not make the certificates\n");
		redis_procs_rm(dir);
		dir[0] = '\0';
		return -1;
	}
	return 0;
}

#endif /* STATEFS_UNIT_REDIS_PROCS_H */
