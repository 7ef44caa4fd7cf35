/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cache-internal.h - the page cache's own structs and helpers, shared by
 * its files alone: cache.c (pages, the index, eviction, fills, the dirty
 * state and the runs taken for writeback) and wbuf.c (write buffers of
 * private pages).  Other components see cache.h only; no file outside
 * daemon/cache/ includes this one (tests/tree/check-layers.py).
 *
 * The locks and their order are cache.h's:
 *
 *   file->run_lock  ->  shard->lock  ->  cache->qlock
 *
 * and a cache->qlock holder (the eviction scan) takes shard locks only with
 * trylock.
 *
 * The page states, asserted where they matter (debug and sanitizer builds):
 * a listed page (on its shard's dirty list) is exactly one that is dirty
 * and not under writeback; only a filled page is dirtied; a placeholder
 * (live, not filled) is never dirty nor under writeback; a page under
 * writeback stays in the index (pinned) until its run ends; a page dropped
 * from the index is clean; a write buffer's private page is in no index
 * and on no list; no counter goes below zero; every fill begun is ended
 * before its file is freed, and so is every run.
 */
#ifndef WBD_CACHE_INTERNAL_H
#define WBD_CACHE_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"
#include "lock.h"

struct cache_run;

#define CACHE_SHARDS 64

/* Page flags, under the page's shard lock. */
#define PF_LIVE (1u << 0)   /* in its file's index */
#define PF_FILLED (1u << 1) /* data valid */
#define PF_DIRTY (1u << 2)  /* newer than the backend */
#define PF_WB (1u << 3)     /* a snapshot is being written */
#define PF_ZERO (1u << 4)   /* dirty with zeroes by a discard, not written */
#define PF_AHEAD (1u << 5)  /* read ahead (or CACHE), not read since */

enum {
	Q_NONE,
	Q_SMALL,
	Q_MAIN
};

struct cpage {
	struct cache_file *file; /* NULL: free or dead */
	uint64_t index;
	struct cpage *hnext;         /* hash chain */
	struct cpage *dprev, *dnext; /* shard dirty list, by seq */
	/* First-dirty sequence; of a placeholder, its number
	 * (cache_file.placeholders). */
	uint64_t seq;
	uint64_t wb_seq; /* seq when its writeback began */
	/* Its last write's stamp (shard.wstamp when its data last changed:
	 * dirty_page_locked, a discard; 0 when published): unique in its
	 * shard, where the page always lives, so that
	 * cache_clean_if_unchanged cleans it only while its data is still
	 * what a reader saw (cache_peek_seq), whatever the sequences the
	 * writers carried (a TRIM's two discards carry the same one). */
	uint64_t lseq;
	uint64_t dirtied_ns;
	uint16_t flags;
	uint8_t freq; /* S3-FIFO access count, 0..3 */
	uint8_t queue;
	/* Its page of memory: its own at first, exchanged with a write
	 * buffer's private page when that replaces its data
	 * (page_swap_locked, wbuf.c). */
	uint32_t frame;
};

struct shard {
	pthread_mutex_t lock;
	struct cpage **buckets;
	uint64_t bucket_mask;
	struct cpage *dhead, *dtail;
	/* DHEAD's seq and dirtied_ns (UINT64_MAX: none), written with it
	 * under the lock and read without it: take_oldest picks its shard
	 * from these, then looks under that shard's lock alone. */
	_Atomic uint64_t head_seq, head_ns;
	/* The last stamp given to a page's write (cpage.lseq). */
	uint64_t wstamp;
	/* Reads that found all their pages, or not (counted in the shard
	 * of the page that decided it): written under the lock, read
	 * atomically by cache_get_stats, so no I/O thread bumps a counter
	 * shared with the others on a hit. */
	_Atomic uint64_t hits, misses;
};

struct cache_file {
	struct cache *c;
	uint64_t size_bytes;
	uint64_t npages;
	uint32_t id;
	pthread_mutex_t run_lock; /* in-flight runs */
	struct cache_run *runs;
	_Atomic uint64_t cached_pages;
	_Atomic uint64_t dirty_pages;
	_Atomic uint64_t discard_gen;  /* bumped by cache_discard */
	_Atomic uint64_t placeholders; /* bumped by each put in */
	_Atomic uint64_t writeback_pages;
	/* Pages dirty or under writeback, not (all) on the backing device:
	 * raised when a page not under writeback is dirtied, lowered (a
	 * release) when a run's write has ended and left it clean. */
	_Atomic uint64_t unwritten_pages;
	_Atomic uint64_t fills;           /* fills begun, not ended */
	struct cache_file *fnext, *fprev; /* the cache's files, under qlock */
	struct shard shards[CACHE_SHARDS];
};

struct ring {
	uint32_t *v;
	uint32_t cap, head, n;
};

struct cache {
	uint32_t page_size, page_shift;
	uint32_t chunk_shift; /* log2 of pages per chunk */
	uint64_t npages;
	uint8_t *mem;
	size_t mem_bytes;
	struct cpage *pages;

	pthread_mutex_t qlock; /* queues, free list, ghost */
	uint32_t *free;
	uint64_t nfree;
	struct ring small, main;
	uint32_t small_target;
	uint64_t *ghost;
	uint64_t ghost_mask;
	_Atomic uint32_t next_file_id;
	struct cache_file *files; /* for the statistics */
	bool zero_copy;
	_Atomic uint64_t private_pages; /* held by write buffers; written
	                                   under qlock, read atomically */
	_Atomic uint64_t wbuf_bytes;   /* the same: payloads taken into pages */
	_Atomic uint64_t wbuf_refused; /* ... and write buffers refused */

	/* Hits and misses only of files freed (the live ones' are in their
	 * shards), written under qlock */
	_Atomic uint64_t used, dirty, writeback, hits, misses, evictions;
	_Atomic uint64_t ahead_pages, ahead_hits;
};

/* --- helpers ----------------------------------------------------------- */

static inline uint64_t
mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64_C(0xc4ceb9fe1a85ec53);
	x ^= x >> 33;
	return x;
}

static inline uint8_t *
page_data(struct cache *c, const struct cpage *p)
{
	return c->mem + ((size_t)p->frame << c->page_shift);
}

static inline struct shard *
shard_of(struct cache_file *f, uint64_t index)
{
	return &f->shards[(index >> f->c->chunk_shift) % CACHE_SHARDS];
}

static inline struct cpage **
bucket_of(struct shard *sh, uint64_t index)
{
	return &sh->buckets[mix64(index) & sh->bucket_mask];
}

static inline struct cpage *
lookup_locked(struct shard *sh, uint64_t index)
{
	lock_assert_held(&sh->lock);
	for (struct cpage *p = *bucket_of(sh, index); p; p = p->hnext)
		if (p->index == index)
			return p;
	return NULL;
}

/* A counter never goes below zero. */
static inline void
counter_sub(_Atomic uint64_t *p, uint64_t v)
{
	uint64_t was = atomic_fetch_sub_explicit(p, v, memory_order_relaxed);

	assert(was >= v);
	(void)was;
}

/*
 * Is page INDEX written only in part by [off, off+len)?  The part of the
 * last page beyond the end of the export does not count.
 */
static inline bool
page_partial(const struct cache_file *f, uint64_t index, uint64_t off,
    uint64_t len)
{
	uint64_t start = index << f->c->page_shift;
	uint64_t end = start + f->c->page_size;

	if (end > f->size_bytes)
		end = f->size_bytes;
	return off > start || off + len < end;
}

/* --- cache.c's, for wbuf.c ---------------------------------------------- */

/* Pages newly dirtied, counted once for a batch. */
struct dirt {
	uint64_t dirtied;   /* newly dirty */
	uint64_t unwritten; /* ... of which not under writeback */
};

/* Dirty P (live, filled) with SEQ unless it is dirty already; counted in
 * D.  Shard lock held. */
void dirty_page_locked(struct shard *sh, struct cpage *p, uint64_t seq,
    uint64_t now, struct dirt *d);
/* Add D to F's and the cache's counts. */
void dirt_count(struct cache_file *f, const struct dirt *d);
/* Resident and filled, or fully covered: writable without a fill. */
bool
page_writable(struct cache_file *f, uint64_t index, uint64_t off, uint64_t len);
/* Pick a clean page to reuse.  qlock held; shard locks by trylock only. */
struct cpage *evict_locked(struct cache *c);
/* A page new in F's index into an eviction queue.  qlock held. */
void
page_enqueue_qlocked(struct cache *c, struct cache_file *f, struct cpage *p);

#endif
