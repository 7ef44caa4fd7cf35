/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bufstash.c - large page-aligned buffers kept per thread: see bufstash.h.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "atomics.h"
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
/* Buffers mapped now (handed out or kept), for bufstash_mapped; atomic. */
static _Atomic uint64_t bufs_mapped_n, bufs_mapped_bytes;

/* A page-aligned buffer of N bytes (a multiple of a page): mapped when
 * N >= BUFSTASH_MAP_MIN, its pages present at once (one call instead of
 * a fault per page: see bufstash.h), else from malloc. */
static void *
bufs_alloc(size_t n)
{
	void *p;

	if (n >= BUFSTASH_MAP_MIN) {
		p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		add_relaxed(&bufs_mapped_n, 1);
		add_relaxed(&bufs_mapped_bytes, n);
		return p;
	}
	return posix_memalign(&p, 4096, n) == 0 ? p : NULL;
}

/* P of CAP bytes, as bufs_alloc or malloc gave it, back to where it came
 * from. */
static void
bufs_release(void *p, size_t cap)
{
	if (cap >= BUFSTASH_MAP_MIN) {
		munmap(p, cap);
		sub_relaxed(&bufs_mapped_n, 1);
		sub_relaxed(&bufs_mapped_bytes, cap);
	} else {
		free(p);
	}
}
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
/* What every thread keeps, in all (bufstash_kept_all); atomic. */
static _Atomic uint64_t bufs_all_n, bufs_all_bytes;

static void
bufs_free(void *p)
{
	struct bufs *b = p;

	for (unsigned i = 0; i < b->n; i++)
		bufs_release(b->buf[i].p, b->buf[i].cap);
	sub_relaxed(&bufs_all_n, b->n);
	sub_relaxed(&bufs_all_bytes, b->bytes);
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

/* CAP bytes more in what all threads keep, unless that goes past
 * BUFSTASH_ALL_BYTES. */
static bool
bufs_all_reserve(size_t cap)
{
	uint64_t all = load_relaxed(&bufs_all_bytes);

	do {
		if (all + cap > BUFSTASH_ALL_BYTES)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&bufs_all_bytes, &all,
	    all + cap, memory_order_relaxed, memory_order_relaxed));
	return true;
}

static void
bufs_take(struct bufs *b, unsigned i)
{
	sub_relaxed(&bufs_all_n, 1);
	sub_relaxed(&bufs_all_bytes, b->buf[i].cap);
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
	if ((p = bufs_alloc(n)) == NULL)
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
	if (cap < 4096) {
		free(p);
		return;
	}
	if (cap > BUFSTASH_KEEP_BYTES || (b = bufstash_self()) == NULL) {
		bufs_release(p, cap);
		return;
	}
	/*
	 * Room made by the smallest this thread keeps, while they are
	 * smaller than P: in its own stash, and in what all threads keep
	 * together (taken before P is kept, so that no two threads can both
	 * go past BUFSTASH_ALL_BYTES).
	 */
	for (;;) {
		if (b->n < BUFSTASH_KEEP &&
		    b->bytes + cap <= BUFSTASH_KEEP_BYTES &&
		    bufs_all_reserve(cap))
			break;
		unsigned small = 0;
		for (unsigned i = 1; i < b->n; i++)
			if (b->buf[i].cap < b->buf[small].cap)
				small = i;
		if (b->n == 0 || b->buf[small].cap >= cap) {
			bufs_release(p, cap);
			return;
		}
		bufs_release(b->buf[small].p, b->buf[small].cap);
		bufs_take(b, small);
	}
	b->buf[b->n].p = p;
	b->buf[b->n++].cap = cap;
	b->bytes += cap;
	add_relaxed(&bufs_all_n, 1);
}

unsigned
bufstash_kept(size_t *bytes)
{
	struct bufs *b = bufstash_self();

	*bytes = b ? b->bytes : 0;
	return b ? b->n : 0;
}

uint64_t
bufstash_kept_all(uint64_t *bytes)
{
	*bytes = load_relaxed(&bufs_all_bytes);
	return load_relaxed(&bufs_all_n);
}

uint64_t
bufstash_mapped(uint64_t *bytes)
{
	*bytes = load_relaxed(&bufs_mapped_bytes);
	return load_relaxed(&bufs_mapped_n);
}
