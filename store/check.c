/*
 * check.c - the recount: a test and diagnostic full scan that checks the
 * store against itself.
 *
 * It walks every tenant, parent, link and tombstone, recounts every
 * gauge and compares it with the counter the transitions keep (store-wide
 * and per tenant), and checks that no dead tenant, departed parent or
 * dead state is still reachable, that every link is found by its name in
 * its own bucket and stays in its tenant, that every state's link count
 * equals the links that reach it and the links it lists, that no tenant
 * holds more than its share, and that the tombstone queue holds as many
 * tombstones as the tenants' tables.  O(everything): tests call it after
 * their steps; the daemon never does.
 *
 * What it owns: nothing but the scan's own table of states seen.
 *
 * Locks: it holds the world lock exclusive (scan_begin, LOCK_WORLD) for
 * the whole scan, so no transition runs and none is half done, and takes
 * no other lock: every field it reads is written only by transitions (a
 * lookup or a read changes nothing it counts).
 */
#include "store/internal.h"
#include "store/store_test.h"

#include <errno.h>

/* A state seen by the recount: how many links reached it. */
struct seen {
	UT_hash_handle hh;
	struct child *c;
	uint32_t links;
};

#define CHECK(cond, ...)                                              \
	do {                                                          \
		if (!(cond) && rc == 0) {                             \
			snprintf(why, whylen, __VA_ARGS__);           \
			rc = -EUCLEAN;                                \
		}                                                     \
	} while (0)

int store_check_all(struct store *s, char *why, size_t whylen)
{
	struct tenant *t;
	struct parent *p;
	struct link *l;
	uint32_t i;
	struct tomb *tb;
	struct seen *seen = NULL, *sn, *tmp;
	uint64_t tenants = 0, parents = 0, children = 0, links = 0, tombs = 0,
		 bytes = 0;
	int rc = 0;

	if (whylen)
		why[0] = '\0';
	scan_begin(s);
	for (t = s->tenants; t; t = t->hh.next) {
		uint64_t tp = 0, tc = 0, tl = 0, tt = 0, tbytes = 0;

		tenants++;
		CHECK(!is_dead(&t->node), "dead tenant %s in the table", t->name);
		for (p = t->parents; p; p = p->hh.next) {
			uint64_t pl = 0;

			tp++;
			CHECK(!is_dead(&p->node), "departed parent %s/%s in the table",
			      t->name, p->name);
			CHECK(p->links.n == p->nlinks,
			      "parent %s/%s table holds %u of %llu links",
			      t->name, p->name, p->links.n,
			      (unsigned long long)p->nlinks);
			ptab_for_each(&p->links, i, l) {
				pl++;
				CHECK(bucket_find(p, l->name) == l,
				      "link %s/%s/%s not found by its name",
				      t->name, p->name, l->name);
				CHECK(l->parent == p,
				      "link %s/%s/%s of another parent",
				      t->name, p->name, l->name);
				CHECK(child_tenant(l->child) == t,
				      "child %s/%s/%s linked from another tenant",
				      t->name, p->name, l->name);
				HASH_FIND_PTR(seen, &l->child, sn);
				if (!sn) {
					sn = st_calloc(1, sizeof(*sn));
					if (!sn) {
						CHECK(0, "out of memory");
						continue;
					}
					sn->c = l->child;
					HASH_ADD_PTR(seen, c, sn);
					tc++;
					tbytes += blob_len(l->child->content);
					CHECK(!is_dead(&l->child->node),
					      "dead state linked at %s/%s/%s",
					      t->name, p->name, l->name);
				}
				sn->links++;
			}
			CHECK(pl == p->nlinks, "parent %s/%s counts %llu links, has %llu",
			      t->name, p->name, (unsigned long long)p->nlinks,
			      (unsigned long long)pl);
			tl += pl;
		}
		for (tb = t->tombs; tb; tb = tb->hh.next) {
			tt++;
			CHECK(tb->tenant == t, "tombstone %s/%s of another tenant",
			      t->name, tb->name);
		}
		CHECK(tp == atomic_load(&t->parents_n), "tenant %s parents %llu != %llu",
		      t->name, (unsigned long long)tp,
		      (unsigned long long)atomic_load(&t->parents_n));
		CHECK(tc == atomic_load(&t->children_n), "tenant %s children %llu != %llu",
		      t->name, (unsigned long long)tc,
		      (unsigned long long)atomic_load(&t->children_n));
		CHECK(tl == atomic_load(&t->links_n), "tenant %s links %llu != %llu",
		      t->name, (unsigned long long)tl,
		      (unsigned long long)atomic_load(&t->links_n));
		CHECK(tt == atomic_load(&t->tombs_n), "tenant %s tombstones %llu != %llu",
		      t->name, (unsigned long long)tt,
		      (unsigned long long)atomic_load(&t->tombs_n));
		CHECK(tbytes == atomic_load(&t->bytes_n), "tenant %s bytes %llu != %llu",
		      t->name, (unsigned long long)tbytes,
		      (unsigned long long)atomic_load(&t->bytes_n));
		/* Shares are reserved before the insert; only tombstones
		 * may overshoot theirs (an expiry cannot be refused). */
		CHECK(!s->lim.tenant_max_parents || tp <= s->lim.tenant_max_parents,
		      "tenant %s holds %llu parents, over its share",
		      t->name, (unsigned long long)tp);
		CHECK(!s->lim.tenant_max_children || tc <= s->lim.tenant_max_children,
		      "tenant %s holds %llu children, over its share",
		      t->name, (unsigned long long)tc);
		CHECK(!s->lim.tenant_max_bytes || tbytes <= s->lim.tenant_max_bytes,
		      "tenant %s holds %llu bytes, over its share",
		      t->name, (unsigned long long)tbytes);
		parents += tp;
		children += tc;
		links += tl;
		tombs += tt;
		bytes += tbytes;
	}
	{
		uint64_t queued = 0;

		for (tb = s->tomb_fifo; tb; tb = tb->next)
			queued++;
		CHECK(queued == tombs, "tombstone queue %llu != tables %llu",
		      (unsigned long long)queued, (unsigned long long)tombs);
	}
	HASH_ITER(hh, seen, sn, tmp) {
		uint32_t listed = 0;
		struct link *sl;

		CHECK(sn->c->node.nlink == sn->links, "state %llu nlink %u, reached by %u",
		      (unsigned long long)sn->c->node.ino, sn->c->node.nlink, sn->links);
		LL_FOREACH2(sn->c->slinks, sl, snext)
			listed++;
		CHECK(listed == sn->links, "state %llu lists %u links, reached by %u",
		      (unsigned long long)sn->c->node.ino, listed, sn->links);
		HASH_DEL(seen, sn);
		free(sn);
	}
	CHECK(tenants == atomic_load(&s->tenants_n), "tenants %llu != %llu",
	      (unsigned long long)tenants, (unsigned long long)atomic_load(&s->tenants_n));
	CHECK(parents == atomic_load(&s->parents_n), "parents %llu != %llu",
	      (unsigned long long)parents, (unsigned long long)atomic_load(&s->parents_n));
	CHECK(children == atomic_load(&s->children_n), "children %llu != %llu",
	      (unsigned long long)children, (unsigned long long)atomic_load(&s->children_n));
	CHECK(links == atomic_load(&s->links_n), "links %llu != %llu",
	      (unsigned long long)links, (unsigned long long)atomic_load(&s->links_n));
	CHECK(tombs == atomic_load(&s->tombs_n), "tombstones %llu != %llu",
	      (unsigned long long)tombs, (unsigned long long)atomic_load(&s->tombs_n));
	CHECK(bytes == atomic_load(&s->bytes_n), "bytes %llu != %llu",
	      (unsigned long long)bytes, (unsigned long long)atomic_load(&s->bytes_n));
	scan_end(s);
	return rc;
}
