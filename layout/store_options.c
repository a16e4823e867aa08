/*
 * store_options.c - the shared store mount options: where the Redis primary is
 * (store=URL), how to authenticate (store_user, store_password_file),
 * which keys are this store's (store_prefix), how long an operation waits
 * (store_timeout), whose limits count (store_limits), how long a mount's
 * locks outlive its reach of the store (lock_timeout) and, for a store
 * reached over TLS (rediss://, sentinels://), what verifies the servers
 * and what this mount shows them (store_tls_ca, store_tls_cert,
 * store_tls_key, store_tls_name).
 *
 * Owns one constant table, the option keys; every function but
 * layout_remote_finish is pure.  layout_remote_finish reads the password
 * file once at start, before anything is mounted, so that a bad file is a
 * one-line refusal and the password never appears on a command line.
 *
 * Addresses are checked here as far as text can be: a scheme statefs
 * knows, a host, a port from 1 to 65535, an absolute socket path that
 * fits a sockaddr_un, a Sentinel list with a master name.  Credentials in
 * the URL (user:pass@) are refused: they would be visible in ps.  The TLS
 * files are only named here; redis/link.c reads them when the store is
 * opened, before anything is mounted, and says which one it could not
 * use.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout/layout.h"

/* Messages ---------------------------------------------------------------- */

/* Replace control bytes so a message from user text stays on one line. */
static void one_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			*s = '?';
}

/* "statefs: bad value for -o KEY: 'VALUE' (WHY)" into @err; -EINVAL. */
static int bad_value(char *err, size_t errlen, const char *key,
		     const char *value, const char *why)
{
	if (errlen == 0)
		return -EINVAL;
	snprintf(err, errlen, "statefs: bad value for -o %s: '%s' (%s)", key,
		 value, why);
	one_line(err);
	return -EINVAL;
}

/* Text checks --------------------------------------------------------------- */

/* A byte that never belongs in a host, a name or a prefix. */
static bool blank_or_control(unsigned char c)
{
	return c <= ' ' || c == 0x7f;
}

/* Copy [s, s+len) into @out (capacity @cap, NUL-terminated). */
static void copy_text(char *out, size_t cap, const char *s, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(out, s, len);
	out[len] = '\0';
}

/*
 * Parse "HOST:PORT" or "[IPV6]:PORT" from [s, s+len) into @a.  0, or
 * -EINVAL with what a good address is in *@why.
 */
static int parse_hostport(const char *s, size_t len,
			  struct store_remote_addr *a, const char **why)
{
	const char *host, *colon, *end = s + len;
	size_t hlen;
	uint64_t port = 0;

	if (len == 0) {
		*why = "an empty address: HOST:PORT";
		return -EINVAL;
	}
	if (memchr(s, '@', len)) {
		*why = "no credentials in the URL: use -o store_user and "
		       "-o store_password_file";
		return -EINVAL;
	}
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close) {
			*why = "no ']' after an IPv6 address: [ADDRESS]:PORT";
			return -EINVAL;
		}
		host = s + 1;
		hlen = (size_t)(close - host);
		colon = close + 1 < end && close[1] == ':' ? close + 1 : NULL;
		if (!colon && close + 1 < end) {
			*why = "a port after the IPv6 address: [ADDRESS]:PORT";
			return -EINVAL;
		}
	} else {
		host = s;
		colon = memchr(s, ':', len);
		hlen = colon ? (size_t)(colon - s) : len;
		if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1))) {
			*why = "an IPv6 address goes in brackets: [ADDRESS]:PORT";
			return -EINVAL;
		}
	}
	if (hlen == 0) {
		*why = "an empty host: HOST:PORT";
		return -EINVAL;
	}
	if (hlen > STORE_REMOTE_HOST_MAX) {
		*why = "a host of at most 255 bytes";
		return -EINVAL;
	}
	for (size_t i = 0; i < hlen; i++) {
		unsigned char c = (unsigned char)host[i];

		if (blank_or_control(c) || strchr("/,[]", c)) {
			*why = "a host name or address, no blanks or '/,[]'";
			return -EINVAL;
		}
	}
	if (!colon || colon + 1 == end) {
		*why = "no port: HOST:PORT";
		return -EINVAL;
	}
	/* At most 5 digits: the number cannot overflow. */
	for (const char *p = colon + 1; p < end; p++) {
		if (*p < '0' || *p > '9' || p - colon > 5) {
			*why = "a port from 1 to 65535";
			return -EINVAL;
		}
		port = port * 10 + (uint64_t)(*p - '0');
	}
	if (port < 1 || port > 65535) {
		*why = "a port from 1 to 65535";
		return -EINVAL;
	}
	copy_text(a->host, sizeof(a->host), host, hlen);
	a->port = (uint16_t)port;
	return 0;
}

/* A name that goes into a Redis key or command: 1..@max bytes, no blanks
 * or control bytes, none of @forbidden. */
static bool good_name(const char *s, size_t len, size_t max,
		      const char *forbidden)
{
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++)
		if (blank_or_control((unsigned char)s[i]) ||
		    strchr(forbidden, s[i]))
			return false;
	return true;
}

/*
 * Add the addresses of [@s, @end) ("H:P,H:P", a trailing comma allowed:
 * it ends an -o piece) to @r's list (r->sentinels: a Sentinel list or a
 * cluster's seeds).  @many: the refusal past STORE_REMOTE_SENTINELS_MAX;
 * @slashed: the refusal of an address holding a '/' (NULL: none holds
 * one).  0, or -EINVAL with *@why.
 */
static int parse_addrs(struct store_remote *r, const char *s, const char *end,
		       const char *many, const char *slashed, const char **why)
{
	while (s < end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *stop = comma ? comma : end;

		if (r->nsentinels == STORE_REMOTE_SENTINELS_MAX) {
			*why = many;
			return -EINVAL;
		}
		if (slashed && memchr(s, '/', (size_t)(stop - s))) {
			*why = slashed;
			return -EINVAL;
		}
		if (parse_hostport(s, (size_t)(stop - s),
				   &r->sentinels[r->nsentinels], why) < 0)
			return -EINVAL;
		r->nsentinels++;
		s = comma ? stop + 1 : stop;
	}
	return 0;
}

/*
 * Add the Sentinel addresses of @s ("H:P,H:P" optionally followed by
 * "/MASTER") to @r.  A list without "/MASTER" leaves @r->sentinel_open
 * set: the rest arrives as the next option.
 */
static int parse_sentinels(struct store_remote *r, const char *s,
			   const char **why)
{
	const char *slash = strchr(s, '/');
	const char *end = slash ? slash : s + strlen(s);

	if (s == end && r->nsentinels == 0) {
		*why = "no Sentinel address: sentinel://HOST:PORT,.../MASTER";
		return -EINVAL;
	}
	if (parse_addrs(r, s, end, "at most 16 Sentinels", NULL, why) < 0)
		return -EINVAL;
	/* "H:P," ends an -o piece; "H:P,/M" is an empty one. */
	if (slash && end > s && end[-1] == ',') {
		*why = "an empty address: HOST:PORT";
		return -EINVAL;
	}
	r->sentinel_open = !slash;
	if (slash) {
		const char *m = slash + 1;

		if (*m == '\0') {
			*why = "no master name: sentinel://HOST:PORT,.../MASTER";
			return -EINVAL;
		}
		if (!good_name(m, strlen(m), STORE_REMOTE_NAME_MAX, "/")) {
			*why = "a master name of 1 to 255 bytes, no blanks or '/'";
			return -EINVAL;
		}
		copy_text(r->master, sizeof(r->master), m, strlen(m));
	}
	return 0;
}

/*
 * Add the seed addresses of @s ("H:P,H:P") to @r, a cluster:// store.
 * An empty list is refused; a trailing comma ends an -o piece.
 */
static int parse_seeds(struct store_remote *r, const char *s, const char **why)
{
	const char *end = s + strlen(s);

	if (s == end && r->nsentinels == 0) {
		*why = "no seed address: cluster://HOST:PORT,...";
		return -EINVAL;
	}
	if (parse_addrs(r, s, end, "at most 16 seed nodes",
			"seed nodes HOST:PORT, no '/': cluster://HOST:PORT,...",
			why) < 0)
		return -EINVAL;
	r->cluster_open = true;
	return 0;
}

/* A redis:// or rediss:// store's HOST:PORT @v. */
static int parse_tcp(struct store_remote *r, const char *v, const char **why)
{
	return parse_hostport(v, strlen(v), &r->addr, why);
}

/* A unix: store's socket path @v. */
static int parse_unix(struct store_remote *r, const char *v, const char **why)
{
	if (*v == '\0') {
		*why = "an empty path: unix:/PATH";
		return -EINVAL;
	}
	/* The daemon runs from "/" once it is in the background. */
	if (*v != '/') {
		*why = "an absolute path: unix:/PATH";
		return -EINVAL;
	}
	if (strlen(v) > STORE_REMOTE_PATH_MAX) {
		*why = "a socket path of at most 107 bytes";
		return -EINVAL;
	}
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f) {
			*why = "a path without control bytes";
			return -EINVAL;
		}
	copy_text(r->path, sizeof(r->path), v, strlen(v));
	return 0;
}

/* The kinds of store= URL: each scheme, what it makes, and its parser. */
static const struct {
	const char *scheme;
	enum store_remote_kind kind;
	bool tls;
	int (*parse)(struct store_remote *r, const char *v, const char **why);
} schemes[] = {
	{ "redis://", STORE_REMOTE_TCP, false, parse_tcp },
	{ "rediss://", STORE_REMOTE_TCP, true, parse_tcp },
	{ "unix:", STORE_REMOTE_UNIX, false, parse_unix },
	{ "sentinel://", STORE_REMOTE_SENTINEL, false, parse_sentinels },
	{ "sentinels://", STORE_REMOTE_SENTINEL, true, parse_sentinels },
	{ "cluster://", STORE_REMOTE_CLUSTER, false, parse_seeds },
	{ "clusters://", STORE_REMOTE_CLUSTER, true, parse_seeds },
};

/* Apply store=@v to @r (a copy: the caller keeps it only on success). */
static int parse_store(struct store_remote *r, const char *v, const char **why)
{
	/* A later store= replaces the earlier one entirely. */
	memset(&r->addr, 0, sizeof(r->addr));
	memset(r->path, 0, sizeof(r->path));
	memset(r->sentinels, 0, sizeof(r->sentinels));
	memset(r->master, 0, sizeof(r->master));
	r->nsentinels = 0;
	r->sentinel_open = false;
	r->cluster_open = false;
	r->tls = false;

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i].scheme);

		if (strncmp(v, schemes[i].scheme, n) == 0) {
			r->kind = schemes[i].kind;
			r->tls = schemes[i].tls;
			return schemes[i].parse(r, v + n, why);
		}
	}
	*why = "redis://HOST:PORT, rediss://HOST:PORT, unix:/PATH, "
	       "sentinel://HOST:PORT,.../MASTER, sentinels://..., "
	       "cluster://HOST:PORT,... or clusters://...";
	return -EINVAL;
}

/* Options ------------------------------------------------------------------ */

enum remote_key {
	KEY_STORE,
	KEY_USER,
	KEY_PASSWORD_FILE,
	KEY_PREFIX,
	KEY_TIMEOUT,
	KEY_LIMITS,
	KEY_LOCK_TIMEOUT,
	KEY_FOLLOW_IDLE,
	KEY_FOLLOW_GATHER,
	KEY_LAYOUT,
	KEY_TLS_CA,
	KEY_TLS_CERT,
	KEY_TLS_KEY,
	KEY_TLS_NAME,
};

/* Table order is --help order; each key's bit is STORE_REMOTE_GIVEN_*. */
static const struct {
	const char *key;
	const char *spec;    /* for --help */
	const char *meaning; /* for --help */
	const char *def;     /* the default, for --help */
	unsigned given;
} keys[] = {
	[KEY_STORE] = { "store", "store=URL",
			"the shared store: redis://HOST:PORT, unix:/PATH, "
			"sentinel://HOST:PORT,.../MASTER, "
			"cluster://HOST:PORT,... (TLS: rediss, sentinels, "
			"clusters)",
			"none, the embedded store", STORE_REMOTE_GIVEN_STORE },
	[KEY_USER] = { "store_user", "store_user=NAME",
		       "the Redis ACL user to authenticate as",
		       "none, the password alone", STORE_REMOTE_GIVEN_USER },
	[KEY_PASSWORD_FILE] = { "store_password_file",
				"store_password_file=PATH",
				"a file whose first line is the password",
				"none, no AUTH", STORE_REMOTE_GIVEN_PASSWORD },
	[KEY_PREFIX] = { "store_prefix", "store_prefix=NAME",
			 "the prefix of this store's keys in Redis",
			 "statefs", STORE_REMOTE_GIVEN_PREFIX },
	[KEY_TIMEOUT] = { "store_timeout", "store_timeout=SECONDS",
			  "how long an operation waits for Redis "
			  "(at most 300)",
			  "2", STORE_REMOTE_GIVEN_TIMEOUT },
	[KEY_LIMITS] = { "store_limits", "store_limits=adopt|check",
			 "take the store's recorded limits instead of "
			 "refusing different ones",
			 "check", STORE_REMOTE_GIVEN_LIMITS },
	[KEY_LOCK_TIMEOUT] = { "lock_timeout", "lock_timeout=SECONDS",
			       "how long the locks of a mount that died or "
			       "lost the store outlive it (0.1 to 3600)",
			       "10", STORE_REMOTE_GIVEN_LOCK_TIMEOUT },
	[KEY_FOLLOW_IDLE] = { "follow_idle", "follow_idle=SECONDS",
			      "stop following a tenant this mount has not "
			      "used for that long and the kernel holds "
			      "nothing of (0: follow every tenant)",
			      "30", STORE_REMOTE_GIVEN_FOLLOW },
	[KEY_FOLLOW_GATHER] = { "follow_gather", "follow_gather=SECONDS",
				"after a read, wait that long for other "
				"mounts' changes to read them together, "
				"while none of this mount's is on its way "
				"(at most 1; 0: read each at once)",
				"0", STORE_REMOTE_GIVEN_GATHER },
	[KEY_LAYOUT] = { "store_layout", "store_layout=root|tenant",
			 "how a store this mount makes keeps its tenants: "
			 "tenant, every tenant's facts in its own slot (as "
			 "a Redis Cluster needs); a store made already keeps "
			 "its own",
			 "root", STORE_REMOTE_GIVEN_LAYOUT },
	[KEY_TLS_CA] = { "store_tls_ca", "store_tls_ca=PATH",
			 "the PEM file of the CAs that sign the servers' "
			 "certificates (TLS)",
			 "the system's trust store", STORE_REMOTE_GIVEN_TLS_CA },
	[KEY_TLS_CERT] = { "store_tls_cert", "store_tls_cert=PATH",
			   "the PEM file of this mount's certificate, for "
			   "servers that ask for one (TLS)",
			   "none", STORE_REMOTE_GIVEN_TLS_CERT },
	[KEY_TLS_KEY] = { "store_tls_key", "store_tls_key=PATH",
			  "the PEM file of that certificate's private key",
			  "none", STORE_REMOTE_GIVEN_TLS_KEY },
	[KEY_TLS_NAME] = { "store_tls_name", "store_tls_name=NAME",
			   "the name the servers' certificates must carry "
			   "(TLS)",
			   "the host of the URL", STORE_REMOTE_GIVEN_TLS_NAME },
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* store_layout=@v into @r: its own function, since a layout is also
 * chosen by what a store turns out to be (a cluster).  0 or -EINVAL
 * with *@why. */
static int parse_layout(struct store_remote *r, const char *v,
			const char **why)
{
	if (strcmp(v, "tenant") == 0)
		r->layout_tenant = true;
	else if (strcmp(v, "root") == 0)
		r->layout_tenant = false;
	else {
		*why = "root or tenant";
		return -EINVAL;
	}
	return 0;
}

/* Apply @key=@v to @r (a copy).  0 or -EINVAL with *@why. */
static int apply(struct store_remote *r, enum remote_key key, const char *v,
		 const char **why)
{
	uint64_t ms;

	switch (key) {
	case KEY_STORE:
		return parse_store(r, v, why);
	case KEY_USER:
		if (!good_name(v, strlen(v), STORE_REMOTE_NAME_MAX, "")) {
			*why = "a user name of 1 to 255 bytes, no blanks";
			return -EINVAL;
		}
		copy_text(r->user, sizeof(r->user), v, strlen(v));
		return 0;
	case KEY_PASSWORD_FILE:
		if (*v == '\0' || strlen(v) >= sizeof(r->password_file)) {
			*why = "the path of a readable file";
			return -EINVAL;
		}
		copy_text(r->password_file, sizeof(r->password_file), v,
			  strlen(v));
		return 0;
	case KEY_PREFIX:
		/* It becomes "P:{P}:..." and the hash tag "{P.tN}". */
		if (!good_name(v, strlen(v), STORE_REMOTE_PREFIX_MAX, "{}")) {
			*why = "1 to 64 bytes, no blanks, control bytes, '{' or '}'";
			return -EINVAL;
		}
		copy_text(r->prefix, sizeof(r->prefix), v, strlen(v));
		return 0;
	case KEY_TIMEOUT:
		if (layout_parse_seconds(v, &ms) < 0 || ms == 0 ||
		    ms > STORE_REMOTE_TIMEOUT_MAX_MS) {
			*why = "seconds > 0 and at most 300, at most 3 decimals";
			return -EINVAL;
		}
		r->timeout_ms = ms;
		return 0;
	case KEY_LOCK_TIMEOUT:
		if (layout_parse_seconds(v, &ms) < 0 || ms < 100 ||
		    ms > 3600000) {
			*why = "seconds from 0.1 to 3600, at most 3 decimals";
			return -EINVAL;
		}
		r->lock_timeout_ms = ms;
		return 0;
	case KEY_TLS_CA:
	case KEY_TLS_CERT:
	case KEY_TLS_KEY: {
		char *to = key == KEY_TLS_CA ? r->tls_ca :
			   key == KEY_TLS_CERT ? r->tls_cert : r->tls_key;

		/* Absolute: the daemon runs from "/" in the background. */
		if (*v != '/' || strlen(v) >= PATH_MAX) {
			*why = "the absolute path of a readable PEM file";
			return -EINVAL;
		}
		copy_text(to, PATH_MAX, v, strlen(v));
		return 0;
	}
	case KEY_TLS_NAME:
		if (!good_name(v, strlen(v), STORE_REMOTE_HOST_MAX, "/,[]")) {
			*why = "a host name or address of 1 to 255 bytes";
			return -EINVAL;
		}
		copy_text(r->tls_name, sizeof(r->tls_name), v, strlen(v));
		return 0;
	case KEY_FOLLOW_IDLE:
		if (layout_parse_seconds(v, &ms) < 0 || ms > 86400000) {
			*why = "seconds, 0 to 86400, at most 3 decimals";
			return -EINVAL;
		}
		r->follow_idle_ms = ms;
		return 0;
	case KEY_FOLLOW_GATHER:
		if (layout_parse_seconds(v, &ms) < 0 || ms > 1000) {
			*why = "seconds, 0 to 1, at most 3 decimals";
			return -EINVAL;
		}
		r->follow_gather_ms = ms;
		return 0;
	case KEY_LAYOUT:
		return parse_layout(r, v, why);
	case KEY_LIMITS:
		if (strcmp(v, "adopt") == 0)
			r->adopt_limits = true;
		else if (strcmp(v, "check") == 0)
			r->adopt_limits = false;
		else {
			*why = "adopt or check";
			return -EINVAL;
		}
		return 0;
	}
	return -EINVAL;
}

/* Contract in layout.h. */
int layout_remote_option(struct store_remote *r, const char *opt, char *err,
			 size_t errlen)
{
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	struct store_remote tmp;
	const char *why = "";
	int k = -1, rc;

	/* The rest of a sentinel:// list that FUSE split at a comma. */
	if (r->sentinel_open && !eq) {
		tmp = *r;
		rc = parse_sentinels(&tmp, opt, &why);
		if (rc == 0)
			*r = tmp;
		else
			bad_value(err, errlen, "store", opt, why);
		explicit_bzero(&tmp, sizeof(tmp));
		return rc == 0 ? 1 : rc;
	}
	/* One more seed of a cluster:// list FUSE split at a comma: a bare
	 * piece that looks like an address (any other bare piece is some
	 * other option's, and ends the list). */
	if (r->cluster_open && !eq && (strchr(opt, ':') || opt[0] == '[')) {
		tmp = *r;
		rc = parse_seeds(&tmp, opt, &why);
		if (rc == 0)
			*r = tmp;
		else
			bad_value(err, errlen, "store", opt, why);
		explicit_bzero(&tmp, sizeof(tmp));
		return rc == 0 ? 1 : rc;
	}
	r->cluster_open = false;

	for (size_t i = 0; i < NKEYS && k < 0; i++)
		if (strlen(keys[i].key) == klen &&
		    memcmp(keys[i].key, opt, klen) == 0)
			k = (int)i;
	if (k < 0)
		return 0;
	if (!eq) {
		if (errlen > 0) {
			snprintf(err, errlen, "statefs: -o %s needs a value "
				 "(-o %s)", keys[k].key, keys[k].spec);
			one_line(err);
		}
		return -EINVAL;
	}
	/* Work on a copy: a refused option leaves @r as it was. */
	tmp = *r;
	rc = apply(&tmp, (enum remote_key)k, eq + 1, &why);
	if (rc == 0) {
		tmp.given |= keys[k].given;
		*r = tmp;
	} else {
		bad_value(err, errlen, keys[k].key, eq + 1, why);
	}
	explicit_bzero(&tmp, sizeof(tmp));
	return rc == 0 ? 1 : rc;
}

/*
 * Read the first line of @path into @r->password.  0, or -errno /
 * -EINVAL with the message in @err.
 */
static int read_password(struct store_remote *r, char *err, size_t errlen)
{
	/* One byte more than a password and its "\r\n" shows "too long". */
	char buf[STORE_REMOTE_PASSWORD_MAX + 3];
	const char *why = NULL;
	size_t len = 0, line;
	struct stat st;
	int fd, rc = 0;

	/* O_NONBLOCK: a FIFO must not hang the start; it is refused below. */
	fd = open(r->password_file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		why = strerror(errno);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		why = "not a regular file";
		goto out;
	}
	while (len < sizeof(buf) && !memchr(buf, '\n', len)) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			why = strerror(errno);
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	line = memchr(buf, '\n', len) ? (size_t)((char *)memchr(buf, '\n', len) - buf)
				      : len;
	if (line > 0 && buf[line - 1] == '\r' && line < len)
		line--;
	if (line == 0)
		why = "the first line is empty";
	else if (line > STORE_REMOTE_PASSWORD_MAX)
		why = "the password is longer than 1023 bytes";
	else if (memchr(buf, '\0', line))
		why = "the password holds a NUL byte";
	if (why) {
		rc = -EINVAL;
		goto out;
	}
	memcpy(r->password, buf, line);
	r->password[line] = '\0';
out:
	explicit_bzero(buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	if (rc < 0 && errlen > 0) {
		snprintf(err, errlen, "statefs: -o store_password_file: %s: %s",
			 r->password_file, why);
		one_line(err);
	}
	return rc;
}

/* Contract in layout.h. */
int layout_remote_finish(struct store_remote *r, char *err, size_t errlen)
{
	explicit_bzero(r->password, sizeof(r->password));
	if (r->sentinel_open) {
		if (errlen > 0)
			snprintf(err, errlen, "statefs: bad value for -o store: "
				 "a Sentinel list without its master name "
				 "(sentinel://HOST:PORT,.../MASTER)");
		return -EINVAL;
	}
	if (r->kind == STORE_REMOTE_NONE) {
		for (size_t i = 0; i < NKEYS; i++)
			if (r->given & keys[i].given) {
				if (errlen > 0)
					snprintf(err, errlen, "statefs: -o %s "
						 "needs -o store=URL (a shared "
						 "store)", keys[i].key);
				return -EINVAL;
			}
		return 0;
	}
	if (!r->tls && (r->given & (STORE_REMOTE_GIVEN_TLS_CA |
				    STORE_REMOTE_GIVEN_TLS_CERT |
				    STORE_REMOTE_GIVEN_TLS_KEY |
				    STORE_REMOTE_GIVEN_TLS_NAME))) {
		for (size_t i = KEY_TLS_CA; i < NKEYS; i++)
			if ((r->given & keys[i].given) && errlen > 0) {
				snprintf(err, errlen, "statefs: -o %s needs a "
					 "store over TLS (-o store=rediss://"
					 "HOST:PORT, sentinels://... or "
					 "clusters://...)",
					 keys[i].key);
				break;
			}
		return -EINVAL;
	}
	if (!r->tls_cert[0] != !r->tls_key[0]) {
		if (errlen > 0)
			snprintf(err, errlen, "statefs: -o %s needs -o %s (a "
				 "client certificate and its key go together)",
				 r->tls_cert[0] ? "store_tls_cert" : "store_tls_key",
				 r->tls_cert[0] ? "store_tls_key" : "store_tls_cert");
		return -EINVAL;
	}
	if (r->user[0] && !r->password_file[0]) {
		if (errlen > 0)
			snprintf(err, errlen, "statefs: -o store_user needs "
				 "-o store_password_file (its password)");
		return -EINVAL;
	}
	if (r->password_file[0])
		return read_password(r, err, errlen);
	return 0;
}

void layout_remote_rows(void (*row)(void *arg, const char *spec,
				    const char *meaning, const char *def),
			void *arg)
{
	for (size_t i = 0; i < NKEYS; i++)
		row(arg, keys[i].spec, keys[i].meaning, keys[i].def);
}

static void help_row(void *arg, const char *spec, const char *meaning,
		     const char *def)
{
	fprintf(arg, "    -o %-25s %s (default: %s)\n", spec, meaning, def);
}

void layout_remote_help(FILE *out)
{
	fprintf(out, "shared store options:\n");
	layout_remote_rows(help_row, out);
}
