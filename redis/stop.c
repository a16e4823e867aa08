/*
 * stop.c - a mount's stop on a shared store: the table's quiesce slot
 * (redis_ops, redis/ops.c), which stops the follower before the adapter
 * lets go of what the hooks it runs use, and its close slot, which stops
 * the follower if it still runs, closes the pool and frees struct remote
 * (redis/internal.h), then the mirror.
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

/* The table's quiesce slot: the follower stopped and joined (it runs the
 * hooks for other mounts' entries); follow_stop() again in remote_free()
 * does nothing. */
void remote_quiesce(struct store *s)
{
	if (remote_of(s))
		follow_stop(s);
}

void remote_close(struct store *s)
{
	remote_free(s);
	mirror_free(s);
}
