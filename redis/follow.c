/*
 * follow.c - the follower of a mirror: one thread that reads the
 * store's root log and the log of every tenant it follows, each past
 * its position with XRANGE on the pool (one command per log: on a
 * cluster each is its own slot), and applies each entry to the mirror
 * in order (redis/apply.c), then wakes the transitions that wait for
 * their outcome's seq (redis/call.c).  It learns that a log grew from
 * its subscribed links (redis/subscribe.c: the log's sharded Pub/Sub
 * channel, published by every function that appended to it), and
 * reads every followed log every BLOCK_MS whatever came (a message may
 * be lost across a reconnection); it waits in poll(2) on the links and
 * a pipe callers write to (follow_wake).
 *
 * What it owns
 * ------------
 * Its positions: the last entry id of the root log and of each tenant's
 * log (kept by redis/index.c), and whether each is due (a message
 * named it, a read did not apply all it gave, a link was lost, or
 * BLOCK_MS passed).  It learns tenants from the root log (a
 * tenant entry: follow its log from its start, or, with follow_idle,
 * make it a shell unless this mount made it or waits for it) and stops
 * following one whose cleanup it applied.  With follow_idle it follows
 * only what the mount uses (redis/use.c): before each round it loads
 * the tenants callers wait for (their dumps, then their logs from the
 * dumps' ids), and every BLOCK_MS it asks the kernel to forget the
 * tenants idle that long and unloads those the kernel holds nothing
 * of; a caller wakes its wait by a byte on the pipe.  After a use of
 * the root (a listing, a lookup in it), it reads the link counts of
 * the shells again at its next check (remote_shells_refresh).  Each
 * entry read is parsed into a plain struct entry (redis/entry.c) before
 * it is applied.
 * Where the store has one order of all tenants (each entry's gseq),
 * every round reads the logs that grew up to the store's gseq read
 * first (a barrier on the links, subs_barrier, says which; every
 * followed log when it cannot, and while it follows few: then the gseq
 * and every log in one pipeline, redis/logread.c) and applies the
 * entries merged by it (apply_merged), so the mirror passes through the
 * store's own states and the root's lines rise: not past the store's
 * gseq read before the round's first read (the logs are read one after
 * the other: a later entry of a log read first may be missing), not
 * past the last entry
 * of a log that gave a whole BATCH (it may hold earlier ones than
 * another log's), and not past a new tenant followed or a reload (the
 * next round goes on from each position, at once).  A load (at start,
 * a reload) gives one tenant as of a later number than the others are
 * applied to: the root's number is unsettled (store_root_order) until
 * a round that read every log and applied all they held, which the
 * follower then makes without waiting.
 * A gap (an entry whose seq is not the next: the position fell off a
 * trimmed log), a log that holds nothing past its position while the
 * tenant's seq in the store is past the mirror's (trimmed to nothing
 * past it: checked every BLOCK_MS, one sfs_sync per tenant), an entry
 * the mirror could not apply, or a missing stream, reloads that tenant
 * from sfs_dump (mirror_load_tenant: an overflow line for its readers,
 * the copy changed by the difference, redis/diff.c: the nodes that live
 * on kept, the difference echoed for inotify) and continues from the
 * dump's last id.  A log key of another type (damage) is left out of
 * the rounds, the others followed still, and read again once mended
 * (logs_check_damage).  An ESTALEINST (the store's instance changed:
 * Redis lost its data or failed over to another history), seen here or
 * by a transition, makes the whole mirror a new instance
 * (new_instance()).
 *
 * Threads and locks
 * -----------------
 * One thread.  It holds no store lock while it waits on the network; it
 * applies entries through the embedded transitions (their locks, in the
 * store's order), then takes remote->lock (LOCK_ENGINE_STATE, alone) to count
 * the batch and broadcast.  follow_stop() wakes it (the pipe),
 * interrupts its links (rconn_interrupt) and joins it; a read on the
 * pool it is in ends within store_timeout.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>

/* How long the follower waits for news at most (ms): also how often it
 * reads every log and checks that the store is still its instance. */
#define BLOCK_MS 1000
/* After a round that failed (no reply, an error reply, an entry that
 * neither applied nor reloaded, a new instance not loaded), the
 * follower pauses before the next: PAUSE_FIRST_MS, doubling to
 * PAUSE_MAX_MS while the failures go on, so that a persistent one (a
 * log key of the wrong type, the library gone) never makes it spin.
 * It checks for a stop every PAUSE_SLICE_MS of a pause. */
#define PAUSE_FIRST_MS 50
#define PAUSE_MAX_MS 1000
#define PAUSE_SLICE_MS 50
/* On a cluster, a primary that did not answer a read in store_timeout
 * (killed, until its replica takes over) is left out of the rounds and
 * checks for SICK_MS, the other primaries' logs read meanwhile with no
 * pause: one primary away stalls no other tenant's waiters. */
#define SICK_MS 1000
#define SICK_MAX 16
struct sick {
	const void *node[SICK_MAX];
	uint64_t until[SICK_MAX];
};

/* Is the node serving @key sick now?  With @add, make it so (false when
 * it cannot: one Redis, one order of all tenants, SICK_MAX sick). */
static bool sick(struct store *s, struct sick *k, const char *key, bool add)
{
	struct remote *r = remote_of(s);
	const void *node = rconn_pool_node_of(r->pool, key);
	uint64_t now = mono_ms();

	if (add && atomic_load(&mirror_of(s)->gorder))
		return false;
	for (unsigned i = 0; node && i < SICK_MAX; i++) {
		if (add && (k->node[i] == node || k->until[i] <= now)) {
			k->node[i] = node;
			k->until[i] = now + SICK_MS;
			return true;
		}
		if (!add && k->node[i] == node && k->until[i] > now)
			return true;
	}
	return false;
}

/* Reload tenant @tid (position @i) from its dump. */
static int reload(struct store *s, size_t i)
{
	struct remote *r = remote_of(s);
	char key[160], id[48];
	redisReply *d = NULL;
	uint64_t own = mirror_own_count(s, r->pos[i].tid);
	int rc;

	remote_tenant_key(s, r->pos[i].tid, key, sizeof(key));
	rc = remote_fcall(s, "sfs_dump", false, 1, (const char *[]){ key }, 0,
			  NULL, NULL, &d);
	if (rc == 0) {
		rc = mirror_reload_tenant(s, r->pos[i].tid, dump_of(d), id,
					  sizeof(id), own);
		if (rc == 0)
			snprintf(r->pos[i].id, sizeof(r->pos[i].id), "%s", id);
	} else if (rc == -ESTALE && d && strcmp(d->element[0]->str, "ESTALE") == 0) {
		/* The tenant is gone from the store. */
		follow_pos_del(r, i);
		rc = 0;
	}
	if (d)
		freeReplyObject(d);
	return rc;
}

/*
 * The store is a new instance: every node of the mirror dies (old
 * handles get ESTALE), the mirror is made anew with inode numbers past
 * every one this mount handed out, and everything is loaded again.
 * The store is made anew in place: fs/ keeps its pointer.
 */
static int new_instance(struct store *s)
{
	struct given q = { .others = true, .hidden = true };

	/* Every tenant of the old instance goes.  Its cleanup's lines are
	 * hidden, as a reload's difference is (redis/diff.c): the watch
	 * machinery alone reads them, so the kernel forgets the old
	 * tenants' names (the inval thread drops them, the echo removes
	 * them for inotify) and the next walk of a path looks it up afresh
	 * in the new instance.  Without them the kernel would keep each
	 * old name for the cache timeout, and a create under it (mkdir
	 * T/N: its lookup of N in the dead T answers ESTALE, which the
	 * kernel does not retry) would get ESTALE though it names no old
	 * handle.  .events readers see only the end of the instance: an
	 * "overflow" line for the root's, -ESTALE for every tenant's.
	 * Appended after the cleanups, so a tenant's .events opened past
	 * it finds its tenant dead (store_events_open).  Only this thread
	 * changes the tenant table (each cleanup takes the store lock to
	 * take one out).  The new instance's numbers start past every one
	 * handed out. */
	q.ns = wall_now(NULL);
	return mirror_reset(s, tenants_end_instance(s, &q));
}

/* What the mount follows (redis/use.c) --------------------------------- */

/* Is @tid on the follower's pending list (taking it off)? */
static bool pending_take(struct remote *r, uint64_t tid)
{
	for (size_t i = 0; i < r->npending; i++)
		if (r->pending[i] == tid) {
			r->pending[i] = r->pending[--r->npending];
			return true;
		}
	return false;
}

static void pending_put(struct remote *r, uint64_t tid)
{
	for (size_t i = 0; i < r->npending; i++)
		if (r->pending[i] == tid)
			return;
	if (r->npending == r->cappending) {
		size_t cap = r->cappending * 2 + 16;
		uint64_t *p = st_realloc(r->pending, cap * sizeof(*p));

		if (!p)
			return; /* its waiter times out */
		r->pending = p;
		r->cappending = cap;
	}
	r->pending[r->npending++] = tid;
}

/*
 * Tenant @tid appeared in the root log: follow its log from its start
 * (every tenant is followed, this mount made it (@own), a root .events
 * or .snapshot holds every tenant, or a caller here waits for it), else
 * make it a shell.  Whether it is followed.
 */
static bool follow_new_tenant(struct store *s, uint64_t tid, bool own)
{
	struct remote *r = remote_of(s);
	char key[160];

	if (pending_take(r, tid) || r->idle_ms == 0 || own ||
	    atomic_load(&r->holds_all) > 0)
		return follow_pos_add(r, tid, "0-0") == 0;
	remote_tenant_key(s, tid, key, sizeof(key));
	if (remote_shell(s, tid, key) != 0)
		/* No shell: followed, so that it is not left out. */
		return follow_pos_add(r, tid, "0-0") == 0;
	return false;
}

/*
 * Load and follow every tenant a caller waits for.  A tenant the root
 * log has not named yet waits on the pending list; one gone is dropped.
 * Whether any was followed anew (the next round reads its log).
 */
static bool follow_wanted(struct store *s)
{
	struct remote *r = remote_of(s);
	struct mirror *m = mirror_of(s);
	uint64_t *w;
	size_t n;
	bool more = false;
	int rc, tries;

	lock(&r->lock, LOCK_ENGINE_STATE);
	w = r->wanted;
	n = r->nwanted;
	r->wanted = NULL;
	r->nwanted = r->capwanted = 0;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	for (size_t i = 0; i < n; i++) {
		uint64_t tid = w[i];
		struct mtenant *mt;
		bool shell = false, known, gone;

		lock(&m->lock, LOCK_ENGINE_INDEX);
		mt = mt_find_locked(m, tid);
		known = mt != NULL;
		gone = !mt && tid <= m->max_tid;
		if (mt) {
			shell = mt->shell;
			mt->unloading = false;
		}
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		if (gone || (known && !shell && follow_pos_find(r, tid)))
			continue;
		if (!known) {
			pending_put(r, tid);
			continue;
		}
		if (!follow_pos_find(r, tid) && follow_pos_add(r, tid, "0-0") != 0)
			continue;
		/* Loaded from its dump, its log read from the dump's id.
		 * A dump that says the tenant is gone ends its shell (its
		 * waiter then finds its node dead: ESTALE); one that could
		 * not be read leaves it a shell (its waiter times out:
		 * EIO, and a later use tries again). */
		/* A caller applied entries meanwhile (-EBUSY): a later
		 * dump has them. */
		tries = 0;
		do
			rc = reload(s, follow_pos_find(r, tid)->i);
		while (rc == -EBUSY && ++tries < 3);
		if (rc != 0) {
			if (follow_pos_find(r, tid))
				follow_pos_del(r, follow_pos_find(r, tid)->i);
		} else if (follow_pos_find(r, tid))
			more = true;
		else if (shell)
			mirror_shell_gone(s, tid);
	}
	free(w);
	return more;
}

/*
 * Every BLOCK_MS: each followed tenant idle for follow_idle (by the
 * store's clock, so that a test clock moves it) is asked to be
 * forgotten by the kernel while the kernel holds any of its inodes
 * (once per follow_idle), and unfollowed, its copy dropped, once it
 * holds none.  Nothing while a root .events or .snapshot is held (the
 * kernel is asked to forget those once they are idle too).
 */
static void follow_idle_pass(struct store *s)
{
	struct remote *r = remote_of(s);
	struct mirror *m = mirror_of(s);
	uint64_t now = store_now_ms(s);

	if (r->idle_ms == 0)
		return;
	if (atomic_load(&r->holds_all) > 0) {
		/* A root .events or .snapshot the kernel holds: the
		 * kernel asked to forget it, unless open or used. */
		if (now - atomic_load(&r->all_used_ms) >= r->idle_ms &&
		    now - r->all_asked_ms >= r->idle_ms) {
			r->all_asked_ms = now;
			node_forget_ask(s, store_root(s));
		}
		return;
	}
	for (size_t i = r->npos; i-- > 0;) {
		uint64_t tid = r->pos[i].tid;
		struct store_node *ask = NULL;
		struct mtenant *mt;
		bool unload = false;

		lock(&m->lock, LOCK_ENGINE_INDEX);
		mt = mt_find_locked(m, tid);
		/* A root .events or .snapshot held since the pass began
		 * (remote_hold): nothing more is unloaded. */
		if (atomic_load(&r->holds_all) > 0) {
			unlock(&m->lock, LOCK_ENGINE_INDEX);
			break;
		}
		if (mt && mt->t && !mt->shell && now - mt->used_ms >= r->idle_ms &&
		    mt->used_ms <= now) {
			if (mt->holds > 0 && now - mt->asked_ms >= r->idle_ms) {
				mt->asked_ms = now;
				ask = tenant_node(mt->t);
				store_node_ref(ask);
			} else if (mt->holds == 0) {
				mt->unloading = unload = true;
				/* No longer one number's whole copy. */
				if (atomic_load(&m->gorder))
					store_root_order(s, 0, false);
			}
		}
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		if (ask) {
			node_forget_ask(s, ask);
			store_node_unref(s, ask);
		}
		if (unload) {
			mirror_unload_tenant(s, tid);
			follow_pos_del(r, i);
		}
	}
}

/* Every shell is gone (the store's drain cleared every tenant). */
static void shells_gone(struct store *s)
{
	size_t n = mirror_tenants(s, NULL, 0, true), k;
	uint64_t *ids = n ? st_calloc(n, sizeof(*ids)) : NULL;

	if (!ids)
		return;
	k = mirror_tenants(s, ids, n, true);
	for (size_t i = 0; i < n && i < k; i++)
		mirror_shell_gone(s, ids[i]);
	free(ids);
}

/*
 * Apply entry @ent (of tenant @tid's log, 0: the root log's).  0, 1
 * when its stream is done for this round (the tenant reloaded or gone:
 * *@reread), or -errno.
 */
static int apply_entry(struct store *s, uint64_t tid, const redisReply *ent,
		       bool *reread)
{
	struct remote *r = remote_of(s);
	struct follow_ix *x = tid ? follow_pos_find(r, tid) : NULL;
	struct entry e;
	int rc;

	if (tid && !x)
		return 1;
	if (ent->type != REDIS_REPLY_ARRAY || ent->elements != 2 ||
	    !out_str(ent, 0) || ent->element[0]->len >= sizeof(r->root_id) ||
	    entry_parse(ent->element[1], &e) != 0)
		return -EPROTO;
	rc = mirror_apply(s, tid, &e);
	if (rc == -EUCLEAN || rc == -EPROTO)
		fprintf(stderr, "statefs: shared store: tenant %" PRIu64
			": entry %" PRIu64 " (%s) does not apply (%s); "
			"reloading the tenant\n", tid, e.seq, e.op,
			strerror(-rc));
	if (rc == -EPROTO)
		rc = -EUCLEAN;
	if (rc == -ERANGE || rc == -EUCLEAN) {
		if (tid == 0) {
			/* The root log: nothing to reload but the tenants it
			 * names, which are read anew. */
			rc = 0;
		} else {
			rc = reload(s, x->i);
			*reread = true;
			return rc ? rc : 1;
		}
	}
	if (rc)
		return rc;
	if (tid == 0) {
		snprintf(r->root_id, sizeof(r->root_id), "%s",
			 ent->element[0]->str);
		if (strcmp(e.op, "tenant") == 0) {
			uint64_t ntid = 0;

			if (!entry_u64(&e, "tid", &ntid))
				ntid = 0;
			if (ntid && follow_new_tenant(s, ntid, *e.by &&
			    strcmp(e.by, mirror_of(s)->by) == 0))
				*reread = true;
		} else if (strcmp(e.op, "cleanup") == 0) {
			uint64_t gtid = 0;

			/* A shell's end, which its log (not read here)
			 * also says. */
			if (entry_u64(&e, "tid", &gtid) && gtid)
				mirror_shell_gone(s, gtid);
		} else if (strcmp(e.op, "drained") == 0) {
			/* The store's drain cleared every tenant: the
			 * shells too, whose logs say it. */
			shells_gone(s);
		}
	} else {
		uint64_t seq;
		bool gone;

		snprintf(r->pos[x->i].id, sizeof(r->pos[x->i].id), "%s",
			 ent->element[0]->str);
		if (mirror_applied(s, tid, &seq, &gone) == 0 && gone) {
			follow_pos_del(r, x->i);
			*reread = true;
			return 1;
		}
	}
	return 0;
}

/* Apply the entries of one log's read. */
static int apply_log(struct store *s, const struct lread *l, bool *reread)
{
	for (size_t k = 0; k < l->rep->elements; k++) {
		int rc = apply_entry(s, l->tid, l->rep->element[k], reread);

		if (rc)
			return rc < 0 ? rc : 0;
	}
	return 0;
}

/* Merging the logs by the store's order ---------------------------------- */

/*
 * Apply the logs read, @l[0..n), in the store's order of all tenants
 * (the entries' gseq), so that the mirror holds, between two entries,
 * what the store held after the first: the root's .snapshot and
 * .events number it so.  The logs are read one after the other, so an
 * entry past @upto (the store's gseq before the first read) may be
 * later than one of a log read before it that the read missed: nothing
 * past @upto is applied this round.  A log that gave a whole BATCH may
 * hold more, earlier than another log's later entries: nothing past
 * its last is applied either.  A new tenant followed, a reload or a
 * log ended stops the round (*@reread): the next read goes on from
 * each log's position.  *@whole: every entry read was applied.
 * -EAGAIN: an entry without gseq (no such order), nothing applied: the
 * caller applies log by log.
 */
static int apply_merged(struct store *s, const struct lread *l, size_t nl,
			uint64_t upto, bool *reread, bool *whole)
{
	struct entry_ref *v;
	size_t n = 0, total = 0;
	uint64_t limit = upto;
	bool full = false;
	int rc = 0;

	*whole = false;
	for (size_t i = 0; i < nl; i++)
		total += l[i].rep->elements;
	v = st_calloc(total + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < nl; i++) {
		const redisReply *es = l[i].rep;

		for (size_t k = 0; k < es->elements; k++) {
			uint64_t g = entry_gseq(es->element[k]);

			if (!g) {
				rc = -EAGAIN;
				goto out;
			}
			v[n++] = (struct entry_ref){ g, l[i].tid, es->element[k] };
			if (k + 1 == es->elements && es->elements >= FOLLOW_BATCH) {
				full = true;
				if (g < limit)
					limit = g;
			}
		}
	}
	entry_refs_sort(v, n);
	for (size_t i = 0; i < n && v[i].gseq <= limit && !*reread; i++) {
		rc = apply_entry(s, v[i].tid, v[i].ent, reread);
		if (rc < 0)
			goto out;
	}
	rc = 0;
	*whole = !full && (n == 0 || v[n - 1].gseq <= limit) && !*reread;
out:
	free(v);
	return rc;
}

/*
 * Is the store still the instance the mirror follows (-ESTALE if not),
 * and does every log still hold what the mirror has not applied?  A log
 * trimmed past the follower's position to nothing (XTRIM, or a small
 * log_max) shows no entry past it, so no gap either, until the tenant
 * changes again: a tenant whose seq in the store is past the mirror's
 * while its log has nothing after the follower's position lost those
 * entries, and is reloaded.  One sfs_sync of the root, one of each
 * tenant (each its own slot on a cluster), and one XRANGE per tenant
 * whose mirror lags.
 */
static int check_logs(struct store *s, struct sick *sk)
{
	struct remote *r = remote_of(s);
	redisReply *rep = NULL;
	int rc = 0, first = 0;

	if (!sick(s, sk, r->meta, false) &&
	    (rc = remote_fcall(s, "sfs_sync", false, 0, NULL, 0, NULL, NULL,
			       &rep)) == -EIO && sick(s, sk, r->meta, true))
		rc = 0;
	if (rep)
		freeReplyObject(rep);
	/* From the last: a reload that stops following a tenant moves the
	 * last position into its place, one already looked at. */
	for (size_t i = r->npos; rc == 0 && i-- > 0;) {
		char key[160];
		const char *kp[] = { key };
		uint64_t at = 0;
		int64_t seq;
		bool gone = false;

		uint64_t before = 0;

		if (i >= r->npos || r->pos[i].damaged)
			continue;
		rep = NULL;
		/* What the mirror had applied before the store was asked: a
		 * store's seq below it is a history lost (a primary killed
		 * before its replica had its last entries), never a race. */
		if (mirror_applied(s, r->pos[i].tid, &before, &gone) != 0 || gone)
			before = 0;
		remote_tenant_key(s, r->pos[i].tid, key, sizeof(key));
		if (sick(s, sk, key, false))
			continue;
		rc = remote_fcall(s, "sfs_sync", false, 1, kp, 0, NULL, NULL, &rep);
		seq = rc == 0 && rep->elements > 3 &&
		      rep->element[3]->type == REDIS_REPLY_INTEGER ?
			      rep->element[3]->integer : -1;
		if (rep)
			freeReplyObject(rep);
		if (rc == -EIO && sick(s, sk, key, true)) {
			rc = 0;
			continue;
		}
		if (rc == -EIO || rc == -ESTALE || rc == -ENOMEM)
			break;
		if (rc) {
			/* This tenant's hash (damage): the others still. */
			first = first ? first : rc;
			rc = 0;
			continue;
		}
		if (seq >= 0 && before > (uint64_t)seq) {
			fprintf(stderr, "statefs: shared store: tenant %" PRIu64
				": the store's seq %" PRId64 " is behind this "
				"mount's %" PRIu64 " (a failover lost entries); "
				"reloading the tenant\n", r->pos[i].tid, seq, before);
			rc = reload(s, i);
			continue;
		}
		gone = false;
		if (seq < 0 || mirror_applied(s, r->pos[i].tid, &at, &gone) != 0 ||
		    gone || at >= (uint64_t)seq)
			continue;
		rc = follow_log_has_more(s, r->pos[i].tid, r->pos[i].id);
		if (rc == 0) {
			fprintf(stderr, "statefs: shared store: tenant %" PRIu64
				": its log lost entries %" PRIu64 "..%" PRId64 "; "
				"reloading the tenant\n", r->pos[i].tid, at + 1,
				seq);
			rc = reload(s, i);
		} else if (rc == 1) {
			rc = 0;
		}
	}
	return rc ? rc : first;
}

/* Is log @key damaged (a key of another type than a stream)?  Counted
 * and logged (remote_damaged_key) when it becomes so. */
static bool log_damaged(struct store *s, const char *key, bool was)
{
	const char *av[] = { "TYPE", key };
	redisReply *rep = NULL;
	bool bad;

	if (rconn_pool_call(remote_of(s)->pool, 0, 2, av, NULL, &rep) != 0)
		return was;
	bad = rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "stream") != 0 &&
	      strcmp(rep->str, "none") != 0;
	freeReplyObject(rep);
	if (bad && !was)
		remote_damaged_key(remote_of(s), "follower", key);
	return bad;
}

/*
 * Which logs are damaged (after a read refused, @all) or mended again
 * (every BLOCK_MS, the damaged ones only)?  A damaged log is not read,
 * so the others are followed still; mended, it is read again from its
 * position.
 */
static void logs_check_damage(struct store *s, bool all)
{
	struct remote *r = remote_of(s);
	char key[160];

	if (all || r->root_damaged)
		r->root_damaged = log_damaged(s, r->rootlog, r->root_damaged);
	for (size_t i = 0; i < r->npos; i++) {
		if (!all && !r->pos[i].damaged)
			continue;
		follow_log_key(s, r->pos[i].tid, key, sizeof(key));
		r->pos[i].damaged = log_damaged(s, key, r->pos[i].damaged);
	}
}

/* A round failed: pause (*@pause ms, the next one longer), returning
 * early when the follower is stopped. */
static void back_off(struct remote *r, unsigned *pause)
{
	*pause = *pause ? *pause * 2 : PAUSE_FIRST_MS;
	if (*pause > PAUSE_MAX_MS)
		*pause = PAUSE_MAX_MS;
	for (unsigned t = 0; t < *pause && !atomic_load(&r->stop);
	     t += PAUSE_SLICE_MS) {
		struct timespec ts = { 0, PAUSE_SLICE_MS * 1000000L };

		nanosleep(&ts, NULL);
	}
}

/*
 * One round: read each due log past its position (the root's first),
 * then apply what came, in the store's order where it has one (the
 * logs that grew up to its gseq then, which the barrier names, or
 * every followed log).  A log whose entries were not all applied stays
 * due.  *@whole: nothing up to that gseq is left unread, and all that
 * was read applied.
 * 0, or -1 when the round failed (a read without a reply, a read
 * refused, an entry neither applied nor reloaded).
 */
static int read_round(struct store *s, struct sick *sk, bool *reread,
		      bool *whole)
{
	struct remote *r = remote_of(s);
	bool gorder = atomic_load(&mirror_of(s)->gorder), all = true, done = true;
	bool vouched = false, piped = follow_logs_piped(s);
	struct lread *l = st_calloc(r->npos + 1, sizeof(*l));
	uint64_t upto = UINT64_MAX;
	size_t n = 0;
	int rc = 0, failed = 0;

	*whole = false;
	if (!l)
		return -1;
	own_catch_up(s);
	/* One order of all tenants: the logs that grew up to the store's
	 * number read first are due by the barrier, or all of them. */
	if (piped) {
		/* Few logs on one Redis: all of them after the gseq, in one
		 * round trip, and no barrier to say which grew. */
		bool bad = false;

		rc = follow_read_piped(s, l, &n, &upto, &bad);
		if (bad) {
			/* Not a stream: left out until mended. */
			logs_check_damage(s, true);
			failed = -1;
		}
	} else if (gorder) {
		upto = follow_store_gseq(s);
		vouched = upto != UINT64_MAX && subs_barrier(s) == 0;
		if (!vouched)
			subs_all_due(r);
	}
	for (size_t i = 0; !piped && i <= r->npos && rc == 0 &&
	     !atomic_load(&r->stop); i++) {
		char key[160];
		uint64_t tid = i ? r->pos[i - 1].tid : 0;
		bool *due = i ? &r->pos[i - 1].due : &r->root_due;

		if (i ? r->pos[i - 1].damaged : r->root_damaged)
			continue;
		if (!*due && !(i && r->pos[i - 1].own_due)) {
			all = all && vouched;
			continue;
		}
		if (i)
			follow_log_key(s, tid, key, sizeof(key));
		if (!sick(s, sk, i ? key : r->rootlog, false))
			rc = follow_read_log(s, i ? key : r->rootlog,
				      i ? r->pos[i - 1].id : r->root_id, &l[n].rep);
		if (rc != -EPROTO && sick(s, sk, i ? key : r->rootlog, rc == -EIO)) {
			*due = false;
			all = false;
			rc = 0;
			continue;
		}
		if (rc == -EPROTO) {
			/* Not a stream: left out until mended. */
			logs_check_damage(s, true);
			failed = -1;
			rc = 0;
			continue;
		}
		if (rc)
			break;
		*due = false;
		if (i)
			r->pos[i - 1].own_due = false;
		l[n++].tid = tid;
	}
	if (rc) {
		/* No reply: every log is read again at the next round. */
		subs_all_due(r);
		failed = -1;
		all = false;
	}
	if (gorder && n > 0 &&
	    (rc = apply_merged(s, l, n, upto, reread, &done)) != -EAGAIN) {
		if (rc)
			failed = -1;
	} else {
		/* The root log first: it names new tenants. */
		for (size_t i = 0; i < n; i++)
			if (!*reread && apply_log(s, &l[i], reread))
				failed = -1;
		done = !*reread;
	}
	/* What was not applied (a whole BATCH, past @upto, a round ended
	 * by a reload) is read again at once. */
	for (size_t i = 0; i < n; i++) {
		const redisReply *es = l[i].rep;
		struct follow_ix *x = l[i].tid ? follow_pos_find(r, l[i].tid) : NULL;
		const char *last = es->elements ? out_str(es->element[es->elements - 1], 0) : NULL;
		const char *at = l[i].tid ? (x ? r->pos[x->i].id : NULL) : r->root_id;

		if (last && at && (es->elements >= FOLLOW_BATCH || strcmp(last, at) != 0)) {
			if (x)
				r->pos[x->i].due = true;
			else if (!l[i].tid)
				r->root_due = true;
			done = false;
		}
		freeReplyObject(l[i].rep);
	}
	free(l);
	*whole = all && done && !failed;
	return failed;
}

/*
 * With follow_gather (r->gather_ms), a follower that read less than
 * that long ago, woken by news while no mutation of its own mount is on
 * its way (the news is of other mounts' transitions), gathers what
 * comes for the rest of it: one read then serves every transition a
 * busy mount elsewhere made meanwhile, where each read costs Redis a
 * request, and another mount's change shows that much later.  A caller
 * that starts waiting ends the pause (wait_seq wakes it).
 */
static void gather(struct store *s, uint64_t last_read)
{
	struct remote *r = remote_of(s);
	uint64_t since = mono_ms() - last_read;
	struct pollfd p = { .fd = r->wake[0], .events = POLLIN };

	if (since >= r->gather_ms || r->wake[0] < 0)
		return;
	atomic_store(&r->gathering, true);
	if (atomic_load(&r->busy) == 0 && !atomic_load(&r->stop))
		(void)poll(&p, 1, (int)(r->gather_ms - since));
	atomic_store(&r->gathering, false);
}

static void *follow_main(void *arg)
{
	struct store *s = arg;
	struct remote *r = remote_of(s);
	unsigned pause = 0;
	uint64_t checked = mono_ms(), last_read = 0;
	struct sick sk = { { 0 }, { 0 } };

	pthread_setname_np(pthread_self(), "statefs-follow");
	while (!atomic_load(&r->stop)) {
		bool reread = false, reinit, failed = false, whole = false;
		/* The root's number waits for a round (redis/load.c): it
		 * does not wait BLOCK_MS for it. */
		bool settle = atomic_load(&mirror_of(s)->gorder) &&
			      !store_root_settled(s) && follow_whole(s);
		bool due = r->root_due && !r->root_damaged;
		int rc;

		lock(&r->lock, LOCK_ENGINE_STATE);
		reinit = r->reinit;
		r->reinit = false;
		unlock(&r->lock, LOCK_ENGINE_STATE);
		if (reinit) {
			/* A new instance: every node of the old one dies, the
			 * store is initialised anew (if no other mount did)
			 * and everything is loaded again. */
			new_instance(s);
			follow_pos_clear(r);
			if (remote_reinit(s) != 0 || remote_load_all(s) != 0) {
				lock(&r->lock, LOCK_ENGINE_STATE);
				r->reinit = true;
				unlock(&r->lock, LOCK_ENGINE_STATE);
				back_off(r, &pause);
			} else {
				pause = 0;
				lock(&r->lock, LOCK_ENGINE_STATE);
				r->loaded++;
				unlock(&r->lock, LOCK_ENGINE_STATE);
			}
			applied_wake(r);
			continue;
		}
		/* Tenants a caller waits for are loaded before the read,
		 * which then reads their logs. */
		if (r->idle_ms && follow_wanted(s)) {
			applied_wake(r);
			continue;
		}
		/* The channels of what is followed now; a link lost marks
		 * every log due. */
		if (subs_sync(s) == -ECANCELED)
			break;
		for (size_t i = 0; i < r->npos && !due; i++)
			due = r->pos[i].due && !r->pos[i].damaged;
		if (settle) {
			subs_all_due(r);
		} else if (!due) {
			uint64_t since = mono_ms() - checked;

			rc = subs_wait(s, since >= BLOCK_MS ? 0 : BLOCK_MS - since);
			if (rc == -ECANCELED)
				break;
			/* Nothing to read (news of this mount's own calls,
			 * which their callers apply): no round before
			 * BLOCK_MS. */
			if (rc == 0 && mono_ms() - checked < BLOCK_MS)
				continue;
			/* News alone: a caller's wake-up is read for at once. */
			if (rc == 1)
				gather(s, last_read);
		}
		/* Every BLOCK_MS, news or not: every log is read (a message
		 * may be lost), the store is still ours, each log holds what
		 * we lack. */
		if (mono_ms() - checked >= BLOCK_MS)
			subs_all_due(r);
		if (read_round(s, &sk, &reread, &whole) != 0)
			failed = true;
		last_read = mono_ms();
		/* Every entry the logs held is applied: the mirror is the
		 * store as of its last one, whatever was loaded before. */
		if (whole && !failed && atomic_load(&mirror_of(s)->gorder) &&
		    follow_whole(s))
			store_root_order(s, 0, true);
		if (mono_ms() - checked >= BLOCK_MS) {
			logs_check_damage(s, false);
			if (check_logs(s, &sk) == -EIO)
				failed = true;
			/* The root listed or looked up in: the link counts
			 * it shows of the shells made the store's. */
			if (r->idle_ms && atomic_exchange(&r->root_used, false) &&
			    remote_shells_refresh(s) != 0)
				atomic_store(&r->root_used, true);
			follow_idle_pass(s);
			checked = mono_ms();
		}
		applied_wake(r);
		if (failed) {
			back_off(r, &pause);
		} else {
			pause = 0;
		}
	}
	return NULL;
}

int follow_start(struct store *s)
{
	struct remote *r = remote_of(s);
	sigset_t all, old;
	bool made;
	int rc;

	rc = subs_pipe(r);
	if (rc)
		return rc;
	atomic_store(&r->stop, false);
	r->subs_dirty = true;
	subs_all_due(r);
	/* Signals are the daemon's signal thread's to take (fs/main.c):
	 * this thread, made before it, blocks them all. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	made = pthread_create(&r->thread, NULL, follow_main, s) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!made) {
		subs_free(r);
		return -EAGAIN;
	}
	r->running = true;
	return 0;
}

void follow_stop(struct store *s)
{
	struct remote *r = remote_of(s);

	if (!r->running)
		return;
	atomic_store(&r->stop, true);
	follow_wake(s);
	subs_interrupt(r);
	pthread_join(r->thread, NULL);
	subs_free(r);
	r->running = false;
}
