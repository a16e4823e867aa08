/*
 * echo_call.c - the echo's system calls on the mount, made by a process
 * of their own.
 *
 * A daemon that makes system calls on its own mount can hang it for
 * good.  Killed (SIGKILL) while one of its threads waits for the answer
 * to such a call, which a worker had already read, that thread waits on
 * uninterruptibly; the process never finishes exiting, so its /dev/fuse
 * descriptor is never closed and the kernel never aborts the connection:
 * every process that touches the mount hangs with it.  So the echo
 * thread (fs/echo.c) makes none: a child process makes them, holding no
 * descriptor of the daemon's.  When the daemon dies its descriptor
 * closes, the kernel aborts the connection, the child's call returns
 * (ENOTCONN), and the child, which dies with the echo thread
 * (PR_SET_PDEATHSIG), goes too.
 *
 * The echo thread sends one request at a time over a socket pair and
 * waits for the answer.  The child is a fork of a threaded process: it
 * makes system calls only (no allocation, no stdio).  Its requests reach
 * the daemon with its pid, which is how fs/echo.c knows them.
 *
 * No lock: the socket is the echo thread's alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs/fs.h"

#define FUSE_SUPER_MAGIC 0x65735546

/*
 * The root of this mount, for one request.  No descriptor is kept
 * between requests: an open one would make `fusermount3 -u` fail with
 * EBUSY.  After an unmount the path names the directory underneath, so
 * the root must be a FUSE root (inode 1) on the device seen first.
 */
static int mount_root(const char *mountpoint, dev_t *dev)
{
	struct statfs sf;
	struct stat st;
	int fd = open(mountpoint, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstatfs(fd, &sf) != 0 || sf.f_type != FUSE_SUPER_MAGIC ||
	    fstat(fd, &st) != 0 || st.st_ino != STORE_ROOT_INO ||
	    (*dev && st.st_dev != *dev)) {
		close(fd);
		return -1;
	}
	*dev = st.st_dev;
	return fd;
}

/* The inode number the kernel holds under @path, without asking the
 * daemon for attributes (a name it does not hold is looked up); 0: none. */
static uint64_t held_ino(int rootfd, const char *path)
{
	struct statx stx;

	if (statx(rootfd, path, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
		  STATX_INO, &stx) != 0)
		return 0;
	return stx.stx_ino;
}

/* Make request @rq under @rootfd: 0 or an errno. */
static int call(int rootfd, const struct fs_echo_req *rq)
{
	int fd, rc = 0;

	switch (rq->op) {
	case FS_ECALL_UNLINK:
	case FS_ECALL_RMDIR:
		if (held_ino(rootfd, rq->path) != rq->ino)
			return ENOENT;
		rc = unlinkat(rootfd, rq->path,
			      rq->op == FS_ECALL_RMDIR ? AT_REMOVEDIR : 0);
		break;
	case FS_ECALL_MKDIR:
	case FS_ECALL_CREATE:
	case FS_ECALL_LINK:
		/* A name the kernel shows already cannot appear again. */
		if (held_ino(rootfd, rq->path))
			return EEXIST;
		if (rq->op == FS_ECALL_MKDIR) {
			rc = mkdirat(rootfd, rq->path, 0755);
		} else if (rq->op == FS_ECALL_LINK) {
			rc = linkat(rootfd, rq->from, rootfd, rq->path, 0);
		} else {
			fd = openat(rootfd, rq->path, O_CREAT | O_EXCL | O_RDONLY |
				    O_CLOEXEC | O_NOFOLLOW, 0644);
			rc = fd < 0 ? -1 : close(fd);
		}
		break;
	case FS_ECALL_RENAME:
		rc = renameat(rootfd, rq->from, rootfd, rq->path);
		break;
	case FS_ECALL_EXCHANGE:
		rc = renameat2(rootfd, rq->from, rootfd, rq->path,
			       RENAME_EXCHANGE);
		break;
	case FS_ECALL_PUBLISH:
		fd = openat(rootfd, rq->path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return errno;
		/* Answered and dropped: a write the kernel counts (MODIFY),
		 * then the close (CLOSE_WRITE). */
		if (pwrite(fd, "", 1, 0) < 0)
			rc = -1;
		close(fd);
		break;
	case FS_ECALL_CHMOD:
		if (held_ino(rootfd, rq->path) != rq->ino)
			return ENOENT;
		rc = fchmodat(rootfd, rq->path, rq->mode, 0);
		break;
	default:
		return EINVAL;
	}
	return rc < 0 ? errno : 0;
}

/* The child: answer requests on @sock until it closes. */
static void __attribute__((noreturn)) child_main(int sock, const char *mountpoint,
						  pid_t parent)
{
	struct fs_echo_req rq;
	dev_t dev = 0;
	int null;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(0);
	/* Nothing of the daemon's: not its /dev/fuse descriptor, above
	 * all.  The socket becomes descriptor 3. */
	if (sock != 3) {
		if (dup2(sock, 3) < 0)
			_exit(1);
		sock = 3;
	}
	close_range(4, ~0U, 0);
	null = open("/dev/null", O_RDWR);
	if (null < 0)
		_exit(1);
	dup2(null, 0);
	dup2(null, 1);
	dup2(null, 2);
	close(null);
	for (;;) {
		ssize_t n = recv(sock, &rq, sizeof(rq), 0);
		int rc = EBADF, rootfd;

		if (n != (ssize_t)sizeof(rq))
			_exit(0);
		rq.path[sizeof(rq.path) - 1] = rq.from[sizeof(rq.from) - 1] = '\0';
		rootfd = mount_root(mountpoint, &dev);
		if (rootfd >= 0) {
			rc = call(rootfd, &rq);
			close(rootfd);
		}
		if (send(sock, &rc, sizeof(rc), MSG_NOSIGNAL) != sizeof(rc))
			_exit(0);
	}
}

int fs_echo_proc_start(struct fs *fs)
{
	int sv[2];
	pid_t parent = getpid(), pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -EAGAIN;
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(sv[1], fs->mountpoint, parent);
	}
	close(sv[1]);
	fs->echo_sock = sv[0];
	fs->echo_pid = pid;
	atomic_store(&fs->echo_tid, pid);
	return 0;
}

int fs_echo_proc_call(struct fs *fs, const struct fs_echo_req *rq)
{
	int rc;

	if (fs->echo_sock < 0)
		return -EPIPE;
	if (send(fs->echo_sock, rq, sizeof(*rq), MSG_NOSIGNAL) != sizeof(*rq))
		return -EPIPE;
	/* Its call ends when the daemon answers, or when the session is
	 * gone (ENOTCONN). */
	for (;;) {
		ssize_t n = recv(fs->echo_sock, &rc, sizeof(rc), 0);

		if (n == (ssize_t)sizeof(rc))
			return -rc;
		if (n < 0 && errno == EINTR)
			continue;
		return -EPIPE;
	}
}

void fs_echo_proc_stop(struct fs *fs)
{
	if (fs->echo_pid <= 0)
		return;
	close(fs->echo_sock);
	fs->echo_sock = -1;
	kill(fs->echo_pid, SIGKILL);
	while (waitpid(fs->echo_pid, NULL, 0) < 0 && errno == EINTR)
		;
	fs->echo_pid = 0;
}
