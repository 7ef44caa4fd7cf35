/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * buf.h - a growable byte buffer with big-endian put helpers, used to build
 * handshake replies.  Single owner, no locking.
 */
#ifndef WBD_BUF_H
#define WBD_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	int oom;                /* set once an allocation failed */
};

void buf_init(struct buf *b);
void buf_free(struct buf *b);
void buf_reset(struct buf *b);
void buf_put(struct buf *b, const void *p, size_t n);
void buf_put_u16(struct buf *b, uint16_t v);
void buf_put_u32(struct buf *b, uint32_t v);
void buf_put_u64(struct buf *b, uint64_t v);

static inline uint16_t
get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t
get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t
get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

static inline void
put_u16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static inline void
put_u32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static inline void
put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, v >> 32);
	put_u32(p + 4, (uint32_t)v);
}

#endif
