/*
 * fuzz_store.h - what the parts of the fuzz_store target share: its name
 * space and ceilings, the outcomes a step allows, the reference model's
 * types and the harness's, and each part's functions, grouped under the
 * file that defines them.
 *
 * One libFuzzer target, build/fuzz/fuzz_store, of tests/fuzz/fuzz_store.c
 * (the entry point, failing and the trace: its essay says what the
 * target checks) and the files of tests/fuzz/store/: model.c, the
 * reference model written from statefs(8) and store.h; compare.c, the
 * store side's lookups and the comparison of the whole store with the
 * model after every step; ops.c, the operations.
 */
#ifndef STATEFS_FUZZ_STORE_H
#define STATEFS_FUZZ_STORE_H

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_test.h"

#define NT 2           /* tenants t0 t1 */
#define NP 3           /* parents p0 p1 p2 */
#define NC 4           /* children c0 c1 c2 c3 */
#define NSLOT 16       /* model state slots (> max_children) */
#define NSTAGE 2
#define NHANDLE 2
#define MAX_OPS 256
#define MAX_INOS 2048

#define MAX_PARENTS 4
#define MAX_CHILDREN 6
#define MAX_TOMBS 2
#define PARENT_QUOTA 3
#define MAX_PAYLOAD 8
#define MAX_BYTES 16
#define TOMB_TTL 1000
#define DRAIN_WINDOW 500
#define CLOCK_START 1000000
#define EVENT_LOG 64

static const char *const TN[NT] = { "t0", "t1" };
static const char *const PN[NP] = { "p0", "p1", "p2" };
static const char *const CN[NC] = { "c0", "c1", "c2", "c3" };

static const uint64_t TTLS[8] = { 0, 1, 100, 250, 500, 700, 1000, 2000 };
static const uint64_t ADVANCES[8] = { 1, 50, 99, 100, 250, 500, 1000, 3000 };
static const uint64_t OFFSETS[8] = { 0, 0, 1, 2, 4, 7, 9, UINT64_MAX - 1 };

static const struct store_owner OWNER = { 1000, 1000, 0755 };

/* Outcomes as bits, so a step can allow more than one. ------------------- */

static inline unsigned code(int rc)
{
	switch (-rc) {
	case 0: return 0;
	case ENOENT: return 1;
	case EEXIST: return 2;
	case ESTALE: return 3;
	case EAGAIN: return 4;
	case ENOSPC: return 5;
	case EDQUOT: return 6;
	case EFBIG: return 7;
	case EINVAL: return 8;
	case EROFS: return 9;
	case EXDEV: return 10;
	case EBADF: return 11;
	case EPERM: return 12;
	case ENOTDIR: return 13;
	case EISDIR: return 14;
	default: return 31;
	}
}

#define OK (1u << 0)
#define M(e) (1u << code(-(e)))

/* The reference model ------------------------------------------------------ */

struct mstate {
	bool live;
	uint64_t inc;                  /* incarnation: unique per state */
	int tenant;
	uint8_t data[MAX_PAYLOAD];
	size_t len;
	uint64_t version;
	unsigned nlink;
	uint64_t ttl, deadline;        /* deadline 0: no lease */
	uint64_t ino;                  /* learned from the store; 0 unknown */
};

struct mparent {
	bool live;
	uint64_t inc;
	uint64_t gen;
	uint64_t ttl, deadline, child_ttl;
	int link[NC];                  /* state slot, -1: no such child */
	uint64_t ino;
};

struct mtomb {
	bool live;
	uint64_t gen, deadline;
};

struct mtenant {
	bool live;
	uint64_t inc;
	enum store_state drain;
	uint64_t drain_deadline;
	struct mparent p[NP];
	struct mtomb tomb[NP];
	uint64_t ino;
};

struct model {
	struct store_limits lim;
	uint64_t now;
	enum store_state state;        /* the store's drain */
	uint64_t drain_deadline;
	struct mtenant t[NT];
	struct mstate st[NSLOT];
	uint64_t next_inc;
	/* The open stages (fz's and op_publish's): what they stage
	 * counts beside the content in max_bytes and the tenant shares. */
	const struct mstage *stages[NSTAGE + 1];
};

/* An open stage: the model's view, and the store's objects. */
struct mstage {
	bool open;
	int sid;
	int tenant;                    /* its state's, where its bytes count */
	uint64_t tinc;                 /* that tenant's incarnation */
	uint64_t inc;
	enum store_stage_mode mode;
	uint8_t pin[MAX_PAYLOAD];      /* what it opened on (or re-pinned) */
	size_t pinlen;
	uint64_t base;                 /* CAS base version */
	uint8_t buf[MAX_PAYLOAD];      /* staged bytes */
	size_t len;
	bool staged, dirty;
	bool written;                  /* bytes or a size were staged */
	int failed;                    /* a refused write: sticky errno */
	struct store_stage *st;
	struct store_node *child;
};

/* A parent node kept across steps (an open directory). */
struct mhandle {
	bool used;
	int ti, pi;
	uint64_t inc;
	struct store_node *node;
};

struct fuzz_clock {
	uint64_t now;
};

struct fz {
	struct store *s;
	struct fuzz_clock clk;
	struct model m;
	struct mstage stage[NSTAGE];
	struct mhandle h[NHANDLE];
	const uint8_t *in;
	size_t len, pos;
	uint64_t inos[MAX_INOS];       /* every inode number seen */
	size_t ninos;
	char trace[MAX_OPS * 8][96];
	size_t ntrace;
	bool live_trace;
	bool verifying;                /* outcomes are not traced */
	bool peeking;                  /* verify before the reaper ran */
	bool in_snapshot;              /* OP_SNAPSHOT is taking one */
	uint8_t snap_mask;             /* its steps that run an operation */
};

static inline uint64_t fuzz_now(void *arg)
{
	return ((struct fuzz_clock *)arg)->now;
}

/* tests/fuzz/fuzz_store.c: failing */
void note(struct fz *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void die(struct fz *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
void expect(struct fz *f, const char *what, int rc, unsigned allowed);

/* tests/fuzz/store/model.c: the reference model */
unsigned m_tenant_links(const struct mtenant *t);
unsigned m_count_parents(const struct model *m, int only);
unsigned m_count_states(const struct model *m, int only);
uint64_t m_count_bytes(const struct model *m, int only);
uint64_t m_count_staged(const struct model *m, int only,
			const struct mstage *except);
unsigned m_count_tombs(const struct model *m, int only);
unsigned m_count_tenants(const struct model *m);
void m_settle(struct model *m);
void m_expire(struct model *m);
uint64_t m_next_deadline(const struct model *m);
bool m_has_parent(const struct model *m, int ti, int pi);
int m_child(const struct model *m, int ti, int pi, int ci);
bool handle_valid(const struct model *m, const struct mhandle *h);
unsigned m_mkdir_tenant(struct model *m, int ti, int rc);
unsigned m_rmdir_tenant(struct model *m, int ti, int rc);
unsigned m_join(struct model *m, int ti, int pi, int rc);
unsigned m_leave(struct model *m, int ti, int pi, bool must_exist,
		 int rc);
unsigned m_create(struct model *m, int ti, int pi, int ci, bool excl,
		  int rc);
unsigned m_unlink(struct model *m, int ti, int pi, int ci, int rc);
unsigned m_link(struct model *m, int sid, int sti, int ti, int pi,
		int ci, int rc);
unsigned m_rename(struct model *m, int ti, int pi, int ci, int dti,
		  int dpi, int dci, unsigned flags, int rc);
unsigned m_set_ttl(struct model *m, int ti, uint64_t *ttl,
		   uint64_t *deadline, uint64_t v, int rc);
unsigned m_renew(struct model *m, int ti, uint64_t ttl,
		 uint64_t *deadline, int rc);
unsigned m_truncate(struct model *m, int sid, uint64_t size, int rc);
bool m_stage_live(const struct model *m, const struct mstage *g);
void m_stage_open(struct model *m, struct mstage *g, int sid,
		  enum store_stage_mode mode);
unsigned m_stage_write(struct model *m, struct mstage *g,
		       const uint8_t *b, size_t n, uint64_t off, int rc);
unsigned m_stage_truncate(struct model *m, struct mstage *g,
			  uint64_t size, int rc);
unsigned m_stage_publish(struct model *m, struct mstage *g, int rc);
unsigned m_stage_flush(struct model *m, struct mstage *g, int rc);

/* tests/fuzz/store/compare.c: the store side, and the full comparison */
uint8_t take(struct fz *f);
int lookup_tenant(struct fz *f, int ti, struct store_node **out);
int lookup_parent(struct fz *f, int ti, int pi, struct store_node **out);
int lookup_child(struct fz *f, int ti, int pi, int ci,
		 struct store_node **out);
void expect_found(struct fz *f, const char *what, int rc, bool found);
void compare_list(struct fz *f, struct store_node *dir,
		  const char *const *names, int n, unsigned want,
		  const char *what);
void compare_snapshot_rows(struct fz *f, const struct store_snapshot *snap,
			   const struct model *m, int only, bool peeking,
			   const char *what);
void verify(struct fz *f);
void peek_verify(struct fz *f, const struct model *after);
void fz_settle(struct fz *f);

/* tests/fuzz/store/ops.c: the operations */
void stage_drop(struct fz *f, struct mstage *g);
void handle_drop(struct fz *f, struct mhandle *h);
void run_op(struct fz *f);

#endif /* STATEFS_FUZZ_STORE_H */
