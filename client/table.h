/*
 * table.h - columns of text for wbctl's human output: cells are added a
 * row at a time, and printed with each column as wide as its widest cell.
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

void table_print(const struct table *t, FILE *f, const char *indent);
void table_free(struct table *t);

#endif
