/*
 * cluster.c - the pure part of routing on a Redis Cluster (contract in
 * redis/cluster.h): the hash slot of a key, the slot map a CLUSTER
 * SLOTS reply gives, a MOVED or ASK error parsed.
 *
 * The design
 * ----------
 * A cluster serves each of its 16384 hash slots from one primary; a
 * command goes to the primary of its keys' slot, or is answered MOVED
 * (the slot is served elsewhere now: remap it) or ASK (the slot is
 * being moved, and this key is there already: ask there this once,
 * after ASKING).  Every key of a tenant carries the tenant's hash tag,
 * so a tenant is one slot and each of its transitions one call to one
 * primary.  How the transport uses this, and why a function is not
 * sent on after an ASK: docs/design.md, "The shared store on a Redis
 * Cluster".  This file decides nothing about the network: it computes
 * and parses, so that it can be tested against a real cluster's own
 * answers (tests/unit/redis/test_cluster.c: CLUSTER KEYSLOT, CLUSTER
 * SLOTS, real redirections).
 *
 * What it owns
 * ------------
 * The maps it makes, each the caller's alone.  No lock, no thread.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/engine.h"
#include "redis/cluster.h"
#include "redis/link.h"

/* Hash slots ------------------------------------------------------------------ */

uint16_t cluster_crc16(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint16_t crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021)
					   : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned cluster_key_slot(const void *key, size_t len)
{
	const char *k = key;
	const char *open = memchr(k, '{', len);

	if (open) {
		size_t at = (size_t)(open - k) + 1;
		const char *close = memchr(k + at, '}', len - at);

		/* "{}" hashes the whole key, as Redis does. */
		if (close && close > k + at)
			return cluster_crc16(k + at, (size_t)(close - (k + at))) &
			       (CLUSTER_SLOTS - 1);
	}
	return cluster_crc16(k, len) & (CLUSTER_SLOTS - 1);
}

/* The slot map ---------------------------------------------------------------- */

/* Say why into @why (WHY_MAX bytes), when the caller asked. */
static void __attribute__((format(printf, 2, 3)))
why_set(char *why, const char *fmt, ...)
{
	va_list ap;

	if (!why)
		return;
	va_start(ap, fmt);
	vsnprintf(why, WHY_MAX, fmt, ap);
	va_end(ap);
}

/* The index of node @host:@port in @m, adding it (with @id) when it is
 * not there; -ENOMEM. */
static int node_index(struct cluster_map *m, const char *host, uint16_t port,
		      const char *id)
{
	struct cluster_node *n;

	for (unsigned i = 0; i < m->nnodes; i++)
		if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0) {
			if (!m->nodes[i].id[0] && id)
				snprintf(m->nodes[i].id, sizeof(m->nodes[i].id),
					 "%s", id);
			return (int)i;
		}
	/* Every index must stay below CLUSTER_NO_NODE. */
	if (m->nnodes >= CLUSTER_NO_NODE)
		return -ENOMEM;
	if (m->nnodes == m->capnodes) {
		unsigned cap = m->capnodes ? m->capnodes * 2 : 8;

		n = st_calloc(cap, sizeof(*n));
		if (!n)
			return -ENOMEM;
		if (m->nnodes)
			memcpy(n, m->nodes, m->nnodes * sizeof(*n));
		free(m->nodes);
		m->nodes = n;
		m->capnodes = cap;
	}
	n = &m->nodes[m->nnodes];
	memset(n, 0, sizeof(*n));
	snprintf(n->host, sizeof(n->host), "%s", host);
	n->port = port;
	if (id)
		snprintf(n->id, sizeof(n->id), "%s", id);
	return (int)m->nnodes++;
}

/* Element @i of array @r as a whole number in 0..@max, or -1. */
static long long int_at(const redisReply *r, size_t i, long long max)
{
	const redisReply *e;

	if (i >= r->elements)
		return -1;
	e = r->element[i];
	if (e->type != REDIS_REPLY_INTEGER || e->integer < 0 || e->integer > max)
		return -1;
	return e->integer;
}

/*
 * The primary @nd of one range (HOST PORT [ID ...]) into @host, *@port
 * and @id; false with @why when it is malformed.  *@known is false for
 * host "?".
 */
static bool node_parse(const redisReply *nd, const char *from_host, char *host,
		       uint16_t *port, char *id, bool *known, char *why)
{
	const redisReply *h;
	long long p;

	if (nd->type != REDIS_REPLY_ARRAY || nd->elements < 2) {
		why_set(why, "CLUSTER SLOTS: a node that is not HOST PORT ...");
		return false;
	}
	h = nd->element[0];
	if (h->type != REDIS_REPLY_STRING && h->type != REDIS_REPLY_NIL) {
		why_set(why, "CLUSTER SLOTS: a node's host is not a string");
		return false;
	}
	p = int_at(nd, 1, 65535);
	if (p < 1) {
		why_set(why, "CLUSTER SLOTS: a node's port is not in 1..65535");
		return false;
	}
	*known = true;
	if (h->type == REDIS_REPLY_NIL || h->len == 0) {
		h = NULL;
	} else if (h->len == 1 && h->str[0] == '?') {
		*known = false;
	} else if (h->len > STORE_REMOTE_HOST_MAX || memchr(h->str, '\0', h->len)) {
		why_set(why, "CLUSTER SLOTS: a node's host is too long");
		return false;
	}
	snprintf(host, STORE_REMOTE_HOST_MAX + 1, "%s",
		 h ? h->str : from_host ? from_host : "");
	if (!host[0]) {
		why_set(why, "CLUSTER SLOTS: a node at the same endpoint, "
			"and no endpoint given");
		return false;
	}
	*port = (uint16_t)p;
	id[0] = '\0';
	if (nd->elements >= 3) {
		const redisReply *i = nd->element[2];

		if (i->type != REDIS_REPLY_STRING || i->len < 1 ||
		    i->len > CLUSTER_ID_MAX) {
			why_set(why, "CLUSTER SLOTS: a node's id is not "
				"1..40 bytes");
			return false;
		}
		memcpy(id, i->str, i->len);
		id[i->len] = '\0';
	}
	return true;
}

int cluster_map_parse(const redisReply *rep, const char *from_host,
		      struct cluster_map **out, char *why)
{
	struct cluster_map *m;
	int rc = -EPROTO;

	*out = NULL;
	if (!rep || rep->type != REDIS_REPLY_ARRAY) {
		why_set(why, "CLUSTER SLOTS: %s", rep && rep->type ==
			REDIS_REPLY_ERROR ? rep->str : "not an array");
		return -EPROTO;
	}
	m = st_calloc(1, sizeof(*m));
	if (!m) {
		why_set(why, "out of memory");
		return -ENOMEM;
	}
	for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
		m->owner[s] = CLUSTER_NO_NODE;
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *r = rep->element[i];
		char host[STORE_REMOTE_HOST_MAX + 1], id[CLUSTER_ID_MAX + 1];
		long long start, end;
		uint16_t port = 0;
		bool known = true;
		int ix;

		if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
			why_set(why, "CLUSTER SLOTS: a range that is not "
				"START END PRIMARY ...");
			goto fail;
		}
		start = int_at(r, 0, CLUSTER_SLOTS - 1);
		end = int_at(r, 1, CLUSTER_SLOTS - 1);
		if (start < 0 || end < 0 || start > end) {
			why_set(why, "CLUSTER SLOTS: a range that is not "
				"slots START <= END in 0..16383");
			goto fail;
		}
		if (!node_parse(r->element[2], from_host, host, &port, id, &known,
				why))
			goto fail;
		if (!known) {
			/* Served by a node nobody can reach: uncovered. */
			for (long long s = start; s <= end; s++)
				m->owner[s] = CLUSTER_NO_NODE;
			continue;
		}
		ix = node_index(m, host, port, id[0] ? id : NULL);
		if (ix < 0) {
			rc = ix;
			why_set(why, "out of memory");
			goto fail;
		}
		for (long long s = start; s <= end; s++)
			m->owner[s] = (uint16_t)ix;
	}
	*out = m;
	return 0;
fail:
	cluster_map_free(m);
	return rc;
}

void cluster_map_free(struct cluster_map *m)
{
	if (!m)
		return;
	free(m->nodes);
	free(m);
}

const struct cluster_node *cluster_map_node(const struct cluster_map *m,
					    unsigned slot)
{
	if (slot >= CLUSTER_SLOTS || m->owner[slot] == CLUSTER_NO_NODE)
		return NULL;
	return &m->nodes[m->owner[slot]];
}

bool cluster_map_complete(const struct cluster_map *m)
{
	for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
		if (m->owner[s] == CLUSTER_NO_NODE)
			return false;
	return true;
}

int cluster_map_move(struct cluster_map *m, unsigned slot, const char *host,
		     uint16_t port)
{
	int ix;

	if (slot >= CLUSTER_SLOTS || port == 0 || !host || !host[0] ||
	    strlen(host) > STORE_REMOTE_HOST_MAX)
		return -EINVAL;
	ix = node_index(m, host, port, NULL);
	if (ix < 0)
		return ix;
	m->owner[slot] = (uint16_t)ix;
	return 0;
}

/* Redirections ---------------------------------------------------------------- */

int cluster_redirect_parse(const redisReply *rep, struct cluster_redirect *out)
{
	const char *p, *addr, *colon;
	size_t hlen;
	unsigned long slot, port;
	char *end;

	memset(out, 0, sizeof(*out));
	if (!rep || rep->type != REDIS_REPLY_ERROR || !rep->str)
		return CLUSTER_REDIRECT_NONE;
	if (strncmp(rep->str, "MOVED ", 6) == 0) {
		out->kind = CLUSTER_REDIRECT_MOVED;
		p = rep->str + 6;
	} else if (strncmp(rep->str, "ASK ", 4) == 0) {
		out->kind = CLUSTER_REDIRECT_ASK;
		p = rep->str + 4;
	} else {
		return CLUSTER_REDIRECT_NONE;
	}
	if (*p < '0' || *p > '9')
		goto bad;
	errno = 0;
	slot = strtoul(p, &end, 10);
	if (errno || slot >= CLUSTER_SLOTS || *end != ' ')
		goto bad;
	addr = end + 1;
	colon = strrchr(addr, ':');
	if (!colon || strchr(addr, ' '))
		goto bad;
	if (colon[1] < '0' || colon[1] > '9')
		goto bad;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port < 1 || port > 65535)
		goto bad;
	hlen = (size_t)(colon - addr);
	/* "[::1]:7000": the address without its brackets. */
	if (hlen >= 2 && addr[0] == '[' && addr[hlen - 1] == ']') {
		addr++;
		hlen -= 2;
	}
	if (hlen > STORE_REMOTE_HOST_MAX)
		goto bad;
	memcpy(out->addr.host, addr, hlen);
	out->addr.host[hlen] = '\0';
	out->addr.port = (uint16_t)port;
	out->slot = (unsigned)slot;
	return out->kind;
bad:
	memset(out, 0, sizeof(*out));
	return -EPROTO;
}
