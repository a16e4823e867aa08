/*
 * fs.h - the libfuse3 low-level adapter of statefs.
 *
 * fs/ops.c translates each FUSE request into store/ calls through the
 * layout/ rules and replies exactly once; fs/main.c parses options, makes
 * the store and runs the session.  Nothing here holds a store lock.
 */
#ifndef STATEFS_FS_H
#define STATEFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "store/store.h"

/* The filesystem's state: one per mount, the session's userdata. */
struct fs {
	struct store *store;
	uid_t mount_uid; /* may drain the root (later) */
};

/* The low-level operations table. */
extern const struct fuse_lowlevel_ops fs_ops;

#endif /* STATEFS_FS_H */
