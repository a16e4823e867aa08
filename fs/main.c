/*
 * main.c - statefs [FUSE options] [-o statefs options] [SOURCE] MNT
 *
 * Parses the statefs options (layout/), refuses a bad one with a one-line
 * message before anything is mounted, makes a fresh store instance and
 * runs the multi-threaded FUSE session until unmount or a signal.
 *
 * With -o store=URL (or a SOURCE with ':'), the mount is a mirror of a
 * shared store (redis_store_new): several mounts, on several hosts,
 * share its state.  A limit that differs from the store's refuses the
 * mount with one line naming the option.
 *
 * SOURCE is what mount(8) and mount.fuse3 pass before the mountpoint
 * (an fstab line's first field): it names the store (layout_source) and
 * becomes the mount's source in /proc/mounts.  Under systemd
 * (Type=notify) the daemon reports READY=1 once the mount is live and
 * STOPPING=1 when it starts to drain or the mount is gone.
 *
 * Without -f the daemon goes to the background before it makes the store
 * (a shared store's follower is a thread, and a fork keeps only the
 * thread that forks); the command waits until the mount is live and
 * exits 0, or with 1 once the daemon failed (its message on the
 * command's stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>

#include "fs/fs.h"
#include "layout/layout.h"

/*
 * A shared mmap of a child.  Children are opened with direct I/O (every
 * read and write reaches the store: fs/stage.c), and the kernel refuses
 * MAP_SHARED of a direct-I/O file (ENODEV) unless the filesystem set
 * FUSE_DIRECT_IO_ALLOW_MMAP in its INIT reply (Linux 6.6, protocol
 * 7.39).  A libfuse that knows the flag asks for it in fs_init; the
 * libfuse 3.14 of Debian 12 cannot, so the session then reads and writes
 * /dev/fuse through devio_read() and devio_writev(), which add that one
 * flag to the INIT reply when the kernel offered it, and change nothing
 * else.  Reads stay direct; a mapping's pages come from the page cache,
 * filled by reads of the mapping's open file, and the kernel drops that
 * cache at every new mmap, so a new mapping sees the newest publication.
 */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
#ifndef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
static _Atomic uint64_t devio_init_unique; /* the INIT request's */
static atomic_bool devio_init_offered;      /* ... and it offers the flag */

static ssize_t devio_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *h = buf;
	const struct fuse_init_in *in = (const void *)(h + 1);

	(void)userdata;
	if (n >= (ssize_t)(sizeof(*h) + offsetof(struct fuse_init_in, unused)) &&
	    h->opcode == FUSE_INIT) {
		atomic_store(&devio_init_offered,
			     (in->flags & FUSE_INIT_EXT) &&
			     (in->flags2 & (FUSE_DIRECT_IO_ALLOW_MMAP >> 32)));
		atomic_store(&devio_init_unique, h->unique);
	}
	return n;
}

static ssize_t devio_writev(int fd, struct iovec *iov, int count,
			    void *userdata)
{
	const struct fuse_out_header *h = iov[0].iov_base;
	uint64_t u = atomic_load(&devio_init_unique);
	union {
		struct fuse_init_out o;
		char b[256];
	} out;
	struct iovec v[2];

	(void)userdata;
	if (u && count == 2 && iov[0].iov_len == sizeof(*h) &&
	    h->unique == u && h->error == 0 &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, unused) &&
	    iov[1].iov_len <= sizeof(out) &&
	    atomic_exchange(&devio_init_unique, 0) == u) {
		memcpy(out.b, iov[1].iov_base, iov[1].iov_len);
		if (atomic_load(&devio_init_offered) &&
		    (out.o.flags & FUSE_INIT_EXT))
			out.o.flags2 |= (uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >> 32);
		v[0] = iov[0];
		v[1].iov_base = out.b;
		v[1].iov_len = iov[1].iov_len;
		return writev(fd, v, 2);
	}
	return writev(fd, iov, count);
}

/* Splicing stays as libfuse would do it without these functions. */
static ssize_t devio_splice(int fdin, off_t *offin, int fdout, off_t *offout,
			    size_t len, unsigned int flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

static const struct fuse_custom_io devio = {
	.read = devio_read,
	.writev = devio_writev,
	.splice_receive = devio_splice,
	.splice_send = devio_splice,
};
#endif

struct parse {
	struct store_limits limits;     /* the store's options */
	struct layout_mount mount;      /* the adapter's (cache_timeout) */
	struct store_remote remote;     /* -o store=URL and store_* */
	bool default_permissions;       /* -o default_permissions */
	char *arg[2];                   /* [SOURCE] MNT, as given */
	int nargs;
	int bad;
};

/* fuse_opt_parse callback: apply statefs options, keep the rest. */
static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse *p = data;
	char err[256];
	int rc;

	(void)outargs;
	/* The positional arguments: main() decides which is which. */
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (p->nargs == 2) {
			fprintf(stderr, "statefs: too many arguments: '%s' "
				"(statefs [options] [SOURCE] MOUNTPOINT)\n", arg);
			p->bad = 1;
			return -1;
		}
		p->arg[p->nargs] = strdup(arg);
		if (!p->arg[p->nargs])
			return -1;
		p->nargs++;
		return 0;
	}
	if (key != FUSE_OPT_KEY_OPT || arg[0] == '-')
		return 1;
	/* The kernel's option; statefs needs to know it too (fs.h). */
	if (strcmp(arg, "default_permissions") == 0) {
		p->default_permissions = true;
		return 1;
	}
	/* First: the rest of a sentinel:// list split at a comma is its. */
	rc = layout_remote_option(&p->remote, arg, err, sizeof(err));
	if (rc == 0)
		rc = layout_mount_option(&p->mount, arg, err, sizeof(err));
	if (rc == 0)
		rc = layout_option(&p->limits, arg, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "%s\n", err);
		p->bad = 1;
		return -1;
	}
	return rc == 1 ? 0 : 1;
}

/*
 * SIGTERM, SIGINT and SIGHUP: drain the whole store, then end the
 * session.  A second signal ends the drain window at once.  A shared
 * store is not drained: it is the other mounts' too.  The mount ends its
 * session at once and unmounts, and leaves the state to them (a file
 * still open loses what it has not published).  The signals
 * are blocked in every thread and taken here with sigwait, so no handler
 * runs in a request thread.
 *
 * This thread uses the session (a drain's clear sends notifications
 * through it, and fuse_session_exit), so main() joins it before the
 * session is destroyed.  It therefore never waits for anything only the
 * end of the session could end: it wakes the loop with a signal to the
 * loop's thread (sem_wait or read(2) there returns EINTR, and the loop
 * sees the session has exited), never with a request on the mount that no
 * worker might be left to answer.
 */
struct sigctl {
	struct fs *fs;
	sigset_t set;
	pthread_t thread;
	pthread_t loop_thread; /* runs the session loop: main() */
	int wake;              /* the signal that wakes it (WAKE_SIGNAL) */
	atomic_bool stop;      /* the loop has returned */
	atomic_bool drained;   /* the session ended through a drain */
};

/* Its handler does nothing: delivered without SA_RESTART, it only makes
 * the loop thread's wait return. */
#define WAKE_SIGNAL (SIGRTMIN + 1)

static void wake_handler(int sig)
{
	(void)sig;
}

static void *signal_main(void *arg)
{
	struct sigctl *sc = arg;
	const struct timespec tick = { 0, 50 * 1000 * 1000 };
	int signals = 0;

	while (!atomic_load(&sc->stop)) {
		int sig = sigtimedwait(&sc->set, NULL, &tick);

		if (sig > 0 && store_is_shared(sc->fs->store)) {
			sd_notifyf(0, "STOPPING=1\nSTATUS=leaving the shared "
				   "store (signal %d): %s unmounts", sig,
				   sc->fs->mountpoint);
			goto leave;
		}
		if (sig > 0 && ++signals == 1) {
			store_drain(sc->fs->store, NULL);
			sd_notifyf(0, "STOPPING=1\nSTATUS=draining (signal %d): "
				   "%s unmounts when the store is drained",
				   sig, sc->fs->mountpoint);
		} else if (sig > 0)
			store_drain_now(sc->fs->store, NULL);
		if (signals == 0 ||
		    store_drain_state(sc->fs->store, NULL, NULL) != STORE_DRAINED)
			continue;
		/* Drained: end the loop.  A wake-up sent before the loop
		 * thread waits is lost, so it is sent again until the loop
		 * has returned. */
leave:
		fs_watch_quiesce(sc->fs);
		atomic_store(&sc->drained, true);
		fuse_session_exit(sc->fs->se);
		while (!atomic_load(&sc->stop)) {
			pthread_kill(sc->loop_thread, sc->wake);
			nanosleep(&tick, NULL);
		}
		break;
	}
	return NULL;
}

/*
 * [SOURCE] MNT: put the mountpoint back where fuse_parse_cmdline finds
 * it, and turn SOURCE into what it stands for (layout_source): a statefs
 * option, if any, and the mount's source name (-o fsname=SOURCE, with
 * subtype=statefs so that the type stays fuse.statefs).  They go first
 * on the command line, so an explicit -o fsname= or subtype= wins.
 * 0, or -1 after a one-line message.
 */
static int apply_args(struct parse *p, struct fuse_args *args)
{
	const char *source = p->nargs == 2 ? p->arg[0] : NULL;
	char opt[1024], err[1024], fsname[16 + NAME_MAX];
	char *mo = NULL;
	int rc;

	if (p->nargs > 0 && fuse_opt_add_arg(args, p->arg[p->nargs - 1]) != 0)
		return -1;
	if (!source)
		return 0;
	rc = layout_source(source, opt, sizeof(opt), err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	/* A source that stands for an option is applied as -o would be. */
	if (rc == 1) {
		rc = opt_proc(p, opt, FUSE_OPT_KEY_OPT, args);
		if (rc < 0 || (rc == 1 && (fuse_opt_add_arg(args, "-o") != 0 ||
					   fuse_opt_add_arg(args, opt) != 0)))
			return -1;
	}
	/* layout_source took at most NAME_MAX bytes. */
	snprintf(fsname, sizeof(fsname), "fsname=%s", source);
	rc = -1;
	if (fuse_opt_add_opt(&mo, "subtype=statefs") == 0 &&
	    fuse_opt_add_opt_escaped(&mo, fsname) == 0 &&
	    fuse_opt_insert_arg(args, 1, "-o") == 0 &&
	    fuse_opt_insert_arg(args, 2, mo) == 0)
		rc = 0;
	free(mo);
	return rc;
}

/*
 * Background start: fork before anything makes a thread.  The command
 * (the parent) waits for the daemon's word on a pipe, @fd: one byte, 0
 * once the mount is live (background_ready), or the pipe closed when it
 * failed before that.  Returns the daemon's end of the pipe, or -1.
 */
static int background_begin(void)
{
	char status = 1;
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid > 0) {
		int st;

		close(p[1]);
		if (read(p[0], &status, 1) != 1) {
			/* It failed: it exits, and is reaped here. */
			status = 1;
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
		}
		_exit(status);
	}
	close(p[0]);
	(void)setsid();
	return p[1];
}

/* The mount is live: the command may exit 0; the daemon lets go of the
 * terminal and of the directory it started in, as a daemon does. */
static void background_ready(int fd)
{
	char ok = 0;
	int null;

	if (fd < 0)
		return;
	if (chdir("/") != 0)
		(void)0; /* "/" is always there; nothing depends on it */
	null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	(void)!write(fd, &ok, 1);
	close(fd);
}

/* Print @text folded at spaces into lines of at most 72 columns. */
static void print_folded(const char *text)
{
	size_t col = 0;

	while (*text) {
		size_t w = strcspn(text, " ");

		if (col && col + 1 + w > 72) {
			putchar('\n');
			col = 0;
		} else if (col) {
			putchar(' ');
			col++;
		}
		fwrite(text, 1, w, stdout);
		col += w;
		text += w + strspn(text + w, " ");
	}
	putchar('\n');
}

static void usage(const char *prog)
{
	printf("usage: %s [options] [SOURCE] MOUNTPOINT\n\n", prog);
	print_folded("statefs keeps live coordination state in memory and shows "
		     "it as files: MOUNTPOINT/TENANT/PARENT/CHILD.  SOURCE names "
		     "the store: none (the default), or any other "
		     LAYOUT_SOURCE_RULE ", is the embedded store, which the "
		     "mount shows as its source; an address (redis://HOST:PORT, "
		     "unix:/PATH, sentinel://...) is a shared store, as -o "
		     "store=.  See statefs(8).");
	printf("\n");
	layout_help(stdout);
	printf("\n");
	layout_remote_help(stdout);
	printf("\nFUSE options:\n");
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = { 0 };
	struct fuse_loop_config *loop = NULL;
	struct fuse_session *se = NULL;
	struct parse p = { 0 };
	struct fs fs = { 0 };
	struct store_attr root = { 0 };
	struct store_clock clock = { 0 };
	struct sigctl sc = { 0 };
	char err[256];
	int bg = -1;
	int rc = 1;

	store_limits_default(&p.limits);
	layout_mount_default(&p.mount);
	store_remote_default(&p.remote);
	if (fuse_opt_parse(&args, &p, NULL, opt_proc) != 0) {
		if (!p.bad)
			fprintf(stderr, "statefs: cannot parse the options\n");
		goto out;
	}
	if (apply_args(&p, &args) != 0)
		goto out;
	if (fuse_parse_cmdline(&args, &opts) != 0)
		goto out;
	if (opts.show_help) {
		usage(argv[0]);
		rc = 0;
		goto out;
	}
	if (opts.show_version) {
		printf("statefs 0.1, FUSE library %s\n", fuse_pkgversion());
		rc = 0;
		goto out;
	}
	if (!opts.mountpoint) {
		fprintf(stderr, "statefs: no mountpoint (see %s --help)\n", argv[0]);
		goto out;
	}
	/* mount.fuse3's drop_privileges passes the FUSE descriptor as
	 * /dev/fd/N: the echo thread needs the mountpoint's path. */
	if (strncmp(opts.mountpoint, "/dev/fd/", 8) == 0) {
		fprintf(stderr, "statefs: mountpoint %s: statefs needs the "
			"mountpoint's path (drop_privileges is not supported)\n",
			opts.mountpoint);
		goto out;
	}
	if (layout_limits_check(&p.limits, err, sizeof(err)) != 0 ||
	    layout_remote_finish(&p.remote, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	fs.default_permissions = p.default_permissions;
	fs.cache_s = (double)p.mount.cache_timeout_ms / 1000.0;
	if (!opts.foreground) {
		bg = background_begin();
		if (bg < 0) {
			fprintf(stderr, "statefs: cannot go to the background: "
				"%s\n", strerror(errno));
			goto out;
		}
	}
	if (p.remote.kind != STORE_REMOTE_NONE) {
		/* A mirror of the shared store: its limits are the store's
		 * (testclock included). */
		char serr[1024];

		if (redis_store_new(&p.limits, &p.remote, &fs.store, serr,
				     sizeof(serr)) != 0) {
			fprintf(stderr, "%s\n", serr);
			goto out;
		}
		fs.testclock = store_limits(fs.store)->testclock;
	} else {
		/* -o testclock: the store's clock moves only through .clock. */
		fs.testclock = p.limits.testclock;
		clock.now_ms = fs.testclock ? fs_manual_clock : NULL;
		clock.arg = &fs;
		if (store_new(&p.limits, &clock, &fs.store) != 0) {
			fprintf(stderr, "statefs: cannot make the store\n");
			goto out;
		}
	}
	fs_inodes_init(&fs.inodes);
	fs_watch_init(&fs);
	/* The echo thread reaches the mount by its absolute path. */
	fs.mountpoint = realpath(opts.mountpoint, NULL);
	if (!fs.mountpoint) {
		fprintf(stderr, "statefs: %s: %s\n", opts.mountpoint, strerror(errno));
		goto out;
	}
	/* The root belongs to whoever mounts. */
	fs.mount_uid = getuid();
	root.uid = getuid();
	root.gid = getgid();
	store_setattr(fs.store, store_root(fs.store),
		      STORE_SET_UID | STORE_SET_GID, &root, NULL);

	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), &fs);
	if (!se)
		goto out;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out;
#ifndef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
	if (fuse_session_custom_io(se, &devio, fuse_session_fd(se)) != 0) {
		fuse_session_unmount(se);
		goto out;
	}
#endif
	fs.se = se;
	/* Every thread made from here on blocks the shutdown signals; the
	 * signal thread takes them. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sc.set);
	sigaddset(&sc.set, SIGTERM);
	sigaddset(&sc.set, SIGINT);
	sigaddset(&sc.set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
	if (fs_watch_start(&fs) != 0) {
		fprintf(stderr, "statefs: cannot start the watch threads\n");
		goto out_unmount;
	}
	/* The loop runs on this thread; the signal thread wakes it. */
	sc.fs = &fs;
	sc.loop_thread = pthread_self();
	sc.wake = WAKE_SIGNAL;
	{
		struct sigaction sa = { 0 };

		sa.sa_handler = wake_handler;
		sigemptyset(&sa.sa_mask);
		sigaction(sc.wake, &sa, NULL);
	}
	if (pthread_create(&sc.thread, NULL, signal_main, &sc) != 0) {
		fprintf(stderr, "statefs: cannot start the signal thread\n");
		fs_watch_stop(&fs);
		goto out_unmount;
	}
	/* The mount is live: the kernel holds requests until the loop below
	 * reads them.  Without NOTIFY_SOCKET this does nothing. */
	sd_notifyf(0, "READY=1\nSTATUS=serving %s", fs.mountpoint);
	background_ready(bg);
	bg = -1;

	if (opts.singlethread) {
		rc = fuse_session_loop(se);
	} else {
		loop = fuse_loop_cfg_create();
		if (!loop) {
			rc = -ENOMEM;
		} else {
			fuse_loop_cfg_set_clone_fd(loop, opts.clone_fd);
			if (opts.max_idle_threads != UINT_MAX)
				fuse_loop_cfg_set_idle_threads(loop,
							       opts.max_idle_threads);
			if (opts.max_threads && opts.max_threads <= 100000)
				fuse_loop_cfg_set_max_threads(loop, opts.max_threads);
			rc = fuse_session_loop_mt(se, loop);
		}
	}
	rc = rc != 0;
	/*
	 * Every thread that may use the session goes before the session
	 * does: the workers (the loop has joined them), the reaper and the
	 * events thread (fs_watch_stop; parked .events reads are answered
	 * while the session can still carry replies), the signal thread and
	 * the inval thread (after a drain, fs_watch_quiesce ended it already,
	 * while workers still answered), and the store's engine's threads
	 * that run its hooks, whose invalidations write to the session (a
	 * shared store's follower: store_quiesce, before the session goes,
	 * below).  A wake-up still on its way stays pending.
	 */
	{
		sigset_t wake;

		sigemptyset(&wake);
		sigaddset(&wake, sc.wake);
		pthread_sigmask(SIG_BLOCK, &wake, NULL);
	}
	atomic_store(&sc.stop, true);
	fs_watch_stop(&fs);
	pthread_join(sc.thread, NULL);
	/* A drain that ended the loop is a clean exit, whatever the loop
	 * reports about the workers it cancelled. */
	if (atomic_load(&sc.drained))
		rc = 0;
out_unmount:
	fuse_session_unmount(se);
	sd_notify(0, "STOPPING=1\nSTATUS=unmounted");
	fs_inval_join(&fs);
out:
	store_quiesce(fs.store);
	if (se)
		fuse_session_destroy(se);
	/* The echo thread never uses the session, but it may be waiting in
	 * a syscall on the mount that no worker will serve any more: closing
	 * the session ends that call. */
	fs_watch_join(&fs);
	if (loop)
		fuse_loop_cfg_destroy(loop);
	/* The kernel's handles go before the store they name. */
	if (fs.store)
		fs_inodes_clear(&fs.inodes, fs.store);
	store_free(fs.store);
	free(fs.mountpoint);
	free(opts.mountpoint);
	free(p.arg[0]);
	free(p.arg[1]);
	fuse_opt_free_args(&args);
	explicit_bzero(p.remote.password, sizeof(p.remote.password));
	if (bg >= 0)
		close(bg); /* failed before the mount was live: the command
			    * exits 1 */
	return rc;
}
