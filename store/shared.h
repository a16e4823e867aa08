/*
 * shared.h - a store with the shared store behind it: what its
 * transitions (store/remote_ops.c) and its follower (store/follow.c)
 * share.  Private to store/; the design is told at the top of
 * store/remote_ops.c.
 */
#ifndef STATEFS_STORE_SHARED_H
#define STATEFS_STORE_SHARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "store/rconn.h"
#include "store/remote.h"
#include "store/store.h"

/* A tenant log the follower reads: its tenant id and last entry id. */
struct follow_pos {
	uint64_t tid;
	char id[48];
};

struct remote {
	struct store_remote cfg;       /* immutable (password wiped) */
	struct rconn_pool *pool;       /* immutable */
	char mount[17];                /* this mount's id: ops MOUNT:N */
	atomic_uint_fast64_t opn;      /* the op counter */
	char meta[STORE_REMOTE_PREFIX_MAX * 2 + 16]; /* P:{P}:meta */
	char rootlog[STORE_REMOTE_PREFIX_MAX * 2 + 16];
	bool testclock;                /* immutable */

	/* The estimate of the store's clock: the local monotonic clock
	 * plus the offset learned from every reply's now_ms, never going
	 * backwards; under testclock the store's clock_ms as replies and
	 * the root log tell it. */
	atomic_int_fast64_t offset_ms;
	atomic_uint_fast64_t floor_ms;

	/* LOCK_REMOTE, held alone: the instance and what the follower
	 * applied (its broadcasts wake the transitions that wait for
	 * their outcome's seq). */
	pthread_mutex_t lock;
	pthread_cond_t applied;        /* lock: the follower applied more */
	uint64_t batches;              /* lock: batches applied so far */
	struct store *s;               /* immutable once made */
	char instance[17];             /* lock: the store instance */
	uint64_t instance_id;          /* its value, for .stats */
	bool reinit;                   /* lock: an ESTALEINST was seen */
	uint64_t generation;           /* lock: new instances so far */

	/* The follower (store/follow.c): its thread, its connection, its
	 * positions (its own), whether it runs. */
	pthread_t thread;
	bool running;
	atomic_bool stop;
	struct rconn *conn;
	char root_id[48];
	struct follow_pos *pos;
	size_t npos, cappos;
};

/*
 * FCALL @fn through the pool: @nkeys keys (the store's meta key is put
 * first: @keys are the others), the common arguments (the instance, an
 * operation id when @mutation, the deadline), then @argv.  The outcome's
 * now_ms feeds the clock estimate.  Returns the errno of the outcome (0
 * for OK) with the reply in *@out (the caller frees it), -EIO when Redis
 * could not be reached or did not answer within store_timeout (nothing
 * happened), -ESTALE after ESTALEINST (the instance changed: the
 * follower makes the mirror a new instance).
 */
int remote_fcall(struct store *s, const char *fn, bool mutation, int nkeys,
		 const char *const *keys, int argc, const char *const *argv,
		 const size_t *argvlen, redisReply **out);

/* The key of tenant @tid (P:{P.tTID}:t) into @buf. */
void remote_tenant_key(struct store *s, uint64_t tid, char *buf, size_t len);

/* Learn the store's clock from a reply's now_ms. */
void remote_saw_now(struct store *s, uint64_t now_ms);

/* The store is a new instance: sfs_init it (record this mount's limits
 * when it is empty) and take its instance.  0 or -errno (logged). */
int remote_reinit(struct store *s);

/* Load the root's dump and every tenant's into the mirror (start, or a
 * new instance).  0 or -errno. */
int remote_load_all(struct store *s);

/* The follower: start it (0 or -errno), stop it (no-op when stopped). */
int follow_start(struct store *s);
void follow_stop(struct store *s);

#endif /* STATEFS_STORE_SHARED_H */
