/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cache.h - the page cache: one memory budget cut into pages, a sharded page
 * index per export, S3-FIFO eviction of clean pages, and the dirty state
 * that writeback works from.
 *
 * Thread safety: every function may be called from any thread.  Each
 * export's index is split into shards by chunk (chunk = the coalescing cap,
 * so one writeback run never crosses shards); a shard's mutex protects its
 * hash table, its dirty list and the state of its pages.  A file's
 * run_lock protects its list of runs in flight and makes taking a run one
 * step.  The eviction queues and the free list are protected by
 * cache->qlock, taken when a page is allocated, published or dropped (and
 * for statistics) — never on a hit.  Lock order:
 *
 *   file->run_lock  ->  shard lock  ->  cache->qlock
 *
 * The eviction scan holds qlock and takes shard locks with trylock only
 * (skipping busy shards), so it never waits against that order.
 *
 * Every export's requests go through it (export.c); writeback takes runs
 * from it (writeback.c).  See docs/design-writeback.md.
 */
#ifndef WBD_CACHE_H
#define WBD_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct cache;
struct cache_file;

struct cache_params {
	uint64_t size_bytes;
	uint32_t page_size;             /* power of two */
	uint32_t chunk_bytes;           /* shard/run unit, power of two >= page */
};

struct cache_stats {
	uint64_t pages_total;
	uint64_t pages_used;
	uint64_t dirty_pages;           /* dirty, not under writeback */
	uint64_t writeback_pages;       /* under writeback */
	uint64_t hits, misses, evictions;
	uint64_t ahead_pages; /* filled by read-ahead or CACHE */
	uint64_t ahead_hits;  /* ... that a read then found */
	uint64_t small_pages, main_pages;
	uint64_t zero_copy_bytes;   /* WRITE payloads received into pages */
	uint64_t zero_copy_refused; /* write buffers the cache refused */
};

struct cache *cache_new(const struct cache_params *params);
/*
 * Zero-copy writeback: runs point at the pages (run->iov) instead of a
 * snapshot (run->data).  A page written again while its run is being
 * written may reach the device torn between the two versions; it is dirty
 * again, so the next writeback puts the new version whole, and nothing a
 * FLUSH covered is lost (the bytes it covered are either still the old
 * ones or newer).  Pages under writeback are never evicted, so the
 * pointers stay valid until cache_end_run().
 */
void cache_set_zero_copy(struct cache *c, bool on);
void cache_free(struct cache *c);
/* The memory of C's pages: its address, and its size into *BYTES. */
void *cache_memory(const struct cache *c, size_t *bytes);
uint32_t cache_page_size(const struct cache *c);
void cache_get_stats(struct cache *c, struct cache_stats *st);
/* Dirty pages (not under writeback) in the whole cache: one atomic read,
 * for the hot path. */
uint64_t cache_dirty_pages(struct cache *c);
/* Dirty or under writeback: the pages no clean page can be evicted for. */
uint64_t cache_unwritten_pages(struct cache *c);

struct cache_file *cache_file_new(struct cache *c, uint64_t size_bytes);
void cache_file_free(struct cache_file *f);
void cache_file_stats(struct cache_file *f, uint64_t *cached_pages,
    uint64_t *dirty_pages);
/* Pages of F under writeback now. */
uint64_t cache_file_writeback_pages(struct cache_file *f);
/* Pages of F dirty or under writeback now. */
uint64_t cache_file_unwritten_pages(struct cache_file *f);
/* When F's oldest dirty page was dirtied (now_ns clock); 0 if none. */
uint64_t cache_oldest_dirty_ns(struct cache_file *f);

/*
 * Copy [off, off+len) out of the cache if every page is resident and
 * filled.  Returns true on a hit, false (nothing meaningful in BUF) on a
 * miss.
 */
bool cache_read(struct cache_file *f, void *buf, uint64_t off, uint32_t len);
/* The same, counting no access (no hit, no miss, no S3-FIFO visit): the
 * write log reading what it is to log. */
bool cache_peek(struct cache_file *f, void *buf, uint64_t off, uint32_t len);
/*
 * The same, with the last write sequence of each page of [off, off+len)
 * into SEQS[0..] (one per page, from off's page): a stamp the page takes
 * each time its data changes (a write, a discard's zeroes; not a
 * redirty), unique among the pages' stamps of its shard, so that a page
 * shows the same one only while its data has not changed (the writers'
 * own sequences may repeat: a TRIM's two discards carry one).  The
 * ordered write log reads the pages of an epoch with it.
 */
bool cache_peek_seq(struct cache_file *f, void *buf, uint64_t off, uint32_t len,
    uint64_t *seqs);
/*
 * Page INDEX's data, whose last write sequence was SEQ when it was read
 * (cache_peek_seq, nothing else), is on the backing device, written and
 * flushed there by someone else than writeback (the ordered write log):
 * clean it if it is dirty, not under writeback, and its last write
 * sequence is still SEQ, under its shard's lock, so that a write racing
 * with it is never lost (it either lands before, and the page stays
 * dirty, or after, and dirties it again).  True if it was cleaned.
 */
bool
cache_clean_if_unchanged(struct cache_file *f, uint64_t index, uint64_t seq);

enum cache_write_result {
	CACHE_WRITE_OK,         /* copied and dirtied */
	CACHE_WRITE_NEED_FILL,  /* *fill_index must be read in first */
	CACHE_WRITE_NO_SPACE,   /* no page could be freed: retry later */
};

/*
 * Copy BUF into [off, off+len), dirtying the pages with sequence SEQ (a
 * page already dirty keeps its older sequence).  A partially written page
 * that is not resident must be filled first: the first such page is
 * returned in *FILL_INDEX and nothing is written.  A page being filled by
 * someone else is reported the same way.
 */
enum cache_write_result cache_write(struct cache_file *f, const void *buf,
    uint64_t off, uint32_t len, uint64_t seq, uint64_t *fill_index);
/*
 * The same, telling in *DONE how many bytes from OFF it copied before it
 * stopped (all of LEN with CACHE_WRITE_OK): what is copied is in the
 * cache, or written back since, so a writer that goes on from there after
 * making room never copies it again (a write larger than the cache would
 * otherwise start over each time, its first pages evicting its last).
 */
enum cache_write_result
cache_write_part(struct cache_file *f, const void *buf, uint64_t off,
    uint32_t len, uint64_t seq, uint64_t *fill_index, uint32_t *done);

/*
 * One copy per write: a WRITE's payload received straight into cache
 * pages.  cache_wbuf_new() takes one private page per page of [off,
 * off+len) (one pass over the free list and the eviction queues): pages in
 * no index, so nothing half-received is visible to a read or to writeback,
 * and a payload never completed leaves no trace (cache_wbuf_free gives the
 * pages back).  The payload is received into cache_wbuf_iov(), in order.
 * NULL if the pages cannot be had now (every page dirty or pinned, or
 * private pages already hold a quarter of the cache): use a buffer and
 * cache_write() instead.
 *
 * cache_wbuf_commit() puts the pages into the index, dirtied with SEQ,
 * taking each shard's lock once for all its pages: a page not resident
 * is published as it is; a resident page takes its memory in exchange
 * for its own (keeping its place, its older dirty sequence and its
 * S3-FIFO state), unless it is under writeback (a zero-copy run points at
 * it): then it is copied into.  A
 * first or last page written only in part is copied into the resident
 * page; if that page is not resident or not filled, *FILL_INDEX is
 * returned (CACHE_WRITE_NEED_FILL) as by cache_write(), and the commit
 * goes on from where it stopped when called again.  It never returns
 * CACHE_WRITE_NO_SPACE.
 */
struct cache_wbuf;
struct cache_wbuf *
cache_wbuf_new(struct cache_file *f, uint64_t off, uint32_t len);
const struct iovec *cache_wbuf_iov(const struct cache_wbuf *w, unsigned *niov);
enum cache_write_result
cache_wbuf_commit(struct cache_wbuf *w, uint64_t seq, uint64_t *fill_index);
void cache_wbuf_free(struct cache_wbuf *w);
/* Private pages held by cache_wbuf_new() now (all files). */
uint64_t cache_private_pages(struct cache *c);

/*
 * Filling a page from the backend, in three steps: cache_fill_begin() puts
 * a placeholder into the index (pinned, not readable, not writable), the
 * caller reads the page from the backend, and cache_fill_end() installs the
 * data.  While a placeholder exists no write can change the page, so
 * whoever reads it from the backend gets current data: several fillers of
 * one page are harmless, the first cache_fill_end() wins.
 *
 * cache_fill_begin() returns true if the page must be read (a placeholder
 * is there), false if it is already resident and filled.  When no page can
 * be had it returns true without a placeholder; cache_fill_end() then
 * installs nothing, not even into a placeholder put in since.  Every true
 * return is ended by exactly one cache_fill_end() before the file is
 * freed.
 *
 * Between cache_fill_begin() (or cache_read_prepare()) and the backend
 * read, the filler takes cache_fill_mark(): what it knew when its read
 * began.  cache_fill_end() installs the data only into a placeholder put
 * in before the mark, and only if no discard happened since: a
 * placeholder put in later may stand for a page written, written back and
 * evicted after this read began, so this read's data may be older than
 * that write.
 */
bool cache_fill_begin(struct cache_file *f, uint64_t index);
struct cache_fill_mark {
	uint64_t discards;     /* cache_discard() calls so far */
	uint64_t placeholders; /* placeholders put in so far */
};
struct cache_fill_mark cache_fill_mark(struct cache_file *f);
/* DATA NULL: the backend read failed; the placeholder is removed. */
void cache_fill_end(struct cache_file *f, uint64_t index, const void *data,
    const struct cache_fill_mark *m);
/* The same for a page read ahead (read-ahead, NBD_CMD_CACHE): the first
 * read that finds it counts a read-ahead hit (cache_stats). */
void cache_fill_end_ahead(struct cache_file *f, uint64_t index,
    const void *data, const struct cache_fill_mark *m);

/* Fill page INDEX from DATA if it is not resident (a convenience for
 * tests and callers that already have the data).  Returns 0, or -1 if no
 * page could be had. */
int cache_fill(struct cache_file *f, uint64_t index, const void *data);

/*
 * A read that missed: copy every resident, filled page of [off, off+len)
 * into BUF now (so the reply reflects every write acknowledged before the
 * read), begin a fill of every other page, and set NEED[i] for the pages
 * (counted from off's page) that are not there: CACHE_NEED_FILL for those
 * the caller must read from the backend, and end with one
 * cache_fill_end(); CACHE_NEED_WAIT for those another read is filling,
 * which the caller may take from the cache once it is done
 * (cache_read_filled).  Returns how many pages are not there.  BUF NULL:
 * a prefetch, which copies nothing and counts no access.
 */
#define CACHE_NEED_FILL 1
#define CACHE_NEED_WAIT 2
uint32_t cache_read_prepare(struct cache_file *f, void *buf, uint64_t off,
    uint32_t len, uint8_t *need);

/*
 * Page INDEX, which another read was filling: 1 once it is resident, N
 * bytes of it from AT copied into BUF (unless NULL); 0 while it is still
 * being filled; -1 if it is not in the cache (that fill failed, or the
 * page has gone since): read it from the backend.
 */
int cache_read_filled(struct cache_file *f, uint64_t index, uint32_t at,
    uint32_t n, void *buf);

/*
 * Dirty again, with sequence SEQ, the resident pages of [off, off+len):
 * their data reached a backend that may have lost it (a remote gone
 * before a flush covered it, a failed fdatasync).  A page already dirty
 * with a newer sequence takes SEQ (a FLUSH between must still write it);
 * a page under writeback stays dirty after its run.  Returns how many
 * pages of the range the cache does not hold (evicted, or a placeholder):
 * those cannot be written again; into *DIRTIED (if not NULL) how many it
 * dirtied or gave an older sequence.
 */
uint64_t cache_redirty(struct cache_file *f, uint64_t off, uint64_t len,
    uint64_t seq, uint64_t *dirtied);

/* Drop the pages in [off, off+len) that are clean; dirty ones are zeroed
 * (and stay dirty) so that later reads see the zeroes.  Used by TRIM and
 * WRITE_ZEROES after they reach the backend. */
void cache_discard(struct cache_file *f, uint64_t off, uint64_t len,
    uint64_t seq);

/*
 * Block status: how pages FIRST.. differ from the backing device.  Returns
 * how many pages from FIRST (at least 1 and at most N, if N > 0) share one
 * state, and that state in *STATE: 0 if as on the backing device (not
 * resident, being filled, or clean), else CACHE_STATE_DIRTY (not yet
 * written back), with CACHE_STATE_WRITEBACK if being written back now,
 * and CACHE_STATE_ZERO if a TRIM or WRITE_ZEROES left it zeroes that are
 * not yet written back.  A page looked at is reported as it was then.
 */
#define CACHE_STATE_DIRTY (1u << 0)
#define CACHE_STATE_WRITEBACK (1u << 1)
#define CACHE_STATE_ZERO (1u << 2)
uint64_t cache_state_run(struct cache_file *f, uint64_t first, uint64_t n,
    unsigned *state);

/* --- writeback ------------------------------------------------------- */

/* One run of adjacent pages taken for writeback. */
struct cache_run {
	struct cache_file *file;
	uint64_t first_index;
	uint32_t npages;
	uint64_t min_seq;               /* oldest first-dirty sequence */
	void *data;                     /* snapshot, npages * page_size */
	struct iovec *iov;              /* or, zero-copy: the pages themselves */
	struct cache_run *next;         /* on the file's in-flight list */
	struct cache_run *prev;
};

/*
 * Take the oldest dirty page of F whose sequence is <= MAX_SEQ (or any if
 * MAX_SEQ is UINT64_MAX), extended to its dirty neighbours in offset order
 * within its chunk, up to MAX_PAGES.  The pages are snapshot into a new
 * buffer and marked under writeback.  Returns NULL if nothing qualifies.
 */
struct cache_run *cache_take_run(struct cache_file *f, uint64_t max_seq,
    uint32_t max_pages);

/*
 * Up to N runs, as cache_take_run's, into RUNS, in no particular order: a
 * shard's oldest first, the shards in turn.  For a sync that writes them
 * all: the shards' locks are taken once for the lot, not once a run.
 * Returns how many (fewer than N: nothing else qualified, or memory ran
 * short).
 */
unsigned cache_take_runs(struct cache_file *f, uint64_t max_seq,
    uint32_t max_pages, struct cache_run **runs, unsigned n);

/* Pages older than NOT_AFTER_NS only (periodic writeback); NULL if none. */
struct cache_run *cache_take_expired_run(struct cache_file *f,
    uint64_t not_after_ns, uint32_t max_pages);

/*
 * FUA: take the dirty pages among [*NEXT, END) (page indexes), a run of
 * adjacent ones at a time in offset order, advancing *NEXT past what was
 * looked at.  Pages passed over are reported in *SEEN:
 * CACHE_RANGE_BUSY if under writeback in someone else's run (wait for it
 * to end and look again), CACHE_RANGE_CLEAN if clean or not resident
 * (written back, not necessarily durably).  NULL once *NEXT reaches END.
 */
#define CACHE_RANGE_CLEAN       (1u << 0)
#define CACHE_RANGE_BUSY        (1u << 1)
struct cache_run *cache_take_range_run(struct cache_file *f, uint64_t *next,
    uint64_t end, uint32_t max_pages, unsigned *seen);

/*
 * Finish a run.  On success the pages become clean unless they were
 * written again meanwhile; on failure they are dirty again with their old
 * sequence numbers.  Frees RUN.
 */
void cache_end_run(struct cache_run *run, bool ok);

/* The smallest first-dirty sequence of F still dirty or under writeback,
 * UINT64_MAX if none: a FLUSH taken at F is done once this exceeds F. */
uint64_t cache_min_dirty_seq(struct cache_file *f);

#endif
