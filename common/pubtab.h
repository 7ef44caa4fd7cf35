/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pubtab.h - a table of pointers that other threads read without a lock:
 * a fixed number of slots, allocated once, so the table never moves.
 *
 * One writer at a time (the caller serialises them) puts a pointer into
 * the first empty slot, published by a release store, and empties a slot
 * by storing NULL; count is the slots ever used, raised with a release
 * store and never lowered.  A reader loads count, then each slot below it
 * with acquire, and skips empty ones.  An emptied slot may be filled again
 * at once: what it held may be freed only once no reader can still hold
 * it (grace.h).
 */
#ifndef WBD_PUBTAB_H
#define WBD_PUBTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "atomics.h"

struct pubtab {
	_Atomic(void *) *v; /* cap slots; NULL: empty */
	size_t cap;
	_Atomic size_t n; /* slots ever used */
};

/* 0, or -1 if out of memory. */
static inline int
pubtab_init(struct pubtab *t, size_t cap)
{
	store_relaxed(&t->n, 0);
	t->cap = cap;
	t->v = calloc(cap, sizeof *t->v);
	return t->v ? 0 : -1;
}

static inline void
pubtab_free(struct pubtab *t)
{
	free((void *)t->v);
	t->v = NULL;
	t->cap = 0;
	store_relaxed(&t->n, 0);
}

/* Slots a reader looks at: [0, pubtab_count). */
static inline size_t
pubtab_count(const struct pubtab *t)
{
	return load_acquire(&t->n);
}

/* Slot I, NULL if empty. */
static inline void *
pubtab_get(const struct pubtab *t, size_t i)
{
	return load_acquire(&t->v[i]);
}

/* Is there an empty slot (the writer)? */
static inline bool
pubtab_has_room(const struct pubtab *t)
{
	for (size_t i = 0; i < load_relaxed(&t->n); i++)
		if (load_relaxed(&t->v[i]) == NULL)
			return true;
	return t->v && load_relaxed(&t->n) < t->cap;
}

/* Put P into the first empty slot: its index, or -1 if none is (the
 * writer). */
static inline long
pubtab_add(struct pubtab *t, void *p)
{
	size_t i = 0;

	while (i < load_relaxed(&t->n) && load_relaxed(&t->v[i]) != NULL)
		i++;
	if (!t->v || i >= t->cap)
		return -1;
	store_release(&t->v[i], p);
	if (i == load_relaxed(&t->n))
		store_release(&t->n, i + 1);
	return (long)i;
}

/* Empty the slot holding P; -1 if none does (the writer). */
static inline int
pubtab_remove(struct pubtab *t, const void *p)
{
	for (size_t i = 0; i < load_relaxed(&t->n); i++) {
		if (load_relaxed(&t->v[i]) == p) {
			store_release(&t->v[i], NULL);
			return 0;
		}
	}
	return -1;
}

#endif
