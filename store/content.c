/*
 * content.c - a state's content: staged writes, one publication per
 * close or fsync.
 *
 * What it owns
 * ------------
 * A state's content is an immutable, counted blob (NULL for empty),
 * swapped whole by a publication under the state's stripe, with the
 * state's version; a reader that pinned the old blob keeps reading it.
 * Each open file has a stage (struct store_stage, below): the bytes it
 * has written and not yet published, the blob it opened on, the version
 * a compare-and-swap edit is based on.  Content bytes count in max_bytes
 * and the tenant's share of it, charged at publication
 * (bytes_charge_locked) and checked at write time already, so the write
 * that would pass them is the one refused.
 *
 * Staged bytes count there too: a stage holds its size (what it has
 * written, an in-place edit's copy of the state included; an append's
 * tail) in s->staged_n and its tenant's staged_n from the write or
 * truncation that stages them until its publication, its refusal or its
 * close (stage_hold_locked).  A write is refused when what would be held
 * once its stage is published, every other stage still open, passes
 * max_bytes or the tenant's share: published + staged bytes, less the
 * content the stage replaces (not an append's), which its publication
 * frees.  So published plus staged bytes stay within a ceiling plus one
 * state (the one a stage replaces), however many files are open, and
 * replacing a state in a full store still works.  A publication checks
 * its own growth only (its write was checked with every stage); a
 * setattr's resize counts the stages too.  A mirror's stages are the
 * mount's own memory: they count in the mirror's counters against the
 * shared store's ceilings as it recorded them (s->shown).
 *
 * Locks
 * -----
 * A stage's write and read take only stage->lock and a stripe: they
 * change no shared fact; its publication is a transition.
 * A stage's lock (LOCK_STAGE) is taken before the state's stripe
 * (LOCK_STRIPE).  store_stage_write(), store_stage_read() and the
 * truncations are not transitions (no world lock); store_stage_publish()
 * is one (the world lock shared, then the stage's lock, then the
 * stripe).  publish_locked(), bytes_charge_locked() and
 * content_resize_locked() expect the stripe held (content_resize_locked
 * is a setattr's size change, under store_setattr's transition).
 */
#include "store/internal.h"

#include <errno.h>

struct store_stage {
	struct store *s;
	struct child *c;               /* counted */
	struct tenant *t;              /* counted: c's, where its bytes count */
	size_t held;                   /* lock: bytes reserved in staged_n */
	enum store_stage_mode mode;    /* lock; an APPEND stage that is
					* truncated becomes a REPLACE */
	pthread_mutex_t lock;
	struct blob *pin;              /* lock: what reads see when unstaged */
	uint64_t base_version;         /* lock: CAS compares against this */
	char *buf;                     /* lock: staged bytes */
	size_t len, cap;               /* lock */
	bool staged;                   /* lock: buf holds this stage's bytes */
	bool dirty;                    /* lock: a publication is owed */
	bool written;                  /* lock: bytes or a size were staged */
	/* lock: the state's version and mtime when this stage last wrote
	 * (or opened): an mtime set since then, with no publication in
	 * between, is kept by this stage's publication (cp -p, install -p
	 * and tar set it on the open file before close). */
	uint64_t seen_version;
	int64_t seen_mtime;
	int failed;                    /* lock: a write was refused: the
					* whole open-write-close transition
					* is abandoned with this errno */
	uint64_t writes;               /* lock: writes and truncations so
					* far (a mirror's publication tells
					* whether one came meanwhile) */
};

/* Blobs ------------------------------------------------------------------- */

static struct blob *blob_new(const void *data, size_t len)
{
	struct blob *b;

	if (len == 0)
		return NULL;
	b = st_malloc(sizeof(*b) + len);
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	if (data)
		memcpy(b->data, data, len);
	return b;
}

/* Is @b longer than @prefix and begins with it (an append to it)? */
static bool blob_extends(const struct blob *b, const struct blob *prefix)
{
	size_t n = blob_len(prefix);

	return blob_len(b) > n && (n == 0 || memcmp(b->data, prefix->data, n) == 0);
}

/* Publication (the stripe held) ------------------------------------------- */

/*
 * Add @n to *@c if *@c + @n + *@beside - @less stays within @limit (0: no
 * limit): a reservation against a ceiling that another counter shares
 * (@beside NULL: none does, and this is reserve()).
 */
static bool reserve_beside(atomic_uint_fast64_t *c, uint64_t n,
			   atomic_uint_fast64_t *beside, uint64_t less,
			   uint64_t limit)
{
	uint64_t cur = atomic_load(c), other;

	do {
		other = beside ? atomic_load(beside) : 0;
		other = other > less ? other - less : 0;
		if (limit && (cur + n < cur || cur + n + other < cur + n ||
			      cur + n + other > limit))
			return false;
	} while (!atomic_compare_exchange_weak(c, &cur, cur + n));
	return true;
}

/*
 * Would content of @newlen bytes in @c (now @oldlen) fit?  Checks
 * max_payload and reserves the growth in max_bytes and the tenant's
 * share of it, beside what the stages hold when @staged (a stage's own
 * publication: its writes were checked with them) (state's stripe
 * held).  Releases on shrink.
 */
static int bytes_charge_locked(struct store *s, struct child *c,
			       size_t oldlen, size_t newlen, bool staged)
{
	struct tenant *t = child_tenant(c);

	store_assert_held(LOCK_STRIPE);
	if (newlen > s->lim.max_payload)
		return -EFBIG;
	if (newlen > oldlen) {
		if (!reserve_beside(&s->bytes_n, newlen - oldlen,
				    staged ? &s->staged_n : NULL, 0,
				    s->lim.max_bytes))
			return -ENOSPC;
		if (!reserve_beside(&t->bytes_n, newlen - oldlen,
				    staged ? &t->staged_n : NULL, 0,
				    s->lim.tenant_max_bytes)) {
			gauge_sub(&s->bytes_n, newlen - oldlen, "bytes");
			return -EDQUOT;
		}
	} else if (newlen < oldlen) {
		gauge_sub(&s->bytes_n, oldlen - newlen, "bytes");
		gauge_sub(&child_tenant(c)->bytes_n, oldlen - newlen,
			  "tenant bytes");
	}
	return 0;
}

/* Swap in new content (stripe held): one publication, reported under
 * each name that reaches the state. */
static void publish_locked(struct store *s, struct given *g, struct child *c, struct blob *b)
{
	struct blob *old = c->content;
	struct link *l;

	store_assert_held(LOCK_STRIPE);
	snap_state_cow(s, c);
	note_attrs_changed(c->node.ino);
	c->content = b;
	c->version++;
	c->meta.mtime = c->meta.ctime = wall_now(g);
	blob_unref(old);
	LL_FOREACH2(c->slinks, l, snext)
		emit(s, g, STORE_OP_WRITE, false, &c->node, l->parent->tenant,
		     l->parent->name, l->name, (int64_t)l->parent->generation,
		     (int64_t)c->version);
}

int content_publish(struct store *s, struct given *g, struct child *c, const void *data,
		    size_t len, const int64_t *mtime)
{
	struct blob *b = blob_new(data, len);
	int rc;

	if (len && !b)
		return -ENOMEM;
	lock(stripe(s, c), LOCK_STRIPE);
	if (c->node.nlink == 0)
		rc = -ESTALE;
	else
		rc = bytes_charge_locked(s, c, blob_len(c->content), len, true);
	if (rc == 0) {
		publish_locked(s, g, c, b);
		b = NULL;
		if (mtime)
			c->meta.mtime = *mtime;
	}
	unlock(stripe(s, c), LOCK_STRIPE);
	blob_unref(b);
	return rc;
}

int content_resize_locked(struct store *s, struct given *g, struct child *c, uint64_t size)
{
	size_t oldlen = blob_len(c->content);
	struct blob *b;
	int rc;

	store_assert_held(LOCK_STRIPE);
	if (size > s->lim.max_payload)
		return -EFBIG;
	b = blob_new(NULL, size);
	if (size && !b)
		return -ENOMEM;
	if (b) {
		size_t keep = oldlen < size ? oldlen : size;

		if (keep)
			memcpy(b->data, c->content->data, keep);
		memset(b->data + keep, 0, size - keep);
	}
	rc = bytes_charge_locked(s, c, oldlen, size, true);
	if (rc) {
		blob_unref(b);
		return rc;
	}
	publish_locked(s, g, c, b);
	return 0;
}

/* Stages ------------------------------------------------------------------ */

int store_stage_new(struct store *s, enum store_stage_mode mode,
		    struct store_stage **out)
{
	struct store_stage *st = st_calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	st->s = s;
	st->mode = mode;
	pthread_mutex_init(&st->lock, NULL);
	if (mode == STORE_STAGE_REPLACE) {
		st->staged = true; /* an empty image: O_TRUNC */
		st->dirty = true;
	}
	*out = st;
	return 0;
}

/* Bind new stage @st to state @c (c's stripe held): it pins what is
 * current, and its bytes count in c's tenant (a state never changes
 * tenant: links and renames stay within one). */
static void stage_attach_locked(struct store_stage *st, struct child *c)
{
	store_assert_held(LOCK_STRIPE);
	st->pin = blob_ref(c->content);
	st->base_version = c->version;
	st->seen_version = c->version;
	st->seen_mtime = c->meta.mtime;
	st->c = c;
	store_node_ref(&c->node);
	if (c->node.nlink) {
		st->t = child_tenant(c);
		store_node_ref(&st->t->node);
	}
}

void store_stage_attach(struct store_stage *st, struct store_node *child)
{
	struct child *c = as_child(child);

	lock(stripe(st->s, c), LOCK_STRIPE);
	stage_attach_locked(st, c);
	unlock(stripe(st->s, c), LOCK_STRIPE);
}

int store_stage_open(struct store *s, struct store_node *child,
		     enum store_stage_mode mode, struct store_stage **out)
{
	struct child *c = as_child(child);
	struct store_stage *st;
	int rc = 0;

	if (!c)
		return child->kind == STORE_SPECIAL ? -EINVAL : -EISDIR;
	if (store_stage_new(s, mode, &st))
		return -ENOMEM;
	lock(stripe(s, c), LOCK_STRIPE);
	if (c->node.nlink == 0 || is_expired(s, child, store_now_ms(s)))
		rc = -ESTALE;
	else
		stage_attach_locked(st, c);
	unlock(stripe(s, c), LOCK_STRIPE);
	if (rc) {
		store_stage_close(st);
		return refuse(s, rc);
	}
	*out = st;
	return 0;
}

/* Give back @n of the bytes @st holds (its lock held, or its last
 * reference). */
static void stage_release(struct store_stage *st, size_t n)
{
	if (!n)
		return;
	gauge_sub(&st->s->staged_n, n, "staged bytes");
	gauge_sub(&st->t->staged_n, n, "tenant staged bytes");
	st->held -= n;
}

/*
 * Make the bytes @st holds @want (st->lock held): a release when it holds
 * more, else a reservation of the difference beside the published bytes
 * less @freed (what its publication replaces), against max_bytes
 * (-ENOSPC) and the tenant's share of it (-EDQUOT), as the store shows
 * them; -ESTALE for a stage of a state that had no link when it opened.
 * Nothing changes on failure.
 */
static int stage_hold_locked(struct store_stage *st, size_t want,
			     size_t freed)
{
	struct store *s = st->s;
	size_t more;

	store_assert_held(LOCK_STAGE);
	if (want <= st->held) {
		stage_release(st, st->held - want);
		return 0;
	}
	if (!st->t)
		return -ESTALE;
	more = want - st->held;
	if (!reserve_beside(&s->staged_n, more, &s->bytes_n, freed,
			    s->shown.max_bytes))
		return -ENOSPC;
	if (!reserve_beside(&st->t->staged_n, more, &st->t->bytes_n, freed,
			    s->shown.tenant_max_bytes)) {
		gauge_sub(&s->staged_n, more, "staged bytes");
		return -EDQUOT;
	}
	st->held = want;
	return 0;
}

static void stage_reset_locked(struct store_stage *st)
{
	store_assert_held(LOCK_STAGE);
	stage_release(st, st->held);
	free(st->buf);
	st->buf = NULL;
	st->len = st->cap = 0;
	st->staged = false;
	st->dirty = false;
	st->written = false;
}

static int stage_reserve(struct store_stage *st, size_t len)
{
	char *nb;
	size_t ncap;

	if (len <= st->cap)
		return 0;
	ncap = st->cap ? st->cap : 256;
	while (ncap < len)
		ncap *= 2;
	nb = st_realloc(st->buf, ncap);
	if (!nb)
		return -ENOMEM;
	st->buf = nb;
	st->cap = ncap;
	return 0;
}

/*
 * The state's current length and its liveness, read under its stripe,
 * for a write or truncate of this stage (st->lock held), which notes the
 * state's version and mtime as it found them.  @len may be NULL.
 */
static int stage_current(struct store_stage *st, size_t *len)
{
	struct store *s = st->s;
	int rc = 0;

	store_assert_held(LOCK_STAGE);
	lock(stripe(s, st->c), LOCK_STRIPE);
	if (st->c->node.nlink == 0 || is_expired(s, &st->c->node, store_now_ms(s)))
		rc = -ESTALE;
	if (len)
		*len = blob_len(st->c->content);
	st->seen_version = st->c->version;
	st->seen_mtime = st->c->meta.mtime;
	unlock(stripe(s, st->c), LOCK_STRIPE);
	return rc;
}

/* How many zero bytes make content of @have bytes reach @off + @len
 * (fallocate mode 0), kept past @max when there are more. */
static size_t stage_growth(size_t have, uint64_t off, uint64_t len, size_t max)
{
	uint64_t end = off + len < off ? UINT64_MAX : off + len;

	if (end <= have)
		return 0;
	return end - have > (uint64_t)max ? max + 1 : (size_t)(end - have);
}

/*
 * store_stage_write(), or, with @extend (fallocate: @buf NULL), the
 * zeros that make what this stage sees reach @off + @len, written at
 * its end with the same refusals.
 */
static ssize_t stage_write(struct store_stage *st, const void *buf,
			   size_t len, uint64_t off, bool extend)
{
	struct store *s = st->s;
	size_t cur, newlen, projected;
	int rc;

	/* The mode is read under the lock: a truncation running in another
	 * thread on the same open file may change it. */
	lock(&st->lock, LOCK_STAGE);
	if (st->mode == STORE_STAGE_READ) {
		unlock(&st->lock, LOCK_STAGE);
		return -EBADF;
	}
	rc = st->failed;
	if (rc == 0)
		rc = stage_current(st, &cur);
	if (rc)
		goto out;
	if (st->mode == STORE_STAGE_APPEND) {
		if (extend)
			len = stage_growth(blob_len(st->pin) + st->len, off,
					   len, s->lim.max_payload);
		off = st->len;
		newlen = st->len + len;
		projected = cur + newlen;
	} else {
		if (!st->staged) {
			/* First write of an in-place edit: start from the
			 * state this stage opened on. */
			size_t base = blob_len(st->pin);

			rc = stage_reserve(st, base);
			if (rc)
				goto out;
			if (base)
				memcpy(st->buf, st->pin->data, base);
			st->len = base;
			st->staged = true;
		}
		if (extend) {
			len = stage_growth(st->len, off, len, s->lim.max_payload);
			off = st->len;
		}
		newlen = off + len > st->len ? off + len : st->len;
		projected = newlen;
		if (off + len < off)
			projected = SIZE_MAX;
	}
	if (projected > s->lim.max_payload) {
		rc = -EFBIG;
		goto out;
	}
	if (extend && len == 0)
		goto out; /* long enough already: nothing to publish */
	/* The store's limits, also for a mirror (which enforces none of
	 * its own: see struct store): the stage's new size beside every
	 * published and staged byte, which covers what its publication
	 * would add. */
	rc = stage_hold_locked(st, newlen,
			       st->mode == STORE_STAGE_APPEND ? 0 : cur);
	if (rc)
		goto out;
	rc = stage_reserve(st, newlen);
	if (rc)
		goto out;
	if (off > st->len)
		memset(st->buf + st->len, 0, off - st->len);
	/* A write of no bytes may come before any buffer exists. */
	if (len && buf)
		memcpy(st->buf + off, buf, len);
	else if (len)
		memset(st->buf + off, 0, len);
	st->len = newlen;
	st->staged = true;
	st->dirty = true;
	st->written = true;
	st->writes++;
out:
	if (rc && rc != st->failed) {
		/* No failed operation changes anything: drop what was
		 * staged, and publish nothing on close or release. */
		stage_reset_locked(st);
		st->failed = rc;
	} else if (rc) {
		unlock(&st->lock, LOCK_STAGE);
		return rc;
	}
	unlock(&st->lock, LOCK_STAGE);
	return rc ? refuse(s, rc) : (ssize_t)len;
}

ssize_t store_stage_write(struct store_stage *st, const void *buf, size_t len,
			  uint64_t off)
{
	return stage_write(st, buf, len, off, false);
}

int store_stage_allocate(struct store_stage *st, uint64_t off, uint64_t len)
{
	/* stage_growth() bounds what @off + @len asks for. */
	ssize_t n = stage_write(st, NULL, (size_t)len, off, true);

	return n < 0 ? (int)n : 0;
}

ssize_t store_stage_read(struct store_stage *st, void *buf, size_t len,
			 uint64_t off)
{
	struct store *s = st->s;
	const char *src;
	size_t have, n = 0;
	struct blob *old = NULL, *cur = NULL;
	bool fresh = false;
	int rc = 0;

	lock(&st->lock, LOCK_STAGE);
	lock(stripe(s, st->c), LOCK_STRIPE);
	if (st->c->node.nlink == 0 || is_expired(s, &st->c->node, store_now_ms(s))) {
		rc = -ESTALE;
	} else if (st->mode == STORE_STAGE_READ &&
		   (off == 0 || off >= blob_len(st->pin))) {
		/* Writable stages keep the state they opened on: it is
		 * what a compare-and-swap edit is based on. */
		cur = blob_ref(st->c->content);
		fresh = true;
	}
	unlock(stripe(s, st->c), LOCK_STRIPE);
	/*
	 * A new pass from the start sees the newest publication.  So does a
	 * read at or past the end of the state this open file has seen, when
	 * the newest begins with all of it (an append): the reader has then
	 * read a prefix of the newest state, never a mix, and tail -f of an
	 * appended child reads on.  (Compared outside the stripe: blobs are
	 * immutable.)
	 */
	if (fresh && (off == 0 || blob_extends(cur, st->pin))) {
		old = st->pin;
		st->pin = cur;
		cur = NULL;
	}
	if (rc == 0) {
		/* What this open file sees: the state it is based on, then
		 * its staged bytes; an in-place stage's staged bytes are the
		 * whole content, an append stage's the tail it will add (an
		 * a+ descriptor reads its own pending append). */
		bool own = st->staged && st->mode != STORE_STAGE_APPEND;
		size_t n1 = own ? 0 : blob_len(st->pin);
		size_t n2 = st->staged ? st->len : 0;

		if (off < n1) {
			n = n1 - off < len ? n1 - off : len;
			memcpy(buf, st->pin->data + off, n);
		}
		if (n < len && off + n >= n1 && off + n < n1 + n2) {
			src = st->buf + (off + n - n1);
			have = n1 + n2 - (off + n);
			have = have < len - n ? have : len - n;
			memcpy((char *)buf + n, src, have);
			n += have;
		}
	}
	unlock(&st->lock, LOCK_STAGE);
	blob_unref(old);
	blob_unref(cur);
	return rc ? refuse(s, rc) : (ssize_t)n;
}

/* What a truncated stage replaces when it is published: its state's
 * content now (st->lock held; the stripe taken here). */
static size_t stage_replaced(struct store_stage *st)
{
	size_t n;

	lock(stripe(st->s, st->c), LOCK_STRIPE);
	n = st->c->node.nlink ? blob_len(st->c->content) : 0;
	unlock(stripe(st->s, st->c), LOCK_STRIPE);
	return n;
}

/* The buffer store_stage_truncate() to @size needs (st->lock held). */
static size_t stage_truncate_need(struct store_stage *st, uint64_t size)
{
	size_t need = (size_t)size;

	store_assert_held(LOCK_STAGE);
	if (st->mode == STORE_STAGE_APPEND) {
		size_t base = blob_len(st->pin) + (st->staged ? st->len : 0);

		need = base > need ? base : need;
	} else if (!st->staged) {
		need = blob_len(st->pin) > need ? blob_len(st->pin) : need;
	}
	return need;
}

int store_stage_truncate_reserve(struct store_stage *st, uint64_t size)
{
	struct store *s = st->s;
	int rc;

	/* The mode under the lock: a truncation in another thread on the
	 * same open file may change it. */
	lock(&st->lock, LOCK_STAGE);
	if (st->mode == STORE_STAGE_READ)
		rc = -EBADF;
	else if (size > s->lim.max_payload)
		rc = -EFBIG;
	else
		rc = stage_reserve(st, stage_truncate_need(st, size));
	/* The bytes the truncation stages, held from now: its own
	 * truncation makes the hold exact. */
	if (rc == 0 && size > st->held)
		rc = stage_hold_locked(st, (size_t)size, stage_replaced(st));
	unlock(&st->lock, LOCK_STAGE);
	return refuse(s, rc);
}

int store_stage_truncate(struct store_stage *st, uint64_t size)
{
	struct store *s = st->s;
	size_t held_before;
	int rc = 0;

	lock(&st->lock, LOCK_STAGE);
	if (st->mode == STORE_STAGE_READ) {
		unlock(&st->lock, LOCK_STAGE);
		return -EBADF;
	}
	if (size > s->lim.max_payload) {
		unlock(&st->lock, LOCK_STAGE);
		return refuse(s, -EFBIG);
	}
	/* The staged size will be @size: held first, so that a refusal
	 * changes nothing. */
	held_before = st->held;
	if (size > st->held) {
		rc = stage_hold_locked(st, (size_t)size, stage_replaced(st));
		if (rc) {
			unlock(&st->lock, LOCK_STAGE);
			return refuse(s, rc);
		}
	}
	if (st->mode == STORE_STAGE_APPEND) {
		/* ftruncate on an O_APPEND file cuts the content itself: the
		 * stage becomes a replacement by the state it opened on plus
		 * what it appended, then cut to @size. */
		size_t base = blob_len(st->pin), tail = st->staged ? st->len : 0;

		rc = stage_reserve(st, base + tail);
		if (rc == 0) {
			/* Nothing staged and nothing pinned: no buffer yet. */
			if (tail)
				memmove(st->buf + base, st->buf, tail);
			if (base)
				memcpy(st->buf, st->pin->data, base);
			st->len = base + tail;
			st->staged = true;
			st->mode = STORE_STAGE_REPLACE;
		}
	} else if (!st->staged) {
		size_t base = blob_len(st->pin);

		rc = stage_reserve(st, base);
		if (rc == 0 && base)
			memcpy(st->buf, st->pin->data, base);
		st->len = base;
	}
	if (rc == 0)
		rc = stage_reserve(st, size);
	if (rc == 0) {
		/* A cut is a write: it notes the state as it stands (gone or
		 * not is the publication's to say). */
		(void)stage_current(st, NULL);
		if (size > st->len)
			memset(st->buf + st->len, 0, size - st->len);
		st->len = size;
		st->staged = true;
		st->dirty = true;
		st->written = true;
		st->writes++;
		(void)stage_hold_locked(st, (size_t)size, 0); /* a release */
	} else {
		(void)stage_hold_locked(st, held_before, 0); /* a release */
	}
	unlock(&st->lock, LOCK_STAGE);
	return rc;
}

/* The embedded store's publication (its TRANSITION is embedded.c's). */
int stage_publish(struct store_stage *st)
{
	struct store *s = st->s;
	struct child *c = st->c;
	struct blob *b = NULL, *pin = NULL;
	size_t cur;
	int rc = 0;

	lock(&st->lock, LOCK_STAGE);
	if (st->failed) {
		/* Refused (and counted) at write time already. */
		rc = st->failed;
		unlock(&st->lock, LOCK_STAGE);
		return rc;
	}
	if (!st->dirty)
		goto out;
	if (st->mode != STORE_STAGE_APPEND) {
		b = blob_new(st->buf, st->len);
		if (st->len && !b) {
			rc = -ENOMEM;
			goto out;
		}
	}
	lock(stripe(s, c), LOCK_STRIPE);
	cur = blob_len(c->content);
	if (c->node.nlink == 0 || is_expired(s, &c->node, store_now_ms(s)))
		rc = -ESTALE;
	else if (st->mode == STORE_STAGE_CAS && c->version != st->base_version)
		rc = -EAGAIN;
	else if (st->mode == STORE_STAGE_APPEND) {
		b = blob_new(NULL, cur + st->len);
		if (cur + st->len && !b) {
			rc = -ENOMEM;
		} else if (b) {
			if (cur)
				memcpy(b->data, c->content->data, cur);
			if (st->len) /* no buffer after writes of nothing */
				memcpy(b->data + cur, st->buf, st->len);
		}
	}
	if (rc == 0)
		rc = bytes_charge_locked(s, c, cur, blob_len(b), false);
	if (rc == 0) {
		/* An mtime set explicitly after this stage's last write,
		 * with no publication in between, is what the writer asked
		 * the content to carry (cp -p): it survives, as on tmpfs
		 * where the write stamped it first. */
		bool keep = c->version == st->seen_version &&
			    c->meta.mtime != st->seen_mtime;
		int64_t mtime = c->meta.mtime;

		publish_locked(s, NULL, c, blob_ref(b));
		if (keep)
			c->meta.mtime = mtime;
		st->base_version = c->version;
		st->seen_version = c->version;
		st->seen_mtime = c->meta.mtime;
		pin = st->pin;
		st->pin = b;
		b = NULL;
	}
	unlock(stripe(s, c), LOCK_STRIPE);
	/* Published or refused, the staged bytes are spent. */
	stage_reset_locked(st);
out:
	unlock(&st->lock, LOCK_STAGE);
	blob_unref(b);
	blob_unref(pin);
	return rc ? refuse(s, rc) : 0;
}

/* What store_stage_flush() does with @st (api.c publishes): 1 when it
 * was written to or truncated, 0 when not, a refused write's error. */
int stage_flush_due(struct store_stage *st)
{
	bool written;
	int failed;

	lock(&st->lock, LOCK_STAGE);
	written = st->written;
	failed = st->failed;
	unlock(&st->lock, LOCK_STAGE);
	/* A refused write abandoned the stage (it is no longer "written"):
	 * the close must still say that nothing was published. */
	if (failed)
		return failed;
	return written ? 1 : 0;
}

void store_stage_close(struct store_stage *st)
{
	if (!st)
		return;
	stage_release(st, st->held);
	free(st->buf);
	blob_unref(st->pin);
	if (st->t)
		store_node_unref(st->s, &st->t->node);
	if (st->c)
		store_node_unref(st->s, &st->c->node);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

struct store *stage_store(const struct store_stage *st)
{
	return st->s;
}

/*
 * A publication an engine makes (its struct store_ops's publish), with
 * no store lock held while it waits: stage_take() copies what there is
 * to publish (the stage keeps its staged bytes meanwhile, so its readers
 * see them), stage_settle() then bases the stage on the version the
 * publication made, as the store shows it, and spends its staged bytes
 * unless another write of the same open file came meanwhile (they are
 * published next).
 */
int stage_take(struct store_stage *st, struct stage_copy *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	lock(&st->lock, LOCK_STAGE);
	if (st->failed || !st->dirty) {
		rc = st->failed;
		unlock(&st->lock, LOCK_STAGE);
		return rc;
	}
	out->child = &st->c->node;
	out->mode = st->mode;
	out->len = st->len;
	out->data = st_malloc(out->len ? out->len : 1);
	if (!out->data) {
		unlock(&st->lock, LOCK_STAGE);
		return -ENOMEM;
	}
	if (out->len)
		memcpy(out->data, st->buf, out->len);
	out->base_version = st->base_version;
	out->seen_version = st->seen_version;
	out->seen_mtime = st->seen_mtime;
	out->writes = st->writes;
	unlock(&st->lock, LOCK_STAGE);
	return 1;
}

void stage_settle(struct store_stage *st, struct stage_copy *copy, int rc)
{
	struct store *s = st->s;
	struct child *c = st->c;
	struct blob *pin = NULL;

	free(copy->data);
	copy->data = NULL;
	lock(&st->lock, LOCK_STAGE);
	if (rc == 0) {
		lock(stripe(s, c), LOCK_STRIPE);
		pin = st->pin;
		st->pin = blob_ref(c->content);
		st->base_version = c->version;
		st->seen_version = c->version;
		st->seen_mtime = c->meta.mtime;
		unlock(stripe(s, c), LOCK_STRIPE);
	}
	/* Published or refused, the staged bytes are spent. */
	if (st->writes == copy->writes)
		stage_reset_locked(st);
	unlock(&st->lock, LOCK_STAGE);
	blob_unref(pin);
}
