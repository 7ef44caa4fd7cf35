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
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "cache.h"
#include "clock.h"
#include "export-journal.h"
#include "fill.h"
#include "lock.h"
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
/* Ordered: writes of an epoch in flight at once, at most. */
#define XJ_APPLY_WINDOW 32
/* Ordered: an epoch applied again this many times at most when the
 * remote is lost meanwhile (it may have lost what it acknowledged). */
#define XJ_APPLY_REDO_MAX 8
/* A record of an epoch that is zeroes (replayed from a ZERO or TRIM
 * record): nothing to read from the log. */
#define XJ_POS_ZERO UINT64_MAX

/*
 * Ordered writeback: one epoch, a batch of the log (a commit, or a part
 * of one larger than a batch: any subset of the writes between two
 * FLUSHes is a valid crash state), to be applied to the backing device
 * from the log, written and flushed there before the next one begins.
 */
struct xj_erec {
	uint64_t off; /* in the export */
	uint64_t pos; /* its payload in the log, or XJ_POS_ZERO */
	uint32_t len;
};

struct xj_epoch {
	struct xj_epoch *next;
	uint64_t jseq_end; /* every record before it is this epoch's or older */
	uint64_t bytes;
	unsigned nrec;
	uint64_t npages;
	struct xj_erec *recs; /* [nrec] */
	/* [npages]: each page's last write sequence when it was read into
	 * the log, in record order: it is cleaned only if still so. */
	uint64_t *seqs;
};

struct export_journal {
	struct journal *j;
	char *path;
	char *state_path; /* its state file (xj_state_path) */
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
	_Atomic bool broken; /* an I/O error; not used again */
	/* Broken, and still holding records that a start would replay
	 * (journal_invalidate has not yet succeeded). */
	_Atomic bool stale;
	uint8_t *buf; /* a batch's data */
	struct journal_rec *recs;

	/* FLUSHes on the log's own workers (xj_pool); reclaim on the
	 * export's device's pool. */
	struct pool *commit_pool;
	struct job reclaim_job;
	_Atomic int reclaim_queued;
	uint64_t last_reclaim_ns;

	/*
	 * Ordered writeback (journal.ordered): the epochs committed and not
	 * yet applied, oldest first, and the log sequence up to which they
	 * are applied (to give back), under ep_lock, a leaf.  One applier at
	 * a time, under apply_lock, which it holds across an epoch's writes
	 * and flush.  Lock order: xj.lock -> apply_lock -> ep_lock.  The
	 * applier takes xj.lock only once it has let apply_lock go, to give
	 * the space back; a commit short of space applies epochs itself.
	 */
	bool ordered;
	bool locks_made; /* the mutexes below and above are initialised */
	pthread_mutex_t apply_lock;
	pthread_mutex_t ep_lock;
	struct xj_epoch *ep_head, *ep_tail;
	_Atomic uint64_t ep_n,
	    ep_bytes;           /* apply lag (ep_lock; read atomically) */
	uint64_t applied_jseq;  /* ep_lock */
	uint64_t released_jseq; /* xj.lock */
	uint64_t batch_max;     /* bytes of data in a batch */
	uint64_t *seqs;         /* a batch's pages' last writes (xj.lock) */
	uint8_t *abuf;          /* what an epoch reads back (apply_lock) */
	struct backend_write aw[XJ_APPLY_WINDOW]; /* apply_lock */
	struct job apply_job;                     /* on the export's pool */
	_Atomic int apply_queued;                 /* atomic */
	_Atomic int apply_commit;        /* atomic: the job commits first */
	_Atomic uint64_t last_commit_ns; /* atomic */
	_Atomic bool order_lost;   /* atomic: epochs written back unordered */
	struct ratelimit apply_rl; /* apply_lock: "applying failed" */

	/* For wbctl status (atomics). */
	_Atomic uint64_t commits, shared, fallbacks, logged_bytes, log_ns,
	    backing_ns, reclaims;
	_Atomic uint64_t epochs_applied, applied_bytes, apply_ns, apply_errors;
	_Atomic(const char *) fallback_why;
	struct ratelimit fallback_rl;
	struct ratelimit stale_rl;          /* xj.lock: "cannot be emptied" */
	struct journal_replay_stats replay; /* set before serving */
	uint64_t replay_ns;
};

static void xj_queue_apply(struct export_journal *xj);

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
	return load_relaxed(&xj->broken) ? NULL : xj->commit_pool;
}

bool
xj_same(const struct export_journal *xj, const struct export_journal_conf *jc)
{
	char state[PATH_MAX];

	if (!xj || !jc->path)
		return !xj && !jc->path;
	return strcmp(xj->path, jc->path) == 0 &&
	    xj_state_path(jc, state, sizeof state) == 0 &&
	    strcmp(xj->state_path, state) == 0 && xj->mode == jc->mode &&
	    xj->ordered == jc->ordered &&
	    (jc->size_bytes == 0 || jc->size_bytes == xj->size_bytes);
}

int
xj_state_path(const struct export_journal_conf *jc, char *buf, size_t len)
{
	char file[JOURNAL_FILE_NAME_MAX + sizeof ".state"];
	struct stat st;
	int n;

	if (!jc->state_dir_set &&
	    !(stat(jc->path, &st) == 0 && S_ISBLK(st.st_mode))) {
		n = snprintf(buf, len, "%s.state", jc->path);
	} else if (!jc->state_dir) {
		return -EDESTADDRREQ;
	} else {
		journal_file_name(jc->path, ".state", file, sizeof file);
		n = snprintf(buf, len, "%s/%s", jc->state_dir, file);
	}
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
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
	t->wseq = load_acquire(xj->tg.write_seq);
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

	if (t->n == 0)
		return; /* set is NULL then: nothing was noted */
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
	if (atomic_exchange_explicit(&xj->broken, true, memory_order_relaxed))
		return;
	store_relaxed(&xj->stale, true);
	log_errorx("export \"%s\": write log %s: %s failed: %s; the log is "
		   "no longer used: each FLUSH now writes back and flushes "
		   "the backing device, and fails until the log's old records "
		   "are on the backing device and the log is emptied or "
		   "marked stale (wbctl status: journal.broken, "
		   "journal.stale)",
	    xj->tg.name, xj->path, what, strerror(-err));
}

/*
 * A broken log whose every record is now on the backing device: empty it
 * (zero its superblocks), or if that fails too, mark it stale in its
 * state file (xj_state_path), so that no start replays those
 * records over newer data that FLUSHes since have put there.  Until one
 * of them succeeds, a FLUSH fails (xj_write_back_locked) and so does the
 * shutdown's drain (xj_flushed): answering either would promise what the
 * next start would undo.
 */
static void
xj_invalidate_locked(struct export_journal *xj)
{
	unsigned quiet;
	int r = journal_invalidate(xj->j);

	if (r == 0) {
		store_relaxed(&xj->stale, false);
		log_warnx(
		    "export \"%s\": write log %s emptied (its superblocks "
		    "zeroed): everything it held is on the backing "
		    "device; FLUSHes write back there from now on",
		    xj->tg.name, xj->path);
		return;
	}
	int m = journal_mark_stale(xj->j);
	if (m == 0) {
		store_relaxed(&xj->stale, false);
		log_warnx("export \"%s\": write log %s cannot be emptied (%s): "
			  "marked stale in %s instead: everything it "
			  "held is on the backing device, and no start "
			  "replays it; FLUSHes write back there from now on",
		    xj->tg.name, xj->path, strerror(-r), xj->state_path);
	} else if (ratelimit_due(&xj->stale_rl, XJ_FALLBACK_LOG_NS, &quiet)) {
		log_errorx("export \"%s\": write log %s cannot be emptied "
			   "(%s) nor marked stale in %s (%s): its "
			   "records are on the backing device, older than "
			   "what FLUSHes put there since, and a start would "
			   "replay them; FLUSHes and the shutdown fail until "
			   "one of them works (if wbd must be killed, remove "
			   "the log before it starts again) (%u more not "
			   "logged)",
		    xj->tg.name, xj->path, strerror(-r), xj->state_path,
		    strerror(-m), quiet);
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
	if (jseq != 0 && !load_relaxed(&xj->broken)) {
		journal_release(xj->j, jseq);
		int r = journal_checkpoint(xj->j);
		if (r < 0)
			xj_break_locked(xj, "a checkpoint", r);
	}
	if (xj->nmarks == 0 && load_relaxed(&xj->stale))
		xj_invalidate_locked(xj);
}

/* --- ordered writeback: epochs applied from the log ------------------- */

static uint64_t
xj_rec_pages(uint32_t page_size, uint64_t off, uint32_t len)
{
	return len ? (off + len - 1) / page_size - off / page_size + 1 : 0;
}

static struct xj_epoch *
xj_epoch_new(unsigned nrec, uint64_t npages)
{
	struct xj_epoch *ep = malloc(
	    sizeof *ep + nrec * sizeof *ep->recs + npages * sizeof *ep->seqs);

	if (!ep)
		return NULL;
	*ep = (struct xj_epoch){ .nrec = nrec, .npages = npages };
	ep->recs = (struct xj_erec *)(ep + 1);
	ep->seqs = (uint64_t *)(ep->recs + nrec);
	return ep;
}

/* EP is committed (durable in the log): the newest to apply. */
static void
xj_epoch_push(struct export_journal *xj, struct xj_epoch *ep)
{
	pthread_mutex_lock(&xj->ep_lock);
	if (xj->ep_tail)
		xj->ep_tail->next = ep;
	else
		xj->ep_head = ep;
	xj->ep_tail = ep;
	store_relaxed(&xj->ep_n, xj->ep_n + 1);
	store_relaxed(&xj->ep_bytes, xj->ep_bytes + ep->bytes);
	pthread_mutex_unlock(&xj->ep_lock);
}

/* End the writes of an epoch in flight; the first error, or R. */
static int
xj_apply_end(struct export_journal *xj, unsigned n, int r)
{
	for (unsigned i = 0; i < n; i++) {
		int w = backend_write_end(&xj->aw[i]);
		if (w < 0 && r == 0)
			r = w;
	}
	return r;
}

/*
 * Write EP's records to the backing device, read back from the log, up to
 * XJ_APPLY_WINDOW at once (within an epoch, any order will do), and wait
 * for them.  *FROM_LOG is set when reading the log failed.  apply_lock.
 */
static int
xj_apply_write_locked(struct export_journal *xj, const struct xj_epoch *ep,
    bool *from_log)
{
	struct backend *b = xj->tg.wt->backend;
	unsigned window = backend_max_in_flight(b), n = 0;
	uint64_t used = 0;
	int r = 0;

	if (window > XJ_APPLY_WINDOW)
		window = XJ_APPLY_WINDOW;
	if (window == 0)
		window = 1;
	for (unsigned i = 0; i < ep->nrec && r == 0; i++) {
		const struct xj_erec *er = &ep->recs[i];
		for (uint32_t at = 0; at < er->len && r == 0;) {
			uint32_t len = er->len - at < XJ_REC_BYTES ?
			    er->len - at :
			    XJ_REC_BYTES;
			if (n == window || used + len > XJ_BATCH_BYTES) {
				r = xj_apply_end(xj, n, 0);
				n = 0;
				used = 0;
				if (r < 0)
					break;
			}
			uint8_t *buf = xj->abuf + used;
			if (er->pos == XJ_POS_ZERO) {
				memset(buf, 0, len);
			} else if ((r = journal_read(xj->j, er->pos + at, buf,
					len)) < 0) {
				*from_log = true;
				break;
			}
			struct iovec iov = { buf, len };
			backend_write_begin(b, &xj->aw[n++], &iov, 1, len,
			    er->off + at, BACKEND_BUF_PRIVATE);
			used += len;
			at += len;
		}
	}
	return xj_apply_end(xj, n, r);
}

/*
 * Apply the oldest epoch: its records written to the backing device and
 * flushed there, then each of its pages cleaned in the cache if no write
 * changed it since it was read into the log, and the epoch let go (its
 * log space is given back by xj_release_applied_locked).  1 if one was
 * applied, 0 if none is left, a negative errno if it failed (it stays,
 * to be applied again; *FROM_LOG set if the log could not be read).
 * apply_lock held.
 */
static int
xj_apply_one_locked(struct export_journal *xj, bool *from_log)
{
	struct backend *b = xj->tg.wt->backend;
	uint64_t start = now_ns();
	int r;

	lock_assert_held(&xj->apply_lock);
	pthread_mutex_lock(&xj->ep_lock);
	struct xj_epoch *ep = xj->ep_head; /* only an applier takes it */
	pthread_mutex_unlock(&xj->ep_lock);
	if (!ep)
		return 0;
	for (unsigned attempt = 0;; attempt++) {
		uint64_t losses = load_acquire(&b->losses);
		uint64_t fails = load_acquire(&xj->tg.wt->flush_fails);
		r = xj_apply_write_locked(xj, ep, from_log);
		if (r == 0)
			r = backend_flush(b);
		if (r < 0)
			break;
		/* A remote lost meanwhile may have lost what it had taken
		 * before its flush; a file whose flush by writeback failed
		 * meanwhile may have dropped our writes, the kernel telling
		 * one fdatasync only: the epoch again. */
		if (load_acquire(&b->losses) == losses &&
		    load_acquire(&xj->tg.wt->flush_fails) == fails)
			break;
		if (attempt == XJ_APPLY_REDO_MAX) {
			r = -EIO;
			break;
		}
	}
	if (r < 0) {
		add_relaxed(&xj->apply_errors, 1);
		return r;
	}
	uint64_t ps = xj->page_size, k = 0;
	for (unsigned i = 0; i < ep->nrec; i++) {
		uint64_t first = ep->recs[i].off / ps;
		uint64_t n = xj_rec_pages(xj->page_size, ep->recs[i].off,
		    ep->recs[i].len);
		for (uint64_t p = 0; p < n && k < ep->npages; p++)
			(void)cache_clean_if_unchanged(xj->tg.cf, first + p,
			    ep->seqs[k++]);
	}
	pthread_mutex_lock(&xj->ep_lock);
	xj->ep_head = ep->next;
	if (!xj->ep_head)
		xj->ep_tail = NULL;
	store_relaxed(&xj->ep_n, xj->ep_n - 1);
	store_relaxed(&xj->ep_bytes, xj->ep_bytes - ep->bytes);
	if (ep->jseq_end > xj->applied_jseq)
		xj->applied_jseq = ep->jseq_end;
	pthread_mutex_unlock(&xj->ep_lock);
	add_relaxed(&xj->epochs_applied, 1);
	add_relaxed(&xj->applied_bytes, ep->bytes);
	add_relaxed(&xj->apply_ns, now_ns() - start);
	free(ep);
	return 1;
}

/* Give back the log's space of every epoch applied. */
static void
xj_release_applied_locked(struct export_journal *xj)
{
	lock_assert_held(&xj->lock);
	pthread_mutex_lock(&xj->ep_lock);
	uint64_t jseq = xj->applied_jseq;
	pthread_mutex_unlock(&xj->ep_lock);
	if (jseq <= xj->released_jseq || load_relaxed(&xj->broken))
		return;
	xj->released_jseq = jseq;
	journal_release(xj->j, jseq);
	int r = journal_checkpoint(xj->j);
	if (r < 0)
		xj_break_locked(xj, "a checkpoint", r);
}

/* Let every epoch go unapplied: the log cannot be read.  Their pages are
 * still dirty in the cache (cleaned only once applied): the fallback
 * writes them back, unordered, and says so.  apply_lock held. */
static void
xj_drop_epochs_locked(struct export_journal *xj, int err)
{
	uint64_t n;

	lock_assert_held(&xj->apply_lock);
	pthread_mutex_lock(&xj->ep_lock);
	struct xj_epoch *ep = xj->ep_head;
	n = xj->ep_n;
	xj->ep_head = xj->ep_tail = NULL;
	store_relaxed(&xj->ep_n, 0);
	store_relaxed(&xj->ep_bytes, 0);
	pthread_mutex_unlock(&xj->ep_lock);
	while (ep) {
		struct xj_epoch *next = ep->next;
		free(ep);
		ep = next;
	}
	store_relaxed(&xj->order_lost, true);
	log_errorx("export \"%s\": write log %s: reading it back failed: %s; "
		   "%llu epoch(s) not yet applied are written back from the "
		   "cache instead, out of order: until that is done the "
		   "backing device may hold no single point in time "
		   "(wbctl status: journal.order_lost)",
	    xj->tg.name, xj->path, strerror(-err), (unsigned long long)n);
}

/*
 * Apply every epoch, in order (xj.lock held: no commit meanwhile), then
 * give their space back.  An epoch the log cannot give back: every one is
 * dropped (xj_drop_epochs_locked) and 0 returned, for the caller's
 * fallback to write them back.  0 or a negative errno (the backing device
 * failed: the epochs stay).
 */
static int
xj_apply_all_locked(struct export_journal *xj)
{
	bool from_log = false;
	int r;

	lock_assert_held(&xj->lock);
	do {
		/* The last one's checkpoint before the next begins. */
		xj_release_applied_locked(xj);
		pthread_mutex_lock(&xj->apply_lock);
		r = xj_apply_one_locked(xj, &from_log);
		if (r < 0 && from_log) {
			xj_break_locked(xj, "a read", r);
			xj_drop_epochs_locked(xj, r);
			r = 0;
		}
		pthread_mutex_unlock(&xj->apply_lock);
	} while (r > 0);
	xj_release_applied_locked(xj);
	return r;
}

/*
 * Ordered: a batch of NEED bytes does not fit: apply epochs until it does.
 * 1 once it fits, 0 if nothing is left to apply (the log is full of
 * what this commit appended), or a negative errno (applying failed).
 */
static int
xj_make_space_locked(struct export_journal *xj, uint64_t need)
{
	for (;;) {
		bool from_log = false;
		xj_release_applied_locked(xj);
		if (journal_fits(xj->j, need))
			return 1;
		pthread_mutex_lock(&xj->apply_lock);
		int r = xj_apply_one_locked(xj, &from_log);
		pthread_mutex_unlock(&xj->apply_lock);
		if (r < 0 && from_log)
			xj_break_locked(xj, "a read", r);
		if (r <= 0)
			return r;
	}
}

/* Ordered: the batch RECS[0..N) just synced, with the last writes of its
 * pages in xj.seqs, is an epoch to apply.  -ENOMEM if it cannot be kept
 * (nothing is lost: the caller writes back instead). */
static int
xj_push_batch_locked(struct export_journal *xj, const struct journal_rec *recs,
    unsigned n, uint64_t npages, uint64_t bytes)
{
	struct xj_epoch *ep = xj_epoch_new(n, npages);

	if (!ep)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		ep->recs[i] = (struct xj_erec){ .off = recs[i].off,
			.pos = recs[i].pos,
			.len = recs[i].len };
	memcpy(ep->seqs, xj->seqs, npages * sizeof *ep->seqs);
	ep->bytes = bytes;
	ep->jseq_end = recs[n - 1].seq + 1;
	xj_epoch_push(xj, ep);
	return 0;
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
		 * most batch_max. */
		unsigned nrec = 0;
		uint64_t bytes = 0, npages = 0;
		while (
		    i < t->n && nrec < XJ_BATCH_RECS && bytes < xj->batch_max) {
			uint64_t end = t->set[i].hi < e->size_bytes ?
			    t->set[i].hi :
			    e->size_bytes;
			uint64_t len = end - at;
			if (len > XJ_REC_BYTES)
				len = XJ_REC_BYTES;
			if (len > xj->batch_max - bytes)
				len = xj->batch_max - bytes;
			/* Ordered, with each page's last write, to clean it
			 * once applied if no write changed it since. */
			if (!(xj->ordered ?
				    cache_peek_seq(e->cf, xj->buf + bytes, at,
					(uint32_t)len, xj->seqs + npages) :
				    cache_peek(e->cf, xj->buf + bytes, at,
					(uint32_t)len))) {
				*why = "a page logged is no longer in the "
				       "cache";
				return 1;
			}
			npages +=
			    xj_rec_pages(xj->page_size, at, (uint32_t)len);
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
		uint64_t need = journal_batch_bytes(nrec, bytes);
		if (!journal_fits(xj->j, need)) {
			/* Ordered: wait for apply to free the space (a
			 * fallback would write the cache's newest pages,
			 * of several epochs at once). */
			r = xj->ordered ? xj_make_space_locked(xj, need) : 0;
			if (r < 0) {
				*why = NULL; /* the FLUSH fails, not lost */
				return r;
			}
			if (r == 0) {
				*why = "the log is full";
				return 1;
			}
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
		if (!xj->ordered)
			continue;
		/* Ordered: each batch synced on its own, an epoch of its
		 * own, so that apply may free the space the next needs. */
		if ((r = journal_sync(xj->j)) < 0) {
			xj_break_locked(xj, "fdatasync", r);
			*why = "the log failed";
			return r;
		}
		if (xj_push_batch_locked(xj, xj->recs, nrec, npages, bytes) <
		    0) {
			*why = "out of memory for an epoch";
			return 1;
		}
	}
	if (!xj->ordered && (r = journal_sync(xj->j)) < 0) {
		xj_break_locked(xj, "fdatasync", r);
		*why = "the log failed";
		return r;
	}
	add_relaxed(&xj->logged_bytes, logged);
	store_relaxed(&xj->last_commit_ns, now_ns());
	if (!xj->ordered)
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

	add_relaxed(&xj->fallbacks, 1);
	store_relaxed(&xj->fallback_why, why);
	if (ratelimit_due(&xj->fallback_rl, XJ_FALLBACK_LOG_NS, &quiet))
		log_info("export \"%s\": a FLUSH writes back to the backing "
			 "device instead of the write log: %s (%u more not "
			 "logged)",
		    e->name, why, quiet);
	/* Ordered: every epoch first, in order; what is left in the cache
	 * is newer than all of them, so the backing device, flushed after,
	 * holds one more point in time. */
	if (xj->ordered) {
		int r = xj_apply_all_locked(xj);
		if (r < 0)
			return r;
	}
	uint64_t start = now_ns();
	int r = wb_flush(e->wt, t->wseq, WB_REASON_FLUSH);
	add_relaxed(&xj->backing_ns, now_ns() - start);
	if (r == 0) {
		/* Every record holds writes of sequence up to t->wseq. */
		xj_mark_push_locked(xj, t->wseq);
		xj_release_locked(xj, t->wseq);
		if (load_relaxed(&xj->stale))
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
		add_relaxed(&xj->shared, 1);
		return 1;
	}
	xj_take(xj, &t);
	if (load_relaxed(&xj->broken))
		why = "the log failed earlier";
	else if (t.discarded)
		why = "a TRIM or zeroing since the last FLUSH";
	else if (t.overflow)
		why = "more written since the last FLUSH than the log holds";
	if (!why) {
		uint64_t start = now_ns();
		xj_merge(&t);
		r = xj_log_locked(xj, &t, &why);
		add_relaxed(&xj->log_ns, now_ns() - start);
		if (r == 0) {
			add_relaxed(&xj->commits, 1);
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
	/* Ordered: the epochs it made, to the backing device. */
	if (xj->ordered && load_relaxed(&xj->ep_n) > 0)
		xj_queue_apply(xj);
	return r;
}

int
xj_flushed(struct export_journal *xj, uint64_t max_seq)
{
	if (!xj)
		return 0;
	pthread_mutex_lock(&xj->lock);
	xj_release_locked(xj, max_seq);
	/* A broken log holding records that it could neither empty nor
	 * mark: a start would replay them over what was just flushed. */
	bool stale = xj->nmarks == 0 && load_relaxed(&xj->stale);
	pthread_mutex_unlock(&xj->lock);
	return stale ? -EIO : 0;
}

/* --- ordered: the apply job ------------------------------------------ */

/*
 * Apply every epoch committed (one at a time under apply_lock, so that a
 * commit short of space may apply in between), giving each one's space
 * back (a checkpoint) before the next begins: every applier does, so that
 * a replay never applies an older epoch over a newer one.  0, or a negative errno once one failed (it stays; the next tick
 * tries again).  A worker: it blocks.
 */
static int
xj_apply_pending(struct export_journal *xj)
{
	int r;

	for (;;) {
		bool from_log = false;
		pthread_mutex_lock(&xj->apply_lock);
		r = xj_apply_one_locked(xj, &from_log);
		unsigned quiet;
		if (r < 0 && !from_log &&
		    ratelimit_due(&xj->apply_rl, XJ_FALLBACK_LOG_NS, &quiet))
			log_warnx("export \"%s\": applying the write log's "
				  "oldest epoch to the backing device failed: "
				  "%s; it is tried again (%u more not logged)",
			    xj->tg.name, strerror(-r), quiet);
		pthread_mutex_unlock(&xj->apply_lock);
		if (r < 0 && from_log)
			xj_break_locked(xj, "a read", r);
		if (r <= 0)
			break;
		/* Its checkpoint before the next epoch begins: a crash
		 * after the next one's writes must not apply this one again
		 * over them (the backing device would go back in time). */
		pthread_mutex_lock(&xj->lock);
		xj_release_applied_locked(xj);
		pthread_mutex_unlock(&xj->lock);
	}
	return r;
}

static void
xj_apply_run(struct job *job)
{
	struct export_journal *xj =
	    container_of(job, struct export_journal, apply_job);
	_Atomic unsigned *holds = xj->tg.holds;
	int r = 0;

	/* An epoch no client asked for (dirty pressure, the tick): every
	 * write completed before it is a valid point in time. */
	if (atomic_exchange_explicit(&xj->apply_commit, 0,
		memory_order_acq_rel))
		r = xj_commit(xj, xj_gen(xj));
	if (r >= 0)
		r = xj_apply_pending(xj);
	store_release(&xj->apply_queued, 0);
	/* Committed meanwhile, and its kick found this job queued. */
	if (r >= 0 &&
	    (load_relaxed(&xj->ep_n) > 0 || load_relaxed(&xj->apply_commit)))
		xj_queue_apply(xj);
	/* The last use of XJ: its export may be freed once let go. */
	(void)atomic_fetch_sub_explicit(holds, 1, memory_order_release);
}

static void
xj_queue_apply(struct export_journal *xj)
{
	if (atomic_exchange_explicit(&xj->apply_queued, 1,
		memory_order_acq_rel))
		return;
	add_relaxed(xj->tg.holds, 1);
	xj->apply_job = (struct job){ .run = xj_apply_run };
	pool_submit(xj->tg.pool, &xj->apply_job);
}

bool
xj_ordered(const struct export_journal *xj)
{
	return xj && xj->ordered;
}

void
xj_kick(struct export_journal *xj)
{
	if (!xj || !xj->ordered ||
	    (load_relaxed(&xj->apply_queued) &&
		load_relaxed(&xj->apply_commit)))
		return;
	store_release(&xj->apply_commit, 1);
	xj_queue_apply(xj);
}

bool
xj_make_room(struct export_journal *xj)
{
	bool from_log = false;
	int r;

	if (!xj || !xj->ordered)
		return false;
	/* Nothing committed to apply: what is noted becomes an epoch. */
	if (load_relaxed(&xj->ep_n) == 0 && xj_commit(xj, xj_gen(xj)) < 0)
		return false;
	pthread_mutex_lock(&xj->apply_lock);
	r = xj_apply_one_locked(xj, &from_log);
	pthread_mutex_unlock(&xj->apply_lock);
	if (r < 0 && from_log)
		xj_break_locked(xj, "a read", r);
	if (r > 0) {
		pthread_mutex_lock(&xj->lock);
		xj_release_applied_locked(xj);
		pthread_mutex_unlock(&xj->lock);
	}
	return r > 0;
}

int
xj_sync(struct export_journal *xj)
{
	int r = xj_commit(xj, xj_gen(xj));

	if (r >= 0)
		r = xj_apply_pending(xj);
	if (r < 0)
		return r;
	/* Every epoch is applied, by this thread or the apply job: its
	 * checkpoint is written before the log is said to be in sync (the
	 * job may not have written it yet).  A log broken meanwhile (that
	 * checkpoint, say) still points at epochs older than the backing
	 * device: the commit, falling back, empties it or marks it stale,
	 * or fails. */
	pthread_mutex_lock(&xj->lock);
	xj_release_applied_locked(xj);
	bool broken = load_relaxed(&xj->broken);
	pthread_mutex_unlock(&xj->lock);
	if (broken && (r = xj_commit(xj, xj_gen(xj))) < 0)
		return r;
	return 0;
}

int
xj_discard(struct export_journal *xj, int (*fn)(void *arg), void *arg,
    uint64_t *gen)
{
	int r;

	if (!xj->ordered) {
		r = fn(arg);
		*gen = xj_note_discard(xj);
		return r;
	}
	/* Every epoch on the backing device before the TRIM or zeroing
	 * reaches it, and none while it does (xj.lock: no commit, so no
	 * epoch, meanwhile). */
	pthread_mutex_lock(&xj->lock);
	r = xj_apply_all_locked(xj);
	if (r == 0)
		r = fn(arg);
	*gen = xj_note_discard(xj);
	pthread_mutex_unlock(&xj->lock);
	return r;
}

/* --- reclaim ----------------------------------------------------------- */

static void
xj_reclaim_run(struct job *job)
{
	struct export_journal *xj =
	    container_of(job, struct export_journal, reclaim_job);
	_Atomic unsigned *holds = xj->tg.holds;
	uint64_t wseq = 0;

	pthread_mutex_lock(&xj->lock);
	if (xj->nmarks > 0)
		wseq = xj->marks[(xj->first + xj->nmarks - 1) % XJ_MARKS].wseq;
	pthread_mutex_unlock(&xj->lock);
	if (wseq > 0 && wb_flush(xj->tg.wt, wseq, WB_REASON_SYNC) == 0) {
		(void)xj_flushed(xj, wseq);
		add_relaxed(&xj->reclaims, 1);
	}
	store_release(&xj->reclaim_queued, 0);
	/* The last use of XJ: its export may be freed once let go. */
	atomic_fetch_sub_explicit(holds, 1, memory_order_release);
}

void
xj_tick(struct export_journal *xj, uint64_t interval_ns)
{
	struct journal_usage u;

	if (xj && xj->ordered) {
		/* Ordered: reclaim is apply's.  Epochs left (apply failed,
		 * or was kicked while busy) are applied; writes no FLUSH
		 * has committed become an epoch once INTERVAL_NS old. */
		pthread_mutex_lock(&xj->set_lock);
		bool noted = xj->n > 0 || xj->discarded || xj->overflow;
		pthread_mutex_unlock(&xj->set_lock);
		uint64_t last = load_relaxed(&xj->last_commit_ns);
		if (noted && now_ns() - last >= interval_ns)
			xj_kick(xj);
		else if (load_relaxed(&xj->ep_n) > 0)
			xj_queue_apply(xj);
		return;
	}
	if (!xj || load_relaxed(&xj->broken) ||
	    load_acquire(&xj->reclaim_queued))
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
	store_release(&xj->reclaim_queued, 1);
	add_relaxed(xj->tg.holds, 1);
	xj->reclaim_job = (struct job){ .run = xj_reclaim_run };
	pool_submit(xj->tg.pool, &xj->reclaim_job);
}

/* --- open and replay --------------------------------------------------- */

/* Ordered writeback from now on (journal.ordered), before any epoch. */
static void
xj_order_begin(struct export_journal *xj)
{
	struct journal_usage u;

	journal_get_usage(xj->j, &u);
	xj->ordered = true;
	/* Noted writes never overflow: a commit larger than the log goes
	 * in batches, apply freeing room between them, so a batch is at
	 * most a quarter of the log. */
	xj->set_max = UINT64_MAX;
	if (xj->batch_max > u.size / 4)
		xj->batch_max = (u.size / 4) & ~(uint64_t)(xj->page_size - 1);
	if (xj->batch_max < xj->page_size)
		xj->batch_max = xj->page_size;
	/* From now on its pages go to the backing device only from the log
	 * (replay's included). */
	store_release(&xj->tg.wt->ordered, true);
}

/*
 * JC's ordered is not what the log's records were written as
 * (journal_ordered), and they were replayed unordered: into the cache,
 * dirty, kept in the log until the backing device holds them.
 *
 * Turned off: writeback from the cache writes them back as everything
 * else from now on; the log says unordered before anything is appended.
 *
 * Turned on: they are written back and flushed now, before the export is
 * served, the log emptied, and only then is it ordered.  Applied as
 * epochs instead, they could take the backing device back in time: an
 * unordered log's writeback from the cache may have put newer data there
 * than its older records hold, and losing the log between two of those
 * epochs would leave it at no point in time.  -ENOTCONN (ERR says why)
 * while the backing device does not answer: the export waits for it
 * (daemon_install_export), its log untouched.
 */
static int
xj_switch_order(struct export_journal *xj, const struct export_journal_conf *jc,
    char *err, size_t errlen)
{
	const struct xj_target *e = &xj->tg;
	unsigned long long n = xj->replay.records;
	struct backend_state st;
	struct journal_usage u;
	int r;

	if (!jc->ordered) {
		if ((r = journal_set_ordered(xj->j, false)) < 0) {
			snprintf(err, errlen,
			    "write log %s: cannot write its superblock: %s",
			    jc->path, strerror(-r));
			return r;
		}
		if (n > 0)
			log_warnx("export \"%s\": write log %s was written "
				  "with ordered = true and is opened with "
				  "ordered = false: its %llu record(s) "
				  "replayed are written back from the cache, "
				  "out of order, as everything from now on",
			    e->name, jc->path, n);
		else
			log_info("export \"%s\": write log %s, empty, is "
				 "unordered from now on (it was written with "
				 "ordered = true)",
			    e->name, jc->path);
		return 0;
	}
	if (n > 0) {
		if (backend_get_state(e->wt->backend, &st) && !st.connected) {
			snprintf(err, errlen,
			    "write log %s was written with ordered = false "
			    "and holds %llu record(s): with ordered = true "
			    "they are written back before the first epoch, "
			    "and the backing device does not answer",
			    jc->path, n);
			return -ENOTCONN;
		}
		log_warnx("export \"%s\": write log %s was written with "
			  "ordered = false and is opened with ordered = true: "
			  "its %llu record(s) replayed are written back from "
			  "the cache and flushed before ordered writeback "
			  "begins",
		    e->name, jc->path, n);
		r = wb_flush(e->wt, load_acquire(e->write_seq), WB_REASON_SYNC);
		if (r < 0) {
			snprintf(err, errlen,
			    "write log %s was written with ordered = false: "
			    "writing its %llu record(s) back before ordered "
			    "writeback begins failed: %s (the log keeps them; "
			    "ordered = false serves the export meanwhile)",
			    jc->path, n, strerror(-r));
			return r;
		}
		/* Everything it holds is on the backing device. */
		pthread_mutex_lock(&xj->lock);
		journal_get_usage(xj->j, &u);
		journal_release(xj->j, u.next_seq);
		r = journal_checkpoint(xj->j);
		xj->first = xj->nmarks = 0;
		pthread_mutex_unlock(&xj->lock);
		if (r < 0) {
			snprintf(err, errlen,
			    "write log %s: cannot write its checkpoint: %s",
			    jc->path, strerror(-r));
			return r;
		}
	}
	if ((r = journal_set_ordered(xj->j, true)) < 0) {
		snprintf(err, errlen,
		    "write log %s: cannot write its superblock: %s", jc->path,
		    strerror(-r));
		return r;
	}
	if (n == 0)
		log_info("export \"%s\": write log %s, empty, is ordered from "
			 "now on (it was written with ordered = false)",
		    e->name, jc->path);
	xj_order_begin(xj);
	return 0;
}

struct xj_replay {
	struct export_journal *xj;
	const struct xj_target *e;
	uint8_t *zeroes;
	char *err;
	size_t errlen;
	/* Ordered: the batch being read, an epoch once whole, and a page
	 * to read stamps with. */
	struct xj_erec *recs;
	size_t nrec, rcap;
	uint64_t *seqs;
	uint64_t npages, scap, bytes;
	uint8_t *page;
};

/*
 * Ordered, replaying: no page to put a record into.  Apply the oldest
 * whole batch replayed so far, from the log (its pages may then go), and
 * write its checkpoint before going on, as the apply job does: a crash
 * later in the replay must not apply it again over the newer epochs
 * applied after it (the backing device would go back in time).  0, or a
 * negative errno when there is none, or it failed (-EIO: the checkpoint;
 * the replay stops there).
 */
static int
xj_replay_make_room(struct export_journal *xj)
{
	bool from_log = false;

	pthread_mutex_lock(&xj->apply_lock);
	int r = xj_apply_one_locked(xj, &from_log);
	pthread_mutex_unlock(&xj->apply_lock);
	if (r <= 0)
		return r == 0 ? -ENOSPC : r;
	pthread_mutex_lock(&xj->lock);
	xj_release_applied_locked(xj);
	bool broken = load_relaxed(&xj->broken);
	pthread_mutex_unlock(&xj->lock);
	return broken ? -EIO : 0;
}

/* Put bytes [OFF, OFF+LEN) of DATA into the cache, dirty with SEQ, making
 * room and reading partial pages in as a writer would. */
static int
xj_replay_write(struct xj_replay *rp, const uint8_t *data, uint64_t off,
    uint32_t len, uint64_t seq)
{
	const struct xj_target *e = rp->e;
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
			if (rp->xj->ordered) {
				/* Writeback never takes its pages. */
				int r = xj_replay_make_room(rp->xj);
				if (r < 0)
					return r;
				break;
			}
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

/* Ordered: keep REC (just written into the cache) for the epoch its
 * batch makes, and push that epoch at the batch's end. */
static int
xj_replay_keep(struct xj_replay *rp, const struct journal_rec *rec)
{
	struct export_journal *xj = rp->xj;
	uint64_t ps = xj->page_size;
	uint64_t pages = xj_rec_pages(xj->page_size, rec->off, rec->len);

	if (rp->nrec == rp->rcap) {
		size_t cap = rp->rcap ? 2 * rp->rcap : 64;
		struct xj_erec *nr = realloc(rp->recs, cap * sizeof *nr);
		if (!nr)
			return -ENOMEM;
		rp->recs = nr;
		rp->rcap = cap;
	}
	if (rp->npages + pages > rp->scap) {
		uint64_t cap = 2 * (rp->npages + pages);
		uint64_t *ns = realloc(rp->seqs, cap * sizeof *ns);
		if (!ns)
			return -ENOMEM;
		rp->seqs = ns;
		rp->scap = cap;
	}
	rp->recs[rp->nrec++] = (struct xj_erec){ .off = rec->off,
		.pos = rec->type == JOURNAL_REC_WRITE ? rec->pos : XJ_POS_ZERO,
		.len = rec->len };
	/* Each page's stamp as the record left it (cache_peek_seq: what
	 * cache_clean_if_unchanged compares, not a write sequence), so that
	 * once applied the epoch cleans the pages no later record changed,
	 * and a replay larger than the cache makes room. */
	for (uint64_t i = 0; i < pages; i++) {
		uint64_t at = (rec->off / ps + i) * ps;
		uint64_t len =
		    rp->e->size_bytes - at < ps ? rp->e->size_bytes - at : ps;
		if (!cache_peek_seq(rp->e->cf, rp->page, at, (uint32_t)len,
			&rp->seqs[rp->npages]))
			rp->seqs[rp->npages] = 0; /* gone: never cleaned */
		rp->npages++;
	}
	rp->bytes += rec->len;
	if (!rec->last)
		return 0;
	struct xj_epoch *ep = xj_epoch_new((unsigned)rp->nrec, rp->npages);
	if (!ep)
		return -ENOMEM;
	memcpy(ep->recs, rp->recs, rp->nrec * sizeof *ep->recs);
	memcpy(ep->seqs, rp->seqs, rp->npages * sizeof *ep->seqs);
	ep->bytes = rp->bytes;
	ep->jseq_end = rec->seq + 1;
	xj_epoch_push(xj, ep);
	rp->nrec = 0;
	rp->npages = 0;
	rp->bytes = 0;
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
	/* One write sequence for the record, as a writer's (the stamps an
	 * ordered log cleans its pages by are the cache's own). */
	uint64_t seq =
	    (atomic_fetch_add_explicit(e->write_seq, 1, memory_order_acq_rel) +
		(1));
	for (uint32_t at = 0; at < rec->len;) {
		uint32_t n =
		    rec->len - at < XJ_REC_BYTES ? rec->len - at : XJ_REC_BYTES;
		r = xj_replay_write(rp, data ? data + at : rp->zeroes,
		    rec->off + at, n, seq);
		if (r < 0) {
			snprintf(rp->err, rp->errlen,
			    r == -ENOTCONN ?
				"record %llu: the cache has no room for the "
				"log until the backing device answers: %s" :
				r == -ENOSPC ?
				"record %llu: no page in the cache for it, "
				"and no whole batch before it to apply: the "
				"cache is smaller than one batch of the log "
				"(%s)" :
				"record %llu: reading a partial page from "
				"the backing device, or applying an epoch "
				"to it (or its checkpoint), failed: %s",
			    (unsigned long long)rec->seq, strerror(-r));
			return r;
		}
		at += n;
	}
	if (rp->xj->ordered && (r = xj_replay_keep(rp, rec)) < 0) {
		snprintf(rp->err, rp->errlen, "record %llu: out of memory",
		    (unsigned long long)rec->seq);
		return r;
	}
	return 0;
}

/* Make DIR (journal.KEY, the log's WHAT) unless it exists, mode 0700:
 * 0, or -1 with ERR set. */
static int
xj_mkdir(const char *dir, const char *what, const char *key, char *err,
    size_t errlen)
{
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	snprintf(err, errlen,
	    "write log %s %s (journal.%s): cannot be made: %s", what, dir, key,
	    strerror(errno));
	return -1;
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
		.backing = e->backing,
		.ordered = jc->ordered };
	char why[512], state[PATH_MAX];
	int sr = xj_state_path(jc, state, sizeof state);

	if (sr < 0) {
		if (sr == -EDESTADDRREQ)
			snprintf(err, errlen,
			    "write log %s is a block device: its state file "
			    "needs journal.state_dir (or the top level's "
			    "journal.dir), as /dev does not outlive a reboot",
			    jc->path);
		else
			snprintf(err, errlen,
			    "write log %s: its state file: %s", jc->path,
			    strerror(-sr));
		free(xj);
		return NULL;
	}
	id.state_path = state;
	size_t sdl = jc->state_dir ? strlen(jc->state_dir) : 0;
	bool state_in_dir =
	    sdl && strncmp(state, jc->state_dir, sdl) == 0 && state[sdl] == '/';
	if (!xj || !(xj->path = strdup(jc->path)) ||
	    !(xj->state_path = strdup(state)) ||
	    !(xj->buf = malloc(XJ_BATCH_BYTES)) ||
	    !(xj->recs = calloc(XJ_BATCH_RECS, sizeof *xj->recs)) ||
	    (jc->ordered &&
		(!(xj->abuf = malloc(XJ_BATCH_BYTES)) ||
		    !(xj->seqs = calloc(XJ_BATCH_BYTES / tg->page_size +
			      XJ_BATCH_RECS + 1,
			  sizeof *xj->seqs))))) {
		snprintf(err, errlen, "write log %s: out of memory", jc->path);
		xj_close(xj);
		return NULL;
	}
	xj->tg = *tg;
	xj->mode = jc->mode;
	xj->page_size = tg->page_size;
	pthread_mutex_init(&xj->set_lock, NULL);
	lock_init(&xj->lock);
	lock_init(&xj->apply_lock);
	pthread_mutex_init(&xj->ep_lock, NULL);
	xj->locks_made = true;
	/* A log of journal.dir: the directory is made if missing, for
	 * wbd's user alone (the logs hold the exports' data); and the
	 * directory of its state file there (journal.state_dir, or
	 * journal.dir for a block device) likewise: the state file is
	 * written only when the log has failed, too late to find its
	 * directory missing. */
	if ((jc->dir &&
		xj_mkdir(jc->dir, "directory", "dir", err, errlen) < 0) ||
	    (state_in_dir &&
		xj_mkdir(jc->state_dir, "state directory",
		    jc->state_dir_set ? "state_dir" : "dir", err,
		    errlen) < 0)) {
		xj_close(xj);
		return NULL;
	}
	if (!(xj->j = journal_open(jc->path, jc->size_bytes, &id, why,
		  sizeof why))) {
		snprintf(err, errlen, "write log: %s", why);
		xj_close(xj);
		return NULL;
	}
	struct journal_usage u;
	journal_get_usage(xj->j, &u);
	xj->set_max = u.size;
	xj->batch_max = XJ_BATCH_BYTES;
	/* Its records are replayed as they were written: as epochs only
	 * if an ordered log wrote them (xj_switch_order). */
	if (jc->ordered && journal_ordered(xj->j))
		xj_order_begin(xj);
	/* Replayed into the cache before anyone sees the export. */
	struct xj_replay rp = { .xj = xj,
		.e = e,
		.err = why,
		.errlen = sizeof why };
	uint64_t start = now_ns();
	why[0] = '\0';
	if (!(rp.zeroes = calloc(1, XJ_REC_BYTES)) ||
	    (xj->ordered && !(rp.page = malloc(tg->page_size)))) {
		free(rp.zeroes);
		snprintf(err, errlen, "write log %s: out of memory", jc->path);
		xj_close(xj);
		return NULL;
	}
	int r = journal_replay(xj->j, xj_replay_cb, &rp, &xj->replay);
	free(rp.page);
	free(rp.zeroes);
	free(rp.recs);
	free(rp.seqs);
	xj->replay_ns = now_ns() - start;
	if (r != 0) {
		if (!why[0])
			snprintf(why, sizeof why, "%s: %s", xj->replay.end_why,
			    strerror(r < 0 ? -r : EIO));
		snprintf(err, errlen, "write log %s: replay stopped: %s",
		    jc->path, why);
		xj_close(xj);
		return NULL;
	}
	/* The stale records are given back (the replay's checkpoint): the
	 * state file has said what it had to. */
	if (xj->replay.stale_records > 0)
		log_warnx("export \"%s\": write log %s: %llu record(s) below "
			  "sequence %llu not replayed: %s marks them "
			  "stale (on the backing device already)",
		    e->name, jc->path,
		    (unsigned long long)xj->replay.stale_records,
		    (unsigned long long)xj->replay.stale_below, state);
	int gone = journal_state_remove(xj->j);
	if (gone > 0 && !xj->replay.stale_records)
		log_info("export \"%s\": write log %s: %s removed: it "
			 "named no record of this log",
		    e->name, jc->path, state);
	else if (gone < 0)
		log_warnx("export \"%s\": write log %s: cannot remove "
			  "%s: %s (harmless: it names only records "
			  "older than any the log takes from now on)",
		    e->name, jc->path, state, strerror(-gone));
	if (xj->ordered) {
		/* Epochs applied to make room while replaying. */
		pthread_mutex_lock(&xj->lock);
		xj_release_applied_locked(xj);
		pthread_mutex_unlock(&xj->lock);
	} else if (xj->replay.records > 0) {
		/* Needed until the backing device holds them. */
		xj_mark_push_locked(xj, load_acquire(e->write_seq));
	}
	if (xj->replay.records > 0) {
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
	if (journal_ordered(xj->j) != jc->ordered &&
	    xj_switch_order(xj, jc, err, errlen) < 0) {
		xj_close(xj);
		return NULL;
	}
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
	xj->last_commit_ns = now_ns();
	/* Ordered: what was replayed goes to the backing device from the
	 * log, epoch by epoch, in the order it was committed. */
	if (xj->ordered && xj->ep_n > 0)
		xj_queue_apply(xj);
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
	if (xj->j)
		journal_close(xj->j);
	if (xj->locks_made) {
		pthread_mutex_destroy(&xj->set_lock);
		pthread_mutex_destroy(&xj->lock);
		pthread_mutex_destroy(&xj->apply_lock);
		pthread_mutex_destroy(&xj->ep_lock);
	}
	while (xj->ep_head) {
		struct xj_epoch *next = xj->ep_head->next;
		free(xj->ep_head);
		xj->ep_head = next;
	}
	free(xj->seqs);
	free(xj->abuf);
	free(xj->set);
	free(xj->buf);
	free(xj->recs);
	free(xj->path);
	free(xj->state_path);
	free(xj);
}

void
xj_get_stats(struct export_journal *xj, struct xj_stats *st)
{
	*st = (struct xj_stats){ .path = xj->path,
		.mode = xj->mode,
		.broken = load_relaxed(&xj->broken),
		.stale = load_relaxed(&xj->stale),
		.commits = load_relaxed(&xj->commits),
		.shared = load_relaxed(&xj->shared),
		.fallbacks = load_relaxed(&xj->fallbacks),
		.fallback_why = load_relaxed(&xj->fallback_why),
		.logged_bytes = load_relaxed(&xj->logged_bytes),
		.log_ns = load_relaxed(&xj->log_ns),
		.backing_ns = load_relaxed(&xj->backing_ns),
		.reclaims = load_relaxed(&xj->reclaims),
		.ordered = xj->ordered,
		.order_lost = load_relaxed(&xj->order_lost),
		.epochs_applied = load_relaxed(&xj->epochs_applied),
		.applied_bytes = load_relaxed(&xj->applied_bytes),
		.apply_ns = load_relaxed(&xj->apply_ns),
		.apply_errors = load_relaxed(&xj->apply_errors),
		.lag_epochs = load_relaxed(&xj->ep_n),
		.lag_bytes = load_relaxed(&xj->ep_bytes),
		.replay = xj->replay,
		.replay_ns = xj->replay_ns };
	pthread_mutex_lock(&xj->lock);
	journal_get_usage(xj->j, &st->usage);
	pthread_mutex_unlock(&xj->lock);
}
