/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bufstash.c - large page-aligned buffers kept per thread: see bufstash.h.
 */
#include <pthread.h>
#include <stdlib.h>

#include "bufstash.h"

struct bufs {
	unsigned n;
	size_t bytes;
	struct {
		void *p;
		size_t cap;
	} buf[BUFSTASH_KEEP];
};

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;

static void
bufs_free(void *p)
{
	struct bufs *b = p;

	for (unsigned i = 0; i < b->n; i++)
		free(b->buf[i].p);
	free(b);
}

static void
bufs_key_init(void)
{
	if (pthread_key_create(&bufs_key, bufs_free) != 0)
		abort();
}

static struct bufs *
bufstash_self(void)
{
	struct bufs *b;

	pthread_once(&bufs_once, bufs_key_init);
	if ((b = pthread_getspecific(bufs_key)) == NULL &&
	    (b = calloc(1, sizeof *b)) != NULL &&
	    pthread_setspecific(bufs_key, b) != 0) {
		free(b);
		b = NULL;
	}
	return b;
}

static void
bufs_take(struct bufs *b, unsigned i)
{
	b->bytes -= b->buf[i].cap;
	b->buf[i] = b->buf[--b->n];
}

void *
bufstash_get(size_t count, size_t *cap)
{
	struct bufs *b;
	void *p;

	if (count < 4096) {
		*cap = count;
		return malloc(count ? count : 1);
	}
	if ((b = bufstash_self()) != NULL) {
		/* Best fit, and at most a quarter more than asked for. */
		unsigned best = b->n;
		for (unsigned i = 0; i < b->n; i++)
			if (b->buf[i].cap >= count &&
			    b->buf[i].cap - count <= count / 4 &&
			    (best == b->n || b->buf[i].cap < b->buf[best].cap))
				best = i;
		if (best < b->n) {
			p = b->buf[best].p;
			*cap = b->buf[best].cap;
			bufs_take(b, best);
			return p;
		}
	}
	size_t n = (count + 4095) & ~(size_t)4095;
	if (posix_memalign(&p, 4096, n) != 0)
		return NULL;
	*cap = n;
	return p;
}

void
bufstash_put(void *p, size_t cap)
{
	struct bufs *b;

	if (!p)
		return;
	if (cap < 4096 || cap > BUFSTASH_KEEP_BYTES ||
	    (b = bufstash_self()) == NULL) {
		free(p);
		return;
	}
	/* Room made by the smallest kept, while they are smaller than P. */
	while (b->n == BUFSTASH_KEEP || b->bytes + cap > BUFSTASH_KEEP_BYTES) {
		unsigned small = 0;
		for (unsigned i = 1; i < b->n; i++)
			if (b->buf[i].cap < b->buf[small].cap)
				small = i;
		if (b->n == 0 || b->buf[small].cap >= cap) {
			free(p);
			return;
		}
		free(b->buf[small].p);
		bufs_take(b, small);
	}
	b->buf[b->n].p = p;
	b->buf[b->n++].cap = cap;
	b->bytes += cap;
}

unsigned
bufstash_kept(size_t *bytes)
{
	struct bufs *b = bufstash_self();

	*bytes = b ? b->bytes : 0;
	return b ? b->n : 0;
}
