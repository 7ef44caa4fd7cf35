/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * writeback.h - writing dirty pages back to the backing devices, the
 * kernel's way: background writeback above dirty_background, periodic
 * writeback of pages older than dirty_expire, FLUSH as "everything dirtied
 * before now is on the device", and writer throttling towards dirty_limit.
 *
 * Work runs on the writeback device's pool (flush-MAJ:MIN threads).  The
 * thresholds in struct wb_ctl are read by every thread without a lock (see
 * there).
 */
#ifndef WBD_WRITEBACK_H
#define WBD_WRITEBACK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "ratelimit.h"
#include "job.h"

struct backend;
struct cache;
struct cache_file;
struct wb_ctl;
struct wb_dev;

/*
 * What writeback writes: one export's pages and its backing device, and
 * the state writeback keeps for it.  Embedded in struct export (whose
 * lifetime it shares); writeback knows nothing else of the export.  A
 * target found on its device's list (wb_dev_target) may be used until the
 * finder's next quiescent state (grace.h): writeback jobs use the targets
 * only while they run.
 */
/* Passes writing back client FLUSHes at once, per export (wb_flush_queue). */
#define WB_FLUSH_PASSES 2

struct wb_target {
	const char *name;               /* the export's, for the log */
	struct cache_file *cf;
	struct backend *backend;
	struct wb_dev *dev;
	struct wb_ctl *wb;
	uint64_t size_bytes;
	bool read_only;                 /* nothing to write, nothing to flush */
	/*
	 * Atomic: the export's write log is ordered (export-journal.h): its
	 * pages reach the backing device only from the log, epoch by epoch,
	 * so background, periodic and write-behind writeback, and a writer
	 * making room, never take them.  wb_flush still does: its only
	 * caller for such a target is the log, which applies every epoch
	 * first (its fallback).
	 */
	_Atomic bool ordered;

	_Atomic uint64_t err_seq; /* bumped by each failure */
	/*
	 * Atomics, only ever rising: writes that reached the backend not
	 * durable on their own (not FUA), counted before their pages are
	 * clean; and the count a successful device flush read before it
	 * began, so covered.  A FLUSH finding flushed_upto == written skips
	 * the device's flush.  Both 0 at start-up: what an earlier process
	 * wrote and never flushed was never promised to anyone still
	 * connected (its clients saw it die).
	 */
	_Atomic uint64_t written, flushed_upto;

	/*
	 * Only for a backend with BACKEND_FLUSH_BEFORE_READ (its reads may
	 * go on another connection than its writes),
	 * BACKEND_REDO_AFTER_LOSS or BACKEND_REDO_AFTER_FAILED_FLUSH (a file:
	 * full, a new range is merged into the nearest instead of being
	 * given up; wb_redo_failed_flush): the byte ranges written to it that no
	 * flush has covered yet, each with the count of `written` that
	 * includes its last write, so that a read of a range none of them
	 * touches needs no flush first (wb_flush_before_read), and so that
	 * what a lost remote may have lost is written again (wb_redo).  Adjacent or overlapping ranges are
	 * merged, and the array is kept in order of offset (a binary
	 * search finds a range: a burst of random writes written behind
	 * keeps it full, and a scan of it for each run cost a seventh of
	 * wbd's CPU in the network benchmark's burst); once backend->unflushed_max are kept (the array is sized
	 * to it at the first write, and again when a reload changes it), a
	 * further one is only counted in uf_lost (every read flushes until
	 * a flush covers it).  Ranges a flush has covered are dropped as
	 * they are met.  Under uf_lock.
	 */
	pthread_mutex_t uf_lock;
	unsigned uf_n, uf_cap;
	uint64_t uf_lost;      /* 0: none */
	uint64_t uf_pruned;    /* flushed_upto at the last prune */
	uint64_t uf_commit_ns; /* the last wb_commit's flush */
	bool uf_owed;          /* writeback wrote since: commit */
	/* backend.losses when the last flush that no loss overtook began
	 * (atomic): another count means a loss since. */
	_Atomic uint64_t flush_losses;
	/*
	 * With BACKEND_REDO_AFTER_FAILED_FLUSH: flushes of the backend one
	 * at a time (a concurrent good one would prune the ranges a failed
	 * one is about to dirty again, the kernel reporting a write error to
	 * one fdatasync only), and how many failed (atomic, only rising): a
	 * run or a FLUSH that began before a failure writes again.
	 */
	pthread_mutex_t flush_lock;
	_Atomic uint64_t flush_fails;
	struct wb_range {
		uint64_t lo, hi;  /* bytes [lo, hi) */
		uint64_t written; /* its count, in `written` */
	} * uf;

	/*
	 * Group commit (wb_flush_written_sent): at most one flush of the
	 * backend at a time.  A flush that is needed while one is in flight
	 * waits for it if it covers what it needs (gc_upto, the count of
	 * `written` it read before it began), else for the next one, which
	 * the first waiter to wake begins, reading `written` afresh: the
	 * others waiting share it.  gc_last_r is the last one's result.
	 * Under gc_lock (a leaf), signalled on gc_cond.
	 */
	/* When a client's FLUSH last came (atomic, ns; 0: never): write-
	 * behind writes runs with FUA only for an export whose clients
	 * FLUSH (wb_fua_ok); and how many it wrote so since (atomic, zeroed
	 * by each FLUSH; at most the backend's fua_max_runs). */
	_Atomic uint64_t flush_seen_ns;
	_Atomic unsigned fua_since_flush;
	/*
	 * Client FLUSHes queued (wb_flush_queue), and the passes that write
	 * them back: at most WB_FLUSH_PASSES at a time, each taking every
	 * FLUSH queued when it begins.  A pass is busy from its submission
	 * until it finds the queue empty.  Under fq_lock (a leaf).
	 */
	pthread_mutex_t fq_lock;
	struct wb_flush_wait *fq_head, **fq_tail;
	struct wb_flush_pass {
		struct job job;
		struct wb_target *t;
		bool busy;
		/* While it writes back (joinable): up to MAX_SEQ, and
		 * CHANGES as it read them before taking a page.  A FLUSH
		 * arriving with nothing new (its sequence at most MAX_SEQ,
		 * `changes` still CHANGES) joins it (JOINED), answered with
		 * its batch: every write answered before that FLUSH came
		 * was in the cache before the pass took a page. */
		bool joinable;
		uint64_t max_seq, changes;
		struct wb_flush_wait *joined, **joined_tail;
	} fq_pass[WB_FLUSH_PASSES];
	/* Writes, trims and zeroes the cache has taken for T, each counted
	 * once the cache has it and before it is answered (wb_note_change;
	 * atomic, release). */
	_Atomic uint64_t changes;
	pthread_mutex_t gc_lock;
	pthread_cond_t gc_cond;
	bool gc_busy;
	uint64_t gc_upto, gc_gen;
	int gc_last_r;
	/* FLUSHes waiting for the one in flight to end: zeroed as it
	 * ends, so that a waiter woken and not yet run is not counted. */
	unsigned gc_waiters;

	/* Signalled whenever a writeback of this target ends. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int last_err;                   /* errno of the last failure (lock) */
};

/* Set up T's lock and counters (the pointers are the caller's). */
void wb_target_init(struct wb_target *t);
/* Ranges T keeps written and not yet flushed (wb_target.uf), now. */
unsigned wb_target_unflushed(struct wb_target *t);
void wb_target_destroy(struct wb_target *t);
/* The errno of T's last writeback failure, 0 if none. */
int wb_target_last_err(struct wb_target *t);

enum wb_reason {
	WB_REASON_BACKGROUND,
	WB_REASON_PERIODIC,
	WB_REASON_FLUSH,
	WB_REASON_FUA,
	WB_REASON_SHUTDOWN,
	WB_REASON_SYNC,
};

/*
 * The writeback thresholds.  cache, page_size and total_pages are set at
 * start-up and constant.  The others are atomics: set at start-up, stored
 * by wb_ctl_update (wbctl tune and reload, under daemon.tune_lock) one
 * field at a time, and read by every thread without a lock, never plainly:
 * through wb_ctl_snapshot where several are used together (one load each,
 * so one decision sees one value of each), or one relaxed load where
 * one is.  A snapshot taken during an update may hold an old and a new
 * value; it still keeps bg_pages < limit_pages.
 */
struct wb_ctl {
	struct cache *cache;
	uint32_t page_size;
	uint64_t total_pages;
	_Atomic uint64_t bg_pages;      /* dirty_background in pages */
	_Atomic uint64_t limit_pages;   /* dirty limit in pages */
	_Atomic uint64_t expire_ns;     /* dirty_expire_centisecs */
	_Atomic uint32_t max_run_pages; /* coalescing cap */
	_Atomic unsigned writeback_cs;  /* dirty_writeback_centisecs, 0: off */
	_Atomic unsigned bg_nice;       /* writeback.background_nice */
	_Atomic int stopping;     /* shutting down: stop holding writers */
	uint32_t readahead_bytes; /* cache.readahead_bytes (fill.c) */
	/* limits.max_cache_share (fill.c): an NBD_CMD_CACHE reads at most
	 * this many pages; the requests it cut short, and their line. */
	uint64_t prefetch_max_pages;
	_Atomic uint64_t prefetch_cut;
	struct ratelimit prefetch_cut_rl;
};

/* The run-time thresholds of a struct wb_ctl, as read at one moment. */
struct wb_thresholds {
	uint64_t bg_pages;
	uint64_t limit_pages;
	uint64_t expire_ns;
	uint32_t max_run_pages;
};

const char *wb_reason_name(enum wb_reason r);

/* Resolve the configured thresholds against the cache size. */
void wb_ctl_init(struct wb_ctl *wb, struct cache *cache,
    const struct wbd_config *cfg);
/* Change them at run time (tune, reload); other threads see each field
 * change atomically. */
void wb_ctl_update(struct wb_ctl *wb, const struct writeback_conf *wc);
/* Read them, for one decision (any thread). */
void wb_ctl_snapshot(const struct wb_ctl *wb, struct wb_thresholds *th);

/*
 * Write back every page of T dirtied at or before sequence MAX_SEQ, wait for
 * writeback of such pages already in flight, then flush the backend.
 * Returns 0 or a negative errno.  Worker threads only (it blocks).
 */
int wb_flush(struct wb_target *t, uint64_t max_seq, enum wb_reason why);

/*
 * A client's FLUSH of T, made durable by a pass of T's device's workers
 * (wb_flush_queue): every write up to sequence SEQ.  DONE is called on the
 * worker with ERR set (0 or a negative errno); it may free W.
 */
struct wb_flush_wait {
	uint64_t seq;
	void (*done)(struct wb_flush_wait *w);
	int err;
	struct wb_flush_wait *next; /* private: on the queue */
};
/* Queue W (any thread); no worker waits for it while it is queued. */
void wb_flush_queue(struct wb_target *t, struct wb_flush_wait *w);

/* A write, trim or zeroing of T's export is in the cache and about to be
 * answered (success or not): counted, for wb_flush_queue. */
void wb_note_change(struct wb_target *t);

/* Count a write that reached T's backend over [OFF, OFF + LEN), not
 * durable on its own (see wb_target.written): once it has completed,
 * before the cache may let the range's pages go. */
void wb_count_written(struct wb_target *t, uint64_t off, uint64_t len);

/* Before reading [OFF, OFF + LEN) from T's backend: on a backend with
 * BACKEND_FLUSH_BEFORE_READ, flush it unless a flush has covered every
 * write to that range (wb_target.uf).  A failed flush is the writeback's
 * (reported at the next FLUSH), and the read goes on. */
void wb_flush_before_read(struct wb_target *t, uint64_t off, uint64_t len);

/*
 * FUA: make the write at [OFF, OFF+LEN) (already in the cache with
 * sequence SEQ) durable, passing FUA to the device: only that range is
 * written, with BACKEND_WRITE_FUA.  Returns 0 or a negative errno.
 * Worker threads only.
 */
int wb_write_range_fua(struct wb_target *t, uint64_t off, uint64_t len,
    uint64_t seq);

/*
 * Is background writeback due on DEV: DIRTY_PAGES (the cache's) above the
 * background threshold, or DEV_DIRTY (the device's) above its share of it
 * (max_ratio %)?  DEV_DIRTY is not read when max_ratio is 100.
 */
bool wb_background_due(const struct wb_ctl *wb, struct wb_dev *dev,
    uint64_t dirty_pages, uint64_t dev_dirty);
/* Foreground work on DEV (a FLUSH, a FUA write, a miss) has ended, its
 * count in wb_dev lowered: resume write-behind if it yielded to such
 * work and is due now (any thread; one atomic load when it is not
 * owed). */
void wb_foreground_done(struct wb_dev *dev, const struct wb_ctl *wb);
/* Queue background writeback on DEV if none is queued (any thread). */
void wb_kick_background(struct wb_dev *dev);
/* Queue periodic writeback of expired pages on DEV (any thread). */
void wb_kick_periodic(struct wb_dev *dev);

/*
 * How long to hold the reply to a write, given the dirty pages now:
 * 0 below the midpoint between the background threshold and the limit,
 * rising smoothly to 200 ms towards the limit; -1 at or above the limit
 * (hold until writeback has made room).  The writer's pages are counted
 * dirty or under writeback (cache_unwritten_pages, wb_dev_pages),
 * as the kernel's balance_dirty_pages counts NR_WRITEBACK beside the
 * dirty pages: write-behind moves pages under writeback as soon as they
 * are written, and a writer faster than its remote must still be paced.
 * The background threshold counts dirty pages alone, as the kernel's.
 */
int wb_throttle_pause_ms(const struct wb_ctl *wb, uint64_t dirty_pages);

/*
 * The same for a writer to one device, which also holds a share of the
 * limit: at most MAX_RATIO % of it (held at that share, paced in the upper
 * half of it), and a device under MIN_RATIO % is not paced below the
 * global limit.  DEV_PAGES counts the device's pages as DIRTY_PAGES
 * counts the cache's: dirty or under writeback (wb_dev_pages).
 */
int wb_throttle_dev_ms(const struct wb_ctl *wb, uint64_t dirty_pages,
    uint64_t dev_pages, unsigned min_ratio, unsigned max_ratio);

/* The pages of every target on DEV (any thread), summed in one walk:
 * dirty, and dirty or under writeback, each page once (the writer
 * throttle's count, cache_file_unwritten_pages). */
struct wb_dev_pages {
	uint64_t dirty;
	uint64_t unwritten;
};
struct wb_dev_pages wb_dev_pages(struct wb_dev *dev);
/* Its dirty pages alone. */
uint64_t wb_dev_dirty_pages(struct wb_dev *dev);
/* The backend of a target on DEV (every target on a device has a backend
 * of one kind), NULL if it has none (a reader of the targets, grace.h). */
struct backend *wb_dev_backend(struct wb_dev *dev);

/* Wait (worker thread) until T's writeback state changes or MS pass. */
void wb_wait_progress(struct wb_target *t, unsigned ms);

/*
 * A writer on a worker that finds no page to take (every one dirty or
 * pinned) makes room itself, as the kernel's dirtier once did in
 * balance_dirty_pages: it writes back one run of T's oldest dirty pages,
 * whatever the thresholds (counted as background writeback).  The
 * device's workers may all be such writers, with the background job
 * queued behind them.  False if T had nothing to write or its device
 * backs off after failures (then wait for progress).
 */
bool wb_write_for_space(struct wb_target *t);

#endif
