/*
 * watch.c - what statefs does when nobody calls in: the threads that act
 * on the store's transitions, started and stopped together.
 *
 * Three threads of fs/, none of them a request handler, none holding a
 * store lock when they call into the kernel, and the store's reaper
 * (store/reaper.c), which fs_watch_start() starts with them (its
 * expiries reach them as any transition does):
 *
 *  - the events thread (fs/events.c) answers parked .events reads and
 *    polls;
 *  - the echo thread (fs/echo.c) replays through the mount each removal
 *    the store made by itself, so inotify watchers see it;
 *  - the inval thread (fs/inval.c) drops from the kernel's caches what
 *    the store changed behind them, and corrects the replies an
 *    invalidation overtook ("Replies in flight").
 *
 * The store's event hook (fs_watch_hook) wakes them after a transition.
 * The echo and inval threads read the log's internal lines only
 * (STORE_EVENTS_INTERNAL readers): the others never make them fall
 * behind, so they sleep until there is work (no timeout: every wake-up
 * they wait for is signalled under watch_lock after what it announces),
 * and the inval thread drops every name (inval_everything) only when an
 * internal line left the log before it read it.  Under -o testclock the
 * clock moves only through .clock, which runs the expiries itself
 * (fs_clock_advance, fs/clock.c).
 *
 * Lock order of fs/: watch_lock, echo_lock, an open file's text_lock
 * (fs.h) and the inode table's lock (fs/inode.h) are never held across
 * a reply or a call into the store that may wait long, and never taken
 * under a store lock (the store calls fs/ only through its hooks, with no
 * lock held).  echo_lock, text_lock and the inode table's lock are
 * leaves; watch_lock is not: the .events readers and the inval thread
 * read the event log under it (store_events_*), so it comes before the
 * log's own mutex, under which the store takes nothing, and the hooks
 * take it (fs_watch_hook, fs_reply_end) holding nothing else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "fs/fs.h"
#include "layout/layout.h"

#define QUIESCE_MS 5000

void fs_watch_init(struct fs *fs)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&fs->watch_lock, NULL);
	pthread_mutex_init(&fs->echo_lock, NULL);
	fs->echo_sock = -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->watch_cond, &ca);
	pthread_cond_init(&fs->echo_cond, &ca);
	pthread_cond_init(&fs->inval_cond, &ca);
	pthread_cond_init(&fs->inval_progress, &ca);
	pthread_condattr_destroy(&ca);
}

void fs_watch_hook(void *arg, bool internal)
{
	struct fs *fs = arg;

	/* Cheap when nobody watches: a transition pays one atomic load. */
	if (!internal && atomic_load(&fs->nwatchers) == 0)
		return;
	pthread_mutex_lock(&fs->watch_lock);
	fs->kicked = true;
	pthread_cond_signal(&fs->watch_cond);
	pthread_cond_signal(&fs->inval_cond);
	if (internal)
		pthread_cond_signal(&fs->echo_cond);
	pthread_mutex_unlock(&fs->watch_lock);
}

/* Start, stop, wait ------------------------------------------------------- */

/*
 * Before the session ends on its own (a drain): let the echo and inval
 * threads finish what the log holds while workers still answer them, so
 * neither is left in the kernel waiting for a reply that will not come.
 * Bounded (QUIESCE_MS): an echo that cannot finish is left to the
 * unmount, which ends its syscall.
 *
 * The inval thread cannot be left so: it writes to the session, and an
 * entry invalidation waits in the kernel for the lock of its directory,
 * which a lookup holds until it is answered.  A lookup that comes late,
 * once the loop has ended, is never answered, and neither the unmount nor
 * the end of the session (whose device the waiting write holds open)
 * would free the thread: it could not be joined, and the daemon would
 * hang.  So it ends here, and is joined while workers still answer.
 */
void fs_watch_quiesce(struct fs *fs)
{
	fs_inval_caught_up(fs, QUIESCE_MS, true);
	pthread_mutex_lock(&fs->watch_lock);
	fs->inval_quit = true;
	pthread_cond_broadcast(&fs->inval_cond);
	pthread_cond_broadcast(&fs->inval_progress);
	pthread_mutex_unlock(&fs->watch_lock);
	fs_inval_join(fs);
}

/* The engine asks the kernel to forget tenant @n (a shared store's
 * mirror stops following a tenant not used for follow_idle): its names
 * dropped by the inval thread.  The root: its .events and .snapshot,
 * which hold every tenant. */
static void forget_tenant(void *arg, struct store_node *n)
{
	struct fs *fs = arg;

	if (store_node_ino(n) != STORE_ROOT_INO) {
		fs_inval_names(fs, n);
		return;
	}
	fs_inval_entry(fs, STORE_ROOT_INO,
		       layout_special_slot(LAYOUT_SLOT_EVENTS)->name);
	fs_inval_entry(fs, STORE_ROOT_INO,
		       layout_special_slot(LAYOUT_SLOT_SNAPSHOT)->name);
}

int fs_watch_start(struct fs *fs)
{
	const unsigned flags = STORE_EVENTS_INTERNAL | STORE_EVENTS_WHOLE_LOG;

	/* Both threads start where the handlers are told they stand.  No
	 * request is served yet and no hook is set: nothing appends between
	 * the two opens. */
	if (store_events_open(fs->store, NULL, NULL, flags,
			      &fs->inval_reader) != 0 ||
	    store_events_open(fs->store, NULL, NULL, flags,
			      &fs->echo_reader) != 0) {
		store_events_close(fs->inval_reader);
		fs->inval_reader = NULL;
		return -ENOMEM;
	}
	fs->inval_seq = store_events_position(fs->inval_reader);
	fs->echo_seq = store_events_position(fs->echo_reader);
	store_set_event_hook(fs->store, fs_watch_hook, fs);
	store_set_attr_hook(fs->store, fs_inval_attrs_changed, fs);
	store_set_touch_hook(fs->store, fs_echo_touched, fs);
	store_set_forget_hook(fs->store, forget_tenant, fs);
	if (store_reaper_start(fs->store) != 0)
		return -EAGAIN;
	if (pthread_create(&fs->events_thread, NULL, fs_events_main, fs)) {
		store_reaper_stop(fs->store);
		return -EAGAIN;
	}
	if (pthread_create(&fs->echo_thread, NULL, fs_echo_main, fs)) {
		fs->threads = true;
		fs_watch_stop(fs);
		fs->threads = false;
		return -EAGAIN;
	}
	if (pthread_create(&fs->inval_thread, NULL, fs_inval_main, fs)) {
		fs->threads = true;
		fs_watch_stop(fs);
		fs_watch_join(fs);
		return -EAGAIN;
	}
	fs->inval_started = true;
	fs->threads = true;
	return 0;
}

void fs_watch_stop(struct fs *fs)
{
	pthread_mutex_lock(&fs->watch_lock);
	fs->stopping = true;
	pthread_cond_broadcast(&fs->watch_cond);
	pthread_cond_broadcast(&fs->echo_cond);
	pthread_cond_broadcast(&fs->inval_cond);
	pthread_mutex_unlock(&fs->watch_lock);
	if (!fs->threads)
		return;
	/* The store's reaper calls the hooks, which notify the kernel
	 * through the session; the events thread answers parked reads: both
	 * go while the session can still carry them. */
	store_reaper_stop(fs->store);
	pthread_join(fs->events_thread, NULL);
}

void fs_watch_join(struct fs *fs)
{
	/* The echo thread may wait in a syscall on the mount: the caller
	 * has closed the session, which ends that syscall. */
	if (fs->threads)
		pthread_join(fs->echo_thread, NULL);
	fs_echo_proc_stop(fs);
	store_events_close(fs->echo_reader);
	fs->echo_reader = NULL;
	fs_echo_untouch(fs);
	fs_inval_join(fs);
	fs->threads = false;
}
