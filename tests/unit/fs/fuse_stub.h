/*
 * fuse_stub.h - what the tests of tests/unit/fs/ see of the libfuse stand-in
 * (tests/unit/fs/fuse_stub.c): the log of what the kernel was sent, the
 * requests a test makes and holds, the kernel's directory lock, and the
 * memory that runs out in the watch threads.
 */
#ifndef STATEFS_FUSE_STUB_H
#define STATEFS_FUSE_STUB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fs.h"

/* What the kernel was sent ------------------------------------------------ */

enum sent_kind {
	SENT_ENTRY,        /* an entry reply (lookup, mkdir, create, ...) */
	SENT_DIRENT,       /* one entry of a readdirplus reply */
	SENT_ATTR,         /* an attribute reply */
	SENT_INVAL_ENTRY,  /* notify_inval_entry(dir, name) */
	SENT_INVAL_INODE,  /* notify_inval_inode(ino) */
	SENT_OTHER,        /* any other reply */
};

/* The number of records so far: a mark to look after. */
size_t sent_mark(void);
/* The index of the first record at or after @from matching (@kind, @dir
 * or 0 for any, @ino or 0 for any, @name or NULL for any), or -1. */
long sent_find(size_t from, enum sent_kind kind, uint64_t dir,
	       uint64_t ino, const char *name);
/* Wait up to @ms for such a record; its index, or -1. */
long sent_wait(size_t from, enum sent_kind kind, uint64_t dir,
	       uint64_t ino, const char *name, long ms);
/* The inode number record @at carries. */
uint64_t sent_ino(long at);

/* Requests ---------------------------------------------------------------- */

struct dirent_rec {
	char name[NAME_MAX + 1];
	uint64_t ino;
};

struct fuse_req {
	struct fs *fs;
	struct fuse_ctx ctx;
	uint64_t dir;               /* readdirplus: the directory listed */
	struct dirent_rec ents[64]; /* readdirplus: entries put in the buffer */
	size_t nents;
	bool hold;                  /* the reply waits for req_release() */
	bool held, released, replied;
	int err;                    /* fuse_reply_err's */
	char data[128];             /* fuse_reply_buf's bytes (the start) */
	size_t datalen;
};

/* A request from pid 1 (never the echo thread) to @fs, umask 022. */
void req_init(struct fuse_req *r, struct fs *fs);
/* Wait until @req's reply is computed and held (r->hold set). */
void req_wait_held(struct fuse_req *req);
/* Let @req's reply go, and wait until it has been written. */
void req_release(struct fuse_req *req);

/* The kernel's lock of a directory ------------------------------------------ */

/* A lookup in flight holds directory @dir: an entry invalidation there
 * waits until dirlock_release(), and sets dirlock_waited. */
void dirlock_hold(uint64_t dir);
void dirlock_release(void);
extern bool dirlock_waited;

/* Memory that runs out in the watch threads ---------------------------------- */

/* While starve is set, strdup() fails in the inval and echo threads of
 * watched (NULL: none). */
extern struct fs *watched;
extern atomic_bool starve;

#endif /* STATEFS_FUSE_STUB_H */
