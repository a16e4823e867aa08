/*
 * test_remote_options.c - unit tests of the shared store options
 * (layout/store_options.c): store=URL in its three forms, the sentinel list
 * that FUSE splits at commas, store_user, store_password_file (read at
 * finish), store_prefix, store_timeout, store_limits, the one-line
 * refusals that name the option, and --help.
 *
 * Pure parsing, except the password file, which each test writes into its
 * own temporary directory and removes.
 */
#include "tests/unit/unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout/layout.h"

/* Apply @opt to @r; fail the test unless it is accepted. */
static void accept(struct store_remote *r, const char *opt)
{
	char err[300] = "";

	if (layout_remote_option(r, opt, err, sizeof(err)) != 1)
		fail_msg("'%s' refused: %s", opt, err);
	assert_string_equal(err, "");
}

/*
 * A refusal: -EINVAL, @r byte-identical, one line that starts with
 * "statefs: ", names "-o KEY" and holds @why_part (what a good value is).
 */
static void refuse_on(struct store_remote *r, const char *opt,
		      const char *key, const char *why_part)
{
	struct store_remote before = *r;
	char err[400] = "", name[64];

	if (layout_remote_option(r, opt, err, sizeof(err)) != -EINVAL)
		fail_msg("'%s' should be refused", opt);
	if (memcmp(r, &before, sizeof(before)) != 0)
		fail_msg("'%s' changed the options", opt);
	if (strlen(err) == 0 || strchr(err, '\n'))
		fail_msg("'%s': message not one line: '%s'", opt, err);
	assert_memory_equal(err, "statefs: ", 9);
	snprintf(name, sizeof(name), "-o %s", key);
	if (!strstr(err, name))
		fail_msg("'%s': message does not name %s: '%s'", opt, key, err);
	if (why_part && !strstr(err, why_part))
		fail_msg("'%s': message lacks '%s': '%s'", opt, why_part, err);
}

static void refuse(const char *opt, const char *key, const char *why_part)
{
	struct store_remote r;

	store_remote_default(&r);
	refuse_on(&r, opt, key, why_part);
}

/* layout_remote_finish must refuse @r naming @name. */
static void finish_refused(struct store_remote *r, const char *name)
{
	char err[400] = "";

	if (layout_remote_finish(r, err, sizeof(err)) >= 0)
		fail_msg("finish should refuse (%s)", name);
	if (strlen(err) == 0 || strchr(err, '\n'))
		fail_msg("finish: message not one line: '%s'", err);
	assert_memory_equal(err, "statefs: ", 9);
	if (!strstr(err, name))
		fail_msg("finish: message does not name %s: '%s'", name, err);
	assert_string_equal(r->password, "");
}

/* Defaults and URLs ------------------------------------------------------- */

static void test_defaults(void **state)
{
	struct store_remote r;
	char err[100];

	(void)state;
	store_remote_default(&r);
	assert_int_equal(r.kind, STORE_REMOTE_NONE);
	assert_string_equal(r.prefix, "statefs");
	assert_int_equal(r.timeout_ms, 2000);
	assert_false(r.adopt_limits);
	assert_string_equal(r.user, "");
	assert_string_equal(r.password_file, "");
	/* No option at all: the embedded store, nothing to check. */
	assert_int_equal(layout_remote_finish(&r, err, sizeof(err)), 0);
	assert_int_equal(r.kind, STORE_REMOTE_NONE);
}

static void test_store_tcp(void **state)
{
	struct store_remote r;
	char text[100];

	(void)state;
	store_remote_default(&r);
	accept(&r, "store=redis://127.0.0.1:6379");
	assert_int_equal(r.kind, STORE_REMOTE_TCP);
	assert_string_equal(r.addr.host, "127.0.0.1");
	assert_int_equal(r.addr.port, 6379);
	store_remote_describe(text, sizeof(text), &r);
	assert_string_equal(text, "redis://127.0.0.1:6379");

	accept(&r, "store=redis://redis.example:1");
	assert_string_equal(r.addr.host, "redis.example");
	assert_int_equal(r.addr.port, 1);
	accept(&r, "store=redis://[::1]:65535");
	assert_string_equal(r.addr.host, "::1");
	assert_int_equal(r.addr.port, 65535);
	store_remote_describe(text, sizeof(text), &r);
	assert_string_equal(text, "redis://[::1]:65535");
}

static void test_store_unix(void **state)
{
	struct store_remote r;
	char path[200], opt[220], text[200];

	(void)state;
	store_remote_default(&r);
	accept(&r, "store=unix:/run/redis/redis.sock");
	assert_int_equal(r.kind, STORE_REMOTE_UNIX);
	assert_string_equal(r.path, "/run/redis/redis.sock");
	store_remote_describe(text, sizeof(text), &r);
	assert_string_equal(text, "unix:/run/redis/redis.sock");

	/* The longest path a sockaddr_un holds, and one byte more. */
	memset(path, 'p', STORE_REMOTE_PATH_MAX + 1);
	path[0] = '/';
	path[STORE_REMOTE_PATH_MAX] = '\0';
	snprintf(opt, sizeof(opt), "store=unix:%s", path);
	accept(&r, opt);
	assert_string_equal(r.path, path);
	path[STORE_REMOTE_PATH_MAX] = 'p';
	path[STORE_REMOTE_PATH_MAX + 1] = '\0';
	snprintf(opt, sizeof(opt), "store=unix:%s", path);
	refuse(opt, "store", "107 bytes");
}

static void test_store_sentinel(void **state)
{
	struct store_remote r;
	char text[200], err[200];

	(void)state;
	store_remote_default(&r);
	accept(&r, "store=sentinel://10.0.0.1:26379,s2:26380,[fe80::1]:3/mymaster");
	assert_int_equal(r.kind, STORE_REMOTE_SENTINEL);
	assert_int_equal(r.nsentinels, 3);
	assert_string_equal(r.sentinels[0].host, "10.0.0.1");
	assert_int_equal(r.sentinels[0].port, 26379);
	assert_string_equal(r.sentinels[1].host, "s2");
	assert_int_equal(r.sentinels[1].port, 26380);
	assert_string_equal(r.sentinels[2].host, "fe80::1");
	assert_int_equal(r.sentinels[2].port, 3);
	assert_string_equal(r.master, "mymaster");
	assert_false(r.sentinel_open);
	assert_int_equal(layout_remote_finish(&r, err, sizeof(err)), 0);
	store_remote_describe(text, sizeof(text), &r);
	assert_string_equal(text,
			    "sentinel://10.0.0.1:26379,s2:26380,[fe80::1]:3/mymaster");

	store_remote_default(&r);
	accept(&r, "store=sentinel://h:1/m");
	assert_int_equal(r.nsentinels, 1);
	assert_string_equal(r.master, "m");
}

/* -o store=sentinel://a:1,b:2,c:3/m reaches statefs in three pieces. */
static void test_store_sentinel_split(void **state)
{
	struct store_remote r;
	char err[300];

	(void)state;
	store_remote_default(&r);
	accept(&r, "store=sentinel://a:1");
	assert_true(r.sentinel_open);
	accept(&r, "b:2");
	accept(&r, "c:3/m");
	assert_false(r.sentinel_open);
	assert_int_equal(r.nsentinels, 3);
	assert_string_equal(r.sentinels[1].host, "b");
	assert_int_equal(r.sentinels[2].port, 3);
	assert_string_equal(r.master, "m");
	assert_int_equal(layout_remote_finish(&r, err, sizeof(err)), 0);

	/* Once the list is closed, the next piece is not ours. */
	assert_int_equal(layout_remote_option(&r, "d:4", err, sizeof(err)), 0);
	assert_int_equal(layout_remote_option(&r, "allow_other", err,
					      sizeof(err)), 0);

	/* A bad piece is refused, naming store; the list stays open. */
	store_remote_default(&r);
	accept(&r, "store=sentinel://a:1");
	refuse_on(&r, "b:0/m", "store", "port");
	refuse_on(&r, "allow_other", "store", "port");
	assert_true(r.sentinel_open);
	/* Other options still apply while it is open... */
	accept(&r, "store_prefix=x");
	/* ...and a list never closed is refused at finish. */
	finish_refused(&r, "-o store");
}

static void test_store_bad_urls(void **state)
{
	static const struct {
		const char *opt;
		const char *why;
	} bad[] = {
		{ "store=", "redis://HOST:PORT" },
		{ "store=redis://h", "no port" },
		{ "store=redis://h:", "no port" },
		{ "store=redis://h:0", "1 to 65535" },
		{ "store=redis://h:65536", "1 to 65535" },
		{ "store=redis://h:99999999999999999999", "1 to 65535" },
		{ "store=redis://h:-1", "1 to 65535" },
		{ "store=redis://h:+1", "1 to 65535" },
		{ "store=redis://h:1x", "1 to 65535" },
		{ "store=redis://h:1/0", "1 to 65535" },
		{ "store=redis://:6379", "empty host" },
		{ "store=redis://", "empty address" },
		{ "store=redis://[::1]", "no port" },
		{ "store=redis://[::1", "']'" },
		{ "store=redis://[]:1", "empty host" },
		{ "store=redis://[::1]x:1", "[ADDRESS]:PORT" },
		{ "store=redis://::1:6379", "brackets" },
		{ "store=redis://user:pw@h:1", "credentials" },
		{ "store=redis://pw@h:1", "credentials" },
		{ "store=redis://a b:1", "no blanks" },
		{ "store=redis://a/b:1", "no blanks" },
		{ "store=redis://a\tb:1", "no blanks" },
		{ "store=unix:", "empty path" },
		{ "store=unix:relative.sock", "absolute" },
		{ "store=unix:/a\nb", "control" },
		{ "store=sentinel://", "no Sentinel address" },
		{ "store=sentinel:///m", "no Sentinel address" },
		{ "store=sentinel://h:1/", "no master name" },
		{ "store=sentinel://h/m", "no port" },
		{ "store=sentinel://h:0/m", "1 to 65535" },
		{ "store=sentinel://h:1,,h:2/m", "empty address" },
		{ "store=sentinel://h:1,/m", "empty address" },
		{ "store=sentinel://h:1/m m", "master name" },
		{ "store=sentinel://h:1/a/b", "master name" },
		{ "store=rediss://h", "no port" },
		{ "store=rediss://user:pw@h:1", "credentials" },
		{ "store=sentinels://h:1/", "no master name" },
		{ "store=redisss://h:1", "redis://HOST:PORT" },
		{ "store=sentinelss://h:1/m", "redis://HOST:PORT" },
		{ "store=http://h:1", "redis://HOST:PORT" },
		{ "store=redis:/h:1", "redis://HOST:PORT" },
		{ "store=REDIS://h:1", "redis://HOST:PORT" },
		{ "store=h:6379", "redis://HOST:PORT" },
		{ "store=/run/redis.sock", "redis://HOST:PORT" },
		{ "store", "needs a value" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refuse(bad[i].opt, "store", bad[i].why);
}

static void test_store_too_many_sentinels(void **state)
{
	char opt[400];
	size_t n;
	struct store_remote r;

	(void)state;
	n = (size_t)snprintf(opt, sizeof(opt), "store=sentinel://");
	for (int i = 0; i < STORE_REMOTE_SENTINELS_MAX; i++)
		n += (size_t)snprintf(opt + n, sizeof(opt) - n, "%sh:%d",
				      i ? "," : "", i + 1);
	snprintf(opt + n, sizeof(opt) - n, "/m");
	store_remote_default(&r);
	accept(&r, opt);
	assert_int_equal(r.nsentinels, STORE_REMOTE_SENTINELS_MAX);

	snprintf(opt + n, sizeof(opt) - n, ",h:99/m");
	refuse(opt, "store", "at most 16");

	/* The same bound across split pieces. */
	opt[n] = '\0';
	store_remote_default(&r);
	accept(&r, opt);
	refuse_on(&r, "h:99/m", "store", "at most 16");
}

/* A refused store= after a good one keeps the good one. */
static void test_store_last_wins(void **state)
{
	struct store_remote r, before;

	(void)state;
	store_remote_default(&r);
	accept(&r, "store=sentinel://a:1,b:2/m");
	accept(&r, "store=redis://h:7");
	assert_int_equal(r.kind, STORE_REMOTE_TCP);
	assert_int_equal(r.nsentinels, 0);
	assert_string_equal(r.master, "");
	before = r;
	refuse_on(&r, "store=redis://h:0", "store", "port");
	assert_memory_equal(&r, &before, sizeof(r));
}

/* The other options ------------------------------------------------------- */

static void test_prefix(void **state)
{
	struct store_remote r;
	char long_name[100], opt[120];

	(void)state;
	store_remote_default(&r);
	accept(&r, "store_prefix=app1");
	assert_string_equal(r.prefix, "app1");
	accept(&r, "store_prefix=a:b.c-d_e");
	assert_string_equal(r.prefix, "a:b.c-d_e");
	memset(long_name, 'x', 64);
	long_name[64] = '\0';
	snprintf(opt, sizeof(opt), "store_prefix=%s", long_name);
	accept(&r, opt);
	assert_int_equal(strlen(r.prefix), 64);
	strcat(opt, "x");
	refuse(opt, "store_prefix", "64 bytes");

	refuse("store_prefix=", "store_prefix", "'{'");
	refuse("store_prefix=a{b", "store_prefix", "'{'");
	refuse("store_prefix=a}", "store_prefix", "'{'");
	refuse("store_prefix={x}", "store_prefix", "'{'");
	refuse("store_prefix=a b", "store_prefix", "blanks");
	refuse("store_prefix=a\x01", "store_prefix", "control");
	refuse("store_prefix=a\x7f", "store_prefix", "control");
	refuse("store_prefix", "store_prefix", "needs a value");
}

static void test_timeout(void **state)
{
	struct store_remote r;

	(void)state;
	store_remote_default(&r);
	accept(&r, "store_timeout=5");
	assert_int_equal(r.timeout_ms, 5000);
	accept(&r, "store_timeout=0.25");
	assert_int_equal(r.timeout_ms, 250);
	accept(&r, "store_timeout=0.001");
	assert_int_equal(r.timeout_ms, 1);
	accept(&r, "store_timeout=300");
	assert_int_equal(r.timeout_ms, 300000);

	refuse("store_timeout=0", "store_timeout", "> 0");
	refuse("store_timeout=0.000", "store_timeout", "> 0");
	refuse("store_timeout=300.001", "store_timeout", "300");
	refuse("store_timeout=1000000", "store_timeout", "300");
	refuse("store_timeout=-1", "store_timeout", "seconds");
	refuse("store_timeout=1.2345", "store_timeout", "decimals");
	refuse("store_timeout=2s", "store_timeout", "seconds");
	refuse("store_timeout=", "store_timeout", "seconds");
}

static void test_user_and_limits(void **state)
{
	struct store_remote r;
	char name[300], opt[320];

	(void)state;
	store_remote_default(&r);
	accept(&r, "store_user=statefs-app");
	assert_string_equal(r.user, "statefs-app");
	memset(name, 'u', 255);
	name[255] = '\0';
	snprintf(opt, sizeof(opt), "store_user=%s", name);
	accept(&r, opt);
	strcat(opt, "u");
	refuse(opt, "store_user", "255 bytes");
	refuse("store_user=", "store_user", "255 bytes");
	refuse("store_user=a b", "store_user", "no blanks");
	refuse("store_user=a\nb", "store_user", "no blanks");

	accept(&r, "store_limits=adopt");
	assert_true(r.adopt_limits);
	accept(&r, "store_limits=check");
	assert_false(r.adopt_limits);
	refuse("store_limits=yes", "store_limits", "adopt or check");
	refuse("store_limits=", "store_limits", "adopt or check");
	refuse("store_limits", "store_limits", "needs a value");
	refuse("store_password_file=", "store_password_file", "file");
}

static void test_not_ours(void **state)
{
	static const char *const other[] = {
		"max_tenants=3", "allow_other", "default_permissions",
		"stores=redis://h:1", "store_=1", "Store=redis://h:1",
		"store_userx=a", "xstore=redis://h:1", "", "=5", "h:1",
		"testclock",
	};
	struct store_remote r, before;
	char err[100];

	(void)state;
	store_remote_default(&r);
	before = r;
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		strcpy(err, "untouched");
		if (layout_remote_option(&r, other[i], err, sizeof(err)) != 0)
			fail_msg("'%s' is not a shared store option", other[i]);
		assert_memory_equal(&r, &before, sizeof(r));
		assert_string_equal(err, "untouched");
	}
}

static void test_message_one_line(void **state)
{
	struct store_remote r;
	char err[300], small[12];

	(void)state;
	store_remote_default(&r);
	assert_int_equal(layout_remote_option(&r, "store=redis://a\nb:1", err,
					      sizeof(err)), -EINVAL);
	assert_null(strchr(err, '\n'));
	assert_int_equal(layout_remote_option(&r, "store=bogus", err,
					      sizeof(err)), -EINVAL);
	assert_string_equal(err, "statefs: bad value for -o store: 'bogus' "
				 "(redis://HOST:PORT, rediss://HOST:PORT, "
				 "unix:/PATH, sentinel://HOST:PORT,.../MASTER, "
				 "sentinels://..., cluster://HOST:PORT,... or "
				 "clusters://...)");
	/* Truncated, and no room at all. */
	memset(small, 'x', sizeof(small));
	assert_int_equal(layout_remote_option(&r, "store=bogus", small,
					      sizeof(small)), -EINVAL);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_int_equal(layout_remote_option(&r, "store=bogus", NULL, 0),
			 -EINVAL);
	assert_int_equal(layout_remote_option(&r, "store", NULL, 0), -EINVAL);
}

/* TLS ---------------------------------------------------------------------- */

static void test_store_tls(void **state)
{
	struct store_remote r;
	char text[200];

	(void)state;
	store_remote_default(&r);
	assert_false(r.tls);
	accept(&r, "store=rediss://redis.example:6380");
	assert_int_equal(r.kind, STORE_REMOTE_TCP);
	assert_true(r.tls);
	assert_string_equal(r.addr.host, "redis.example");
	assert_int_equal(r.addr.port, 6380);
	store_remote_describe(text, sizeof(text), &r);
	assert_string_equal(text, "rediss://redis.example:6380");
	/* A later store= replaces the earlier one, TLS included. */
	accept(&r, "store=redis://h:1");
	assert_false(r.tls);
	accept(&r, "store=sentinels://a:1,[::1]:2/m");
	assert_int_equal(r.kind, STORE_REMOTE_SENTINEL);
	assert_true(r.tls);
	assert_int_equal(r.nsentinels, 2);
	store_remote_describe(text, sizeof(text), &r);
	assert_string_equal(text, "sentinels://a:1,[::1]:2/m");
	/* FUSE splits the list at commas: the TLS survives the pieces. */
	store_remote_default(&r);
	accept(&r, "store=sentinels://a:1");
	assert_int_equal(layout_remote_option(&r, "b:2/m", text, sizeof(text)), 1);
	assert_true(r.tls);
	assert_int_equal(r.nsentinels, 2);
	assert_string_equal(r.master, "m");
	accept(&r, "store_tls_ca=/etc/ssl/ca.pem");
	accept(&r, "store_tls_cert=/etc/statefs/client.pem");
	accept(&r, "store_tls_key=/etc/statefs/client.key");
	accept(&r, "store_tls_name=redis.example");
	assert_string_equal(r.tls_ca, "/etc/ssl/ca.pem");
	assert_string_equal(r.tls_cert, "/etc/statefs/client.pem");
	assert_string_equal(r.tls_key, "/etc/statefs/client.key");
	assert_string_equal(r.tls_name, "redis.example");
	assert_int_equal(layout_remote_finish(&r, text, sizeof(text)), 0);

	refuse("store_tls_ca=ca.pem", "store_tls_ca", "absolute path");
	refuse("store_tls_cert=", "store_tls_cert", "absolute path");
	refuse("store_tls_key=./k", "store_tls_key", "absolute path");
	refuse("store_tls_name=", "store_tls_name", "host name");
	refuse("store_tls_name=a b", "store_tls_name", "host name");
	refuse("store_tls_name=a/b", "store_tls_name", "host name");
	refuse("store_tls_ca", "store_tls_ca", "needs a value");
}

static void test_finish_tls(void **state)
{
	static const char *const lone[] = {
		"store_tls_ca=/a", "store_tls_cert=/a", "store_tls_key=/a",
		"store_tls_name=n",
	};
	struct store_remote r;

	(void)state;
	/* Without a store, or with a plain one: refused, named. */
	for (size_t i = 0; i < sizeof(lone) / sizeof(lone[0]); i++) {
		char key[40];

		snprintf(key, sizeof(key), "-o %.*s",
			 (int)strcspn(lone[i], "="), lone[i]);
		store_remote_default(&r);
		accept(&r, lone[i]);
		finish_refused(&r, key);
		store_remote_default(&r);
		accept(&r, "store=redis://h:1");
		accept(&r, lone[i]);
		finish_refused(&r, key);
		store_remote_default(&r);
		accept(&r, "store=unix:/run/r.sock");
		accept(&r, lone[i]);
		finish_refused(&r, "TLS");
	}
	/* A certificate and its key go together. */
	store_remote_default(&r);
	accept(&r, "store=rediss://h:1");
	accept(&r, "store_tls_cert=/c");
	finish_refused(&r, "-o store_tls_key");
	store_remote_default(&r);
	accept(&r, "store=rediss://h:1");
	accept(&r, "store_tls_key=/k");
	finish_refused(&r, "-o store_tls_cert");
}

/* Finish: what goes together ---------------------------------------------- */

static void test_finish_needs_store(void **state)
{
	static const char *const lone[] = {
		"store_user=u", "store_password_file=/etc/hostname",
		"store_prefix=p", "store_timeout=3", "store_limits=adopt",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(lone) / sizeof(lone[0]); i++) {
		struct store_remote r;
		char key[40];

		store_remote_default(&r);
		accept(&r, lone[i]);
		snprintf(key, sizeof(key), "-o %.*s",
			 (int)strcspn(lone[i], "="), lone[i]);
		finish_refused(&r, key);
	}
}

static void test_finish_user_needs_password(void **state)
{
	struct store_remote r;

	(void)state;
	store_remote_default(&r);
	accept(&r, "store=redis://h:1");
	accept(&r, "store_user=alice");
	finish_refused(&r, "-o store_password_file");
}

/* Password files ------------------------------------------------------------ */

struct tmpdir {
	char path[64];
	char file[96];
};

static int tmp_setup(void **state)
{
	struct tmpdir *t = calloc(1, sizeof(*t));

	if (!t)
		return -1;
	strcpy(t->path, "/tmp/statefs-remote.XXXXXX");
	if (!mkdtemp(t->path)) {
		free(t);
		return -1;
	}
	snprintf(t->file, sizeof(t->file), "%s/pw", t->path);
	*state = t;
	return 0;
}

static int tmp_teardown(void **state)
{
	struct tmpdir *t = *state;
	char sub[128];

	unlink(t->file);
	snprintf(sub, sizeof(sub), "%s/dir", t->path);
	rmdir(sub);
	rmdir(t->path);
	free(t);
	return 0;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

/* A shared store whose password is in @file; finish's result. */
static int finish_with(struct store_remote *r, const char *file, char *err,
		       size_t errlen)
{
	char opt[200];

	store_remote_default(r);
	accept(r, "store=unix:/run/redis.sock");
	snprintf(opt, sizeof(opt), "store_password_file=%s", file);
	accept(r, opt);
	return layout_remote_finish(r, err, errlen);
}

static void test_password_read(void **state)
{
	static const struct {
		const char *text;
		size_t len;
		const char *want;
	} good[] = {
		{ "s3cret\n", 7, "s3cret" },
		{ "s3cret", 6, "s3cret" },
		{ "s3cret\r\n", 8, "s3cret" },
		{ "first\nsecond\n", 13, "first" },
		{ "with blanks and # =,\n", 21, "with blanks and # =," },
		{ "tail\r", 5, "tail\r" },
	};
	struct tmpdir *t = *state;
	struct store_remote r;
	char err[300];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		write_file(t->file, good[i].text, good[i].len);
		if (finish_with(&r, t->file, err, sizeof(err)) != 0)
			fail_msg("case %zu refused: %s", i, err);
		assert_string_equal(r.password, good[i].want);
	}

	/* With a user: AUTH user password. */
	write_file(t->file, "pw\n", 3);
	store_remote_default(&r);
	accept(&r, "store=redis://127.0.0.1:6379");
	accept(&r, "store_user=alice");
	{
		char opt[200];

		snprintf(opt, sizeof(opt), "store_password_file=%s", t->file);
		accept(&r, opt);
	}
	assert_int_equal(layout_remote_finish(&r, err, sizeof(err)), 0);
	assert_string_equal(r.user, "alice");
	assert_string_equal(r.password, "pw");
}

static void test_password_longest(void **state)
{
	struct tmpdir *t = *state;
	struct store_remote r;
	char text[STORE_REMOTE_PASSWORD_MAX + 3], err[300];

	memset(text, 'p', sizeof(text));
	/* 1023 bytes and "\r\n": the longest. */
	text[STORE_REMOTE_PASSWORD_MAX] = '\r';
	text[STORE_REMOTE_PASSWORD_MAX + 1] = '\n';
	write_file(t->file, text, STORE_REMOTE_PASSWORD_MAX + 2);
	assert_int_equal(finish_with(&r, t->file, err, sizeof(err)), 0);
	assert_int_equal(strlen(r.password), STORE_REMOTE_PASSWORD_MAX);

	/* 1024 bytes, with or without a newline: too long. */
	memset(text, 'p', sizeof(text));
	text[STORE_REMOTE_PASSWORD_MAX + 1] = '\n';
	write_file(t->file, text, STORE_REMOTE_PASSWORD_MAX + 2);
	assert_int_equal(finish_with(&r, t->file, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "longer than 1023"));
	write_file(t->file, text, STORE_REMOTE_PASSWORD_MAX + 1);
	assert_int_equal(finish_with(&r, t->file, err, sizeof(err)), -EINVAL);
	assert_string_equal(r.password, "");
}

static void test_password_refused(void **state)
{
	static const struct {
		const char *text;
		size_t len;
		const char *why;
	} bad[] = {
		{ "", 0, "empty" },
		{ "\n", 1, "empty" },
		{ "\r\n", 2, "empty" },
		{ "\nsecond\n", 8, "empty" },
		{ "a\0b\n", 4, "NUL" },
	};
	struct tmpdir *t = *state;
	struct store_remote r;
	char err[300], dir[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(t->file, bad[i].text, bad[i].len);
		err[0] = '\0';
		assert_int_equal(finish_with(&r, t->file, err, sizeof(err)),
				 -EINVAL);
		if (!strstr(err, bad[i].why) ||
		    !strstr(err, "-o store_password_file") ||
		    strchr(err, '\n'))
			fail_msg("case %zu: '%s'", i, err);
		assert_string_equal(r.password, "");
	}

	/* Missing, a directory, unreadable. */
	unlink(t->file);
	assert_int_equal(finish_with(&r, t->file, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "-o store_password_file"));
	assert_non_null(strstr(err, t->file));
	assert_non_null(strstr(err, "No such file"));

	snprintf(dir, sizeof(dir), "%s/dir", t->path);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_true(finish_with(&r, dir, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "-o store_password_file"));

	write_file(t->file, "pw\n", 3);
	assert_int_equal(chmod(t->file, 0), 0);
	if (geteuid() != 0) {
		assert_int_equal(finish_with(&r, t->file, err, sizeof(err)),
				 -EACCES);
		assert_non_null(strstr(err, "Permission denied"));
	}
	/* A FIFO would block the start: refused without blocking. */
	unlink(t->file);
	assert_int_equal(mkfifo(t->file, 0600), 0);
	assert_int_equal(finish_with(&r, t->file, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "regular file"));
	assert_string_equal(r.password, "");
}

/* --help -------------------------------------------------------------------- */

static void test_help(void **state)
{
	static const struct {
		const char *spec;
		const char *def;
	} want[] = {
		{ "store=URL", "none, the embedded store" },
		{ "store_user=NAME", "none" },
		{ "store_password_file=PATH", "none" },
		{ "store_prefix=NAME", "statefs" },
		{ "store_timeout=SECONDS", "2" },
		{ "store_limits=adopt|check", "check" },
		{ "lock_timeout=SECONDS", "10" },
		{ "follow_idle=SECONDS", "30" },
		{ "follow_gather=SECONDS", "0" },
		{ "store_layout=root|tenant", "root" },
		{ "store_tls_ca=PATH", "the system's trust store" },
		{ "store_tls_cert=PATH", "none" },
		{ "store_tls_key=PATH", "none" },
		{ "store_tls_name=NAME", "the host of the URL" },
	};
	char *text = NULL, *line, *save = NULL;
	size_t len = 0, n = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	layout_remote_help(f);
	assert_int_equal(fclose(f), 0);
	line = strtok_r(text, "\n", &save);
	assert_non_null(line);
	assert_null(strstr(line, "-o ")); /* a header first */
	while ((line = strtok_r(NULL, "\n", &save))) {
		char prefix[64], def[64];

		assert_true(n < sizeof(want) / sizeof(want[0]));
		snprintf(prefix, sizeof(prefix), "    -o %s ", want[n].spec);
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			fail_msg("help line %zu: '%s'", n, line);
		snprintf(def, sizeof(def), "(default: %s", want[n].def);
		if (!strstr(line, def))
			fail_msg("help line %zu lacks '%s': '%s'", n, def, line);
		n++;
	}
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_store_tcp),
		cmocka_unit_test(test_store_unix),
		cmocka_unit_test(test_store_sentinel),
		cmocka_unit_test(test_store_sentinel_split),
		cmocka_unit_test(test_store_bad_urls),
		cmocka_unit_test(test_store_too_many_sentinels),
		cmocka_unit_test(test_store_last_wins),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_user_and_limits),
		cmocka_unit_test(test_not_ours),
		cmocka_unit_test(test_message_one_line),
		cmocka_unit_test(test_finish_needs_store),
		cmocka_unit_test(test_store_tls),
		cmocka_unit_test(test_finish_tls),
		cmocka_unit_test(test_finish_user_needs_password),
		cmocka_unit_test_setup_teardown(test_password_read, tmp_setup,
						tmp_teardown),
		cmocka_unit_test_setup_teardown(test_password_longest,
						tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_password_refused,
						tmp_setup, tmp_teardown),
		cmocka_unit_test(test_help),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
