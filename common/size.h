/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * size.h - parsing and printing of byte sizes with suffixes ("512M", "10G").
 * Suffixes are binary (K = 1024) and case-insensitive; "KiB"/"KB"/"K" are
 * all accepted.  Pure functions, no state.
 */
#ifndef WBD_SIZE_H
#define WBD_SIZE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parse S into *OUT.  Returns 0, or -1 with errno EINVAL (not a size) or
 * ERANGE (does not fit in 64 bits).
 */
int size_parse(const char *s, uint64_t *out);

/* Format N as the shortest exact form ("4K", "10G", "1000"); returns BUF. */
char *size_format(uint64_t n, char *buf, size_t len);

/* Format N for humans, rounded ("1.5 GiB"); returns BUF. */
char *size_human(uint64_t n, char *buf, size_t len);

#endif
