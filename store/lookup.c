/*
 * lookup.c - lookup and listing: finding a name in a directory, and the
 * consistent listing a readdir stream serves from.
 *
 * What it owns: nothing of its own.  It reads the hierarchy: the tenant
 * table (the root), a tenant's parent table, a bucket's names.  A parent
 * or a state past its deadline is skipped, reaped or not: it is gone.
 *
 * Locks: each call takes the directory's own lock for the whole of its
 * read (LOCK_STORE for the root, LOCK_TENANT, LOCK_PARENT), and nothing
 * else; it is not a transition (no world lock), since it changes nothing.
 */
#include "store/internal.h"

#include <errno.h>

int store_lookup(struct store *s, struct store_node *dir, const char *name,
		 struct store_node **out)
{
	return node_lookup(s, NULL, dir, name, out);
}

int node_lookup(struct store *s, const struct given *g, struct store_node *dir,
		const char *name, struct store_node **out)
{
	struct tenant *t;
	struct parent *p;
	struct link *l;
	struct store_node *n = NULL;
	uint64_t now = now_of(s, g);

	switch (dir->kind) {
	case STORE_ROOT:
		lock(&s->lock, LOCK_STORE);
		HASH_FIND_STR(s->tenants, name, t);
		if (t) {
			n = &t->node;
			store_node_ref(n);
		}
		unlock(&s->lock, LOCK_STORE);
		break;
	case STORE_TENANT:
		t = as_tenant(dir);
		lock(&t->lock, LOCK_TENANT);
		if (is_dead(dir)) {
			unlock(&t->lock, LOCK_TENANT);
			return -ESTALE;
		}
		HASH_FIND_STR(t->parents, name, p);
		if (p && is_expired(s, &p->node, now))
			p = NULL; /* past its deadline: gone, reaped or not */
		if (p) {
			n = &p->node;
			store_node_ref(n);
		}
		unlock(&t->lock, LOCK_TENANT);
		break;
	case STORE_PARENT:
		p = as_parent(dir);
		bucket_lock(p);
		if (gone(s, dir, now)) {
			bucket_unlock(p);
			return -ESTALE;
		}
		l = bucket_find(p, name);
		if (l && is_expired(s, &l->child->node, now))
			l = NULL;
		if (l) {
			n = &l->child->node;
			store_node_ref(n);
		}
		bucket_unlock(p);
		break;
	default:
		return -ENOTDIR;
	}
	if (!n)
		return -ENOENT;
	*out = n;
	return 0;
}

static int dirlist_add(struct store_dirlist *dl, size_t *cap, uint64_t ino,
		       enum store_kind kind, const char *name)
{
	if (dl->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct store_dirent *e = st_realloc(dl->e, ncap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		dl->e = e;
		*cap = ncap;
	}
	dl->e[dl->n].name = st_strdup(name);
	if (!dl->e[dl->n].name)
		return -ENOMEM;
	dl->e[dl->n].ino = ino;
	dl->e[dl->n].kind = kind;
	dl->n++;
	return 0;
}

int store_list(struct store *s, struct store_node *dir, struct store_dirlist *out)
{
	struct tenant *t;
	struct parent *p;
	struct link *l;
	uint32_t i;
	size_t cap = 0;
	uint64_t now = store_now_ms(s);
	int rc = 0;

	memset(out, 0, sizeof(*out));
	switch (dir->kind) {
	case STORE_ROOT:
		lock(&s->lock, LOCK_STORE);
		for (t = s->tenants; t && !rc; t = t->hh.next)
			rc = dirlist_add(out, &cap, t->node.ino, STORE_TENANT, t->name);
		unlock(&s->lock, LOCK_STORE);
		break;
	case STORE_TENANT:
		t = as_tenant(dir);
		lock(&t->lock, LOCK_TENANT);
		if (is_dead(dir))
			rc = -ESTALE;
		for (p = t->parents; p && !rc; p = p->hh.next)
			if (!is_expired(s, &p->node, now))
				rc = dirlist_add(out, &cap, p->node.ino,
						 STORE_PARENT, p->name);
		unlock(&t->lock, LOCK_TENANT);
		break;
	case STORE_PARENT:
		p = as_parent(dir);
		bucket_lock(p);
		if (gone(s, dir, now))
			rc = -ESTALE;
		ptab_for_each(&p->links, i, l) {
			if (rc)
				break;
			if (!is_expired(s, &l->child->node, now))
				rc = dirlist_add(out, &cap, l->child->node.ino,
						 STORE_CHILD, l->name);
		}
		bucket_unlock(p);
		break;
	default:
		rc = -ENOTDIR;
	}
	if (rc)
		store_dirlist_free(out);
	return rc;
}

void store_dirlist_free(struct store_dirlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->e[i].name);
	free(l->e);
	l->e = NULL;
	l->n = 0;
}
