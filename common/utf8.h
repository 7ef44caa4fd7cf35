/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * utf8.h - the two UTF-8 facts the control protocol needs (its JSON
 * strings must be valid UTF-8): whether a string is, and how much of it
 * fits in N bytes without cutting a character.  No state.
 */
#ifndef WBD_UTF8_H
#define WBD_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Is S well-formed UTF-8 (no overlong forms, surrogates or values past
 * U+10FFFF)? */
static inline bool
utf8_valid(const char *s)
{
	const uint8_t *p = (const uint8_t *)s;

	while (*p) {
		uint32_t c = *p;
		int n = c < 0x80           ? 0 :
		    c >= 0xc2 && c <= 0xdf ? 1 :
		    (c & 0xf0) == 0xe0     ? 2 :
		    c >= 0xf0 && c <= 0xf4 ? 3 :
					     -1;
		if (n < 0)
			return false;
		c &= 0x3f >> n;
		for (int i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			c = c << 6 | (p[i] & 0x3f);
		}
		if ((n == 2 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
		    (n == 3 && (c < 0x10000 || c > 0x10ffff)))
			return false;
		p += n + 1;
	}
	return true;
}

/* The length of S's longest prefix of at most MAX bytes that ends on a
 * character boundary (S well-formed). */
static inline size_t
utf8_prefix_len(const char *s, size_t max)
{
	size_t len = 0;

	while (len < max && s[len])
		len++;
	if (s[len] == '\0')
		return len;
	while (len > 0 && ((uint8_t)s[len] & 0xc0) == 0x80)
		len--;
	return len;
}

#endif
