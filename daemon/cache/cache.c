/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cache.c - page frames, the sharded page index, S3-FIFO eviction, fills,
 * the dirty state and the runs taken for writeback.  The write buffers
 * are wbuf.c's; the structs and helpers both files use, with the page
 * states the cache relies on, are cache-internal.h's.  See cache.h for
 * the locking rules; in short:
 *
 *   file->run_lock  ->  shard->lock  ->  cache->qlock
 *
 * and a cache->qlock holder (the eviction scan) takes shard locks only with
 * trylock.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "atomics.h"
#include "cache-internal.h"
#include "cache.h"
#include "clock.h"
#include "lock.h"

/* --- helpers ----------------------------------------------------------- */

static unsigned
log2u(uint64_t v)
{
	unsigned n = 0;
	while (v > 1) {
		v >>= 1;
		n++;
	}
	return n;
}

static uint64_t
pow2_at_least(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static void
unhash_locked(struct shard *sh, struct cpage *p)
{
	struct cpage **pp = bucket_of(sh, p->index);

	lock_assert_held(&sh->lock);
	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	p->hnext = NULL;
}

static void
ring_push(struct ring *r, uint32_t v)
{
	r->v[(r->head + r->n) % r->cap] = v;
	r->n++;
}

static uint32_t
ring_pop(struct ring *r)
{
	uint32_t v = r->v[r->head];
	r->head = (r->head + 1) % r->cap;
	r->n--;
	return v;
}

/* On its shard's dirty list? */
static inline bool
page_listed(const struct shard *sh, const struct cpage *p)
{
	return p->dprev != NULL || sh->dhead == p;
}

/* --- dirty lists (shard lock held) ------------------------------------- */

/* SH's head changed: said in head_seq and head_ns. */
static void
dirty_head_note(struct shard *sh)
{
	store_relaxed(&sh->head_seq, sh->dhead ? sh->dhead->seq : UINT64_MAX);
	store_relaxed(&sh->head_ns,
	    sh->dhead ? sh->dhead->dirtied_ns : UINT64_MAX);
}

static void
dirty_unlink_locked(struct shard *sh, struct cpage *p)
{
	lock_assert_held(&sh->lock);
	assert(page_listed(sh, p));
	assert(p->dnext ? p->dnext->dprev == p : sh->dtail == p);
	if (p->dprev)
		p->dprev->dnext = p->dnext;
	else
		sh->dhead = p->dnext;
	if (p->dnext)
		p->dnext->dprev = p->dprev;
	else
		sh->dtail = p->dprev;
	if (!p->dprev)
		dirty_head_note(sh);
	p->dprev = p->dnext = NULL;
}

/* Insert in seq order; new dirt has the largest seq, so scan from the tail. */
static void
dirty_insert_locked(struct shard *sh, struct cpage *p)
{
	struct cpage *after = sh->dtail;

	lock_assert_held(&sh->lock);
	assert((p->flags & (PF_LIVE | PF_FILLED | PF_DIRTY | PF_WB)) ==
	    (PF_LIVE | PF_FILLED | PF_DIRTY));
	assert(!page_listed(sh, p) && p->dnext == NULL);
	/* Dirtied again after a lost remote (cache_redirty): the oldest. */
	if (sh->dhead && p->seq < sh->dhead->seq)
		after = NULL;
	while (after && after->seq > p->seq)
		after = after->dprev;
	p->dprev = after;
	p->dnext = after ? after->dnext : sh->dhead;
	if (p->dnext)
		p->dnext->dprev = p;
	else
		sh->dtail = p;
	if (after)
		after->dnext = p;
	else {
		sh->dhead = p;
		dirty_head_note(sh);
	}
}

void
dirty_page_locked(struct shard *sh, struct cpage *p, uint64_t seq, uint64_t now,
    struct dirt *d)
{
	lock_assert_held(&sh->lock);
	assert((p->flags & (PF_LIVE | PF_FILLED)) == (PF_LIVE | PF_FILLED));
	p->lseq = ++sh->wstamp; /* its data written now */
	if (p->flags & PF_DIRTY)
		return; /* keeps its older sequence */
	p->flags |= PF_DIRTY;
	p->seq = seq;
	p->dirtied_ns = now;
	/* Under writeback: listed (so takeable) once its run ends; until
	 * then the run's min_seq stands for it in cache_min_dirty_seq. */
	if (!(p->flags & PF_WB)) {
		dirty_insert_locked(sh, p);
		d->unwritten++;
	}
	d->dirtied++;
}

void
dirt_count(struct cache_file *f, const struct dirt *d)
{
	if (d->unwritten)
		add_relaxed(&f->unwritten_pages, d->unwritten);
	if (d->dirtied) {
		add_relaxed(&f->dirty_pages, d->dirtied);
		add_relaxed(&f->c->dirty, d->dirtied);
	}
}

/* Count D and let SH go. */
static void
shard_unlock_counting(struct cache_file *f, struct shard *sh, struct dirt *d)
{
	dirt_count(f, d);
	*d = (struct dirt){ 0, 0 };
	pthread_mutex_unlock(&sh->lock);
}

static void
mark_dirty_locked(struct cache_file *f, struct shard *sh, struct cpage *p,
    uint64_t seq)
{
	struct dirt d = { 0, 0 };

	lock_assert_held(&sh->lock);
	if (p->flags & PF_DIRTY)
		return;
	dirty_page_locked(sh, p, seq, now_ns(), &d);
	dirt_count(f, &d);
}

/*
 * Page P of F (SH held) holds data that may not have reached the backend:
 * dirty, with sequence at most SEQ.  Already dirty with a newer sequence
 * (written again since), it takes SEQ: a FLUSH between the two must still
 * write it.  Under writeback, the run's min_seq stands for it until the
 * run ends (cache_min_dirty_seq): lowered too.  F's run_lock is held.
 * True if it was clean or had a newer sequence.
 */
static bool
redirty_page_locked(struct cache_file *f, struct shard *sh, struct cpage *p,
    uint64_t seq, uint64_t now, struct dirt *d)
{
	lock_assert_held(&f->run_lock);
	if (!(p->flags & PF_DIRTY)) {
		uint64_t lseq = p->lseq; /* its data did not change */
		dirty_page_locked(sh, p, seq, now, d);
		p->lseq = lseq;
	} else if (p->seq > seq) {
		bool listed = !(p->flags & PF_WB);
		if (listed)
			dirty_unlink_locked(sh, p);
		p->seq = seq;
		if (listed)
			dirty_insert_locked(sh, p);
	} else {
		return false;
	}
	if (p->flags & PF_WB)
		for (struct cache_run *r = f->runs; r; r = r->next)
			if (p->index >= r->first_index &&
			    p->index - r->first_index < r->npages &&
			    r->min_seq > seq)
				r->min_seq = seq;
	return true;
}

uint64_t
cache_redirty(struct cache_file *f, uint64_t off, uint64_t len, uint64_t seq,
    uint64_t *dirtied)
{
	struct cache *c = f->c;
	uint64_t missing = 0, again = 0, now = now_ns();
	struct dirt d = { 0, 0 };

	if (dirtied)
		*dirtied = 0;
	if (len == 0 || off >= f->size_bytes)
		return 0;
	if (len > f->size_bytes - off)
		len = f->size_bytes - off;
	uint64_t first = off >> c->page_shift;
	uint64_t last = (off + len - 1) >> c->page_shift;
	uint64_t span = last - first + 1, buckets = 0;

	for (int i = 0; i < CACHE_SHARDS; i++)
		buckets +=
		    f->shards[i].buckets ? f->shards[i].bucket_mask + 1 : 0;
	/* The runs in flight (under writeback) stay put meanwhile. */
	pthread_mutex_lock(&f->run_lock);
	if (span > 2 * load_relaxed(&f->cached_pages) + 64 && span > buckets) {
		/* Wider than F's hash tables (a merged range over a large
		 * export): walk the pages F has rather than the range. */
		uint64_t found = 0;
		for (int i = 0; i < CACHE_SHARDS; i++) {
			struct shard *sh = &f->shards[i];
			pthread_mutex_lock(&sh->lock);
			for (uint64_t b = 0;
			     sh->buckets && b <= sh->bucket_mask; b++)
				for (struct cpage *p = sh->buckets[b]; p;
				     p = p->hnext) {
					if (p->index < first ||
					    p->index > last ||
					    !(p->flags & PF_FILLED))
						continue;
					found++;
					again += redirty_page_locked(f, sh, p,
					    seq, now, &d);
				}
			shard_unlock_counting(f, sh, &d);
		}
		missing = span - found;
	} else {
		for (uint64_t index = first; index <= last; index++) {
			struct shard *sh = shard_of(f, index);
			pthread_mutex_lock(&sh->lock);
			struct cpage *p = lookup_locked(sh, index);
			if (!p || !(p->flags & PF_FILLED))
				missing++;
			else
				again +=
				    redirty_page_locked(f, sh, p, seq, now, &d);
			shard_unlock_counting(f, sh, &d);
		}
	}
	pthread_mutex_unlock(&f->run_lock);
	if (dirtied)
		*dirtied = again;
	return missing;
}

/* --- allocation and eviction ------------------------------------------ */

/* Pick a clean page to reuse.  qlock held; shard locks by trylock only. */
struct cpage *
evict_locked(struct cache *c)
{
	uint64_t budget = 2 * c->npages + 16;

	lock_assert_held(&c->qlock);
	if (load_relaxed(&c->dirty) + load_relaxed(&c->writeback) +
		load_relaxed(&c->private_pages) >=
	    c->npages)
		return NULL;
	while (budget--) {
		struct ring *q;
		if (c->small.n == 0 && c->main.n == 0)
			return NULL;
		q = (c->small.n > c->small_target || c->main.n == 0) ?
		    &c->small : &c->main;
		uint32_t i = ring_pop(q);
		struct cpage *p = &c->pages[i];

		if (!p->file) {                 /* discarded earlier */
			assert(p->flags == 0);
			p->queue = Q_NONE;
			return p;
		}
		struct shard *sh = shard_of(p->file, p->index);
		if (pthread_mutex_trylock(&sh->lock) != 0) {
			ring_push(q, i);
			continue;
		}
		bool busy = (p->flags & (PF_DIRTY | PF_WB)) ||
		    !(p->flags & PF_FILLED);
		if (q == &c->small && (busy || p->freq > 0)) {
			/* Used again (or pinned): promote to main. */
			p->freq = 0;
			p->queue = Q_MAIN;
			ring_push(&c->main, i);
			pthread_mutex_unlock(&sh->lock);
			continue;
		}
		if (q == &c->main && (busy || p->freq > 0)) {
			if (!busy)
				p->freq--;
			ring_push(&c->main, i);
			pthread_mutex_unlock(&sh->lock);
			continue;
		}
		/* Evict: in the index, clean, so off the dirty list. */
		assert((p->flags & PF_LIVE) && !page_listed(sh, p));
		/* Remember it in the ghost if it leaves from small. */
		if (q == &c->small) {
			uint64_t fp = mix64(((uint64_t)p->file->id << 48) ^ p->index) | 1;
			c->ghost[fp & c->ghost_mask] = fp;
		}
		unhash_locked(sh, p);
		counter_sub(&p->file->cached_pages, 1);
		p->file = NULL;
		p->flags = 0;
		p->queue = Q_NONE;
		pthread_mutex_unlock(&sh->lock);
		add_relaxed(&c->evictions, 1);
		counter_sub(&c->used, 1);
		return p;
	}
	return NULL;
}

/* A free page, not yet in any index or queue; NULL if none can be had. */
static struct cpage *
page_alloc(struct cache *c)
{
	struct cpage *p = NULL;

	pthread_mutex_lock(&c->qlock);
	if (c->nfree)
		p = &c->pages[c->free[--c->nfree]];
	else
		p = evict_locked(c);
	pthread_mutex_unlock(&c->qlock);
	if (p) {
		p->flags = 0;
		p->freq = 0;
		p->hnext = p->dprev = p->dnext = NULL;
	}
	return p;
}

static void
page_release_unused(struct cache *c, struct cpage *p)
{
	pthread_mutex_lock(&c->qlock);
	c->free[c->nfree++] = (uint32_t)(p - c->pages);
	pthread_mutex_unlock(&c->qlock);
}

/* A page new in F's index into an eviction queue: main if its ghost is
 * remembered, else small.  qlock held. */
void
page_enqueue_qlocked(struct cache *c, struct cache_file *f, struct cpage *p)
{
	uint64_t fp = mix64(((uint64_t)f->id << 48) ^ p->index) | 1;

	lock_assert_held(&c->qlock);
	if (c->ghost[fp & c->ghost_mask] == fp) {
		c->ghost[fp & c->ghost_mask] = 0;
		p->queue = Q_MAIN;
		ring_push(&c->main, (uint32_t)(p - c->pages));
	} else {
		p->queue = Q_SMALL;
		ring_push(&c->small, (uint32_t)(p - c->pages));
	}
}

/* Put P into F's index at INDEX and into an eviction queue.  Shard lock held. */
static void
page_publish_locked(struct cache_file *f, struct shard *sh, struct cpage *p,
    uint64_t index, uint16_t flags)
{
	struct cache *c = f->c;
	struct cpage **b = bucket_of(sh, index);

	lock_assert_held(&sh->lock);
	/* Fresh from page_alloc(): in no index and in no eviction queue. */
	assert(p->file == NULL && p->queue == Q_NONE && p->flags == 0);
	p->file = f;
	p->index = index;
	p->flags = PF_LIVE | flags;
	p->lseq = 0; /* no write yet (stamps start at 1) */
	p->hnext = *b;
	*b = p;
	add_relaxed(&f->cached_pages, 1);
	add_relaxed(&c->used, 1);

	pthread_mutex_lock(&c->qlock);
	page_enqueue_qlocked(c, f, p);
	pthread_mutex_unlock(&c->qlock);
}

/*
 * Take P out of F's index; its frame stays in its eviction queue as a dead
 * entry that the next eviction scan reuses.  Shard lock held.
 */
static void
page_drop_locked(struct cache_file *f, struct shard *sh, struct cpage *p)
{
	struct cache *c = f->c;

	lock_assert_held(&sh->lock);
	assert(!(p->flags & (PF_DIRTY | PF_WB)) && !page_listed(sh, p));
	unhash_locked(sh, p);
	counter_sub(&f->cached_pages, 1);
	counter_sub(&c->used, 1);
	pthread_mutex_lock(&c->qlock);
	p->file = NULL;
	p->flags = 0;
	pthread_mutex_unlock(&c->qlock);
}

/* --- life cycle -------------------------------------------------------- */

struct cache *
cache_new(const struct cache_params *params)
{
	struct cache *c = calloc(1, sizeof *c);
	uint32_t ps = params->page_size;
	uint32_t chunk = params->chunk_bytes > ps ? params->chunk_bytes : ps;

	if (!c)
		return NULL;
	if (ps < 512 || (ps & (ps - 1)) || (chunk & (chunk - 1)) ||
	    params->size_bytes < ps) {
		free(c);
		errno = EINVAL;
		return NULL;
	}
	c->page_size = ps;
	c->page_shift = log2u(ps);
	c->chunk_shift = log2u(chunk) - c->page_shift;
	c->npages = params->size_bytes / ps;
	if (c->npages > UINT32_MAX)
		c->npages = UINT32_MAX;
	c->mem_bytes = (size_t)c->npages << c->page_shift;
	c->mem = mmap(NULL, c->mem_bytes, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (c->mem == MAP_FAILED) {
		free(c);
		return NULL;
	}
	/* Touched the first time a page is used: in huge pages where the
	 * kernel has them, so a cold cache filling up takes one fault per
	 * 2 MiB rather than per 4 KiB (advice: ignored if unsupported). */
	(void)madvise(c->mem, c->mem_bytes, MADV_HUGEPAGE);
	c->pages = calloc(c->npages, sizeof *c->pages);
	c->free = malloc(c->npages * sizeof *c->free);
	c->small.v = malloc(c->npages * sizeof *c->small.v);
	c->main.v = malloc(c->npages * sizeof *c->main.v);
	uint64_t nghost = pow2_at_least(c->npages);
	c->ghost = calloc(nghost, sizeof *c->ghost);
	if (!c->pages || !c->free || !c->small.v || !c->main.v || !c->ghost) {
		cache_free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->ghost_mask = nghost - 1;
	c->small.cap = c->main.cap = (uint32_t)c->npages;
	c->small_target = (uint32_t)(c->npages / 10);
	for (uint64_t i = 0; i < c->npages; i++) {
		c->free[i] = (uint32_t)(c->npages - 1 - i);
		c->pages[i].frame = (uint32_t)i;
	}
	c->nfree = c->npages;
	lock_init(&c->qlock);
	return c;
}

void *
cache_memory(const struct cache *c, size_t *bytes)
{
	*bytes = c->mem_bytes;
	return c->mem;
}

void
cache_free(struct cache *c)
{
	if (!c)
		return;
	if (c->mem && c->mem != MAP_FAILED)
		munmap(c->mem, c->mem_bytes);
	free(c->pages);
	free(c->free);
	free(c->small.v);
	free(c->main.v);
	free(c->ghost);
	pthread_mutex_destroy(&c->qlock);
	free(c);
}

void
cache_set_zero_copy(struct cache *c, bool on)
{
	c->zero_copy = on;
}

uint32_t
cache_page_size(const struct cache *c)
{
	return c->page_size;
}

void
cache_get_stats(struct cache *c, struct cache_stats *st)
{
	st->pages_total = c->npages;
	st->pages_used = load_relaxed(&c->used);
	st->dirty_pages = load_relaxed(&c->dirty);
	st->writeback_pages = load_relaxed(&c->writeback);
	pthread_mutex_lock(&c->qlock);
	st->hits = load_relaxed(&c->hits);
	st->misses = load_relaxed(&c->misses);
	for (struct cache_file *f = c->files; f; f = f->fnext) {
		for (int i = 0; i < CACHE_SHARDS; i++) {
			st->hits += load_relaxed(&f->shards[i].hits);
			st->misses += load_relaxed(&f->shards[i].misses);
		}
	}
	pthread_mutex_unlock(&c->qlock);
	st->evictions = load_relaxed(&c->evictions);
	st->ahead_pages = load_relaxed(&c->ahead_pages);
	st->ahead_hits = load_relaxed(&c->ahead_hits);
	st->zero_copy_bytes = load_relaxed(&c->wbuf_bytes);
	st->zero_copy_refused = load_relaxed(&c->wbuf_refused);
	pthread_mutex_lock(&c->qlock);
	st->small_pages = c->small.n;
	st->main_pages = c->main.n;
	pthread_mutex_unlock(&c->qlock);
}

uint64_t
cache_dirty_pages(struct cache *c)
{
	return load_relaxed(&c->dirty);
}

uint64_t
cache_unwritten_pages(struct cache *c)
{
	/* Dirty first: a run taken since that read is counted under
	 * writeback by then (take_run_locked's fence pairs with this). */
	uint64_t dirty = load_relaxed(&c->dirty);

	atomic_thread_fence(memory_order_acquire);
	return dirty + load_relaxed(&c->writeback);
}

struct cache_file *
cache_file_new(struct cache *c, uint64_t size_bytes)
{
	struct cache_file *f = calloc(1, sizeof *f);

	if (!f)
		return NULL;
	f->c = c;
	f->size_bytes = size_bytes;
	f->npages = (size_bytes + c->page_size - 1) >> c->page_shift;
	f->id = add_fetch_u32(&c->next_file_id, 1, memory_order_relaxed);
	uint64_t per_shard = (f->npages < c->npages ? f->npages : c->npages) /
	    CACHE_SHARDS;
	uint64_t nb = pow2_at_least(per_shard < 16 ? 16 : per_shard);
	lock_init(&f->run_lock);
	for (int i = 0; i < CACHE_SHARDS; i++) {
		struct shard *sh = &f->shards[i];
		lock_init(&sh->lock);
		store_relaxed(&sh->head_seq, UINT64_MAX);
		store_relaxed(&sh->head_ns, UINT64_MAX);
		sh->buckets = calloc(nb, sizeof *sh->buckets);
		sh->bucket_mask = nb - 1;
		if (!sh->buckets) {
			cache_file_free(f);
			return NULL;
		}
	}
	pthread_mutex_lock(&c->qlock);
	f->fnext = c->files;
	if (c->files)
		c->files->fprev = f;
	c->files = f;
	pthread_mutex_unlock(&c->qlock);
	return f;
}

/* Off the cache's list of files, its read counts kept in the totals. */
static void
file_unlink(struct cache *c, struct cache_file *f)
{
	pthread_mutex_lock(&c->qlock);
	if (f->fprev || c->files == f) {
		uint64_t hits = 0, misses = 0;
		for (int i = 0; i < CACHE_SHARDS; i++) {
			hits += load_relaxed(&f->shards[i].hits);
			misses += load_relaxed(&f->shards[i].misses);
		}
		store_relaxed(&c->hits, load_relaxed(&c->hits) + hits);
		store_relaxed(&c->misses, load_relaxed(&c->misses) + misses);
		if (f->fprev)
			f->fprev->fnext = f->fnext;
		else
			c->files = f->fnext;
		if (f->fnext)
			f->fnext->fprev = f->fprev;
	}
	pthread_mutex_unlock(&c->qlock);
}

/* Drop every page of F (which must have no run and no fill in flight). */
void
cache_file_free(struct cache_file *f)
{
	if (!f)
		return;
	struct cache *c = f->c;
	assert(f->runs == NULL && load_relaxed(&f->writeback_pages) == 0);
	assert(load_relaxed(&f->fills) == 0);
	file_unlink(c, f);
	for (int i = 0; i < CACHE_SHARDS; i++) {
		struct shard *sh = &f->shards[i];
		pthread_mutex_lock(&sh->lock);
		for (uint64_t b = 0; sh->buckets && b <= sh->bucket_mask; b++) {
			for (struct cpage *p = sh->buckets[b], *n; p; p = n) {
				n = p->hnext;
				if (p->flags & PF_DIRTY)
					counter_sub(&c->dirty, 1);
				/* Left in its queue as a dead entry. */
				pthread_mutex_lock(&c->qlock);
				p->file = NULL;
				p->flags = 0;
				pthread_mutex_unlock(&c->qlock);
				counter_sub(&c->used, 1);
			}
		}
		pthread_mutex_unlock(&sh->lock);
		pthread_mutex_destroy(&sh->lock);
		free(sh->buckets);
	}
	pthread_mutex_destroy(&f->run_lock);
	free(f);
}

void
cache_file_stats(struct cache_file *f, uint64_t *cached_pages,
    uint64_t *dirty_pages)
{
	*cached_pages = load_relaxed(&f->cached_pages);
	*dirty_pages = load_relaxed(&f->dirty_pages);
}

uint64_t
cache_file_writeback_pages(struct cache_file *f)
{
	return load_relaxed(&f->writeback_pages);
}

uint64_t
cache_file_unwritten_pages(struct cache_file *f)
{
	return load_acquire(&f->unwritten_pages);
}

uint64_t
cache_oldest_dirty_ns(struct cache_file *f)
{
	uint64_t oldest = 0;

	for (int i = 0; i < CACHE_SHARDS; i++) {
		struct shard *sh = &f->shards[i];
		pthread_mutex_lock(&sh->lock);
		if (sh->dhead && (!oldest || sh->dhead->dirtied_ns < oldest))
			oldest = sh->dhead->dirtied_ns;
		pthread_mutex_unlock(&sh->lock);
	}
	return oldest;
}

/* --- reads and writes -------------------------------------------------- */

/*
 * A read found P: one more use for S3-FIFO, unless it was read ahead and
 * this is its first read, which counts a read-ahead hit instead (a page
 * read once is read once, however it came in: a sequential scan read
 * ahead must not look hot).
 */
static inline void
page_accessed_locked(struct cache *c, struct shard *sh, struct cpage *p)
{
	lock_assert_held(&sh->lock);
	if (p->flags & PF_AHEAD) {
		p->flags &= ~PF_AHEAD;
		add_relaxed(&c->ahead_hits, 1);
	} else if (p->freq < 3) {
		p->freq++;
	}
}

/* cache_read, or (COUNT false) cache_peek: no access counted; SEQS (if
 * not NULL) takes each page's last write sequence. */
static bool
cache_copy_out(struct cache_file *f, void *buf, uint64_t off, uint32_t len,
    bool count, uint64_t *seqs)
{
	struct cache *c = f->c;
	uint8_t *out = buf;

	while (len > 0) {
		uint64_t index = off >> c->page_shift;
		uint32_t in = (uint32_t)(off & (c->page_size - 1));
		uint32_t n = c->page_size - in < len ? c->page_size - in : len;
		struct shard *sh = shard_of(f, index);

		pthread_mutex_lock(&sh->lock);
		struct cpage *p = lookup_locked(sh, index);
		if (!p || !(p->flags & PF_FILLED)) {
			/* Under the lock, as every writer of it. */
			if (count)
				store_relaxed(&sh->misses,
				    load_relaxed(&sh->misses) + 1);
			pthread_mutex_unlock(&sh->lock);
			return false;
		}
		memcpy(out, page_data(c, p) + in, n);
		if (seqs)
			*seqs++ = p->lseq;
		if (count) {
			page_accessed_locked(c, sh, p);
			if (n == len)
				store_relaxed(&sh->hits,
				    load_relaxed(&sh->hits) + 1);
		}
		pthread_mutex_unlock(&sh->lock);
		out += n;
		off += n;
		len -= n;
	}
	return true;
}

bool
cache_read(struct cache_file *f, void *buf, uint64_t off, uint32_t len)
{
	return cache_copy_out(f, buf, off, len, true, NULL);
}

bool
cache_peek(struct cache_file *f, void *buf, uint64_t off, uint32_t len)
{
	return cache_copy_out(f, buf, off, len, false, NULL);
}

bool
cache_peek_seq(struct cache_file *f, void *buf, uint64_t off, uint32_t len,
    uint64_t *seqs)
{
	return cache_copy_out(f, buf, off, len, false, seqs);
}

bool
cache_clean_if_unchanged(struct cache_file *f, uint64_t index, uint64_t seq)
{
	struct cache *c = f->c;
	struct shard *sh = shard_of(f, index);
	bool cleaned = false;

	pthread_mutex_lock(&sh->lock);
	struct cpage *p = lookup_locked(sh, index);
	if (p && (p->flags & (PF_DIRTY | PF_WB)) == PF_DIRTY &&
	    p->lseq == seq) {
		/* Listed: dirty and not under writeback. */
		dirty_unlink_locked(sh, p);
		p->flags &= ~(PF_DIRTY | PF_ZERO);
		counter_sub(&f->dirty_pages, 1);
		counter_sub(&c->dirty, 1);
		uint64_t was = atomic_fetch_sub_explicit(&f->unwritten_pages, 1,
		    memory_order_release);
		assert(was > 0);
		(void)was;
		cleaned = true;
	}
	pthread_mutex_unlock(&sh->lock);
	return cleaned;
}

/* Resident and filled, or fully covered: writable without a fill. */
bool
page_writable(struct cache_file *f, uint64_t index, uint64_t off, uint64_t len)
{
	struct shard *sh = shard_of(f, index);
	bool ok;

	pthread_mutex_lock(&sh->lock);
	struct cpage *p = lookup_locked(sh, index);
	if (p)
		ok = p->flags & PF_FILLED;
	else
		ok = !page_partial(f, index, off, len);
	pthread_mutex_unlock(&sh->lock);
	return ok;
}

enum cache_write_result
cache_write(struct cache_file *f, const void *buf, uint64_t off, uint32_t len,
    uint64_t seq, uint64_t *fill_index)
{
	uint32_t done;

	return cache_write_part(f, buf, off, len, seq, fill_index, &done);
}

enum cache_write_result
cache_write_part(struct cache_file *f, const void *buf, uint64_t off,
    uint32_t len, uint64_t seq, uint64_t *fill_index, uint32_t *done)
{
	struct cache *c = f->c;
	const uint8_t *in = buf;
	uint64_t first = off >> c->page_shift;
	uint64_t last = (off + len - 1) >> c->page_shift;

	*done = 0;
	/* Only the first and the last page can be partial. */
	if (!page_writable(f, first, off, len)) {
		*fill_index = first;
		return CACHE_WRITE_NEED_FILL;
	}
	if (last != first && !page_writable(f, last, off, len)) {
		*fill_index = last;
		return CACHE_WRITE_NEED_FILL;
	}

	/* A shard's lock is held across its pages (a chunk at a time), let
	 * go only to allocate; the dirt is counted before each unlock, so
	 * writeback never takes a page before it is counted dirty. */
	struct shard *held = NULL;
	struct dirt d = { 0, 0 };
	uint64_t now = now_ns();
	enum cache_write_result r = CACHE_WRITE_OK;

	while (len > 0) {
		uint64_t index = off >> c->page_shift;
		uint32_t at = (uint32_t)(off & (c->page_size - 1));
		uint32_t n = c->page_size - at < len ? c->page_size - at : len;
		struct shard *sh = shard_of(f, index);
		struct cpage *spare = NULL;

		if (sh != held) {
			if (held)
				shard_unlock_counting(f, held, &d);
			pthread_mutex_lock(&sh->lock);
			held = sh;
		}
		struct cpage *p = lookup_locked(sh, index);
		if (!p) {
			shard_unlock_counting(f, sh, &d);
			spare = page_alloc(c);
			pthread_mutex_lock(&sh->lock);
			if (!spare) {
				r = CACHE_WRITE_NO_SPACE;
				break;
			}
			p = lookup_locked(sh, index);
		}
		if (!p && page_partial(f, index, off, n)) {
			/* Evicted meanwhile: needs a fill after all. */
			page_release_unused(c, spare);
			*fill_index = index;
			r = CACHE_WRITE_NEED_FILL;
			break;
		}
		if (!p) {
			page_publish_locked(f, sh, spare, index, PF_FILLED);
			p = spare;
			spare = NULL;
		}
		if (spare)
			page_release_unused(c, spare);
		if (!(p->flags & PF_FILLED)) {
			*fill_index = index;
			r = CACHE_WRITE_NEED_FILL;
			break;
		}
		memcpy(page_data(c, p) + at, in, n);
		p->flags &= ~PF_ZERO;
		dirty_page_locked(sh, p, seq, now, &d);
		in += n;
		off += n;
		len -= n;
		*done += n;
	}
	if (held)
		shard_unlock_counting(f, held, &d);
	return r;
}

/* How fill_begin() found page INDEX. */
enum fill_found {
	FILL_RESIDENT, /* resident and filled: nothing to read */
	FILL_OURS,     /* our placeholder, or no page to be had */
	FILL_THEIRS,   /* someone else's placeholder */
};

/* cache_fill_begin() without counting the fill begun. */
static enum fill_found
fill_begin(struct cache_file *f, uint64_t index)
{
	struct cache *c = f->c;
	struct shard *sh = shard_of(f, index);
	struct cpage *p;

	/* P's flags are read under the lock: once it is let go, a fill may
	 * end or the page go. */
	pthread_mutex_lock(&sh->lock);
	p = lookup_locked(sh, index);
	enum fill_found found = !p ? FILL_OURS :
	    (p->flags & PF_FILLED) ? FILL_RESIDENT :
				     FILL_THEIRS;
	pthread_mutex_unlock(&sh->lock);
	if (p)
		return found;
	struct cpage *np = page_alloc(c);
	if (!np)
		return FILL_OURS;
	pthread_mutex_lock(&sh->lock);
	p = lookup_locked(sh, index);
	if (p) {
		found = (p->flags & PF_FILLED) ? FILL_RESIDENT : FILL_THEIRS;
		pthread_mutex_unlock(&sh->lock);
		page_release_unused(c, np);
		return found;
	}
	page_publish_locked(f, sh, np, index, 0);
	np->seq = add_fetch_u64(&f->placeholders, 1, memory_order_relaxed);
	pthread_mutex_unlock(&sh->lock);
	return FILL_OURS;
}

bool
cache_fill_begin(struct cache_file *f, uint64_t index)
{
	/* Someone else's placeholder: read it too (the first end wins). */
	if (fill_begin(f, index) == FILL_RESIDENT)
		return false;
	add_relaxed(&f->fills, 1); /* ended by cache_fill_end() */
	return true;
}

struct cache_fill_mark
cache_fill_mark(struct cache_file *f)
{
	return (struct cache_fill_mark){
		.discards = load_acquire(&f->discard_gen),
		.placeholders = load_relaxed(&f->placeholders),
	};
}

static void
fill_end(struct cache_file *f, uint64_t index, const void *data,
    const struct cache_fill_mark *m, uint16_t flags)
{
	struct cache *c = f->c;
	struct shard *sh = shard_of(f, index);

	pthread_mutex_lock(&sh->lock);
	if (m->discards != load_acquire(&f->discard_gen))
		data = NULL;
	struct cpage *p = lookup_locked(sh, index);
	/* Not a placeholder put in after this read began: that one is its
	 * own filler's (placeholders are numbered under the lock). */
	if (p && !(p->flags & PF_FILLED) && p->seq <= m->placeholders) {
		/* A placeholder: F's, in the index, never dirtied nor
		 * written back, so off the dirty list. */
		assert(p->file == f && (p->flags & PF_LIVE));
		assert(!(p->flags & (PF_DIRTY | PF_WB)) && !page_listed(sh, p));
		if (data) {
			memcpy(page_data(c, p), data, c->page_size);
			p->seq = 0;
			p->flags |= PF_FILLED | flags;
			if (flags & PF_AHEAD)
				add_relaxed(&c->ahead_pages, 1);
		} else {
			page_drop_locked(f, sh, p);
		}
	}
	pthread_mutex_unlock(&sh->lock);
	counter_sub(&f->fills, 1); /* begun by cache_fill_begin() */
}

void
cache_fill_end(struct cache_file *f, uint64_t index, const void *data,
    const struct cache_fill_mark *m)
{
	fill_end(f, index, data, m, 0);
}

void
cache_fill_end_ahead(struct cache_file *f, uint64_t index, const void *data,
    const struct cache_fill_mark *m)
{
	fill_end(f, index, data, m, PF_AHEAD);
}

int
cache_fill(struct cache_file *f, uint64_t index, const void *data)
{
	struct shard *sh = shard_of(f, index);

	if (!cache_fill_begin(f, index))
		return 0;
	struct cache_fill_mark m = cache_fill_mark(f);
	pthread_mutex_lock(&sh->lock);
	bool placed = lookup_locked(sh, index) != NULL;
	pthread_mutex_unlock(&sh->lock);
	cache_fill_end(f, index, data, &m);
	return placed ? 0 : -1;
}

uint32_t
cache_read_prepare(struct cache_file *f, void *buf, uint64_t off,
    uint32_t len, uint8_t *need)
{
	struct cache *c = f->c;
	uint8_t *out = buf;
	uint32_t nneed = 0, done = 0;

	for (uint32_t i = 0; len > 0; i++) {
		uint64_t index = off >> c->page_shift;
		uint32_t at = (uint32_t)(off & (c->page_size - 1));
		uint32_t n = c->page_size - at < len ? c->page_size - at : len;
		struct shard *sh = shard_of(f, index);

		pthread_mutex_lock(&sh->lock);
		struct cpage *p = lookup_locked(sh, index);
		need[i] = 0;
		if (!p)
			need[i] = CACHE_NEED_FILL;
		else if (!(p->flags & PF_FILLED))
			need[i] = CACHE_NEED_WAIT;
		/* Without BUF (a prefetch), no access to count either. */
		if (!need[i] && out) {
			memcpy(out + done, page_data(c, p) + at, n);
			page_accessed_locked(c, sh, p);
		}
		pthread_mutex_unlock(&sh->lock);
		/* Put in since (filled, even): the other's to wait for. */
		if (need[i] == CACHE_NEED_FILL &&
		    fill_begin(f, index) != FILL_OURS)
			need[i] = CACHE_NEED_WAIT;
		if (need[i] == CACHE_NEED_FILL)
			add_relaxed(&f->fills, 1);
		if (need[i])
			nneed++;
		done += n;
		off += n;
		len -= n;
	}
	return nneed;
}

int
cache_read_filled(struct cache_file *f, uint64_t index, uint32_t at, uint32_t n,
    void *buf)
{
	struct cache *c = f->c;
	struct shard *sh = shard_of(f, index);
	int r = -1;

	pthread_mutex_lock(&sh->lock);
	struct cpage *p = lookup_locked(sh, index);
	if (p && !(p->flags & PF_FILLED)) {
		r = 0;
	} else if (p) {
		if (buf) {
			memcpy(buf, page_data(c, p) + at, n);
			page_accessed_locked(c, sh, p);
		}
		r = 1;
	}
	pthread_mutex_unlock(&sh->lock);
	return r;
}

void
cache_discard(struct cache_file *f, uint64_t off, uint64_t len, uint64_t seq)
{
	struct cache *c = f->c;

	atomic_fetch_add_explicit(&f->discard_gen, 1, memory_order_release);

	while (len > 0) {
		uint64_t index = off >> c->page_shift;
		uint32_t at = (uint32_t)(off & (c->page_size - 1));
		uint64_t n = c->page_size - at < len ? c->page_size - at : len;
		struct shard *sh = shard_of(f, index);

		pthread_mutex_lock(&sh->lock);
		struct cpage *p = lookup_locked(sh, index);
		if (p && !(p->flags & PF_FILLED)) {
			/* Being filled with what may predate the discard. */
			page_drop_locked(f, sh, p);
		} else if (p) {
			bool whole = n == c->page_size;
			if (whole && !(p->flags & (PF_DIRTY | PF_WB))) {
				page_drop_locked(f, sh, p);
			} else {
				memset(page_data(c, p) + at, 0, n);
				if (p->flags & (PF_DIRTY | PF_WB))
					mark_dirty_locked(f, sh, p, seq);
				p->lseq = ++sh->wstamp; /* its data changed */
				if (whole && (p->flags & PF_DIRTY))
					p->flags |= PF_ZERO;
			}
		}
		pthread_mutex_unlock(&sh->lock);
		off += n;
		len -= n;
	}
}

/* A page's state as cache_state_run reports it (P NULL: not resident). */
static unsigned
page_state_locked(struct shard *sh, const struct cpage *p)
{
	unsigned st = 0;

	lock_assert_held(&sh->lock);
	if (!p)
		return 0;
	if (p->flags & (PF_DIRTY | PF_WB))
		st |= CACHE_STATE_DIRTY;
	if (p->flags & PF_WB)
		st |= CACHE_STATE_WRITEBACK;
	if (st && (p->flags & PF_ZERO))
		st |= CACHE_STATE_ZERO;
	return st;
}

uint64_t
cache_state_run(struct cache_file *f, uint64_t first, uint64_t n,
    unsigned *state)
{
	*state = 0;
	if (n == 0)
		return 0;
	/* Nothing dirty nor under writeback: everything is as on the
	 * backing device, every write that ended before it. */
	if (cache_file_unwritten_pages(f) == 0)
		return n;
	for (uint64_t i = first; i < first + n; i++) {
		struct shard *sh = shard_of(f, i);
		pthread_mutex_lock(&sh->lock);
		unsigned st = page_state_locked(sh, lookup_locked(sh, i));
		pthread_mutex_unlock(&sh->lock);
		if (i == first)
			*state = st;
		else if (st != *state)
			return i - first;
	}
	return n;
}

/* --- writeback --------------------------------------------------------- */

static bool
page_takeable(const struct cpage *p)
{
	return p && (p->flags & PF_DIRTY) && !(p->flags & PF_WB);
}

/* Take the run around P, within its chunk and [FIRST, END); shard lock and
 * run_lock held. */
static struct cache_run *
take_run_locked(struct cache_file *f, struct shard *sh, struct cpage *p,
    uint32_t max_pages, uint64_t first, uint64_t end)
{
	struct cache *c = f->c;
	uint64_t chunk_pages = UINT64_C(1) << c->chunk_shift;
	uint64_t chunk_first = p->index & ~(chunk_pages - 1);
	uint64_t chunk_end = chunk_first + chunk_pages;
	uint64_t lo = p->index, hi = p->index + 1;

	lock_assert_held(&f->run_lock);
	lock_assert_held(&sh->lock);
	assert(page_takeable(p) && p->file == f && shard_of(f, p->index) == sh);
	if (max_pages < 1)
		max_pages = 1;
	if (chunk_end > f->npages)
		chunk_end = f->npages;
	if (chunk_end > end)
		chunk_end = end;
	if (chunk_first < first)
		chunk_first = first;
	/* Forward first (offset order), then backward. */
	while (hi < chunk_end && hi - lo < max_pages &&
	    page_takeable(lookup_locked(sh, hi)))
		hi++;
	while (lo > chunk_first && hi - lo < max_pages &&
	    page_takeable(lookup_locked(sh, lo - 1)))
		lo--;

	struct cache_run *run = calloc(1, sizeof *run);
	if (!run)
		return NULL;
	if (c->zero_copy)
		run->iov = malloc((size_t)(hi - lo) * sizeof *run->iov);
	else
		run->data = malloc((size_t)(hi - lo) << c->page_shift);
	if (!run->data && !run->iov) {
		free(run);
		return NULL;
	}
	run->file = f;
	run->first_index = lo;
	run->npages = (uint32_t)(hi - lo);
	run->min_seq = UINT64_MAX;
	for (uint64_t i = lo; i < hi; i++) {
		struct cpage *q = lookup_locked(sh, i);
		/* Dirty, so in the index, filled and on the dirty list. */
		assert(page_takeable(q));
		assert((q->flags & (PF_LIVE | PF_FILLED)) ==
		    (PF_LIVE | PF_FILLED));
		if (run->iov) {
			run->iov[i - lo].iov_base = page_data(c, q);
			run->iov[i - lo].iov_len = c->page_size;
		} else {
			memcpy((uint8_t *)run->data +
			    ((i - lo) << c->page_shift), page_data(c, q),
			    c->page_size);
		}
		dirty_unlink_locked(sh, q);
		q->flags = (q->flags & ~PF_DIRTY) | PF_WB;
		q->wb_seq = q->seq;
		if (q->seq < run->min_seq)
			run->min_seq = q->seq;
	}
	/* Counted under writeback before it leaves the dirty count, so
	 * that a reader of the two (cache_unwritten_pages: the writer
	 * throttle) never finds the run in neither. */
	add_relaxed(&c->writeback, run->npages);
	add_relaxed(&f->writeback_pages, run->npages);
	atomic_thread_fence(memory_order_release);
	counter_sub(&f->dirty_pages, run->npages);
	counter_sub(&c->dirty, run->npages);

	run->next = f->runs;
	if (f->runs)
		f->runs->prev = run;
	f->runs = run;
	return run;
}

/* The run around the oldest qualifying dirty page across the shards.
 * Takes run_lock, then the lock of the shard whose head (head_seq, read
 * without its lock) is the oldest.  A writer may change a head meanwhile
 * (a page dirtied into an empty shard), as it could while the shards
 * were looked at one lock at a time; nobody else takes runs (run_lock),
 * and the chosen head is looked at again under its lock. */
static struct cache_run *
take_oldest(struct cache_file *f, uint64_t max_seq, uint64_t not_after_ns,
    uint32_t max_pages)
{
	struct cache_run *run = NULL;

	pthread_mutex_lock(&f->run_lock);
	for (;;) {
		int best = -1;
		uint64_t best_seq = UINT64_MAX;
		for (int i = 0; i < CACHE_SHARDS; i++) {
			struct shard *sh = &f->shards[i];
			uint64_t seq = load_relaxed(&sh->head_seq);
			if (seq <= max_seq && seq < best_seq &&
			    load_relaxed(&sh->head_ns) <= not_after_ns) {
				best = i;
				best_seq = seq;
			}
		}
		if (best < 0)
			break;
		struct shard *sh = &f->shards[best];
		pthread_mutex_lock(&sh->lock);
		struct cpage *h = sh->dhead;
		if (h && h->seq <= max_seq && h->dirtied_ns <= not_after_ns) {
			run = take_run_locked(f, sh, h, max_pages, 0, UINT64_MAX);
			pthread_mutex_unlock(&sh->lock);
			break;
		}
		pthread_mutex_unlock(&sh->lock);
	}
	pthread_mutex_unlock(&f->run_lock);
	return run;
}

struct cache_run *
cache_take_run(struct cache_file *f, uint64_t max_seq, uint32_t max_pages)
{
	return take_oldest(f, max_seq, UINT64_MAX, max_pages);
}

unsigned
cache_take_runs(struct cache_file *f, uint64_t max_seq, uint32_t max_pages,
    struct cache_run **runs, unsigned n)
{
	unsigned got = 0;

	pthread_mutex_lock(&f->run_lock);
	for (int i = 0; i < CACHE_SHARDS && got < n; i++) {
		struct shard *sh = &f->shards[i];
		pthread_mutex_lock(&sh->lock);
		struct cpage *h;
		while (got < n && (h = sh->dhead) && h->seq <= max_seq) {
			struct cache_run *run =
			    take_run_locked(f, sh, h, max_pages, 0, UINT64_MAX);
			if (!run) {
				n = got; /* memory ran short: what we have */
				break;
			}
			runs[got++] = run;
		}
		pthread_mutex_unlock(&sh->lock);
	}
	pthread_mutex_unlock(&f->run_lock);
	return got;
}

struct cache_run *
cache_take_expired_run(struct cache_file *f, uint64_t not_after_ns,
    uint32_t max_pages)
{
	return take_oldest(f, UINT64_MAX, not_after_ns, max_pages);
}

struct cache_run *
cache_take_range_run(struct cache_file *f, uint64_t *next, uint64_t end,
    uint32_t max_pages, unsigned *seen)
{
	struct cache_run *run = NULL;

	if (end > f->npages)
		end = f->npages;
	pthread_mutex_lock(&f->run_lock);
	for (uint64_t i = *next; i < end && !run; i++) {
		struct shard *sh = shard_of(f, i);
		pthread_mutex_lock(&sh->lock);
		struct cpage *p = lookup_locked(sh, i);
		if (!p || !(p->flags & PF_FILLED))
			*seen |= CACHE_RANGE_CLEAN;
		else if (p->flags & PF_WB)
			*seen |= CACHE_RANGE_BUSY;
		else if (p->flags & PF_DIRTY) {
			run = take_run_locked(f, sh, p, max_pages, i, end);
			if (!run)       /* out of memory: look again later */
				*seen |= CACHE_RANGE_BUSY;
		} else
			*seen |= CACHE_RANGE_CLEAN;
		pthread_mutex_unlock(&sh->lock);
		*next = run ? run->first_index + run->npages : i + 1;
	}
	pthread_mutex_unlock(&f->run_lock);
	return run;
}

void
cache_end_run(struct cache_run *run, bool ok)
{
	struct cache_file *f = run->file;
	struct cache *c = f->c;
	struct shard *sh = shard_of(f, run->first_index);

	pthread_mutex_lock(&f->run_lock);
	assert(run->npages > 0 && (run->prev ? run->prev->next == run :
	    f->runs == run));
	/* A run never crosses a chunk, so all its pages are in SH. */
	assert(run->first_index >> c->chunk_shift ==
	    (run->first_index + run->npages - 1) >> c->chunk_shift);
	pthread_mutex_lock(&sh->lock);
	for (uint64_t i = run->first_index;
	    i < run->first_index + run->npages; i++) {
		struct cpage *p = lookup_locked(sh, i);
		/* Under writeback, so pinned: still in the index, filled,
		 * and off the dirty list. */
		assert(p && p->file == f);
		assert((p->flags & (PF_LIVE | PF_FILLED | PF_WB)) ==
		    (PF_LIVE | PF_FILLED | PF_WB));
		assert(!page_listed(sh, p));
		p->flags &= ~PF_WB;
		if (p->flags & PF_DIRTY) {
			/* Written again during the run: listed now.  If the
			 * run failed, as old as it was. */
			if (!ok && p->wb_seq < p->seq)
				p->seq = p->wb_seq;
			dirty_insert_locked(sh, p);
		} else if (!ok) {
			/* Failed: dirty again, as old as it was. */
			p->flags |= PF_DIRTY;
			p->seq = p->wb_seq;
			dirty_insert_locked(sh, p);
			add_relaxed(&f->dirty_pages, 1);
			add_relaxed(&c->dirty, 1);
		} else {
			/* On the device: clean (cache_state_run). */
			uint64_t was =
			    atomic_fetch_sub_explicit(&f->unwritten_pages, 1,
				memory_order_release);
			assert(was > 0);
			(void)was;
		}
	}
	pthread_mutex_unlock(&sh->lock);
	counter_sub(&c->writeback, run->npages);
	counter_sub(&f->writeback_pages, run->npages);
	if (run->prev)
		run->prev->next = run->next;
	else
		f->runs = run->next;
	if (run->next)
		run->next->prev = run->prev;
	pthread_mutex_unlock(&f->run_lock);
	free(run->data);
	free(run->iov);
	free(run);
}

uint64_t
cache_min_dirty_seq(struct cache_file *f)
{
	uint64_t min = UINT64_MAX;

	pthread_mutex_lock(&f->run_lock);
	for (struct cache_run *r = f->runs; r; r = r->next)
		if (r->min_seq < min)
			min = r->min_seq;
	for (int i = 0; i < CACHE_SHARDS; i++) {
		struct shard *sh = &f->shards[i];
		pthread_mutex_lock(&sh->lock);
		if (sh->dhead && sh->dhead->seq < min)
			min = sh->dhead->seq;
		pthread_mutex_unlock(&sh->lock);
	}
	pthread_mutex_unlock(&f->run_lock);
	return min;
}
