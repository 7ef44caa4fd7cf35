/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * table.h - the layout of wbctl's human output: columns of text, each as
 * wide as its widest cell, and text filled into lines of a given width.
 *
 * Widths are counted in characters (UTF-8 sequences), not bytes.  Nothing
 * is ever cut off: what does not fit is continued on the next line.
 */
#ifndef WBCTL_TABLE_H
#define WBCTL_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define TABLE_MAX_COLS  16

struct table {
	size_t ncols;
	const char *head[TABLE_MAX_COLS];
	unsigned right;                 /* bit i: right-align column i */
	char **cells;                   /* nrows * ncols, copies */
	size_t nrows, cap;
};

/* HEADS: NCOLS column titles; a title starting with '>' is right-aligned
 * (the '>' is not printed). */
void table_init(struct table *t, size_t ncols, const char *const *heads);

/* Add a row of NCOLS strings (copied; NULL prints as "-"). */
void table_add(struct table *t, ...);

/*
 * Print the table, each line starting with INDENT, in at most WIDTH
 * columns (0: no limit).  Too wide, it first narrows the gap between
 * columns from two spaces to one; then prints a first cell too long for
 * its column (a long name) on a line of its own, the rest of its row on
 * the next; and if even that does not fit, prints each row as its first
 * cell followed by "title value, title value..." lines.
 */
void
table_print(const struct table *t, FILE *f, const char *indent, size_t width);
void table_free(struct table *t);

/* The width of the first LEN bytes of S, in characters. */
size_t table_cols(const char *s, size_t len);

/*
 * Print TEXT on F in lines of at most WIDTH columns and a newline: the
 * first line starts with FIRST, the others with CONT spaces.  A line
 * breaks after ", " or "; " where that fills at least half of it; else at
 * the last space that fits, but not at one after a digit ("4.0 MiB",
 * "3 failed" stay whole); else, for a word longer than a line, anywhere.
 */
void table_wrap(FILE *f, const char *first, size_t cont, size_t width,
    const char *text);

#endif
