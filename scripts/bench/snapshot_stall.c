/*
 * snapshot_stall.c - how long admissions wait while store_snapshot_take()
 * copies a large store (`make bench-snapshot`).
 *
 * Linked against the store sources only (no FUSE).  Method:
 *
 *  1. Populate: store_limits_default() with max_children 2,000,000 and
 *     max_bytes 64 GiB, the one tenant's share all of it (by default a
 *     tenant may hold half); 1 tenant, NPARENTS parents, NCHILDREN children
 *     spread evenly, each given CONTENT bytes by a REPLACE stage
 *     (store_stage_open / write / publish / close).
 *  2. Start one admission thread: in its own parent ("adm"), or with
 *     `--populated` in the first populated parent (NCHILDREN / NPARENTS
 *     children, so its first call in each snapshot copies that bucket), it
 *     loops store_create(excl) + store_unlink as fast as it can, timing each call
 *     with CLOCK_MONOTONIC into a ring of the newest RING calls (start,
 *     latency); the whole-run maxima are kept apart.
 *  3. Main thread: let the admissions run WARMUP_MS + PRE_MS undisturbed,
 *     then take NSNAP root-scope snapshots SPACING_MS apart, each timed
 *     from the call to the end of store_snapshot_free() (wall and thread
 *     CPU time, minor faults of the take), with snap.stall_us as reported
 *     (store/snapshot.c starts that clock before it asks for the world
 *     lock).
 *  4. Windows.  A snapshot window is [take called, free returned].  The
 *     baseline is the same set of windows shifted back in time into the
 *     undisturbed period (same lengths, same spacing), so both sets cover
 *     equal time.  A call counts for a window when its interval overlaps
 *     it (a create that started just before the take and blocked on the
 *     world lock counts for that take).
 *
 *  5. Peak RSS is VmHWM of /proc/self/status; the sample ring is touched
 *     in full before the admissions start, so its size is subtracted
 *     exactly.
 *
 * With `--expiry` the disturbance is the reaper instead: every populated
 * parent gives its children a lease (child_ttl), all ending at the same
 * instant of a manual clock; after the undisturbed period the clock
 * jumps past it and the main thread reaps as the daemon's reaper does
 * (store_expire() in passes of REAP_BUDGET until a pass comes back
 * short), timing each pass, while the admission thread (whose parent
 * has no lease) goes on.  Baseline: a window of the same length just
 * before.
 *
 * Everything printed is measured by this run; nothing is estimated.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#define NPARENTS  100
#define NCHILDREN 1000000
#define CONTENT   16          /* bytes per child; 0 = no content */
#define NSNAP     5
#define SPACING_MS 200
#define PRE_MS    6000        /* undisturbed admissions before the takes */
#define WARMUP_MS 300         /* not used for the baseline */
#define RING      (16u << 20) /* samples kept (the newest), 8 bytes each */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "snapshot_stall: %s: %s\n", what, strerror(-rc));
	exit(1);
}

/* kB of a /proc/self/status field, or -1. */
static long status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t fl = strlen(field);
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':') {
			v = strtol(line + fl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Admission samples --------------------------------------------------- */

/*
 * A ring of the newest RING calls, allocated and touched before the
 * admissions start, so the bench's own memory is a constant that can be
 * subtracted from VmHWM.  Calls alternate create, unlink: sample i is a
 * create when i is even.  The whole-run maxima are kept apart, exactly.
 */
enum { OP_CREATE = 0, OP_UNLINK = 1 };

struct sample {
	uint32_t start_us; /* since t_base */
	uint32_t lat_ns;   /* saturates at UINT32_MAX (4.29 s) */
};

static struct store *S;
static struct store_node *ADM;
static struct sample *samp;
static atomic_size_t nsamp;     /* calls made (sample i at i % RING) */
static atomic_bool stop;
static uint64_t t_base;
static uint64_t max_lat[2];     /* whole run, per op (thread-written) */
static uint64_t ncalls[2];
static const struct store_owner FOWN = { 1000, 1000, 0644 };

static void record(size_t i, uint64_t a, uint64_t b, int op)
{
	uint64_t lat = b - a;

	samp[i % RING] = (struct sample){
		(uint32_t)((a - t_base) / 1000),
		lat > UINT32_MAX ? UINT32_MAX : (uint32_t)lat };
	if (lat > max_lat[op])
		max_lat[op] = lat;
	ncalls[op]++;
}

static void *admit(void *arg)
{
	char name[32];
	size_t n = 0;
	uint64_t i = 0;

	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct store_node *c = NULL;
		bool created;
		uint64_t a, b;
		int rc;

		snprintf(name, sizeof(name), "a%llu", (unsigned long long)i++);
		a = now_ns();
		rc = store_create(S, ADM, name, &FOWN, true, &c, &created);
		b = now_ns();
		if (rc < 0)
			die("admission create", rc);
		record(n++, a, b, OP_CREATE);
		store_node_unref(S, c);
		a = now_ns();
		rc = store_unlink(S, ADM, name);
		b = now_ns();
		if (rc < 0)
			die("admission unlink", rc);
		record(n++, a, b, OP_UNLINK);
		atomic_store_explicit(&nsamp, n, memory_order_release);
	}
	return NULL;
}

/* Statistics ------------------------------------------------------------ */

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Nearest-rank percentile of sorted @v (n > 0). */
static uint64_t pct(const uint64_t *v, size_t n, double p)
{
	size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);

	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

struct win { uint64_t a, b; }; /* ns since t_base */

struct latstats { size_t n, slow; uint64_t p50, p99, max; };

/* Latencies of the @op calls kept in the ring (calls @lo..@hi-1) that
 * overlap any of @w[0..nw). */
static struct latstats window_stats(const struct win *w, int nw, int op,
				    size_t lo, size_t hi)
{
	uint64_t *v = malloc((hi - lo) * sizeof(*v) + 1);
	struct latstats st = { 0 };
	size_t n = 0;

	if (!v)
		die("malloc", -ENOMEM);
	for (size_t i = lo; i < hi; i++) {
		const struct sample *x = &samp[i % RING];
		uint64_t a = (uint64_t)x->start_us * 1000, lat = x->lat_ns;

		if ((int)(i & 1) != op)
			continue;
		for (int k = 0; k < nw; k++)
			if (a < w[k].b && a + lat > w[k].a) {
				v[n++] = lat;
				break;
			}
	}
	if (n) {
		qsort(v, n, sizeof(*v), cmp_u64);
		st.n = n;
		st.p50 = pct(v, n, 50);
		st.p99 = pct(v, n, 99);
		st.max = v[n - 1];
		for (size_t i = 0; i < n; i++)
			st.slow += v[i] >= 1000000;
	}
	free(v);
	return st;
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

/* --expiry: the manual clock, and the reaper's pass size (store/reaper.c). */
#define REAP_BUDGET 512
#define LEASE_MS 600000
static atomic_uint_fast64_t manual_ms = 1000000;

static uint64_t manual_now(void *arg)
{
	(void)arg;
	return atomic_load(&manual_ms);
}

/* Step 3 of --expiry: everything falls due at once; reap as the daemon
 * does while the admissions go on. */
static void expiry_run(size_t lo_hint)
{
	uint64_t a, b, pass_max = 0, passes = 0, reaped = 0;
	struct latstats base, during;
	struct win w, bw;
	size_t ns, lo;

	(void)lo_hint;
	sleep_ms(WARMUP_MS + PRE_MS);
	atomic_fetch_add(&manual_ms, LEASE_MS + 1000);
	a = now_ns();
	for (;;) {
		uint64_t p0 = now_ns(), p1;
		unsigned n = store_expire(S, REAP_BUDGET);

		p1 = now_ns();
		passes++;
		reaped += n;
		if (p1 - p0 > pass_max)
			pass_max = p1 - p0;
		if (n < REAP_BUDGET)
			break;
	}
	b = now_ns();
	sleep_ms(50);
	atomic_store(&stop, true);
	ns = atomic_load(&nsamp);
	lo = ns > RING ? ns - RING : 0;
	w = (struct win){ a - t_base, b - t_base };
	bw = (struct win){ w.a - (b - a) - 100000000ull, w.a - 100000000ull };
	base = window_stats(&bw, 1, OP_CREATE, lo, ns);
	during = window_stats(&w, 1, OP_CREATE, lo, ns);
	printf("\nreaping: %llu leases fell due at once; %llu reaped in %.1f ms, "
	       "%llu passes of at most %d, longest pass %.2f ms\n",
	       (unsigned long long)NCHILDREN, (unsigned long long)reaped,
	       (b - a) / 1e6, (unsigned long long)passes, REAP_BUDGET,
	       pass_max / 1e6);
	printf("admission latency (store_create, us) in a window of %.1f ms:\n",
	       (b - a) / 1e6);
	printf("  window                    calls       p50       p99         max  >=1ms\n");
	printf("  baseline (no reaping)  %8zu  %8.1f  %8.1f  %10.1f  %5zu\n",
	       base.n, us(base.p50), us(base.p99), us(base.max), base.slow);
	printf("  while reaping          %8zu  %8.1f  %8.1f  %10.1f  %5zu\n",
	       during.n, us(during.p50), us(during.p99), us(during.max),
	       during.slow);
}

int main(int argc, char **argv)
{
	bool populated = argc > 1 && !strcmp(argv[1], "--populated");
	bool expiry = argc > 1 && !strcmp(argv[1], "--expiry");
	struct store_clock manual = { manual_now, NULL };

	struct store_limits lim;
	struct store_node *root, *ten, *par[NPARENTS];
	static const struct store_owner DOWN = { 1000, 1000, 0755 };
	char name[64];
	uint64_t t0, t1;
	int rc;

	store_limits_default(&lim);
	lim.max_children = 2000000;
	lim.max_bytes = 64ull << 30;
	lim.tenant_max_children = lim.max_children;
	lim.tenant_max_bytes = lim.max_bytes;
	rc = store_new(&lim, expiry ? &manual : NULL, &S);
	if (rc)
		die("store_new", rc);
	root = store_root(S);
	if ((rc = store_mkdir(S, root, "t0", &DOWN, &ten)))
		die("mkdir tenant", rc);
	for (int p = 0; p < NPARENTS; p++) {
		snprintf(name, sizeof(name), "p%03d", p);
		if ((rc = store_mkdir(S, ten, name, &DOWN, &par[p])))
			die("mkdir parent", rc);
		if (expiry &&
		    (rc = store_set_child_ttl(S, par[p], LEASE_MS)))
			die("child_ttl", rc);
	}
	if ((rc = store_mkdir(S, ten, "adm", &DOWN, &ADM)))
		die("mkdir adm", rc);
	if (populated) {
		store_node_unref(S, ADM);
		ADM = par[0];
		store_node_ref(ADM);
	}

	/* 1. Populate. */
	static const char payload[CONTENT + 1] = "0123456789abcdef";
	t0 = now_ns();
	for (int i = 0; i < NCHILDREN; i++) {
		struct store_node *c;
		bool created;

		snprintf(name, sizeof(name), "c%07d", i);
		rc = store_create(S, par[i % NPARENTS], name, &FOWN, true, &c,
				  &created);
		if (rc)
			die("create child", rc);
		if (CONTENT) {
			struct store_stage *st;
			ssize_t w;

			if ((rc = store_stage_open(S, c, STORE_STAGE_REPLACE, &st)))
				die("stage_open", rc);
			w = store_stage_write(st, payload, CONTENT, 0);
			if (w != CONTENT)
				die("stage_write", (int)w);
			if ((rc = store_stage_publish(st)))
				die("stage_publish", rc);
			store_stage_close(st);
		}
		store_node_unref(S, c);
	}
	t1 = now_ns();
	struct store_stats stt;
	store_stats(S, NULL, &stt);
	long hwm_pop = status_kb("VmHWM"), rss_pop = status_kb("VmRSS");

	printf("statefs store %s stall benchmark (store/*.c, -O2, no FUSE)\n",
	       expiry ? "expiry" : "snapshot");
	{
		FILE *la = fopen("/proc/loadavg", "r");
		char buf[64] = "?";

		if (la) {
			if (!fgets(buf, sizeof(buf), la))
				strcpy(buf, "?\n");
			fclose(la);
		}
		printf("host: %ld cpus, loadavg %s", sysconf(_SC_NPROCESSORS_ONLN), buf);
	}
	printf("population: 1 tenant, %d parents (+1 admission parent), "
	       "%llu children, %llu bytes (%d B content each, REPLACE stage)\n",
	       NPARENTS, (unsigned long long)stt.children,
	       (unsigned long long)stt.bytes, CONTENT);
	printf("admissions into: %s\n", populated ?
	       "p000, a populated parent" : "adm, a parent of their own");
	printf("populate time: %.2f s (%.2f us/child)   RSS after populate: "
	       "%.1f MiB (VmHWM %.1f MiB)\n",
	       (double)(t1 - t0) / 1e9, (double)(t1 - t0) / 1e3 / NCHILDREN,
	       rss_pop / 1024.0, hwm_pop / 1024.0);

	/* 2. Admission thread. */
	samp = mmap(NULL, (size_t)RING * sizeof(*samp), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (samp == MAP_FAILED)
		die("mmap samples", -errno);
	memset(samp, 0, (size_t)RING * sizeof(*samp));
	long rss_ring = status_kb("VmRSS");
	pthread_t th;
	t_base = now_ns();
	if (pthread_create(&th, NULL, admit, NULL))
		die("pthread_create", -EAGAIN);

	if (expiry) {
		expiry_run(0);
		pthread_join(th, NULL);
		goto out;
	}
	/* 3. Undisturbed period, then the snapshots. */
	sleep_ms(WARMUP_MS + PRE_MS);
	struct win sw[NSNAP];
	uint64_t stall[NSNAP], total[NSNAP], takeonly[NSNAP];
	long minflt[NSNAP];
	uint64_t cpu[NSNAP];
	size_t rows[NSNAP];
	for (int k = 0; k < NSNAP; k++) {
		struct store_snapshot snap;
		uint64_t a, m, b;

		if (k)
			sleep_ms(SPACING_MS);
		struct rusage r0, r1;
		uint64_t c0;
		getrusage(RUSAGE_THREAD, &r0);
		c0 = cpu_ns();
		a = now_ns();
		rc = store_snapshot_take(S, NULL, &snap);
		m = now_ns();
		cpu[k] = cpu_ns() - c0;
		getrusage(RUSAGE_THREAD, &r1);
		minflt[k] = r1.ru_minflt - r0.ru_minflt;
		if (rc)
			die("snapshot_take", rc);
		rows[k] = snap.n;
		stall[k] = snap.stall_us;
		store_snapshot_free(&snap);
		b = now_ns();
		sw[k] = (struct win){ a - t_base, b - t_base };
		takeonly[k] = m - a;
		total[k] = b - a;
	}
	sleep_ms(50);
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	size_t ns = atomic_load(&nsamp);
	size_t lo = ns > RING ? ns - RING : 0;
	long hwm_end = status_kb("VmHWM");
	double ring_mib = (double)RING * sizeof(*samp) / 1048576.0;

	/* 4. Windows. */
	uint64_t span = sw[NSNAP - 1].b - sw[0].a;
	uint64_t shift = span + 100000000ull;       /* 100 ms gap before */
	uint64_t warm = (uint64_t)WARMUP_MS * 1000000ull;
	struct win bw[NSNAP];
	bool base_ok = sw[0].a >= shift + warm;
	/* The ring must still hold every call of the baseline. */
	bool ring_ok = !lo || (uint64_t)samp[lo % RING].start_us * 1000 + 1000 <
			      sw[0].a - shift;
	for (int k = 0; k < NSNAP; k++)
		bw[k] = (struct win){ sw[k].a - shift, sw[k].b - shift };

	struct latstats cb = window_stats(bw, NSNAP, OP_CREATE, lo, ns);
	struct latstats cs = window_stats(sw, NSNAP, OP_CREATE, lo, ns);
	struct latstats ub = window_stats(bw, NSNAP, OP_UNLINK, lo, ns);
	struct latstats us_ = window_stats(sw, NSNAP, OP_UNLINK, lo, ns);
	uint64_t maxc = max_lat[OP_CREATE], maxu = max_lat[OP_UNLINK];
	uint64_t ncreate = ncalls[OP_CREATE];

	printf("\nsnapshots: %d, root scope, %d ms apart, admission thread running\n",
	       NSNAP, SPACING_MS);
	printf("  #      rows   stall_us   take_ms  take_cpu_ms  take+free_ms  minflt(take)\n");
	for (int k = 0; k < NSNAP; k++)
		printf("  %d  %8zu  %9llu  %8.1f  %11.1f  %12.1f  %12ld\n", k + 1,
		       rows[k], (unsigned long long)stall[k], takeonly[k] / 1e6,
		       cpu[k] / 1e6, total[k] / 1e6, minflt[k]);
	uint64_t ss[NSNAP];
	memcpy(ss, stall, sizeof(ss));
	qsort(ss, NSNAP, sizeof(ss[0]), cmp_u64);
	printf("  stall_us min/median/max: %llu / %llu / %llu\n",
	       (unsigned long long)ss[0], (unsigned long long)ss[NSNAP / 2],
	       (unsigned long long)ss[NSNAP - 1]);

	uint64_t wlen = 0;
	for (int k = 0; k < NSNAP; k++)
		wlen += sw[k].b - sw[k].a;
	printf("\nadmission latency (store_create, us), each set of windows "
	       "%.1f ms in total:\n", wlen / 1e6);
	printf("  window                    calls  calls/s       p50       p99         max  >=1ms\n");
	printf("  baseline (no snapshot) %8zu %8.0f  %8.1f  %8.1f  %10.1f  %5zu%s\n",
	       cb.n, cb.n / (wlen / 1e9), us(cb.p50), us(cb.p99), us(cb.max),
	       cb.slow, !ring_ok ? "  (WARNING: ring lost part of the baseline)" :
	       base_ok ? "" : "  (WARNING: baseline overlaps warm-up)");
	printf("  during snapshots       %8zu %8.0f  %8.1f  %8.1f  %10.1f  %5zu\n",
	       cs.n, cs.n / (wlen / 1e9), us(cs.p50), us(cs.p99), us(cs.max),
	       cs.slow);
	printf("  (a create that meets a take waits for its exclusive moments "
	       "(stall_us) and,\n   the first time it touches its bucket, for "
	       "the copy of that bucket)\n");
	printf("  (store_unlink, same windows: baseline max %.1f us, during "
	       "max %.1f us)\n", us(ub.max), us(us_.max));
	printf("  max store_create latency over the whole run: %.1f us "
	       "(%llu creates); max store_unlink: %.1f us\n", us(maxc),
	       (unsigned long long)ncreate, us(maxu));

	printf("\npeak RSS (VmHWM): %.1f MiB at end, of which the bench's sample "
	       "ring %.1f MiB\n  (resident from before the admissions); "
	       "without it %.1f MiB.  After populate: %.1f MiB;\n"
	       "  with the ring, before the snapshots: VmRSS %.1f MiB\n",
	       hwm_end / 1024.0, ring_mib, hwm_end / 1024.0 - ring_mib,
	       hwm_pop / 1024.0, rss_ring / 1024.0);

out:
	for (int p = 0; p < NPARENTS; p++)
		store_node_unref(S, par[p]);
	store_node_unref(S, ADM);
	store_node_unref(S, ten);
	munmap(samp, (size_t)RING * sizeof(*samp));
	store_free(S);
	return 0;
}
