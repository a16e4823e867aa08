/*
 * link.c - one connection to one Redis server: a socket (TCP or unix),
 * an OpenSSL session on it for a store over TLS, the commands queued to
 * be written and the replies read, each wait bounded.
 *
 * Why this shape
 * --------------
 * Debian 12's hiredis (0.14) has no TLS, and OpenSSL has no Redis
 * protocol.  So the stream is statefs's (a socket, then SSL_connect,
 * SSL_read and SSL_write when the store is over TLS) and the protocol
 * stays hiredis's: redisFormatCommandArgv writes a command's bytes,
 * redisReader turns the bytes read into redisReply trees, exactly those
 * hiredis's own contexts make.  A plain link is the same code with
 * send/recv in place of SSL_write/SSL_read, so redis:// and rediss://
 * differ only in the stream.
 *
 * What it owns
 * ------------
 * struct link_tls: one SSL_CTX per pool (TLS 1.2 or newer, the CAs that
 * are trusted, this mount's certificate and key, read once at start) and
 * the name the servers' certificates must carry when it is not the host
 * dialled.  struct link: the socket, the SSL session (NULL: plain), the
 * bytes queued, the reader, and how and why it failed.  A failed link
 * stays failed; its owner closes it and opens another.
 *
 * Threads and locks
 * -----------------
 * None.  A link is its owner thread's; the one call another thread may
 * make is link_wake, which only shuts the socket down (the owner's
 * blocked recv then returns 0, and SSL_read with it), so it needs no lock
 * as long as the owner has not closed the link (redis/conn.c holds its
 * connection's lock around both).  An SSL_CTX is used by many threads at
 * once, which OpenSSL allows once it is set up.  OpenSSL's error queue is
 * per thread: it is cleared before each call whose errors are read.
 *
 * Time
 * ----
 * Connecting waits at most the budget given (a non-blocking connect and
 * poll); then the socket is blocking with SO_RCVTIMEO and SO_SNDTIMEO at
 * the link's timeout, which bounds each read and each write, as hiredis's
 * redisSetTimeout does: a timed out read fails the link (its reply may
 * still come, on a connection nobody reads again).
 *
 * Refusals
 * --------
 * A handshake that fails says why in one line and as LINK_REFUSED
 * (-EPROTO from link_open): the server's certificate chains to no CA
 * trusted, is not for the name, or is otherwise invalid; the server
 * refused this mount's certificate or wanted one; the server answered
 * without TLS.  TLS 1.3 lets the server refuse a client's certificate
 * after the client's handshake is done, so the first reply read may be
 * that alert instead; or, the command written meanwhile turning the
 * server's close into a reset that loses the alert, a server that asked
 * for a certificate hangs up before its first reply (the link notes the
 * request in OpenSSL's certificate callback, which runs only then):
 * link_read reports either as the refusal, saying whether this mount
 * showed a certificate.  Both end the link LINK_REFUSED.  A plain Redis
 * behind rediss:// answers nothing at all to a ClientHello (it waits for
 * the end of an inline command that never comes), so when the server
 * sent no byte within three quarters of the budget, the rest of it asks
 * the same address a plain PING: a Redis reply there is a plain server
 * behind rediss://; anything else is a server that is slow (-EIO).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "redis/link.h"
#include "redis/wire.h"

struct link_tls {
	SSL_CTX *ctx;                             /* immutable once made */
	char name[STORE_REMOTE_HOST_MAX + 1];     /* "" = the host dialled */
	bool cert;                                /* a client certificate */
};

struct link {
	int fd;
	SSL *ssl;              /* NULL: a plain link */
	redisReader *reader;
	char *out;             /* queued command bytes, malloc'd */
	size_t outlen;
	enum link_fail fail;
	char why[WHY_MAX];
	/* TLS: the server asked for this mount's certificate, and whether
	 * one was shown; a reply has been read since the handshake. */
	bool asked, shown, heard;
};

/* Failures ------------------------------------------------------------------- */

/* Fail @l as @kind with the text; returns -EIO (-ENOMEM for LINK_OOM,
 * -EPROTO for LINK_REFUSED). */
static int fail(struct link *l, enum link_fail kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct link *l, enum link_fail kind, const char *fmt, ...)
{
	char buf[WHY_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (l->fail == LINK_OK) {
		l->fail = kind;
		wire_why(l->why, "%s", buf);
	}
	return kind == LINK_OOM ? -ENOMEM : kind == LINK_REFUSED ? -EPROTO : -EIO;
}

static struct timeval tv_of(uint64_t ms)
{
	struct timeval tv;

	if (ms == 0)
		ms = 1;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return tv;
}

static int set_timeouts(int fd, uint64_t ms)
{
	struct timeval tv = tv_of(ms);

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

/* The TLS settings ---------------------------------------------------------- */

/* The text of OpenSSL's latest error on this thread. */
static const char *ssl_text(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *s = e ? ERR_reason_error_string(e) : NULL;

	return s ? s : "an unknown TLS error";
}

/* OpenSSL calls this on a client only when the server asks for its
 * certificate (a CertificateRequest): the link remembers it. */
static int cert_asked(SSL *ssl, void *arg)
{
	struct link *l = SSL_get_app_data(ssl);

	(void)arg;
	if (l)
		l->asked = true;
	return 1;
}

/* Contract in redis/link.h. */
int link_tls_new(const struct store_remote *r, struct link_tls **out,
		 char *why)
{
	struct link_tls *t;

	*out = NULL;
	if (!r->tls)
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t) {
		wire_why(why, "out of memory");
		return -ENOMEM;
	}
	ERR_clear_error();
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (!t->ctx) {
		wire_why(why, "TLS: %s", ssl_text());
		free(t);
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(t->ctx, SSL_MODE_AUTO_RETRY);
	SSL_CTX_set_cert_cb(t->ctx, cert_asked, NULL);
	if (r->tls_ca[0] ? SSL_CTX_load_verify_locations(t->ctx, r->tls_ca, NULL) != 1
			 : SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		wire_why(why, "-o store_tls_ca=%s: no CA certificate read (%s)",
			r->tls_ca[0] ? r->tls_ca : "(the system's)", ssl_text());
		goto refuse;
	}
	if (r->tls_cert[0]) {
		if (SSL_CTX_use_certificate_chain_file(t->ctx, r->tls_cert) != 1) {
			wire_why(why, "-o store_tls_cert=%s: no certificate read "
				"(%s)", r->tls_cert, ssl_text());
			goto refuse;
		}
		if (SSL_CTX_use_PrivateKey_file(t->ctx, r->tls_key,
						SSL_FILETYPE_PEM) != 1) {
			if (ERR_GET_REASON(ERR_peek_last_error()) ==
			    X509_R_KEY_VALUES_MISMATCH)
				wire_why(why, "-o store_tls_key=%s is not the key "
					"of -o store_tls_cert=%s", r->tls_key,
					r->tls_cert);
			else
				wire_why(why, "-o store_tls_key=%s: no private "
					"key read (%s)", r->tls_key, ssl_text());
			goto refuse;
		}
		if (SSL_CTX_check_private_key(t->ctx) != 1) {
			wire_why(why, "-o store_tls_key=%s is not the key of "
				"-o store_tls_cert=%s", r->tls_key, r->tls_cert);
			goto refuse;
		}
		t->cert = true;
	}
	snprintf(t->name, sizeof(t->name), "%s", r->tls_name);
	ERR_clear_error();
	*out = t;
	return 0;
refuse:
	ERR_clear_error();
	SSL_CTX_free(t->ctx);
	free(t);
	return -EINVAL;
}

void link_tls_free(struct link_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* Connecting ------------------------------------------------------------- */

/* Connect the non-blocking @fd to @sa before @deadline: 0 or -errno. */
static int connect_until(int fd, const struct sockaddr *sa, socklen_t len,
			 uint64_t deadline)
{
	int err = 0;
	socklen_t elen = sizeof(err);

	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EAGAIN)
		return -errno;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		uint64_t now = wire_now_ms();
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)(deadline - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		break;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
		return -errno;
	return -err;
}

/* A blocking socket connected to @host:@port or @path before @deadline,
 * or -errno with the failure in @why. */
static int dial(const char *host, uint16_t port, const char *path,
		uint64_t deadline, char *why)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM }, *res = NULL;
	char service[8];
	int fd = -1, rc;

	if (path) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			rc = -errno;
		else
			rc = connect_until(fd, (struct sockaddr *)&sun,
					   sizeof(sun), deadline);
	} else {
		snprintf(service, sizeof(service), "%u", (unsigned)port);
		rc = getaddrinfo(host, service, &hints, &res);
		if (rc != 0) {
			wire_why(why, "%s", rc == EAI_SYSTEM ? strerror(errno)
							    : gai_strerror(rc));
			return rc == EAI_MEMORY ? -ENOMEM : -EIO;
		}
		rc = -ECONNREFUSED;
		for (struct addrinfo *a = res; a; a = a->ai_next) {
			fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC |
				    SOCK_NONBLOCK, a->ai_protocol);
			if (fd < 0) {
				rc = -errno;
				continue;
			}
			rc = connect_until(fd, a->ai_addr, a->ai_addrlen, deadline);
			if (rc == 0 || rc == -ETIMEDOUT)
				break;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
	}
	if (rc == 0) {
		int one = 1, flags = fcntl(fd, F_GETFL);

		if (!path)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
			rc = -errno;
	}
	if (rc < 0) {
		wire_why(why, "%s", rc == -ETIMEDOUT ? "Connection timed out"
						    : strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc == -ENOMEM ? rc : -EIO;
	}
	return fd;
}

/*
 * Does @host:@port answer a plain PING with a Redis reply within @ms?
 * The handshake heard nothing: a plain Redis there never answers a
 * ClientHello.
 */
static bool answers_plain(const char *host, uint16_t port, uint64_t ms)
{
	static const char ping[] = "*1\r\n$4\r\nPING\r\n";
	char why[WHY_MAX], c = 0;
	int fd = dial(host, port, NULL, wire_now_ms() + ms, why);
	bool plain;

	if (fd < 0)
		return false;
	plain = set_timeouts(fd, ms) == 0 &&
		send(fd, ping, sizeof(ping) - 1, MSG_NOSIGNAL) ==
			(ssize_t)(sizeof(ping) - 1) &&
		recv(fd, &c, 1, 0) == 1 && (c == '+' || c == '-');
	close(fd);
	return plain;
}

/* The server's certificate was not verified: say why, as the user can
 * act on it. */
static int refused_cert(struct link *l, long v, const char *name)
{
	const char *text = X509_verify_cert_error_string(v);

	switch (v) {
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		return fail(l, LINK_REFUSED, "TLS: the server's certificate is "
			    "not for '%s' (-o store_tls_name names the one it "
			    "carries)", name);
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_CERT_SIGNATURE_FAILURE:
		return fail(l, LINK_REFUSED, "TLS: the server's certificate is "
			    "signed by no CA trusted (-o store_tls_ca): %s", text);
	default:
		return fail(l, LINK_REFUSED, "TLS: the server's certificate is "
			    "refused: %s", text);
	}
}

/* An SSL_ERROR_SSL of the handshake or of a read: a refusal, named. */
static int refused(struct link *l, const char *name)
{
	long v = SSL_get_verify_result(l->ssl);
	unsigned long e = ERR_peek_last_error();
	int reason = ERR_GET_REASON(e);

	if (v != X509_V_OK)
		return refused_cert(l, v, name);
	switch (reason) {
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_UNKNOWN_PROTOCOL:
	case SSL_R_RECORD_LENGTH_MISMATCH:
		return fail(l, LINK_REFUSED, "TLS: the server answered without "
			    "TLS (rediss:// needs the server's TLS port)");
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
		return fail(l, LINK_REFUSED, "TLS: the server wants this mount's "
			    "certificate (-o store_tls_cert and store_tls_key)");
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
	case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
	case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
	case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
	case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
		return fail(l, LINK_REFUSED, "TLS: the server refused this "
			    "mount's certificate (-o store_tls_cert): %s",
			    ssl_text());
	case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
	case SSL_R_UNSUPPORTED_PROTOCOL:
		return fail(l, LINK_REFUSED, "TLS: the server speaks no TLS 1.2 "
			    "or newer");
	default:
		return fail(l, LINK_REFUSED, "TLS handshake refused: %s",
			    ssl_text());
	}
}

/* The handshake on @l's socket within @ms; a silent server gets @probe_ms
 * more to answer a plain PING. */
static int handshake(struct link *l, const struct link_tls *tls,
		     const char *host, uint16_t port, uint64_t ms,
		     uint64_t probe_ms)
{
	const char *name = tls->name[0] ? tls->name : host;
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, name, ip) == 1 ||
		     inet_pton(AF_INET6, name, ip) == 1;
	int rc, err, e;
	bool timeout;

	ERR_clear_error();
	l->ssl = SSL_new(tls->ctx);
	if (!l->ssl || SSL_set_fd(l->ssl, l->fd) != 1)
		return fail(l, LINK_OOM, "out of memory");
	SSL_set_app_data(l->ssl, l);
	l->shown = tls->cert;
	/* The name checked against the certificate; SNI for a DNS name. */
	if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(l->ssl), name) != 1
		  : SSL_set1_host(l->ssl, name) != 1 ||
			    SSL_set_tlsext_host_name(l->ssl, name) != 1)
		return fail(l, LINK_OOM, "TLS: cannot check the name '%s'", name);
	if (set_timeouts(l->fd, ms) < 0)
		return fail(l, LINK_IO, "cannot set the socket timeout");
	errno = 0;
	rc = SSL_connect(l->ssl);
	e = errno;
	if (rc == 1) {
		ERR_clear_error();
		return 0;
	}
	err = SSL_get_error(l->ssl, rc);
	if (err == SSL_ERROR_SSL) {
		rc = refused(l, name);
		ERR_clear_error();
		return rc;
	}
	ERR_clear_error();
	/* The socket's timeout reads as "try again" to OpenSSL. */
	timeout = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ||
		  (err == SSL_ERROR_SYSCALL && (e == EAGAIN || e == EWOULDBLOCK));
	/* Not a byte of TLS came back: a plain Redis waits or hangs up. */
	if ((timeout || err == SSL_ERROR_SYSCALL) &&
	    BIO_number_read(SSL_get_rbio(l->ssl)) == 0 && probe_ms > 0 &&
	    answers_plain(host, port, probe_ms))
		return fail(l, LINK_REFUSED, "TLS: the server speaks plain "
			    "Redis, not TLS (rediss:// needs the server's TLS "
			    "port; redis:// is plain)");
	if (timeout)
		return fail(l, LINK_TIMEOUT, "no TLS handshake within the "
			    "timeout");
	if (err == SSL_ERROR_SYSCALL && e != 0)
		return fail(l, LINK_IO, "TLS handshake: %s", strerror(e));
	return fail(l, LINK_IO, "the server closed the connection in the TLS "
		    "handshake");
}

/* Contract in redis/link.h. */
int link_open(const char *host, uint16_t port, const char *path,
	      const struct link_tls *tls, uint64_t ms, struct link **out,
	      char *why)
{
	uint64_t start = wire_now_ms(), deadline = start + (ms ? ms : 1), left;
	struct link *l = calloc(1, sizeof(*l));
	int rc;

	*out = NULL;
	if (!l || !(l->reader = redisReaderCreate())) {
		free(l);
		wire_why(why, "out of memory");
		return -ENOMEM;
	}
	l->fd = dial(host, port, path, deadline, why);
	if (l->fd < 0) {
		rc = l->fd;
		l->fd = -1;
		goto fail;
	}
	left = deadline > wire_now_ms() ? deadline - wire_now_ms() : 1;
	if (tls && !path) {
		uint64_t probe = left / 4;

		rc = handshake(l, tls, host, port, left - probe, probe);
		if (rc < 0) {
			wire_why(why, "%s", l->why);
			goto fail;
		}
	}
	rc = link_set_timeout(l, ms);
	if (rc < 0) {
		wire_why(why, "cannot set the socket timeout");
		goto fail;
	}
	*out = l;
	return 0;
fail:
	link_close(l);
	return rc;
}

/* Commands and replies ------------------------------------------------------- */

int link_set_timeout(struct link *l, uint64_t ms)
{
	if (set_timeouts(l->fd, ms) < 0)
		return fail(l, LINK_IO, "cannot set the socket timeout");
	return 0;
}

/* Contract in redis/link.h. */
int link_queue(struct link *l, int argc, const char **argv,
	       const size_t *argvlen)
{
	char *cmd = NULL, *grown;
	int n;

	if (l->fail != LINK_OK)
		return l->fail == LINK_OOM ? -ENOMEM : -EIO;
	n = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
	if (n < 0)
		return fail(l, LINK_OOM, "out of memory");
	grown = realloc(l->out, l->outlen + (size_t)n);
	if (!grown) {
		redisFreeCommand(cmd);
		return fail(l, LINK_OOM, "out of memory");
	}
	memcpy(grown + l->outlen, cmd, (size_t)n);
	l->out = grown;
	l->outlen += (size_t)n;
	redisFreeCommand(cmd);
	return 0;
}

/* A failed SSL_read or SSL_write (@rc) of @l, or a failed recv/send. */
static int io_failed(struct link *l, int rc, int e, bool reading)
{
	int err = l->ssl ? SSL_get_error(l->ssl, rc) : SSL_ERROR_SYSCALL;
	/* The server gone without a close_notify (or the socket shut down
	 * by link_wake): OpenSSL 3 calls it an error of the protocol. */
	bool eof = err == SSL_ERROR_ZERO_RETURN ||
		   (rc == 0 && err == SSL_ERROR_SYSCALL) ||
		   (err == SSL_ERROR_SSL &&
		    ERR_GET_REASON(ERR_peek_last_error()) ==
			    SSL_R_UNEXPECTED_EOF_WHILE_READING);

	if (err == SSL_ERROR_SSL && !eof) {
		rc = refused(l, "");
		ERR_clear_error();
		return rc;
	}
	ERR_clear_error();
	/*
	 * TLS 1.3: a server that asked for a certificate judges it after
	 * the client's handshake is done, and hangs up on a refusal.  Its
	 * alert often dies with the connection (the command written
	 * meanwhile, unread, makes its close a reset), so a server that
	 * asked and hung up before any reply refused this mount.
	 */
	if (l->asked && !l->heard && (eof || e == ECONNRESET || e == EPIPE))
		return fail(l, LINK_REFUSED, l->shown ?
			    "TLS: the server refused this mount's certificate "
			    "(-o store_tls_cert) and hung up" :
			    "TLS: the server wants this mount's certificate "
			    "(-o store_tls_cert and store_tls_key) and hung up");
	if (eof)
		return fail(l, LINK_IO, "Server closed the connection");
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ||
	    e == EAGAIN || e == EWOULDBLOCK)
		return fail(l, LINK_TIMEOUT, reading ? "no reply within the "
			    "timeout" : "the server takes no command within "
			    "the timeout");
	return fail(l, LINK_IO, "%s", e ? strerror(e) : "Server closed the "
		    "connection");
}

/* Write everything queued on @l. */
static int flush(struct link *l)
{
	size_t done = 0;

	while (done < l->outlen) {
		size_t chunk = l->outlen - done;
		int n;

		if (chunk > 1u << 30)
			chunk = 1u << 30;
		ERR_clear_error();
		errno = 0;
		n = l->ssl ? SSL_write(l->ssl, l->out + done, (int)chunk)
			   : (int)send(l->fd, l->out + done, chunk, MSG_NOSIGNAL);
		if (n <= 0) {
			if (!l->ssl && n < 0 && errno == EINTR)
				continue;
			return io_failed(l, n, errno, false);
		}
		done += (size_t)n;
	}
	free(l->out);
	l->out = NULL;
	l->outlen = 0;
	return 0;
}

/* Contract in redis/link.h. */
int link_read(struct link *l, redisReply **out)
{
	char buf[16384];
	int rc;

	*out = NULL;
	if (l->fail != LINK_OK)
		return l->fail == LINK_OOM ? -ENOMEM : -EIO;
	rc = flush(l);
	if (rc < 0)
		return rc;
	for (;;) {
		void *rep = NULL;
		int n;

		if (redisReaderGetReply(l->reader, &rep) != REDIS_OK) {
			if (l->reader->err == REDIS_ERR_OOM)
				return fail(l, LINK_OOM, "out of memory");
			return fail(l, LINK_PROTOCOL, "%s", l->reader->errstr);
		}
		if (rep) {
			l->heard = true;
			*out = rep;
			return 0;
		}
		ERR_clear_error();
		errno = 0;
		n = l->ssl ? SSL_read(l->ssl, buf, sizeof(buf))
			   : (int)recv(l->fd, buf, sizeof(buf), 0);
		if (n <= 0) {
			if (!l->ssl && n < 0 && errno == EINTR)
				continue;
			return io_failed(l, n, errno, true);
		}
		if (redisReaderFeed(l->reader, buf, (size_t)n) != REDIS_OK)
			return fail(l, LINK_OOM, "out of memory");
	}
}

/* Contract in redis/link.h. */
redisReply *link_exchange(struct link *l, int argc, const char **argv,
			  const size_t *argvlen, char *why)
{
	redisReply *rep = NULL;

	if (link_queue(l, argc, argv, argvlen) < 0 || link_read(l, &rep) < 0) {
		wire_why(why, "%s", l->why[0] ? l->why : "no reply");
		return NULL;
	}
	return rep;
}

enum link_fail link_failure(const struct link *l)
{
	return l->fail;
}

const char *link_why(const struct link *l)
{
	return l->why;
}

int link_fd(const struct link *l)
{
	return l->fd;
}

/* Contract in redis/link.h. */
int link_take(struct link *l, redisReply **out)
{
	struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
	char buf[16384];
	void *rep = NULL;
	int n;

	*out = NULL;
	if (l->fail != LINK_OK)
		return l->fail == LINK_OOM ? -ENOMEM : -EIO;
	if (redisReaderGetReply(l->reader, &rep) != REDIS_OK)
		return fail(l, l->reader->err == REDIS_ERR_OOM ? LINK_OOM :
			    LINK_PROTOCOL, "%s", l->reader->errstr);
	if (!rep && ((l->ssl && SSL_pending(l->ssl) > 0) ||
		     poll(&pfd, 1, 0) > 0)) {
		ERR_clear_error();
		errno = 0;
		/* Ready: a plain recv does not wait; SSL_read waits for
		 * the rest of a record at most the link's timeout. */
		n = l->ssl ? SSL_read(l->ssl, buf, sizeof(buf))
			   : (int)recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n <= 0 && !(!l->ssl && n < 0 &&
				(errno == EINTR || errno == EAGAIN)))
			return io_failed(l, n, errno, true);
		if (n > 0 && redisReaderFeed(l->reader, buf, (size_t)n) != REDIS_OK)
			return fail(l, LINK_OOM, "out of memory");
		if (redisReaderGetReply(l->reader, &rep) != REDIS_OK)
			return fail(l, l->reader->err == REDIS_ERR_OOM ?
				    LINK_OOM : LINK_PROTOCOL, "%s",
				    l->reader->errstr);
	}
	if (rep)
		l->heard = true;
	*out = rep;
	return 0;
}

/* Contract in redis/link.h. */
void link_wake(struct link *l)
{
	shutdown(l->fd, SHUT_RDWR);
}

void link_close(struct link *l)
{
	if (!l)
		return;
	/* No close_notify: the server may be gone, or its socket shut
	 * down by link_wake, and nothing depends on the end being seen as
	 * clean (Redis drops the client either way). */
	if (l->ssl)
		SSL_free(l->ssl);
	if (l->fd >= 0)
		close(l->fd);
	if (l->reader)
		redisReaderFree(l->reader);
	free(l->out);
	free(l);
}
