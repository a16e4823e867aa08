/*
 * open.c - open: the open file a node's kind makes, each kind with its
 * own fs_file_ops, as the kernel's open sets file->f_op from the inode.
 *
 * The echo thread's open of a published child is answered first
 * (fs_echo_open, fs/echo_answer.c: an open file that stages nothing);
 * then a special file opens as fs/special.c says (its text, its stream
 * for .events, fs/events.c), a child as a stage (fs/stage.c), and a
 * directory is EISDIR (opendir is fs/dir.c's).  Whatever the kind, the
 * open file is fi->fh, and fs/file.c's handlers call its operations.
 * create makes a child's open file itself (fs/entry.c).
 *
 * Owns no state and takes no lock.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "fs/fs.h"

/* open(2) of @ino: the open file of its kind as fi->fh, replied to with
 * fuse_reply_open; ESTALE for a node gone, EISDIR for a directory. */
void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct store_node *n;
	int rc;

	if (fs_echo_open(req, fs, ino, fi))
		return;
	n = node_get(req, ino, &rc);
	if (!n)
		; /* node_get's answer */
	else if (store_node_kind(n) == STORE_SPECIAL)
		rc = fs_special_open(req, fs, n, fi->flags, fi);
	else if (store_node_kind(n) == STORE_CHILD)
		rc = fs_stage_open(req, fs, n, fi);
	else
		rc = -EISDIR;
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_open(req, fi);
	node_put(fs, n);
}
