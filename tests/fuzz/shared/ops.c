/*
 * ops.c - fuzz_shared's operations (tests/fuzz/fuzz_shared.c says what the
 * target checks): each takes its arguments from the input and runs on
 * both sides, the embedded store and the mount of the shared store,
 * which must give the same outcome; stages and parent handles kept
 * across steps, and operations meaningless at their depth.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"
#include "tests/unit/redis/redis_fixture.h"
#include "store/store.h"

#include "tests/fuzz/fuzz_shared.h"

/* Operations ------------------------------------------------------------------- */

enum op {
	OP_MKDIR_T = 0, OP_RMDIR_T, OP_JOIN, OP_LEAVE, OP_DEPART, OP_CREATE,
	OP_PUBLISH, OP_TRUNCATE, OP_UNLINK, OP_LINK, OP_RENAME, OP_SET_TTL,
	OP_RENEW, OP_CHILD_TTL, OP_ADVANCE, OP_DRAIN, OP_STAGE_OPEN,
	OP_STAGE_WRITE, OP_STAGE_PUBLISH, OP_STAGE_READ, OP_STAGE_CLOSE,
	OP_STAGE_TRUNCATE, OP_STAGE_FLUSH, OP_HANDLE, OP_HANDLE_CREATE,
	OP_HANDLE_LIST, OP_CHMOD, OP_WRONG_DEPTH, NOPS
};

static const char *const OPNAME[NOPS] = {
	"mkdir-tenant", "rmdir-tenant", "join", "leave", "depart", "create",
	"publish", "truncate", "unlink", "link", "rename", "set-ttl", "renew",
	"child-ttl", "advance", "drain", "stage-open", "stage-write",
	"stage-publish", "stage-read", "stage-close", "stage-truncate",
	"stage-flush", "handle", "handle-create", "handle-list", "chmod",
	"wrong-depth",
};

static const struct store_cred *cred_of(int x)
{
	return x % 3 ? &CREDS[x % 3] : NULL;
}

/* Attributes that two authorities must agree on (not the times). */
static void same_attr(const char *what, const struct store_attr *a,
		      const struct store_attr *b)
{
	char w[64];

	snprintf(w, sizeof(w), "%s.ino", what);
	pair_ino(w, a->ino, b->ino, true);
	snprintf(w, sizeof(w), "%s.mode", what);
	same(w, (long)a->mode, (long)b->mode);
	snprintf(w, sizeof(w), "%s.uid", what);
	same(w, (long)a->uid, (long)b->uid);
	snprintf(w, sizeof(w), "%s.gid", what);
	same(w, (long)a->gid, (long)b->gid);
	snprintf(w, sizeof(w), "%s.nlink", what);
	same(w, (long)a->nlink, (long)b->nlink);
	snprintf(w, sizeof(w), "%s.size", what);
	same(w, (long)a->size, (long)b->size);
}

static void op_mkdir(const struct path *p, int depth)
{
	struct store_node *dir[2], *out[2] = { NULL, NULL };
	struct store_attr at[2];
	int rc[2];

	if (!find(p, depth - 1, dir))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_mkdir_entry(F.d[i].s, dir[i],
					  depth == 1 ? TN[p->t] : PN[p->p],
					  &OWNERS[p->x & 1], &out[i], &at[i]);
	same("mkdir", rc[0], rc[1]);
	if (rc[0] == 0)
		same_attr("attr", &at[0], &at[1]);
	unref2(out);
	unref2(dir);
}

static void op_remove(int op, const struct path *p)
{
	struct store_node *dir[2];
	int rc[2];

	if (!find(p, op == OP_RMDIR_T ? 0 : 1, dir))
		return;
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		if (op == OP_DEPART)
			rc[i] = store_depart(s, dir[i], PN[p->p], cred_of(p->x));
		else
			rc[i] = store_rmdir(s, dir[i], op == OP_RMDIR_T ?
					    TN[p->t] : PN[p->p], cred_of(p->x));
	}
	same(OPNAME[op], rc[0], rc[1]);
	unref2(dir);
}

static void op_create(const struct path *p)
{
	struct store_node *dir[2], *out[2] = { NULL, NULL };
	struct store_attr at[2];
	bool created[2] = { false, false };
	int rc[2];

	if (!find(p, 2, dir))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_create_entry(F.d[i].s, dir[i], CN[p->c],
					   &OWNERS[(p->x >> 1) & 1], p->x & 1,
					   &out[i], &created[i], &at[i]);
	same("create", rc[0], rc[1]);
	if (rc[0] == 0) {
		same("created", created[0], created[1]);
		same_attr("attr", &at[0], &at[1]);
	}
	unref2(out);
	unref2(dir);
}

/* Open a stage on both, write @len bytes of the input at @off, publish,
 * close: one open-write-close. */
static void op_publish(const struct path *p)
{
	static const enum store_stage_mode modes[4] = {
		STORE_STAGE_REPLACE, STORE_STAGE_APPEND, STORE_STAGE_CAS,
		STORE_STAGE_CAS,
	};
	enum store_stage_mode mode = modes[p->x & 3];
	uint64_t off = mode == STORE_STAGE_CAS ? OFFSETS[p->x & 7] : 0;
	size_t len = next_byte() % (MAX_PAYLOAD + 2);
	uint8_t buf[MAX_PAYLOAD + 2];
	struct store_node *n[2];
	struct store_stage *st[2] = { NULL, NULL };
	int rc[2];

	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)next_byte();
	if (!find(p, 3, n))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_stage_open(F.d[i].s, n[i], mode, &st[i]);
	same("open", rc[0], rc[1]);
	if (rc[0] == 0) {
		for (int i = 0; i < 2; i++)
			rc[i] = (int)store_stage_write(st[i], buf, len, off);
		same("write", rc[0], rc[1]);
		for (int i = 0; i < 2; i++)
			rc[i] = store_stage_publish(st[i]);
		same("publish", rc[0], rc[1]);
	}
	for (int i = 0; i < 2; i++)
		if (st[i])
			store_stage_close(st[i]);
	unref2(n);
}

static void op_setattr(int op, const struct path *p)
{
	struct store_node *n[2];
	struct store_attr in, out[2];
	int depth = op == OP_TRUNCATE ? 3 : 1 + (p->x & 3) % 3;
	unsigned mask;
	int rc[2];

	memset(&in, 0, sizeof(in));
	if (op == OP_TRUNCATE) {
		mask = STORE_SET_SIZE;
		in.size = next_byte() % (MAX_PAYLOAD + 4);
	} else {
		mask = STORE_SET_MODE;
		in.mode = MODES[next_byte() & 7];
	}
	if (!find(p, depth, n))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_setattr(F.d[i].s, n[i], mask, &in, &out[i]);
	same(OPNAME[op], rc[0], rc[1]);
	if (rc[0] == 0)
		same_attr("attr", &out[0], &out[1]);
	unref2(n);
}

static void op_unlink(const struct path *p)
{
	struct store_node *dir[2];
	int rc[2];

	if (!find(p, 2, dir))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_unlink(F.d[i].s, dir[i], CN[p->c]);
	same("unlink", rc[0], rc[1]);
	unref2(dir);
}

static void op_link(const struct path *p)
{
	struct path q = next_path();
	struct store_node *c[2], *dir[2];
	struct store_attr at[2];
	int rc[2];

	if (!find(p, 3, c))
		return;
	if (find(&q, 2, dir)) {
		for (int i = 0; i < 2; i++)
			rc[i] = store_link_entry(F.d[i].s, c[i], dir[i],
						 CN[q.c], &at[i]);
		same("link", rc[0], rc[1]);
		if (rc[0] == 0)
			same_attr("attr", &at[0], &at[1]);
		unref2(dir);
	}
	unref2(c);
}

static void op_rename(const struct path *p)
{
	struct path q = next_path();
	struct store_node *from[2], *to[2];
	int rc[2];

	if (!find(p, 2, from))
		return;
	if (find(&q, 2, to)) {
		for (int i = 0; i < 2; i++)
			rc[i] = store_rename(F.d[i].s, from[i], CN[p->c],
					     to[i], CN[q.c],
					     (unsigned)p->x & 3);
		same("rename", rc[0], rc[1]);
		unref2(to);
	}
	unref2(from);
}

/* set_ttl, renew, child_ttl: of a parent (x bit 0 clear) or a child. */
static void op_lease(int op, const struct path *p)
{
	struct store_node *n[2];
	uint64_t ttl = TTLS[next_byte() & 7];
	int rc[2];

	if (!find(p, op == OP_CHILD_TTL ? 2 : 2 + (p->x & 1), n))
		return;
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		if (op == OP_SET_TTL)
			rc[i] = store_set_ttl(s, n[i], ttl);
		else if (op == OP_RENEW)
			rc[i] = store_renew(s, n[i]);
		else
			rc[i] = store_set_child_ttl(s, n[i], ttl);
	}
	same(OPNAME[op], rc[0], rc[1]);
	unref2(n);
}

static void op_advance(const struct path *p)
{
	uint64_t ms = ADVANCES[p->x];
	int rc;

	F.clock += ms;
	store_reap_due(F.d[EMB].s);
	rc = store_clock_advance(F.d[SHR].s, ms);
	same("advance", 0, rc);
}

/* A drain of the store (x 7) or of tenant t; x 6: drain_now. */
static void op_drain(const struct path *p)
{
	struct store_node *t[2] = { NULL, NULL };
	int rc[2];

	if (p->x < 6 && !find(p, 1, t))
		return;
	/* FUZZ_SHARED_SKIP=store-drain: not the store's drain with a
	 * window, whose known divergence in the tenant layout (README.md,
	 * "Cluster mode") would stop every run at once. */
	if (p->x == 7 && F.skip_store_drain) {
		note_skip();
		return;
	}
	for (int i = 0; i < 2; i++)
		rc[i] = p->x == 6 ? store_drain_now(F.d[i].s, NULL) :
			store_drain_as(F.d[i].s, t[i], cred_of(p->x));
	same("drain", rc[0], rc[1]);
	unref2(t);
}

/* Stages kept across steps --------------------------------------------------- */

static void stage_close2(int k)
{
	for (int i = 0; i < 2; i++) {
		if (F.d[i].stage[k])
			store_stage_close(F.d[i].stage[k]);
		F.d[i].stage[k] = NULL;
	}
}

static void op_stage_open(const struct path *p)
{
	int k = p->x & 1;
	enum store_stage_mode mode = (enum store_stage_mode)(p->x >> 1 & 3);
	struct store_node *n[2];
	int rc[2];

	stage_close2(k);
	if (!find(p, 3, n))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_stage_open(F.d[i].s, n[i], mode,
					 &F.d[i].stage[k]);
	same("open", rc[0], rc[1]);
	unref2(n);
}

static void op_stage(int op, const struct path *p)
{
	int k = p->t;
	uint64_t off = OFFSETS[p->x];
	uint8_t buf[2][MAX_PAYLOAD + 4];
	size_t len = 0;
	long rc[2];

	if (op == OP_STAGE_WRITE) {
		len = next_byte() % (MAX_PAYLOAD + 2);
		for (size_t j = 0; j < len; j++)
			buf[0][j] = (uint8_t)next_byte();
	}
	if (!F.d[EMB].stage[k])
		return;
	if (op == OP_STAGE_CLOSE) {
		stage_close2(k);
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct store_stage *st = F.d[i].stage[k];

		switch (op) {
		case OP_STAGE_WRITE:
			rc[i] = store_stage_write(st, buf[0], len, off);
			break;
		case OP_STAGE_PUBLISH:
			rc[i] = store_stage_publish(st);
			break;
		case OP_STAGE_FLUSH:
			rc[i] = store_stage_flush(st);
			break;
		case OP_STAGE_TRUNCATE:
			rc[i] = store_stage_truncate(st, (uint64_t)p->x * 2);
			break;
		default: /* OP_STAGE_READ */
			memset(buf[i], 0, sizeof(buf[i]));
			rc[i] = store_stage_read(st, buf[i], sizeof(buf[i]),
						 off > MAX_PAYLOAD ? 0 : off);
			break;
		}
	}
	same(OPNAME[op], rc[0], rc[1]);
	if (op == OP_STAGE_READ && rc[0] > 0 &&
	    memcmp(buf[0], buf[1], (size_t)rc[0]) != 0)
		die("stage %d reads different bytes", k);
}

/* Parent handles kept across steps ----------------------------------------------- */

static void op_handle(int op, const struct path *p)
{
	int k = p->x & 1;
	struct store_node *out[2] = { NULL, NULL };
	int rc[2];

	if (op == OP_HANDLE) {
		for (int i = 0; i < 2; i++) {
			if (F.d[i].handle[k])
				store_node_unref(F.d[i].s, F.d[i].handle[k]);
			F.d[i].handle[k] = NULL;
		}
		if (find(p, 2, out))
			for (int i = 0; i < 2; i++)
				F.d[i].handle[k] = out[i];
		return;
	}
	if (!F.d[EMB].handle[k])
		return;
	for (int i = 0; i < 2; i++) {
		struct store_node *h = F.d[i].handle[k];
		struct store_dirlist l;
		bool created;

		if (op == OP_HANDLE_CREATE) {
			rc[i] = store_create(F.d[i].s, h, CN[p->c],
					     &OWNERS[0], false, &out[i],
					     &created);
		} else {
			rc[i] = store_list(F.d[i].s, h, &l);
			if (rc[i] == 0) {
				rc[i] = (int)l.n;
				store_dirlist_free(&l);
			}
		}
	}
	same(OPNAME[op], rc[0], rc[1]);
	unref2(out);
}

/*
 * Operations meaningless at their depth: x picks one.  0 mkdir in a
 * parent, 1 create in a tenant, 2 rmdir of a child's name, 3 unlink of
 * a parent's name, 4 link into a tenant, 5 rename between tenants'
 * names, 6 set_ttl of a tenant, 7 a stage on a parent.
 */
static void op_wrong(const struct path *p)
{
	int depth = p->x == 0 || p->x == 2 || p->x == 7 ? 2 : 1;
	struct store_node *n[2], *c[2] = { NULL, NULL }, *out[2] = { NULL, NULL };
	struct store_stage *st[2] = { NULL, NULL };
	int rc[2];
	bool created;

	if (!find(p, depth, n))
		return;
	if (p->x == 4 && !find(p, 3, c)) {
		unref2(n);
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		switch (p->x) {
		case 0: rc[i] = store_mkdir(s, n[i], CN[p->c], &OWNERS[0], &out[i]); break;
		case 1: rc[i] = store_create(s, n[i], CN[p->c], &OWNERS[0], false, &out[i], &created); break;
		case 2: rc[i] = store_rmdir(s, n[i], CN[p->c], NULL); break;
		case 3: rc[i] = store_unlink(s, n[i], PN[p->p]); break;
		case 4: rc[i] = store_link(s, c[i], n[i], CN[p->c]); break;
		case 5: rc[i] = store_rename(s, n[i], PN[p->p], n[i], PN[(p->p + 1) % NP], 0); break;
		case 6: rc[i] = store_set_ttl(s, n[i], 100); break;
		default: rc[i] = store_stage_open(s, n[i], STORE_STAGE_REPLACE, &st[i]); break;
		}
	}
	same("wrong-depth", rc[0], rc[1]);
	for (int i = 0; i < 2; i++)
		if (st[i])
			store_stage_close(st[i]);
	unref2(out);
	unref2(c);
	unref2(n);
}

void run_op(void)
{
	unsigned op = next_byte() % NOPS;
	struct path p = next_path();

	note("%s t%d p%d c%d x%d", OPNAME[op], p.t, p.p, p.c, p.x);
	switch (op) {
	case OP_MKDIR_T: op_mkdir(&p, 1); break;
	case OP_JOIN: op_mkdir(&p, 2); break;
	case OP_RMDIR_T: case OP_LEAVE: case OP_DEPART: op_remove((int)op, &p); break;
	case OP_CREATE: op_create(&p); break;
	case OP_PUBLISH: op_publish(&p); break;
	case OP_TRUNCATE: case OP_CHMOD: op_setattr((int)op, &p); break;
	case OP_UNLINK: op_unlink(&p); break;
	case OP_LINK: op_link(&p); break;
	case OP_RENAME: op_rename(&p); break;
	case OP_SET_TTL: case OP_RENEW: case OP_CHILD_TTL: op_lease((int)op, &p); break;
	case OP_ADVANCE: op_advance(&p); break;
	case OP_DRAIN: op_drain(&p); break;
	case OP_STAGE_OPEN: op_stage_open(&p); break;
	case OP_HANDLE: case OP_HANDLE_CREATE: case OP_HANDLE_LIST: op_handle((int)op, &p); break;
	case OP_WRONG_DEPTH: op_wrong(&p); break;
	default: op_stage((int)op, &p); break;
	}
}
