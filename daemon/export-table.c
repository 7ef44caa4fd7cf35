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
	*t = (struct export_table){ 0 };
	t->v = calloc(EXPORT_TABLE_MAX, sizeof *t->v);
	return t->v ? 0 : -1;
}

const char export_table_no_default[] = CONFIG_NO_DEFAULT_EXPORT;

void
export_table_free(struct export_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		export_free(t->v[i]);
	free(t->v);
	t->v = NULL;
	t->n = 0;
	for (size_t i = 0; i < t->n_names; i++)
		free(t->names[i]);
	free(t->names);
	t->names = NULL;
	t->n_names = 0;
	t->default_name = NULL;
}

int
export_table_set_default(struct export_table *t, const char *name)
{
	const char *d = NULL;

	if (name && strcmp(name, CONFIG_NO_DEFAULT_EXPORT) == 0) {
		d = export_table_no_default;
	} else if (name) {
		char **v = realloc(t->names, (t->n_names + 1) * sizeof *v);
		if (!v)
			return -1;
		t->names = v;
		if (!(v[t->n_names] = strdup(name)))
			return -1;
		d = v[t->n_names++];
	}
	__atomic_store_n(&t->default_name, d, __ATOMIC_RELEASE);
	return 0;
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

	if (!*name) {
		/* The default export: the one named, or the first. */
		const char *d =
		    __atomic_load_n(&t->default_name, __ATOMIC_ACQUIRE);
		if (d == export_table_no_default)
			return NULL;
		if (d)
			name = d;
	}
	for (size_t i = 0; i < n; i++) {
		struct export *e = t->v[i];
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
