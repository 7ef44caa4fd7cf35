/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fill.c - filling the cache from the backing device: see fill.h.
 *
 * A read is begun (placeholders put in for the pages not resident, one
 * backend read started over them) and ended (the read waited for, the
 * pages installed, the caller's copy made).  A local device reads in
 * begin; a remote only submits there, so the window begins every read
 * queued, up to backend_max_reads_in_flight, and ends the oldest first.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomics.h"
#include "backend.h"
#include "bufstash.h"
#include "cache.h"
#include "clock.h"
#include "fill.h"
#include "log.h"
#include "pool.h"
#include "wbdev.h"
#include "writeback.h"

/* The reads one window keeps in flight: at least FILL_WINDOW, and on a
 * remote as many as its link takes (twice bandwidth x round trip, the
 * reads' own estimate), at most FILL_WINDOW_MAX and the remote's
 * max_readahead_bytes in bytes. */
#define FILL_WINDOW 64
#define FILL_WINDOW_MAX 1024
/* Read-ahead on a remote goes in pieces of at most this, each a read of
 * its own in the window: in flight together, not one after another. */
#define FILL_RA_PIECE_BYTES (1u << 20)
/* The line saying limits.max_cache_share cut a CACHE short, at most
 * this often. */
#define FILL_PREFETCH_CUT_LOG_NS (10ull * 1000000000ull)
/* Read-ahead: after this many sequential reads, windows from this size. */
#define FILL_RA_STREAK 3
#define FILL_RA_MIN_BYTES (128u << 10)
/* A read waits this long at most for a page another read fills. */
#define FILL_WAIT_MS 1000

/*
 * Read from T's backing device, counted on its device.  A remote whose
 * reads may go on another connection than its writes first gets a FLUSH
 * if something in the range was written to it since the last one (NBD
 * multi-conn makes a write visible on every connection once flushed;
 * before, a page written back and evicted could be read back stale):
 * wb_flush_before_read.
 */
static uint64_t
fill_backend_begin(struct wb_target *t, struct backend_read *br, void *buf,
    uint32_t count, uint64_t off)
{
	uint64_t start = 0;

	wb_flush_before_read(t, off, count);
	add_relaxed(&t->dev->read_bytes, count);
	/* A remote's reads are its link's estimate for reads (wbdev.h). */
	if (t->backend->caps & BACKEND_REMOTE) {
		start = now_ns();
		wb_dev_link_begin(t->dev, &t->dev->rest, count, start);
	}
	backend_read_begin(t->backend, br, buf, count, off);
	return start;
}

/* End a read fill_backend_begin began at START, of COUNT bytes. */
static int
fill_backend_end(struct wb_target *t, struct backend_read *br, uint32_t count,
    uint64_t start)
{
	int r = backend_read_end(br);

	if (start) {
		uint64_t now = now_ns();
		wb_dev_link_end(t->dev, &t->dev->rest, count,
		    now > start ? now - start : 0, r == 0, now);
	}
	return r;
}

/* Install page FIRST + I of R's read (or drop its placeholder: DATA
 * NULL). */
static void
fill_install(struct fill_read *r, uint32_t i, const void *data)
{
	/* Only a page this read placed a placeholder for, inside it. */
	assert(i < r->npages && r->need && r->need[i] == CACHE_NEED_FILL);
	assert((r->first + i) * r->t->wb->page_size < r->t->size_bytes);
	if (r->ahead)
		cache_fill_end_ahead(r->t->cf, r->first + i, data, &r->mark);
	else
		cache_fill_end(r->t->cf, r->first + i, data, &r->mark);
}

/* Begin R: true if it must be ended (fill_end: a backend read in
 * flight, or pages another read fills), false if R is done (R->err set). */
static bool
fill_begin(struct fill_read *r)
{
	struct wb_target *t = r->t;
	uint32_t ps = t->wb->page_size;
	uint64_t last = (r->off + r->len - 1) / ps;

	r->first = r->off / ps;
	r->err = 0;
	r->tmp = NULL;
	r->direct = false;
	r->npages = (uint32_t)(last - r->first + 1);
	if (!(r->need = malloc(r->npages))) {
		r->err = -ENOMEM;
		return false;
	}
	if (cache_read_prepare(t->cf, r->buf, r->off, r->len, r->need) == 0) {
		free(r->need);
		return false;
	}
	r->mark = cache_fill_mark(t->cf);
	/* Read from the first to the last page ours to fill, whole pages
	 * (others' in between too: they are the same on the device). */
	r->lo = 0;
	r->hi = r->npages - 1;
	while (r->lo < r->npages && r->need[r->lo] != CACHE_NEED_FILL)
		r->lo++;
	if (r->lo == r->npages)
		return true; /* only others' fills to wait for */
	while (r->need[r->hi] != CACHE_NEED_FILL)
		r->hi--;
	uint64_t rd_off = (r->first + r->lo) * ps;
	uint64_t rd_len = (uint64_t)(r->hi - r->lo + 1) * ps;
	uint64_t avail =
	    rd_off + rd_len > t->size_bytes ? t->size_bytes - rd_off : rd_len;
	r->direct =
	    r->buf && rd_off >= r->off && rd_off + rd_len <= r->off + r->len;
	for (uint32_t i = r->lo; i <= r->hi && r->direct; i++)
		r->direct = r->need[i] == CACHE_NEED_FILL;
	if (r->direct) {
		/* Whole pages, each ours to fill, inside the caller's buffer:
		 * read there, and install the pages from it. */
		r->tmp = (uint8_t *)r->buf + (rd_off - r->off);
		r->rd_len = (uint32_t)rd_len;
		r->rd_start = fill_backend_begin(t, &r->br, r->tmp,
		    (uint32_t)rd_len, rd_off);
		return true;
	}
	if (!(r->tmp = bufstash_get(rd_len, &r->tmp_cap))) {
		for (uint32_t i = r->lo; i <= r->hi; i++)
			if (r->need[i] == CACHE_NEED_FILL)
				fill_install(r, i, NULL);
		free(r->need);
		r->err = -ENOMEM;
		return false;
	}
	memset(r->tmp + avail, 0, rd_len - avail);
	r->rd_len = (uint32_t)avail;
	r->rd_start =
	    fill_backend_begin(t, &r->br, r->tmp, (uint32_t)avail, rd_off);
	return true;
}

/* The part of page I of R inside R's range: [*FROM, *TO) (bytes). */
static void
fill_part(const struct fill_read *r, uint32_t i, uint64_t *from, uint64_t *to)
{
	uint64_t ps = r->t->wb->page_size, pstart = (r->first + i) * ps;

	*from = pstart > r->off ? pstart : r->off;
	*to = pstart + ps < r->off + r->len ? pstart + ps : r->off + r->len;
}

/*
 * Page I of R, which another read was filling when R began: copy it into
 * R's buffer from the cache once that read is done; if it failed (or the
 * page has gone since), or takes more than FILL_WAIT_MS, read it here.
 * In a window, the other read is older, so already ended.
 */
static int
fill_wait_other(struct fill_read *r, uint32_t i)
{
	uint64_t ps = r->t->wb->page_size, from, to;
	unsigned slept_us = 0, nap_us = 50;

	fill_part(r, i, &from, &to);
	for (;;) {
		int k = cache_read_filled(r->t->cf, r->first + i,
		    (uint32_t)(from % ps), (uint32_t)(to - from),
		    (uint8_t *)r->buf + (from - r->off));
		if (k > 0)
			return 0;
		if (k < 0 || slept_us >= FILL_WAIT_MS * 1000u)
			break;
		usleep(nap_us);
		slept_us += nap_us;
		if (nap_us < 10000)
			nap_us *= 2;
	}
	struct fill_read self = { .t = r->t,
		.off = from,
		.len = (uint32_t)(to - from),
		.buf = (uint8_t *)r->buf + (from - r->off) };
	return fill_read_now(&self);
}

/* End R's backend read: install the pages, make the caller's copy; and
 * take the pages others filled. */
static void
fill_end(struct fill_read *r)
{
	uint32_t ps = r->t->wb->page_size;
	int err = r->lo < r->npages ?
	    fill_backend_end(r->t, &r->br, r->rd_len, r->rd_start) :
	    0;

	for (uint32_t i = r->lo; i <= r->hi && r->lo < r->npages; i++) {
		if (r->need[i] != CACHE_NEED_FILL)
			continue;
		uint8_t *page = r->tmp + (uint64_t)(i - r->lo) * ps;
		fill_install(r, i, err == 0 ? page : NULL);
		if (err != 0 || !r->buf || r->direct)
			continue;
		uint64_t from, to;
		fill_part(r, i, &from, &to);
		memcpy((uint8_t *)r->buf + (from - r->off),
		    page + (from - (r->first + i) * ps), to - from);
	}
	if (!r->direct)
		bufstash_put(r->tmp, r->tmp_cap);
	/* A prefetch has nothing to wait for: the other read fills it. */
	for (uint32_t i = 0; i < r->npages && err == 0 && r->buf; i++)
		if (r->need[i] == CACHE_NEED_WAIT)
			err = fill_wait_other(r, i);
	free(r->need);
	r->err = err;
}

int
fill_read_now(struct fill_read *r)
{
	if (fill_begin(r))
		fill_end(r);
	return r->err;
}

bool
fill_window_wanted(struct wb_target *t)
{
	return backend_max_reads_in_flight(t->backend) > 1;
}

/*
 * The reads to keep in flight on DEV, whose backend is B, with room for
 * SIZE: at most what B takes; on a remote, what its link takes (the
 * reads' estimate), from FILL_WINDOW up to FILL_WINDOW_MAX and its
 * max_readahead_bytes.
 */
static unsigned
fill_window_cap(struct wb_dev *dev, struct backend *b, unsigned size)
{
	unsigned most = backend_max_reads_in_flight(b);
	unsigned cap = FILL_WINDOW;

	if (b->caps & BACKEND_REMOTE)
		cap = wb_dev_link_window(dev, &dev->rest, &dev->read_window,
		    FILL_WINDOW, load_relaxed(&b->max_readahead_bytes),
		    FILL_WINDOW_MAX);
	if (cap > size)
		cap = size;
	return cap < most ? cap : most;
}

/*
 * May the window, with N reads in flight and CAP its estimate, begin R?
 * A read-ahead only below CAP; a client's own read (the client waits for
 * it, and without wbd it would be at the remote already) up to
 * FILL_WINDOW whatever the estimate, at most what the backend takes.
 * The estimate follows what is in flight, and its floor in bytes
 * (LINKEST_FLOOR_BYTES) held a client's 16 misses of 1 MiB to 4.
 */
static bool
fill_window_admits(const struct fill_read *r, unsigned n, unsigned cap)
{
	if (n < cap)
		return true;
	return !r->ahead && n < FILL_WINDOW &&
	    n < backend_max_reads_in_flight(r->t->backend);
}

/*
 * The device's read window, on one worker: begin every read queued (up
 * to the device's limit), end the oldest, again, until none is queued or
 * in flight.  Reads of every export of the device go through it.
 */
static void
fill_window_run(struct job *job)
{
	struct wb_dev *dev = container_of(job, struct wb_dev, read_job);
	struct fill_read *small[FILL_WINDOW], **ring = small;
	unsigned size = FILL_WINDOW;
	unsigned head = 0, n = 0, cap = FILL_WINDOW;

	/* The device's ring, made once (one window runs at a time: the
	 * last run let go of it under read_lock); without memory for it,
	 * the least window. */
	if (!dev->read_ring)
		dev->read_ring = malloc(FILL_WINDOW_MAX * sizeof *ring);
	if (dev->read_ring) {
		ring = dev->read_ring;
		size = FILL_WINDOW_MAX;
	}

	pthread_mutex_lock(&dev->read_lock);
	for (;;) {
		while (dev->read_head &&
		    fill_window_admits(dev->read_head, n, cap)) {
			struct fill_read *r = dev->read_head;
			if (!(dev->read_head = r->next))
				dev->read_tail = &dev->read_head;
			pthread_mutex_unlock(&dev->read_lock);
			cap = fill_window_cap(dev, r->t->backend, size);
			if (fill_begin(r))
				ring[(head + n++) % size] = r;
			else
				r->done(r);
			pthread_mutex_lock(&dev->read_lock);
		}
		if (n == 0)
			break; /* and nothing queued */
		/*
		 * The oldest, unless a read is queued first (then begin it:
		 * a slow read must not hold back the ones behind it).  Woken
		 * only while waiting (read_waiting): a write less per read
		 * queued while the window is busy anyway.  Only a read queued
		 * now (the loop above left it: the window has no room for
		 * it) makes the wait for the oldest one that cannot be
		 * woken: a client's read may come while the window is over
		 * its estimate, and must not wait for the oldest to end.
		 */
		bool done = dev->read_head != NULL;
		if (!done) {
			dev->read_waiting = true;
			pthread_mutex_unlock(&dev->read_lock);
			done =
			    backend_read_wait(&ring[head]->br, dev->read_wake);
			pthread_mutex_lock(&dev->read_lock);
			dev->read_waiting = false;
			uint64_t v; /* nonblocking: EAGAIN if none */
			if (!done)
				(void)!read(dev->read_wake, &v, sizeof v);
		}
		if (done) {
			struct fill_read *r = ring[head];
			head = (head + 1) % size;
			n--;
			pthread_mutex_unlock(&dev->read_lock);
			fill_end(r);
			r->done(r);
			pthread_mutex_lock(&dev->read_lock);
		}
	}
	dev->read_running = false;
	pthread_mutex_unlock(&dev->read_lock);
}

void
fill_queue(struct fill_read *r)
{
	struct wb_dev *dev = r->t->dev;
	bool start;

	r->next = NULL;
	pthread_mutex_lock(&dev->read_lock);
	*dev->read_tail = r;
	dev->read_tail = &r->next;
	start = !dev->read_running;
	bool wake = dev->read_waiting;
	dev->read_running = true;
	pthread_mutex_unlock(&dev->read_lock);
	if (!start) {
		/* Wake the window if it waits for a read in flight. */
		uint64_t one = 1;
		if (wake && write(dev->read_wake, &one, sizeof one) < 0 &&
		    errno != EAGAIN)
			log_debug("eventfd write: %s", strerror(errno));
		return;
	}
	/* The last run has let go of it (read_running was false). */
	memset(&dev->read_job, 0, sizeof dev->read_job);
	dev->read_job.run = fill_window_run;
	dev->read_job.waited_on = true; /* clients wait for it */
	pool_submit(dev->pool, &dev->read_job);
}

int
fill_page(struct wb_target *t, uint64_t index)
{
	uint32_t ps = t->wb->page_size;
	struct backend_read br;

	if (!cache_fill_begin(t->cf, index))
		return 0;
	struct cache_fill_mark m = cache_fill_mark(t->cf);
	uint8_t *page = calloc(1, ps);
	if (!page) {
		cache_fill_end(t->cf, index, NULL, &m);
		return -ENOMEM;
	}
	uint64_t off = index * ps;
	uint64_t n = off + ps > t->size_bytes ? t->size_bytes - off : ps;
	uint64_t start = fill_backend_begin(t, &br, page, (uint32_t)n, off);
	int r = fill_backend_end(t, &br, (uint32_t)n, start);
	cache_fill_end(t->cf, index, r == 0 ? page : NULL, &m);
	free(page);
	return r;
}

/* An NBD_CMD_CACHE of T's read what limits.max_cache_share allows and
 * leaves LEFT bytes unread: counted, and said at most every 10 s. */
static void
fill_prefetch_cut(struct wb_target *t, uint64_t left)
{
	unsigned quiet;

	add_relaxed(&t->wb->prefetch_cut, 1);
	if (ratelimit_due(&t->wb->prefetch_cut_rl, FILL_PREFETCH_CUT_LOG_NS,
		&quiet))
		log_info("export \"%s\": a CACHE request reached "
			 "limits.max_cache_share (%llu page(s)); %llu "
			 "byte(s) of it not read (%u more such since the "
			 "last line)",
		    t->name, (unsigned long long)t->wb->prefetch_max_pages,
		    (unsigned long long)left, quiet);
}

int
fill_prefetch(struct wb_target *t, uint64_t off, uint64_t len)
{
	uint64_t ps = t->wb->page_size, total = t->wb->total_pages;
	uint64_t piece = (uint64_t)load_relaxed(&t->wb->max_run_pages) * ps;
	uint64_t budget = t->wb->prefetch_max_pages;

	while (len > 0) {
		/* To the next piece boundary: aligned reads after the first. */
		uint64_t n =
		    piece - off % piece < len ? piece - off % piece : len;
		uint64_t pages = (off + n - 1) / ps - off / ps + 1;
		uint64_t clean = total - cache_unwritten_pages(t->wb->cache);
		if (pages > clean / 2)
			break;
		if (pages > budget) {
			fill_prefetch_cut(t, len);
			break;
		}
		struct fill_read r = { .t = t,
			.off = off,
			.len = (uint32_t)n,
			.ahead = true };
		int err = fill_read_now(&r);
		if (err < 0)
			return err;
		budget -= pages;
		off += n;
		len -= n;
	}
	return 0;
}

/* A read-ahead as a job of its own (a device without a window). */
struct fill_job {
	struct job job;
	struct fill_read r;
};

static void
fill_job_run(struct job *job)
{
	struct fill_job *fj = container_of(job, struct fill_job, job);

	fill_read_now(&fj->r);
	free(fj); /* the pool does not touch a job after its run */
}

static void
fill_ahead_done(struct fill_read *r)
{
	free(container_of(r, struct fill_job, r));
}

/* Read [OFF, OFF+N) of T ahead as one job (a device without a window). */
static void
fill_ahead_job(struct wb_target *t, uint64_t off, uint64_t n)
{
	struct fill_job *fj = calloc(1, sizeof *fj);

	if (!fj)
		return; /* it was advice */
	fj->r = (struct fill_read){ .t = t,
		.off = off,
		.len = (uint32_t)n,
		.ahead = true,
		.done = fill_ahead_done };
	fj->job.run = fill_job_run;
	fj->job.waited_on = true; /* the client reads it next */
	pool_submit(t->dev->pool, &fj->job);
}

void
fill_readahead(struct wb_target *t, struct fill_ra *ra, uint64_t off,
    uint32_t len)
{
	uint32_t max = t->wb->readahead_bytes, ps = t->wb->page_size;

	if (off != ra->next) {
		/* Not where the last read ended: no streak. */
		*ra = (struct fill_ra){ .next = off + len,
			.streak = 1,
			.inflight_bytes = ra->inflight_bytes };
		return;
	}
	ra->next = off + len;
	if (max == 0 || ++ra->streak < FILL_RA_STREAK)
		return;
	/* A file read through the host's page cache has the kernel's
	 * read-ahead already: ours would read the same bytes (and the
	 * holes between a sparse file's data) a second time. */
	if (!(t->backend->caps & (BACKEND_REMOTE | BACKEND_UNCACHED)))
		return;
	/* On a remote it grows with the link: twice bandwidth x round trip
	 * of its reads, up to remote.max_readahead_bytes (never below
	 * cache.readahead_bytes). */
	if (t->backend->caps & BACKEND_REMOTE) {
		uint64_t most = wb_dev_readahead(t->dev, max,
		    load_relaxed(&t->backend->max_readahead_bytes));
		max = most > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)most;
	}
	if (ra->ahead < ra->next)
		ra->ahead = ra->next; /* the client got there first */
	if (ra->window == 0) {
		/* The kernel's first window (get_init_ra_size): four reads'
		 * worth of small reads, two of larger ones, then doubled. */
		uint64_t w = (uint64_t)len * (len <= max / 32 ? 4 : 2);
		if (w < FILL_RA_MIN_BYTES)
			w = FILL_RA_MIN_BYTES;
		ra->window = (uint32_t)(w > max ? max : w);
	}
	if (ra->ahead - ra->next >= ra->window / 2 ||
	    ra->ahead >= t->size_bytes)
		return;
	/*
	 * The client's own reads in flight already cover a window (1 MiB
	 * reads 8 deep, say): each of them misses straight into its buffer
	 * and is copied into the cache once, where a page read ahead under
	 * it would be copied twice more (measured: a pass of cold 1 MiB
	 * reads at queue depth 8 from a remote, 1.5 GB/s without
	 * read-ahead, 1.05 GB/s with it).
	 */
	if (ra->inflight_bytes - len >= ra->window)
		return;
	uint64_t n = t->size_bytes - ra->ahead;
	if (n > ra->window)
		n = ra->window;
	/* Never more than half of what is clean: dirty pages are never
	 * evicted, and the clean ones should not all go for this. */
	uint64_t clean =
	    t->wb->total_pages - cache_unwritten_pages(t->wb->cache);
	if (n / ps + 2 > clean / 2)
		return;
	uint64_t next_window = 2 * (uint64_t)ra->window;
	ra->window = (uint32_t)(next_window > max ? max : next_window);
	if (!fill_window_wanted(t)) {
		fill_ahead_job(t, ra->ahead, n);
		ra->ahead += n;
		return;
	}
	/* In pieces through the read window, in flight together. */
	while (n > 0) {
		uint64_t k = n > FILL_RA_PIECE_BYTES ? FILL_RA_PIECE_BYTES : n;
		struct fill_job *fj = calloc(1, sizeof *fj);
		if (!fj)
			return; /* it was advice */
		fj->r = (struct fill_read){ .t = t,
			.off = ra->ahead,
			.len = (uint32_t)k,
			.ahead = true,
			.done = fill_ahead_done };
		ra->ahead += k;
		n -= k;
		fill_queue(&fj->r);
	}
}
