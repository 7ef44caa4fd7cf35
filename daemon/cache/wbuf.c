/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbuf.c - write buffers: one copy per write.  A WRITE's payload is
 * received straight into private cache pages (taken from the free list or
 * evicted, in no index), then committed into the file's index with one
 * lock pass per shard: published where no page is resident, exchanged
 * with a resident page's memory, or copied into a page that is under
 * writeback or written only in part.  See cache.h for the interface.
 *
 * Any thread (the I/O thread receiving the payload, a worker committing
 * it).  Locks as in cache-internal.h: the private pages are taken and
 * given back under cache->qlock; a commit holds a shard's lock, then
 * qlock, across the shard's pages.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "cache-internal.h"
#include "cache.h"
#include "clock.h"
#include "lock.h"

#define WBUF_DONE UINT32_MAX

struct cache_wbuf {
	struct cache_file *f;
	uint64_t off;
	uint32_t len;
	uint32_t npages;
	uint64_t first; /* page index of off */
	/* Private page per page, or WBUF_DONE once in the index. */
	uint32_t *frame;
	struct iovec iov[]; /* the payload's pieces */
};

/* How many private pages write buffers may hold: a quarter of the cache,
 * so that writes being received never push out the whole working set. */
static uint64_t
private_cap(const struct cache *c)
{
	return c->npages / 4 > 0 ? c->npages / 4 : 1;
}

/* Give the private frames still in W back to the free list. */
static void
wbuf_release(struct cache *c, struct cache_wbuf *w)
{
	uint32_t n = 0;

	pthread_mutex_lock(&c->qlock);
	for (uint32_t i = 0; i < w->npages; i++) {
		if (w->frame[i] == WBUF_DONE)
			continue;
		c->free[c->nfree++] = w->frame[i];
		w->frame[i] = WBUF_DONE;
		n++;
	}
	if (n)
		counter_sub(&c->private_pages, n);
	pthread_mutex_unlock(&c->qlock);
}

struct cache_wbuf *
cache_wbuf_new(struct cache_file *f, uint64_t off, uint32_t len)
{
	struct cache *c = f->c;
	uint64_t first = off >> c->page_shift;
	uint32_t npages;

	if (len == 0 || off + len > f->size_bytes)
		return NULL;
	npages = (uint32_t)(((off + len - 1) >> c->page_shift) - first + 1);
	struct cache_wbuf *w = malloc(
	    sizeof *w + npages * sizeof w->iov[0] + npages * sizeof *w->frame);
	if (!w)
		return NULL;
	w->f = f;
	w->off = off;
	w->len = len;
	w->npages = npages;
	w->first = first;
	w->frame = (uint32_t *)(w->iov + npages);

	/* One pass: the free list first, then clean pages evicted. */
	uint32_t got = 0;
	pthread_mutex_lock(&c->qlock);
	if (load_relaxed(&c->private_pages) + npages <= private_cap(c)) {
		for (; got < npages; got++) {
			struct cpage *p = c->nfree ?
			    &c->pages[c->free[--c->nfree]] :
			    evict_locked(c);
			if (!p)
				break;
			w->frame[got] = (uint32_t)(p - c->pages);
		}
		if (got < npages) {
			while (got > 0)
				c->free[c->nfree++] = w->frame[--got];
		} else {
			add_relaxed(&c->private_pages, npages);
			store_relaxed(&c->wbuf_bytes,
			    load_relaxed(&c->wbuf_bytes) + len);
		}
	}
	if (got < npages)
		store_relaxed(&c->wbuf_refused,
		    load_relaxed(&c->wbuf_refused) + 1);
	pthread_mutex_unlock(&c->qlock);
	if (got < npages) {
		free(w);
		return NULL;
	}

	for (uint32_t i = 0; i < npages; i++) {
		struct cpage *p = &c->pages[w->frame[i]];
		uint32_t at = i == 0 ? (uint32_t)(off & (c->page_size - 1)) : 0;
		uint32_t n = c->page_size - at < len ? c->page_size - at : len;

		/* Off the free list or evicted: in no index, in no queue. */
		assert(p->file == NULL && p->queue == Q_NONE);
		p->flags = 0;
		p->freq = 0;
		p->hnext = p->dprev = p->dnext = NULL;
		w->iov[i].iov_base = page_data(c, p) + at;
		w->iov[i].iov_len = n;
		len -= n;
	}
	return w;
}

const struct iovec *
cache_wbuf_iov(const struct cache_wbuf *w, unsigned *niov)
{
	*niov = w->npages;
	return w->iov;
}

void
cache_wbuf_free(struct cache_wbuf *w)
{
	if (!w)
		return;
	wbuf_release(w->f->c, w);
	free(w);
}

uint64_t
cache_private_pages(struct cache *c)
{
	return load_relaxed(&c->private_pages);
}

/* Private page Q's data replaces resident page P's (filled, not under
 * writeback): they exchange their memory, so P keeps its place in the
 * index, on the dirty list and in its eviction queue, and Q, holding P's
 * old data, is given back.  Shard lock held. */
static void
page_swap_locked(struct shard *sh, struct cpage *p, struct cpage *q)
{
	uint32_t frame = p->frame;

	lock_assert_held(&sh->lock);
	assert((p->flags & (PF_LIVE | PF_FILLED | PF_WB)) ==
	    (PF_LIVE | PF_FILLED));
	assert(q->file == NULL && q->flags == 0);
	p->frame = q->frame;
	q->frame = frame;
	p->flags &= ~PF_ZERO;
}

/*
 * Commit pages [I, END) of W, all in shard SH; stops at a page that needs
 * a fill (returns false with its index in *FILL_INDEX).
 */
static bool
wbuf_commit_shard(struct cache_wbuf *w, struct shard *sh, uint32_t i,
    uint32_t end, uint64_t seq, uint64_t now, uint64_t *fill_index)
{
	struct cache_file *f = w->f;
	struct cache *c = f->c;
	struct dirt d = { 0, 0 };
	uint64_t published = 0;
	uint32_t freed = 0;
	bool ok = true;

	pthread_mutex_lock(&sh->lock);
	pthread_mutex_lock(&c->qlock);
	for (; i < end; i++) {
		uint64_t index = w->first + i;
		if (w->frame[i] == WBUF_DONE)
			continue;
		struct cpage *q = &c->pages[w->frame[i]];
		struct cpage *p = lookup_locked(sh, index);
		bool whole = !page_partial(f, index, w->off, w->len);

		/* Private: in no index and in no eviction queue. */
		assert(q->file == NULL && q->queue == Q_NONE && q->flags == 0);
		if (!p && whole) {
			/* Not resident: the private page becomes it. */
			struct cpage **b = bucket_of(sh, index);
			q->file = f;
			q->index = index;
			q->flags = PF_LIVE | PF_FILLED;
			q->lseq = 0; /* set as it is dirtied below */
			q->hnext = *b;
			*b = q;
			page_enqueue_qlocked(c, f, q);
			published++;
			p = q;
		} else if (!p || !(p->flags & PF_FILLED)) {
			/* Partial and not resident, or being filled. */
			*fill_index = index;
			ok = false;
			break;
		} else if (whole && !(p->flags & PF_WB)) {
			page_swap_locked(sh, p, q);
			c->free[c->nfree++] = w->frame[i];
		} else {
			/* Partial, or under writeback (a run may point at
			 * it): copied into, the private page given back. */
			memcpy((uint8_t *)page_data(c, p) +
				(i == 0 ? (w->off & (c->page_size - 1)) : 0),
			    w->iov[i].iov_base, w->iov[i].iov_len);
			p->flags &= ~PF_ZERO;
			c->free[c->nfree++] = w->frame[i];
		}
		freed++; /* no longer private */
		dirty_page_locked(sh, p, seq, now, &d);
		w->frame[i] = WBUF_DONE;
	}
	if (freed)
		counter_sub(&c->private_pages, freed);
	pthread_mutex_unlock(&c->qlock);
	if (published) {
		add_relaxed(&f->cached_pages, published);
		add_relaxed(&c->used, published);
	}
	dirt_count(f, &d);
	pthread_mutex_unlock(&sh->lock);
	return ok;
}

enum cache_write_result
cache_wbuf_commit(struct cache_wbuf *w, uint64_t seq, uint64_t *fill_index)
{
	struct cache_file *f = w->f;
	struct cache *c = f->c;
	uint32_t last = w->npages - 1;
	uint64_t now = now_ns();

	/* As cache_write: an edge that needs a fill is read in before
	 * anything is written. */
	if (w->frame[0] != WBUF_DONE &&
	    !page_writable(f, w->first, w->off, w->len)) {
		*fill_index = w->first;
		return CACHE_WRITE_NEED_FILL;
	}
	if (last != 0 && w->frame[last] != WBUF_DONE &&
	    !page_writable(f, w->first + last, w->off, w->len)) {
		*fill_index = w->first + last;
		return CACHE_WRITE_NEED_FILL;
	}
	/* A chunk's pages share a shard: one lock pass per chunk. */
	for (uint32_t i = 0; i <= last;) {
		uint64_t index = w->first + i;
		uint64_t chunk_end = ((index >> c->chunk_shift) + 1)
		    << c->chunk_shift;
		uint32_t end = chunk_end - w->first < w->npages ?
		    (uint32_t)(chunk_end - w->first) :
		    w->npages;

		if (!wbuf_commit_shard(w, shard_of(f, index), i, end, seq, now,
			fill_index))
			return CACHE_WRITE_NEED_FILL;
		i = end;
	}
	return CACHE_WRITE_OK;
}
