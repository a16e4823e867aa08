/*
 * fuzz_layout.c - libFuzzer target for every parser in layout/.
 *
 * Each input drives all of them (they are cheap), and each result is
 * compared with a small reference written here from statefs(8) (THE
 * TREE for names, OPTIONS and LEASES),
 * not from layout.c:
 *
 *   layout_name_check        name rules; an accepted name has 1..max_name
 *                            bytes, no byte <= 0x20, 0x7f or '/', no '.'
 *                            first for a tenant or a parent, is not "-",
 *                            and is not "." or ".." for a child
 *   layout_parse_depart      one name, one optional '\n'; @name written
 *                            only on success
 *   layout_parse_u64         decimal digits only, no overflow
 *   layout_parse_seconds     "S" or "S.F" (1..3 decimals) into ms, at
 *                            most STORE_DURATION_MAX_MS; the value
 *                            round-trips through layout_format_seconds,
 *                            which is the shortest form (no trailing
 *                            fraction zeros); a longer one is refused
 *   layout_parse_seconds_value / layout_parse_control_ms
 *                            the same (ms for the latter, at most
 *                            STORE_DURATION_MAX_MS) on a raw buffer: one
 *                            optional '\n', no NUL, bounded length
 *   layout_option            on a copy of a store_limits: applied options
 *                            change exactly their field to the parsed
 *                            value, in range; unknown keys (0) and
 *                            refusals (-EINVAL, one-line message naming
 *                            the option) leave the limits byte-identical
 *   layout_limits_check      0 exactly when every field is in range,
 *                            max_payload <= max_bytes and every tenant
 *                            or user share is STORE_SHARE_AUTO (half its
 *                            ceiling, the default, which no option
 *                            value can spell) or at most its ceiling
 *   layout_source            0 exactly for a name of 1..255 bytes by the
 *                            name rules ("-" too) with no ':' or '/', 1 and
 *                            "store=SOURCE" for one with a ':' that
 *                            fits; else -EINVAL with one line naming
 *                            the source, whatever the message buffer
 *   layout_format_*          snprintf contract at every capacity
 *   layout_remote_option     (statefs(8) "Shared store options") 1 or
 *                            -EINVAL behind a store_* key; a refusal
 *                            leaves the options byte-identical with one
 *                            line naming the option; an accepted store=
 *                            has a host without blanks or "/,[]@" and a
 *                            port >= 1, an absolute path of <= 107 bytes,
 *                            or 1..16 Sentinels and a master name, and
 *                            store_remote_describe's text of it parses
 *                            back to the same place; an accepted prefix
 *                            has 1..64 bytes, no '{', '}', blanks or
 *                            control bytes; a timeout is 1..300000 ms
 *
 * Input: byte 0 is max_name (0..255), byte 1 picks an option key and a
 * capacity, the rest is the text under test.  Any disagreement aborts
 * with a message, so libFuzzer keeps the input.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"

#define TEXT_MAX 512

static void fail(const char *what, const uint8_t *text, size_t len)
{
	fprintf(stderr, "fuzz_layout: %s; input text (%zu bytes):", what, len);
	for (size_t i = 0; i < len && i < 80; i++)
		fprintf(stderr, " %02x", text[i]);
	fprintf(stderr, "\n");
	abort();
}

#define CHECK(cond, what)                                           \
	do {                                                        \
		if (!(cond))                                        \
			fail(what, text, tlen);                     \
	} while (0)

/* References ------------------------------------------------------------- */

/* Which faults a name of @len bytes has: the set of errnos that are
 * legitimate answers (0 when none). */
#define F_INVAL (1u << 0)
#define F_LONG  (1u << 1)

static unsigned ref_name_faults(const uint8_t *b, size_t len, size_t max_name,
				int depth)
{
	unsigned f = 0;

	if (len == 0)
		return F_INVAL;
	if (len > max_name)
		f |= F_LONG;
	/* Dot names: reserved in the root and the tenants (special files);
	 * a child's may begin with one, "." and ".." excepted. */
	if (b[0] == '.' && (depth != LAYOUT_CHILD || len == 1 ||
			    (len == 2 && b[1] == '.')))
		f |= F_INVAL;
	for (size_t i = 0; i < len; i++)
		if (b[i] <= 0x20 || b[i] == 0x7f || b[i] == '/')
			f |= F_INVAL;
	/* "-": the field of .events and .snapshot that does not apply. */
	if (len == 1 && b[0] == '-')
		f |= F_INVAL;
	return f;
}

static bool rc_in_faults(int rc, unsigned f)
{
	if (f == 0)
		return rc == 0;
	return (rc == -EINVAL && (f & F_INVAL)) ||
	       (rc == -ENAMETOOLONG && (f & F_LONG));
}

static bool is_digit(uint8_t c)
{
	return c >= '0' && c <= '9';
}

/* Decimal digits [b, b+n) as a 128-bit number, saturating far above
 * UINT64_MAX (so "too big" stays too big). */
static unsigned __int128 ref_digits(const uint8_t *b, size_t n)
{
	unsigned __int128 v = 0, cap = (unsigned __int128)UINT64_MAX * 100000;

	for (size_t i = 0; i < n; i++) {
		v = v * 10 + (b[i] - '0');
		if (v > cap)
			v = cap;
	}
	return v;
}

/* A whole number: 1+ digits and nothing else, at most UINT64_MAX. */
static bool ref_u64(const uint8_t *b, size_t n, uint64_t *out)
{
	unsigned __int128 v;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_digit(b[i]))
			return false;
	v = ref_digits(b, n);
	if (v > UINT64_MAX)
		return false;
	*out = (uint64_t)v;
	return true;
}

/* Seconds: 1+ digits, optionally '.' and 1..3 digits; into ms. */
static bool ref_seconds(const uint8_t *b, size_t n, uint64_t *ms)
{
	size_t i = 0, d0, nf = 0;
	unsigned __int128 sec, frac = 0, v;

	while (i < n && is_digit(b[i]))
		i++;
	if (i == 0)
		return false;
	sec = ref_digits(b, i);
	if (i < n) {
		if (b[i] != '.')
			return false;
		d0 = ++i;
		while (i < n && is_digit(b[i]))
			i++;
		nf = i - d0;
		if (i != n || nf < 1 || nf > 3)
			return false;
		frac = ref_digits(b + d0, nf);
		for (size_t k = nf; k < 3; k++)
			frac *= 10;
	}
	v = sec * 1000 + frac;
	if (v > STORE_DURATION_MAX_MS) /* statefs(8) LEASES: the longest */
		return false;
	*ms = (uint64_t)v;
	return true;
}

/* A control-file value: drop one trailing '\n'; non-empty, no NUL,
 * shorter than the parser's 32-byte buffer. */
static bool ref_control(const uint8_t *b, size_t *n)
{
	if (*n > 0 && b[*n - 1] == '\n')
		(*n)--;
	if (*n == 0 || *n >= 32 || memchr(b, '\0', *n))
		return false;
	return true;
}

/* The statefs options (statefs(8) OPTIONS): key, kind, range, field. */
enum rkind { R_NUM, R_SEC, R_FLAG };

struct ropt {
	const char *key;
	enum rkind kind;
	uint64_t min, max;
	size_t off;  /* in struct store_limits, or struct layout_mount for
		      * the adapter's option (ref_mount) */
};

#define FIELD(f) offsetof(struct store_limits, f)
#define MFIELD(f) offsetof(struct layout_mount, f)

/* The adapter's option (statefs(8): not the store's): cache_timeout. */
static bool ref_mount(const struct ropt *o)
{
	return strcmp(o->key, "cache_timeout") == 0;
}

static const struct ropt ropts[] = {
	{ "max_tenants", R_NUM, 1, UINT64_MAX, FIELD(max_tenants) },
	{ "max_parents", R_NUM, 1, UINT64_MAX, FIELD(max_parents) },
	{ "max_children", R_NUM, 1, UINT64_MAX, FIELD(max_children) },
	{ "max_bytes", R_NUM, 1, UINT64_MAX, FIELD(max_bytes) },
	{ "max_payload", R_NUM, 1, 16u << 20, FIELD(max_payload) },
	{ "max_name", R_NUM, 1, 255, FIELD(max_name) },
	{ "max_tombstones", R_NUM, 1, UINT64_MAX, FIELD(max_tombstones) },
	{ "tombstone_ttl", R_SEC, 1, STORE_DURATION_MAX_MS,
	  FIELD(tombstone_ttl_ms) },
	{ "parent_quota", R_NUM, 0, UINT64_MAX, FIELD(parent_quota) },
	{ "tenant_quota", R_NUM, 0, UINT64_MAX, FIELD(tenant_quota) },
	{ "default_ttl", R_SEC, 0, STORE_DURATION_MAX_MS, FIELD(default_ttl_ms) },
	{ "drain_window", R_SEC, 0, STORE_DURATION_MAX_MS,
	  FIELD(drain_window_ms) },
	{ "cache_timeout", R_SEC, 0, STORE_DURATION_MAX_MS,
	  MFIELD(cache_timeout_ms) },
	{ "testclock", R_FLAG, 0, 0, FIELD(testclock) },
	/* Appended, so the seeds' selectors keep their keys. */
	{ "tenant_max_parents", R_NUM, 0, UINT64_MAX - 1,
	  FIELD(tenant_max_parents) },
	{ "tenant_max_children", R_NUM, 0, UINT64_MAX - 1,
	  FIELD(tenant_max_children) },
	{ "tenant_max_bytes", R_NUM, 0, UINT64_MAX - 1,
	  FIELD(tenant_max_bytes) },
	{ "tenant_max_tombstones", R_NUM, 0, UINT64_MAX - 1,
	  FIELD(tenant_max_tombstones) },
	{ "max_snapshot_bytes", R_NUM, 1, UINT64_MAX, FIELD(max_snapshot_bytes) },
	{ "user_max_snapshot_bytes", R_NUM, 0, UINT64_MAX - 1,
	  FIELD(user_max_snapshot_bytes) },
};

#define NROPTS (sizeof(ropts) / sizeof(ropts[0]))

/* Tenant and user shares (statefs(8) OPTIONS): each against its
 * ceiling. */
static const struct {
	size_t share, ceiling;
} rshares[] = {
	{ FIELD(tenant_max_parents), FIELD(max_parents) },
	{ FIELD(tenant_max_children), FIELD(max_children) },
	{ FIELD(tenant_max_bytes), FIELD(max_bytes) },
	{ FIELD(tenant_max_tombstones), FIELD(max_tombstones) },
	{ FIELD(user_max_snapshot_bytes), FIELD(max_snapshot_bytes) },
};

static uint64_t at(const struct store_limits *l, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)l + off, sizeof(v));
	return v;
}

/* Is share field @off the default, left to the store? */
static bool share_auto(const struct store_limits *l, size_t off)
{
	for (size_t i = 0; i < sizeof(rshares) / sizeof(rshares[0]); i++)
		if (rshares[i].share == off)
			return at(l, off) == STORE_SHARE_AUTO;
	return false;
}

static const struct ropt *ref_option_key(const char *opt, size_t klen)
{
	for (size_t i = 0; i < NROPTS; i++)
		if (strlen(ropts[i].key) == klen &&
		    memcmp(ropts[i].key, opt, klen) == 0)
			return &ropts[i];
	return NULL;
}

static uint64_t field(const struct store_limits *l, const struct ropt *o)
{
	uint64_t v;

	memcpy(&v, (const char *)l + o->off, sizeof(v));
	return v;
}

/* Is @err one line that names option @key? */
static bool good_message(const char *err, size_t cap, const char *key)
{
	char want[64];

	if (strnlen(err, cap) == cap)
		return false;
	for (const char *c = err; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			return false;
	snprintf(want, sizeof(want), "-o %s", key);
	return strncmp(err, "statefs: ", 9) == 0 && strstr(err, want);
}

/* Checks ----------------------------------------------------------------- */

/* layout_source on the C string @s (@slen bytes) made from @text. */
static void check_source(const uint8_t *text, size_t tlen, const char *s,
			 size_t slen)
{
	char opt[64], err[600];
	int rc;
	/* A node name's rules, "-" allowed. */
	bool name_ok = ref_name_faults((const uint8_t *)s, slen, NAME_MAX,
				       LAYOUT_TENANT) == 0 || strcmp(s, "-") == 0;
	bool address = memchr(s, ':', slen) != NULL, blank = false;
	int want;

	for (size_t i = 0; i < slen; i++)
		blank |= (uint8_t)s[i] <= ' ' || (uint8_t)s[i] == 0x7f;
	if (address)
		want = !blank && slen <= NAME_MAX && slen + 6 < sizeof(opt) ?
		       1 : -EINVAL;
	else
		want = name_ok ? 0 : -EINVAL;
	rc = layout_source(s, opt, sizeof(opt), err, sizeof(err));
	CHECK(rc == want, "layout_source disagrees");
	if (rc == 1)
		CHECK(strncmp(opt, "store=", 6) == 0 && strcmp(opt + 6, s) == 0,
		      "layout_source's option is not store=SOURCE");
	if (rc < 0)
		CHECK(strncmp(err, "statefs: ", 9) == 0 && strstr(err, "source") &&
			      !strchr(err, '\n'),
		      "layout_source message is not one line about the source");
	CHECK(layout_source(s, opt, sizeof(opt), NULL, 0) == rc,
	      "layout_source depends on the message buffer");
}

static void check_names(const uint8_t *text, size_t tlen, size_t max_name,
			size_t cap)
{
	char s[TEXT_MAX + 1], name[TEXT_MAX + 1];
	size_t slen, n;
	unsigned f;
	int rc;

	/* As a C string: up to the first NUL. */
	memcpy(s, text, tlen);
	s[tlen] = '\0';
	slen = strlen(s);
	check_source(text, tlen, s, slen);
	for (int d = LAYOUT_TENANT; d <= LAYOUT_CHILD; d++) {
		rc = layout_name_check(s, max_name, d);
		f = ref_name_faults((const uint8_t *)s, slen, max_name, d);
		CHECK(rc_in_faults(rc, f), "layout_name_check disagrees");
		if (rc != 0)
			continue;
		CHECK(slen >= 1 && slen <= max_name, "accepted name length");
		CHECK(s[0] != '.' || d == LAYOUT_CHILD,
		      "accepted tenant or parent name starts with '.'");
		CHECK(strcmp(s, ".") != 0 && strcmp(s, "..") != 0,
		      "accepted name is . or ..");
		CHECK(strcmp(s, "-") != 0, "accepted name is -");
		for (size_t i = 0; i < slen; i++)
			CHECK((uint8_t)s[i] > 0x20 && (uint8_t)s[i] != 0x7f &&
				      s[i] != '/',
			      "accepted name holds a control, blank or '/'");
	}

	/* .depart: the raw bytes, NULs included. */
	memset(name, 0x5a, sizeof(name));
	rc = layout_parse_depart((const char *)text, tlen, max_name, name, cap);
	n = tlen;
	if (n > 0 && text[n - 1] == '\n')
		n--;
	f = ref_name_faults(text, n, max_name, LAYOUT_PARENT);
	if (f == 0 && n >= cap)
		f = F_LONG; /* the caller's buffer is a bound too */
	CHECK(rc_in_faults(rc, f), "layout_parse_depart disagrees");
	if (rc == 0) {
		CHECK(memcmp(name, text, n) == 0 && name[n] == '\0',
		      "layout_parse_depart name differs");
		CHECK(layout_name_check(name, max_name, LAYOUT_PARENT) == 0,
		      "a departed name fails layout_name_check");
	} else {
		for (size_t i = 0; i < sizeof(name); i++)
			CHECK((uint8_t)name[i] == 0x5a,
			      "layout_parse_depart wrote @name on failure");
	}
}

static void check_seconds_roundtrip(const uint8_t *text, size_t tlen,
				    uint64_t ms)
{
	char b[32], small[8];
	uint64_t back = 0;
	size_t n = layout_format_seconds(b, sizeof(b), ms), m;
	const char *dot = strchr(b, '.');

	CHECK(n == strlen(b) && n > 0, "layout_format_seconds length");
	CHECK(layout_parse_seconds(b, &back) == 0 && back == ms,
	      "layout_format_seconds does not parse back");
	/* The shortest form: no trailing zero in a fraction, none at all
	 * for whole seconds. */
	CHECK((ms % 1000 == 0) == (dot == NULL), "whole seconds with a dot");
	CHECK(!dot || b[n - 1] != '0', "trailing zero in a fraction");
	/* snprintf contract at a small capacity. */
	memset(small, 0x5a, sizeof(small));
	m = layout_format_seconds(small, 5, ms);
	CHECK(m == n, "layout_format_seconds length depends on capacity");
	CHECK(memchr(small, '\0', 5) != NULL, "not NUL-terminated");
	CHECK((uint8_t)small[5] == 0x5a, "wrote past the capacity");
}

static void check_numbers(const uint8_t *text, size_t tlen)
{
	char s[TEXT_MAX + 1];
	size_t slen, n;
	uint64_t v = 0xdeadbeef, want = 0;
	bool ok;
	int rc;

	memcpy(s, text, tlen);
	s[tlen] = '\0';
	slen = strlen(s);

	rc = layout_parse_u64(s, &v);
	ok = ref_u64((const uint8_t *)s, slen, &want);
	CHECK(rc == (ok ? 0 : -EINVAL), "layout_parse_u64 disagrees");
	CHECK(!ok || v == want, "layout_parse_u64 value");

	v = 0xdeadbeef;
	rc = layout_parse_seconds(s, &v);
	ok = ref_seconds((const uint8_t *)s, slen, &want);
	CHECK(rc == (ok ? 0 : -EINVAL), "layout_parse_seconds disagrees");
	if (ok) {
		CHECK(v == want, "layout_parse_seconds value");
		check_seconds_roundtrip(text, tlen, v);
	}

	/* Raw buffers (xattr values, control files). */
	n = tlen;
	ok = ref_control(text, &n) && ref_seconds(text, n, &want);
	v = 0xdeadbeef;
	rc = layout_parse_seconds_value((const char *)text, tlen, &v);
	CHECK(rc == (ok ? 0 : -EINVAL), "layout_parse_seconds_value disagrees");
	CHECK(!ok || v == want, "layout_parse_seconds_value value");

	n = tlen;
	ok = ref_control(text, &n) && ref_u64(text, n, &want) &&
	     want <= STORE_DURATION_MAX_MS;
	v = 0xdeadbeef;
	rc = layout_parse_control_ms((const char *)text, tlen, &v);
	CHECK(rc == (ok ? 0 : -EINVAL), "layout_parse_control_ms disagrees");
	CHECK(ok ? v == want : v == 0xdeadbeef, "layout_parse_control_ms value");

	/* Any number of ms up to the longest duration round-trips, not just
	 * parsed ones; one beyond it is formatted and refused. */
	if (tlen >= 8) {
		char b[32];

		memcpy(&v, text, 8);
		check_seconds_roundtrip(text, tlen, v % (STORE_DURATION_MAX_MS + 1));
		check_seconds_roundtrip(text, tlen, v % 100000);
		if (v > STORE_DURATION_MAX_MS) {
			uint64_t back = 0xdeadbeef;

			layout_format_seconds(b, sizeof(b), v);
			CHECK(layout_parse_seconds(b, &back) == -EINVAL &&
				      back == 0xdeadbeef,
			      "a duration over the longest is taken");
		}
	}
}

/* layout_option on @opt against a copy of @base, then the whole check. */
static void check_option(const uint8_t *text, size_t tlen,
			 const struct store_limits *base, const char *opt)
{
	struct store_limits l;
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	const struct ropt *o = ref_option_key(opt, klen);
	char err[160], lerr[160];
	uint64_t want = 0;
	bool ok = false;
	int rc, lrc;

	/* memcpy, not assignment: the comparisons below include padding */
	memcpy(&l, base, sizeof(l));
	memset(err, 0, sizeof(err));
	rc = layout_option(&l, opt, err, sizeof(err));
	if (!o || ref_mount(o)) {
		CHECK(rc == 0, "layout_option claims an unknown key");
	} else if (o->kind == R_FLAG) {
		ok = eq == NULL;
		CHECK(rc == (ok ? 1 : -EINVAL), "layout_option flag disagrees");
	} else if (eq) {
		size_t vlen = strlen(eq + 1);

		ok = o->kind == R_SEC ?
			ref_seconds((const uint8_t *)eq + 1, vlen, &want) :
			ref_u64((const uint8_t *)eq + 1, vlen, &want);
		ok = ok && want >= o->min && want <= o->max;
		CHECK(rc == (ok ? 1 : -EINVAL), "layout_option value disagrees");
	} else {
		CHECK(rc == -EINVAL, "layout_option took a key without a value");
	}

	if (rc == 1) {
		/* Exactly the option's field changed, to the parsed value. */
		struct store_limits expect;

		memcpy(&expect, base, sizeof(expect));
		if (o->kind == R_FLAG)
			expect.testclock = true;
		else
			memcpy((char *)&expect + o->off, &want, sizeof(want));
		CHECK(memcmp(&l, &expect, sizeof(l)) == 0,
		      "layout_option changed more than its field");
	} else {
		CHECK(memcmp(&l, base, sizeof(l)) == 0,
		      "a refused or foreign option changed the limits");
	}
	if (rc < 0)
		CHECK(good_message(err, sizeof(err), o->key),
		      "refusal message is not one line naming the option");
	/* No message buffer at all is fine too. */
	{
		struct store_limits l2;

		memcpy(&l2, base, sizeof(l2));
		CHECK(layout_option(&l2, opt, NULL, 0) == rc,
		      "layout_option depends on the message buffer");
		CHECK(memcmp(&l2, &l, sizeof(l)) == 0,
		      "layout_option result depends on the message buffer");
	}

	/* The set as a whole. */
	ok = l.max_payload <= l.max_bytes;
	for (size_t i = 0; i < NROPTS; i++)
		if (ropts[i].kind != R_FLAG && !ref_mount(&ropts[i]) &&
		    !share_auto(&l, ropts[i].off) &&
		    (field(&l, &ropts[i]) < ropts[i].min ||
		     field(&l, &ropts[i]) > ropts[i].max))
			ok = false;
	for (size_t i = 0; i < sizeof(rshares) / sizeof(rshares[0]); i++)
		if (at(&l, rshares[i].share) != STORE_SHARE_AUTO &&
		    at(&l, rshares[i].share) > at(&l, rshares[i].ceiling))
			ok = false;
	memset(lerr, 0, sizeof(lerr));
	lrc = layout_limits_check(&l, lerr, sizeof(lerr));
	CHECK(lrc == (ok ? 0 : -EINVAL), "layout_limits_check disagrees");
	if (lrc)
		CHECK(strnlen(lerr, sizeof(lerr)) < sizeof(lerr) &&
			      strncmp(lerr, "statefs: ", 9) == 0 &&
			      !strchr(lerr, '\n'),
		      "layout_limits_check message");
}

/* layout_mount_option on @opt: only the adapter's options, by the same
 * rules as layout_option; exactly its field changes, or nothing. */
static void check_mount_option(const uint8_t *text, size_t tlen,
			       const char *opt)
{
	struct layout_mount m, base;
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	const struct ropt *o = ref_option_key(opt, klen);
	char err[160];
	uint64_t want = 0;
	bool ok = false;
	int rc;

	layout_mount_default(&base);
	memcpy(&m, &base, sizeof(m));
	memset(err, 0, sizeof(err));
	rc = layout_mount_option(&m, opt, err, sizeof(err));
	if (!o || !ref_mount(o)) {
		CHECK(rc == 0, "layout_mount_option claims a key not its own");
	} else if (eq) {
		ok = ref_seconds((const uint8_t *)eq + 1, strlen(eq + 1), &want) &&
		     want >= o->min && want <= o->max;
		CHECK(rc == (ok ? 1 : -EINVAL),
		      "layout_mount_option value disagrees");
	} else {
		CHECK(rc == -EINVAL,
		      "layout_mount_option took a key without a value");
	}
	if (rc == 1) {
		memcpy((char *)&base + o->off, &want, sizeof(want));
		CHECK(memcmp(&m, &base, sizeof(m)) == 0,
		      "layout_mount_option changed more than its field");
	} else {
		CHECK(memcmp(&m, &base, sizeof(m)) == 0,
		      "a refused or foreign option changed the mount options");
	}
	if (rc < 0)
		CHECK(good_message(err, sizeof(err), o->key),
		      "refusal message is not one line naming the option");
}

static void check_options(const uint8_t *text, size_t tlen, uint8_t sel)
{
	struct store_limits base;
	char opt[TEXT_MAX + 64];
	char s[TEXT_MAX + 1];
	const struct ropt *o = &ropts[sel % NROPTS];

	memcpy(s, text, tlen);
	s[tlen] = '\0';

	store_limits_default(&base);
	/* Sometimes start from limits that are already odd, so the
	 * whole-set check sees failures of its own. */
	if (sel & 0x80) {
		base.max_bytes = tlen;
		base.max_payload = tlen ? (uint64_t)text[0] * 1024 : 0;
		base.tombstone_ttl_ms = tlen % 3 == 0 ? 0 : 1500;
		/* A share that a smaller ceiling leaves above it. */
		base.tenant_max_parents = tlen % 5 == 0 ? 100 :
					  STORE_SHARE_AUTO;
	}

	/* The text as the whole option, then behind a real key. */
	check_option(text, tlen, &base, s);
	check_mount_option(text, tlen, s);
	snprintf(opt, sizeof(opt), "%s=%s", o->key, s);
	check_option(text, tlen, &base, opt);
	check_mount_option(text, tlen, opt);
	check_option(text, tlen, &base, o->key);
	check_mount_option(text, tlen, o->key);
}

static void check_formats(const uint8_t *text, size_t tlen, size_t cap)
{
	struct store_limits l;
	struct store_snap_row row;
	struct layout_stats_view v;
	char full[4096], small[300];
	char s[TEXT_MAX + 1];
	size_t n, m;
	uint64_t x = 0;

	memcpy(s, text, tlen);
	s[tlen] = '\0';
	if (tlen >= 8)
		memcpy(&x, text, 8);
	cap %= sizeof(small);

	store_limits_default(&l);
	memset(&v, 0, sizeof(v));
	v.instance = x;
	v.state = (enum store_state)(x % 3);
	v.uptime_ms = x;
	v.tenant = (x & 1) ? s : NULL;
	v.stats.parents = x;
	v.stats.refused[STORE_REFUSED_GONE] = x;
	v.limits = &l;
	n = layout_format_stats(full, sizeof(full), &v);
	CHECK(n < sizeof(full) && n == strlen(full), "layout_format_stats length");
	memset(small, 0x5a, sizeof(small));
	m = layout_format_stats(small, cap, &v);
	CHECK(m == n, "layout_format_stats length depends on capacity");
	CHECK(cap == 0 || memchr(small, '\0', cap), "stats not NUL-terminated");
	CHECK(cap == sizeof(small) - 1 || (uint8_t)small[cap] == 0x5a,
	      "layout_format_stats wrote past the capacity");

	memset(&row, 0, sizeof(row));
	row.kind = (enum store_snap_kind)(x % 4);
	row.tenant = s;
	row.parent = (x & 2) ? s : "";
	row.child = "";
	row.generation = (int64_t)x;
	row.version = -1;
	row.size = (int64_t)(x >> 3);
	row.nlink = -1;
	row.ttl_ms_left = (int64_t)(x >> 1);
	row.ino = 7;
	n = layout_format_snapshot_row(full, sizeof(full), &row);
	CHECK(n < sizeof(full) && n == strlen(full) && full[n - 1] == '\n',
	      "snapshot row length");
	memset(small, 0x5a, sizeof(small));
	m = layout_format_snapshot_row(small, cap, &row);
	CHECK(m == n, "snapshot row length depends on capacity");
	CHECK(cap == sizeof(small) - 1 || (uint8_t)small[cap] == 0x5a,
	      "snapshot row wrote past the capacity");

	n = layout_format_drain(full, sizeof(full), v.state, x);
	CHECK(n == strlen(full) && full[n - 1] == '\n', "drain text");

	/* Special files: only names that begin with '.' are special, and
	 * the three lookups agree. */
	for (int d = 0; d < 4; d++) {
		const struct layout_special *sp = layout_special_find(s, d);

		CHECK(!sp || (s[0] == '.' && strcmp(sp->name, s) == 0 &&
			      d <= LAYOUT_TENANT),
		      "layout_special_find");
		for (size_t i = 0; (sp = layout_special_nth(d, i)); i++)
			CHECK(layout_special_find(sp->name, d) == sp &&
				      layout_special_slot(sp->slot) == sp &&
				      sp->name[0] == '.',
			      "layout_special_nth/find/slot disagree");
	}
}

/* A host as statefs(8) allows it. */
static bool ref_host_ok(const struct store_remote_addr *a)
{
	if (a->host[0] == '\0' || a->port == 0)
		return false;
	for (const char *c = a->host; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f || strchr("/,[]@", *c))
			return false;
	return true;
}

/* Where @a and @b point: kind, address, path, Sentinels, master. */
static bool same_place(const struct store_remote *a,
		       const struct store_remote *b)
{
	if (a->kind != b->kind || a->nsentinels != b->nsentinels ||
	    strcmp(a->path, b->path) != 0 || strcmp(a->master, b->master) != 0 ||
	    strcmp(a->addr.host, b->addr.host) != 0 || a->addr.port != b->addr.port)
		return false;
	for (unsigned i = 0; i < a->nsentinels; i++)
		if (strcmp(a->sentinels[i].host, b->sentinels[i].host) != 0 ||
		    a->sentinels[i].port != b->sentinels[i].port)
			return false;
	return true;
}

/* The shared store options on the text, behind the key @sel picks. */
static void check_remote(const uint8_t *text, size_t tlen, uint8_t sel)
{
	static const char *const keys[] = {
		"store=", "store=redis://", "store=unix:", "store=sentinel://",
		"store_prefix=", "store_user=", "store_timeout=", "store_limits=",
	};
	const char *key = keys[sel % 8];
	char s[TEXT_MAX + 1], opt[TEXT_MAX + 32], err[600], name[32];
	struct store_remote r, before;
	int rc;

	memcpy(s, text, tlen);
	s[tlen] = '\0';
	snprintf(opt, sizeof(opt), "%s%s", key, s);
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(key, "="), key);
	store_remote_default(&r);
	memcpy(&before, &r, sizeof(r));
	memset(err, 0, sizeof(err));
	rc = layout_remote_option(&r, opt, err, sizeof(err));
	CHECK(rc == 1 || rc == -EINVAL, "layout_remote_option: not 1 or -EINVAL");
	if (rc < 0) {
		CHECK(memcmp(&r, &before, sizeof(r)) == 0,
		      "a refused store option changed the options");
		CHECK(good_message(err, sizeof(err), name),
		      "store option refusal is not one line naming it");
		return;
	}
	switch (sel % 8) {
	case 4:
		CHECK(strlen(r.prefix) >= 1 && strlen(r.prefix) <= 64 &&
			      !strpbrk(r.prefix, "{} \t\n\r\x7f"),
		      "accepted a bad store_prefix");
		for (const char *c = r.prefix; *c; c++)
			CHECK((unsigned char)*c > ' ', "store_prefix control byte");
		return;
	case 6:
		CHECK(r.timeout_ms >= 1 && r.timeout_ms <= 300000,
		      "store_timeout out of range");
		return;
	case 5:
	case 7:
		return;
	}
	switch (r.kind) {
	case STORE_REMOTE_TCP:
		CHECK(ref_host_ok(&r.addr), "accepted a bad redis:// address");
		break;
	case STORE_REMOTE_UNIX:
		CHECK(r.path[0] == '/' && strlen(r.path) <= 107,
		      "accepted a bad unix: path");
		break;
	case STORE_REMOTE_SENTINEL:
		CHECK(r.nsentinels >= 1 && r.nsentinels <= 16,
		      "accepted a bad number of Sentinels");
		for (unsigned i = 0; i < r.nsentinels; i++)
			CHECK(ref_host_ok(&r.sentinels[i]),
			      "accepted a bad Sentinel address");
		CHECK(r.sentinel_open ? r.master[0] == '\0' :
			      r.master[0] != '\0' && !strpbrk(r.master, "/ "),
		      "accepted a bad master name");
		break;
	case STORE_REMOTE_CLUSTER:
		CHECK(r.nsentinels >= 1 && r.nsentinels <= 16,
		      "accepted a bad number of cluster seeds");
		for (unsigned i = 0; i < r.nsentinels; i++)
			CHECK(ref_host_ok(&r.sentinels[i]),
			      "accepted a bad cluster seed address");
		CHECK(r.master[0] == '\0', "a cluster with a master name");
		break;
	default:
		CHECK(false, "store= accepted without a kind");
	}
	if (!r.sentinel_open) {
		/* What messages show parses back to the same place. */
		char text2[8192], opt2[8200];
		struct store_remote r2;

		store_remote_describe(text2, sizeof(text2), &r);
		snprintf(opt2, sizeof(opt2), "store=%s", text2);
		store_remote_default(&r2);
		CHECK(layout_remote_option(&r2, opt2, NULL, 0) == 1 &&
			      same_place(&r, &r2),
		      "store_remote_describe does not parse back");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *text;
	size_t tlen, max_name, cap;
	uint8_t sel;

	if (size < 2)
		return 0;
	max_name = data[0];
	sel = data[1];
	text = data + 2;
	tlen = size - 2;
	if (tlen > TEXT_MAX)
		tlen = TEXT_MAX;
	/* .depart's buffer: mostly roomy, sometimes tight. */
	cap = (sel & 0x40) ? 1 + (sel & 0x3f) : TEXT_MAX + 1;

	check_names(text, tlen, max_name, cap);
	check_numbers(text, tlen);
	check_options(text, tlen, sel);
	check_formats(text, tlen, sel);
	check_remote(text, tlen, sel);
	return 0;
}
