/*
 * test_remote_lock.c - the locks of a shared store (store_lock, store/lock.h;
 * redis/lock.c and redis/lua/lock.lua) through two mounts of one real
 * redis-server, as two hosts: a conflict across mounts and its release,
 * record ranges split by a partial unlock, F_GETLK's holder, a waiter
 * granted after the release from the lock thread and one cancelled
 * (EINTR), the fairness of the queue, a mount that stops (its session
 * expires: its locks go to the other mount's waiter), a session found
 * expired (its holds are forgotten), a removed child (its waiter is told
 * ESTALE) and a damaged lock record (EIO, nothing written).
 */
#define _GNU_SOURCE
#include "tests/unit/unit.h"
#include "tests/unit/redis/redis_fixture.h"
#include "tests/unit/redis/redis_world.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"
#include "store/store.h"

static int setup(void **state)
{
	return world_setup(state, "rlock");
}

/* A mount of the world's store with lock_timeout @ttl_ms, on the test
 * clock as mount()'s (locks are on the real time of their sessions). */
static struct store *mount_lt(struct world *w, uint64_t ttl_ms)
{
	struct store_limits l;
	struct store_remote cfg;
	struct store *s = NULL;
	char err[512];

	store_limits_default(&l);
	l.testclock = true;
	store_remote_default(&cfg);
	cfg.kind = STORE_REMOTE_UNIX;
	snprintf(cfg.path, sizeof(cfg.path), "%s", w->redis.sock);
	cfg.timeout_ms = 20000;
	cfg.lock_timeout_ms = ttl_ms;
	cfg.follow_idle_ms = 0; /* no kernel here to tell it what is used */
	if (redis_store_new(&l, &cfg, &s, err, sizeof(err)) != 0)
		fail_msg("cannot mount: %s", err);
	return s;
}

/* Child t/p/c as mount @s sees it (made by @make), with a reference. */
static struct store_node *child_of(struct store *s, bool make)
{
	const struct store_owner own = { 0, 0, 0755 }, fown = { 0, 0, 0644 };
	struct store_node *t = NULL, *p = NULL, *c = NULL;
	bool created;

	if (make) {
		assert_int_equal(store_mkdir(s, store_root(s), "t", &own, &t), 0);
		assert_int_equal(store_mkdir(s, t, "p", &own, &p), 0);
		assert_int_equal(store_create(s, p, "c", &fown, true, &c,
					      &created), 0);
	} else {
		assert_int_equal(store_sync(s, store_root(s)), 0);
		assert_int_equal(store_lookup(s, store_root(s), "t", &t), 0);
		assert_int_equal(store_sync(s, t), 0);
		assert_int_equal(store_lookup(s, t, "p", &p), 0);
		assert_int_equal(store_lookup(s, p, "c", &c), 0);
	}
	store_node_unref(s, p);
	store_node_unref(s, t);
	return c;
}

static struct store_lock_req req(bool flock, int type, uint64_t start,
				 uint64_t end, uint64_t owner)
{
	return (struct store_lock_req){ .flock = flock, .type = type,
					.start = start, .end = end,
					.owner = owner, .fh = owner, .pid = 100 };
}

/* A waiter's answer, as fs/lock.c's lock_done() gets it. */
struct waited {
	atomic_int rc;      /* 1 until done() */
	atomic_bool cancel;
};

static void waited_done(void *arg, int rc)
{
	struct waited *wt = arg;

	atomic_store(&wt->rc, rc);
}

static void wait_on(struct store_lock_req *r, struct waited *wt)
{
	atomic_init(&wt->rc, 1);
	atomic_init(&wt->cancel, false);
	r->done = waited_done;
	r->arg = wt;
	r->cancel = &wt->cancel;
}

/* The answer of @wt within 20 s (1: none yet). */
static int answer_of(struct waited *wt)
{
	for (int i = 0; i < 2000 && atomic_load(&wt->rc) == 1; i++)
		nap(10);
	return atomic_load(&wt->rc);
}

static uint64_t held_of(struct store *s, bool waiters)
{
	struct store_stats st;

	memset(&st, 0, sizeof(st));
	assert_int_equal(store_stats(s, NULL, &st), 0);
	return waiters ? st.lock_waiters : st.locks_held;
}

static void test_conflict_across_mounts(void **state)
{
	struct world *w = *state;
	struct store *b;
	struct store_node *ca, *cb;
	struct store_lock_req r;

	redisReply *k, *o;

	mount(w, 1024); /* lock_timeout's default */
	b = mount_lt(w, 10000);
	ca = child_of(w->s, true);
	cb = child_of(b, false);
	r = req(true, F_WRLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	assert_int_equal(held_of(w->s, false), 1);
	/* A third client asks sfs_lock_test: the holder, not its own. */
	k = redisCommand(w->redis.rc, "KEYS *:lk:*");
	assert_int_equal(k->elements, 1);
	o = fcall(w, "sfs_lock_test", 1, "statefs:{statefs.t1}:t",
		  strrchr(k->element[0]->str, ':') + 1, "other.0", "9", "9", "f",
		  "r", "0", "0", "0", NULL);
	assert_string_equal(o->element[3]->str, "w");
	assert_string_equal(o->element[7]->str, "");
	freeReplyObject(o);
	freeReplyObject(k);
	r = req(true, F_RDLCK, 0, INT64_MAX, 2);
	assert_int_equal(store_lock(b, cb, &r), -EAGAIN);
	/* Conversion by the holder itself is no conflict. */
	r = req(true, F_RDLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	r = req(true, F_RDLCK, 0, INT64_MAX, 2);
	assert_int_equal(store_lock(b, cb, &r), 0);
	r = req(true, F_UNLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	assert_int_equal(held_of(w->s, false), 0);
	r = req(true, F_WRLCK, 0, INT64_MAX, 2);
	assert_int_equal(store_lock(b, cb, &r), 0);
	/* A close of the open file ends it. */
	store_lock_drop(b, cb, false, 2);
	assert_int_equal(held_of(b, false), 0);
	r = req(true, F_WRLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	store_node_unref(b, cb);
	store_node_unref(w->s, ca);
	store_free(b);
}

static void test_ranges_split_and_getlk(void **state)
{
	struct world *w = *state;
	struct store *b;
	struct store_node *ca, *cb;
	struct store_lock_req r;

	w->s = mount_lt(w, 10000);
	b = mount_lt(w, 10000);
	ca = child_of(w->s, true);
	cb = child_of(b, false);
	r = req(false, F_WRLCK, 0, 99, 7);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	r = req(false, F_UNLCK, 40, 59, 7);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	r = req(false, F_WRLCK, 45, 50, 8);
	assert_int_equal(store_lock(b, cb, &r), 0);
	r = req(false, F_RDLCK, 30, 30, 8);
	assert_int_equal(store_lock(b, cb, &r), -EAGAIN);
	r = req(false, F_RDLCK, 60, 60, 8);
	assert_int_equal(store_lock(b, cb, &r), -EAGAIN);
	/* flock and record locks do not meet. */
	r = req(true, F_WRLCK, 0, INT64_MAX, 8);
	assert_int_equal(store_lock(b, cb, &r), 0);
	/* F_GETLK: the holder's range, no pid from another mount. */
	r = req(false, F_WRLCK, 55, INT64_MAX, 8);
	assert_int_equal(store_lock_test(b, cb, &r), 0);
	assert_int_equal(r.type, F_WRLCK);
	assert_int_equal(r.start, 60);
	assert_int_equal(r.end, 99);
	assert_int_equal(r.pid, 0);
	r = req(false, F_WRLCK, 0, INT64_MAX, 9);
	assert_int_equal(store_lock_test(w->s, ca, &r), 0);
	assert_int_equal(r.pid, 100);
	r = req(false, F_RDLCK, 200, INT64_MAX, 9);
	assert_int_equal(store_lock_test(w->s, ca, &r), 0);
	assert_int_equal(r.type, F_UNLCK);
	/* The owner's close ends its record locks, not its flock. */
	store_lock_drop(b, cb, true, 8);
	r = req(false, F_WRLCK, 45, 50, 7);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	r = req(true, F_RDLCK, 0, INT64_MAX, 7);
	assert_int_equal(store_lock(w->s, ca, &r), -EAGAIN);
	store_node_unref(b, cb);
	store_node_unref(w->s, ca);
	store_free(b);
}

static void test_waiters_granted_cancelled_in_order(void **state)
{
	struct world *w = *state;
	struct store *b;
	struct store_node *ca, *cb;
	struct store_lock_req r, rw, rc;
	struct waited wt, wc;

	w->s = mount_lt(w, 10000);
	b = mount_lt(w, 10000);
	ca = child_of(w->s, true);
	cb = child_of(b, false);
	r = req(true, F_RDLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	rw = req(true, F_WRLCK, 0, INT64_MAX, 2);
	wait_on(&rw, &wt);
	assert_int_equal(store_lock(b, cb, &rw), 1);
	assert_int_equal(held_of(b, true), 1);
	/* A shared newcomer does not overtake the queued writer. */
	r = req(true, F_RDLCK, 0, INT64_MAX, 3);
	assert_int_equal(store_lock(w->s, ca, &r), -EAGAIN);
	/* A second waiter, cancelled (an interrupt): EINTR. */
	rc = req(true, F_WRLCK, 0, INT64_MAX, 4);
	wait_on(&rc, &wc);
	assert_int_equal(store_lock(w->s, ca, &rc), 1);
	atomic_store(&wc.cancel, true);
	store_lock_kick(w->s);
	assert_int_equal(answer_of(&wc), -EINTR);
	assert_int_equal(atomic_load(&wt.rc), 1);
	r = req(true, F_UNLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	assert_int_equal(answer_of(&wt), 0);
	assert_int_equal(held_of(b, true), 0);
	assert_int_equal(held_of(b, false), 1);
	r = req(true, F_RDLCK, 0, INT64_MAX, 3);
	assert_int_equal(store_lock(w->s, ca, &r), -EAGAIN);
	store_node_unref(b, cb);
	store_node_unref(w->s, ca);
	store_free(b);
}

static void test_stopped_mount_loses_its_locks(void **state)
{
	struct world *w = *state;
	struct store *b;
	struct store_node *ca, *cb;
	struct store_lock_req r;
	struct waited wt;

	w->s = mount_lt(w, 10000);
	b = mount_lt(w, 300);
	ca = child_of(w->s, true);
	cb = child_of(b, false);
	r = req(false, F_WRLCK, 0, INT64_MAX, 5);
	assert_int_equal(store_lock(b, cb, &r), 0);
	r = req(false, F_WRLCK, 0, INT64_MAX, 6);
	wait_on(&r, &wt);
	assert_int_equal(store_lock(w->s, ca, &r), 1);
	/* Renewed while the mount lives: still held after its timeout. */
	nap(900);
	assert_int_equal(atomic_load(&wt.rc), 1);
	/* The mount stops without a word: its session expires. */
	store_node_unref(b, cb);
	store_free(b);
	assert_int_equal(answer_of(&wt), 0);
	store_node_unref(w->s, ca);
}

static void test_session_found_expired(void **state)
{
	struct world *w = *state;
	struct store *b;
	struct store_node *ca, *cb;
	struct store_lock_req r;
	redisReply *k;

	w->s = mount_lt(w, 10000);
	b = mount_lt(w, 600);
	ca = child_of(w->s, true);
	cb = child_of(b, false);
	r = req(true, F_WRLCK, 0, INT64_MAX, 5);
	assert_int_equal(store_lock(b, cb, &r), 0);
	assert_int_equal(held_of(b, false), 1);
	/* As if Redis had been out of reach past lock_timeout. */
	k = redisCommand(w->redis.rc, "EVAL %s 0",
			 "for _, k in ipairs(redis.call('KEYS', '*:ls:*')) do "
			 "redis.call('DEL', k) end return 0");
	assert_non_null(k);
	freeReplyObject(k);
	r = req(true, F_WRLCK, 0, INT64_MAX, 6);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	/* The next renewal tells b: its holder's lock is void. */
	for (int i = 0; i < 200 && held_of(b, false) != 0; i++)
		nap(10);
	assert_int_equal(held_of(b, false), 0);
	/* And b's next request is a new session's, refused as any. */
	r = req(true, F_RDLCK, 0, INT64_MAX, 5);
	assert_int_equal(store_lock(b, cb, &r), -EAGAIN);
	store_node_unref(b, cb);
	store_node_unref(w->s, ca);
	store_free(b);
}

static void test_removed_child_and_damage(void **state)
{
	struct world *w = *state;
	struct store *b;
	struct store_node *ca, *cb, *t = NULL, *p = NULL;
	struct store_lock_req r;
	struct waited wt;
	redisReply *k, *d0, *d1;

	w->s = mount_lt(w, 10000);
	b = mount_lt(w, 10000);
	ca = child_of(w->s, true);
	cb = child_of(b, false);
	r = req(true, F_WRLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	/* A damaged record: EIO, nothing written. */
	k = redisCommand(w->redis.rc, "KEYS *:lk:*");
	assert_int_equal(k->elements, 1);
	freeReplyObject(redisCommand(w->redis.rc, "SET %s garbage KEEPTTL",
				     k->element[0]->str));
	d0 = redisCommand(w->redis.rc, "DEBUG DIGEST");
	r = req(true, F_WRLCK, 0, INT64_MAX, 2);
	assert_int_equal(store_lock(b, cb, &r), -EIO);
	d1 = redisCommand(w->redis.rc, "DEBUG DIGEST");
	if (d0->type == REDIS_REPLY_STATUS && d1->type == REDIS_REPLY_STATUS)
		assert_string_equal(d0->str, d1->str);
	freeReplyObject(d0);
	freeReplyObject(d1);
	freeReplyObject(redisCommand(w->redis.rc, "DEL %s", k->element[0]->str));
	freeReplyObject(k);
	r = req(true, F_WRLCK, 0, INT64_MAX, 1);
	assert_int_equal(store_lock(w->s, ca, &r), 0);
	/* A waiter on a child that goes: ESTALE. */
	r = req(true, F_WRLCK, 0, INT64_MAX, 2);
	wait_on(&r, &wt);
	assert_int_equal(store_lock(b, cb, &r), 1);
	assert_int_equal(store_lookup(w->s, store_root(w->s), "t", &t), 0);
	assert_int_equal(store_lookup(w->s, t, "p", &p), 0);
	assert_int_equal(store_unlink(w->s, p, "c"), 0);
	assert_int_equal(answer_of(&wt), -ESTALE);
	/* The holder's close ends the record with it. */
	store_lock_drop(w->s, ca, false, 1);
	k = redisCommand(w->redis.rc, "KEYS *:lk:*");
	assert_int_equal(k->elements, 0);
	freeReplyObject(k);
	store_node_unref(w->s, p);
	store_node_unref(w->s, t);
	store_node_unref(b, cb);
	store_node_unref(w->s, ca);
	store_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_conflict_across_mounts,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ranges_split_and_getlk,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_waiters_granted_cancelled_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stopped_mount_loses_its_locks,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_session_found_expired,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_removed_child_and_damage,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
