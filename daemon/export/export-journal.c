/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * export-journal.c - an export's write log in use (export-journal.h).
 *
 * Why what a commit logged may be given back once the backing device has
 * been written and flushed up to the write sequence W read when the commit
 * took its ranges: every write whose range that commit took was given its
 * sequence before it was noted, so before the ranges were taken, so it is
 * at most W.  A write that landed after and whose data the commit read
 * anyway was noted after, so a later commit logs it again (if a FLUSH
 * needed it).  The marks below keep (log sequence, W) per commit, so that
 * a flush of the backing up to any W gives back a prefix of the log.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cache.h"
#include "clock.h"
#include "export-journal.h"
#include "fill.h"
#include "log.h"
#include "pool.h"
#include "ratelimit.h"
#include "writeback.h"

/* Pages noted per range: bytes [lo, hi) of the export, page-aligned. */
struct xj_range {
	uint64_t lo, hi;
};

/* One commit's place in the log: records before JSEQ hold writes of
 * sequence at most WSEQ only. */
struct xj_mark {
	uint64_t jseq, wseq;
};

#define XJ_MARKS 64
/* A record holds at most this much (a record's length is 32 bits). */
#define XJ_REC_BYTES (1u << 20)
/* One append holds at most this much data: the buffer it is read into. */
#define XJ_BATCH_BYTES (8u << 20)
#define XJ_BATCH_RECS (XJ_BATCH_BYTES / 4096)
/* "FLUSH written back instead": logged this often at most. */
#define XJ_FALLBACK_LOG_NS 10000000000ull

struct export_journal {
	struct journal *j;
	char *path;
	enum journal_mode mode;
	uint64_t size_bytes; /* as configured */
	struct xj_target tg;
	uint32_t page_size;

	/* What writes noted since the last commit took them. */
	pthread_mutex_t set_lock;
	struct xj_range *set;
	size_t n, cap;
	uint64_t set_bytes; /* noted, overlaps counted */
	uint64_t set_max;   /* more than this: overflow */
	bool discarded;     /* a TRIM or zeroing among them */
	bool overflow;      /* more than the log could take */
	uint64_t gen;       /* commits that took the set */

	/* The log: one commit, reclaim or replay at a time. */
	pthread_mutex_t lock;
	uint64_t synced_gen; /* every commit up to it is durable */
	struct xj_mark marks[XJ_MARKS];
	unsigned first, nmarks;
	bool broken; /* atomic: an I/O error; not used again */
	/* atomic: broken, and still holding records that a start would
	 * replay (journal_invalidate has not yet succeeded). */
	bool stale;
	uint8_t *buf; /* a batch's data */
	struct journal_rec *recs;

	/* FLUSHes on the log's own workers (xj_pool); reclaim on the
	 * export's device's pool. */
	struct pool *commit_pool;
	struct job reclaim_job;
	int reclaim_queued; /* atomic */
	uint64_t last_reclaim_ns;

	/* For wbctl status (atomics). */
	uint64_t commits, shared, fallbacks, logged_bytes, log_ns, backing_ns,
	    reclaims;
	const char *fallback_why;
	struct ratelimit fallback_rl;
	struct journal_replay_stats replay; /* set before serving */
	uint64_t replay_ns;
};

/* --- noting writes ---------------------------------------------------- */

static void
xj_set_add_locked(struct export_journal *xj, uint64_t lo, uint64_t hi)
{
	struct xj_range *last = xj->n ? &xj->set[xj->n - 1] : NULL;
	/* Touching the last range (a sequential writer, a page written
	 * again): it grows by what is new only.  A page noted twice, apart,
	 * counts twice. */
	bool merge = last && lo <= last->hi && hi >= last->lo;
	uint64_t nlo = merge && last->lo < lo ? last->lo : lo;
	uint64_t nhi = merge && last->hi > hi ? last->hi : hi;
	uint64_t grows = (nhi - nlo) - (merge ? last->hi - last->lo : 0);

	if (xj->overflow)
		return;
	if (xj->set_bytes + grows > xj->set_max) {
		/* More than the log can hold: the next commit writes back. */
		xj->overflow = true;
		xj->n = 0;
		return;
	}
	xj->set_bytes += grows;
	if (merge) {
		*last = (struct xj_range){ nlo, nhi };
		return;
	}
	if (xj->n == xj->cap) {
		size_t cap = xj->cap ? xj->cap * 2 : 64;
		struct xj_range *s = realloc(xj->set, cap * sizeof *s);
		if (!s) {
			xj->overflow = true; /* written back instead */
			xj->n = 0;
			return;
		}
		xj->set = s;
		xj->cap = cap;
	}
	xj->set[xj->n++] = (struct xj_range){ lo, hi };
}

uint64_t
xj_note_write(struct export_journal *xj, uint64_t off, uint64_t len)
{
	uint64_t ps = xj->page_size;
	uint64_t lo = off & ~(ps - 1), hi = (off + len + ps - 1) & ~(ps - 1);

	pthread_mutex_lock(&xj->set_lock);
	xj_set_add_locked(xj, lo, hi);
	uint64_t gen = xj->gen;
	pthread_mutex_unlock(&xj->set_lock);
	return gen;
}

uint64_t
xj_note_discard(struct export_journal *xj)
{
	pthread_mutex_lock(&xj->set_lock);
	xj->discarded = true;
	uint64_t gen = xj->gen;
	pthread_mutex_unlock(&xj->set_lock);
	return gen;
}

uint64_t
xj_gen(struct export_journal *xj)
{
	pthread_mutex_lock(&xj->set_lock);
	uint64_t gen = xj->gen;
	pthread_mutex_unlock(&xj->set_lock);
	return gen;
}

bool
xj_on_write(const struct export_journal *xj)
{
	return xj->mode == JOURNAL_ON_WRITE;
}

struct pool *
xj_pool(struct export_journal *xj)
{
	return __atomic_load_n(&xj->broken, __ATOMIC_RELAXED) ? NULL :
								xj->commit_pool;
}

bool
xj_same(const struct export_journal *xj, const struct export_journal_conf *jc)
{
	if (!xj || !jc->path)
		return !xj && !jc->path;
	return strcmp(xj->path, jc->path) == 0 && xj->mode == jc->mode &&
	    (jc->size_bytes == 0 || jc->size_bytes == xj->size_bytes);
}

/* What a commit took. */
struct xj_taken {
	struct xj_range *set;
	size_t n;
	bool discarded, overflow;
	uint64_t gen, wseq;
};

static void
xj_take(struct export_journal *xj, struct xj_taken *t)
{
	pthread_mutex_lock(&xj->set_lock);
	*t = (struct xj_taken){ .set = xj->set,
		.n = xj->n,
		.discarded = xj->discarded,
		.overflow = xj->overflow,
		.gen = ++xj->gen };
	/* Every write noted so far had its sequence before it was noted. */
	t->wseq = __atomic_load_n(xj->tg.write_seq, __ATOMIC_ACQUIRE);
	xj->set = NULL;
	xj->n = xj->cap = 0;
	xj->set_bytes = 0;
	xj->discarded = xj->overflow = false;
	pthread_mutex_unlock(&xj->set_lock);
}

/* A commit failed: what it took is for the next one. */
static void
xj_put_back(struct export_journal *xj, struct xj_taken *t)
{
	pthread_mutex_lock(&xj->set_lock);
	for (size_t i = 0; i < t->n; i++)
		xj_set_add_locked(xj, t->set[i].lo, t->set[i].hi);
	xj->discarded |= t->discarded;
	xj->overflow |= t->overflow;
	pthread_mutex_unlock(&xj->set_lock);
	free(t->set);
	t->set = NULL;
}

static int
xj_range_cmp(const void *a, const void *b)
{
	const struct xj_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sort T's ranges and merge those that overlap or touch. */
static void
xj_merge(struct xj_taken *t)
{
	size_t out = 0;

	qsort(t->set, t->n, sizeof *t->set, xj_range_cmp);
	for (size_t i = 0; i < t->n; i++) {
		if (out > 0 && t->set[i].lo <= t->set[out - 1].hi) {
			if (t->set[i].hi > t->set[out - 1].hi)
				t->set[out - 1].hi = t->set[i].hi;
			continue;
		}
		t->set[out++] = t->set[i];
	}
	t->n = out;
}

/* --- the log, under xj.lock ------------------------------------------- */

static void
xj_mark_push_locked(struct export_journal *xj, uint64_t wseq)
{
	struct journal_usage u;

	journal_get_usage(xj->j, &u);
	if (xj->nmarks == XJ_MARKS) {
		/* The oldest goes: a later flush gives back as much. */
		xj->first = (xj->first + 1) % XJ_MARKS;
		xj->nmarks--;
	}
	xj->marks[(xj->first + xj->nmarks) % XJ_MARKS] =
	    (struct xj_mark){ .jseq = u.next_seq, .wseq = wseq };
	xj->nmarks++;
}

static void
xj_break_locked(struct export_journal *xj, const char *what, int err)
{
	if (__atomic_exchange_n(&xj->broken, true, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&xj->stale, true, __ATOMIC_RELAXED);
	log_errorx("export \"%s\": write log %s: %s failed: %s; the log is "
		   "no longer used: each FLUSH now writes back and flushes "
		   "the backing device, and fails until the log's old records "
		   "are on the backing device and the log is emptied "
		   "(wbctl status: journal.broken, journal.stale)",
	    xj->tg.name, xj->path, what, strerror(-err));
}

/*
 * A broken log whose every record is now on the backing device: empty it
 * (zero its superblocks), so that no start replays those records over
 * newer data that FLUSHes since have put there.  Until that succeeds, a
 * FLUSH fails (xj_write_back_locked): answering one would promise what a
 * crash could undo.
 */
static void
xj_invalidate_locked(struct export_journal *xj)
{
	unsigned quiet;
	int r = journal_invalidate(xj->j);

	if (r == 0) {
		__atomic_store_n(&xj->stale, false, __ATOMIC_RELAXED);
		log_warnx(
		    "export \"%s\": write log %s emptied (its superblocks "
		    "zeroed): everything it held is on the backing "
		    "device; FLUSHes write back there from now on",
		    xj->tg.name, xj->path);
	} else if (ratelimit_due(&xj->fallback_rl, XJ_FALLBACK_LOG_NS,
		       &quiet)) {
		log_errorx(
		    "export \"%s\": write log %s: cannot be emptied: %s; "
		    "FLUSHes fail until it can (%u more not logged)",
		    xj->tg.name, xj->path, strerror(-r), quiet);
	}
}

/* Give back every record the marks show durable at MAX_SEQ. */
static void
xj_release_locked(struct export_journal *xj, uint64_t max_seq)
{
	uint64_t jseq = 0;

	while (xj->nmarks > 0 && xj->marks[xj->first].wseq <= max_seq) {
		jseq = xj->marks[xj->first].jseq;
		xj->first = (xj->first + 1) % XJ_MARKS;
		xj->nmarks--;
	}
	if (jseq != 0 && !__atomic_load_n(&xj->broken, __ATOMIC_RELAXED)) {
		journal_release(xj->j, jseq);
		int r = journal_checkpoint(xj->j);
		if (r < 0)
			xj_break_locked(xj, "a checkpoint", r);
	}
	if (xj->nmarks == 0 && __atomic_load_n(&xj->stale, __ATOMIC_RELAXED))
		xj_invalidate_locked(xj);
}

/*
 * Append T's pages (merged) to the log and sync it.  0 when durable; 1
 * when the log cannot take them (*WHY says why: nothing is lost, the
 * caller writes back instead); a negative errno when the log failed (it
 * is then broken).
 */
static int
xj_log_locked(struct export_journal *xj, struct xj_taken *t, const char **why)
{
	const struct xj_target *e = &xj->tg;
	size_t i = 0;
	uint64_t at = t->n ? t->set[0].lo : 0, logged = 0;
	int r;

	while (i < t->n) {
		/* One batch: records of up to XJ_REC_BYTES, the whole of at
		 * most XJ_BATCH_BYTES. */
		unsigned nrec = 0;
		uint64_t bytes = 0;
		while (i < t->n && nrec < XJ_BATCH_RECS &&
		    bytes < XJ_BATCH_BYTES) {
			uint64_t end = t->set[i].hi < e->size_bytes ?
			    t->set[i].hi :
			    e->size_bytes;
			uint64_t len = end - at;
			if (len > XJ_REC_BYTES)
				len = XJ_REC_BYTES;
			if (len > XJ_BATCH_BYTES - bytes)
				len = XJ_BATCH_BYTES - bytes;
			if (!cache_peek(e->cf, xj->buf + bytes, at,
				(uint32_t)len)) {
				*why = "a page logged is no longer in the "
				       "cache";
				return 1;
			}
			xj->recs[nrec++] =
			    (struct journal_rec){ .type = JOURNAL_REC_WRITE,
				    .off = at,
				    .len = (uint32_t)len,
				    .data = xj->buf + bytes };
			bytes += len;
			at += len;
			if (at >= end && ++i < t->n)
				at = t->set[i].lo;
		}
		if (!journal_fits(xj->j, journal_batch_bytes(nrec, bytes))) {
			*why = "the log is full";
			return 1;
		}
		if ((r = journal_append(xj->j, xj->recs, nrec)) < 0) {
			if (r == -ENOSPC) {
				*why = "the log is full";
				return 1;
			}
			xj_break_locked(xj, "a write", r);
			*why = "the log failed";
			return r;
		}
		logged += bytes;
	}
	if ((r = journal_sync(xj->j)) < 0) {
		xj_break_locked(xj, "fdatasync", r);
		*why = "the log failed";
		return r;
	}
	__atomic_add_fetch(&xj->logged_bytes, logged, __ATOMIC_RELAXED);
	xj_mark_push_locked(xj, t->wseq);
	return 0;
}

/* What a FLUSH does without a log: write back everything up to T's
 * sequence and flush the backing device; then nothing in the log is
 * needed any more. */
static int
xj_write_back_locked(struct export_journal *xj, struct xj_taken *t,
    const char *why)
{
	const struct xj_target *e = &xj->tg;
	unsigned quiet;

	__atomic_add_fetch(&xj->fallbacks, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&xj->fallback_why, why, __ATOMIC_RELAXED);
	if (ratelimit_due(&xj->fallback_rl, XJ_FALLBACK_LOG_NS, &quiet))
		log_info("export \"%s\": a FLUSH writes back to the backing "
			 "device instead of the write log: %s (%u more not "
			 "logged)",
		    e->name, why, quiet);
	uint64_t start = now_ns();
	int r = wb_flush(e->wt, t->wseq, WB_REASON_FLUSH);
	__atomic_add_fetch(&xj->backing_ns, now_ns() - start, __ATOMIC_RELAXED);
	if (r == 0) {
		/* Every record holds writes of sequence up to t->wseq. */
		xj_mark_push_locked(xj, t->wseq);
		xj_release_locked(xj, t->wseq);
		if (__atomic_load_n(&xj->stale, __ATOMIC_RELAXED))
			r = -EIO; /* the log could not be emptied */
	}
	return r;
}

int
xj_commit(struct export_journal *xj, uint64_t gen)
{
	struct xj_taken t;
	const char *why = NULL;
	int r;

	pthread_mutex_lock(&xj->lock);
	if (xj->synced_gen > gen) {
		/* A commit that began after this FLUSH arrived is done. */
		pthread_mutex_unlock(&xj->lock);
		__atomic_add_fetch(&xj->shared, 1, __ATOMIC_RELAXED);
		return 1;
	}
	xj_take(xj, &t);
	if (__atomic_load_n(&xj->broken, __ATOMIC_RELAXED))
		why = "the log failed earlier";
	else if (t.discarded)
		why = "a TRIM or zeroing since the last FLUSH";
	else if (t.overflow)
		why = "more written since the last FLUSH than the log holds";
	if (!why) {
		uint64_t start = now_ns();
		xj_merge(&t);
		r = xj_log_locked(xj, &t, &why);
		__atomic_add_fetch(&xj->log_ns, now_ns() - start,
		    __ATOMIC_RELAXED);
		if (r == 0) {
			__atomic_add_fetch(&xj->commits, 1, __ATOMIC_RELAXED);
			r = 1;
		}
	}
	if (why)
		r = xj_write_back_locked(xj, &t, why);
	if (r >= 0)
		xj->synced_gen = t.gen;
	pthread_mutex_unlock(&xj->lock);
	if (r < 0)
		xj_put_back(xj, &t);
	free(t.set);
	return r;
}

void
xj_flushed(struct export_journal *xj, uint64_t max_seq)
{
	if (!xj)
		return;
	pthread_mutex_lock(&xj->lock);
	xj_release_locked(xj, max_seq);
	pthread_mutex_unlock(&xj->lock);
}

/* --- reclaim ----------------------------------------------------------- */

static void
xj_reclaim_run(struct job *job)
{
	struct export_journal *xj =
	    container_of(job, struct export_journal, reclaim_job);
	unsigned *holds = xj->tg.holds;
	uint64_t wseq = 0;

	pthread_mutex_lock(&xj->lock);
	if (xj->nmarks > 0)
		wseq = xj->marks[(xj->first + xj->nmarks - 1) % XJ_MARKS].wseq;
	pthread_mutex_unlock(&xj->lock);
	if (wseq > 0 && wb_flush(xj->tg.wt, wseq, WB_REASON_SYNC) == 0) {
		xj_flushed(xj, wseq);
		__atomic_add_fetch(&xj->reclaims, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&xj->reclaim_queued, 0, __ATOMIC_RELEASE);
	/* The last use of XJ: its export may be freed once let go. */
	__atomic_sub_fetch(holds, 1, __ATOMIC_RELEASE);
}

void
xj_tick(struct export_journal *xj, uint64_t interval_ns)
{
	struct journal_usage u;

	if (!xj || __atomic_load_n(&xj->broken, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&xj->reclaim_queued, __ATOMIC_ACQUIRE))
		return;
	/* The usage is read without xj.lock: a figure for a decision. */
	if (pthread_mutex_trylock(&xj->lock) != 0)
		return;
	journal_get_usage(xj->j, &u);
	bool any = xj->nmarks > 0;
	pthread_mutex_unlock(&xj->lock);
	uint64_t now = now_ns();
	if (!any ||
	    (u.used < u.size / 2 && now - xj->last_reclaim_ns < interval_ns))
		return;
	xj->last_reclaim_ns = now;
	__atomic_store_n(&xj->reclaim_queued, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(xj->tg.holds, 1, __ATOMIC_RELAXED);
	xj->reclaim_job = (struct job){ .run = xj_reclaim_run };
	pool_submit(xj->tg.pool, &xj->reclaim_job);
}

/* --- open and replay --------------------------------------------------- */

struct xj_replay {
	const struct xj_target *e;
	uint8_t *zeroes;
	char *err;
	size_t errlen;
};

/* Put bytes [OFF, OFF+LEN) of DATA into the cache, dirty, making room and
 * reading partial pages in as a writer would. */
static int
xj_replay_write(const struct xj_target *e, const uint8_t *data, uint64_t off,
    uint32_t len)
{
	uint64_t seq = __atomic_add_fetch(e->write_seq, 1, __ATOMIC_ACQ_REL);
	uint32_t done = 0;

	while (done < len) {
		uint64_t fill;
		uint32_t n = 0;
		switch (cache_write_part(e->cf, data + done, off + done,
		    len - done, seq, &fill, &n)) {
		case CACHE_WRITE_OK:
			return 0;
		case CACHE_WRITE_NEED_FILL: {
			done += n;
			int r = fill_page(e->wt, fill);
			if (r < 0)
				return r;
			break;
		}
		case CACHE_WRITE_NO_SPACE: {
			done += n;
			if (wb_write_for_space(e->wt))
				break;
			/* No room while the remote does not answer: the
			 * replay waits for it (daemon_install_export). */
			struct backend_state st;
			if (backend_get_state(e->wt->backend, &st) &&
			    !st.connected)
				return -ENOTCONN;
			wb_wait_progress(e->wt, 10);
			break;
		}
		}
	}
	return 0;
}

static int
xj_replay_cb(void *arg, const struct journal_rec *rec)
{
	struct xj_replay *rp = arg;
	const struct xj_target *e = rp->e;
	int r;

	if (rec->type == JOURNAL_REC_WRAP)
		return 0;
	if (rec->off > e->size_bytes || rec->len > e->size_bytes - rec->off) {
		snprintf(rp->err, rp->errlen,
		    "record %llu at bytes %llu+%u lies past the export's end",
		    (unsigned long long)rec->seq, (unsigned long long)rec->off,
		    rec->len);
		return -EINVAL;
	}
	const uint8_t *data = rec->type == JOURNAL_REC_WRITE ? rec->data : NULL;
	for (uint32_t at = 0; at < rec->len;) {
		uint32_t n =
		    rec->len - at < XJ_REC_BYTES ? rec->len - at : XJ_REC_BYTES;
		r = xj_replay_write(e, data ? data + at : rp->zeroes,
		    rec->off + at, n);
		if (r < 0) {
			snprintf(rp->err, rp->errlen,
			    r == -ENOTCONN ?
				"record %llu: the cache has no room for the "
				"log until the backing device answers: %s" :
				"record %llu: reading a partial page from the "
				"backing device failed: %s",
			    (unsigned long long)rec->seq, strerror(-r));
			return r;
		}
		at += n;
	}
	return 0;
}

struct export_journal *
xj_open(const struct xj_target *tg, const struct export_journal_conf *jc,
    char *err, size_t errlen)
{
	const struct xj_target *e = tg;
	struct export_journal *xj = calloc(1, sizeof *xj);
	if (xj)
		xj->size_bytes = jc->size_bytes;
	struct journal_identity id = { .name = e->name,
		.export_size = e->size_bytes,
		.backing = e->backing };
	char why[512];

	if (!xj || !(xj->path = strdup(jc->path)) ||
	    !(xj->buf = malloc(XJ_BATCH_BYTES)) ||
	    !(xj->recs = calloc(XJ_BATCH_RECS, sizeof *xj->recs))) {
		snprintf(err, errlen, "write log %s: out of memory", jc->path);
		xj_close(xj);
		return NULL;
	}
	xj->tg = *tg;
	xj->mode = jc->mode;
	xj->page_size = tg->page_size;
	pthread_mutex_init(&xj->set_lock, NULL);
	pthread_mutex_init(&xj->lock, NULL);
	if (!(xj->j = journal_open(jc->path, jc->size_bytes, &id, why,
		  sizeof why))) {
		snprintf(err, errlen, "write log: %s", why);
		xj_close(xj);
		return NULL;
	}
	struct journal_usage u;
	journal_get_usage(xj->j, &u);
	xj->set_max = u.size;
	/* Replayed into the cache before anyone sees the export. */
	struct xj_replay rp = { .e = e, .err = why, .errlen = sizeof why };
	uint64_t start = now_ns();
	why[0] = '\0';
	if (!(rp.zeroes = calloc(1, XJ_REC_BYTES))) {
		snprintf(err, errlen, "write log %s: out of memory", jc->path);
		xj_close(xj);
		return NULL;
	}
	int r = journal_replay(xj->j, xj_replay_cb, &rp, &xj->replay);
	free(rp.zeroes);
	xj->replay_ns = now_ns() - start;
	if (r != 0) {
		snprintf(err, errlen, "write log %s: replay stopped: %s",
		    jc->path, why[0] ? why : strerror(r < 0 ? -r : EIO));
		xj_close(xj);
		return NULL;
	}
	if (xj->replay.records > 0) {
		/* Needed until the backing device holds them. */
		xj_mark_push_locked(xj,
		    __atomic_load_n(e->write_seq, __ATOMIC_ACQUIRE));
		log_warnx("export \"%s\": write log %s: replayed %llu "
			  "record(s), %llu bytes, sequences %llu..%llu, into "
			  "the cache (dirty, to be written back); the log "
			  "ends at byte %llu: %s",
		    e->name, jc->path, (unsigned long long)xj->replay.records,
		    (unsigned long long)xj->replay.bytes,
		    (unsigned long long)xj->replay.first_seq,
		    (unsigned long long)xj->replay.last_seq,
		    (unsigned long long)xj->replay.end_off, xj->replay.end_why);
	}
	if (xj->replay.dropped_records > 0)
		log_warnx("export \"%s\": write log %s: %llu record(s) after "
			  "byte %llu not replayed (%s): a batch never "
			  "synced, so no FLUSH was answered for it",
		    e->name, jc->path,
		    (unsigned long long)xj->replay.dropped_records,
		    (unsigned long long)xj->replay.end_off, xj->replay.end_why);
	/* A FLUSH's commit is a sync, not writeback: a few workers, one
	 * at once for a waiting client (pool.h). */
	char thread_name[32];
	snprintf(thread_name, sizeof thread_name, "wal-%s", e->name);
	xj->commit_pool = pool_new(thread_name,
	    &(struct pool_params){ .min_workers = 1,
		.max_workers = 4,
		.grow_delay_ms = 1,
		.idle_timeout_ms = 10000 },
	    tg->grace);
	if (!xj->commit_pool) {
		snprintf(err, errlen, "write log %s: cannot start its workers",
		    jc->path);
		xj_close(xj);
		return NULL;
	}
	xj->last_reclaim_ns = now_ns();
	return xj;
}

void
xj_close(struct export_journal *xj)
{
	if (!xj)
		return;
	/* Its FLUSHes done first (none is left: no client is). */
	if (xj->commit_pool)
		pool_free(xj->commit_pool);
	if (xj->j) {
		journal_close(xj->j);
		pthread_mutex_destroy(&xj->set_lock);
		pthread_mutex_destroy(&xj->lock);
	}
	free(xj->set);
	free(xj->buf);
	free(xj->recs);
	free(xj->path);
	free(xj);
}

void
xj_get_stats(struct export_journal *xj, struct xj_stats *st)
{
	*st = (struct xj_stats){ .path = xj->path,
		.mode = xj->mode,
		.broken = __atomic_load_n(&xj->broken, __ATOMIC_RELAXED),
		.stale = __atomic_load_n(&xj->stale, __ATOMIC_RELAXED),
		.commits = __atomic_load_n(&xj->commits, __ATOMIC_RELAXED),
		.shared = __atomic_load_n(&xj->shared, __ATOMIC_RELAXED),
		.fallbacks = __atomic_load_n(&xj->fallbacks, __ATOMIC_RELAXED),
		.fallback_why =
		    __atomic_load_n(&xj->fallback_why, __ATOMIC_RELAXED),
		.logged_bytes =
		    __atomic_load_n(&xj->logged_bytes, __ATOMIC_RELAXED),
		.log_ns = __atomic_load_n(&xj->log_ns, __ATOMIC_RELAXED),
		.backing_ns =
		    __atomic_load_n(&xj->backing_ns, __ATOMIC_RELAXED),
		.reclaims = __atomic_load_n(&xj->reclaims, __ATOMIC_RELAXED),
		.replay = xj->replay,
		.replay_ns = xj->replay_ns };
	pthread_mutex_lock(&xj->lock);
	journal_get_usage(xj->j, &st->usage);
	pthread_mutex_unlock(&xj->lock);
}
