/*
 * loadgen.c - the load generator of `make bench`: plain syscalls on a
 * directory, so the same run can drive tmpfs, the FUSE floor and statefs.
 *
 *   loadgen point DIR THREADS N [DIR2...]
 *	Thread i works in DIR/g<i>a and DIR/g<i>b (made if missing), one
 *	phase at a time, all threads together, N operations per thread.
 *	With more directories (the same tenant through several mounts),
 *	THREADS threads in each: threads 0..THREADS-1 in DIR, the next in
 *	DIR2, and so on, each with parents of its own.  The phases:
 *	  create  open(O_CREAT|O_EXCL|O_WRONLY) + write 16 bytes + close
 *	  stat    stat (the first since the write)
 *	  restat  stat again (an unchanged node)
 *	  read    open(O_RDONLY) + read + close
 *	  rename  g<i>a/NAME -> g<i>b/NAME (between two parents)
 *	  unlink  unlink from g<i>b
 *	Prints one line per phase: "phase NAME THREADS OPS SECONDS START
 *	END" (THREADS in all, START and END on CLOCK_MONOTONIC, in
 *	seconds).
 *
 *   loadgen populate DIR PREFIX FROM COUNT PER_DIR
 *	Files FROM .. FROM+COUNT-1, 16 bytes each, file i in directory
 *	DIR/PREFIX<i / PER_DIR> (made when missing), two threads.  Prints
 *	"populate COUNT SECONDS".
 *
 *   loadgen spin
 *	The machine's parallelism: the same CPU-bound loop in one thread,
 *	then in two at once.  Prints "spin SPEEDUP" (work per second of two
 *	threads over one; 2.0 on two free CPUs).
 *
 *   loadgen leave DIR OTHER
 *	Removes directory DIR with everything in it (rmdir; if the
 *	filesystem says ENOTEMPTY, unlink every entry first, as rm -r does)
 *	while a probe thread creates and unlinks in OTHER, timing each call.
 *	The probe runs 500 ms alone first (the baseline), then during the
 *	removal, then 100 ms more.  Prints "leave MS" and the probe's
 *	"probe base|during CALLS P50_US P99_US MAX_US".
 *
 *   loadgen propagate DIRA DIRB N [auto|inotify|poll|sync]
 *	DIRA and DIRB are one parent seen through two mounts of one shared
 *	store (DIRA is made, DIRB awaited).  N times: create DIRA/pNNNNNNN,
 *	write 16 bytes, close, and time from the return of close() until
 *	mount B shows the publication: by its inotify event (IN_MODIFY or
 *	IN_CLOSE_WRITE naming the file on a watch of DIRB) or, where the
 *	mount raises none, by polling stat(2) of DIRB/NAME every 20 us until
 *	it shows the 16 bytes.  auto (the default) publishes one probe file
 *	first and uses inotify if its event arrives within 2 s, else poll.
 *	sync polls statx(2) with AT_STATX_FORCE_SYNC instead, which asks
 *	the filesystem each time: what mount B holds, whatever the kernel's
 *	caches of it say.  Prints "propagate inotify|poll|sync N P50_US
 *	P99_US MAX_US MISSED" (MISSED: not
 *	seen within 2 s, counted as 2 s; after 30 of them the run stops).
 *
 * Names are fixed-width ("f0000001"), content is 16 bytes.  Errors end
 * the run with a message; nothing is retried.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAXT 16
static const char payload[16] = "0123456789abcdef";

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "loadgen: %s %s: %s\n", what, path ? path : "",
		strerror(errno));
	exit(1);
}

static void mkdir_p(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("mkdir", path);
}

static void make_file(const char *path)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);

	if (fd < 0)
		die("create", path);
	if (write(fd, payload, sizeof(payload)) != (ssize_t)sizeof(payload))
		die("write", path);
	if (close(fd) != 0)
		die("close", path);
}

/* Point phases ---------------------------------------------------------- */

enum phase { P_CREATE, P_STAT, P_RESTAT, P_READ, P_RENAME, P_UNLINK, NPHASE };
static const char *const PHASE[NPHASE] = { "create", "stat", "restat", "read",
					   "rename", "unlink" };

struct worker {
	pthread_t th;
	const char *dir;
	int id;
	long n;
};

static pthread_barrier_t start_bar, end_bar;
static atomic_int cur_phase;

static void one(const struct worker *w, enum phase ph, long i)
{
	char a[4096], b[4096], buf[64];
	struct stat st;
	int fd;

	snprintf(a, sizeof(a), "%s/g%da/f%07ld", w->dir, w->id, i);
	snprintf(b, sizeof(b), "%s/g%db/f%07ld", w->dir, w->id, i);
	switch (ph) {
	case P_CREATE:
		make_file(a);
		break;
	case P_STAT:
	case P_RESTAT:
		if (stat(a, &st) != 0)
			die("stat", a);
		break;
	case P_READ:
		fd = open(a, O_RDONLY);
		if (fd < 0)
			die("open", a);
		if (read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(payload))
			die("read", a);
		close(fd);
		break;
	case P_RENAME:
		if (rename(a, b) != 0)
			die("rename", a);
		break;
	case P_UNLINK:
		if (unlink(b) != 0)
			die("unlink", b);
		break;
	default:
		break;
	}
}

static void *point_thread(void *arg)
{
	struct worker *w = arg;

	for (int ph = 0; ph < NPHASE; ph++) {
		pthread_barrier_wait(&start_bar);
		for (long i = 0; i < w->n; i++)
			one(w, (enum phase)atomic_load(&cur_phase), i);
		pthread_barrier_wait(&end_bar);
	}
	return NULL;
}

/* THREADS threads in each of the ndir directories dirs[]. */
static int point(char **dirs, int ndir, int per, long n)
{
	struct worker w[MAXT];
	char path[4096];
	int nt = per * ndir;

	if (per < 1 || nt > MAXT || n < 1) {
		fprintf(stderr, "loadgen: 1..%d threads in all, N >= 1\n", MAXT);
		return 2;
	}
	for (int i = 0; i < nt; i++) {
		const char *dir = dirs[i / per];

		mkdir_p(dir);
		snprintf(path, sizeof(path), "%s/g%da", dir, i);
		mkdir_p(path);
		snprintf(path, sizeof(path), "%s/g%db", dir, i);
		mkdir_p(path);
	}
	pthread_barrier_init(&start_bar, NULL, (unsigned)nt + 1);
	pthread_barrier_init(&end_bar, NULL, (unsigned)nt + 1);
	for (int i = 0; i < nt; i++) {
		w[i] = (struct worker){ .dir = dirs[i / per], .id = i, .n = n };
		if (pthread_create(&w[i].th, NULL, point_thread, &w[i]))
			die("pthread_create", NULL);
	}
	for (int ph = 0; ph < NPHASE; ph++) {
		double t0, t1;

		atomic_store(&cur_phase, ph);
		t0 = now_s();
		pthread_barrier_wait(&start_bar);
		pthread_barrier_wait(&end_bar);
		t1 = now_s();
		printf("phase %s %d %ld %.6f %.6f %.6f\n", PHASE[ph], nt, n * nt,
		       t1 - t0, t0, t1);
		fflush(stdout);
	}
	for (int i = 0; i < nt; i++)
		pthread_join(w[i].th, NULL);
	return 0;
}

/* Populate ------------------------------------------------------------------ */

struct filler {
	pthread_t th;
	const char *dir, *prefix;
	long from, to, per;
};

static void *fill_thread(void *arg)
{
	struct filler *f = arg;
	char path[4096];

	for (long i = f->from; i < f->to; i++) {
		if (i % f->per == 0 || i == f->from) {
			snprintf(path, sizeof(path), "%s/%s%05ld", f->dir,
				 f->prefix, i / f->per);
			mkdir_p(path);
		}
		snprintf(path, sizeof(path), "%s/%s%05ld/f%07ld", f->dir,
			 f->prefix, i / f->per, i);
		make_file(path);
	}
	return NULL;
}

static int populate(const char *dir, const char *prefix, long from,
		    long count, long per)
{
	struct filler f[2];
	double t0 = now_s();
	long half;

	if (from < 0 || count < 0 || per < 1) {
		fprintf(stderr, "loadgen: FROM >= 0, COUNT >= 0, PER_DIR >= 1\n");
		return 2;
	}
	mkdir_p(dir);
	/* Split on a directory boundary, so the threads never make the
	 * same directory (mkdir_p accepts one that exists anyway). */
	half = from + ((count / 2 + per - 1) / per) * per;
	if (half > from + count)
		half = from + count;
	f[0] = (struct filler){ .dir = dir, .prefix = prefix, .from = from,
				.to = half, .per = per };
	f[1] = (struct filler){ .dir = dir, .prefix = prefix, .from = half,
				.to = from + count, .per = per };
	for (int i = 0; i < 2; i++)
		if (pthread_create(&f[i].th, NULL, fill_thread, &f[i]))
			die("pthread_create", NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(f[i].th, NULL);
	printf("populate %ld %.6f\n", count, now_s() - t0);
	return 0;
}

/* Leave ------------------------------------------------------------------------ */

#define PROBE_MAX (1u << 22)

struct probe_sample {
	uint64_t start, lat;
};

static struct probe_sample *samples;
static atomic_size_t nsamples;
static atomic_bool probe_stop;

static void *probe_thread(void *arg)
{
	const char *other = arg;
	char path[4096];
	size_t n = 0;

	while (!atomic_load(&probe_stop) && n < PROBE_MAX) {
		uint64_t a, b;

		snprintf(path, sizeof(path), "%s/probe%zu", other, n);
		a = now_ns();
		make_file(path);
		if (unlink(path) != 0)
			die("unlink", path);
		b = now_ns();
		samples[n++] = (struct probe_sample){ a, b - a };
		atomic_store(&nsamples, n);
	}
	return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Probe calls overlapping [from, to): their count and latency spread. */
static void probe_report(const char *name, uint64_t from, uint64_t to)
{
	size_t n = atomic_load(&nsamples), k = 0;
	uint64_t *v = malloc((n + 1) * sizeof(*v));

	if (!v)
		die("malloc", NULL);
	for (size_t i = 0; i < n; i++)
		if (samples[i].start < to && samples[i].start + samples[i].lat > from)
			v[k++] = samples[i].lat;
	qsort(v, k, sizeof(*v), cmp_u64);
	if (k)
		printf("probe %s %zu %.1f %.1f %.1f\n", name, k,
		       v[k / 2] / 1e3, v[(k * 99) / 100] / 1e3, v[k - 1] / 1e3);
	else
		printf("probe %s 0 - - -\n", name);
	free(v);
}

/* rmdir, or, where the filesystem refuses a non-empty directory, what
 * rm -r does: list it, unlink every entry, rmdir (again if needed). */
static void remove_all(const char *dir)
{
	char path[4096];

	while (rmdir(dir) != 0) {
		struct dirent *de;
		char **names = NULL;
		size_t n = 0, cap = 0;
		DIR *d;

		if (errno != ENOTEMPTY && errno != EEXIST)
			die("rmdir", dir);
		d = opendir(dir);
		if (!d)
			die("opendir", dir);
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 1024;
				names = realloc(names, cap * sizeof(*names));
				if (!names)
					die("realloc", NULL);
			}
			if (!(names[n++] = strdup(de->d_name)))
				die("strdup", NULL);
		}
		closedir(d);
		for (size_t i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			if (unlink(path) != 0 && errno != ENOENT)
				die("unlink", path);
			free(names[i]);
		}
		free(names);
	}
}

static int leave(const char *dir, const char *other)
{
	struct timespec pause = { 0, 500000000L };
	uint64_t t0, a, b;
	pthread_t th;

	samples = calloc(PROBE_MAX, sizeof(*samples));
	if (!samples)
		die("calloc", NULL);
	mkdir_p(other);
	t0 = now_ns();
	if (pthread_create(&th, NULL, probe_thread, (void *)other))
		die("pthread_create", NULL);
	nanosleep(&pause, NULL);
	a = now_ns();
	remove_all(dir);
	b = now_ns();
	pause.tv_nsec = 100000000L;
	nanosleep(&pause, NULL);
	atomic_store(&probe_stop, true);
	pthread_join(th, NULL);
	printf("leave %.3f\n", (double)(b - a) / 1e6);
	probe_report("base", t0, a);
	probe_report("during", a, b);
	free(samples);
	return 0;
}

/* Propagate -------------------------------------------------------------------- */

#define PROP_TIMEOUT_NS 2000000000ull
#define PROP_MAX_MISSED 30

/* Reads the watch's events until one of IN_MODIFY or IN_CLOSE_WRITE names
 * NAME (true) or until DEADLINE (false).  Events of other names are read
 * and dropped. */
static bool wait_event(int ifd, const char *name, uint64_t deadline)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		struct pollfd pfd = { .fd = ifd, .events = POLLIN };
		uint64_t t = now_ns();
		ssize_t len;

		if (t >= deadline)
			return false;
		if (poll(&pfd, 1, (int)((deadline - t + 999999) / 1000000)) < 0) {
			if (errno == EINTR)
				continue;
			die("poll", "inotify");
		}
		len = read(ifd, buf, sizeof(buf));
		if (len < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			die("read", "inotify");
		}
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const void *)p;

			if (ev->len && (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) &&
			    !strcmp(ev->name, name))
				return true;
			p += sizeof(*ev) + ev->len;
		}
	}
}

/* Polls stat(2) of PATH (with @sync, statx(2) with AT_STATX_FORCE_SYNC)
 * every 20 us until it shows the payload's size (true) or until DEADLINE
 * (false). */
static bool wait_visible(const char *path, bool sync, uint64_t deadline)
{
	const struct timespec gap = { 0, 20000 };
	struct statx stx;
	struct stat st;

	while (now_ns() < deadline) {
		if (sync) {
			if (statx(AT_FDCWD, path, AT_STATX_FORCE_SYNC,
				  STATX_SIZE, &stx) == 0 &&
			    stx.stx_size == sizeof(payload))
				return true;
		} else if (stat(path, &st) == 0 &&
			   st.st_size == (off_t)sizeof(payload)) {
			return true;
		}
		nanosleep(&gap, NULL);
	}
	return false;
}

static int propagate(const char *a, const char *b, long n, const char *mode)
{
	const struct timespec ms = { 0, 1000000 };
	char pa[4096], pb[4096], name[32];
	uint64_t *v, t0;
	long missed = 0, i;
	bool inotify, sync = !strcmp(mode, "sync");
	struct stat st;
	int ifd = -1;

	if (n < 1 || (strcmp(mode, "auto") && strcmp(mode, "inotify") &&
		      strcmp(mode, "poll") && !sync)) {
		fprintf(stderr, "loadgen: N >= 1, mode auto|inotify|poll|sync\n");
		return 2;
	}
	mkdir_p(a);
	t0 = now_ns();
	while (stat(b, &st) != 0) {
		if (now_ns() - t0 > 2 * PROP_TIMEOUT_NS)
			die("waiting for", b);
		nanosleep(&ms, NULL);
	}
	v = calloc((size_t)n, sizeof(*v));
	if (!v)
		die("calloc", NULL);
	inotify = strcmp(mode, "poll") != 0 && !sync;
	if (inotify) {
		ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (ifd < 0)
			die("inotify_init1", NULL);
		if (inotify_add_watch(ifd, b, IN_MODIFY | IN_CLOSE_WRITE) < 0)
			die("inotify_add_watch", b);
	}
	if (!strcmp(mode, "auto")) {
		snprintf(pa, sizeof(pa), "%s/probe", a);
		make_file(pa);
		inotify = wait_event(ifd, "probe", now_ns() + 2000000000ull);
		if (!inotify) {
			close(ifd);
			ifd = -1;
		}
	}
	for (i = 0; i < n && missed < PROP_MAX_MISSED; i++) {
		bool seen;

		snprintf(name, sizeof(name), "p%07ld", i);
		snprintf(pa, sizeof(pa), "%s/%s", a, name);
		snprintf(pb, sizeof(pb), "%s/%s", b, name);
		make_file(pa);
		t0 = now_ns();
		seen = inotify ? wait_event(ifd, name, t0 + PROP_TIMEOUT_NS)
			       : wait_visible(pb, sync, t0 + PROP_TIMEOUT_NS);
		v[i] = seen ? now_ns() - t0 : PROP_TIMEOUT_NS;
		missed += !seen;
	}
	n = i;
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	printf("propagate %s %ld %.1f %.1f %.1f %ld\n",
	       inotify ? "inotify" : sync ? "sync" : "poll",
	       n, v[n / 2] / 1e3, v[(n * 99) / 100] / 1e3, v[n - 1] / 1e3, missed);
	if (ifd >= 0)
		close(ifd);
	free(v);
	return 0;
}

/* Spin ------------------------------------------------------------------------- */

static void *spin_thread(void *arg)
{
	volatile uint64_t x = 0;

	for (uint64_t i = 0; i < 400000000ull; i++)
		x += i;
	*(uint64_t *)arg = x;
	return NULL;
}

static int spin(void)
{
	pthread_t th[2];
	uint64_t sink[2];
	double t0, one, two;

	t0 = now_s();
	spin_thread(&sink[0]);
	one = now_s() - t0;
	t0 = now_s();
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, spin_thread, &sink[i]))
			die("pthread_create", NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	two = now_s() - t0;
	printf("spin %.2f\n", 2.0 * one / two);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "point")) {
		char *dirs[MAXT];
		int ndir = 0;

		dirs[ndir++] = argv[2];
		for (int i = 5; i < argc && ndir < MAXT; i++)
			dirs[ndir++] = argv[i];
		return point(dirs, ndir, atoi(argv[3]), atol(argv[4]));
	}
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "propagate"))
		return propagate(argv[2], argv[3], atol(argv[4]),
				 argc == 6 ? argv[5] : "auto");
	if (argc == 7 && !strcmp(argv[1], "populate"))
		return populate(argv[2], argv[3], atol(argv[4]), atol(argv[5]),
				atol(argv[6]));
	if (argc == 4 && !strcmp(argv[1], "leave"))
		return leave(argv[2], argv[3]);
	if (argc == 2 && !strcmp(argv[1], "spin"))
		return spin();
	fprintf(stderr, "usage: loadgen point DIR THREADS N [DIR2...]\n"
		"       loadgen propagate DIRA DIRB N [auto|inotify|poll|sync]\n"
		"       loadgen populate DIR PREFIX FROM COUNT PER_DIR\n"
		"       loadgen leave DIR OTHER\n"
		"       loadgen spin\n");
	return 2;
}
