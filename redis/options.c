/*
 * remote.c - the value helpers of struct store_remote (remote.h): its
 * defaults and how it is named in messages.
 *
 * Pure functions, no state and no locks; kept apart from redis/conn.c
 * so that layout/ and everything linking it need no Redis client.
 */
#include <stdio.h>
#include <string.h>

#include "lib/text.h"
#include "redis/redis.h"

void store_remote_default(struct store_remote *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = STORE_REMOTE_NONE;
	strcpy(r->prefix, "statefs");
	r->timeout_ms = 2000;
	r->lock_timeout_ms = 10000;
	r->follow_idle_ms = 30000;
	r->adopt_limits = false;
}

/* HOST:PORT, an IPv6 address in brackets so the port stays apart. */
static void put_addr(struct text *t, const struct store_remote_addr *a)
{
	if (strchr(a->host, ':'))
		text_put(t, "[%s]:%u", a->host, (unsigned)a->port);
	else
		text_put(t, "%s:%u", a->host, (unsigned)a->port);
}

/* The Sentinels' or seed nodes' addresses of @r, comma-separated. */
static void put_addrs(struct text *t, const struct store_remote *r)
{
	for (unsigned i = 0; i < r->nsentinels; i++) {
		if (i > 0)
			text_put(t, ",");
		put_addr(t, &r->sentinels[i]);
	}
}

size_t store_remote_describe(char *buf, size_t cap,
			     const struct store_remote *r)
{
	struct text t = text_start(buf, cap);

	switch (r->kind) {
	case STORE_REMOTE_NONE:
		text_put(&t, "embedded");
		break;
	case STORE_REMOTE_TCP:
		text_put(&t, r->tls ? "rediss://" : "redis://");
		put_addr(&t, &r->addr);
		break;
	case STORE_REMOTE_UNIX:
		text_put(&t, "unix:%s", r->path);
		break;
	case STORE_REMOTE_SENTINEL:
		text_put(&t, r->tls ? "sentinels://" : "sentinel://");
		put_addrs(&t, r);
		text_put(&t, "/%s", r->master);
		break;
	case STORE_REMOTE_CLUSTER:
		text_put(&t, r->tls ? "clusters://" : "cluster://");
		put_addrs(&t, r);
		break;
	}
	return t.len;
}
