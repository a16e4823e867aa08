/*
 * hooks.h - what a mount of a store tells it and is told by it outside
 * its transitions: the hooks it sets once, before the store is used
 * (events appended, attributes the kernel cannot have seen, another
 * mount's changes of attributes, a tenant to forget), and its use of
 * nodes, for an engine that copies only what its mount uses.  Included
 * by store/store.h, which declares the types.
 */
#ifndef STATEFS_STORE_HOOKS_H
#define STATEFS_STORE_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;
struct store_node;

/*
 * Called after a transition that appended events, outside the store's
 * locks but before the transition returns, so a waiting reader can be
 * woken; @internal says one of them was internal (an expiry, a
 * .depart).  It must not call into the store or the mount.  Set once,
 * before the store is used.
 */
void store_set_event_hook(struct store *s, void (*hook)(void *arg, bool internal),
			  void *arg);

/*
 * Called after a transition, before the event hook, with the states
 * @ino[0..n) whose attributes changed in a way the kernel cannot have
 * seen: a publication (size, times), or a cascade (a parent's leave,
 * .depart, expiry or drain) that took a link from a state living on
 * through links in other parents (nlink).  Same rules as the event hook.
 * Set once, before use.
 */
void store_set_attr_hook(struct store *s,
			  void (*hook)(void *arg, const uint64_t *ino, size_t n),
			  void *arg);

/*
 * On a shared store: called after the mirror applied another mount's
 * change of @n's attributes that no line tells of (a chmod, chown or
 * times, a lease set or renewed, a child_ttl: on the mount that made it,
 * the kernel raised ATTRIB), outside the store's locks.  @n is counted
 * for the call only: the hook takes its own reference to keep it.  It
 * must not call into the store or the mount.  Set once, before use.
 */
void store_set_touch_hook(struct store *s,
			  void (*hook)(void *arg, struct store_node *n),
			  void *arg);

/*
 * A mount's use, for an engine that copies only what its mount uses (a
 * shared store's mirror, docs/shared-store.md; the embedded store
 * ignores it).  store_use: the kernel is about to act on @n (NULL: a
 * root .events or .snapshot, the whole store; the root: a lookup or a
 * listing in it), whose tenant is loaded first if need be: 0 or -EIO
 * (the store could not be reached: nothing changed, a later use tries
 * again); it may wait on the network.  A lookup or a listing
 * (store_lookup, store_list) is no use: in a tenant the engine does not
 * copy they find nothing, so a caller acting for the kernel uses the
 * node first, and one walking what the kernel holds (invalidations, the
 * echo) does not load what the kernel holds nothing of.  store_hold:
 * the kernel learned @n (NULL: as above), which holds its tenant until
 * store_release of the token (0: none).  No store lock held.  The forget
 * hook: the engine asks the kernel to forget tenant @n (outside the
 * store's locks; it must not call a transition).  Set once, before use.
 */
int store_use(struct store *s, struct store_node *n);
uint64_t store_hold(struct store *s, struct store_node *n);
void store_release(struct store *s, uint64_t token);
void store_set_forget_hook(struct store *s,
			   void (*hook)(void *arg, struct store_node *n),
			   void *arg);

#endif /* STATEFS_STORE_HOOKS_H */
