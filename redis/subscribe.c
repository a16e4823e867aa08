/*
 * subscribe.c - how the follower (redis/follow.c) learns that a log
 * grew, without naming every log in one command: sharded Pub/Sub.
 *
 * Every function that appends to a log publishes once, after its
 * writes, SPUBLISH on the log's channel (the log's key with :news for
 * :log: P:{P.tTID}:news, the root's P:{P}:news; finish(),
 * redis/lua/call.lua).  A channel is in its tenant's slot, so on a
 * cluster its message reaches the subscribers of that shard only, and
 * on one Redis (7.0 has SSUBSCRIBE) it works the same.  A message only
 * marks its log due (unless it is news of this mount's own call, whose
 * caller applies its entries or marks the log due itself: own_news,
 * redis/own.c): the follower reads each due log past its position
 * (XRANGE on the pool) and applies what it finds, so a message lost
 * (across a reconnection, a channel refused by an ACL) costs at most
 * BLOCK_MS, after which every followed log is read whatever came.
 *
 * What it owns
 * ------------
 * The follower's subscribed links (remote->links): a dedicated
 * connection each (follow_link_open: the connection that serves a key;
 * one on one Redis, one per primary on a cluster), the channels it
 * subscribed there (SSUBSCRIBE one command per channel, each its own
 * slot; SUNSUBSCRIBE when the tenant is not followed any more), and the
 * count of them the server's replies must give.  A count that differs
 * says the connection was made anew under a call (rconn_call
 * reconnects by itself) and lost its subscriptions; a link that fails
 * or closes is the same: the link is lost (its socket shut down, so
 * that its next call connects anew), its channels subscribed again at
 * the next subs_sync, every followed log read once from its position.
 * And the wake-up: a pipe callers write one byte to (follow_wake,
 * redis/use.c and redis/call.c), which the follower's poll(2) watches
 * beside the links' sockets.
 *
 * Threads and locks
 * -----------------
 * The follower's thread alone, but follow_wake (any thread: one write
 * to a non-blocking pipe, made before the follower starts and closed
 * after it stopped) and subs_interrupt (follow_stop's thread: each link
 * is written once before remote->nlinks counts it and freed only after
 * the join).  No lock of its own.
 */
#define _GNU_SOURCE /* pipe2 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"
/* The link under a dedicated connection (link_of), which the poll
 * watches: the transport's own struct, read by its owner thread. */
#include "redis/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

/* After an SSUBSCRIBE refused (an ACL without the channels), how long
 * a link reads by BLOCK_MS alone before it asks again. */
#define REFUSED_RETRY_MS 10000

/* One channel a link subscribed: its tenant's (0: the root's). */
struct sub {
	UT_hash_handle hh;
	uint64_t tid;
};

struct follow_link {
	struct rconn *c;      /* interrupted by follow_stop's thread */
	struct sub *subs;     /* the channels subscribed on c's connection */
	size_t count;         /* how many the server's replies must count */
	uint64_t refused_ms;  /* an SSUBSCRIBE refused then (0: never) */
};

static struct link *link_of(const struct follow_link *fl)
{
	return fl->c->link;
}

/* The channel of tenant @tid's log (0: the root's) into @buf. */
static void chan_of(struct store *s, uint64_t tid, char *buf, size_t len)
{
	struct remote *r = remote_of(s);

	if (tid == 0) {
		snprintf(buf, len, "%s", r->rootnews);
		return;
	}
	remote_tenant_key(s, tid, buf, len);       /* P:{P.tN}:t */
	buf[strlen(buf) - 1] = '\0';
	strncat(buf, "news", len - strlen(buf) - 1);
}

/* The tenant of channel @ch (0: the root's), or false when it is none
 * of this store's. */
static bool tid_of(const struct remote *r, const char *ch, uint64_t *tid)
{
	const char *t;

	*tid = 0;
	if (strcmp(ch, r->rootnews) == 0)
		return true;
	if (!(t = strstr(ch, ".t")))
		return false;
	*tid = strtoull(t + 2, NULL, 10);
	return *tid != 0;
}

/*
 * The dedicated connection that serves key @key: on one Redis, one to
 * the primary.  On a cluster this is where the primary of @key's slot
 * is chosen (rconn_open_key).  0 with *@out, or -ENOMEM.
 */
static int follow_link_open(struct store *s, const char *key, struct rconn **out)
{
	struct remote *r = remote_of(s);

	return rconn_open_key(r->pool, key, r->cfg.timeout_ms, out);
}

/*
 * The link that serves tenant @tid's channel, made when first needed;
 * NULL when memory ran out.  On one Redis every channel's is one.  On a
 * cluster, the link whose next dial reaches the primary of the
 * channel's slot (a link follows the primary of the slot it was opened
 * for: after a failover or a reshard it may serve another node's
 * channels, or none).
 */
static struct follow_link *link_for(struct store *s, uint64_t tid)
{
	struct remote *r = remote_of(s);
	size_t n = atomic_load(&r->nlinks);
	struct follow_link *fl;
	const void *node;
	char ch[200];

	chan_of(s, tid, ch, sizeof(ch));
	node = rconn_pool_node_of(r->pool, ch);
	for (size_t i = 0; i < n; i++)
		if (!node || rconn_node_of(r->links[i]->c) == node)
			return r->links[i];
	if (n >= FOLLOW_LINKS_MAX)
		return NULL;
	fl = st_calloc(1, sizeof(*fl));
	if (!fl)
		return NULL;
	if (follow_link_open(s, ch, &fl->c) != 0) {
		free(fl);
		return NULL;
	}
	r->links[n] = fl;
	atomic_store(&r->nlinks, n + 1);
	return fl;
}

void subs_all_due(struct remote *r)
{
	r->root_due = true;
	for (size_t i = 0; i < r->npos; i++)
		r->pos[i].due = true;
}

/* @fl lost its subscriptions (its connection failed or was made anew):
 * its socket shut down, so that its next call connects anew; its
 * channels subscribed again; every log read once. */
static void link_lost(struct remote *r, struct follow_link *fl)
{
	struct sub *x, *xt;

	if (link_of(fl))
		link_wake(link_of(fl));
	HASH_ITER(hh, fl->subs, x, xt) {
		HASH_DEL(fl->subs, x);
		free(x);
	}
	fl->count = 0;
	r->subs_dirty = true;
	subs_all_due(r);
}

/* Whether the sunsubscribe of channel @ch came unasked: @fl still holds
 * it (one it asked to leave is out of fl->subs before it is sent).  A
 * node that stops serving a slot (a failover made it a replica, a
 * reshard moved the slot away) sends that for each channel of the slot,
 * and then no message of it: the link is lost, and its channels
 * subscribed again where their slots are now. */
static bool dropped(const struct remote *r, struct follow_link *fl,
		    const char *ch)
{
	struct sub *x;
	uint64_t tid;

	if (!ch || !tid_of(r, ch, &tid))
		return false;
	HASH_FIND(hh, fl->subs, &tid, sizeof(tid), x);
	return x != NULL;
}

/* What @fl's connection sent (@rep, freed here): a message marks its
 * log due, a confirmation checks the count.  1 for a message, 0, or
 * -EIO when the link is lost. */
static int dispatch(struct store *s, struct follow_link *fl, redisReply *rep)
{
	struct remote *r = remote_of(s);
	const char *kind = out_str(rep, 0);
	uint64_t tid;
	int rc = 0;

	if (rep->type == REDIS_REPLY_ERROR &&
	    (strncmp(rep->str, "MOVED ", 6) == 0 ||
	     strncmp(rep->str, "ASK ", 4) == 0)) {
		/* A channel whose slot this node no longer serves (a
		 * reshard, a failover): the link is dialled anew and its
		 * channels subscribed where their slots are now. */
		rconn_pool_moved(r->pool, rep);
		rc = -EIO;
	} else if (rep->type == REDIS_REPLY_ERROR) {
		/* An SSUBSCRIBE refused (NOPERM: the ACL has no &P:*). */
		if (!fl->refused_ms)
			fprintf(stderr, "statefs: shared store: SSUBSCRIBE: %s; "
				"the logs are read every second instead\n",
				rep->str);
		fl->refused_ms = mono_ms();
		rc = -EIO;
	} else if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 || !kind) {
		rc = 0;
	} else if (strcmp(kind, "smessage") == 0) {
		const char *ch = out_str(rep, 1);
		struct follow_ix *x;

		rc = 1;
		if (ch && tid_of(r, ch, &tid)) {
			if (tid == 0)
				r->root_due = true;
			else if (!(x = follow_pos_find(r, tid)))
				;
			else if (own_news(s, tid, out_str(rep, 2)))
				r->pos[x->i].own_due = true, rc = 0;
			else if (out_str(rep, 2) &&
				 rep->element[2]->len <= NEWS_MAX &&
				 news_apply(s, tid, out_str(rep, 2),
					    rep->element[2]->len))
				rc = 0, applied_wake(r);
			else
				r->pos[x->i].due = true;
		}
	} else if (strcmp(kind, "ssubscribe") == 0 ||
		   strcmp(kind, "sunsubscribe") == 0) {
		if (kind[1] == 's')
			fl->count++;
		else if (fl->count > 0)
			fl->count--;
		if (rep->element[2]->type != REDIS_REPLY_INTEGER ||
		    (size_t)rep->element[2]->integer != fl->count ||
		    (kind[1] == 'u' && dropped(r, fl, out_str(rep, 1))))
			rc = -EIO;
	}
	freeReplyObject(rep);
	if (rc < 0)
		link_lost(r, fl);
	return rc;
}

/* Send @cmd (SSUBSCRIBE or SUNSUBSCRIBE) of tenant @tid's channel on
 * @fl, the set of its channels changed first.  0, -EIO, -ECANCELED. */
static int send_sub(struct store *s, struct follow_link *fl, const char *cmd,
		    uint64_t tid)
{
	char ch[200];
	const char *av[] = { cmd, ch };
	redisReply *rep = NULL;
	int rc;

	chan_of(s, tid, ch, sizeof(ch));
	rc = rconn_call(fl->c, 0, 2, av, NULL, &rep);
	if (rc == 0)
		/* The reply read may be a message that came first: the
		 * confirmation is then read by subs_wait. */
		rc = dispatch(s, fl, rep) < 0 ? -EIO : 0;
	else if (rc != -ECANCELED)
		link_lost(remote_of(s), fl);
	return rc;
}

/* Subscribe tenant @tid's channel (0: the root's) unless its link has. */
static int subscribe(struct store *s, uint64_t tid)
{
	struct follow_link *fl = link_for(s, tid);
	struct sub *x;

	if (!fl)
		return -ENOMEM;
	HASH_FIND(hh, fl->subs, &tid, sizeof(tid), x);
	if (x)
		return 0;
	if (fl->refused_ms && mono_ms() - fl->refused_ms < REFUSED_RETRY_MS)
		return 0;
	x = st_calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->tid = tid;
	hash_oom = 0;
	HASH_ADD(hh, fl->subs, tid, sizeof(x->tid), x);
	if (hash_oom) {
		free(x);
		return -ENOMEM;
	}
	return send_sub(s, fl, "SSUBSCRIBE", tid);
}

int subs_sync(struct store *s)
{
	struct remote *r = remote_of(s);
	int rc = 0;

	if (!r->subs_dirty)
		return 0;
	r->subs_dirty = false;
	rc = subscribe(s, 0);
	for (size_t i = 0; i < r->npos && rc == 0; i++)
		rc = subscribe(s, r->pos[i].tid);
	/* The tenants not followed any more. */
	for (size_t k = 0; k < atomic_load(&r->nlinks) && rc == 0; k++) {
		struct follow_link *fl = r->links[k];
		struct sub *x, *xt;

		HASH_ITER(hh, fl->subs, x, xt) {
			if (x->tid == 0 || follow_pos_find(r, x->tid))
				continue;
			HASH_DEL(fl->subs, x);
			rc = send_sub(s, fl, "SUNSUBSCRIBE", x->tid);
			free(x);
			if (rc)
				break;
		}
	}
	if (rc)
		r->subs_dirty = true;
	return rc == -ECANCELED ? rc : rc ? -EIO : 0;
}

/* Take what @fl received whole.  Whether a message came. */
static bool drain(struct store *s, struct follow_link *fl)
{
	bool news = false;

	while (fl->subs && link_of(fl)) {
		redisReply *rep = NULL;
		int rc = link_take(link_of(fl), &rep);

		if (rc < 0) {
			link_lost(remote_of(s), fl);
			return true;
		}
		if (!rep)
			break;
		if (dispatch(s, fl, rep) != 0)
			news = true;
	}
	return news;
}

int subs_wait(struct store *s, unsigned ms)
{
	struct remote *r = remote_of(s);
	size_t n = atomic_load(&r->nlinks), k = 0;
	struct pollfd fds[FOLLOW_LINKS_MAX + 1];
	struct follow_link *polled[FOLLOW_LINKS_MAX];
	bool news = false;
	char buf[64];
	int rc;

	for (size_t i = 0; i < n; i++)
		if (drain(s, r->links[i]))
			news = true;
	if (news)
		return 1;
	fds[k++] = (struct pollfd){ .fd = r->wake[0], .events = POLLIN };
	for (size_t i = 0; i < n; i++)
		if (r->links[i]->subs && link_of(r->links[i])) {
			polled[k - 1] = r->links[i];
			fds[k++] = (struct pollfd){ .fd = link_fd(link_of(r->links[i])),
						    .events = POLLIN };
		}
	rc = poll(fds, k, (int)ms);
	if (atomic_load(&r->stop))
		return -ECANCELED;
	if (rc <= 0)
		return 0;
	for (size_t i = 1; i < k; i++)
		if (fds[i].revents && drain(s, polled[i - 1]))
			news = true;
	if (fds[0].revents) {
		while (read(r->wake[0], buf, sizeof(buf)) > 0)
			;
		return 2;
	}
	return news ? 1 : 0;
}

/* Is @rep a PING's reply on a subscribed connection? */
static bool is_pong(const redisReply *rep)
{
	const char *k = rep->type == REDIS_REPLY_ARRAY ? out_str(rep, 0) : NULL;

	return (k && strcmp(k, "pong") == 0) ||
	       (rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0);
}

/* One link's part of subs_barrier: its PING sent, what came before the
 * reply dispatched.  0, or -EIO (the link lost), -ECANCELED. */
static int link_barrier(struct store *s, struct follow_link *fl)
{
	struct remote *r = remote_of(s);
	const char *av[] = { "PING" };
	uint64_t deadline = mono_ms() + r->cfg.timeout_ms;
	redisReply *rep = NULL;
	int rc = rconn_call(fl->c, 0, 1, av, NULL, &rep);

	if (rc) {
		if (rc != -ECANCELED)
			link_lost(r, fl);
		return rc;
	}
	while (!is_pong(rep)) {
		struct pollfd p;
		uint64_t now;

		if (dispatch(s, fl, rep) < 0)
			return -EIO;
		rep = NULL;
		while (!rep) {
			if (!link_of(fl) || link_take(link_of(fl), &rep) < 0) {
				link_lost(r, fl);
				return -EIO;
			}
			if (rep)
				break;
			now = mono_ms();
			if (atomic_load(&r->stop))
				return -ECANCELED;
			if (now >= deadline) {
				link_lost(r, fl);
				return -EIO;
			}
			p = (struct pollfd){ .fd = link_fd(link_of(fl)), .events = POLLIN };
			(void)poll(&p, 1, (int)min_u64(deadline - now, 100));
		}
	}
	freeReplyObject(rep);
	return 0;
}

int subs_barrier(struct store *s)
{
	struct remote *r = remote_of(s);
	size_t n = atomic_load(&r->nlinks);

	if (n == 0 || r->subs_dirty)
		return -EIO;
	for (size_t i = 0; i < n; i++)
		if (r->links[i]->refused_ms)
			return -EIO;
	for (size_t i = 0; i < n; i++) {
		struct follow_link *fl = r->links[i];
		int rc;

		if (!fl->subs)
			continue;
		rc = link_barrier(s, fl);
		if (rc)
			return rc == -ECANCELED ? rc : -EIO;
	}
	return r->subs_dirty ? -EIO : 0;
}

void follow_wake(struct store *s)
{
	struct remote *r = remote_of(s);

	/* Full: the follower is woken already. */
	if (r->wake[1] >= 0 && write(r->wake[1], "w", 1) < 0)
		(void)0;
}

int subs_pipe(struct remote *r)
{
	if (r->wake[0] >= 0)
		return 0;
	return pipe2(r->wake, O_NONBLOCK | O_CLOEXEC) == 0 ? 0 : -errno;
}

void subs_interrupt(struct remote *r)
{
	size_t n = atomic_load(&r->nlinks);

	for (size_t i = 0; i < n; i++)
		rconn_interrupt(r->links[i]->c);
}

void subs_free(struct remote *r)
{
	size_t n = atomic_load(&r->nlinks);

	for (size_t i = 0; i < n; i++) {
		struct follow_link *fl = r->links[i];
		struct sub *x, *xt;

		HASH_ITER(hh, fl->subs, x, xt) {
			HASH_DEL(fl->subs, x);
			free(x);
		}
		rconn_close(fl->c);
		free(fl);
		r->links[i] = NULL;
	}
	atomic_store(&r->nlinks, 0);
	for (int i = 0; i < 2; i++)
		if (r->wake[i] >= 0) {
			close(r->wake[i]);
			r->wake[i] = -1;
		}
}
