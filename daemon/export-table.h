/*
 * export-table.h - the daemon's exports, as the handshake, the control
 * socket and writeback find them.
 *
 * The table never moves: it is allocated at its full size at start-up,
 * entries are only appended (by the main thread at start-up, or a reload
 * under daemon.tune_lock) and published by a release store of the count,
 * so other threads read it without a lock.  An export removed by a reload
 * stays in the table (marked) until the daemon exits.
 */
#ifndef WBD_EXPORT_TABLE_H
#define WBD_EXPORT_TABLE_H

#include <stddef.h>

#include "config.h"

struct export;

#define EXPORT_TABLE_MAX CONFIG_MAX_EXPORTS

struct export_table {
	struct export **v;              /* EXPORT_TABLE_MAX slots */
	size_t n;                       /* atomic: published entries */
	/* Atomic: the name the empty name stands for; NULL for the first
	 * export still served, export_table_no_default for none.  Names
	 * set are kept until the table is freed (readers take no lock). */
	const char *default_name;
	char **names;
	size_t n_names;
};

extern const char export_table_no_default[];

/* 0, or -1 if out of memory. */
int export_table_init(struct export_table *t);
/* Free the table and every export in it (no other thread runs). */
void export_table_free(struct export_table *t);
/* Append E; -1 if the table is full.  One writer at a time. */
int export_table_add(struct export_table *t, struct export *e);

/* The export the empty name reaches: NAME, CONFIG_NO_DEFAULT_EXPORT for
 * none, NULL for the first export still served.  0, or -1 if out of
 * memory.  One writer at a time (start-up, or a reload). */
int export_table_set_default(struct export_table *t, const char *name);

/* Lookup for the handshake ("" is the default export, see above); exports
 * removed by a reload are not found. */
struct export *export_table_find(struct export_table *t, const char *name);
struct export *export_table_nth(struct export_table *t, size_t i);

static inline size_t
export_table_count(struct export_table *t)
{
	return __atomic_load_n(&t->n, __ATOMIC_ACQUIRE);
}

#endif
