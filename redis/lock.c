/*
 * lock.c - a mount's side of the locks every mount of a shared store
 * honours (store_lock, store.h): flock(2), fcntl(2) record locks and open
 * file description locks on a child, decided by the library's functions
 * (redis/lua/lock.lua, whose essay gives the keys and the rules) and
 * kept by this mount only as far as it must know what to renew, what a
 * close ends, and what .stats counts.
 *
 * What it owns
 * ------------
 * struct remote_locks (remote->locks, made at the first lock request):
 *  - the sessions: one per tenant this mount locks in, named MOUNT.EPOCH
 *    (this mount's id and a count), whose key in the tenant lives
 *    lock_timeout and is renewed every third of it while the mount
 *    holds or waits for a lock there.  A session found expired (the
 *    mount lost Redis for longer than lock_timeout; another mount may
 *    have taken its locks) is void for good: its holds are forgotten
 *    (logged), and the tenant's next request makes a new session, of
 *    the next epoch;
 *  - the holds: an owner that may hold locks of a kind on a child (set
 *    by a grant, cleared when an unlock leaves it nothing, by a close
 *    that ends them, by a lost session), so that a close that holds
 *    nothing makes no call;
 *  - the waiters: requests that wait (F_SETLKW, flock without LOCK_NB),
 *    queued in the child's record in Redis (first come, first served).
 *    The lock thread polls each every LK_POLL_MS with sfs_lock_peek
 *    (read-only: one GET and an EXISTS per session involved), and asks
 *    sfs_lock again only when nothing live holds it back: a release on
 *    any host, or a holder's session that expired.  A waiter's cancel
 *    flag (an interrupt, fs/lock.c) makes the thread take it out of the
 *    queue and answer -EINTR.  No worker thread waits: the request's
 *    first sfs_lock is made on the caller's thread, and the answer that
 *    ends the wait comes from the lock thread, through the request's
 *    done().
 *
 * Threads and locks
 * -----------------
 * L->mu (LOCK_ENGINE_LOCKS) is held alone, never across a call to Redis
 * nor across done(): each step takes what it needs under it, lets it go,
 * calls, then takes it again to record the answer.  Only the lock thread
 * takes a waiter out of the list and frees it; callers only add.  The
 * thread starts with the first waiter or hold and ends at the mount's
 * stop (remote_locks_stop), which answers no waiter: the kernel's
 * requests end with the session that carried them.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>

/* How often a waiter looks whether it may have its lock. */
#define LK_POLL_MS 100

struct lk_sess {
	struct lk_sess *next;
	uint64_t tid;
	char key[160];          /* the tenant's key */
	unsigned epoch;         /* the session is MOUNT.EPOCH */
	bool made;              /* its key was made (by a call that answered) */
};

struct lk_hold {
	struct lk_hold *next;
	uint64_t tid, sino;
	char key[160];
	uint64_t owner, fh;     /* fh: the open file it last locked through */
	bool flock;
	unsigned epoch;
};

struct lk_wait {
	struct lk_wait *next;
	uint64_t tid, sino;
	char key[160];
	struct store_lock_req r;
	uint64_t n;             /* its place's id: MOUNT.EPOCH:N */
	unsigned epoch;
	uint64_t due_ms;
	bool listed;            /* in L->waits */
};

struct remote_locks {
	pthread_mutex_t mu;
	pthread_cond_t cond;    /* mu: a waiter, a cancel, the stop */
	pthread_t thread;
	bool running, stop;     /* mu */
	uint64_t ttl_ms;        /* lock_timeout, immutable */
	uint64_t renew_ms;      /* mu: when the sessions were renewed */
	uint64_t nwait;         /* mu: waiter ids handed out */
	struct lk_sess *sess;   /* mu */
	struct lk_hold *holds;  /* mu */
	struct lk_wait *waits;  /* mu */
};

/* State -------------------------------------------------------------------- */

static struct remote_locks *locks_of(struct store *s)
{
	struct remote *r = remote_of(s);
	struct remote_locks *L = atomic_load(&r->locks), *none = NULL;

	if (L)
		return L;
	L = st_calloc(1, sizeof(*L));
	if (!L)
		return NULL;
	pthread_mutex_init(&L->mu, NULL);
	pthread_cond_init(&L->cond, NULL);
	L->ttl_ms = r->cfg.lock_timeout_ms ? r->cfg.lock_timeout_ms : 10000;
	L->renew_ms = mono_ms();
	if (!atomic_compare_exchange_strong(&r->locks, &none, L)) {
		pthread_mutex_destroy(&L->mu);
		pthread_cond_destroy(&L->cond);
		free(L);
		return none;
	}
	return L;
}

static struct lk_sess *sess_get_locked(struct remote_locks *L, uint64_t tid,
				       const char *key)
{
	struct lk_sess *ss;

	for (ss = L->sess; ss; ss = ss->next)
		if (ss->tid == tid)
			return ss;
	ss = st_calloc(1, sizeof(*ss));
	if (!ss)
		return NULL;
	ss->tid = tid;
	snprintf(ss->key, sizeof(ss->key), "%s", key);
	ss->next = L->sess;
	L->sess = ss;
	return ss;
}

static void sid_of(struct store *s, unsigned epoch, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%u", remote_of(s)->mount, epoch);
}

/* Session @epoch of tenant @tid expired: its holds are void, and the
 * tenant's next request makes the next session. */
static void sess_lost_locked(struct remote_locks *L, uint64_t tid,
			     unsigned epoch)
{
	struct lk_hold **hp = &L->holds, *h;
	struct lk_sess *ss;
	unsigned lost = 0;

	for (ss = L->sess; ss; ss = ss->next)
		if (ss->tid == tid && ss->epoch == epoch) {
			ss->epoch++;
			ss->made = false;
		}
	while ((h = *hp)) {
		if (h->tid == tid && h->epoch == epoch) {
			*hp = h->next;
			free(h);
			lost++;
		} else {
			hp = &h->next;
		}
	}
	if (lost)
		fprintf(stderr, "statefs: the lock session of tenant %" PRIu64
			" expired (Redis out of reach past lock_timeout): %u "
			"lock owners lost their locks\n", tid, lost);
}

static struct lk_hold *hold_find_locked(struct remote_locks *L, uint64_t tid,
					uint64_t sino, uint64_t owner,
					bool flock)
{
	for (struct lk_hold *h = L->holds; h; h = h->next)
		if (h->tid == tid && h->sino == sino && h->owner == owner &&
		    h->flock == flock)
			return h;
	return NULL;
}

/* After a grant or an unlock: @r's owner holds @held locks of its kind
 * on the child, in session @epoch. */
static void hold_note_locked(struct remote_locks *L, uint64_t tid,
			     uint64_t sino, const char *key,
			     const struct store_lock_req *r, unsigned epoch,
			     uint64_t held)
{
	struct lk_hold *h = hold_find_locked(L, tid, sino, r->owner, r->flock);

	if (held == 0) {
		struct lk_hold **hp = &L->holds;

		while (h && *hp != h)
			hp = &(*hp)->next;
		if (h) {
			*hp = h->next;
			free(h);
		}
		return;
	}
	if (!h) {
		h = st_calloc(1, sizeof(*h));
		if (!h)
			return; /* its close then makes no call: the session's
				 * end frees the lock */
		h->tid = tid;
		h->sino = sino;
		h->owner = r->owner;
		h->flock = r->flock;
		snprintf(h->key, sizeof(h->key), "%s", key);
		h->next = L->holds;
		L->holds = h;
	}
	h->fh = r->fh;
	h->epoch = epoch;
}

/* Calls -------------------------------------------------------------------- */

/* The tenant, its key and the state's number of child @n; false when
 * the child has no tenant any more (removed). */
static bool child_where(struct store *s, struct store_node *n, uint64_t *tid,
			char *key, size_t len, uint64_t *sino)
{
	struct store_node *t = state_tenant(s, node_child(n));
	bool ok = tkey(s, t, tid, key, len);

	if (t)
		store_node_unref(s, t);
	*sino = mirror_remote_ino(s, n);
	return ok;
}

static const char *type_word(int type)
{
	return type == F_RDLCK ? "r" : type == F_WRLCK ? "w" : "u";
}

/* sfs_lock for @r: its state word into @state, the owner's locks left
 * into *@held.  0 or -errno (-EAGAIN: a conflict, not waiting). */
static int lk_call(struct store *s, const struct remote_locks *L,
		   const char *key, uint64_t sino, const char *sid, bool new,
		   const char *waitid, const struct store_lock_req *r,
		   char *state, size_t slen, uint64_t *held)
{
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	const char *w;
	int rc;

	a_u64(&a, sino);
	a_str(&a, sid);
	a_u64(&a, L->ttl_ms);
	a_str(&a, waitid);
	a_u64(&a, r->owner);
	a_u64(&a, r->fh);
	a_str(&a, r->flock ? "f" : "p");
	a_str(&a, type_word(r->type));
	a_u64(&a, r->start);
	a_u64(&a, r->end);
	a_u64(&a, r->pid);
	a_str(&a, r->done ? "1" : "");
	a_str(&a, new ? "1" : "");
	rc = remote_fcall(s, "sfs_lock", true, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	if (rc == 0) {
		w = out_str(rep, 3);
		snprintf(state, slen, "%s", w ? w : "");
		*held = out_u64(rep, 4);
		if (!w)
			rc = -EPROTO;
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static void thread_kick_locked(struct store *s, struct remote_locks *L);

/*
 * One request through sfs_lock, in the session of its tenant (a session
 * found expired is replaced and the request made again, once).  0 with
 * the outcome's word in @state, or -errno.  A waiting request that gets
 * "queued" is put in the list here (@w, made by the caller).
 */
static int lk_request(struct store *s, struct remote_locks *L, uint64_t tid,
		      const char *key, uint64_t sino,
		      const struct store_lock_req *r, struct lk_wait *w,
		      char *state, size_t slen)
{
	char sid[40], waitid[64];
	struct lk_sess *ss;
	unsigned epoch;
	uint64_t held = 0;
	bool new;
	int rc = -EIO;

	for (int round = 0; round < 2; round++) {
		lock(&L->mu, LOCK_ENGINE_LOCKS);
		ss = sess_get_locked(L, tid, key);
		if (!ss) {
			unlock(&L->mu, LOCK_ENGINE_LOCKS);
			return -ENOMEM;
		}
		epoch = ss->epoch;
		new = !ss->made;
		if (w && (!w->n || w->epoch != epoch)) {
			w->n = ++L->nwait;
			w->epoch = epoch;
		}
		unlock(&L->mu, LOCK_ENGINE_LOCKS);
		sid_of(s, epoch, sid, sizeof(sid));
		waitid[0] = '\0';
		if (w)
			snprintf(waitid, sizeof(waitid), "%s:%" PRIu64, sid, w->n);
		rc = lk_call(s, L, key, sino, sid, new, waitid, r, state, slen,
			     &held);
		lock(&L->mu, LOCK_ENGINE_LOCKS);
		if (rc == 0 && strcmp(state, "lost") == 0) {
			sess_lost_locked(L, tid, epoch);
			unlock(&L->mu, LOCK_ENGINE_LOCKS);
			continue;
		}
		if (ss->epoch == epoch) {
			/* OK and EAGAIN made the session's key; an ESTALE
			 * made nothing. */
			if (rc == 0 || rc == -EAGAIN)
				ss->made = true;
			else if (new && rc != -ESTALE)
				/* A new session whose call may or may not have
				 * run: never used again. */
				ss->epoch++;
		}
		if (rc == 0 && (strcmp(state, "granted") == 0 ||
				strcmp(state, "unlocked") == 0))
			hold_note_locked(L, tid, sino, key, r, epoch, held);
		if (rc == 0 && strcmp(state, "queued") == 0 && w && !w->listed) {
			w->due_ms = mono_ms() + LK_POLL_MS;
			w->listed = true;
			w->next = L->waits;
			L->waits = w;
			thread_kick_locked(s, L);
		} else if (rc == 0 && strcmp(state, "granted") == 0) {
			thread_kick_locked(s, L); /* renew the session */
		}
		unlock(&L->mu, LOCK_ENGINE_LOCKS);
		return rc;
	}
	return -EIO; /* a session lost twice in a row */
}

/* Drop session @sid's locks or waiters on @sino: @by "owner", "fh" or
 * "wait" @value.  Best effort: the session's end frees what fails. */
static void lk_drop_call(struct store *s, const struct remote_locks *L,
			 const char *key, uint64_t sino, const char *sid,
			 const char *by, const char *value)
{
	struct args a = { .n = 0 };
	redisReply *rep = NULL;

	a_u64(&a, sino);
	a_str(&a, sid);
	a_u64(&a, L->ttl_ms);
	a_str(&a, by);
	a_str(&a, value);
	remote_fcall(s, "sfs_lock_drop", true, 1, (const char *[]){ key },
		     a.n, a.v, NULL, &rep);
	if (rep)
		freeReplyObject(rep);
}

/* The lock thread ---------------------------------------------------------- */

/* Renew every session in use (holds or waiters in its tenant), with the
 * records of the states named; a session found expired is lost. */
static void renew_all(struct store *s, struct remote_locks *L)
{
	struct lk_sess *ss;

	lock(&L->mu, LOCK_ENGINE_LOCKS);
	for (ss = L->sess; ss; ss = ss->next) {
		const char *v[64 + 2];
		char num[64][24], sid[40], ttl[24], key[160];
		unsigned epoch = ss->epoch;
		uint64_t tid = ss->tid;
		int n = 0;
		redisReply *rep = NULL;
		int rc;

		if (!ss->made)
			continue;
		for (struct lk_hold *h = L->holds; h && n < 64; h = h->next)
			if (h->tid == tid && h->epoch == epoch)
				snprintf(num[n++], sizeof(num[0]), "%" PRIu64,
					 h->sino);
		for (struct lk_wait *w = L->waits; w && n < 64; w = w->next)
			if (w->tid == tid && w->epoch == epoch)
				snprintf(num[n++], sizeof(num[0]), "%" PRIu64,
					 w->sino);
		if (n == 0)
			continue; /* unused: it expires, the next use makes
				   * the next one */
		sid_of(s, epoch, sid, sizeof(sid));
		snprintf(ttl, sizeof(ttl), "%" PRIu64, L->ttl_ms);
		snprintf(key, sizeof(key), "%s", ss->key);
		v[0] = sid;
		v[1] = ttl;
		for (int i = 0; i < n; i++)
			v[2 + i] = num[i];
		/* Sessions are never freed before the stop: ss stays. */
		unlock(&L->mu, LOCK_ENGINE_LOCKS);
		rc = remote_fcall(s, "sfs_lock_renew", true, 1,
				  (const char *[]){ key }, 2 + n, v, NULL, &rep);
		lock(&L->mu, LOCK_ENGINE_LOCKS);
		if (rc == 0 && out_str(rep, 3) && strcmp(out_str(rep, 3), "0") == 0)
			sess_lost_locked(L, tid, epoch);
		else if (rc == -ESTALE && rep)
			sess_lost_locked(L, tid, epoch); /* the tenant went */
		if (rep)
			freeReplyObject(rep);
	}
	unlock(&L->mu, LOCK_ENGINE_LOCKS);
}

/* Take waiter @w out of the list (the thread's alone). */
static void wait_unlink_locked(struct remote_locks *L, struct lk_wait *w)
{
	for (struct lk_wait **wp = &L->waits; *wp; wp = &(*wp)->next)
		if (*wp == w) {
			*wp = w->next;
			w->next = NULL;
			w->listed = false;
			return;
		}
}

/* One look of waiter @w: peek, and ask again when it may move.  Returns
 * the answer that ends its wait (0, -errno), or 1: it waits on. */
static int wait_step(struct store *s, struct remote_locks *L, struct lk_wait *w)
{
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	char sid[40], waitid[64], state[16];
	const char *look;
	int rc;

	sid_of(s, w->epoch, sid, sizeof(sid));
	snprintf(waitid, sizeof(waitid), "%s:%" PRIu64, sid, w->n);
	a_u64(&a, w->sino);
	a_str(&a, sid);
	a_str(&a, waitid);
	rc = remote_fcall(s, "sfs_lock_peek", false, 1,
			  (const char *[]){ w->key }, a.n, a.v, NULL, &rep);
	look = rc == 0 ? out_str(rep, 3) : NULL;
	rc = look && strcmp(look, "1") == 0;
	if (rep)
		freeReplyObject(rep);
	if (!rc)
		return 1; /* held back, or Redis out of reach: look again */
	rc = lk_request(s, L, w->tid, w->key, w->sino, &w->r, w, state,
			sizeof(state));
	if (rc == 0 && strcmp(state, "queued") == 0)
		return 1;
	if (rc == -EIO || rc == -EAGAIN)
		return 1;
	return rc;
}

static void *lock_thread(void *arg)
{
	struct store *s = arg;
	struct remote_locks *L = atomic_load(&remote_of(s)->locks);

	lock(&L->mu, LOCK_ENGINE_LOCKS);
	while (!L->stop) {
		uint64_t now = mono_ms(), next = now + L->ttl_ms / 3;
		struct lk_wait *w, *pick = NULL;
		struct timespec ts;
		int rc;

		if (now >= L->renew_ms + L->ttl_ms / 3) {
			L->renew_ms = now;
			unlock(&L->mu, LOCK_ENGINE_LOCKS);
			renew_all(s, L);
			lock(&L->mu, LOCK_ENGINE_LOCKS);
			continue;
		}
		for (w = L->waits; w; w = w->next) {
			if (atomic_load(w->r.cancel) || w->due_ms <= now) {
				pick = w;
				break;
			}
			if (w->due_ms < next)
				next = w->due_ms;
		}
		if (!pick) {
			if (L->renew_ms + L->ttl_ms / 3 < next)
				next = L->renew_ms + L->ttl_ms / 3;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)((next - now) / 1000);
			ts.tv_nsec += (long)((next - now) % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&L->cond, &L->mu, &ts);
			continue;
		}
		if (atomic_load(pick->r.cancel)) {
			char sid[40], waitid[64];

			wait_unlink_locked(L, pick);
			unlock(&L->mu, LOCK_ENGINE_LOCKS);
			sid_of(s, pick->epoch, sid, sizeof(sid));
			snprintf(waitid, sizeof(waitid), "%s:%" PRIu64, sid,
				 pick->n);
			lk_drop_call(s, L, pick->key, pick->sino, sid, "wait",
				     waitid);
			pick->r.done(pick->r.arg, -EINTR);
			free(pick);
			lock(&L->mu, LOCK_ENGINE_LOCKS);
			continue;
		}
		unlock(&L->mu, LOCK_ENGINE_LOCKS);
		rc = wait_step(s, L, pick);
		lock(&L->mu, LOCK_ENGINE_LOCKS);
		pick->due_ms = mono_ms() + LK_POLL_MS;
		if (rc != 1) {
			wait_unlink_locked(L, pick);
			unlock(&L->mu, LOCK_ENGINE_LOCKS);
			pick->r.done(pick->r.arg, rc);
			free(pick);
			lock(&L->mu, LOCK_ENGINE_LOCKS);
		}
	}
	unlock(&L->mu, LOCK_ENGINE_LOCKS);
	return NULL;
}

/* The thread runs from the first waiter or hold on; a kick wakes it. */
static void thread_kick_locked(struct store *s, struct remote_locks *L)
{
	if (!L->running && !L->stop &&
	    pthread_create(&L->thread, NULL, lock_thread, s) == 0)
		L->running = true;
	pthread_cond_signal(&L->cond);
}

/* The slots ---------------------------------------------------------------- */

int remote_lock(struct store *s, struct store_node *n,
		       const struct store_lock_req *r)
{
	struct remote_locks *L = locks_of(s);
	struct lk_wait *w = NULL;
	char key[160], state[16];
	uint64_t tid, sino;
	bool held;
	int rc;

	if (!L)
		return -ENOMEM;
	if (!child_where(s, n, &tid, key, sizeof(key), &sino)) {
		if (r->type == F_UNLCK)
			return 0; /* its locks ended with it */
		return -ESTALE;
	}
	if (r->type == F_UNLCK) {
		lock(&L->mu, LOCK_ENGINE_LOCKS);
		held = hold_find_locked(L, tid, sino, r->owner, r->flock);
		unlock(&L->mu, LOCK_ENGINE_LOCKS);
		if (!held)
			return 0; /* nothing of this owner's: no call */
	}
	if (r->done) {
		w = st_calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		w->tid = tid;
		w->sino = sino;
		snprintf(w->key, sizeof(w->key), "%s", key);
		w->r = *r;
	}
	rc = lk_request(s, L, tid, key, sino, r, w, state, sizeof(state));
	if (rc == 0 && strcmp(state, "queued") == 0)
		return 1; /* w is the thread's now */
	free(w);
	return rc;
}

void remote_lock_kick(struct store *s)
{
	struct remote_locks *L = atomic_load(&remote_of(s)->locks);

	if (!L)
		return;
	lock(&L->mu, LOCK_ENGINE_LOCKS);
	pthread_cond_signal(&L->cond);
	unlock(&L->mu, LOCK_ENGINE_LOCKS);
}

int remote_lock_test(struct store *s, struct store_node *n,
			    struct store_lock_req *r)
{
	struct remote_locks *L = locks_of(s);
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	char key[160], sid[40];
	uint64_t tid, sino;
	const char *t;
	int rc;

	if (!L)
		return -ENOMEM;
	if (!child_where(s, n, &tid, key, sizeof(key), &sino))
		return -ESTALE;
	lock(&L->mu, LOCK_ENGINE_LOCKS);
	{
		struct lk_sess *ss = sess_get_locked(L, tid, key);

		sid_of(s, ss ? ss->epoch : 0, sid, sizeof(sid));
	}
	unlock(&L->mu, LOCK_ENGINE_LOCKS);
	a_u64(&a, sino);
	a_str(&a, sid);
	a_u64(&a, r->owner);
	a_u64(&a, r->fh);
	a_str(&a, r->flock ? "f" : "p");
	a_str(&a, type_word(r->type));
	a_u64(&a, r->start);
	a_u64(&a, r->end);
	a_u64(&a, r->pid);
	rc = remote_fcall(s, "sfs_lock_test", false, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	if (rc == 0 && !(t = out_str(rep, 3)))
		rc = -EPROTO;
	if (rc == 0) {
		if (strcmp(t, "u") == 0) {
			r->type = F_UNLCK;
		} else {
			r->type = strcmp(t, "w") == 0 ? F_WRLCK : F_RDLCK;
			r->start = out_u64(rep, 4);
			r->end = out_u64(rep, 5);
			if (r->start > INT64_MAX)
				r->start = INT64_MAX;
			if (r->end > INT64_MAX)
				r->end = INT64_MAX;
			/* Another mount's process has no pid here. */
			r->pid = out_str(rep, 7) && *out_str(rep, 7) ?
					 (uint32_t)out_u64(rep, 6) : 0;
		}
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

void remote_lock_drop(struct store *s, struct store_node *n,
			     bool by_owner, uint64_t id)
{
	struct remote_locks *L = atomic_load(&remote_of(s)->locks);
	uint64_t sino = mirror_remote_ino(s, n);

	if (!L)
		return;
	for (;;) {
		struct lk_hold **hp, *h;
		char key[160], sid[40], value[24];
		bool found;

		/* One call per session: each call's holds go together. */
		lock(&L->mu, LOCK_ENGINE_LOCKS);
		for (hp = &L->holds; *hp; hp = &(*hp)->next)
			if ((*hp)->sino == sino &&
			    (by_owner ? (*hp)->owner == id && !(*hp)->flock :
					(*hp)->fh == id))
				break;
		found = *hp != NULL;
		if (found) {
			unsigned epoch = (*hp)->epoch;
			uint64_t tid = (*hp)->tid;

			snprintf(key, sizeof(key), "%s", (*hp)->key);
			sid_of(s, epoch, sid, sizeof(sid));
			hp = &L->holds;
			while ((h = *hp)) {
				if (h->sino == sino && h->tid == tid &&
				    h->epoch == epoch &&
				    (by_owner ? h->owner == id && !h->flock :
						h->fh == id)) {
					*hp = h->next;
					free(h);
				} else {
					hp = &h->next;
				}
			}
		}
		unlock(&L->mu, LOCK_ENGINE_LOCKS);
		if (!found)
			return;
		snprintf(value, sizeof(value), "%" PRIu64, id);
		lk_drop_call(s, L, key, sino, sid, by_owner ? "owner" : "fh",
			     value);
	}
}

void remote_lock_stats(struct store *s, struct store_node *tenant,
			      struct store_stats *o)
{
	struct remote_locks *L = atomic_load(&remote_of(s)->locks);
	char key[160];
	uint64_t tid = 0;

	if (!L)
		return;
	if (tenant && !tkey(s, tenant, &tid, key, sizeof(key)))
		return;
	lock(&L->mu, LOCK_ENGINE_LOCKS);
	for (struct lk_hold *h = L->holds; h; h = h->next)
		o->locks_held += !tenant || h->tid == tid;
	for (struct lk_wait *w = L->waits; w; w = w->next)
		o->lock_waiters += !tenant || w->tid == tid;
	unlock(&L->mu, LOCK_ENGINE_LOCKS);
}

void remote_locks_stop(struct store *s)
{
	struct remote *r = remote_of(s);
	struct remote_locks *L = r ? atomic_load(&r->locks) : NULL;
	bool running;

	if (!L)
		return;
	lock(&L->mu, LOCK_ENGINE_LOCKS);
	L->stop = true;
	running = L->running;
	pthread_cond_signal(&L->cond);
	unlock(&L->mu, LOCK_ENGINE_LOCKS);
	if (running)
		pthread_join(L->thread, NULL);
	while (L->sess) {
		struct lk_sess *ss = L->sess;

		L->sess = ss->next;
		free(ss);
	}
	while (L->holds) {
		struct lk_hold *h = L->holds;

		L->holds = h->next;
		free(h);
	}
	/* The kernel's waiting requests end with the session. */
	while (L->waits) {
		struct lk_wait *w = L->waits;

		L->waits = w->next;
		free(w);
	}
	pthread_mutex_destroy(&L->mu);
	pthread_cond_destroy(&L->cond);
	free(L);
	atomic_store(&r->locks, NULL);
}
