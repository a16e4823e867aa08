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
 * The echo's calls must never keep the mount busy either: a
 * `fusermount3 -u` or umount(8) of the user's mount fails with EBUSY
 * while any process holds a reference to that mount (an open
 * descriptor, a working directory, or a system call under way on it:
 * path lookups pin it while they run), and a burst of another mount's
 * changes keeps the echo making calls back to back.  So the child does
 * not work through the user's mount at all: at its start it clones it
 * (open_tree(OPEN_TREE_CLONE): a detached mount of the same superblock,
 * in no namespace, held by one descriptor) and makes every call below
 * that clone.  inotify watches are on inodes, so the user's watchers see
 * the echo's events all the same; the user's unmount meets only its own
 * mount.  The clone keeps the superblock alive, so the child also
 * watches the mount table (/proc/self/mountinfo, POLLPRI on a change):
 * once no mount of the superblock is left in the daemon's namespace it
 * exits, the superblock goes with its clone, and the daemon's session
 * ends as it would have with the unmount.  Cloning needs CAP_SYS_ADMIN;
 * a daemon without it clones in a user namespace of a passing helper
 * (clone_unprivileged()), and where neither works (no user namespaces)
 * the child opens the mountpoint for each request, as before, and an
 * unmount during an echo may be refused with EBUSY.
 *
 * The echo thread sends one request at a time over a socket pair and
 * waits for the answer.  The child is a fork of a threaded process: it
 * makes system calls only (no allocation, no stdio).  Its requests reach
 * the daemon with its pid, which is how fs/echo_answer.c knows them.
 *
 * No lock: the socket is the echo thread's alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs/fs.h"

#define FUSE_SUPER_MAGIC 0x65735546

/*
 * Is @fd the root of a FUSE mount (inode 1), of device *@dev when that is
 * set?  Sets *@dev.  Closes @fd and returns -1 when not.
 */
static int fuse_root(int fd, dev_t *dev)
{
	struct statfs sf;
	struct stat st;

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

/*
 * The root of this mount, for one request, when there is no clone.  No
 * descriptor is kept between requests: an open one would make
 * `fusermount3 -u` fail with EBUSY.  After an unmount the path names the
 * directory underneath, so the root must be a FUSE root (inode 1) on the
 * device seen first.
 */
static int mount_root(const char *mountpoint, dev_t *dev)
{
	return fuse_root(open(mountpoint, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			      O_CLOEXEC), dev);
}

static int clone_tree(const char *mountpoint)
{
	return open_tree(AT_FDCWD, mountpoint, OPEN_TREE_CLONE |
			 OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
}

/*
 * A clone of the mount made without CAP_SYS_ADMIN: a helper process
 * takes a user namespace and a mount namespace of its own (a copy of the
 * daemon's, where it may clone), clones the mount there, passes the
 * descriptor back and exits, so its copy of every other mount goes with
 * it; the clone lives on in no namespace.  -1 when it cannot.
 */
static int clone_unprivileged(const char *mountpoint)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte = 0;
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int sv[2], fd = -1;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 &&
		    (fd = clone_tree(mountpoint)) >= 0) {
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &fd, sizeof(int));
			(void)sendmsg(sv[1], &mh, MSG_NOSIGNAL);
		}
		_exit(0);
	}
	close(sv[1]);
	if (pid > 0) {
		/* The helper exits at once, having sent the clone or not. */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (recvmsg(sv[0], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == 1 &&
		    (cm = CMSG_FIRSTHDR(&mh)) != NULL &&
		    cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	}
	close(sv[0]);
	return fd;
}

/* @v in decimal into @p (no stdio in the child); returns the end. */
static char *put_u(char *p, unsigned v)
{
	char tmp[12];
	int n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/*
 * Does the daemon's mount namespace still hold a mount of device @dev?
 * Reads @mi (/proc/self/mountinfo) from its start and looks for a line
 * whose third field is MAJOR:MINOR.  A read that fails says yes: the
 * child never leaves a mount it cannot tell is gone.
 */
static bool still_mounted(int mi, dev_t dev)
{
	char want[32], buf[4096], *e = want;
	size_t wl, pos = 0;
	unsigned field = 0;
	bool same = true;
	ssize_t n;

	e = put_u(e, major(dev));
	*e++ = ':';
	e = put_u(e, minor(dev));
	wl = (size_t)(e - want);
	if (lseek(mi, 0, SEEK_SET) != 0)
		return true;
	while ((n = read(mi, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			char c = buf[i];

			if (c == '\n') {
				field = 0;
				pos = 0;
				same = true;
			} else if (field < 2) {
				field += c == ' ';
			} else if (field == 2 && c == ' ') {
				if (same && pos == wl)
					return true;
				field++;
			} else if (field == 2) {
				same = same && pos < wl && want[pos] == c;
				pos++;
			}
		}
	}
	return n < 0;
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
	int null, clone, mi = -1;

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
	/* The daemon mounted before it started the echo: the mountpoint is
	 * this mount's root. */
	clone = clone_tree(mountpoint);
	if (clone < 0)
		clone = clone_unprivileged(mountpoint);
	clone = fuse_root(clone, &dev);
	if (clone >= 0)
		mi = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (clone >= 0 && mi < 0) {
		/* It could never tell the mount is gone: no clone. */
		close(clone);
		clone = -1;
	}
	if (mi >= 0 && !still_mounted(mi, dev))
		_exit(0);
	for (;;) {
		struct pollfd pf[2] = { { .fd = sock, .events = POLLIN },
					{ .fd = mi, .events = POLLPRI } };
		ssize_t n;
		int rc = EBADF, rootfd;

		while (poll(pf, mi >= 0 ? 2 : 1, -1) < 0)
			if (errno != EINTR)
				_exit(1);
		/* The mount table changed: is the user's mount gone?  Then
		 * the clone goes, and with it the superblock. */
		if (mi >= 0 && (pf[1].revents & (POLLPRI | POLLERR)) &&
		    !still_mounted(mi, dev) && !still_mounted(mi, dev))
			_exit(0);
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(sock, &rq, sizeof(rq), 0);
		if (n != (ssize_t)sizeof(rq))
			_exit(0);
		rq.path[sizeof(rq.path) - 1] = rq.from[sizeof(rq.from) - 1] = '\0';
		rootfd = clone >= 0 ? clone : mount_root(mountpoint, &dev);
		if (rootfd >= 0) {
			rc = call(rootfd, &rq);
			if (rootfd != clone)
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
