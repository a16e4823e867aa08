/*
 * cluster_fixture.h - a Redis Cluster of the test's own: N primaries
 * (no replicas) started as `redis-server --cluster-enabled yes` on free
 * loopback ports, their cluster bus ports chosen free too
 * (--cluster-port), in a temporary directory of their own (no
 * persistence), joined by `redis-cli --cluster create --cluster-yes`,
 * with the test's connection to each node.  cluster_fixture_stop(),
 * which a test's teardown calls whatever the test did, kills every node
 * and removes the directory; each node also dies with the process that
 * started it (PR_SET_PDEATHSIG), should that one crash.
 *
 * Its processes are started and waited for with redis_fixture.h's
 * helpers.  No cmocka here: each function says how it failed, and the caller fails its test.
 */
#ifndef STATEFS_UNIT_REDIS_CLUSTER_FIXTURE_H
#define STATEFS_UNIT_REDIS_CLUSTER_FIXTURE_H

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <hiredis/hiredis.h>

#include "tests/unit/redis/redis_fixture.h"

#define CLUSTER_FIXTURE_CLI "/usr/bin/redis-cli"
#define CLUSTER_FIXTURE_NODES_MAX 6

/* The nodes and the test's connection to each.  Zeroed (or stopped), it
 * holds nothing. */
struct cluster_fixture {
	char dir[64];                                /* the nodes' directory */
	unsigned n;                                  /* nodes started */
	uint16_t port[CLUSTER_FIXTURE_NODES_MAX];    /* 127.0.0.1:port */
	uint16_t bus[CLUSTER_FIXTURE_NODES_MAX];     /* its cluster bus port */
	pid_t pid[CLUSTER_FIXTURE_NODES_MAX];        /* 0 when none */
	redisContext *rc[CLUSTER_FIXTURE_NODES_MAX]; /* the test's own */
};

/*
 * @n distinct free TCP ports of 127.0.0.1 into @ports: each bound to port
 * 0 and kept bound until all are chosen, so no two are the same.  (A
 * port may be taken by someone else before the node binds it: the start
 * then fails, and says so.)  0 or -1.
 */
static inline int cluster_fixture_free_ports(uint16_t *ports, unsigned n)
{
	int fds[2 * CLUSTER_FIXTURE_NODES_MAX];
	unsigned made = 0;
	int rc = 0;

	for (; made < n && rc == 0; made++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		socklen_t len = sizeof(a);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fds[made] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[made] < 0 ||
		    bind(fds[made], (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    getsockname(fds[made], (struct sockaddr *)&a, &len) < 0)
			rc = -1;
		else
			ports[made] = ntohs(a.sin_port);
	}
	while (made > 0)
		if (fds[--made] >= 0)
			close(fds[made]);
	return rc;
}

/* Kill every node of @f, close the test's connections and remove the
 * directory with what the nodes wrote there; @f then holds nothing.
 * Safe on a fixture zeroed, stopped already or half started. */
static inline void cluster_fixture_stop(struct cluster_fixture *f)
{
	for (unsigned i = 0; i < CLUSTER_FIXTURE_NODES_MAX; i++) {
		if (f->rc[i]) {
			redisFree(f->rc[i]);
			f->rc[i] = NULL;
		}
		if (f->pid[i] > 0) {
			kill(f->pid[i], SIGKILL);
			waitpid(f->pid[i], NULL, 0);
		}
		f->pid[i] = 0;
	}
	if (f->dir[0]) {
		DIR *d = opendir(f->dir);
		struct dirent *e;
		char path[400];

		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				snprintf(path, sizeof(path), "%s/%s", f->dir,
					 e->d_name);
				unlink(path);
			}
		if (d)
			closedir(d);
		rmdir(f->dir);
		f->dir[0] = '\0';
	}
	f->n = 0;
}

/* Does node @c say cluster_state:ok? */
static inline int cluster_fixture_ok(redisContext *c)
{
	redisReply *r = redisCommand(c, "CLUSTER INFO");
	int ok = r && r->type == REDIS_REPLY_STRING &&
		 strstr(r->str, "cluster_state:ok") != NULL;

	if (r)
		freeReplyObject(r);
	return ok;
}

/*
 * Start @n (1..CLUSTER_FIXTURE_NODES_MAX) nodes in a new directory
 * /tmp/statefs-@name.XXXXXX, connect to each, join them into one cluster
 * whose slots are spread evenly (redis-cli --cluster create), and wait
 * until every node says cluster_state:ok; each step waits up to 60 s (a
 * loaded machine may be slow).  0; -1 with a line on stderr saying what
 * failed, everything stopped again.
 */
static inline int cluster_fixture_start(struct cluster_fixture *f,
					const char *name, unsigned n)
{
	uint16_t ports[2 * CLUSTER_FIXTURE_NODES_MAX];
	char addr[CLUSTER_FIXTURE_NODES_MAX][32];
	char *cli[4 + CLUSTER_FIXTURE_NODES_MAX + 2];
	unsigned ncli = 0;
	const char *what = "";
	pid_t cpid;
	int st = -1;

	memset(f, 0, sizeof(*f));
	if (n < 1 || n > CLUSTER_FIXTURE_NODES_MAX)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/statefs-%s.XXXXXX", name);
	if (!mkdtemp(f->dir)) {
		f->dir[0] = '\0';
		what = "mkdtemp";
		goto fail;
	}
	if (cluster_fixture_free_ports(ports, 2 * n) < 0) {
		what = "no free loopback ports";
		goto fail;
	}
	for (unsigned i = 0; i < n; i++) {
		char port[8], bus[8], conf[128];
		char *argv[] = { "redis-server", "--port", port, "--bind",
				 "127.0.0.1", "--cluster-enabled", "yes",
				 "--cluster-port", bus, "--cluster-config-file",
				 conf, "--cluster-node-timeout", "5000", "--save",
				 "", "--appendonly", "no", "--dir", f->dir, NULL };

		f->port[i] = ports[2 * i];
		f->bus[i] = ports[2 * i + 1];
		snprintf(port, sizeof(port), "%u", (unsigned)f->port[i]);
		snprintf(bus, sizeof(bus), "%u", (unsigned)f->bus[i]);
		snprintf(conf, sizeof(conf), "%s/nodes-%s.conf", f->dir, port);
		f->pid[i] = redis_fixture_spawn(argv);
		if (f->pid[i] < 0) {
			f->pid[i] = 0;
			what = "fork";
			goto fail;
		}
		f->n = i + 1;
	}
	for (unsigned i = 0; i < n; i++) {
		for (int t = 0; t < 3000 && !f->rc[i]; t++) {
			struct timeval tv = { 1, 0 };
			redisContext *c = redisConnectWithTimeout("127.0.0.1",
								  f->port[i], tv);

			if (c && !c->err)
				f->rc[i] = c;
			else
				nap(20);
			if (c && c->err)
				redisFree(c);
		}
		if (!f->rc[i]) {
			what = "a node did not come up";
			goto fail;
		}
	}
	cli[ncli++] = "redis-cli";
	cli[ncli++] = "--cluster";
	cli[ncli++] = "create";
	for (unsigned i = 0; i < n; i++) {
		snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%u",
			 (unsigned)f->port[i]);
		cli[ncli++] = addr[i];
	}
	cli[ncli++] = "--cluster-yes";
	cli[ncli] = NULL;
	cpid = redis_fixture_exec(CLUSTER_FIXTURE_CLI, cli);
	if (cpid < 0) {
		what = "fork";
		goto fail;
	}
	for (int t = 0; t < 3000; t++) {
		if (waitpid(cpid, &st, WNOHANG) == cpid)
			break;
		nap(20);
		st = -1;
	}
	if (st == -1) {
		kill(cpid, SIGKILL);
		waitpid(cpid, NULL, 0);
	}
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		what = "redis-cli --cluster create failed";
		goto fail;
	}
	for (unsigned i = 0; i < n; i++) {
		int t = 0;

		while (!cluster_fixture_ok(f->rc[i]) && t++ < 3000)
			nap(20);
		if (t > 3000) {
			what = "the cluster did not become ok";
			goto fail;
		}
	}
	return 0;
fail:
	fprintf(stderr, "cluster_fixture_start: %s\n", what);
	cluster_fixture_stop(f);
	return -1;
}

/* The index in @f of the node on @port, or -1. */
static inline int cluster_fixture_node(const struct cluster_fixture *f,
				       unsigned port)
{
	for (unsigned i = 0; i < f->n; i++)
		if (f->port[i] == port)
			return (int)i;
	return -1;
}

#endif /* STATEFS_UNIT_REDIS_CLUSTER_FIXTURE_H */
