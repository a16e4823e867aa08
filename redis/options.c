/*
 * remote.c - the value helpers of struct store_remote (remote.h): its
 * defaults and how it is named in messages.
 *
 * Pure functions, no state and no locks; kept apart from redis/conn.c
 * so that layout/ and everything linking it need no Redis client.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "redis/redis.h"

void store_remote_default(struct store_remote *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = STORE_REMOTE_NONE;
	strcpy(r->prefix, "statefs");
	r->timeout_ms = 2000;
	r->adopt_limits = false;
}

/* snprintf-style appender: counts what the whole text needs. */
struct text {
	char *buf;
	size_t cap;
	size_t len;
};

static void put(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	if (t->len < t->cap)
		n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	else
		n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n;
}

/* HOST:PORT, an IPv6 address in brackets so the port stays apart. */
static void put_addr(struct text *t, const struct store_remote_addr *a)
{
	if (strchr(a->host, ':'))
		put(t, "[%s]:%u", a->host, (unsigned)a->port);
	else
		put(t, "%s:%u", a->host, (unsigned)a->port);
}

size_t store_remote_describe(char *buf, size_t cap,
			     const struct store_remote *r)
{
	struct text t = { buf, cap, 0 };

	if (cap > 0)
		buf[0] = '\0';
	switch (r->kind) {
	case STORE_REMOTE_NONE:
		put(&t, "embedded");
		break;
	case STORE_REMOTE_TCP:
		put(&t, "redis://");
		put_addr(&t, &r->addr);
		break;
	case STORE_REMOTE_UNIX:
		put(&t, "unix:%s", r->path);
		break;
	case STORE_REMOTE_SENTINEL:
		put(&t, "sentinel://");
		for (unsigned i = 0; i < r->nsentinels; i++) {
			if (i > 0)
				put(&t, ",");
			put_addr(&t, &r->sentinels[i]);
		}
		put(&t, "/%s", r->master);
		break;
	}
	return t.len;
}
