/*
 * internal.h - what the files of the Redis engine share: struct remote
 * (each field with what guards it) and their functions, grouped by the
 * file that defines them.  Private to redis/; the engine's design is
 * told at the top of redis/ops.c.
 *
 * The files, from the top down: each calls only files below it (no
 * circle of calls), and the engine's ground, the clock estimate, the
 * index and the transport, calls no file above it.
 *   start.c     a mount's start on a shared store
 *   ops.c       the transitions: each one FCALL, its wait, the answer
 *               from the mirror; the engine's table (redis_ops)
 *   stop.c      a mount's stop: the follower, the pool, the mirror
 *   follow.c    the follower thread: the logs read (XRANGE), gaps
 *               reloaded, a new store instance
 *   subscribe.c its news: the subscribed links (SSUBSCRIBE), poll(2),
 *               the callers' wake-up pipe
 *   stats.c     what .stats and the link state show of the shared store
 *   history.c   a tenant's .events lines from before the mount's log,
 *               told by the tenant's log in Redis
 *   clock.c     the test clock moved through Redis, expiry asked of Redis
 *   load.c      a tenant loaded from its dump; every tenant loaded
 *   instance.c  sfs_init (this mount's limits, the store's instance), a
 *               new instance's init
 *   call.c      a call: arguments, the FCALL, its outcome (the fence),
 *               the wait for the follower, sync
 *   use.c       what the mount follows: the tenants it uses, the
 *               kernel's holds, the wait for a tenant to be followed
 *   estimate.c  the estimate of the store's clock and of the server's
 *               real time
 *   library.c   the Functions library installed and checked
 *   diff.c      a tenant reloaded as the difference from its dump
 *   apply.c     each kind of log entry applied with the core's
 *               transitions
 *   dump.c      a dump read, and what its rows say set on nodes
 *   entry.c     a log entry parsed into a plain struct entry (entry.h)
 *   index.c     the mirror's index by the store's inode numbers, the
 *               tenants followed and the follower's positions in their
 *               logs, the tenant of a state
 *   conn.c      the transport (conn.h): the pool, connections, a call's
 *               deadline and retries
 *   discover.c  the primary found and greeted: Sentinels, AUTH,
 *               ROLE/HELLO, the maxmemory-policy
 *   wire.c      the transport's ground (wire.h): deadlines, a failure's
 *               text, what a reply says
 *   link.c      one connection to one server (link.h): a socket, TLS on
 *               it (OpenSSL), commands and replies through hiredis
 *   options.c   the store option's defaults and names (redis.h)
 * with mirror.h (a mirror's structures, the functions of apply.c,
 * index.c, load.c, dump.c and diff.c) and redis/lua/ (the Functions
 * library, which statefs_lua.h carries into the program).
 */
#ifndef STATEFS_REDIS_INTERNAL_H
#define STATEFS_REDIS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "redis/conn.h"
#include "redis/redis.h"
#include "store/store.h"
#include "store/engine.h"

/* The tenants whose own entries a mount's callers applied that the
 * follower is told of at once (redis/own.c). */
#define OWN_HINTS 16

/* A tenant log the follower reads: its tenant id and last entry id. */
struct follow_pos {
	uint64_t tid;
	char id[48];
	bool damaged;   /* its log is not a stream: not read until mended */
	bool due;       /* its log may hold more: read at the next round */
	/* News of this mount's own call, left to its caller (own_news):
	 * no reason for a round, but a round that reads the logs the
	 * barrier names reads this one too, so that no entry of another
	 * tenant is applied before it. */
	bool own_due;
};

/* Where tenant @tid's position is in remote->pos (by hash: the
 * follower finds a stream's position without a walk). */
struct follow_ix {
	UT_hash_handle hh;
	uint64_t tid;
	size_t i;
};

struct remote_locks;
struct follow_link;

/* The most subscribed links a follower keeps: one per primary that
 * serves a tenant it follows (one on one Redis). */
#define FOLLOW_LINKS_MAX 128

struct remote {
	struct store_remote cfg;       /* immutable (password wiped) */
	struct rconn_pool *pool;       /* immutable */
	char mount[17];                /* this mount's id: ops MOUNT:N */
	atomic_uint_fast64_t opn;      /* the op counter */
	char meta[STORE_REMOTE_PREFIX_MAX * 2 + 16]; /* P:{P}:meta */
	char rootlog[STORE_REMOTE_PREFIX_MAX * 2 + 16];
	bool testclock;                /* immutable */
	/* The store is of the tenant layout (meta layout tenant: a tenant
	 * function takes its tenant's own meta, P:{P.tTID}:meta, as its
	 * first key, nothing of {P}); set by every sfs_init (the store's,
	 * whatever -o store_layout asked) and by a cluster found. */
	atomic_bool tenant_meta;
	/* The limits the store recorded, as sfs_init gave them (NAME VALUE
	 * pairs), for sfs_tenant_make's copies; lock. */
	char lim_kv[48][24];
	unsigned nlim_kv;

	/* The estimate of the store's clock: the local monotonic clock
	 * plus the offset learned from every reply's now_ms, never going
	 * backwards; under testclock the store's clock_ms as replies and
	 * the root log tell it. */
	atomic_int_fast64_t offset_ms;
	atomic_uint_fast64_t floor_ms;

	/* The server's real time (TIME), which a mutation's deadline is
	 * on whatever the store's clock (redis/estimate.c): TIME in ms
	 * minus the local CLOCK_MONOTONIC ms when it was received, and
	 * when that was; 0, 0 before the first.  Under lock. */
	int64_t real_off_ms;
	uint64_t real_at_ms;

	/* LOCK_ENGINE_STATE, held alone: the instance and what the follower
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
	uint64_t loaded;               /* lock: new instances loaded so far */
	char damaged_key[256];         /* lock: the damaged key last logged */
	atomic_bool damaged_seen;      /* damaged_key is set */
	atomic_uint_fast64_t damaged;  /* calls refused as damaged */

	/* The follower (redis/follow.c): its thread, its positions (its
	 * own; kept by redis/index.c), whether it runs. */
	pthread_t thread;
	bool running;
	atomic_bool stop;
	char root_id[48];
	bool root_damaged;             /* the root log is not a stream */
	bool root_due;                 /* the root log may hold more */
	struct follow_pos *pos;
	size_t npos, cappos;
	struct follow_ix *ix;          /* tid -> its place in pos */
	/* Its subscribed links and wake-up (redis/subscribe.c): the
	 * links, each written once before nlinks counts it (follow_stop
	 * interrupts them from another thread) and freed after the join;
	 * whether the positions changed since the links' channels were
	 * last made theirs (index.c sets it); the root's channel; the
	 * pipe callers write a byte to (follow_wake), made before the
	 * follower starts and closed by remote_free (-1 before). */
	struct follow_link *links[FOLLOW_LINKS_MAX];
	atomic_size_t nlinks;
	bool subs_dirty;
	char rootnews[STORE_REMOTE_PREFIX_MAX * 2 + 16];
	int wake[2];

	/* The locks (redis/lock.c): made at the first lock request. */
	_Atomic(struct remote_locks *) locks;
	/* What the mount follows (redis/use.c).  @idle_ms (follow_idle,
	 * immutable): a tenant unused that long, which the kernel holds
	 * nothing of, is unfollowed (0: every tenant is followed).  Under
	 * lock: the tenants a caller waits to be followed.  The holds of
	 * the whole store (root .events, .snapshot). */
	uint64_t idle_ms;
	uint64_t *wanted;
	size_t nwanted, capwanted;
	atomic_int_fast64_t holds_all;
	atomic_uint_fast64_t all_used_ms;  /* the whole store's last use */
	uint64_t all_asked_ms;             /* the follower's */
	/* The root was used (looked up in, listed) since the follower
	 * last read the shells' link counts (remote_shells_refresh). */
	atomic_bool root_used;
	/* This mount's mutations on their way (an FCALL sent, or a wait
	 * for its seq: redis/call.c), and whether the follower gathers news
	 * meanwhile (redis/follow.c, -o follow_gather: it does only while
	 * there are none, and a caller that starts waiting wakes it). */
	atomic_int busy;
	atomic_bool gathering;
	uint64_t gather_ms;               /* follow_gather; immutable */
	/* Under lock: where callers' own entries took tenants' logs
	 * (redis/own.c), for the follower to read on from. */
	struct own_hint {
		uint64_t tid, seq;
		char id[48];
	} own[OWN_HINTS];
	size_t nown;
	/* Under lock: tenants whose log holds an own call's entries its
	 * caller did not apply (their news the follower leaves to the
	 * caller: own_news), to be read at the next round; all of them
	 * when there were more than OWN_HINTS. */
	uint64_t kick[OWN_HINTS];
	size_t nkick;
	bool kick_all;
	/* Under lock: the tenants this mount's mutations are about while
	 * they are on their way (own_begin .. own_done), each with how
	 * many: only their news is left to the callers (own_news). */
	struct own_flying {
		uint64_t tid;
		unsigned n;
		uint64_t last;         /* the news left to them, its seq */
	} flying[OWN_HINTS];
	size_t nflying;
	/* The follower's own: tenants wanted whose root entry is still to
	 * come (followed from their log's start when it does). */
	uint64_t *pending;
	size_t npending, cappending;
	uint64_t idle_checked;
};

/* redis/history.c */

/* The events_history slot (store_events_start): tenant @tenant's lines
 * from number @seq on, made from its log in Redis when that still starts
 * at its first entry.  No store lock held. */
int remote_events_history(struct store *s, struct store_node *tenant,
			  const struct store_cred *cred, uint64_t seq,
			  char **text, size_t *len, uint64_t *upto);

/* redis/call.c */

/* Key @key of the store is not as statefs made it, found by @fn: count
 * it (.stats store_damaged), log it once until a mutation succeeds;
 * -EIO. */
int remote_damaged_key(struct remote *r, const char *fn, const char *key);

/* Small decimal buffers for one call's arguments. */
struct args {
	const char *v[16];
	char num[16][24];
	int n;
};

/*
 * FCALL @fn through the pool: @nkeys keys (the store's meta key is put
 * first: @keys are the others), the common arguments (the instance, an
 * operation id when @mutation, the deadline), then @argv.  The outcome's
 * now_ms feeds the clock estimate.  Returns the errno of the outcome (0
 * for OK) with the reply in *@out (the caller frees it), -EIO when Redis
 * could not be reached or did not answer within store_timeout (nothing
 * happened: a mutation's outcome is then asked for by a fence, which
 * waits up to store_timeout more, and when the call did run its own
 * outcome is returned), -ESTALE after ESTALEINST (the instance changed: the
 * follower makes the mirror a new instance).  A store without statefs's
 * functions (Redis lost its data) gets the library again and the call is
 * made once more, so that it meets the new instance.  After an
 * ESTALEINST a caller other than the follower waits (store_timeout and a
 * second at most) until the follower has loaded the new instance, so
 * that a lookup made after the -ESTALE sees it; a call with no tenant key
 * (@nkeys 0: it names no node, only the root, which every instance has)
 * is then made once more, on the new instance.  An -ESTALE for the
 * instance comes with no reply (*@out NULL).
 */
int remote_fcall(struct store *s, const char *fn, bool mutation, int nkeys,
		 const char *const *keys, int argc, const char *const *argv,
		 const size_t *argvlen, redisReply **out);

/* How many new instances the store has become so far (under
 * remote->lock). */
uint64_t remote_generation(struct store *s);

/* The key of tenant @tid (P:{P.tTID}:t) into @buf. */
void remote_tenant_key(struct store *s, uint64_t tid, char *buf, size_t len);

/* redis/tenants.c: the tenant layout's calls, one per slot.
 *
 * remote_tenant_make2: step 2 of a tenant's mkdir (sfs_tenant_make) on
 * its slot, idempotent; the tenant's seq to wait for into *@seq.
 * remote_tenant_unlist: step 2 of its rmdir, or the end of a tenant the
 * store's drain cleared (sfs_tenant_unlist NAME TID on the root slot),
 * idempotent, the root log waited for.  remote_drain_fanout: the store's
 * drain, as the root records it, made each tenant's (cleared at once
 * with @now), the tenants it ends unlisted.  remote_clock_fanout: the
 * store's test clock made each tenant's.  remote_expired_tenant: after
 * sfs_expire of tenant @tid (reply @rep), its name unlisted when the
 * store's drain ended it.  remote_stats_sum: each tenant's gauges and
 * counters added into the root's sfs_stats reply @root.  0 or -errno;
 * no lock held, each call's wait as remote_fcall's. */
int remote_tenant_make2(struct store *s, const char *name, uint64_t tid,
			const struct store_owner *o, uint64_t clock_ms,
			uint64_t created_ms, uint64_t *seq);
int remote_tenant_unlist(struct store *s, const char *name, uint64_t tid);
/* The roll forward of a tenant's mkdir or rmdir that stopped between
 * its steps (its maker died), for the tenant the store lists as @name:
 * one listed with nothing in its slot gets its step 2 from the root
 * log's tenant entry (0); one removed in its slot is unlisted (1: a
 * mkdir of the name may go again).  0 also when nothing was to do;
 * -errno. */
int remote_tenant_roll_forward(struct store *s, const char *name);
int remote_drain_fanout(struct store *s, bool now);
void remote_clock_fanout(struct store *s, uint64_t clock_ms);
void remote_expired_tenant(struct store *s, uint64_t tid,
			   const redisReply *rep);
int remote_stats_sum(struct store *s, redisReply *root);

/* Is the store of the tenant layout (one call per tenant, each on its
 * tenant's slot)?  Any thread, no lock. */
bool remote_tenant_layout(struct store *s);

/* Element @i of outcome @r as a number (an integer reply or a decimal). */
uint64_t out_u64(const redisReply *r, size_t i);

/* Element @i of outcome @r when it is a string or a status, else NULL
 * (also past its end). */
const char *out_str(const redisReply *r, size_t i);

/* Wait until the mirror has applied tenant @tid's log up to @seq (the
 * root log's for 0), or the tenant went; 0, or -EIO past store_timeout
 * and a second. */
int wait_seq(struct store *s, uint64_t tid, uint64_t seq);

/* One slice of a bounded wait for the follower: wait on r->applied,
 * with r->lock held, at most @ms (a batch applied, a load, a stop
 * wakes it sooner). */
void applied_wait_locked(struct remote *r, unsigned ms);

/* The mirror applied more (a round, a caller's own entries, news): wake
 * the transitions waiting for it.  Takes r->lock. */
void applied_wake(struct remote *r);

/* The engine's root_settle: wait, at most store_timeout, until the root's
 * number says what the mirror holds (store_root_order). */
void remote_root_settle(struct store *s);

/* Wait until the mirror has applied tenants @ids[0..n)'s logs as Redis
 * holds them now, or seen each go (after a drain of the store); 0 or
 * -EIO. */
int remote_wait_tenants(struct store *s, const uint64_t *ids, size_t n);

/* The outcome @rep (NULL: the call failed, @rc) of a call about tenant
 * @tid: wait for its seq.  @rc stands, but a success the wait failed. */
int settle(struct store *s, uint64_t tid, int rc, redisReply *rep);

/* settle() of a call about node @n (a parent or a child): an ESTALE
 * for a node the mirror, caught up with the outcome, still shows alive
 * is a key the log says exists and Redis lost: damage (-EIO). */
int settle_node(struct store *s, uint64_t tid, int rc, redisReply *rep,
		struct store_node *n);

/* Arguments of one call, into @a: a string (borrowed), a number, a
 * credential (UID GID GROUPS, written into the caller's @groups). */
void a_str(struct args *a, const char *s);
void a_u64(struct args *a, uint64_t v);
void a_i64(struct args *a, int64_t v);
void a_cred(struct args *a, const struct store_cred *c, char *groups,
	    size_t glen);

/* The tenant id and key of tenant node @t; false when the mirror does
 * not follow it (dead). */
bool tkey(struct store *s, struct store_node *t, uint64_t *tid,
	  char *buf, size_t len);

/* Every tenant the mirror follows and has not seen go, however many:
 * their ids in a new array (the caller frees it), their number in *@n.
 * NULL when memory ran out. */
uint64_t *remote_tenants(struct store *s, size_t *n);

/* store_sync() of a shared store: wait until the mirror has applied
 * every log up to what Redis holds now (the root's first).  0 or -EIO,
 * -ENOMEM. */
int remote_sync(struct store *s);

/* redis/estimate.c */

/* Local CLOCK_MONOTONIC in ms. */
uint64_t mono_ms(void);

/* The mirror's store clock (struct store_clock's now_ms; @arg: the
 * struct remote): the estimate of the store's. */
uint64_t remote_clock(void *arg);

/* Learn the store's clock from a reply's now_ms. */
void remote_saw_now(struct store *s, uint64_t now_ms);

/* Learn the server's real time from @real_ms, a TIME in ms received at
 * local CLOCK_MONOTONIC @at_ms (taken after the reply came). */
void remote_saw_real(struct remote *r, uint64_t real_ms, uint64_t at_ms);

/*
 * A lower bound of the server's real time (TIME in ms) now, into
 * *@real_ms: the latest sample plus the local time since, asking TIME
 * first when that sample is older than REAL_SAMPLE_MAX_MS (or there is
 * none).  0, or -EIO when TIME got no reply in store_timeout, -ENOMEM.
 * No store lock may be held (it may wait on the network).
 */
int remote_real_ms(struct store *s, uint64_t *real_ms);

/* The longest a sample of the server's real time is used for, and how
 * far a lower bound made from one may be above the truth (the error
 * of its estimate, in ms): 1 ms from each of the two truncations to
 * ms, and the two clocks' rates, each slewed by at most 500 ppm by NTP
 * (adjtimex's bound), over REAL_SAMPLE_MAX_MS: 10 ms; 25 in all. */
#define REAL_SAMPLE_MAX_MS 10000
#define REAL_ERROR_MS 25

/* redis/library.c */

/* The library version this mount speaks (redis/lua/contract.lua). */
#define LIBVERSION 9

/* Install this mount's Functions library when the store lacks it (a
 * Redis that lost its data lost its functions too).  0 or -errno
 * (logged). */
int remote_library_ensure(struct store *s);

/* redis/instance.c */

/* Random hex of @n digits into @buf (@n + 1 bytes). */
void instance_random_hex(char *buf, size_t n);

/*
 * sfs_init: record this mount's limits, or compare them with the store's
 * (adopt them with store_limits=adopt).  Fills @l with what the store
 * has, and @instance (17 bytes).  0, or -EINVAL / -EPROTO / -EIO with a
 * one-line message in @err.
 */
int instance_init(struct remote *r, struct store_limits *l, char *instance,
		  char *err, size_t errlen);

/* The store is a new instance: sfs_init it (record this mount's limits
 * when it is empty) and take its instance.  0 or -errno (logged). */
int remote_reinit(struct store *s);

/* redis/load.c */

/* Make tenant @tid (its key @key) a shell of the mirror from its hash in
 * the store (redis/use.c); nothing when it is gone.  0 or -errno. */
int remote_shell(struct store *s, uint64_t tid, const char *key);

/* Every shell's link count made the store's (its parents in Redis), for
 * each whose tenant log moved since it was read: one sfs_sync, one HMGET
 * a shell that moved; the kernel asked to forget each count that
 * changed.  0 or -errno (the counts as they were). */
int remote_shells_refresh(struct store *s);

/* Load the root's dump and every tenant's into the mirror (start, or a
 * new instance), and follow each tenant's log from the dump's last id.
 * 0 or -errno. */
int remote_load_all(struct store *s);

/* redis/own.c */

/* Take the own entries off the end of outcome @rep (a successful
 * mutation's: { 'sfs.entries', ID, FIELDS, ... }), so that what reads
 * the outcome sees its results alone.  NULL when it has none; the
 * caller's to pass to own_done. */
redisReply *own_detach(redisReply *rep);

/* A mutation about tenant key @tkey (its id into *@tid, 0 for none) is
 * on its way: its news is left to its caller until own_done.  false
 * when not so noted (no tenant, or no room: the news is then the
 * follower's, as another mount's). */
bool own_begin(struct store *s, const char *tkey, uint64_t *tid);

/* The outcome @rep of the mutation about tenant @tid (NULL: none came)
 * and its own entries @own (own_detach; freed here): each applied when
 * it is the next (mirror_apply_next), the waiters woken, the follower
 * told where the log stands.  When own_begin noted it (@made): unless
 * the mirror has applied the outcome's seq (and the news left to this
 * mount's calls about the tenant, when it was the last) then, the
 * follower reads the log, woken now.  A caller's thread, no lock
 * held. */
void own_done(struct store *s, uint64_t tid, bool made,
	      const redisReply *rep, redisReply *own);

/* News @payload ("SEQ BY [GSEQ]") of tenant @tid's log: none for the
 * follower to read?  True for news of this mount's call on its way
 * (own_begin), unless the store's order says its caller cannot apply
 * it, and for a seq the mirror has applied. */
bool own_news(struct store *s, uint64_t tid, const char *payload);

/* The follower, for news @msg (@len bytes) of tenant @tid's log that
 * carries its entries (redis/lua/call.lua, publish): apply each while
 * it is the next (mirror_apply_next), its position moved past it.
 * Whether all were (else the log is read). */
bool news_apply(struct store *s, uint64_t tid, const char *msg, size_t len);

/* The largest news a follower applies entries from: publish() carries
 * 1024 bytes of values at most, with their names and numbers.  A
 * larger message only says the log grew. */
#define NEWS_MAX 8192

/* The follower, at the start of a round: each log whose own entries a
 * caller applied is read on from the last of them, and each log a
 * caller asked for (own_done) is due. */
void own_catch_up(struct store *s);

/* redis/logread.c */

/* The most entries one read of a log asks for. */
#define FOLLOW_BATCH 512

/* One log's read: its tenant (0: the root) and its XRANGE reply. */
struct lread {
	uint64_t tid;
	redisReply *rep;
};

/* The log key of tenant @tid into @buf (P:{P.tN}:t -> P:{P.tN}:log). */
void follow_log_key(struct store *s, uint64_t tid, char *buf, size_t len);

/* Does tenant @tid's log hold an entry after @id?  1, 0, or -errno. */
int follow_log_has_more(struct store *s, uint64_t tid, const char *id);

/* Read log @key past @id: its XRANGE reply (an array) into *@out.  0,
 * -EIO (no reply: the round ends), -EPROTO (refused: a key of another
 * type; its damage is checked). */
int follow_read_log(struct store *s, const char *key, const char *id,
		    redisReply **out);

/* The store's gseq now (the last number of its order of all tenants
 * taken), or UINT64_MAX when it has none or it could not be read. */
uint64_t follow_store_gseq(struct store *s);

/* Does the follower's round read every log it follows with the store's
 * gseq in one pipeline (follow_read_piped)?  On one Redis with the order
 * of all tenants, while it follows few. */
bool follow_logs_piped(struct store *s);

/*
 * The store's gseq (*@upto, UINT64_MAX when it has none or it did not
 * read) and every log the follower follows, not damaged, past its
 * position, in one pipeline: the gseq read before the first log, as the
 * merge by it wants (redis/follow.c).  Each log read goes in @l (room for
 * every followed log; *@nl of them), its due flag cleared; a log that
 * answered an error is left out with *@damaged set.  0, or -EIO (no
 * reply: nothing read), -ENOMEM, -ECANCELED, -EINVAL (too many logs).
 */
int follow_read_piped(struct store *s, struct lread *l, size_t *nl,
		      uint64_t *upto, bool *damaged);

/* redis/index.c */

/* The follower's positions (its thread's, or before it runs): follow
 * tenant @tid's log from entry @id when not followed yet (0 or
 * -ENOMEM); follow none. */
int follow_pos_add(struct remote *r, uint64_t tid, const char *id);
void follow_pos_clear(struct remote *r);

/* Where tenant @tid's position is, or NULL when its log is not
 * followed. */
struct follow_ix *follow_pos_find(struct remote *r, uint64_t tid);

/* Stop following the log at position @i: the last position takes its
 * place. */
void follow_pos_del(struct remote *r, size_t i);

/* redis/use.c */

/* The table's use, hold and release slots (store_use and friends). */
int remote_use(struct store *s, struct store_node *n);
uint64_t remote_hold(struct store *s, struct store_node *n);
void remote_release(struct store *s, uint64_t token);

/* Tenant @tid is used (a transition waits for its log): followed from
 * now on, loaded first when it is a shell or not yet known.  0, or -EIO
 * when it was not followed within store_timeout and a second. */
int follow_ensure(struct store *s, uint64_t tid);

/* Does the mirror hold a whole copy of the store: every tenant followed
 * (follow_idle=0), or a root .events or .snapshot holding every tenant
 * and no shell left?  Only then can one number of the store's order of
 * all tenants end what it holds (store_root_order).  Takes the mirror's
 * lock: call with none held. */
bool follow_whole(struct store *s);

/* redis/subscribe.c */

/* Wake the follower from its wait (a byte on its pipe), so that a wait
 * for its next round does not wait out BLOCK_MS.  Any thread; lock-free. */
void follow_wake(struct store *s);

/* The follower's pipe (0 or -errno), made once before it starts;
 * closed by subs_free. */
int subs_pipe(struct remote *r);

/* Make the follower's links subscribe the root's channel and each
 * followed tenant's, and no other (the follower's thread).  0, -EIO
 * (a link could not subscribe: read every BLOCK_MS meanwhile),
 * -ECANCELED (stopped). */
int subs_sync(struct store *s);

/* Wait at most @ms for news on a link (the logs named marked due) or a
 * wake-up (the follower's thread).  2 when a caller woke it (news may
 * have come too), 1 when only news came, 0 when the time ran out or
 * nothing but a link's other traffic came, -ECANCELED. */
int subs_wait(struct store *s, unsigned ms);

/*
 * Which logs grew up to a number of the store's order read just before
 * (the follower's thread): a PING on each link with channels, whose
 * reply comes after every message published to it before the PING, and
 * an entry up to that number was published (in its function, with its
 * XADD) before the number was read.  So when it returns 0 a log not
 * marked due holds no entry up to that number past the follower's
 * position.  -EIO when it cannot say (a link lost or refused, channels
 * not all subscribed): read every log.  -ECANCELED (stopped).
 */
int subs_barrier(struct store *s);

/* Mark every followed log due (root first). */
void subs_all_due(struct remote *r);

/* End every link's calls (-ECANCELED), from follow_stop's thread. */
void subs_interrupt(struct remote *r);

/* Close every link (the follower joined) and the pipe. */
void subs_free(struct remote *r);

/* redis/follow.c */

/* The follower: start it (0 or -errno), stop it (no-op when stopped). */
int follow_start(struct store *s);
void follow_stop(struct store *s);

/* redis/ops.c: the shared store's method table (store/engine.h) */
extern const struct store_ops redis_ops;

/* redis/clock.c */
unsigned remote_expire(struct store *s, unsigned budget);
/* store_expire() of a mirror: asks Redis when something is due. */
unsigned remote_expire_due(struct store *s, unsigned budget);
/* -o testclock: the store's clock moved @ms, then what is due expired. */
int remote_clock_move(struct store *s, uint64_t ms);

/* redis/stats.c */
int remote_stats(struct store *s, struct store_node *tenant,
		 struct store_stats *o);
/* .stats: the shared store's counters, or this mount's when unreachable */
int remote_stats_all(struct store *s, struct store_node *tenant,
		     struct store_stats *o);
uint64_t remote_damaged(struct store *s); /* store_stats' damaged */
enum store_link remote_connection(const struct store *s);

/* redis/lock.c: the lock slots of redis_ops (store/engine.h), and the
 * stop of the lock thread (before the pool closes). */
int remote_lock(struct store *s, struct store_node *n,
		const struct store_lock_req *r);
void remote_lock_kick(struct store *s);
int remote_lock_test(struct store *s, struct store_node *n,
		     struct store_lock_req *r);
void remote_lock_drop(struct store *s, struct store_node *n, bool by_owner,
		      uint64_t id);
void remote_lock_stats(struct store *s, struct store_node *tenant,
		       struct store_stats *o);
void remote_locks_stop(struct store *s);

/* redis/stop.c */
void remote_free(struct store *s);
/* The table's close: the shared store, then the mirror, let go of. */
void remote_quiesce(struct store *s);
void remote_close(struct store *s);

#endif /* STATEFS_REDIS_INTERNAL_H */
