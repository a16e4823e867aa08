/*
 * redis_fixture.h - the redis-server the shared store's tests run
 * against: one server of the test's own, on a unix socket in a
 * temporary directory of its own (no TCP, no persistence), with the
 * test's connection to it; stopped by redis_fixture_stop(), which a
 * test's teardown calls whatever the test did, so a failed test leaves
 * no server and no directory behind.  Each server dies with the process
 * that started it (PR_SET_PDEATHSIG), should that one crash.
 *
 * Used by the unit tests of redis/ (tests/unit/redis/test_mirror.c,
 * test_remote_clock.c, test_remote_lock.c, test_remote_ops.c, through
 * redis_world.h) and by tests/fuzz/fuzz_shared.c; redis_procs.h, the
 * world of several servers and Sentinels of test_rconn.c and
 * test_link.c, spawns and kills each of its processes with the two
 * functions here, and waits with now_ms() and nap().  No cmocka here:
 * each function says how it failed, and the caller fails its test (or
 * exits) as it must.
 */
#ifndef STATEFS_UNIT_REDIS_FIXTURE_H
#define STATEFS_UNIT_REDIS_FIXTURE_H

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#define REDIS_FIXTURE_SERVER "/usr/bin/redis-server"

/* One server and the test's connection to it.  Zeroed (or stopped), it
 * holds nothing. */
struct redis_fixture {
	char dir[64];              /* its temporary directory */
	char sock[96];             /* DIR/redis.sock */
	pid_t pid;                 /* the server; 0 when none */
	redisContext *rc;          /* the test's own connection */
};

/* The monotonic clock in milliseconds, for a test's bounds. */
static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Sleep @ms milliseconds. */
static inline void nap(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * fork and exec @path (redis-server, redis-cli) with @argv, its standard
 * streams on /dev/null, killed when this process dies.  The pid, or -1
 * when fork failed.
 */
static inline pid_t redis_fixture_exec(const char *path, char *const argv[])
{
	pid_t parent = getpid(), pid = fork();

	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(path, argv);
		_exit(127);
	}
	return pid;
}

/* redis_fixture_exec of redis-server (argv[0] "redis-server"). */
static inline pid_t redis_fixture_spawn(char *const argv[])
{
	return redis_fixture_exec(REDIS_FIXTURE_SERVER, argv);
}

/* Kill server *@pid (SIGKILL, even a stopped one) and reap it; *@pid
 * becomes 0.  Nothing when it is 0 already. */
static inline void redis_fixture_kill(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

/* Stop @f's server and remove its directory; @f then holds nothing.
 * Safe on a fixture that is zeroed, stopped already or half started. */
static inline void redis_fixture_stop(struct redis_fixture *f)
{
	if (f->rc) {
		redisFree(f->rc);
		f->rc = NULL;
	}
	redis_fixture_kill(&f->pid);
	if (f->dir[0]) {
		unlink(f->sock);
		rmdir(f->dir);
		f->dir[0] = '\0';
	}
}

/*
 * Start a server in a new directory /tmp/statefs-@name.XXXXXX and
 * connect to it, waiting up to 30 s (a loaded machine may take a while
 * to start it).  0; -1 when the directory, the server or the connection
 * could not be made, with everything already stopped again.
 */
static inline int redis_fixture_start(struct redis_fixture *f, const char *name)
{
	char *argv[] = { "redis-server", "--port", "0", "--unixsocket", f->sock,
			 "--save", "", "--appendonly", "no", "--dir", f->dir,
			 NULL };

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/statefs-%s.XXXXXX", name);
	if (!mkdtemp(f->dir)) {
		f->dir[0] = '\0';
		return -1;
	}
	snprintf(f->sock, sizeof(f->sock), "%s/redis.sock", f->dir);
	f->pid = redis_fixture_spawn(argv);
	if (f->pid < 0) {
		f->pid = 0;
		redis_fixture_stop(f);
		return -1;
	}
	for (int i = 0; i < 1500 && !f->rc; i++) {
		redisContext *c = redisConnectUnix(f->sock);

		if (c && !c->err) {
			f->rc = c;
			break;
		}
		if (c)
			redisFree(c);
		nap(20);
	}
	if (!f->rc) {
		redis_fixture_stop(f);
		return -1;
	}
	return 0;
}

#endif /* STATEFS_UNIT_REDIS_FIXTURE_H */
