/*
 * export-table.c - the export table: see export-table.h.
 */
#include <stdlib.h>
#include <string.h>

#include "export-table.h"
#include "export.h"

int
export_table_init(struct export_table *t)
{
	t->n = 0;
	t->v = calloc(EXPORT_TABLE_MAX, sizeof *t->v);
	return t->v ? 0 : -1;
}

void
export_table_free(struct export_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		export_free(t->v[i]);
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

int
export_table_add(struct export_table *t, struct export *e)
{
	if (!t->v || t->n >= EXPORT_TABLE_MAX)
		return -1;
	t->v[t->n] = e;
	__atomic_store_n(&t->n, t->n + 1, __ATOMIC_RELEASE);
	return 0;
}

static bool
export_table_live(struct export *e)
{
	return __atomic_load_n(&e->removed, __ATOMIC_ACQUIRE) == EXPORT_LIVE;
}

struct export *
export_table_find(struct export_table *t, const char *name)
{
	size_t n = export_table_count(t);

	for (size_t i = 0; i < n; i++) {
		struct export *e = t->v[i];
		/* "" is the default export: the first one still served. */
		if (export_table_live(e) && (!*name || strcmp(e->name, name) == 0))
			return e;
	}
	return NULL;
}

struct export *
export_table_nth(struct export_table *t, size_t nth)
{
	size_t n = export_table_count(t);

	for (size_t i = 0; i < n; i++)
		if (export_table_live(t->v[i]) && nth-- == 0)
			return t->v[i];
	return NULL;
}
