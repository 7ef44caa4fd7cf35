/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * table.c - the layout of wbctl's human output: aligned columns, and text
 * filled into lines of a given width (table.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
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

size_t
table_cols(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			n++;
	return n;
}

static size_t
table_strcols(const char *s)
{
	return s ? table_cols(s, strlen(s)) : 0;
}

static void
table_spaces(FILE *f, size_t n)
{
	while (n-- > 0)
		fputc(' ', f);
}

/*
 * Where a line holding the start of S, at most AVAIL columns, may end: the
 * bytes before the last space that may break it, or before an earlier one
 * after ',' or ';' if that fills at least half the line; 0 if there is
 * none.
 */
static size_t
table_break(const char *s, size_t avail)
{
	size_t cols = 0, clause = 0, clause_cols = 0, word = 0;

	for (size_t i = 0; s[i] && cols <= avail; i++) {
		if (s[i] == ' ' && i > 0) {
			char prev = s[i - 1];
			if (prev == ',' || prev == ';') {
				clause = word = i;
				clause_cols = cols;
			} else if (prev != ' ' &&
			    !isdigit((unsigned char)prev)) {
				word = i;
			}
		}
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			cols++;
	}
	return clause && clause_cols * 2 >= avail ? clause : word;
}

/* The width of the word that starts S (after any spaces). */
static size_t
table_word_cols(const char *s)
{
	while (*s == ' ')
		s++;
	return table_cols(s, strcspn(s, " "));
}

/* The bytes of S that fill AVAIL columns (at least one character). */
static size_t
table_cut(const char *s, size_t avail)
{
	size_t i = 0, cols = 0;

	while (s[i]) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (cols == (avail ? avail : 1))
				break;
			cols++;
		}
		i++;
	}
	return i;
}

void
table_wrap(FILE *f, const char *first, size_t cont, size_t width,
    const char *text)
{
	size_t col = table_strcols(first);
	const char *p = text;

	fputs(first, f);
	while (*p) {
		size_t avail = width > col ? width - col : 0;
		size_t n = strlen(p);
		if (width == 0 || table_cols(p, n) <= avail) {
			fputs(p, f);
			break;
		}
		size_t cut = table_break(p, avail);
		if (cut > 0 && width > cont &&
		    table_word_cols(p + cut) > width - cont) {
			/* The next word fits on no line: it fills this one. */
			cut = table_cut(p, avail);
		} else if (cut == 0 && col > cont) {
			/* A long FIRST: the text starts on the next line. */
		} else if (cut == 0) {
			cut = table_cut(p, avail);
		}
		fwrite(p, 1, cut, f);
		p += cut;
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		fputc('\n', f);
		table_spaces(f, cont);
		col = cont;
	}
	fputc('\n', f);
}

/* Column I's width: its title's, or its widest cell's; for column 0 only
 * cells of at most MAX0 columns count. */
static size_t
table_width(const struct table *t, size_t i, size_t max0)
{
	size_t w = table_strcols(t->head[i]);

	for (size_t r = 0; r < t->nrows; r++) {
		size_t c = table_strcols(t->cells[r * t->ncols + i]);
		if (c > w && (i > 0 || c <= max0))
			w = c;
	}
	return w;
}

/* One line of CELLS in columns W, GAP spaces apart, without trailing
 * spaces. */
static void
table_row(const struct table *t, FILE *f, const char *indent, const size_t *w,
    size_t gap, const char *const *cells)
{
	size_t pending = 0; /* spaces owed before the next text */

	fputs(indent, f);
	for (size_t i = 0; i < t->ncols; i++) {
		const char *s = cells[i] ? cells[i] : "";
		size_t c = table_strcols(s), pad = w[i] > c ? w[i] - c : 0;
		bool right = t->right & (1u << i);
		if (i > 0)
			pending += gap;
		if (right)
			pending += pad;
		if (*s) {
			table_spaces(f, pending);
			fputs(s, f);
			pending = 0;
		}
		if (!right)
			pending += pad;
	}
	fputc('\n', f);
}

/* Each row as its first cell, then "title value, title value..." below
 * it, every line within WIDTH. */
static void
table_print_stacked(const struct table *t, FILE *f, const char *indent,
    size_t width)
{
	size_t in = table_strcols(indent);
	char *first = malloc(strlen(indent) + 3);

	if (!first)
		return;
	snprintf(first, strlen(indent) + 3, "%s  ", indent);
	for (size_t r = 0; r < t->nrows; r++) {
		const char *const *cells =
		    (const char *const *)t->cells + r * t->ncols;
		char *text = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&text, &len);
		if (!m)
			break;
		for (size_t i = 1; i < t->ncols; i++) {
			fputs(i > 1 ? ", " : "", m);
			for (const char *h = t->head[i]; *h; h++)
				fputc(tolower((unsigned char)*h), m);
			fprintf(m, " %s", cells[i]);
		}
		fclose(m);
		table_wrap(f, indent, in + 2, width, cells[0]);
		table_wrap(f, first, in + 2, width, text);
		free(text);
	}
	free(first);
}

void
table_print(const struct table *t, FILE *f, const char *indent, size_t width)
{
	static const size_t gaps[] = { 2, 1 };
	size_t w[TABLE_MAX_COLS], rest = 0, in = table_strcols(indent);
	size_t head0 = table_strcols(t->head[0]);

	for (size_t i = 0; i < t->ncols; i++) {
		w[i] = table_width(t, i, SIZE_MAX);
		if (i > 0)
			rest += w[i];
	}
	/* Every row on one line, the columns two spaces apart, else one. */
	for (size_t g = 0; g < 2; g++) {
		size_t total = in + w[0] + rest + gaps[g] * (t->ncols - 1);
		if (width && total > width)
			continue;
		table_row(t, f, indent, w, gaps[g], t->head);
		for (size_t r = 0; r < t->nrows; r++)
			table_row(t, f, indent, w, gaps[g],
			    (const char *const *)t->cells + r * t->ncols);
		return;
	}
	/* A first cell too long for the room left for it on a line of its
	 * own, as df(1) prints a long file system name. */
	for (size_t g = 0; g < 2; g++) {
		size_t used = in + rest + gaps[g] * (t->ncols - 1);
		if (used >= width || width - used < head0)
			continue;
		w[0] = table_width(t, 0, width - used);
		table_row(t, f, indent, w, gaps[g], t->head);
		for (size_t r = 0; r < t->nrows; r++) {
			const char *cells[TABLE_MAX_COLS];
			memcpy(cells, t->cells + r * t->ncols,
			    t->ncols * sizeof cells[0]);
			if (table_strcols(cells[0]) > w[0]) {
				table_wrap(f, indent, in, width, cells[0]);
				cells[0] = "";
			}
			table_row(t, f, indent, w, gaps[g], cells);
		}
		return;
	}
	table_print_stacked(t, f, indent, width);
}

void
table_free(struct table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof *t);
}
