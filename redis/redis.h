/*
 * remote.h - where a shared store lives and how to reach it: the
 * -o store* mount options, parsed by layout/ (layout_remote_option) and
 * taken by redis/conn.c, which connects to it.
 *
 * A plain value type with fixed-size fields, so it is copied, compared
 * and wiped as a whole and a refused option can leave it byte-identical.
 * No store option (kind STORE_REMOTE_NONE) means the embedded store.
 */
#ifndef STATEFS_REMOTE_H
#define STATEFS_REMOTE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* How the primary is found. */
enum store_remote_kind {
	STORE_REMOTE_NONE = 0,  /* no -o store: the embedded store */
	STORE_REMOTE_TCP,       /* redis://HOST:PORT, rediss:// over TLS */
	STORE_REMOTE_UNIX,      /* unix:/PATH */
	STORE_REMOTE_SENTINEL,  /* sentinel://H1:P1,H2:P2/MASTER, sentinels:// */
	STORE_REMOTE_CLUSTER,   /* cluster://H1:P1,H2:P2 (seeds), clusters:// */
};

#define STORE_REMOTE_HOST_MAX      255  /* a DNS name or an address */
#define STORE_REMOTE_PATH_MAX      107  /* sockaddr_un.sun_path less its NUL */
#define STORE_REMOTE_SENTINELS_MAX 16
#define STORE_REMOTE_NAME_MAX      255  /* a master name, an ACL user */
#define STORE_REMOTE_PASSWORD_MAX  1023
#define STORE_REMOTE_PREFIX_MAX    64
/* store_timeout bounds: > 0, and no FUSE request should wait longer. */
#define STORE_REMOTE_TIMEOUT_MAX_MS 300000u

struct store_remote_addr {
	char host[STORE_REMOTE_HOST_MAX + 1]; /* an IPv6 address without [] */
	uint16_t port;                        /* 1..65535 */
};

/* Which options were given (layout_remote_finish checks they fit). */
#define STORE_REMOTE_GIVEN_STORE    (1u << 0)
#define STORE_REMOTE_GIVEN_USER     (1u << 1)
#define STORE_REMOTE_GIVEN_PASSWORD (1u << 2)
#define STORE_REMOTE_GIVEN_PREFIX   (1u << 3)
#define STORE_REMOTE_GIVEN_TIMEOUT  (1u << 4)
#define STORE_REMOTE_GIVEN_LIMITS   (1u << 5)
#define STORE_REMOTE_GIVEN_TLS_CA   (1u << 6)
#define STORE_REMOTE_GIVEN_TLS_CERT (1u << 7)
#define STORE_REMOTE_GIVEN_TLS_KEY  (1u << 8)
#define STORE_REMOTE_GIVEN_TLS_NAME (1u << 9)
#define STORE_REMOTE_GIVEN_LOCK_TIMEOUT (1u << 10)
#define STORE_REMOTE_GIVEN_FOLLOW   (1u << 11)
#define STORE_REMOTE_GIVEN_LAYOUT   (1u << 12)
#define STORE_REMOTE_GIVEN_GATHER   (1u << 13)

struct store_remote {
	enum store_remote_kind kind;
	struct store_remote_addr addr;       /* TCP: the server */
	char path[STORE_REMOTE_PATH_MAX + 1]; /* UNIX: an absolute path */
	/* SENTINEL: asked in turn for the primary of @master.  CLUSTER:
	 * the seed nodes, asked in turn for the slot map (CLUSTER SLOTS). */
	struct store_remote_addr sentinels[STORE_REMOTE_SENTINELS_MAX];
	unsigned nsentinels;
	char master[STORE_REMOTE_NAME_MAX + 1];
	/* A sentinel:// list still waiting for its "/MASTER": FUSE splits
	 * -o values at commas, so "H1:P1,H2:P2/M" arrives in pieces. */
	bool sentinel_open;
	/* The latest store= was a cluster:// list: a bare HOST:PORT piece
	 * that follows is one more seed (FUSE split the list at a comma). */
	bool cluster_open;

	char user[STORE_REMOTE_NAME_MAX + 1]; /* "" = AUTH with the password alone */
	char password_file[PATH_MAX];         /* "" = none */
	/* Read from password_file by layout_remote_finish; "" = no AUTH.
	 * Wipe it (explicit_bzero) when done with the struct. */
	char password[STORE_REMOTE_PASSWORD_MAX + 1];
	char prefix[STORE_REMOTE_PREFIX_MAX + 1]; /* key prefix and hash tag */
	uint64_t timeout_ms;                  /* store_timeout */
	uint64_t lock_timeout_ms;             /* lock_timeout: how long a
						* mount out of reach keeps its
						* locks (redis/lock.c) */
	bool adopt_limits;                    /* store_limits=adopt */
	/* store_layout=tenant: a store this mount makes keeps each
	 * tenant's facts in a meta of its own, in the tenant's slot, so
	 * that every tenant transition is one call on one slot (a Redis
	 * Cluster's need).  Only the mount that makes the store decides;
	 * every other follows the layout the store records. */
	bool layout_tenant;
	/* follow_idle: a tenant this mount has not used for that long, of
	 * which the kernel holds no inode, is no longer followed (0: every
	 * tenant is followed always). */
	uint64_t follow_idle_ms;
	/* follow_gather: news of another mount's change come while none of
	 * this mount's own is on its way, the follower waits that long
	 * since its last read for more, then reads them all (0: at once). */
	uint64_t follow_gather_ms;

	/* TLS (rediss://, sentinels://): every connection, to the primary
	 * and to the Sentinels, is TLS 1.2 or newer, its server's
	 * certificate verified against a CA and its name. */
	bool tls;
	char tls_ca[PATH_MAX];   /* store_tls_ca; "" = the system's trust store */
	char tls_cert[PATH_MAX]; /* store_tls_cert; "" = no client certificate */
	char tls_key[PATH_MAX];  /* store_tls_key: the client certificate's key */
	/* store_tls_name: the name every server's certificate must carry;
	 * "" = the host connected to (an address checks its IP entry). */
	char tls_name[STORE_REMOTE_HOST_MAX + 1];
	unsigned given;                       /* STORE_REMOTE_GIVEN_* */
};

/*
 * Set @r to the defaults: no shared store (the embedded one), prefix
 * "statefs", a 2 s store_timeout, limits checked against the store's
 * rather than adopted.
 */
void store_remote_default(struct store_remote *r);

/*
 * Write where @r points, the way a user writes it ("redis://HOST:PORT",
 * "rediss://HOST:PORT", "unix:/PATH", "sentinel://H:P,.../MASTER",
 * "sentinels://H:P,.../MASTER", "cluster://H:P,...", "clusters://H:P,...",
 * or "embedded" for none), for
 * messages; never the user or the password.  snprintf-like: returns the
 * length the text needs, writes at most @cap bytes, NUL-terminated when
 * @cap > 0.
 */
size_t store_remote_describe(char *buf, size_t cap,
			     const struct store_remote *r);

/*
 * The shared store (docs/shared-store.md).  A store made by redis_store_new()
 * is a mirror of the shared store @remote points to (-o store=...): each
 * transition below is made by the shared store (Redis decides, in one
 * step, with the embedded store's checks, their order and their errno),
 * then answered from the mirror once it has applied the outcome (this
 * mount sees its own transitions at once); reads are the mirror's.
 * redis_store_new() connects, installs or checks statefs's Functions
 * library, records @limits in a new store or compares them with the
 * store's (adopts them with store_limits=adopt), loads the store and
 * starts following it.  0, or -errno with a one-line message starting
 * "statefs: " in @err: -EINVAL (limits that differ: the message names the
 * option; a TLS file that cannot be used), -EACCES (credentials), -EIO
 * (unreachable within store_timeout), -EPROTO (a newer library; a TLS
 * handshake refused: the server's certificate, its name, this mount's
 * certificate, or a server that does not speak TLS), -ENOMEM.
 *
 * On a shared store, a transition that got no answer within
 * store_timeout returns -EIO and did not happen (each call carries a
 * deadline past which the store does nothing, and an operation id that
 * makes a retry apply it at most once).  A node of an earlier store
 * instance (Redis lost its data) answers -ESTALE.
 */
struct store;
struct store_limits;
int redis_store_new(const struct store_limits *limits,
		     const struct store_remote *remote, struct store **out,
		     char *err, size_t errlen);

#endif /* STATEFS_REMOTE_H */
