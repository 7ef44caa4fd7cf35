/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * writeback.c - writeback work on the flush-MAJ:MIN pools.
 *
 * A run (cache_take_run) is written with one pwrite and ended with
 * cache_end_run; a failure keeps its pages dirty, bumps the export's error
 * sequence (see export.c for who sees it), counts the error on the device
 * and arms a back-off during which background and periodic work leave the
 * device alone: 100 ms, doubled by each failure after it has passed (the
 * writes of one window that fail together in one outage count once), at
 * most 1 s, so that writers held at the dirty limit go on within a second
 * of the device answering again.  Any successful write ends it.  FLUSH
 * work ignores the back-off: it tries, and reports EIO if the device still
 * fails.  Failures are logged once per outage, then at most every 10 s.
 *
 * Fairness: background work takes one run per export in turn, so one busy
 * export cannot hold back the others on its device.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomics.h"
#include "backend.h"
#include "cache.h"
#include "config.h"
#include "lock.h"
#include "log.h"
#include "ratelimit.h"
#include "settings.h"
#include "wbdev.h"
#include "wbnice.h"
#include "writeback.h"

#define WB_BACKOFF_MIN_MS 100u
#define WB_BACKOFF_MAX_MS 1000u
#define WB_FAIL_LOG_NS (10ull * 1000000000ull)
#define WB_MAX_PAUSE_MS 200

static int wb_curve_ms(uint64_t dirty, uint64_t low, uint64_t high);

_Static_assert(WB_REASON_SYNC + 1 == STATS_WB_REASONS,
    "struct stats_wb counts every writeback reason");

const char *
wb_reason_name(enum wb_reason r)
{
	switch (r) {
	case WB_REASON_BACKGROUND:
		return "background";
	case WB_REASON_PERIODIC:
		return "periodic";
	case WB_REASON_FLUSH:
		return "flush";
	case WB_REASON_FUA:
		return "fua";
	case WB_REASON_SHUTDOWN:
		return "shutdown";
	case WB_REASON_SYNC:
		return "sync";
	}
	return "unknown";
}

void
wb_ctl_update(struct wb_ctl *wb, const struct writeback_conf *wc)
{
	uint64_t bg = settings_threshold_pages(&wc->dirty_background,
	    wb->total_pages, wb->page_size);
	uint64_t limit = settings_threshold_pages(&wc->dirty, wb->total_pages,
	    wb->page_size);
	uint64_t run = wc->max_io_bytes / wb->page_size;

	if (limit < 1)
		limit = 1;
	if (limit > wb->total_pages)
		limit = wb->total_pages;
	if (bg >= limit)
		bg = limit - 1;
	store_relaxed(&wb->bg_pages, bg);
	store_relaxed(&wb->limit_pages, limit);
	store_relaxed(&wb->expire_ns,
	    (uint64_t)wc->dirty_expire_centisecs * 10000000ull);
	store_relaxed(&wb->writeback_cs, wc->dirty_writeback_centisecs);
	store_relaxed(&wb->bg_nice, wc->background_nice);
	/* Runs never cross a chunk: the cap cannot grow past the start's. */
	if (run < 1)
		run = 1;
	if (load_relaxed(&wb->max_run_pages) == 0 ||
	    run < load_relaxed(&wb->max_run_pages))
		store_relaxed(&wb->max_run_pages, (uint32_t)run);
}

void
wb_ctl_snapshot(const struct wb_ctl *wb, struct wb_thresholds *th)
{
	th->bg_pages = load_relaxed(&wb->bg_pages);
	th->limit_pages = load_relaxed(&wb->limit_pages);
	th->expire_ns = load_relaxed(&wb->expire_ns);
	th->max_run_pages = load_relaxed(&wb->max_run_pages);
	/* Taken half-way through an update: a new background threshold
	 * with the old, lower limit.  wb_ctl_update keeps it below. */
	if (th->limit_pages > 0 && th->bg_pages >= th->limit_pages)
		th->bg_pages = th->limit_pages - 1;
}

void
wb_ctl_init(struct wb_ctl *wb, struct cache *cache,
    const struct wbd_config *cfg)
{
	struct cache_stats st;

	cache_get_stats(cache, &st);
	memset(wb, 0, sizeof *wb);
	wb->cache = cache;
	wb->page_size = cache_page_size(cache);
	wb->total_pages = st.pages_total;
	wb->readahead_bytes = cfg->cache.readahead_bytes;
	wb->prefetch_max_pages =
	    wb->total_pages * cfg->limits.max_cache_share / 100;
	wb_ctl_update(wb, &cfg->writeback);
}

static int
wb_pause_ms(const struct wb_thresholds *th, uint64_t dirty_pages)
{
	/* Quadratic in the distance past the midpoint: gentle, then firm. */
	return wb_curve_ms(dirty_pages, (th->bg_pages + th->limit_pages) / 2,
	    th->limit_pages);
}

int
wb_throttle_pause_ms(const struct wb_ctl *wb, uint64_t dirty_pages)
{
	struct wb_thresholds th;

	wb_ctl_snapshot(wb, &th);
	return wb_pause_ms(&th, dirty_pages);
}

/* The quadratic curve from LOW (no pause) to HIGH (held). */
static int
wb_curve_ms(uint64_t dirty, uint64_t low, uint64_t high)
{
	if (dirty >= high)
		return -1;
	if (dirty <= low)
		return 0;
	double x = (double)(dirty - low) / (double)(high - low);
	int ms = (int)(x * x * WB_MAX_PAUSE_MS);
	return ms < 1 ? 1 : ms;
}

int
wb_throttle_dev_ms(const struct wb_ctl *wb, uint64_t dirty_pages,
    uint64_t dev_pages, unsigned min_ratio, unsigned max_ratio)
{
	struct wb_thresholds th;

	wb_ctl_snapshot(wb, &th);
	uint64_t dev_max = th.limit_pages * max_ratio / 100;
	uint64_t dev_min = th.limit_pages * min_ratio / 100;
	int global = wb_pause_ms(&th, dirty_pages);
	int dev;

	if (dev_max < 1)
		dev_max = 1;
	if (global < 0)
		return -1; /* the hard limit binds everyone */
	if (dev_pages < dev_min)
		return 0; /* within its guaranteed share */
	if (max_ratio >= 100)
		return global;
	dev = wb_curve_ms(dev_pages, dev_max / 2, dev_max);
	if (dev < 0)
		return -1;
	return dev > global ? dev : global;
}

struct wb_dev_pages
wb_dev_pages(struct wb_dev *dev)
{
	struct wb_dev_pages n = { 0, 0 };

	for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
		struct wb_target *t = wb_dev_target(dev, i);
		uint64_t cached, dirty;
		if (!t)
			continue;
		cache_file_stats(t->cf, &cached, &dirty);
		n.dirty += dirty;
		n.unwritten += cache_file_unwritten_pages(t->cf);
	}
	return n;
}

uint64_t
wb_dev_dirty_pages(struct wb_dev *dev)
{
	return wb_dev_pages(dev).dirty;
}

struct backend *
wb_dev_backend(struct wb_dev *dev)
{
	for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
		struct wb_target *t = wb_dev_target(dev, i);
		if (t)
			return t->backend;
	}
	return NULL;
}

void
wb_target_init(struct wb_target *t)
{
	store_relaxed(&t->err_seq, 0);
	store_relaxed(&t->written, 0);
	store_relaxed(&t->flushed_upto, 0);
	t->last_err = 0;
	t->uf_n = t->uf_cap = 0;
	t->uf = NULL;
	t->uf_lost = 0;
	t->uf_pruned = 0;
	t->uf_owed = false;
	t->uf_commit_ns = 0;
	lock_init(&t->uf_lock);
	store_relaxed(&t->flush_fails, 0);
	lock_init(&t->flush_lock);
	lock_init(&t->gc_lock);
	pthread_cond_init(&t->gc_cond, NULL);
	t->gc_busy = false;
	store_relaxed(&t->flush_seen_ns, 0);
	store_relaxed(&t->fua_since_flush, 0);
	t->gc_upto = t->gc_gen = 0;
	t->gc_last_r = 0;
	lock_init(&t->fq_lock);
	t->fq_head = NULL;
	t->fq_tail = &t->fq_head;
	for (unsigned i = 0; i < WB_FLUSH_PASSES; i++)
		t->fq_pass[i] = (struct wb_flush_pass){ .t = t };
	store_relaxed(&t->changes, 0);
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
}

void
wb_target_destroy(struct wb_target *t)
{
	free(t->uf);
	t->uf = NULL;
	pthread_mutex_destroy(&t->uf_lock);
	pthread_mutex_destroy(&t->flush_lock);
	pthread_mutex_destroy(&t->gc_lock);
	pthread_cond_destroy(&t->gc_cond);
	pthread_mutex_destroy(&t->fq_lock);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
}

int
wb_target_last_err(struct wb_target *t)
{
	pthread_mutex_lock(&t->lock);
	int err = t->last_err;
	pthread_mutex_unlock(&t->lock);
	return err;
}

/* This thread's CPU time so far, in ns. */
static uint64_t
wb_thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Count the CPU time this thread spent since START on DEV's writeback. */
static void
wb_cpu_account(struct wb_dev *dev, uint64_t start)
{
	uint64_t now = wb_thread_cpu_ns();

	if (now > start)
		add_relaxed(&dev->wb_cpu_ns, now - start);
}

static void
wb_signal(struct wb_target *t)
{
	pthread_mutex_lock(&t->lock);
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

void
wb_wait_progress(struct wb_target *t, unsigned ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	until.tv_sec += ms / 1000 + until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	pthread_mutex_lock(&t->lock);
	pthread_cond_timedwait(&t->cond, &t->lock, &until);
	pthread_mutex_unlock(&t->lock);
}

static void
wb_note_error(struct wb_target *t, int err)
{
	struct wb_dev *dev = t->dev;
	uint64_t now = now_ns();
	uint64_t until = load_acquire(&dev->backoff_until_ns);

	/* The first failure once the last back-off has passed moves it on
	 * (one thread: the compare-and-swap); the others fail with it. */
	if (now >= until) {
		uint32_t ms = load_relaxed(&dev->backoff_ms);
		ms = ms ? ms * 2 : WB_BACKOFF_MIN_MS;
		if (ms > WB_BACKOFF_MAX_MS)
			ms = WB_BACKOFF_MAX_MS;
		if (atomic_compare_exchange_strong_explicit(
			&dev->backoff_until_ns, &until, now + ms * 1000000ull,
			memory_order_acq_rel, memory_order_relaxed))
			store_relaxed(&dev->backoff_ms, ms);
	}
	add_relaxed(&dev->errors, 1);
	store_relaxed(&dev->last_err, err);
	atomic_fetch_add_explicit(&t->err_seq, 1, memory_order_release);
	pthread_mutex_lock(&t->lock);
	t->last_err = err;
	pthread_mutex_unlock(&t->lock);
}

/* Has T's remote lost a connection since its backend.losses was LOSSES? */
static bool
wb_lost_since(struct wb_target *t, uint64_t losses)
{
	return (t->backend->caps & BACKEND_REDO_AFTER_LOSS) &&
	    load_acquire(&t->backend->losses) != losses;
}

/*
 * Has T's remote lost a connection that had served since its
 * backend.losses_served was SERVED?  Then a write or flush that failed
 * meanwhile failed with it, not as the remote's answer: no writeback
 * error, tried again on a new connection (backend.h).
 */
static bool
wb_dropped_since(struct wb_target *t, uint64_t served)
{
	return (t->backend->caps & BACKEND_REDO_AFTER_LOSS) &&
	    load_acquire(&t->backend->losses_served) != served;
}

/* Did a write or flush of T's that failed with R, begun when
 * backend.losses_served was SERVED, fail with a lost connection, not as
 * the remote's answer (backend.h)? */
static bool
wb_failed_with_loss(struct wb_target *t, uint64_t served, int r)
{
	return r < 0 &&
	    ((r == -EAGAIN && (t->backend->caps & BACKEND_REMOTE)) ||
		wb_dropped_since(t, served));
}

/* Is any page of E dirtied at or before MAX_SEQ not yet on the device? */
static bool
wb_pending(struct wb_target *t, uint64_t max_seq)
{
	uint64_t min = cache_min_dirty_seq(t->cf);
	return min != UINT64_MAX && min <= max_seq;
}

/* A success: the back-off, if any, is over. */
static void
wb_note_success(struct wb_dev *dev)
{
	if (!load_relaxed(&dev->backoff_ms))
		return;
	store_release(&dev->backoff_until_ns, 0);
	if (atomic_exchange_explicit(&dev->backoff_ms, 0,
		memory_order_acq_rel)) {
		unsigned quiet = atomic_exchange_explicit(&dev->fail_log.quiet,
		    0, memory_order_relaxed);
		log_info("device %s: writeback is succeeding again (%u "
			 "failure%s not logged)",
		    dev->name, quiet, quiet == 1 ? "" : "s");
		store_relaxed(&dev->fail_log.next_ns, 0);
	}
}

/*
 * Log a failure of DEV?  The first of an outage, then one every 10 s
 * (the count of those not logged goes into *QUIET), so a device that
 * keeps failing does not flood the log at one retry a second.
 */
static bool
wb_fail_log_due(struct wb_dev *dev, unsigned *quiet)
{
	return ratelimit_due(&dev->fail_log, WB_FAIL_LOG_NS, quiet);
}

static bool
wb_backing_off(struct wb_dev *dev)
{
	return now_ns() < load_relaxed(&dev->backoff_until_ns);
}

/*
 * Flush E's backend unless a successful flush already covers every write
 * that reached it (see wb_target.written).  Called once the writes to cover
 * have completed, and so been counted.  Several may run at once: each
 * raises flushed_upto to what it read before flushing, never lowers it.
 */
static int wb_redo(struct wb_target *t, uint64_t losses);
static bool wb_redirty_kept(struct wb_target *t, const uint64_t *losses,
    uint64_t *pages, uint64_t *missing, uint64_t *dirtied);
static bool
wb_redo_failed_flush(struct wb_target *t, uint64_t *again, uint64_t *uncached);
static void wb_uf_prune_locked(struct wb_target *t);

static int
wb_flush_upto_locked(struct wb_target *t, uint64_t w, bool *sent)
{
	uint64_t done = load_acquire(&t->flushed_upto);
	uint64_t served = load_acquire(&t->backend->losses_served);
	uint64_t losses = load_acquire(&t->backend->losses);
	int r;

	/* Locked where flushes go one at a time (wb_flush_written_sent). */
	if (t->backend->caps & BACKEND_REDO_AFTER_FAILED_FLUSH)
		lock_assert_held(&t->flush_lock);
	if (done >= w || t->read_only)
		return 0;
	if ((t->backend->caps & BACKEND_REDO_AFTER_LOSS) &&
	    losses != load_acquire(&t->flush_losses))
		return wb_redo(t, losses);
	*sent = true;
	add_relaxed(&t->dev->flushes_sent, 1);
	r = backend_flush(t->backend);
	/* Failed with a connection lost meanwhile (closed while idle,
	 * say): not an error yet; wb_redo at the next try, on a new
	 * connection (a remote still away fails that one). */
	if (wb_failed_with_loss(t, served, r))
		return -EAGAIN;
	if (r < 0) {
		unsigned quiet;
		char redo[192] = "";
		if (t->backend->caps & BACKEND_REDO_AFTER_FAILED_FLUSH) {
			uint64_t again, uncached;
			bool lost;
			/* Counted first: a run ending meanwhile keeps its
			 * pages dirty (wb_run_end). */
			atomic_fetch_add_explicit(&t->flush_fails, 1,
			    memory_order_acq_rel);
			lost = wb_redo_failed_flush(t, &again, &uncached);
			snprintf(redo, sizeof redo,
			    "; %llu page(s) written since the last good flush "
			    "dirtied again, to be written again (%llu page(s) "
			    "of those ranges not cached%s)",
			    (unsigned long long)again,
			    (unsigned long long)uncached,
			    lost ? ", and ranges not kept" : "");
		}
		errno = -r;
		if (wb_fail_log_due(t->dev, &quiet))
			log_warn("flush of export \"%s\" (device %s) failed%s "
				 "(%u other failures not logged)",
			    t->name, t->dev->name, redo, quiet);
		wb_note_error(t, -r);
		return r;
	}
	/* Lost meanwhile: the flush may have reached a server that went
	 * with what it held; wb_redo at the next one. */
	if (wb_lost_since(t, losses))
		return -EAGAIN;
	while (done < w &&
	    !atomic_compare_exchange_strong_explicit(&t->flushed_upto, &done, w,
		memory_order_acq_rel, memory_order_acquire))
		; /* DONE reloaded: someone raised it meanwhile */
	return 0;
}

/* Flush T's backend to cover the count W of `written` (read before). */
static int
wb_flush_upto(struct wb_target *t, uint64_t w, bool *sent)
{
	if (!(t->backend->caps & BACKEND_REDO_AFTER_FAILED_FLUSH))
		return wb_flush_upto_locked(t, w, sent);
	pthread_mutex_lock(&t->flush_lock);
	int r = wb_flush_upto_locked(t, w, sent);
	pthread_mutex_unlock(&t->flush_lock);
	return r;
}

/*
 * Flush T's backend so that it covers every write counted in `written`
 * now, unless a flush already has (flushed_upto); *SENT if this call sent
 * one.  Group commit (wb_target.gc_*): a flush in flight that read a
 * count at least ours covers us, and we wait for it and take its result;
 * one that read less cannot (a write of ours may have completed after it
 * was sent), and we wait for it to end, then for the next: the first
 * waiter to wake sends it, with `written` read afresh, so that it covers
 * every waiter (each read its count before), and they share it.  So
 * FLUSHes arriving together cost the remote one flush, a FLUSH never
 * costs more than the one in flight and its own, and a failure (or a
 * loss, -EAGAIN) is the result of every FLUSH its flush covered.
 *
 * A waiter may wake only after a later flush has ended too: the result
 * it takes is then not gc_last_r but flushed_upto's.  A flush that
 * succeeded raised flushed_upto to its count, at least ours, before it
 * ended, and a later one read a count at least as high; so flushed_upto
 * short of ours means the flush that covered us failed, and gc_last_r
 * (its failure, or a later one's) is an error.
 */
static int
wb_flush_written_sent(struct wb_target *t, bool *sent)
{
	uint64_t w = load_acquire(&t->written);
	int r;

	if (t->read_only || load_acquire(&t->flushed_upto) >= w)
		return 0;
	pthread_mutex_lock(&t->gc_lock);
	while (t->gc_busy) {
		uint64_t gen = t->gc_gen;
		bool covered = t->gc_upto >= w;
		t->gc_waiters++; /* zeroed by the flush's end */
		while (t->gc_gen == gen)
			pthread_cond_wait(&t->gc_cond, &t->gc_lock);
		if (covered) {
			bool done = load_acquire(&t->flushed_upto) >= w;
			/* Short: the flush that covered us failed (above). */
			assert(done || t->gc_last_r < 0);
			r = done ? 0 : t->gc_last_r;
			pthread_mutex_unlock(&t->gc_lock);
			add_relaxed(&t->dev->flushes_shared, 1);
			return r;
		}
	}
	if (load_acquire(&t->flushed_upto) >= w) {
		pthread_mutex_unlock(&t->gc_lock);
		return 0;
	}
	/* Ours to send: covering every count read so far. */
	uint64_t upto = load_acquire(&t->written);
	t->gc_busy = true;
	t->gc_upto = upto;
	pthread_mutex_unlock(&t->gc_lock);
	r = wb_flush_upto(t, upto, sent);
	pthread_mutex_lock(&t->gc_lock);
	t->gc_busy = false;
	t->gc_last_r = r;
	t->gc_gen++;
	t->gc_waiters = 0; /* every one is let go */
	pthread_cond_broadcast(&t->gc_cond);
	pthread_mutex_unlock(&t->gc_lock);
	return r;
}

/*
 * Dirty again (cache_redirty, the oldest sequence) every range T keeps as
 * written since its last good flush, where the cache holds it.  Into
 * *PAGES the pages of the ranges, into *MISSING those it does not hold.
 * True if ranges were given up (uf_lost) or could not be read.
 */
static bool
wb_redirty_kept(struct wb_target *t, const uint64_t *losses, uint64_t *pages,
    uint64_t *missing, uint64_t *dirtied)
{
	struct wb_range *r = NULL;
	unsigned n = 0;
	uint64_t ps = t->wb->page_size;

	pthread_mutex_lock(&t->uf_lock);
	wb_uf_prune_locked(t);
	bool lost = t->uf_lost != 0;
	if (t->uf_n && (r = malloc(t->uf_n * sizeof *r))) {
		n = t->uf_n;
		memcpy(r, t->uf, n * sizeof *r);
	} else if (t->uf_n) {
		lost = true;
	}
	pthread_mutex_unlock(&t->uf_lock);
	/* Ranges stay until a flush covers the count they were written
	 * at: a second loss before it redoes them again. */
	if (losses)
		store_release(&t->flush_losses, *losses);
	*pages = *missing = *dirtied = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t again;
		if (r[i].hi <= r[i].lo)
			continue;
		*missing +=
		    cache_redirty(t->cf, r[i].lo, r[i].hi - r[i].lo, 1, &again);
		*dirtied += again;
		*pages += (r[i].hi - 1) / ps - r[i].lo / ps + 1;
	}
	free(r);
	return lost;
}

/*
 * T's remote was lost (LOSSES) since its last flush: what it acknowledged
 * and no flush covered may have gone with it (a server restarted loses
 * its volatile cache), so nothing may be flushed as if it were there.
 * Every range written since the last flush is dirtied again where the
 * cache still holds it (cache_redirty, with the oldest sequence, so that
 * the FLUSH waiting writes it); what it no longer holds (evicted, or
 * given up to uf_lost) cannot be, and is reported as a writeback failure
 * (err_seq: each connection's next FLUSH fails), as the kernel reports a
 * lost write-back page.  Returns -EAGAIN: write, then flush.
 */
static int
wb_redo(struct wb_target *t, uint64_t losses)
{
	uint64_t missing, pages, dirtied;
	bool lost = wb_redirty_kept(t, &losses, &pages, &missing, &dirtied);
	add_relaxed(&t->dev->redo_pages, pages > missing ? pages - missing : 0);
	if (missing || lost) {
		log_warnx("export \"%s\" (device %s): its remote was lost "
			  "before a flush covered what was written to it; %llu "
			  "page(s)%s of that are no longer cached and may be "
			  "lost: reported as a writeback failure",
		    t->name, t->dev->name, (unsigned long long)missing,
		    lost ? " and ranges not kept" : "");
		wb_note_error(t, EIO);
	} else {
		log_info("export \"%s\" (device %s): its remote was lost "
			 "before a flush covered what was written to it: "
			 "writing %llu page(s) again",
		    t->name, t->dev->name, (unsigned long long)pages);
	}
	return -EAGAIN;
}

/*
 * A flush of T failed, and T's backend may have lost what was written
 * since its last good one (BACKEND_REDO_AFTER_FAILED_FLUSH: after a failed
 * fdatasync the kernel has marked the pages it could not write clean, and
 * the next fdatasync succeeds without them).  Every range kept since then
 * is dirtied again where the cache holds it (cache_redirty, the oldest
 * sequence, so the next FLUSH writes it first), and is kept until a good
 * flush covers it: the data stays dirty until it is on the device, as for
 * a failed write.  Into *AGAIN the pages dirtied again (or given an
 * older sequence), into *UNCACHED those of the ranges the cache no longer
 * holds (a merged range may also span pages never written); the failure
 * itself is reported by the caller (err_seq).  True if ranges were given
 * up (uf_lost, or no memory to read them): those cannot be redone.  Runs
 * in flight and FLUSHes begun before it write again (flush_fails).
 */
static bool
wb_redo_failed_flush(struct wb_target *t, uint64_t *again, uint64_t *uncached)
{
	uint64_t pages;
	bool lost = wb_redirty_kept(t, NULL, &pages, uncached, again);

	add_relaxed(&t->dev->flush_redo_pages, *again);
	return lost;
}

/* wb_flush_written_sent, for callers that need not know if it flushed. */
static int
wb_flush_written(struct wb_target *t)
{
	bool sent;

	return wb_flush_written_sent(t, &sent);
}

/* Drop T's unflushed ranges a flush has covered since they were kept. */
static void
wb_uf_prune_locked(struct wb_target *t)
{
	uint64_t done = load_acquire(&t->flushed_upto);

	lock_assert_held(&t->uf_lock);
	if (t->uf_lost <= done)
		t->uf_lost = 0;
	/* No flush since the last prune: nothing more to drop.  (A range
	 * added after a flush that covers it is dropped at the next one.) */
	if (done != t->uf_pruned) {
		unsigned k = 0;
		for (unsigned i = 0; i < t->uf_n; i++)
			if (t->uf[i].written > done)
				t->uf[k++] = t->uf[i]; /* in order */
		t->uf_n = k;
	}
	t->uf_pruned = done;
	if (t->uf_n == 0 && !t->uf_lost)
		t->uf_owed = false;
}

/* Size T's array of unflushed ranges to the backend's setting (first
 * use, or a reload changed it).  Ranges that no longer fit are given up
 * to uf_lost; if memory is short, the old array stays. */
static void
wb_uf_size_locked(struct wb_target *t)
{
	unsigned want = load_relaxed(&t->backend->unflushed_max);

	lock_assert_held(&t->uf_lock);
	if (want == t->uf_cap || want == 0)
		return;
	for (unsigned i = want; i < t->uf_n; i++)
		if (t->uf[i].written > t->uf_lost)
			t->uf_lost = t->uf[i].written;
	if (t->uf_n > want)
		t->uf_n = want;
	struct wb_range *r = realloc(t->uf, (size_t)want * sizeof *r);
	if (!r)
		return;
	t->uf = r;
	t->uf_cap = want;
}

/* Ranges given up (T's array full, or made smaller): counted once until
 * a flush covers them, and logged at most once a minute. */
static void
wb_uf_overflow(struct wb_target *t, unsigned cap)
{
	unsigned quiet;

	add_relaxed(&t->dev->unflushed_overflows, 1);
	if (ratelimit_due(&t->dev->overflow_log, 60 * 1000000000ull, &quiet))
		log_warnx(
		    "export \"%s\": more than %u ranges written to the "
		    "remote since its last FLUSH (remote.unflushed_ranges): "
		    "cache misses flush first until the next one (%u more "
		    "times since the last such line)",
		    t->name, cap, quiet);
}

/* R grown to take in [LO, HI) written up to count W. */
static void
wb_range_grow(struct wb_range *r, uint64_t lo, uint64_t hi, uint64_t w)
{
	r->lo = lo < r->lo ? lo : r->lo;
	r->hi = hi > r->hi ? hi : r->hi;
	r->written = w > r->written ? w : r->written;
}

/* The first of T's ranges that ends at or after OFF (STRICT: after),
 * or uf_n: they are kept in order and apart, so their ends rise too. */
static unsigned
wb_uf_first(const struct wb_target *t, uint64_t off, bool strict)
{
	unsigned lo = 0, hi = t->uf_n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (t->uf[mid].hi < off || (strict && t->uf[mid].hi == off))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* wb_count_written; BY_WRITEBACK: a run, which wb_commit owes a flush. */
static void
wb_count(struct wb_target *t, uint64_t off, uint64_t len, bool by_writeback)
{
	uint64_t w = add_fetch_u64(&t->written, 1, memory_order_release);
	uint64_t end = off + len;
	bool had_lost;
	unsigned i;

	if (!(t->backend->caps &
		(BACKEND_FLUSH_BEFORE_READ | BACKEND_REDO_AFTER_LOSS |
		    BACKEND_REDO_AFTER_FAILED_FLUSH)))
		return;
	pthread_mutex_lock(&t->uf_lock);
	wb_uf_prune_locked(t);
	had_lost = t->uf_lost != 0;
	wb_uf_size_locked(t);
	/* Ranges I to J-1 overlap or touch [OFF, END): one range with it. */
	i = wb_uf_first(t, off, false);
	unsigned j = i;
	while (j < t->uf_n && t->uf[j].lo <= end)
		j++;
	if (j > i) {
		wb_range_grow(&t->uf[i], off, end, w);
		for (unsigned k = i + 1; k < j; k++)
			wb_range_grow(&t->uf[i], t->uf[k].lo, t->uf[k].hi,
			    t->uf[k].written);
		memmove(&t->uf[i + 1], &t->uf[j],
		    (t->uf_n - j) * sizeof *t->uf);
		t->uf_n -= j - i - 1;
	} else if (t->uf_n < t->uf_cap) {
		memmove(&t->uf[i + 1], &t->uf[i],
		    (t->uf_n - i) * sizeof *t->uf);
		t->uf[i] = (struct wb_range){ off, end, w };
		t->uf_n++;
	} else if (t->uf_n > 0 &&
	    (t->backend->caps & BACKEND_REDO_AFTER_FAILED_FLUSH)) {
		/* Full: into the nearer neighbour, a superset to write
		 * again; grown, it still stays apart from the next. */
		unsigned best = i;
		if (i == t->uf_n ||
		    (i > 0 && off - t->uf[i - 1].hi < t->uf[i].lo - end))
			best = i - 1;
		wb_range_grow(&t->uf[best], off, end, w);
	} else if (w > t->uf_lost) {
		t->uf_lost = w;
	}
	if (by_writeback)
		t->uf_owed = true;
	bool lost = !had_lost && t->uf_lost != 0;
	unsigned cap = t->uf_cap;
	pthread_mutex_unlock(&t->uf_lock);
	if (lost)
		wb_uf_overflow(t, cap);
}

void
wb_count_written(struct wb_target *t, uint64_t off, uint64_t len)
{
	wb_count(t, off, len, false);
}

unsigned
wb_target_unflushed(struct wb_target *t)
{
	unsigned n;

	pthread_mutex_lock(&t->uf_lock);
	wb_uf_prune_locked(t);
	n = t->uf_n;
	pthread_mutex_unlock(&t->uf_lock);
	return n;
}

void
wb_flush_before_read(struct wb_target *t, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	bool need;

	if (!(t->backend->caps & BACKEND_FLUSH_BEFORE_READ))
		return;
	pthread_mutex_lock(&t->uf_lock);
	wb_uf_prune_locked(t);
	need = t->uf_lost != 0;
	if (!need) {
		unsigned i = wb_uf_first(t, off, true);
		need = i < t->uf_n && t->uf[i].lo < end;
	}
	pthread_mutex_unlock(&t->uf_lock);
	bool sent = false;
	if (need)
		(void)wb_flush_written_sent(t, &sent);
	if (sent)
		add_relaxed(&t->dev->read_flushes, 1);
}

/*
 * One run being written: begun (wb_run_begin), then ended (wb_run_end),
 * through the backend's two-step write (see backend_write_begin).
 */
struct wb_io {
	struct wb_target *t;
	struct cache_run *run;
	uint64_t off;
	uint32_t len;
	unsigned flags;
	enum wb_reason why;
	uint64_t start_ns;
	uint64_t losses; /* backend.losses when it began */
	uint64_t served; /* backend.losses_served then */
	uint64_t fails;  /* target.flush_fails when it began */
	bool behind;     /* write-behind's (remote.write_behind) */
	struct backend_write bw;
};

/* The bytes RUN of T writes (the export's last page may be short). */
static uint32_t
wb_run_len(const struct wb_target *t, const struct cache_run *run)
{
	uint64_t off = run->first_index * t->wb->page_size;
	uint64_t len = (uint64_t)run->npages * t->wb->page_size;

	if (off + len > t->size_bytes)
		len = t->size_bytes - off;
	return (uint32_t)len;
}

/* Start writing RUN of T; START_NS: when wb_dev_write_admit began it in
 * the device's estimate, or 0 (begun here). */
static void
wb_run_begin(struct wb_io *w, struct wb_target *t, struct cache_run *run,
    unsigned flags, enum wb_reason why, uint64_t start_ns)
{
	uint64_t off = run->first_index * t->wb->page_size;
	uint64_t len = (uint64_t)run->npages * t->wb->page_size;

	/* A run of T's, inside the export, never crossing a write's limit,
	 * on a backend writeback may write to. */
	assert(run->file == t->cf && run->npages > 0);
	assert(run->data || run->iov);
	assert(off < t->size_bytes && !t->read_only);
	assert(len <= UINT32_MAX);

	len = wb_run_len(t, run);
	*w = (struct wb_io){ .t = t,
		.run = run,
		.off = off,
		.len = (uint32_t)len,
		.flags = flags };
	w->why = why;
	w->start_ns = start_ns;
	if (!start_ns) {
		w->start_ns = now_ns();
		wb_dev_link_begin(t->dev, &t->dev->est, w->len, w->start_ns);
	}
	w->served = load_acquire(&t->backend->losses_served);
	w->losses = load_acquire(&t->backend->losses);
	w->fails = load_acquire(&t->flush_fails);
	stats_wb_run_begin(&t->dev->stats);
	if (run->data) {
		/* A snapshot of its own: one buffer, stable. */
		struct iovec iov = { .iov_base = run->data, .iov_len = w->len };
		backend_write_begin(t->backend, &w->bw, &iov, 1, w->len, off,
		    flags | BACKEND_BUF_PRIVATE);
		return;
	}
	/* The pages themselves, the last one cut short. */
	uint32_t ps = (uint32_t)run->iov[0].iov_len;
	int n = (int)((w->len + ps - 1) / ps);
	struct iovec last = run->iov[n - 1];
	run->iov[n - 1].iov_len = w->len - (uint32_t)(n - 1) * ps;
	backend_write_begin(t->backend, &w->bw, run->iov, n, w->len, off,
	    flags);
	run->iov[n - 1] = last;
}

/* Wait for W's write and end its run; 0 or a negative errno. */
static int
wb_run_end(struct wb_io *w)
{
	struct wb_target *t = w->t;

	/* Begun by wb_run_begin and not ended yet. */
	assert(t && w->run && w->run->file == t->cf && w->len > 0);
	assert(w->bw.b == t->backend);
	int r = backend_write_end(&w->bw);
	uint64_t now = now_ns();

	wb_dev_link_end(t->dev, &t->dev->est, w->len, now - w->start_ns, r == 0,
	    now);
	if (r == 0 && w->behind)
		add_relaxed(&t->dev->write_behind_bytes, w->len);
	if (r == 0 && (w->flags & BACKEND_WRITE_FUA))
		add_relaxed(&t->dev->fua_writes, 1);

	/* Counted (and its range kept) before its pages are clean: a FLUSH
	 * that sees them clean sees the count, and flushes the device. */
	if (r == 0 && !(w->flags & BACKEND_WRITE_FUA)) {
		wb_count(t, w->off, w->len, true);
		/* Answered by a remote lost since it began, or written to
		 * a file whose flush failed since: a redo may have run
		 * before its range was kept, so its pages stay dirty, to be
		 * written again (not a failure).  A loss or failure after
		 * this finds the range kept. */
		if (wb_lost_since(t, w->losses) ||
		    ((t->backend->caps & BACKEND_REDO_AFTER_FAILED_FLUSH) &&
			load_acquire(&t->flush_fails) != w->fails)) {
			cache_end_run(w->run, false);
			stats_wb_run_end(&t->dev->stats, w->why, w->len,
			    now_ns() - w->start_ns, false);
			wb_signal(t);
			return 0;
		}
	}
	cache_end_run(w->run, r == 0);
	stats_wb_run_end(&t->dev->stats, w->why, w->len, now_ns() - w->start_ns,
	    r == 0);
	if (wb_failed_with_loss(t, w->served, r)) {
		/* Failed with a connection the remote lost while it was in
		 * flight (closed while idle, say: the next write finds it
		 * so): its pages stay dirty, to be written again on a new
		 * connection, and a sync that wanted it tries again
		 * (wb_flush_once).  Not a writeback error: none is
		 * reported, no back-off begins.  While the remote stays
		 * away no loss is counted again, and its writes fail as
		 * writes do; a new connection that fails straight away
		 * (a stalled remote) is no excuse (wb_dropped_since). */
		add_relaxed(&t->dev->lost_writes, 1);
		log_debug("writeback of %llu bytes at offset %llu of export "
			  "\"%s\" (device %s) met a lost connection: %s; "
			  "it stays dirty",
		    (unsigned long long)w->len, (unsigned long long)w->off,
		    t->name, t->dev->name, strerror(-r));
	} else if (r < 0) {
		unsigned quiet;
		errno = -r;
		if (wb_fail_log_due(t->dev, &quiet))
			log_warn("writeback of %llu bytes at offset %llu of "
				 "export \"%s\" (device %s) failed; the data "
				 "stays dirty and will be retried (%u other "
				 "failures not logged)",
			    (unsigned long long)w->len,
			    (unsigned long long)w->off, t->name, t->dev->name,
			    quiet);
		wb_note_error(t, -r);
	} else {
		add_relaxed(&t->dev->written_bytes, w->len);
		wb_note_success(t->dev);
	}
	wb_signal(t);
	return r;
}

/* Work done for a sync (a FLUSH, a FUA write, wbctl flush, the drain),
 * before which background work yields. */
static bool
wb_reason_sync(enum wb_reason why)
{
	return why == WB_REASON_FLUSH || why == WB_REASON_FUA ||
	    why == WB_REASON_SHUTDOWN || why == WB_REASON_SYNC;
}

#define WB_WINDOW 16
#define WB_WINDOW_MAX 1024
/*
 * The least window of a sync's writes on a remote (a FLUSH, FUA, `wbctl
 * flush`, the drain): its client waits for every write it covers, so
 * they go out together, as the kernel submits a sync's pages at once,
 * rather than at the link's estimate.  The estimate stays where the
 * writes' latency stops falling, and on a busy remote that was the
 * floor of 16: a FLUSH after 64 scattered writes took four round trips.
 * LAN profile, 4 KiB random writes at QD32 with a FLUSH every 64:
 * 13,400 writes/s at 16 and 15,000 at 64 (three runs each), 14,400 at 32
 * and 14,900 at 128 (one run each).
 */
#define WB_SYNC_WINDOW 64

/* Does DEV's window bound its writes (a remote that takes writes in two
 * steps)?  Then its least (*FLOOR: remote.min_writeback_inflight, and for
 * a SYNC's writes at least WB_SYNC_WINDOW) and its bound (*MAX_BYTES). */
static bool
wb_dev_budget(struct wb_dev *dev, bool sync, unsigned *floor,
    uint64_t *max_bytes)
{
	struct backend *b = wb_dev_backend(dev);

	if (!b || !(b->caps & BACKEND_REMOTE) ||
	    backend_max_in_flight(b) < WB_WINDOW)
		return false;
	unsigned min = load_relaxed(&b->min_inflight);
	if (min == 0)
		min = REMOTE_DEFAULT_MIN_WRITEBACK_INFLIGHT;
	*floor = sync && min < WB_SYNC_WINDOW ? WB_SYNC_WINDOW : min;
	*max_bytes = load_relaxed(&b->max_inflight_bytes);
	return true;
}

/* Write one run and wait for it, in its device's window; 0 or a negative
 * errno. */
static int
wb_write_run(struct wb_target *t, struct cache_run *run, unsigned flags,
    enum wb_reason why)
{
	struct wb_io w;
	struct wb_dev_room room = { .max_writes = WB_WINDOW_MAX,
		.sync = wb_reason_sync(why) };
	uint64_t start = 0;

	if (wb_dev_budget(t->dev, room.sync, &room.floor, &room.max_bytes))
		start = wb_dev_write_admit(t->dev, wb_run_len(t, run), &room,
		    NULL, NULL);
	wb_run_begin(&w, t, run, flags, why, start);
	return wb_run_end(&w);
}

/*
 * Several runs in flight, oldest ended first.  On a file, as many as the
 * backend keeps in flight, up to WB_WINDOW (one, or the io_uring's): its
 * latency is hidden as the kernel's flusher hides a disk's by queueing
 * bios.  On a remote, the link's window (bandwidth x round trip,
 * linkest.h), never fewer than WB_WINDOW, at most the remote's
 * max_inflight_bytes and WB_WINDOW_MAX: it grows from WB_WINDOW as the
 * estimate does.  That window is the device's, not the job's: every job
 * writing to the device draws its runs in flight from it
 * (wb_dev_write_admit), a job writing for a sync first (wb_reason_sync:
 * background, periodic and write-behind work take no room while a sync's
 * run waits for some), so that several jobs on one device never hold
 * more than the link's window together.  A job without room ends its own
 * oldest run, or, with none in flight, waits for another's to end.  The
 * runs go over the remote's connections (backend-nbd.c: a multi-conn
 * remote gets more as they are busy).  Every run added is ended by
 * wb_window_add or wb_window_drain.
 */
struct wb_window {
	struct wb_io small[WB_WINDOW];
	struct wb_io *io; /* SMALL, or WB_WINDOW_MAX of its own */
	unsigned size;    /* of IO */
	unsigned head, n, cap;
	unsigned floor;     /* a remote's least window; 0: a file */
	uint64_t max_bytes; /* a remote's bound */
	struct wb_dev *dev;
	int err;            /* the first failure */
	enum wb_reason why; /* of every run it writes */
	bool sync;          /* wb_reason_sync(why) */
	bool behind;        /* write-behind's runs */
	bool plain;         /* a run begun without FUA */
};

static void
wb_window_init(struct wb_window *win, struct wb_dev *dev, enum wb_reason why)
{
	struct backend *b = wb_dev_backend(dev);
	unsigned floor = b ? backend_max_in_flight(b) : 1;

	if (floor > WB_WINDOW)
		floor = WB_WINDOW;
	win->head = win->n = 0;
	win->err = 0;
	win->why = why;
	win->sync = false;
	win->behind = false;
	win->plain = false;
	win->dev = dev;
	win->io = win->small;
	win->size = WB_WINDOW;
	win->cap = floor;
	win->floor = 0;
	win->max_bytes = 0;
	if (!wb_dev_budget(dev, wb_reason_sync(why), &win->floor,
		&win->max_bytes))
		return;
	win->sync = wb_reason_sync(why);
	/* Without memory for more, no more than WB_WINDOW of its own. */
	struct wb_io *io = malloc(WB_WINDOW_MAX * sizeof *io);
	if (!io)
		return;
	win->io = io;
	win->size = WB_WINDOW_MAX;
}

/* The job's own runs in flight at most: a file's; on a remote, its ring
 * (the device's window bounds them all: wb_dev_write_admit). */
static unsigned
wb_window_cap(struct wb_window *win)
{
	return win->floor ? win->size : win->cap;
}

static void wb_window_end_oldest(struct wb_window *win);

/* End WIN's oldest run if it has one in flight (wb_dev_write_admit). */
static bool
wb_window_end_one(void *arg)
{
	struct wb_window *win = arg;

	if (win->n == 0)
		return false;
	wb_window_end_oldest(win);
	return true;
}

static void
wb_window_end_oldest(struct wb_window *win)
{
	int r = wb_run_end(&win->io[win->head]);

	if (r < 0 && win->err == 0)
		win->err = r;
	win->head = (win->head + 1) % win->size;
	win->n--;
}

/* Begin RUN with FLAGS (BACKEND_WRITE_FUA, or 0); ends the oldest first
 * while the window is full.  Returns the first failure so far (0 if
 * none). */
static int
wb_window_add_flags(struct wb_window *win, struct wb_target *t,
    struct cache_run *run, unsigned flags)
{
	unsigned cap = wb_window_cap(win);
	uint64_t start = 0;

	while (win->n >= cap)
		wb_window_end_oldest(win);
	/* Room in the device's window: our oldest ends first, if it must. */
	if (win->floor) {
		struct wb_dev_room room = { .floor = win->floor,
			.max_bytes = win->max_bytes,
			.max_writes = win->size,
			.sync = win->sync };
		start = wb_dev_write_admit(win->dev, wb_run_len(t, run), &room,
		    wb_window_end_one, win);
	}
	struct wb_io *w = &win->io[(win->head + win->n) % win->size];
	wb_run_begin(w, t, run, flags, win->why, start);
	w->behind = win->behind;
	if (!(flags & BACKEND_WRITE_FUA))
		win->plain = true;
	win->n++;
	if (cap == 1)
		wb_window_end_oldest(win);
	return win->err;
}

static int
wb_window_add(struct wb_window *win, struct wb_target *t, struct cache_run *run)
{
	return wb_window_add_flags(win, t, run, 0);
}

/* Write-behind writes runs with FUA for an export whose clients sent a
 * FLUSH this recently: one whose clients never flush would only cost its
 * remote a sync for each. */
#define WB_FUA_BEHIND_NS (5000ull * 1000000ull)
/* The runs a FLUSH takes before it writes them, to see whether they are
 * few enough to go with FUA (wb_flush_runs), and its batches: a bound on
 * the stack. */
#define WB_FUA_FLUSH_RUNS 256

static bool
wb_flushed_lately(struct wb_target *t)
{
	uint64_t seen = load_relaxed(&t->flush_seen_ns);

	return seen && now_ns() - seen < WB_FUA_BEHIND_NS;
}

/* Is every write counted on T flushed? */
static bool
wb_all_flushed(struct wb_target *t)
{
	return load_acquire(&t->flushed_upto) >= load_acquire(&t->written);
}

/* How many runs T's writeback may write with FUA between two FLUSHes
 * (remote.fua_max_runs): 0 on a backend that does not take FUA itself. */
static unsigned
wb_fua_max(struct wb_target *t)
{
	if (!(t->backend->caps & BACKEND_NATIVE_FUA))
		return 0;
	return load_relaxed(&t->backend->fua_max_runs);
}

/* May write-behind write its next run on T with FUA, DIRTY pages left
 * dirty on its device?  For clients that FLUSH, while every write counted
 * is flushed, and if those pages fit, a run each, in what is left of
 * remote.fua_max_runs since their last FLUSH. */
static bool
wb_fua_ok(struct wb_target *t, uint64_t dirty)
{
	unsigned max = wb_fua_max(t);
	unsigned since = load_relaxed(&t->fua_since_flush);

	return since < max && dirty < max - since && wb_flushed_lately(t) &&
	    wb_all_flushed(t);
}

/* End every run in flight, and free the window; the first failure, or
 * 0. */
static int
wb_window_drain(struct wb_window *win)
{
	while (win->n > 0)
		wb_window_end_oldest(win);
	if (win->io != win->small)
		free(win->io);
	win->io = win->small;
	win->size = WB_WINDOW;
	return win->err;
}

/* Is T's writeback the ordered log's alone (wb_target.ordered)? */
static bool
wb_skip(const struct wb_target *t)
{
	return load_relaxed(&t->ordered);
}

bool
wb_write_for_space(struct wb_target *t)
{
	if (t->read_only || wb_skip(t) || wb_backing_off(t->dev))
		return false;
	uint32_t max_run = load_relaxed(&t->wb->max_run_pages);
	struct cache_run *run = cache_take_run(t->cf, UINT64_MAX, max_run);
	if (!run)
		return false;
	uint64_t cpu = wb_thread_cpu_ns();
	(void)wb_write_run(t, run, 0, WB_REASON_BACKGROUND);
	wb_cpu_account(t->dev, cpu);
	return true;
}

static int
wb_flush_work(struct wb_target *t, uint64_t max_seq, enum wb_reason why);

int
wb_flush(struct wb_target *t, uint64_t max_seq, enum wb_reason why)
{
	uint64_t cpu = wb_thread_cpu_ns();

	if (why == WB_REASON_FLUSH) {
		uint64_t now = now_ns();
		store_relaxed(&t->flush_seen_ns, now);
		store_relaxed(&t->dev->flush_seen_ns, now);
		store_relaxed(&t->fua_since_flush, 0);
	}
	int r = wb_flush_work(t, max_seq, why);

	wb_cpu_account(t->dev, cpu);
	return r;
}

/*
 * Client FLUSHes, merged.  At QD32 with a sync every few writes, a FLUSH
 * was a job of its own: about 30 waited at once behind the device's
 * workers, each writing its own few runs and holding a worker until its
 * writes and the flush were answered, and a FLUSH took five round trips
 * of a link.  Queued instead, they hold no worker: a pass takes every
 * FLUSH queued when it begins and writes back up to the newest of their
 * sequences (every write acknowledged before that FLUSH arrived is in
 * the cache by then), so one pass answers them all, in about one round
 * trip if its runs go with FUA (wb_flush_runs).  Up to
 * WB_FLUSH_PASSES run at once, so that a FLUSH arriving during a pass
 * need not wait for its end.
 */
static void
wb_flush_pass_run(struct job *job)
{
	struct wb_flush_pass *p = container_of(job, struct wb_flush_pass, job);
	struct wb_target *t = p->t;

	for (;;) {
		pthread_mutex_lock(&t->fq_lock);
		struct wb_flush_wait *batch = t->fq_head;
		t->fq_head = NULL;
		t->fq_tail = &t->fq_head;
		if (!batch) {
			p->busy = false; /* may be queued again from here */
			pthread_mutex_unlock(&t->fq_lock);
			return;
		}
		uint64_t max_seq = 0, n = 0;
		for (struct wb_flush_wait *w = batch; w; w = w->next, n++)
			if (w->seq > max_seq)
				max_seq = w->seq;
		/* Read before the pass takes a page: a change counted by
		 * then is in the cache for it to take. */
		p->changes = load_acquire(&t->changes);
		p->max_seq = max_seq;
		p->joined = NULL;
		p->joined_tail = &p->joined;
		p->joinable = true;
		pthread_mutex_unlock(&t->fq_lock);
		int r = wb_flush(t, max_seq, WB_REASON_FLUSH);
		/* Each answer may end its request, and so let its export be
		 * freed: the queue is not looked at after the last (the
		 * pass goes on only while FLUSHes are queued, which hold
		 * the export). */
		pthread_mutex_lock(&t->fq_lock);
		p->joinable = false;
		struct wb_flush_wait *joined = p->joined;
		bool more = t->fq_head != NULL;
		if (!more)
			p->busy = false;
		pthread_mutex_unlock(&t->fq_lock);
		uint64_t j = 0;
		for (struct wb_flush_wait *w = joined; w; w = w->next)
			j++;
		add_relaxed(&t->dev->flushes_merged, n - 1 + j);
		add_relaxed(&t->dev->flushes_joined, j);
		for (unsigned k = 0; k < 2; k++) {
			struct wb_flush_wait *list = k ? joined : batch;
			while (list) {
				struct wb_flush_wait *w = list;
				list = w->next;
				w->err = r;
				w->done(w);
			}
		}
		if (!more)
			return;
	}
}

void
wb_note_change(struct wb_target *t)
{
	atomic_fetch_add_explicit(&t->changes, 1, memory_order_release);
}

/* A pass of T's under way that W may join (under fq_lock), or NULL: W
 * asks for nothing the pass does not write back, as no write has come
 * into the cache since the pass began (its answers all did before: each
 * is counted in `changes` before it is answered). */
static struct wb_flush_pass *
wb_flush_joinable(struct wb_target *t, const struct wb_flush_wait *w)
{
	lock_assert_held(&t->fq_lock);
	uint64_t changes = load_acquire(&t->changes);
	for (unsigned i = 0; i < WB_FLUSH_PASSES; i++) {
		struct wb_flush_pass *p = &t->fq_pass[i];
		if (p->busy && p->joinable && w->seq <= p->max_seq &&
		    changes == p->changes)
			return p;
	}
	return NULL;
}

void
wb_flush_queue(struct wb_target *t, struct wb_flush_wait *w)
{
	struct wb_flush_pass *start = NULL;

	w->next = NULL;
	pthread_mutex_lock(&t->fq_lock);
	struct wb_flush_pass *p = wb_flush_joinable(t, w);
	if (p) {
		*p->joined_tail = w;
		p->joined_tail = &w->next;
		pthread_mutex_unlock(&t->fq_lock);
		return;
	}
	*t->fq_tail = w;
	t->fq_tail = &w->next;
	for (unsigned i = 0; i < WB_FLUSH_PASSES && !start; i++)
		if (!t->fq_pass[i].busy)
			start = &t->fq_pass[i];
	if (start)
		start->busy = true;
	pthread_mutex_unlock(&t->fq_lock);
	if (start) {
		start->job =
		    (struct job){ .run = wb_flush_pass_run, .waited_on = true };
		pool_submit(t->dev->pool, &start->job);
	}
}

/*
 * A sync's runs, taken WB_FUA_FLUSH_RUNS at a time (cache_take_runs), up
 * to MAX_SEQ, added to WIN.  The first batch, on a backend that takes FUA
 * itself (BACKEND_NATIVE_FUA): if the FLUSH has at most
 * remote.fua_max_runs runs to write and every write counted so far is
 * flushed already, they all go with FUA, and *BY_FUA is true: then the
 * FLUSH needs no flush of the device, one round trip where a write and a
 * flush cost two (FUA writes are not counted in `written`, so
 * wb_flush_written finds nothing to flush, unless someone's write
 * completed meanwhile: then it flushes, as before).  Else every run is
 * written plainly.  Returns the first failure (the window's; the runs
 * not written after it go back dirty), or 0.
 */
static int
wb_flush_runs(struct wb_target *t, struct wb_window *win, uint64_t max_seq,
    bool *by_fua)
{
	struct cache_run *runs[WB_FUA_FLUSH_RUNS + 1];
	uint32_t max_run = load_relaxed(&t->wb->max_run_pages);
	unsigned max = wb_fua_max(t), n, i;
	unsigned flags = 0;
	int r = 0;

	if (max > WB_FUA_FLUSH_RUNS)
		max = WB_FUA_FLUSH_RUNS;
	/* One more than FUA may take: then there is more than it may. */
	n = cache_take_runs(t->cf, max_seq, max_run, runs, max + 1);
	if (n > 0 && n <= max && wb_all_flushed(t))
		flags = BACKEND_WRITE_FUA;
	*by_fua = flags != 0;
	while (n > 0) {
		for (i = 0; i < n && r == 0; i++)
			r = wb_window_add_flags(win, t, runs[i], flags);
		/* A failure: report now, the pages stay dirty. */
		for (; i < n; i++)
			cache_end_run(runs[i], false);
		if (r < 0)
			return r;
		n = cache_take_runs(t->cf, max_seq, max_run, runs,
		    WB_FUA_FLUSH_RUNS + 1);
	}
	return 0;
}

static int
wb_flush_once(struct wb_target *t, uint64_t max_seq, enum wb_reason why)
{
	uint32_t max_run = load_relaxed(&t->wb->max_run_pages);
	struct cache_run *run;
	struct wb_window win;
	bool by_fua;
	int r = 0;

	uint64_t fails = load_acquire(&t->flush_fails);
	uint64_t served = load_acquire(&t->backend->losses_served);

	/* A shutdown's progress is reported by its owner
	 * (daemon_drain_report), for every export at once. */
	wb_window_init(&win, t->dev, why);
	(void)wb_flush_runs(t, &win, max_seq, &by_fua);
	int e = wb_window_drain(&win);
	if (e < 0) /* the pages stay dirty */
		r = wb_failed_with_loss(t, served, e) ? -EAGAIN : -EIO;
	else if (by_fua)
		add_relaxed(&t->dev->flushes_by_fua, 1);
	if (r == 0) {
		/* Writeback of older pages started by others: wait for it. */
		uint64_t seen_err = load_acquire(&t->err_seq);
		while (wb_pending(t, max_seq)) {
			if (load_acquire(&t->err_seq) != seen_err) {
				/* Someone else's run of our pages failed. */
				if (wb_pending(t, max_seq)) {
					r = -EIO;
					break;
				}
			}
			/* Pages failed back into the dirty list: take them. */
			run = cache_take_run(t->cf, max_seq, max_run);
			if (run) {
				int wr = wb_write_run(t, run, 0, why);
				if (wr < 0) {
					r = wb_failed_with_loss(t, served, wr) ?
					    -EAGAIN :
					    -EIO;
					break;
				}
				continue;
			}
			wb_wait_progress(t, 10);
		}
	}
	if (r == 0)
		r = wb_flush_written(t);
	/* Someone's flush failed meanwhile, and dirtied again pages this
	 * one may have to write (wb_redo_failed_flush): once more. */
	if (r == 0 && load_acquire(&t->flush_fails) != fails)
		r = -EAGAIN;
	/* A write failed with a connection the remote lost meanwhile (one
	 * it closed while idle, say): once more, on a new connection
	 * (wb_flush_work bounds the tries; a remote still away fails the
	 * next without a new loss). */
	if (r == -EIO && wb_dropped_since(t, served))
		r = -EAGAIN;
	return r;
}

/* wb_flush_once until no loss of the remote, or failed flush of a file,
 * overtakes it. */
#define WB_REDO_MAX 8
static int
wb_flush_work(struct wb_target *t, uint64_t max_seq, enum wb_reason why)
{
	int r = -EAGAIN;

	for (unsigned i = 0; i < WB_REDO_MAX && r == -EAGAIN; i++)
		r = wb_flush_once(t, max_seq, why);
	return r == -EAGAIN ? -EIO : r;
}

/*
 * FUA: make [OFF, OFF+LEN) of E durable, and nothing else.  The range's
 * dirty pages are written with BACKEND_WRITE_FUA.  A page of the range
 * under someone else's writeback is waited for (its run may hold an older
 * snapshot that must not land after ours) and looked at again; a page
 * found clean was written back by someone, without FUA, since the write
 * put it in the cache: then a flush of the device follows.  After
 * WB_FUA_MAX_ROUNDS rounds of waiting (a writer keeps re-dirtying the
 * range and others keep taking it), it falls back to the FLUSH rule for
 * sequence SEQ, which always ends.
 */
#define WB_FUA_MAX_ROUNDS 100

static int
wb_fua_work(struct wb_target *t, uint64_t off, uint64_t len, uint64_t seq);

int
wb_write_range_fua(struct wb_target *t, uint64_t off, uint64_t len,
    uint64_t seq)
{
	uint64_t cpu = wb_thread_cpu_ns();
	int r = wb_fua_work(t, off, len, seq);

	wb_cpu_account(t->dev, cpu);
	return r;
}

static int
wb_fua_work(struct wb_target *t, uint64_t off, uint64_t len, uint64_t seq)
{
	uint32_t ps = t->wb->page_size;
	uint32_t max_run = load_relaxed(&t->wb->max_run_pages);
	uint64_t first = off / ps, end = (off + len + ps - 1) / ps;
	uint64_t fails = load_acquire(&t->flush_fails);
	uint64_t served = load_acquire(&t->backend->losses_served);
	bool need_flush = false;

	if (len == 0)
		return wb_flush_work(t, seq, WB_REASON_FUA);
	for (unsigned round = 0;; round++) {
		struct cache_run *run;
		uint64_t next = first;
		unsigned seen = 0;

		while ((run = cache_take_range_run(t->cf, &next, end, max_run,
			    &seen))) {
			int r = wb_write_run(t, run, BACKEND_WRITE_FUA,
			    WB_REASON_FUA);
			/* The pages stay dirty.  Met a lost connection: the
			 * FLUSH rule, which tries again. */
			if (r < 0)
				return wb_failed_with_loss(t, served, r) ?
				    wb_flush_work(t, seq, WB_REASON_FUA) :
				    -EIO;
		}
		if (seen & (CACHE_RANGE_CLEAN | CACHE_RANGE_BUSY))
			need_flush = true;
		if (!(seen & CACHE_RANGE_BUSY))
			break;
		if (round == WB_FUA_MAX_ROUNDS)
			return wb_flush_work(t, seq, WB_REASON_FUA);
		wb_wait_progress(t, 10);
	}
	if (!need_flush)
		return 0;
	int r = wb_flush_written(t);
	/* Redone after a loss, or someone's failed flush of a file dirtied
	 * pages again meanwhile: the range's pages again, and the rest. */
	if (r == 0 && load_acquire(&t->flush_fails) != fails)
		r = -EAGAIN;
	return r == -EAGAIN ? wb_flush_work(t, seq, WB_REASON_FUA) : r;
}

/*
 * After background or periodic writeback (periodic work runs every
 * dirty_writeback_centisecs, written or not): flush each of DEV's targets
 * that writeback wrote to since the last flush and that keeps unflushed
 * ranges (wb_target.uf), at most every backend->commit_ms (0: never), so
 * that a read seldom finds one and waits for a flush, as an NFS client
 * commits its unstable writes.  A failure is the writeback's
 * (wb_flush_written).
 */
static void
wb_commit(struct wb_dev *dev)
{
	/* Not while the device fails or its remote is away: a commit is
	 * owed until it can be made, and a worker would wait meanwhile. */
	if (wb_backing_off(dev))
		return;
	for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
		struct wb_target *t = wb_dev_target(dev, i);
		struct backend_state st;
		bool due = false, sent = false;
		if (!t ||
		    !(t->backend->caps &
			(BACKEND_FLUSH_BEFORE_READ |
			    BACKEND_REDO_AFTER_LOSS)) ||
		    (backend_get_state(t->backend, &st) && !st.connected))
			continue;
		uint64_t ms = load_relaxed(&t->backend->commit_ms);
		pthread_mutex_lock(&t->uf_lock);
		wb_uf_prune_locked(t);
		uint64_t now = now_ns();
		if (ms > 0 && t->uf_owed &&
		    now >= t->uf_commit_ns + ms * 1000000u) {
			t->uf_commit_ns = now;
			t->uf_owed = false;
			due = true;
		}
		pthread_mutex_unlock(&t->uf_lock);
		if (due)
			(void)wb_flush_written_sent(t, &sent);
		if (sent)
			add_relaxed(&dev->commits, 1);
	}
}

/* Above the background threshold, the cache's or DEV's share of it. */
static bool
wb_over_background(const struct wb_ctl *wb, struct wb_dev *dev,
    uint64_t dirty_pages, uint64_t dev_dirty)
{
	uint64_t bg = load_relaxed(&wb->bg_pages);
	unsigned max_ratio = load_relaxed(&dev->max_ratio);

	/* A device's own threshold is its share of the global one. */
	return dirty_pages > bg ||
	    (max_ratio < 100 && dev_dirty > bg * max_ratio / 100);
}

/* Foreground work waiting or running on DEV: a FLUSH, a FUA write, a
 * sync, a miss or a fill. */
static bool
wb_dev_foreground(struct wb_dev *dev)
{
	return load_relaxed(&dev->work_by_reason[WB_REASON_FLUSH]) ||
	    load_relaxed(&dev->work_by_reason[WB_REASON_FUA]) ||
	    load_relaxed(&dev->work_by_reason[WB_REASON_SYNC]) ||
	    load_relaxed(&dev->work_reads);
}

/*
 * Write-behind leaves a client that FLUSHes often to its FLUSHes: while
 * every export of DEV with dirty pages had a FLUSH in the last
 * remote.write_behind_defer_ms, and those pages fit in a sync's window
 * (WB_SYNC_WINDOW), the next FLUSHes write them all in one window each,
 * with FUA, in one round trip, as they would if write-behind had taken
 * them first; taken first, they cost a worker's wake-up for every few
 * writes, and the FLUSH waited for runs that another thread's replies
 * end.  LAN profile, 4 KiB random writes at QD32 with a FLUSH every 64,
 * three runs: 15,300 writes/s with write-behind, 19,400 with it off (the
 * remote alone: 19,800); QD1 commits the same or better; WAN the same.
 * A burst of more than a window, or an export that does not FLUSH, is
 * written behind as before.  Never with periodic writeback off
 * (dirty_writeback_centisecs 0): the periodic pass is what takes the
 * pages a client leaves when it stops flushing, once the FLUSH is no
 * longer expected.  COUNT: write-behind would start otherwise (the
 * count in `wbctl status`).  "Lately": remote.write_behind_defer_ms
 * (0: never defer).  With the remote's CPU its own (nbdkit pinned to one
 * core, fio and wbd to the other: a remote on another host), the same
 * case went the other way: 17,180-18,770 writes/s never deferring,
 * 12,510-15,760 deferring for 100 ms; the remote alone 20,890-22,440.
 */
static bool
wb_behind_defers(struct wb_dev *dev, bool count)
{
	struct backend *b = wb_dev_backend(dev);
	uint64_t defer_ns =
	    b ? load_relaxed(&b->behind_defer_ms) * 1000000ull : 0;
	uint64_t seen = load_relaxed(&dev->flush_seen_ns);
	uint64_t now = now_ns(), dirty = 0;

	/* No FLUSH on the device lately: the write path's fast answer. */
	if (!seen || now - seen >= defer_ns)
		return false;
	for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
		struct wb_target *t = wb_dev_target(dev, i);
		uint64_t cached, d;
		if (!t)
			continue;
		if (load_relaxed(&t->wb->writeback_cs) == 0)
			return false;
		cache_file_stats(t->cf, &cached, &d);
		if (d == 0)
			continue;
		/* Another export's FLUSHes do not write this one's pages. */
		uint64_t t_seen = load_relaxed(&t->flush_seen_ns);
		if (!t_seen || now - t_seen >= defer_ns)
			return false;
		dirty += d;
	}
	if (dirty == 0 || dirty > WB_SYNC_WINDOW)
		return false;
	if (count)
		add_relaxed(&dev->behind_deferred, 1);
	return true;
}

/*
 * Write-behind (remote.write_behind): a remote's dirty data is written
 * back as soon as the device is idle, not once it passes
 * dirty_background or grows older than dirty_expire: the link's idle
 * time is what a later FLUSH would wait for.  Idle: no foreground work
 * (wb_dev_foreground).  It yields to that work as it comes: a FLUSH, a
 * miss.  Then it is owed (wb_dev.behind_owed), and the end of that work
 * resumes it (wb_foreground_done), whether or not periodic writeback
 * runs (dirty_writeback_centisecs 0) or another write comes.  Yielding
 * to a job waiting on the pool, it is owed too (wb_background_run).
 */
static bool
wb_write_behind_due(struct wb_dev *dev)
{
	struct backend *b = wb_dev_backend(dev);

	return b && load_relaxed(&b->write_behind) && !wb_dev_foreground(dev) &&
	    !wb_behind_defers(dev, false);
}

/* Write-behind is on for DEV, and DEV is idle now; if it is not, the
 * write-behind is owed to the end of its foreground work.  The flag is
 * set before the work is looked at again, and wb_foreground_done lowers
 * the work before it looks at the flag: one of the two sees the other. */
static bool
wb_write_behind_now(struct wb_dev *dev)
{
	struct backend *b = wb_dev_backend(dev);

	if (!b || !load_relaxed(&b->write_behind))
		return false;
	if (!wb_dev_foreground(dev))
		return !wb_behind_defers(dev, true);
	atomic_store_explicit(&dev->behind_owed, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst);
	return !wb_dev_foreground(dev) && !wb_behind_defers(dev, true);
}

/* Write-behind on DEV yields to other work: owed to its end. */
static void
wb_owe_write_behind(struct wb_dev *dev)
{
	struct backend *b = wb_dev_backend(dev);

	if (b && load_relaxed(&b->write_behind))
		atomic_store_explicit(&dev->behind_owed, 1,
		    memory_order_seq_cst);
}

bool
wb_background_due(const struct wb_ctl *wb, struct wb_dev *dev,
    uint64_t dirty_pages, uint64_t dev_dirty)
{
	return wb_over_background(wb, dev, dirty_pages, dev_dirty) ||
	    wb_write_behind_now(dev);
}

static bool wb_kick_background_queued(struct wb_dev *dev);

/*
 * The debt is taken (the flag lowered) before the background job is
 * queued, never after: a job queued first could run at once, yield to
 * new work and owe itself again, and a lowering after that would lose
 * the debt with nobody left to pay it (seen as write-behind that never
 * resumed after a reader stopped).  If the job is queued or running
 * already, the debt goes back for it to find as it ends; if it ended
 * meanwhile without seeing it, the debt is paid here after all.
 */
void
wb_foreground_done(struct wb_dev *dev, const struct wb_ctl *wb)
{
	for (;;) {
		atomic_thread_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&dev->behind_owed,
			memory_order_seq_cst) ||
		    load_relaxed(&wb->stopping) || wb_backing_off(dev) ||
		    !wb_write_behind_due(dev) || wb_dev_dirty_pages(dev) == 0)
			return;
		if (!atomic_exchange_explicit(&dev->behind_owed, 0,
			memory_order_seq_cst))
			return; /* another took it */
		if (wb_kick_background_queued(dev))
			return;
		atomic_store_explicit(&dev->behind_owed, 1,
		    memory_order_seq_cst);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&dev->bg_queued, memory_order_seq_cst))
			return; /* its end sees the flag (wb_background_run) */
	}
}

/* After foreground work on DEV, or periodically: resume write-behind if
 * it is due and DEV holds dirty data (not while shutting down: the drain
 * writes everything). */
static void
wb_resume_write_behind(struct wb_dev *dev, const struct wb_ctl *wb)
{
	if (wb && !load_relaxed(&wb->stopping) && wb_write_behind_due(dev) &&
	    wb_dev_dirty_pages(dev) > 0)
		wb_kick_background(dev);
}

/*
 * The least background work writes once woken, as the kernel's flusher
 * writes a chunk of at least MIN_WRITEBACK_PAGES (4 MiB) before it looks
 * at the threshold again: without it, every write that crosses the
 * threshold wakes a worker for one run, and the wake-ups cost more than
 * the runs (a 1 MiB sequential writer: 12 % less CPU per write with it).
 * At most 1/64 of the cache, so that a small cache is not emptied.
 */
#define WB_BG_CHUNK_BYTES (4u << 20)

static uint64_t
wb_background_chunk(const struct wb_ctl *wb)
{
	uint64_t pages = WB_BG_CHUNK_BYTES / wb->page_size;

	if (pages > wb->total_pages / 64)
		pages = wb->total_pages / 64;
	return pages;
}

/* writeback.background_nice, from any of DEV's targets (0: none). */
static unsigned
wb_dev_bg_nice(struct wb_dev *dev)
{
	for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
		struct wb_target *t = wb_dev_target(dev, i);
		if (t)
			return load_relaxed(&t->wb->bg_nice);
	}
	return 0;
}

/* Background: round-robin over the device's exports until below the
 * background threshold (looked at between chunks), or the device
 * fails. */
static void
wb_background_run(struct job *job)
{
	struct wb_dev *dev =
	    (struct wb_dev *)((char *)job - offsetof(struct wb_dev, bg_job));
	struct wb_window win;
	bool progress = true;
	uint64_t cpu = wb_thread_cpu_ns();
	uint64_t written = 0;

	wb_window_init(&win, dev, WB_REASON_BACKGROUND);
	/* Nobody waits for it: at writeback.background_nice (wbnice.h). */
	wbnice_enter(wb_dev_bg_nice(dev));
	while (progress && !wb_backing_off(dev)) {
		struct pool_stats ps;
		/* Background work yields to waiting work (a FLUSH, a miss):
		 * the next write past the threshold queues it again. */
		pool_get_stats(dev->pool, &ps);
		if (ps.queued > 0) {
			/* Write-behind is owed to this job's end (below),
			 * which queues it anew behind that work: no write
			 * may come to. */
			wb_owe_write_behind(dev);
			break;
		}
		progress = false;
		for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
			struct wb_target *t = wb_dev_target(dev, i);
			if (!t || wb_skip(t))
				continue;
			if (written >= wb_background_chunk(t->wb))
				written = 0;
			if (written == 0) {
				bool over = wb_over_background(t->wb, dev,
				    cache_dirty_pages(t->wb->cache),
				    wb_dev_dirty_pages(dev));
				if (!over && !wb_write_behind_now(dev))
					goto out;
				win.behind = !over;
			}
			/* Write-behind yields to foreground work at once:
			 * its runs in flight end, it takes no more; owed to
			 * the work's end (wb_foreground_done). */
			if (win.behind && !wb_write_behind_now(dev))
				goto out;
			uint32_t max_run = load_relaxed(&t->wb->max_run_pages);
			struct cache_run *run =
			    cache_take_run(t->cf, UINT64_MAX, max_run);
			if (!run)
				continue;
			written += run->npages;
			progress = true;
			/*
			 * Write-behind for clients that FLUSH (a few writes,
			 * then a FLUSH): while nothing else is unflushed (no
			 * plain write of this job's, every write counted
			 * flushed) and what is dirty fits in what is left of
			 * remote.fua_max_runs since their last FLUSH, each run
			 * goes with FUA on a remote that takes it, so the FLUSH
			 * that follows finds them durable and sends no flush:
			 * one round trip, where plain writes in flight when it
			 * came would cost it two.  A backlog, or a writer that
			 * streams between FLUSHes, is written plain: a FUA
			 * write costs the remote a sync of its own.
			 */
			if (win.behind && !win.plain && wb_fua_max(t) > 0 &&
			    wb_fua_ok(t, wb_dev_dirty_pages(dev))) {
				add_relaxed(&t->fua_since_flush, 1);
				if (wb_window_add_flags(&win, t, run,
					BACKEND_WRITE_FUA) < 0)
					goto out;
				continue;
			}
			if (wb_window_add(&win, t, run) < 0)
				goto out;
		}
		/* Nothing dirty to take, runs in flight: end the oldest and
		 * look again, rather than wait for all of them and end.  A
		 * writer streaming into an idle device dirties the next run
		 * while the first are written; ended, the job would hold
		 * the link idle for the whole window's round trip, then a
		 * commit's, before a write kicked it again. */
		if (!progress && win.n > 0 && win.err == 0) {
			wb_window_end_oldest(&win);
			progress = true;
		}
	}
out:
	/* A FLUSH may wait for the runs in flight: ended at full priority. */
	wbnice_leave();
	wb_window_drain(&win);
	wb_commit(dev);
	wb_cpu_account(dev, cpu);
	atomic_store_explicit(&dev->bg_queued, 0, memory_order_seq_cst);
	/* Owed while this job ran, its kick lost to it: queued anew. */
	struct wb_target *t0 = NULL;
	for (unsigned i = 0; i < wb_dev_n_targets(dev) && !t0; i++)
		t0 = wb_dev_target(dev, i);
	if (t0)
		wb_foreground_done(dev, t0->wb);
}

static void
wb_periodic_run(struct job *job)
{
	struct wb_dev *dev = (struct wb_dev *)((char *)job -
	    offsetof(struct wb_dev, periodic_job));
	struct wb_window win;
	uint64_t cpu = wb_thread_cpu_ns();

	wb_window_init(&win, dev, WB_REASON_PERIODIC);
	wbnice_enter(wb_dev_bg_nice(dev));
	if (!wb_backing_off(dev)) {
		for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
			struct wb_target *t = wb_dev_target(dev, i);
			struct wb_thresholds th;
			if (!t || wb_skip(t))
				continue;
			wb_ctl_snapshot(t->wb, &th);
			uint64_t now = now_ns();
			uint64_t cutoff =
			    now > th.expire_ns ? now - th.expire_ns : 0;
			struct cache_run *run;
			while ((run = cache_take_expired_run(t->cf, cutoff,
				    th.max_run_pages)))
				if (wb_window_add(&win, t, run) < 0)
					goto out;
		}
	}
out:
	wbnice_leave();
	wb_window_drain(&win);
	wb_commit(dev);
	wb_cpu_account(dev, cpu);
	store_release(&dev->periodic_queued, 0);
	/* Write-behind that yielded to foreground work (a FLUSH, a miss)
	 * and was not kicked by a write since. */
	struct wb_target *t0 = NULL;
	for (unsigned i = 0; i < wb_dev_n_targets(dev) && !t0; i++)
		t0 = wb_dev_target(dev, i);
	if (t0)
		wb_resume_write_behind(dev, t0->wb);
}

/* Queue DEV's background job unless it is queued or running; true if
 * this call queued it. */
static bool
wb_kick_background_queued(struct wb_dev *dev)
{
	if (atomic_exchange_explicit(&dev->bg_queued, 1, memory_order_acq_rel))
		return false;
	memset(&dev->bg_job, 0, sizeof dev->bg_job);
	dev->bg_job.run = wb_background_run;
	pool_submit(dev->pool, &dev->bg_job);
	return true;
}

void
wb_kick_background(struct wb_dev *dev)
{
	(void)wb_kick_background_queued(dev);
}

void
wb_kick_periodic(struct wb_dev *dev)
{
	if (atomic_exchange_explicit(&dev->periodic_queued, 1,
		memory_order_acq_rel))
		return;
	memset(&dev->periodic_job, 0, sizeof dev->periodic_job);
	dev->periodic_job.run = wb_periodic_run;
	pool_submit(dev->pool, &dev->periodic_job);
}
