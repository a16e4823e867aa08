/*
 * cluster.h - the routing of a shared store on a Redis Cluster, its
 * pure part: the hash slot of a key, the slot map a CLUSTER SLOTS reply
 * gives, and a MOVED or ASK redirection parsed.  Private to redis/; the
 * transport (redis/conn.c) is to route with it (docs/design.md, "The
 * shared store on a Redis Cluster"; hiredis in Debian has no cluster
 * support, so the routing is statefs's own).
 *
 * No thread, no lock, no network: values of the caller's.  Errors follow
 * store/'s convention: 0 or -errno, and a one-line text in @why (WHY_MAX
 * bytes, redis/link.h) where one is asked for.
 */
#ifndef STATEFS_REDIS_CLUSTER_H
#define STATEFS_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"

/* The hash slots of a Redis Cluster, 0..CLUSTER_SLOTS - 1. */
#define CLUSTER_SLOTS 16384u
/* A node's id, as CLUSTER SLOTS and CLUSTER NODES give it: 40 hex. */
#define CLUSTER_ID_MAX 40
/* The owner of a slot no range of the map covers. */
#define CLUSTER_NO_NODE UINT16_MAX

/*
 * CRC16 as Redis Cluster defines it (src/crc16.c: CCITT/XMODEM, the
 * polynomial 0x1021, initial value 0, no reflection, no final xor) of
 * @len bytes at @buf.  crc16("123456789") is 0x31c3.
 */
uint16_t cluster_crc16(const void *buf, size_t len);

/*
 * The hash slot of key @key (@len bytes, binary-safe), as Redis's
 * keyHashSlot: when the key holds a '{' followed, later, by a '}' with
 * at least one byte between them, only the bytes between the first '{'
 * and the first '}' after it are hashed (the hash tag); else the whole
 * key.  CRC16 of those bytes mod CLUSTER_SLOTS.  So every key of tenant
 * TID, "P:{P.tTID}:...", is in one slot.
 */
unsigned cluster_key_slot(const void *key, size_t len);

/* One primary of the map. */
struct cluster_node {
	char host[STORE_REMOTE_HOST_MAX + 1]; /* an IPv6 address without [] */
	uint16_t port;                        /* 1..65535 */
	char id[CLUSTER_ID_MAX + 1];          /* "" when the reply gave none */
};

/*
 * The slot map: which primary serves each slot.  @owner[slot] indexes
 * @nodes, or is CLUSTER_NO_NODE when no range covers the slot (a
 * cluster that is down, or a map being changed).  Each node is in
 * @nodes once (the same host and port).
 */
struct cluster_map {
	unsigned nnodes;
	unsigned capnodes;
	struct cluster_node *nodes;
	uint16_t owner[CLUSTER_SLOTS];
};

/*
 * Parse @rep, a reply to CLUSTER SLOTS (an array of ranges, each
 * START END PRIMARY [REPLICA...], a node being an array HOST PORT [ID
 * ...]), into a new map in *@out (the caller frees it with
 * cluster_map_free).  Replicas are ignored: statefs calls primaries
 * only.  A primary whose host is empty or nil is at the host the reply
 * came from, @from_host (Redis's "the same endpoint you asked"); one
 * whose host is "?" (an endpoint Redis does not know) serves nothing in
 * the map: its slots are left uncovered.  A later range over an earlier
 * one wins.  0; -EPROTO when @rep is not such a reply (an error reply,
 * a slot past 16383, START past END, a port out of 1..65535, a host too
 * long, an id that is not 1..40 bytes), with the reason in @why; -ENOMEM.
 */
int cluster_map_parse(const redisReply *rep, const char *from_host,
		      struct cluster_map **out, char *why);

/* Free @m.  NULL is a no-op. */
void cluster_map_free(struct cluster_map *m);

/* The primary that serves @slot in @m, or NULL when no range covers it
 * (or @slot is past the last). */
const struct cluster_node *cluster_map_node(const struct cluster_map *m,
					    unsigned slot);

/* Does @m give every slot a primary?  (A cluster whose map does not is
 * down for the slots it leaves out.) */
bool cluster_map_complete(const struct cluster_map *m);

/*
 * Record in @m that @slot is served by @host:@port (a MOVED), adding
 * that node when @m does not hold it (with no id).  0, -EINVAL (@slot
 * past the last, a port of 0, a host too long), -ENOMEM (@m unchanged).
 */
int cluster_map_move(struct cluster_map *m, unsigned slot, const char *host,
		     uint16_t port);

/* What an error reply says about where a command must go. */
enum cluster_redirect_kind {
	CLUSTER_REDIRECT_NONE = 0, /* not a redirection */
	CLUSTER_REDIRECT_MOVED,    /* the slot is served there now: remap */
	CLUSTER_REDIRECT_ASK,      /* this once, there, after ASKING */
};

struct cluster_redirect {
	enum cluster_redirect_kind kind;
	unsigned slot;
	/* host "" when the error named none (":PORT": Redis's "the same
	 * endpoint you asked"): the caller puts the node's it asked. */
	struct store_remote_addr addr;
};

/*
 * Is @rep a MOVED or ASK error ("MOVED SLOT HOST:PORT", "ASK SLOT
 * HOST:PORT", the port after the last ':', so an IPv6 host needs no
 * brackets; one in brackets is taken without them)?  Fills @out and
 * returns its kind (CLUSTER_REDIRECT_NONE for any other reply: @out
 * then says NONE too), or -EPROTO for a MOVED or ASK that is not so
 * formed (no slot, a slot past 16383, no port, a port out of 1..65535,
 * a host too long).
 */
int cluster_redirect_parse(const redisReply *rep, struct cluster_redirect *out);

#endif /* STATEFS_REDIS_CLUSTER_H */
