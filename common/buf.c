/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * buf.c - growable byte buffer.  An allocation failure is remembered in
 * b->oom and later puts become no-ops, so callers check once at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void
buf_init(struct buf *b)
{
	memset(b, 0, sizeof *b);
}

void
buf_free(struct buf *b)
{
	free(b->data);
	buf_init(b);
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	b->oom = 0;
}

void
buf_put(struct buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d) {
			b->oom = 1;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

void
buf_put_u16(struct buf *b, uint16_t v)
{
	uint8_t x[2];
	put_u16(x, v);
	buf_put(b, x, 2);
}

void
buf_put_u32(struct buf *b, uint32_t v)
{
	uint8_t x[4];
	put_u32(x, v);
	buf_put(b, x, 4);
}

void
buf_put_u64(struct buf *b, uint64_t v)
{
	uint8_t x[8];
	put_u64(x, v);
	buf_put(b, x, 8);
}
