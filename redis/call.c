/*
 * call.c - how a mount calls the shared store: a call's
 * arguments, the FCALL through the pool, its outcome (learned by a fence
 * when its reply did not come in time), and the wait until
 * this mount's mirror has applied what the outcome says
 * (read-your-writes); store_sync(), that wait for every log.  The design
 * is told at the top of redis/ops.c; the convention itself (keys,
 * common arguments, outcomes) at the top of redis/lua/contract.lua.
 *
 * What it owns
 * ------------
 * Nothing that lasts: it reads struct remote (redis/internal.h) and
 * advances its operation counter.  An outcome's now_ms feeds the clock
 * estimate (redis/estimate.c); an ESTALEINST sets remote->reinit,
 * which the follower acts on (redis/follow.c).
 *
 * Threads and locks
 * -----------------
 * Any caller's thread, with no store lock held: a call waits on the
 * network (redis/conn.c bounds it by store_timeout); a wait for the
 * follower sleeps on remote->applied under remote->lock (LOCK_ENGINE_STATE,
 * held alone), woken after each batch the follower applies, and ends
 * within store_timeout and a second.  remote->lock is let go before the
 * mirror's lock is taken to read what was applied.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <inttypes.h>

/* Outcomes ------------------------------------------------------------------ */

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "ENOENT", ENOENT }, { "EEXIST", EEXIST }, { "ESTALE", ESTALE },
	{ "EAGAIN", EAGAIN }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
	{ "EFBIG", EFBIG }, { "EINVAL", EINVAL }, { "ENAMETOOLONG", ENAMETOOLONG },
	{ "EROFS", EROFS }, { "EXDEV", EXDEV }, { "EACCES", EACCES },
	{ "EISDIR", EISDIR }, { "EPERM", EPERM }, { "ETIMEDOUT", EIO },
};

static int errno_of(const char *name)
{
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (strcmp(errnames[i].name, name) == 0)
			return -errnames[i].err;
	return -EPROTO;
}

/* Element @i of outcome @r as a number (an integer reply or a decimal). */
uint64_t out_u64(const redisReply *r, size_t i)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return 0;
	if (r->element[i]->type == REDIS_REPLY_INTEGER)
		return (uint64_t)r->element[i]->integer;
	if (r->element[i]->type == REDIS_REPLY_STRING)
		return strtoull(r->element[i]->str, NULL, 10);
	return 0;
}

/* Element @i of array reply @r when it is a string (or a status), else
 * NULL: never past the array, never a NULL read as a string. */
const char *out_str(const redisReply *r, size_t i)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return NULL;
	if (r->element[i]->type != REDIS_REPLY_STRING &&
	    r->element[i]->type != REDIS_REPLY_STATUS)
		return NULL;
	return r->element[i]->str;
}

/* Do keys @a and @b carry one hash tag ("{...}": one tenant's, or the
 * store's)? */
static bool same_tag(const char *a, const char *b)
{
	const char *ea, *eb;

	a = strchr(a, '{');
	b = strchr(b, '{');
	if (!a || !b || !(ea = strchr(a, '}')) || !(eb = strchr(b, '}')))
		return false;
	return ea - a == eb - b && memcmp(a, b, (size_t)(ea - a)) == 0;
}

/*
 * Outcome EDAMAGED KEY of @fn (or a log the follower cannot read): the
 * store holds a key statefs did not make (another client's damage, or
 * one Redis lost), and the call changed nothing.  A caller's is counted
 * (.stats store_damaged; the follower's own are not); each is logged
 * once per key, until a mutation of that key's tenant (hash tag)
 * succeeds again.  -EIO.
 */
int remote_damaged_key(struct remote *r, const char *fn, const char *key)
{
	bool say;

	if (!key)
		key = "?";
	if (!r->running || !pthread_equal(pthread_self(), r->thread))
		atomic_fetch_add(&r->damaged, 1);
	lock(&r->lock, LOCK_ENGINE_STATE);
	say = strncmp(r->damaged_key, key, sizeof(r->damaged_key) - 1) != 0;
	if (say)
		snprintf(r->damaged_key, sizeof(r->damaged_key), "%s", key);
	atomic_store(&r->damaged_seen, true);
	unlock(&r->lock, LOCK_ENGINE_STATE);
	if (say)
		fprintf(stderr, "statefs: %s: the shared store is damaged: key %s "
			"is not as statefs made it; what needs it gets EIO and "
			"changes nothing until it is restored\n", fn, key);
	return -EIO;
}

/* Calls ------------------------------------------------------------------------ */

void remote_tenant_key(struct store *s, uint64_t tid, char *buf, size_t len)
{
	const char *p = remote_of(s)->cfg.prefix;

	snprintf(buf, len, "%s:{%s.t%" PRIu64 "}:t", p, p, tid);
}

bool remote_tenant_layout(struct store *s)
{
	return atomic_load(&remote_of(s)->tenant_meta);
}

/* The meta of tenant key @tkey (P:{P.tTID}:t -> P:{P.tTID}:meta) into
 * @buf: in the tenant layout a tenant function's first key. */
static void tenant_meta_key(const char *tkey, char *buf, size_t len)
{
	size_t n = strlen(tkey);

	if (n >= 2 && strcmp(tkey + n - 2, ":t") == 0)
		n -= 2;
	snprintf(buf, len, "%.*s:meta", (int)n, tkey);
}

/*
 * A mutation got no reply in time (@rc of rconn_pool_call): learn what
 * became of it, so that an error returned to the caller means "not
 * applied".  The call (operation @opid; @av: its words, the keys from
 * av[3] on, @nkeys of them after the meta key; @inst its instance) may
 * still sit in Redis, to run when Redis wakes (DEBUG SLEEP, SIGSTOP, a
 * long script), or may have run with its reply lost.  Two things make
 * the answer true:
 *
 *  1. The fence: sfs_fence OPID on the call's keys either returns the
 *     outcome the call recorded (it ran: that is what it did, success
 *     included) or records a refusal as that outcome, so that the call,
 *     if it runs later, finds it and does nothing.  Redis runs the two
 *     one after the other, in either order, and each order gives one
 *     answer that holds: with a reply from the fence the outcome is
 *     known, whatever the clocks do.
 *  2. The deadline, for when the fence gets no reply either: the call
 *     carries D = L + store_timeout, L a lower bound of the server's
 *     TIME when it was sent (remote_real_ms); past D the call does
 *     nothing.  The caller is answered -EIO only once the local clock
 *     has run store_timeout + REAL_ERROR_MS since then: TIME is then
 *     past D (by the bound's error, redis/internal.h), so a call that runs from
 *     now on is refused.  The fence waits for what is left of that
 *     time, and FENCE_MIN_MS at least (a reply lost on a live Redis is
 *     answered at once), so a call and its fence end within about
 *     store_timeout together, as the contract says.  Only a step back
 *     of TIME by more than that margin while the fence is unanswered
 *     breaks it.
 *
 * Returns 0 with the outcome in *@rep (the call's recorded one, or the
 * fence's ETIMEDOUT, which remote_fcall maps to -EIO), or @rc's class:
 * -EIO or -ENOMEM, after the wait of 2.
 */
/* The least a fence waits for its reply. */
#define FENCE_MIN_MS 200

static int fence(struct store *s, int nkeys, const char **av,
		 const char *inst, const char *opid, uint64_t sent,
		 redisReply **rep)
{
	struct remote *r = remote_of(s);
	const char *fv[4 + 16 + 2];
	char nk[16];
	int n = 0, rc = -EIO;
	uint64_t safe = sent + r->cfg.timeout_ms + REAL_ERROR_MS, now;

	*rep = NULL;
	if (nkeys + 1 <= 16) {
		snprintf(nk, sizeof(nk), "%d", nkeys + 1);
		fv[n++] = "FCALL";
		fv[n++] = "sfs_fence";
		fv[n++] = nk;
		for (int i = 0; i <= nkeys; i++)
			fv[n++] = av[3 + i];
		fv[n++] = inst;
		fv[n++] = opid;
		now = mono_ms();
		rc = rconn_pool_call(r->pool, now + FENCE_MIN_MS < safe ?
				     safe - now : FENCE_MIN_MS, n, fv, NULL, rep);
		if (rc == 0 && (*rep)->type == REDIS_REPLY_ERROR) {
			/* No answer about the call (a Redis that lost
			 * statefs's functions): 2 decides. */
			fprintf(stderr, "statefs: sfs_fence: %s\n", (*rep)->str);
			freeReplyObject(*rep);
			*rep = NULL;
			rc = -EIO;
		}
		if (rc == 0)
			return 0;
	}
	now = mono_ms();
	if (now < safe) {
		struct timespec ts = { (time_t)((safe - now) / 1000),
				       (long)((safe - now) % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	return rc == -ENOMEM ? rc : -EIO;
}

/* Is instance @inst the store's, as its root meta says?  (A failed read
 * says yes: the call's own outcome stands.) */
static bool root_has_instance(struct remote *r, const char *inst)
{
	const char *av[] = { "HGET", r->meta, "instance" };
	redisReply *rep = NULL;
	bool same = true;

	if (rconn_pool_call(r->pool, 0, 3, av, NULL, &rep) == 0) {
		same = rep->type == REDIS_REPLY_STRING &&
		       strcmp(rep->str, inst) == 0;
		freeReplyObject(rep);
	}
	return same;
}

/* One FCALL of remote_fcall's, on the instance the mount knows: its
 * count of loaded instances then into *@loaded; *@newinst when the
 * outcome was ESTALEINST. */
static int fcall_once(struct store *s, const char *fn, bool mutation,
		      int nkeys, const char *const *keys, int argc,
		      const char *const *argv, const size_t *argvlen,
		      redisReply **out, uint64_t *loaded, bool *newinst)
{
	struct remote *r = remote_of(s);
	int n = 0, total = 4 + nkeys + 3 + argc, rc;
	uint64_t sent = 0, otid = 0;
	bool omade = false;
	redisReply *own = NULL;
	const char **av = st_calloc((size_t)total, sizeof(*av));
	size_t *al = st_calloc((size_t)total, sizeof(*al));
	char nk[16], opid[48], deadline[24], inst[17], tmeta[200];
	redisReply *rep = NULL;
	/* The tenant layout: a tenant's call takes its own meta, in its
	 * slot, and that tenant's key alone (the callers pass one). */
	bool tl = nkeys > 0 && atomic_load(&r->tenant_meta);

	*out = NULL;
	if (tl) {
		tenant_meta_key(keys[0], tmeta, sizeof(tmeta));
		nkeys = 1;
	}
	if (!av || !al) {
		free(av);
		free(al);
		return -ENOMEM;
	}
	lock(&r->lock, LOCK_ENGINE_STATE);
	memcpy(inst, r->instance, sizeof(inst));
	*loaded = r->loaded;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	*newinst = false;
	snprintf(nk, sizeof(nk), "%d", nkeys + 1);
	opid[0] = deadline[0] = '\0';
	if (mutation) {
		uint64_t real;

		snprintf(opid, sizeof(opid), "%s:%" PRIuFAST64, r->mount,
			 atomic_fetch_add(&r->opn, 1) + 1);
		/* Past it, on the server's TIME, the call does nothing (see
		 * fence() for why an -EIO is then the truth). */
		rc = remote_real_ms(s, &real);
		if (rc) {
			free(av);
			free(al);
			return rc;
		}
		sent = mono_ms();
		snprintf(deadline, sizeof(deadline), "%" PRIu64,
			 real + r->cfg.timeout_ms);
	}
	av[n++] = mutation ? "FCALL" : "FCALL_RO";
	av[n++] = fn;
	av[n++] = nk;
	av[n++] = tl ? tmeta : r->meta;
	for (int i = 0; i < nkeys; i++)
		av[n++] = keys[i];
	av[n++] = inst;
	av[n++] = opid;
	av[n++] = deadline;
	for (int i = 0; i < n; i++)
		al[i] = strlen(av[i]);
	for (int i = 0; i < argc; i++) {
		av[n] = argv[i];
		al[n++] = argvlen ? argvlen[i] : strlen(argv[i]);
	}
	if (mutation)
		atomic_fetch_add(&r->busy, 1);
	/* Its news is left to this thread, which applies its entries. */
	if (mutation && nkeys > 0)
		omade = own_begin(s, keys[0], &otid);
	rc = rconn_pool_call(r->pool, 0, n, av, al, &rep);
	/* A Redis that lost its data lost statefs's functions with it:
	 * install them again and call once more, to meet the new instance
	 * (ESTALEINST) rather than failing with EIO for ever.  Nothing ran
	 * (the same operation id goes again). */
	if (rc == 0 && rep->type == REDIS_REPLY_ERROR &&
	    strstr(rep->str, "Function not found") &&
	    remote_library_ensure(s) == 0) {
		freeReplyObject(rep);
		rep = NULL;
		rc = rconn_pool_call(r->pool, 0, n, av, al, &rep);
	}
	if (rc && mutation)
		rc = fence(s, nkeys, av, inst, opid, sent, &rep);
	if (mutation)
		atomic_fetch_sub(&r->busy, 1);
	free(av);
	free(al);
	if (rc) {
		rc = rc == -ENOMEM ? rc : -EIO;
	} else if (rep->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "statefs: %s: %s\n", fn, rep->str);
		rc = -EIO;
	} else {
		own = own_detach(rep);
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
		    rep->element[0]->type != REDIS_REPLY_STRING)
			rc = -EPROTO;
	}
	if (rc && rep) {
		freeReplyObject(rep);
		rep = NULL;
	}
	/* Its own entries, applied here when they are the next: the wait
	 * for its seq then ends at once; else (none, not the next, no
	 * outcome) the follower reads them (redis/own.c). */
	if (omade || own)
		own_done(s, otid, omade, rep, own);
	if (rc)
		return rc;
	remote_saw_now(s, out_u64(rep, 1));
	/* A late call's refusal tells the server's real time. */
	if (strcmp(rep->element[0]->str, "ETIMEDOUT") == 0 && rep->elements > 3)
		remote_saw_real(r, out_u64(rep, 3), mono_ms());
	if (strcmp(rep->element[0]->str, "EDAMAGED") == 0) {
		rc = remote_damaged_key(r, fn, out_str(rep, 3));
		freeReplyObject(rep);
		return rc;
	}
	*out = rep;
	if (strcmp(rep->element[0]->str, "OK") == 0) {
		if (mutation && atomic_load(&r->damaged_seen)) {
			/* Its tenant works again: the next damage is news. */
			lock(&r->lock, LOCK_ENGINE_STATE);
			if (same_tag(r->damaged_key, nkeys ? keys[0] : r->meta)) {
				r->damaged_key[0] = '\0';
				atomic_store(&r->damaged_seen, false);
			}
			unlock(&r->lock, LOCK_ENGINE_STATE);
		}
		return 0;
	}
	/* No tenant meta, and the root is another instance: the store
	 * lost its data, as an ESTALEINST says. */
	if ((tl && strcmp(rep->element[0]->str, "ESTALE") == 0 &&
	     out_str(rep, 3) && strcmp(out_str(rep, 3), "nometa") == 0 &&
	     !root_has_instance(r, inst)) ||
	    strcmp(rep->element[0]->str, "ESTALEINST") == 0) {
		lock(&r->lock, LOCK_ENGINE_STATE);
		r->reinit = true;
		unlock(&r->lock, LOCK_ENGINE_STATE);
		*newinst = true;
		return -ESTALE;
	}
	return errno_of(rep->element[0]->str);
}

void applied_wait_locked(struct remote *r, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)ms * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_cond_timedwait(&r->applied, &r->lock, &ts);
}

void applied_wake(struct remote *r)
{
	lock(&r->lock, LOCK_ENGINE_STATE);
	r->batches++;
	pthread_cond_broadcast(&r->applied);
	unlock(&r->lock, LOCK_ENGINE_STATE);
}

/*
 * Wait until the follower has loaded an instance past the @loaded-th
 * (it was told by reinit), for at most store_timeout and a second.
 * true when it has.  Never on the follower's own thread (it is the one
 * that loads), nor before it runs.
 */
static bool wait_new_instance(struct remote *r, uint64_t loaded)
{
	uint64_t until = mono_ms() + r->cfg.timeout_ms + 1000;
	bool done;

	if (!r->running || pthread_equal(pthread_self(), r->thread))
		return false;
	lock(&r->lock, LOCK_ENGINE_STATE);
	while (r->loaded == loaded && mono_ms() < until)
		applied_wait_locked(r, 50);
	done = r->loaded != loaded;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return done;
}

int remote_fcall(struct store *s, const char *fn, bool mutation, int nkeys,
		 const char *const *keys, int argc, const char *const *argv,
		 const size_t *argvlen, redisReply **out)
{
	uint64_t loaded;
	bool newinst;
	int rc;

	rc = fcall_once(s, fn, mutation, nkeys, keys, argc, argv, argvlen, out,
			&loaded, &newinst);
	/* The store is a new instance (Redis lost its data, or failed over
	 * to another history).  Only the nodes of the old one are stale:
	 * once the mirror shows the new one, a fresh lookup finds what it
	 * has, and a call about the root alone is made again. */
	if (newinst && wait_new_instance(remote_of(s), loaded) && nkeys == 0) {
		freeReplyObject(*out);
		rc = fcall_once(s, fn, mutation, nkeys, keys, argc, argv,
				argvlen, out, &loaded, &newinst);
	}
	if (newinst) {
		/* A caller's call refused for the instance is an ESTALE
		 * refusal, counted as the embedded store counts one (the
		 * store did not). */
		if (mutation && remote_of(s)->running &&
		    !pthread_equal(pthread_self(), remote_of(s)->thread))
			refuse(s, -ESTALE);
		/* Its outcome names no seq of this instance's logs: no
		 * caller may wait for one (settle() returns at once). */
		freeReplyObject(*out);
		*out = NULL;
	}
	return rc;
}

uint64_t remote_generation(struct store *s)
{
	struct remote *r = remote_of(s);
	uint64_t g;

	lock(&r->lock, LOCK_ENGINE_STATE);
	g = r->generation;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return g;
}

/* wait_seq's wait, until @until. */
static int wait_applied(struct store *s, uint64_t tid, uint64_t seq,
			uint64_t until)
{
	struct remote *r = remote_of(s);

	for (;;) {
		uint64_t at = 0, batches;
		bool gone = false;

		/* A tenant this mount does not follow (or stopped following
		 * meanwhile) is followed first. */
		if (follow_ensure(s, tid) != 0)
			return -EIO;
		lock(&r->lock, LOCK_ENGINE_STATE);
		batches = r->batches;
		unlock(&r->lock, LOCK_ENGINE_STATE);
		if (mirror_applied(s, tid, &at, &gone) == 0 && (gone || at >= seq))
			return 0;
		if (mono_ms() >= until)
			return -EIO;
		lock(&r->lock, LOCK_ENGINE_STATE);
		if (r->batches == batches)
			applied_wait_locked(r, 50);
		unlock(&r->lock, LOCK_ENGINE_STATE);
	}
}

/*
 * Wait until the mirror has applied tenant @tid's log up to @seq (the
 * root log's for 0), or the tenant went, for at most store_timeout.
 * 0, or -EIO when the follower did not get there in time.
 */
int wait_seq(struct store *s, uint64_t tid, uint64_t seq)
{
	struct remote *r = remote_of(s);
	uint64_t until = mono_ms() + r->cfg.timeout_ms + 1000;
	int rc;

	/* A follower gathering others' news reads at once for a caller. */
	atomic_fetch_add(&r->busy, 1);
	if (atomic_load(&r->gathering))
		follow_wake(s);
	rc = wait_applied(s, tid, seq, until);
	atomic_fetch_sub(&r->busy, 1);
	return rc;
}

/*
 * The engine's root_settle (a root .snapshot): wait, at most
 * store_timeout and two seconds (a round of the follower, woken), until the follower has applied every entry of the
 * logs it follows since the last load, so that the mirror is the store
 * as of one number of its order of all tenants (store_root_order).  A
 * store without that order, or a mount that holds no whole copy of it
 * (follow_whole: with follow_idle, a root .snapshot loads every tenant
 * first), has nothing to wait for.  No lock held.
 */
void remote_root_settle(struct store *s)
{
	struct remote *r = remote_of(s);
	/* A round of the follower: one read, after a pause of at most a
	 * second when its last one failed (Redis busy a moment ago). */
	uint64_t until = mono_ms() + r->cfg.timeout_ms + 2000;

	if (!atomic_load(&mirror_of(s)->gorder) || !follow_whole(s))
		return;
	if (!store_root_settled(s))
		follow_wake(s);
	while (!store_root_settled(s) && mono_ms() < until) {
		lock(&r->lock, LOCK_ENGINE_STATE);
		if (!store_root_settled(s))
			applied_wait_locked(r, 50);
		unlock(&r->lock, LOCK_ENGINE_STATE);
	}
}

/* The outcome @rep of a call about tenant @tid: wait for its seq.  The
 * outcome's errno @rc stands whatever the wait gives, but for success,
 * which needs the mirror to answer. */
int settle(struct store *s, uint64_t tid, int rc, redisReply *rep)
{
	int w;

	if (!rep)
		return rc;
	w = wait_seq(s, tid, out_u64(rep, 2));
	return rc ? rc : w;
}

int settle_node(struct store *s, uint64_t tid, int rc, redisReply *rep,
		struct store_node *n)
{
	struct store_attr a;
	char key[200];
	size_t len;

	rc = settle(s, tid, rc, rep);
	/* (A dead tenant's outcome has seq 0: its end may not be applied.) */
	if (rc != -ESTALE || !rep || out_u64(rep, 2) == 0 ||
	    wait_seq(s, tid, out_u64(rep, 2)) != 0 ||
	    (store_node_kind(n) != STORE_PARENT &&
	     store_node_kind(n) != STORE_CHILD) ||
	    store_getattr(s, n, &a) != 0)
		return rc;
	remote_tenant_key(s, tid, key, sizeof(key));
	len = strlen(key) - 1; /* "...:t" -> "...:" */
	snprintf(key + len, sizeof(key) - len, "%c:%" PRIu64,
		 store_node_kind(n) == STORE_PARENT ? 'p' : 's', mirror_remote_ino(s, n));
	return remote_damaged_key(remote_of(s), "mirror", key);
}

/* Arguments ---------------------------------------------------------------- */

void a_str(struct args *a, const char *s)
{
	a->v[a->n++] = s;
}

void a_u64(struct args *a, uint64_t v)
{
	snprintf(a->num[a->n], sizeof(a->num[a->n]), "%" PRIu64, v);
	a->v[a->n] = a->num[a->n];
	a->n++;
}

void a_i64(struct args *a, int64_t v)
{
	snprintf(a->num[a->n], sizeof(a->num[a->n]), "%" PRId64, v);
	a->v[a->n] = a->num[a->n];
	a->n++;
}

/* A credential: UID GID GROUPS ("" for none); @groups must outlive the
 * call (the caller's buffer). */
void a_cred(struct args *a, const struct store_cred *c, char *groups,
	    size_t glen)
{
	size_t used = 0;

	groups[0] = '\0';
	if (!c) {
		a_str(a, "");
		a_str(a, "");
		a_str(a, "");
		return;
	}
	a_u64(a, c->uid);
	a_u64(a, c->gid);
	for (size_t i = 0; i < c->ngroups && used + 24 < glen; i++)
		used += (size_t)snprintf(groups + used, glen - used, "%s%u",
					 i ? "," : "", (unsigned)c->groups[i]);
	a_str(a, groups);
}

/* The tenant id and key of tenant node @t; false when the mirror does
 * not follow it (dead). */
bool tkey(struct store *s, struct store_node *t, uint64_t *tid,
	  char *buf, size_t len)
{
	if (!t)
		return false;
	*tid = mirror_tid_of(s, t);
	if (!*tid)
		return false;
	remote_tenant_key(s, *tid, buf, len);
	return true;
}

uint64_t *remote_tenants(struct store *s, size_t *n)
{
	size_t cap = mirror_tenants(s, NULL, 0, false) + 16;
	uint64_t *ids;

	/* Tenants the follower learns meanwhile make the count grow: try
	 * again with room for them. */
	for (;;) {
		ids = st_calloc(cap, sizeof(*ids));
		if (!ids) {
			*n = 0;
			return NULL;
		}
		*n = mirror_tenants(s, ids, cap, false);
		if (*n <= cap)
			return ids;
		free(ids);
		cap = *n + 16;
	}
}

/*
 * Wait until the mirror has applied the logs of tenants @ids[0..n) up to
 * what Redis holds now, or seen them go: after a transition that wrote
 * into every tenant's log (a drain of the store and its clear).  A
 * tenant the transition took out of the store has no seq (sfs_sync
 * gives -1): the wait is for the mirror to see it go.  0 or -EIO.
 */
int remote_wait_tenants(struct store *s, const uint64_t *ids, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		redisReply *sr = NULL;
		char k[160];
		int64_t seq;

		remote_tenant_key(s, ids[i], k, sizeof(k));
		if (remote_fcall(s, "sfs_sync", false, 1, (const char *[]){ k },
				 0, NULL, NULL, &sr) == 0) {
			seq = (int64_t)out_u64(sr, 3);
			rc = wait_seq(s, ids[i],
				      seq >= 0 ? (uint64_t)seq : UINT64_MAX);
		}
		if (sr)
			freeReplyObject(sr);
	}
	return rc;
}

int remote_sync(struct store *s)
{
	size_t n;
	uint64_t *ids;
	redisReply *rep = NULL;
	int rc;

	/* The root log first: every tenant made before this call is then
	 * one the mirror follows, and its log is waited for below. */
	rc = remote_fcall(s, "sfs_sync", false, 0, NULL, 0, NULL, NULL, &rep);
	if (rc == 0)
		rc = wait_seq(s, 0, out_u64(rep, 2));
	if (rep)
		freeReplyObject(rep);
	if (rc)
		return rc;
	ids = remote_tenants(s, &n);
	if (!ids)
		return -ENOMEM;
	/* Each tenant's seq by a call of its own (its own slot on a
	 * cluster), waited for. */
	rc = remote_wait_tenants(s, ids, n);
	/* The tenants not followed (redis/use.c): their link counts, as
	 * a followed tenant's are now.  Not the sync's outcome: the tenants
	 * it waited for are in step, and a count that could not be read is
	 * read again at the next refresh. */
	if (rc == 0)
		(void)remote_shells_refresh(s);
	free(ids);
	return rc;
}
