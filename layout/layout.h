/*
 * layout.h - how statefs names, depths and special files map onto the
 * store, the formats of the special files, and the mount options.
 *
 * Pure functions over strings and store value types: nothing here takes a
 * lock or keeps state, so everything is unit-tested directly.  layout.c
 * holds the tables, names, formats and options; parse.c the numbers and
 * durations every other file parses with; store_options.c the shared
 * store's mount options.
 *
 * The tree has a fixed depth: root (0) / tenant (1) / parent (2) /
 * child (3).  In the root and the tenants, names that begin with '.' are
 * reserved for the special files listed in layout.c; each special file
 * has a slot number (its inode slot in the store: store_special_ino()) and
 * a scope (root, tenant or both).  A parent has none.
 */
#ifndef STATEFS_LAYOUT_H
#define STATEFS_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "redis/redis.h"
#include "store/store.h"

/* Depths of the tree. */
enum layout_depth {
	LAYOUT_ROOT = 0,
	LAYOUT_TENANT = 1,
	LAYOUT_PARENT = 2,
	LAYOUT_CHILD = 3,
};

/*
 * Check the name of a node at @depth (LAYOUT_TENANT, LAYOUT_PARENT or
 * LAYOUT_CHILD): 1..max_name bytes, no control bytes (< 0x20, 0x7f), no
 * white space, no '/', not "-" (the "does not apply" field of .events
 * and .snapshot).  A tenant's or a parent's name must not start
 * with '.' (the root and the tenants hold the special files); a child's
 * may (a parent has no special files: rsync's and editors' temporary
 * files, mkstemp patterns), except "." and "..".
 * Returns 0, -ENAMETOOLONG (longer than @max_name) or -EINVAL.
 */
int layout_name_check(const char *name, size_t max_name, int depth);

/* Special files ------------------------------------------------------- */

/* Slots (stable: they are inode slots in the store). */
enum layout_slot {
	LAYOUT_SLOT_STATS = 0,
	LAYOUT_SLOT_DEPART = 1,
	LAYOUT_SLOT_EVENTS = 2,
	LAYOUT_SLOT_CLOCK = 3,   /* only with -o testclock */
	LAYOUT_SLOT_SNAPSHOT = 4,
	LAYOUT_SLOT_DRAIN = 5,
};

#define LAYOUT_SCOPE_ROOT   (1u << 0)
#define LAYOUT_SCOPE_TENANT (1u << 1)

struct layout_special {
	const char *name;  /* ".stats" */
	int slot;          /* enum layout_slot */
	unsigned scope;    /* LAYOUT_SCOPE_* where it exists */
	mode_t mode;       /* S_IFREG | permission bits */
};

/*
 * The special file called @name in a directory of depth @dir_depth
 * (LAYOUT_ROOT or LAYOUT_TENANT), or NULL.
 */
const struct layout_special *layout_special_find(const char *name,
						 int dir_depth);

/* The special file with slot @slot, or NULL. */
const struct layout_special *layout_special_slot(int slot);

/*
 * The @i-th special file present in a directory of depth @dir_depth, in
 * listing order, or NULL past the last.
 */
const struct layout_special *layout_special_nth(int dir_depth, size_t i);

/*
 * Parse what was written to a .depart file: exactly one name, optionally
 * followed by one '\n'.  Copies it NUL-terminated into @name (capacity
 * @cap).  Returns 0, -EINVAL or -ENAMETOOLONG (layout_name_check rules
 * for a parent).
 */
int layout_parse_depart(const char *buf, size_t len, size_t max_name,
			char *name, size_t cap);

/*
 * Parse a number of milliseconds written to a control file (.clock): one
 * decimal whole number, at most STORE_DURATION_MAX_MS, optionally
 * followed by one '\n'.  0 or -EINVAL (@ms written only on success).
 */
int layout_parse_control_ms(const char *buf, size_t len, uint64_t *ms);

/*
 * Parse an xattr value in seconds (user.statefs.ttl, child_ttl): the
 * layout_parse_seconds() form, not NUL-terminated, optionally ending in
 * one '\n'.  0 or -EINVAL.
 */
int layout_parse_seconds_value(const char *buf, size_t len, uint64_t *ms);

/*
 * Write @ms as seconds in the shortest form that parses back to the same
 * value ("5", "1.5", "0.25"), NUL-terminated.  Returns the length.
 */
size_t layout_format_seconds(char *buf, size_t cap, uint64_t ms);

/* .snapshot and .drain --------------------------------------------------- */

/* The header line of .snapshot (ends with '\n'). */
extern const char layout_snapshot_header[];

/*
 * Format one .snapshot row: tab-separated kind, tenant, parent, child,
 * generation, version, size, nlink, ttl_ms_left, inode, then '\n'; a
 * field that does not apply is "-".  snprintf-like: returns the length
 * the row needs, writes at most @cap bytes.
 */
size_t layout_format_snapshot_row(char *buf, size_t cap,
				  const struct store_snap_row *row);

/*
 * Format .snapshot's second line, the row of kind "seq": its second
 * field the number of the last line of the event log the snapshot
 * includes (store_snapshot's seq; "-" when negative), every other field
 * "-", so that a reader started at the next number (store_events_start)
 * follows on from it.  snprintf-like.
 */
size_t layout_format_snapshot_seq(char *buf, size_t cap, int64_t seq);

/*
 * What reading .drain gives: "ready\n", "draining MS_LEFT\n" or
 * "drained\n".  snprintf-like.
 */
size_t layout_format_drain(char *buf, size_t cap, enum store_state st,
			   uint64_t ms_left);

/* .stats --------------------------------------------------------------- */

struct layout_stats_view {
	uint64_t instance;            /* store_instance_id() */
	uint64_t pid;                 /* the daemon's (root's .stats only) */
	enum store_state state;
	uint64_t uptime_ms;
	const char *tenant;           /* NULL for the root's .stats */
	struct store_stats stats;     /* store-wide, or the tenant's gauges */
	const struct store_limits *limits;
	enum store_link link;         /* store_connection() */
};

/*
 * Format .stats: one "key value" line per fact (see layout.c for the
 * keys).  Writes at most @cap bytes (always NUL-terminated when @cap > 0)
 * and returns the length the whole text needs, like snprintf.
 */
size_t layout_format_stats(char *buf, size_t cap,
			   const struct layout_stats_view *v);

/* The word .stats uses for a store state: ready, draining, drained. */
const char *layout_state_name(enum store_state st);

/* Options -------------------------------------------------------------- */

/*
 * Apply one statefs mount option "key=value" (or a bare flag such as
 * "testclock") to @l.  Returns 1 when the key is one of the store's
 * options and was applied, 0 when it is not (it belongs to FUSE, or it
 * is the adapter's: layout_mount_option), and -EINVAL for a bad value,
 * with a one-line message naming the option in @err.  @l is written only
 * on success; @err may be NULL when @errlen is 0.
 */
int layout_option(struct store_limits *l, const char *opt, char *err,
		  size_t errlen);

/*
 * Check a whole set of limits for consistency after all options were
 * applied (for example max_payload <= max_bytes).  0 or -EINVAL with a
 * message in @err.
 */
int layout_limits_check(const struct store_limits *l, char *err,
			size_t errlen);

/*
 * The statefs options that are not the store's but the adapter's (fs/):
 * they say how the mount talks to the kernel, and a second authority
 * behind store.h takes the same ones.  Parsed from the same table as the
 * store's (--help lists them together).
 */
struct layout_mount {
	/* -o cache_timeout: how long the kernel may keep names and
	 * attributes (bounded by leases; 0 = ask every time). */
	uint64_t cache_timeout_ms;
};

/* Fill @m with the documented defaults. */
void layout_mount_default(struct layout_mount *m);

/*
 * Apply one statefs mount option to @m, as layout_option() does to the
 * store's limits: 1 when the key is one of the adapter's options and was
 * applied, 0 when it is not, -EINVAL for a bad value with a one-line
 * message naming the option in @err.  @m is written only on success.
 */
int layout_mount_option(struct layout_mount *m, const char *opt, char *err,
			size_t errlen);

/* Print the statefs options, each with its default, to @out. */
void layout_help(FILE *out);

/*
 * Print the same options, meanings and defaults as layout_help() in
 * scdoc markup, for the OPTIONS section of the statefs(8) man page (the
 * build inserts it there), so the two cannot disagree.
 */
void layout_help_scdoc(FILE *out);

/*
 * What names the embedded store as SOURCE, in the words --help, the bad
 * source message and the man page (scripts/mangen.c) all use, and the
 * README copies: the rules of a tenant's name (layout_name_check) with
 * NAME_MAX, and no '/' or ':' (a ':' makes it an address).
 */
#define LAYOUT_SOURCE_RULE "name of 1 to 255 bytes with no ':', '/', " \
	"white space or control character, not beginning with '.'"

/*
 * The source argument, `statefs [SOURCE] MNT`: what an fstab line's first
 * field and `mount -t fuse.statefs SOURCE MNT` pass.  Returns 0 when
 * @source names the embedded store: "none", "statefs" or any other name
 * (1..255 bytes by layout_name_check's rules, "-" too, no '/' or ':'),
 * which the mount shows as its source.  Returns 1 when @source is a shared store's
 * address (it has a ':'): "store=SOURCE" is written NUL-terminated to
 * @opt (capacity @optcap) for the caller to apply as -o would be.
 * Returns -EINVAL with a one-line message in @err for anything else (@err
 * may be NULL when @errlen is 0).
 */
int layout_source(const char *source, char *opt, size_t optcap, char *err,
		  size_t errlen);

/*
 * Number parsing shared by options and control files (layout/parse.c).
 * layout_parse_u64: a decimal integer, no sign, no junk, no overflow.
 * layout_parse_seconds: a duration in seconds, "30" or "1.5" (at most
 * millisecond precision), into milliseconds, at most
 * STORE_DURATION_MAX_MS (10^9 s): every duration statefs takes, option
 * or lease, passes here, so none can make a deadline wrap.  0 or -EINVAL.
 */
int layout_parse_u64(const char *s, uint64_t *out);
int layout_parse_seconds(const char *s, uint64_t *ms);

/* Shared store options (layout/store_options.c) ------------------------- */

/*
 * Apply one shared store option to @r: store=URL (redis://HOST:PORT,
 * unix:/PATH, sentinel://HOST:PORT,.../MASTER), store_user=NAME,
 * store_password_file=PATH, store_prefix=NAME, store_timeout=SECONDS,
 * store_limits=adopt|check.  While a sentinel:// list still lacks its
 * "/MASTER", an option without '=' continues the list (FUSE splits -o
 * values at commas).  Returns 1 when the option was ours and applied, 0
 * when it is not a shared store option, -EINVAL for a bad value with a
 * one-line message naming the option in @err.  @r is written only on
 * success; @err may be NULL when @errlen is 0.  The password file is only
 * recorded here: layout_remote_finish reads it.
 */
int layout_remote_option(struct store_remote *r, const char *opt, char *err,
			 size_t errlen);

/*
 * Check a whole set of shared store options once all were applied (a
 * sentinel list has its master name, store_* options come with a store,
 * store_user with a password file) and read the password: the first line
 * of store_password_file, without its line end ("\n" or "\r\n"), 1..1023
 * bytes, no NUL.  This is the one layout function that does I/O.
 * Returns 0, -EINVAL, or the -errno of opening or reading the file, with
 * a one-line message naming the option in @err.  On failure @r->password
 * is left empty.
 */
int layout_remote_finish(struct store_remote *r, char *err, size_t errlen);

/* Print the shared store options, each with its default, to @out. */
void layout_remote_help(FILE *out);

/* Call @row once per shared store option, in --help's order, with its
 * spec ("store_timeout=S"), meaning and default (the man page's rows). */
void layout_remote_rows(void (*row)(void *arg, const char *spec,
				    const char *meaning, const char *def),
			void *arg);

#endif /* STATEFS_LAYOUT_H */
