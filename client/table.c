/*
 * table.c - aligned columns for wbctl's human output.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

void
table_init(struct table *t, size_t ncols, const char *const *heads)
{
	memset(t, 0, sizeof *t);
	t->ncols = ncols < TABLE_MAX_COLS ? ncols : TABLE_MAX_COLS;
	for (size_t i = 0; i < t->ncols; i++) {
		t->head[i] = heads[i];
		if (heads[i][0] == '>') {
			t->head[i]++;
			t->right |= 1u << i;
		}
	}
}

void
table_add(struct table *t, ...)
{
	va_list ap;

	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		char **c = realloc(t->cells, cap * t->ncols * sizeof *c);
		if (!c)
			return;         /* the row is left out */
		t->cells = c;
		t->cap = cap;
	}
	char **row = t->cells + t->nrows * t->ncols;
	va_start(ap, t);
	for (size_t i = 0; i < t->ncols; i++) {
		const char *s = va_arg(ap, const char *);
		row[i] = strdup(s ? s : "-");
	}
	va_end(ap);
	t->nrows++;
}

static void
table_row(const struct table *t, FILE *f, const char *indent,
    const size_t *w, const char *const *cells)
{
	char line[1024];
	size_t n = 0;

	n += (size_t)snprintf(line, sizeof line, "%s", indent);
	for (size_t i = 0; i < t->ncols && n < sizeof line; i++) {
		const char *s = cells[i] ? cells[i] : "";
		bool right = t->right & (1u << i);
		n += (size_t)snprintf(line + n, sizeof line - n, "%s%*s",
		    i ? "  " : "", right ? (int)w[i] : -(int)w[i], s);
	}
	if (n >= sizeof line)
		n = sizeof line - 1;
	while (n > 0 && line[n - 1] == ' ')
		n--;
	fprintf(f, "%.*s\n", (int)n, line);
}

void
table_print(const struct table *t, FILE *f, const char *indent)
{
	size_t w[TABLE_MAX_COLS];

	for (size_t i = 0; i < t->ncols; i++) {
		w[i] = strlen(t->head[i]);
		for (size_t r = 0; r < t->nrows; r++) {
			const char *s = t->cells[r * t->ncols + i];
			if (s && strlen(s) > w[i])
				w[i] = strlen(s);
		}
	}
	table_row(t, f, indent, w, t->head);
	for (size_t r = 0; r < t->nrows; r++)
		table_row(t, f, indent, w,
		    (const char *const *)t->cells + r * t->ncols);
}

void
table_free(struct table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof *t);
}
