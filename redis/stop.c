/*
 * stop.c - a mount's stop on a shared store: the table's close slot
 * (redis_ops, redis/ops.c), which stops the follower, closes the pool
 * and frees struct remote (redis/internal.h), then the mirror.
 *
 * Threads and locks
 * -----------------
 * The store's close, when no call is in flight: the follower is
 * stopped and joined (redis/follow.c) before anything it uses goes.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <stdlib.h>

void remote_free(struct store *s)
{
	struct remote *r = remote_of(s);

	if (!r)
		return;
	remote_locks_stop(s);
	follow_stop(s);
	rconn_pool_close(r->pool);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->applied);
	follow_pos_clear(r);
	free(r->pos);
	free(r->wanted);
	free(r->pending);
	free(r);
	mirror_of(s)->remote = NULL;
}

void remote_close(struct store *s)
{
	remote_free(s);
	mirror_free(s);
}
