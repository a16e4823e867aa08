/*
 * fuse_stub.c - the recording stand-in for libfuse that the fs/ adapter's
 * unit tests (tests/unit/fs/test_*.c) run against: it defines every
 * libfuse function the adapter calls, so the test binaries are not
 * linked with libfuse.
 *
 * Requests are struct fuse_req values the test makes (fuse_stub.h);
 * replies and notifications are appended, in the order the kernel would
 * receive them, to one log (sent[]), and a reply can be held at the
 * point where libfuse would write it to /dev/fuse, so a test can put a
 * store change and its invalidation between the moment a reply was
 * computed and the moment the kernel gets it.  An entry invalidation
 * waits, as the kernel's does, while a lookup holds its directory's lock
 * (dirlock_hold).
 *
 * strdup() is defined here too: the store copies names with it, and a
 * test can make it fail in the inval and echo threads of one filesystem
 * (watched; out of memory there, and only there) for as long as it likes
 * (starve).
 *
 * Locks: sent_lock guards the log, req_lock every request's hold and
 * reply flags, dirlock_mu the directory lock; each a leaf.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "fs/fs.h"
#include "tests/unit/fs/fuse_stub.h"

/* What the kernel was sent ------------------------------------------------ */

struct sent {
	enum sent_kind kind;
	uint64_t dir;               /* SENT_INVAL_ENTRY, SENT_DIRENT */
	uint64_t ino;
	char name[NAME_MAX + 1];
};

#define MAX_SENT 65536
static pthread_mutex_t sent_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sent_cond = PTHREAD_COND_INITIALIZER;
static struct sent sent[MAX_SENT];
static size_t nsent;

static void record(enum sent_kind kind, uint64_t dir, uint64_t ino,
		   const char *name, size_t namelen)
{
	pthread_mutex_lock(&sent_lock);
	if (nsent < MAX_SENT) {
		struct sent *s = &sent[nsent++];

		s->kind = kind;
		s->dir = dir;
		s->ino = ino;
		if (namelen > NAME_MAX)
			namelen = NAME_MAX;
		memcpy(s->name, name ? name : "", name ? namelen : 0);
		s->name[name ? namelen : 0] = '\0';
	}
	pthread_cond_broadcast(&sent_cond);
	pthread_mutex_unlock(&sent_lock);
}

size_t sent_mark(void)
{
	size_t n;

	pthread_mutex_lock(&sent_lock);
	n = nsent;
	pthread_mutex_unlock(&sent_lock);
	return n;
}

/* The index of the first record at or after @from matching (@kind, @dir
 * or 0 for any, @ino or 0 for any, @name or NULL for any), or -1. */
long sent_find(size_t from, enum sent_kind kind, uint64_t dir,
		      uint64_t ino, const char *name)
{
	long at = -1;

	pthread_mutex_lock(&sent_lock);
	for (size_t i = from; i < nsent && at < 0; i++)
		if (sent[i].kind == kind && (!dir || sent[i].dir == dir) &&
		    (!ino || sent[i].ino == ino) &&
		    (!name || strcmp(sent[i].name, name) == 0))
			at = (long)i;
	pthread_mutex_unlock(&sent_lock);
	return at;
}

/* Wait up to @ms for such a record; its index, or -1. */
long sent_wait(size_t from, enum sent_kind kind, uint64_t dir,
		      uint64_t ino, const char *name, long ms)
{
	struct timespec dl;
	long at;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while ((at = sent_find(from, kind, dir, ino, name)) < 0) {
		int rc;

		pthread_mutex_lock(&sent_lock);
		rc = pthread_cond_timedwait(&sent_cond, &sent_lock, &dl);
		pthread_mutex_unlock(&sent_lock);
		if (rc == ETIMEDOUT)
			return sent_find(from, kind, dir, ino, name);
	}
	return at;
}

/* The inode number record @at carries. */
uint64_t sent_ino(long at)
{
	uint64_t ino;

	pthread_mutex_lock(&sent_lock);
	ino = sent[at].ino;
	pthread_mutex_unlock(&sent_lock);
	return ino;
}

/* Requests ---------------------------------------------------------------- */

static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t req_cond = PTHREAD_COND_INITIALIZER;

void req_init(struct fuse_req *r, struct fs *fs)
{
	memset(r, 0, sizeof(*r));
	r->fs = fs;
	r->ctx.pid = 1; /* never the echo thread */
	r->ctx.umask = 022;
}

/* Where libfuse would write the reply: wait here while it is held. */
static void req_deliver(fuse_req_t req)
{
	pthread_mutex_lock(&req_lock);
	if (req->hold) {
		req->held = true;
		pthread_cond_broadcast(&req_cond);
		while (!req->released)
			pthread_cond_wait(&req_cond, &req_lock);
	}
	pthread_mutex_unlock(&req_lock);
}

static void req_done(fuse_req_t req)
{
	pthread_mutex_lock(&req_lock);
	req->replied = true;
	pthread_cond_broadcast(&req_cond);
	pthread_mutex_unlock(&req_lock);
}

/* Wait until @req's reply is computed and held. */
void req_wait_held(struct fuse_req *req)
{
	pthread_mutex_lock(&req_lock);
	while (!req->held)
		pthread_cond_wait(&req_cond, &req_lock);
	pthread_mutex_unlock(&req_lock);
}

/* Let @req's reply go, and wait until it has been written. */
void req_release(struct fuse_req *req)
{
	pthread_mutex_lock(&req_lock);
	req->released = true;
	pthread_cond_broadcast(&req_cond);
	while (!req->replied)
		pthread_cond_wait(&req_cond, &req_lock);
	pthread_mutex_unlock(&req_lock);
}

/* libfuse, as the adapter sees it ------------------------------------------ */

void *fuse_req_userdata(fuse_req_t req)
{
	return req->fs;
}

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
	return &req->ctx;
}

int fuse_req_getgroups(fuse_req_t req, int size, gid_t list[])
{
	(void)req;
	(void)size;
	(void)list;
	return 0;
}

void fuse_req_interrupt_func(fuse_req_t req, fuse_interrupt_func_t func,
			     void *data)
{
	(void)req;
	(void)func;
	(void)data;
}

int fuse_req_interrupted(fuse_req_t req)
{
	(void)req;
	return 0;
}

int fuse_reply_err(fuse_req_t req, int err)
{
	req_deliver(req);
	req->err = err;
	record(SENT_OTHER, 0, 0, NULL, 0);
	req_done(req);
	return 0;
}

void fuse_reply_none(fuse_req_t req)
{
	req_done(req);
}

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	req_deliver(req);
	record(SENT_ENTRY, 0, e->ino, NULL, 0);
	req_done(req);
	return 0;
}

int fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
		      const struct fuse_file_info *fi)
{
	(void)fi;
	req_deliver(req);
	record(SENT_ENTRY, 0, e->ino, NULL, 0);
	req_done(req);
	return 0;
}

int fuse_reply_attr(fuse_req_t req, const struct stat *attr,
		    double attr_timeout)
{
	(void)attr_timeout;
	req_deliver(req);
	record(SENT_ATTR, 0, attr->st_ino, NULL, 0);
	req_done(req);
	return 0;
}

/* A reply that gives the kernel nothing to cache. */
static int reply_other(fuse_req_t req)
{
	req_deliver(req);
	record(SENT_OTHER, 0, 0, NULL, 0);
	req_done(req);
	return 0;
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	(void)fi;
	return reply_other(req);
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
	(void)count;
	return reply_other(req);
}

/* A readdirplus reply carries the entries put in its buffer. */
int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
	req->datalen = size < sizeof(req->data) ? size : sizeof(req->data);
	if (req->datalen)
		memcpy(req->data, buf, req->datalen);
	req_deliver(req);
	for (size_t i = 0; i < req->nents; i++)
		record(SENT_DIRENT, req->dir, req->ents[i].ino, req->ents[i].name,
		       strlen(req->ents[i].name));
	if (!req->nents)
		record(SENT_OTHER, 0, 0, NULL, 0);
	req_done(req);
	return 0;
}

int fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf)
{
	(void)stbuf;
	return reply_other(req);
}

int fuse_reply_xattr(fuse_req_t req, size_t count)
{
	(void)count;
	return reply_other(req);
}

int fuse_reply_poll(fuse_req_t req, unsigned revents)
{
	(void)revents;
	return reply_other(req);
}

int fuse_reply_lock(fuse_req_t req, const struct flock *lock)
{
	(void)lock;
	return reply_other(req);
}

#define DIRENT_SIZE 64

size_t fuse_add_direntry(fuse_req_t req, char *buf, size_t bufsize,
			 const char *name, const struct stat *stbuf, off_t off)
{
	(void)req;
	(void)buf;
	(void)bufsize;
	(void)name;
	(void)stbuf;
	(void)off;
	return DIRENT_SIZE;
}

size_t fuse_add_direntry_plus(fuse_req_t req, char *buf, size_t bufsize,
			      const char *name, const struct fuse_entry_param *e,
			      off_t off)
{
	(void)off;
	if (buf && bufsize >= DIRENT_SIZE && e && e->ino &&
	    req->nents < sizeof(req->ents) / sizeof(req->ents[0])) {
		struct dirent_rec *d = &req->ents[req->nents++];

		snprintf(d->name, sizeof(d->name), "%s", name);
		d->ino = e->ino;
	}
	return DIRENT_SIZE;
}

void fuse_pollhandle_destroy(struct fuse_pollhandle *ph)
{
	(void)ph;
}

int fuse_lowlevel_notify_poll(struct fuse_pollhandle *ph)
{
	(void)ph;
	return 0;
}

int fuse_lowlevel_notify_inval_inode(struct fuse_session *se, fuse_ino_t ino,
				     off_t off, off_t len)
{
	(void)se;
	(void)off;
	(void)len;
	record(SENT_INVAL_INODE, 0, ino, NULL, 0);
	return 0;
}

/*
 * The kernel's lock of a directory, held by a lookup in flight there
 * until the daemon answers it: an entry invalidation in that directory
 * waits for it (fuse_reverse_inval_entry takes it).  0: none held.
 */
static pthread_mutex_t dirlock_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dirlock_cond = PTHREAD_COND_INITIALIZER;
static uint64_t dirlock_held;
bool dirlock_waited;                /* an invalidation waited for it */

void dirlock_hold(uint64_t dir)
{
	pthread_mutex_lock(&dirlock_mu);
	dirlock_held = dir;
	dirlock_waited = false;
	pthread_mutex_unlock(&dirlock_mu);
}

void dirlock_release(void)
{
	pthread_mutex_lock(&dirlock_mu);
	dirlock_held = 0;
	pthread_cond_broadcast(&dirlock_cond);
	pthread_mutex_unlock(&dirlock_mu);
}

int fuse_lowlevel_notify_inval_entry(struct fuse_session *se, fuse_ino_t parent,
				     const char *name, size_t namelen)
{
	(void)se;
	pthread_mutex_lock(&dirlock_mu);
	while (dirlock_held && dirlock_held == parent) {
		dirlock_waited = true;
		pthread_cond_wait(&dirlock_cond, &dirlock_mu);
	}
	pthread_mutex_unlock(&dirlock_mu);
	record(SENT_INVAL_ENTRY, parent, 0, name, namelen);
	return 0;
}

/* Memory that runs out in the watch threads ---------------------------------- */

struct fs *watched;                 /* whose threads starve */
atomic_bool starve;                 /* strdup fails in them */

static bool in_watch_thread(void)
{
	pthread_t self = pthread_self();

	return watched && (pthread_equal(self, watched->inval_thread) ||
			   pthread_equal(self, watched->echo_thread));
}

char *strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d;

	if (atomic_load(&starve) && in_watch_thread()) {
		errno = ENOMEM;
		return NULL;
	}
	d = malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}
