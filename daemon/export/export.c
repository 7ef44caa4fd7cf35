/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * export.c - exports, and how their requests are carried out through the
 * write-back cache.
 *
 * On the I/O thread (export_submit): a READ that hits is answered from the
 * cache at once; a WRITE whose pages are resident or wholly covered is
 * copied in and answered at once (then paced if dirty data is high).
 * Everything else becomes a job on the export's flush-MAJ:MIN pool: read
 * misses, writes that need a page filled first, FLUSH, FUA and writethrough
 * writes, TRIM and WRITE_ZEROES.  The export only says what to do with
 * the reply (a verdict); the connection sends it, corks it, paces it.
 *
 * Who sees a writeback error (errseq, as the kernel's): each failed
 * writeback bumps the export's error sequence.  A connection remembers the
 * sequence it has seen (from when it connected); its next FLUSH, FUA write
 * or writethrough write returns EIO if the sequence moved, and then it has
 * seen it.  So every connection open when a writeback failed is told once,
 * and a FLUSH whose own pages cannot be written fails for as long as they
 * cannot.  The data stays dirty and is retried; nothing is dropped.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "blockstatus.h"
#include "cache.h"
#include "clock.h"
#include "export-journal.h"
#include "export.h"
#include "fill.h"
#include "log.h"
#include "proto.h"
#include "request.h"
#include "wbdev.h"
#include "writeback.h"

struct export *
export_new(const struct export_conf *ec, struct wb_dev *dev, struct backend *b,
    struct wb_ctl *wb)
{
	struct export *e = calloc(1, sizeof *e);

	if (!e)
		return NULL;
	e->name = strdup(ec->name);
	e->backing = strdup(ec->backing);
	e->direct = ec->direct;
	store_relaxed(&e->idle_timeout_s, export_conf_idle(ec));
	e->description = ec->description ? strdup(ec->description) : NULL;
	e->size_bytes = backend_size(b);
	e->cf = cache_file_new(wb->cache, e->size_bytes);
	e->wt = (struct wb_target){ .name = e->name, .cf = e->cf, .backend = b,
	    .dev = dev, .wb = wb, .size_bytes = e->size_bytes,
	    .read_only = ec->readonly || (b->caps & BACKEND_READ_ONLY) };
	wb_target_init(&e->wt);
	bool built = e->name && e->backing &&
	    (!ec->description || e->description) && e->cf;
	if (!built || wb_dev_add_target(dev, &e->wt) < 0) {
		int err = built ? ENOSPC : ENOMEM;
		wb_target_destroy(&e->wt);
		cache_file_free(e->cf);
		free(e->name);
		free(e->backing);
		free(e->description);
		free(e);
		errno = err;
		return NULL;
	}
	e->backend = b;
	e->dev = dev;
	e->wb = wb;
	store_relaxed(&e->cache_mode, ec->cache_mode);
	access_policy_init(&e->allow, ec->allow);

	e->tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
	    NBD_FLAG_SEND_FUA | NBD_FLAG_CAN_MULTI_CONN | NBD_FLAG_SEND_CACHE;
	if (ec->readonly || (b->caps & BACKEND_READ_ONLY)) {
		e->tflags |= NBD_FLAG_READ_ONLY;
	} else {
		if (b->caps & BACKEND_CAN_TRIM)
			e->tflags |= NBD_FLAG_SEND_TRIM;
		if (b->caps & BACKEND_CAN_ZERO)
			e->tflags |= NBD_FLAG_SEND_WRITE_ZEROES;
		if (b->caps & BACKEND_CAN_FAST_ZERO)
			e->tflags |= NBD_FLAG_SEND_FAST_ZERO;
	}
	if (b->caps & BACKEND_ROTATIONAL)
		e->tflags |= NBD_FLAG_ROTATIONAL;

	e->hs.name = e->name;
	e->hs.description = e->description;
	e->hs.size_bytes = e->size_bytes;
	e->hs.tflags = e->tflags;
	e->hs.max_block_bytes = PROTO_MAX_REQUEST_BYTES;
	e->hs.tls_only = ec->tls_require;
	return e;
}

void
export_free(struct export *e)
{
	if (!e)
		return;
	xj_close(e->journal);
	cache_file_free(e->cf);
	backend_close(e->backend);
	wb_target_destroy(&e->wt);
	access_policy_destroy(&e->allow);
	free(e->name);
	free(e->backing);
	free(e->description);
	free(e);
}

/* --- on a worker ------------------------------------------------------- */

/* A read that missed, on this worker. */
static int
export_read_miss(struct export *e, struct request *req)
{
	req->fill = (struct fill_read){ .t = &e->wt,
		.buf = req->data,
		.off = req->nbd.offset,
		.len = req->nbd.count };
	return fill_read_now(&req->fill);
}

/* Put a WRITE's payload into the cache: commit the pages it was
 * received into (a commit goes on from where it stopped), or copy it from
 * PAYLOAD (NULL: its buffer) from *DONE bytes in, adding what is copied. */
static enum cache_write_result
export_write_cache(struct export *e, struct request *req, const void *payload,
    uint64_t *fill, uint32_t *done)
{
	const uint8_t *in = payload ? payload : req->data;
	uint32_t n;

	if (req->wbuf)
		return cache_wbuf_commit(req->wbuf, req->seq, fill);
	enum cache_write_result r =
	    cache_write_part(e->cf, in + *done, req->nbd.offset + *done,
		req->nbd.count - *done, req->seq, fill, &n);
	*done += n;
	return r;
}

/* No page free for a write on this worker: write back one of the
 * export's runs here (the workers may all be such writers, the background
 * job queued behind them), or with an ordered write log apply an epoch
 * here, else wait for writeback elsewhere. */
static void
export_make_room(struct export *e)
{
	if (xj_ordered(e->journal)) {
		/* Its pages reach the backing device only from the log. */
		if (!xj_make_room(e->journal))
			wb_wait_progress(&e->wt, 10);
		return;
	}
	wb_kick_background(e->dev);
	if (!wb_write_for_space(&e->wt))
		wb_wait_progress(&e->wt, 10);
}

/* A write finding no cache space: logged about this often, and refused
 * after this long once shutting down. */
#define EXPORT_SPACE_WAIT_NS 1000000000ull
/* Writers paced or held (throttling): logged about this often. */
#define EXPORT_PACE_LOG_NS 10000000000ull

/* A write that could not complete on the I/O thread. */
static int
export_write_slow(struct export *e, struct request *req)
{
	uint64_t last_fill = UINT64_MAX, start = now_ns(), logged = start;
	unsigned quiet;
	uint32_t done = 0;

	for (;;) {
		uint64_t fill;
		switch (export_write_cache(e, req, NULL, &fill, &done)) {
		case CACHE_WRITE_OK:
			return 0;
		case CACHE_WRITE_NEED_FILL: {
			int r = fill_page(&e->wt, fill);
			if (r < 0)
				return r;
			if (fill == last_fill)
				/* Filled, yet not resident: no page to put it
				 * in. */
				export_make_room(e);
			last_fill = fill;
			break;
		}
		case CACHE_WRITE_NO_SPACE:
			/* Never acknowledged, so refusing it loses nothing. */
			if (load_relaxed(&e->wb->stopping) &&
			    now_ns() - start > EXPORT_SPACE_WAIT_NS)
				return -ESHUTDOWN;
			/* Every page dirty or pinned: make room.  Logged
			 * once a second for all of the export's writes. */
			if (now_ns() - logged > EXPORT_SPACE_WAIT_NS) {
				logged = now_ns();
				if (ratelimit_due(&e->space_rl,
					EXPORT_SPACE_WAIT_NS, &quiet))
					log_warnx("export \"%s\": waiting for "
						  "cache space (all pages "
						  "dirty; %u other waits not "
						  "logged)",
					    e->name, quiet);
			}
			export_make_room(e);
			break;
		}
	}
}

int
export_flush(struct export *e, uint64_t max_seq, enum wb_reason why)
{
	/* Ordered: its pages reach the backing device only from the log,
	 * epoch by epoch; everything noted becomes one more. */
	if (xj_ordered(e->journal))
		return xj_sync(e->journal);
	int r = wb_flush(&e->wt, max_seq, why);

	if (r == 0 && e->journal)
		r = xj_flushed(e->journal, max_seq);
	return r;
}

int
export_journal_open(struct export *e, const struct export_journal_conf *jc,
    struct grace *grace, char *err, size_t errlen)
{
	struct xj_target tg = { .name = e->name,
		.backing = e->backing,
		.size_bytes = e->size_bytes,
		.page_size = e->wb->page_size,
		.cf = e->cf,
		.wt = &e->wt,
		.write_seq = &e->write_seq,
		.pool = e->dev->pool,
		.holds = &e->holds,
		.grace = grace };

	e->journal = xj_open(&tg, jc, err, errlen);
	return e->journal ? 0 : -1;
}

/*
 * Make REQ durable; EIO if errors are pending.  A FLUSH, and a TRIM or
 * WRITE_ZEROES with FUA, cover everything acknowledged before sequence
 * SEQ.  A WRITE with FUA (or in writethrough mode) writes its own range
 * with FUA and nothing else.  With a write log, the log's commit
 * (req->jgen) covers them all; what is in the log is durable whatever
 * writeback's errors, which are told at the next FLUSH that writes back.
 */
/* R, a request made durable: an earlier writeback failure is its too,
 * reported once (the connection keeps the count seen). */
static int
export_durable_result(struct export *e, struct request *req, int r)
{
	uint64_t now = export_err_seq(e);

	if (r == 0 && now != req->err_seq)
		r = -EIO;
	req->err_seq = now;
	req->err_seq_checked = true;
	return r;
}

static int
export_make_durable(struct export *e, struct request *req, uint64_t seq)
{
	int r;

	if (e->journal) {
		r = xj_commit(e->journal, req->jgen);
		if (r > 0)
			return 0; /* in the log */
	} else if (req->nbd.type == NBD_CMD_WRITE) {
		r = wb_write_range_fua(&e->wt, req->nbd.offset, req->nbd.count,
		    seq);
	} else {
		r = wb_flush(&e->wt, seq, req->nbd.type == NBD_CMD_FLUSH ?
		    WB_REASON_FLUSH : WB_REASON_FUA);
	}
	return export_durable_result(e, req, r);
}

/* Block status's hook (bs_source.before_backend): ARG is the export's
 * writeback target. */
static void
export_flush_before_read(void *arg, uint64_t off, uint64_t len)
{
	wb_flush_before_read(arg, off, len);
}

/* What a queued request is, for wbctl status: a FLUSH, a write made
 * durable (fua), or reading from the device (a miss or a fill). */
static _Atomic unsigned *
export_work_counter(struct export *e, const struct request *req)
{
	switch (req->nbd.type) {
	case NBD_CMD_FLUSH:
		return &e->dev->work_by_reason[WB_REASON_FLUSH];
	case NBD_CMD_READ:
	case NBD_CMD_CACHE:
		return &e->dev->work_reads;
	default:
		if ((req->nbd.flags & NBD_CMD_FLAG_FUA) || req->writethrough ||
		    req->logged_write)
			return &e->dev->work_by_reason[WB_REASON_FUA];
		return req->nbd.type == NBD_CMD_WRITE ? &e->dev->work_reads :
		    NULL;
	}
}

/* A request whose only effect is its reply: skipped once the client has
 * gone (request.h, gone). */
static bool
export_only_answers(const struct nbd_request *n)
{
	return n->type == NBD_CMD_READ || n->type == NBD_CMD_BLOCK_STATUS ||
	    n->type == NBD_CMD_CACHE;
}

/*
 * A TRIM or WRITE_ZEROES (ARG, its request), on the backing device and in
 * the cache before and after.  Before: pages under writeback are zeroed
 * and stay dirty, so an old snapshot landing after the backend's zeroing
 * is written over later.  After: pages filled from the backend while it
 * was being zeroed are dropped.
 */
static int
export_discard(void *arg)
{
	struct request *req = arg;
	struct export *e = req->export;
	struct backend *b = e->backend;
	const struct nbd_request *n = &req->nbd;
	int r;

	/* A fast zero the backend cannot make fast is refused (ENOTSUP)
	 * with nothing touched, the cache included, as the spec asks.
	 * Made, it is made once more below, over what writeback in flight
	 * may land meanwhile. */
	if ((n->flags & NBD_CMD_FLAG_FAST_ZERO) &&
	    (r = backend_zero(b, n->count, n->offset,
		 !(n->flags & NBD_CMD_FLAG_NO_HOLE), true)) == -ENOTSUP)
		return r;
	cache_discard(e->cf, n->offset, n->count, req->seq);
	if (n->type == NBD_CMD_TRIM)
		r = backend_trim(b, n->count, n->offset);
	else
		r = backend_zero(b, n->count, n->offset,
		    !(n->flags & NBD_CMD_FLAG_NO_HOLE),
		    n->flags & NBD_CMD_FLAG_FAST_ZERO);
	/* Even a failure may have changed something: flush it. */
	wb_count_written(&e->wt, n->offset, n->count);
	if (r == 0)
		cache_discard(e->cf, n->offset, n->count, req->seq);
	return r;
}

/* The end of a queued request (export_queue), on the worker that carried
 * it out: its result R (0 or a negative errno), its count of queued work
 * taken back and the device's foreground work done.  Then it is posted to
 * its I/O thread, which replies: by the pool after export_run, by the
 * callbacks below themselves. */
static void
export_request_done(struct export *e, struct request *req, int r)
{
	req->err = -r;
	_Atomic unsigned *counter = export_work_counter(e, req);
	if (counter)
		sub_relaxed(counter, 1);
	wb_foreground_done(e->dev, e->wb);
}

static void
export_run(struct job *job)
{
	struct request *req = container_of(job, struct request, job);
	struct export *e = req->export;
	struct backend *b = e->backend;
	const struct nbd_request *n = &req->nbd;
	bool fua = n->flags & NBD_CMD_FLAG_FUA;
	int r = 0;

	if (export_only_answers(n) && req->gone && load_acquire(req->gone)) {
		r = -ECANCELED; /* the client has gone: nobody to answer */
		goto done;
	}
	switch (n->type) {
	case NBD_CMD_READ:
		r = export_read_miss(e, req);
		break;
	case NBD_CMD_WRITE:
		if (req->logged_write) {
			/* In the cache (and noted) on the I/O thread. */
			r = export_make_durable(e, req, req->seq);
			break;
		}
		r = export_write_slow(e, req);
		if (r == 0 && e->journal)
			req->jgen =
			    xj_note_write(e->journal, n->offset, n->count);
		if (r == 0 && (fua || req->writethrough))
			r = export_make_durable(e, req, req->seq);
		break;
	case NBD_CMD_FLUSH:
		/* Only an export with a write log runs its FLUSHes here, on
		 * the log's workers (the device's once the log is broken):
		 * the commit covers everything acknowledged before the FLUSH
		 * arrived (req->jgen).  Without a log, export_queue queues a
		 * FLUSH on its target instead (wb_flush_queue). */
		r = export_make_durable(e, req, req->seq);
		break;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		/* With a log, it notes the discard: the next commit writes
		 * back instead (ordered: after every epoch is applied). */
		if (e->journal)
			r = xj_discard(e->journal, export_discard, req,
			    &req->jgen);
		else
			r = export_discard(req);
		if (r == -ENOTSUP && (n->flags & NBD_CMD_FLAG_FAST_ZERO))
			break;
		if (r == 0 && (fua || req->writethrough))
			r = export_make_durable(e, req, req->seq);
		break;
	case NBD_CMD_CACHE:
		r = fill_prefetch(&e->wt, n->offset, n->count);
		break;
	case NBD_CMD_BLOCK_STATUS: {
		struct bs_source src = { .cf = e->cf,
			.backend = b,
			.page_size = e->wb->page_size,
			.before_backend = export_flush_before_read,
			.arg = &e->wt };
		r = bs_reply(&src, n, req->meta, &req->reply,
		    &req->reply_bytes);
		break;
	}
	default:
		r = -EINVAL;    /* validation lets nothing else through */
		break;
	}
done:
	/* Counted before its answer, whatever became of it: a FLUSH after
	 * it may not join a pass begun before (wb_flush_queue). */
	if (n->type == NBD_CMD_WRITE || n->type == NBD_CMD_TRIM ||
	    n->type == NBD_CMD_WRITE_ZEROES)
		wb_note_change(&e->wt);
	export_request_done(e, req, r);
}

/* --- on the I/O thread ------------------------------------------------- */

/* A miss read through the device's window is done (on its worker). */
static void
export_window_read_done(struct fill_read *r)
{
	struct request *req = container_of(r, struct request, fill);

	export_request_done(req->export, req, r->err);
	req->job.owner->post(req->job.owner, &req->job);
}

/* A FLUSH written back by a pass (wb_flush_queue; on its worker). */
static void
export_flush_done(struct wb_flush_wait *w)
{
	struct request *req = container_of(w, struct request, flush);
	struct export *e = req->export;

	export_request_done(e, req, export_durable_result(e, req, w->err));
	req->job.owner->post(req->job.owner, &req->job);
}

static void
export_queue(struct export *e, struct request *req)
{
	_Atomic unsigned *counter = export_work_counter(e, req);

	if (counter)
		add_relaxed(counter, 1);
	if (req->nbd.type == NBD_CMD_FLUSH && !e->journal) {
		/* Merged with the FLUSHes queued beside it; no worker
		 * waits for it meanwhile. */
		req->flush = (struct wb_flush_wait){ .seq = req->seq,
			.done = export_flush_done };
		wb_flush_queue(&e->wt, &req->flush);
		return;
	}
	if (req->nbd.type == NBD_CMD_READ && fill_window_wanted(&e->wt)) {
		/* A remote: many misses in flight on one worker. */
		req->fill = (struct fill_read){ .t = &e->wt,
			.buf = req->data,
			.off = req->nbd.offset,
			.len = req->nbd.count,
			.done = export_window_read_done };
		fill_queue(&req->fill);
		return;
	}
	req->job.run = export_run;
	req->job.waited_on = true;      /* its client waits for the reply */
	struct pool *log_pool =
	    (req->nbd.type == NBD_CMD_FLUSH || req->logged_write) &&
		e->journal ?
	    xj_pool(e->journal) :
	    NULL;
	pool_submit(log_pool ? log_pool : e->dev->pool, &req->job);
}

/* The pause for a writer to E; starts background writeback if due. */
static int
export_pause_ms(struct export *e, uint64_t dirty_pages)
{
	struct wb_dev *dev = e->dev;
	unsigned min_ratio = load_relaxed(&dev->min_ratio);
	unsigned max_ratio = load_relaxed(&dev->max_ratio);
	struct wb_dev_pages dev_pages = { 0, 0 };

	/* The device's own counts only matter if it has a share. */
	if (max_ratio < 100 || min_ratio > 0)
		dev_pages = wb_dev_pages(dev);
	if (wb_background_due(e->wb, dev, dirty_pages, dev_pages.dirty)) {
		xj_kick(e->journal); /* ordered: an epoch, applied */
		wb_kick_background(dev);
	}
	/* The throttle counts pages under writeback too (writeback.h). */
	return wb_throttle_dev_ms(e->wb, cache_unwritten_pages(e->wb->cache),
	    dev_pages.unwritten, min_ratio, max_ratio);
}

/* A write that landed in the cache: answer now, or pace it if dirty data
 * is high. */
static enum export_verdict
export_write_verdict(struct export *e, struct request *req)
{
	uint64_t dirty = cache_dirty_pages(e->wb->cache);
	unsigned quiet;

	req->pause_ms = export_pause_ms(e, dirty);
	if (req->pause_ms == 0)
		return EXPORT_REPLY;
	/* Throttling bites: said once in 10 s (counted in wbctl status's
	 * requests: paced_writes, held_writes). */
	if (ratelimit_due(&e->pace_rl, EXPORT_PACE_LOG_NS, &quiet)) {
		/* The cache's figures and the device's share: either may
		 * be what binds (wb_throttle_dev_ms). */
		struct wb_thresholds th;
		wb_ctl_snapshot(e->wb, &th);
		uint64_t ps = e->wb->page_size;
		char how[32];
		if (req->pause_ms < 0)
			snprintf(how, sizeof how, "held");
		else
			snprintf(how, sizeof how, "paced, %d ms each",
			    req->pause_ms);
		log_info("export \"%s\": writes %s: %llu bytes dirty in the "
			 "cache (dirty limit %llu), %llu of them on device %s "
			 "(max_ratio %u%%); writeback is making room (%u "
			 "other paced or held writes not logged)",
		    e->name, how, (unsigned long long)(dirty * ps),
		    (unsigned long long)(th.limit_pages * ps),
		    (unsigned long long)(wb_dev_dirty_pages(e->dev) * ps),
		    e->dev->name, load_relaxed(&e->dev->max_ratio), quiet);
	}
	return EXPORT_PACE;
}

struct cache_wbuf *
export_write_pages(struct export *e, uint64_t off, uint32_t len)
{
	if (len < e->wb->page_size)
		return NULL;
	return cache_wbuf_new(e->cf, off, len);
}

const struct iovec *
export_wbuf_iov(const struct cache_wbuf *w, unsigned *niov)
{
	return cache_wbuf_iov(w, niov);
}

void
export_wbuf_free(struct cache_wbuf *w)
{
	cache_wbuf_free(w);
}

bool
export_write_held(struct export *e)
{
	/* Held at the limit, unless shutting down (then let it go: the
	 * data is in the cache and the drain writes it back). */
	if (export_pause_ms(e, cache_dirty_pages(e->wb->cache)) >= 0 ||
	    load_relaxed(&e->wb->stopping))
		return false;
	xj_kick(e->journal);
	wb_kick_background(e->dev);
	return true;
}

enum export_verdict
export_complete(struct export *e, struct request *req)
{
	assert(req->export == e); /* submitted to E, then queued */
	/* A write that needed a fill is paced like any other. */
	if (req->nbd.type == NBD_CMD_WRITE && req->err == 0 &&
	    !req->err_seq_checked)
		return export_write_verdict(e, req);
	return EXPORT_REPLY;
}

bool
export_prefetch_begin(struct export *e, unsigned max)
{
	/* Counted in, if fewer than MAX were. */
	if (atomic_fetch_add_explicit(&e->dev->prefetching, 1,
		memory_order_relaxed) < max)
		return true;
	sub_relaxed(&e->dev->prefetching, 1);
	return false;
}

void
export_prefetch_end(struct export *e)
{
	sub_relaxed(&e->dev->prefetching, 1);
}

enum export_verdict
export_submit(struct export *e, struct request *req)
{
	return export_submit_write(e, req, NULL);
}

enum export_verdict
export_submit_write(struct export *e, struct request *req, const void *payload)
{
	const struct nbd_request *n = &req->nbd;
	/* Read once: tune and reload change it while requests arrive. */
	enum cache_mode mode = load_relaxed(&e->cache_mode);
	uint64_t fill;
	uint32_t done = 0; /* the worker starts over: the request's own */

	/* Validated, submitted once, with where its job is to end. */
	assert(req->nbd_err == 0 && !req->export && !req->queued);
	assert(req->job.done && req->job.owner);
	assert(n->type != NBD_CMD_DISC);
	/* A payload still in the input is copied into the request's own
	 * buffer if queued; cache pages are committed from the request. */
	assert(!payload || n->type == NBD_CMD_WRITE);
	assert(!payload || (req->data && !req->wbuf));
	assert(n->type != NBD_CMD_WRITE || req->data || req->wbuf ||
	    n->count == 0);
	req->export = e;
	/* With a write log in mode on-write, a write lands in the cache
	 * here and only its commit is queued, on the log's workers; once the
	 * log is broken it is a writethrough write. */
	bool on_write = e->journal && xj_on_write(e->journal);
	req->writethrough = mode == CACHE_WRITETHROUGH ||
	    (mode == CACHE_WRITETHROUGH_UNTIL_FLUSH && !req->flushed) ||
	    (on_write && !xj_pool(e->journal));

	switch (n->type) {
	case NBD_CMD_READ:
		if (req->ra)
			fill_readahead(&e->wt, req->ra, n->offset, n->count);
		if (cache_read(e->cf, req->data, n->offset, n->count))
			return EXPORT_REPLY;
		break;
	case NBD_CMD_WRITE:
		req->seq =
		    add_fetch_u64(&e->write_seq, 1, memory_order_acq_rel);
		if (!(n->flags & NBD_CMD_FLAG_FUA) && !req->writethrough &&
		    export_write_cache(e, req, payload, &fill, &done) ==
			CACHE_WRITE_OK) {
			wb_note_change(&e->wt);
			if (!e->journal)
				return export_write_verdict(e, req);
			req->jgen =
			    xj_note_write(e->journal, n->offset, n->count);
			if (!on_write)
				return export_write_verdict(e, req);
			req->logged_write = true;
			export_queue(e, req);
			return EXPORT_QUEUED;
		}
		/* Queued: the worker needs it in the request's own buffer. */
		if (payload)
			memcpy(req->data, payload, n->count);
		break;
	case NBD_CMD_FLUSH:
		req->flushed = true;
		req->seq = load_acquire(&e->write_seq);
		if (e->journal)
			req->jgen = xj_gen(e->journal);
		break;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		req->seq =
		    add_fetch_u64(&e->write_seq, 1, memory_order_acq_rel);
		break;
	}
	export_queue(e, req);
	return EXPORT_QUEUED;
}
