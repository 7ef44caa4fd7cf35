/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * size.c - byte sizes with binary suffixes.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "size.h"

static const char size_units[] = "KMGTPE";

int
size_parse(const char *s, uint64_t *out)
{
	const char *p = s;
	uint64_t n = 0;

	while (isspace((unsigned char)*p))
		p++;
	if (!isdigit((unsigned char)*p)) {
		errno = EINVAL;
		return -1;
	}
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = *p - '0';
		if (n > (UINT64_MAX - d) / 10) {
			errno = ERANGE;
			return -1;
		}
		n = n * 10 + d;
	}
	while (isspace((unsigned char)*p))
		p++;

	unsigned shift = 0;
	if (*p) {
		const char *u = strchr(size_units, toupper((unsigned char)*p));
		if (u) {
			shift = 10 * (unsigned)(u - size_units + 1);
			p++;
			if (*p == 'i' || *p == 'I')
				p++;
			if (*p == 'b' || *p == 'B')
				p++;
		} else if (*p == 'b' || *p == 'B') {
			p++;
		}
	}
	while (isspace((unsigned char)*p))
		p++;
	if (*p) {
		errno = EINVAL;
		return -1;
	}
	if (shift && n > (UINT64_MAX >> shift)) {
		errno = ERANGE;
		return -1;
	}
	*out = n << shift;
	return 0;
}

char *
size_format(uint64_t n, char *buf, size_t len)
{
	unsigned i = 0;

	while (n && i < sizeof size_units - 1 && (n & 1023) == 0) {
		n >>= 10;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu", (unsigned long long)n);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)n,
		    size_units[i - 1]);
	return buf;
}

char *
size_human(uint64_t n, char *buf, size_t len)
{
	static const char *names[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)n;
	unsigned i = 0;

	while (v >= 1024 && i < 6) {
		v /= 1024;
		i++;
	}
	/* Else 1048575 would print as "1024.0 KiB". */
	if (i > 0 && i < 6 && v >= 1023.95) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.1f %s", v, names[i]);
	return buf;
}
