/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * export-table.c - the export table: see export-table.h.
 */
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "export-table.h"
#include "export.h"

int
export_table_init(struct export_table *t)
{
	*t = (struct export_table){ 0 };
	return pubtab_init(&t->slots, EXPORT_TABLE_MAX);
}

const char export_table_no_default[] = CONFIG_NO_DEFAULT_EXPORT;

void
export_table_free(struct export_table *t)
{
	struct export *e;

	export_table_foreach(t, i, e)
		export_free(e);
	pubtab_free(&t->slots);
	for (size_t i = 0; i < t->n_names; i++)
		free(t->names[i]);
	free(t->names);
	t->names = NULL;
	t->n_names = 0;
	store_relaxed(&t->default_name, NULL);
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
	store_release(&t->default_name, d);
	return 0;
}

int
export_table_add(struct export_table *t, struct export *e)
{
	e->added = ++t->added; /* before it is published */
	return pubtab_add(&t->slots, e) < 0 ? -1 : 0;
}

void
export_table_remove(struct export_table *t, struct export *e)
{
	pubtab_remove(&t->slots, e);
}

static bool
export_table_live(struct export *e)
{
	return load_acquire(&e->removed) == EXPORT_LIVE;
}

struct export *
export_table_find(struct export_table *t, const char *name)
{
	struct export *e, *first = NULL;

	if (!*name) {
		/* The default export: the one named, or the first. */
		const char *d = load_acquire(&t->default_name);
		if (d == export_table_no_default)
			return NULL;
		if (d)
			name = d;
	}
	export_table_foreach(t, i, e) {
		if (!export_table_live(e))
			continue;
		if (*name && strcmp(e->name, name) == 0)
			return e;
		/* "" is the default export: the first added still served
		 * (slots are reused, so not the first slot). */
		if (!*name && (!first || e->added < first->added))
			first = e;
	}
	return first;
}

struct export *
export_table_nth(struct export_table *t, size_t nth)
{
	struct export *e;

	export_table_foreach(t, i, e)
		if (export_table_live(e) && nth-- == 0)
			return e;
	return NULL;
}
