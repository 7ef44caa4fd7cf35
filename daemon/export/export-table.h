/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * export-table.h - the daemon's exports, as the handshake, the control
 * socket and writeback find them.
 *
 * The table never moves: its slots are allocated at their full size at
 * start-up (common/pubtab.h).  Exports are added by the main thread at
 * start-up, or under daemon.tune_lock (a reload, installing a waiting
 * export), into the first empty slot; other threads read the table without
 * a lock.  An export removed by a reload stays in its slot, marked, until
 * it is written back; then the tick (under tune_lock) empties the slot and
 * frees the export once no reader can hold it any more (daemon.c, grace.h).
 * Readers skip empty slots.
 */
#ifndef WBD_EXPORT_TABLE_H
#define WBD_EXPORT_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "pubtab.h"

struct export;

#define EXPORT_TABLE_MAX CONFIG_MAX_EXPORTS

struct export_table {
	struct pubtab slots; /* EXPORT_TABLE_MAX struct export * */
	unsigned long added; /* exports ever added (the writer) */
	/* Atomic: the name the empty name stands for; NULL for the first
	 * export still served, export_table_no_default for none.  Names
	 * set are kept until the table is freed (readers take no lock). */
	_Atomic(const char *) default_name;
	char **names;
	size_t n_names;
};

extern const char export_table_no_default[];

/* 0, or -1 if out of memory. */
int export_table_init(struct export_table *t);
/* Free the table and every export in it (no other thread runs). */
void export_table_free(struct export_table *t);
/* Add E; -1 if the table is full.  One writer at a time. */
int export_table_add(struct export_table *t, struct export *e);
/* Is there room for one more (the writer)? */
static inline bool
export_table_has_room(struct export_table *t)
{
	return pubtab_has_room(&t->slots);
}
/* Empty E's slot.  One writer at a time; E is freed only after a grace
 * period. */
void export_table_remove(struct export_table *t, struct export *e);

/* The export the empty name reaches: NAME, CONFIG_NO_DEFAULT_EXPORT for
 * none, NULL for the first export still served.  0, or -1 if out of
 * memory.  One writer at a time (start-up, or a reload). */
int export_table_set_default(struct export_table *t, const char *name);

/* Lookup for the handshake ("" is the default export, see above); exports
 * removed by a reload are not found. */
struct export *export_table_find(struct export_table *t, const char *name);
struct export *export_table_nth(struct export_table *t, size_t i);

/* Slots to look at: [0, export_table_count). */
static inline size_t
export_table_count(struct export_table *t)
{
	return pubtab_count(&t->slots);
}

/* The export in slot I, NULL if the slot is empty. */
static inline struct export *
export_table_at(struct export_table *t, size_t i)
{
	return pubtab_get(&t->slots, i);
}

/* For each export E in table T, I its slot. */
#define export_table_foreach(t, i, e)                                          \
	for (size_t i = 0; i < export_table_count(t); i++)                     \
		if (((e) = export_table_at((t), i)) != NULL)

#endif
