/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blockstatus.c - NBD_CMD_BLOCK_STATUS: see blockstatus.h.
 *
 * The cache is looked at before the backing device: a page dirty or under
 * writeback when looked at is reported as the cache has it; one clean by
 * then was written back before the device is asked, so the device has it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "blockstatus.h"
#include "cache.h"
#include "log.h"
#include "meta.h"
#include "proto.h"

/* The extents of one context, being built. */
struct bs_list {
	struct proto_extent *e;
	uint32_t n, max;
};

/* Add LEN bytes of FLAGS, merged with the last extent if alike; false
 * once the list is full. */
static bool
bs_add(struct bs_list *l, uint64_t len, uint32_t flags)
{
	if (l->n > 0 && l->e[l->n - 1].flags == flags) {
		l->e[l->n - 1].length += (uint32_t)len;
		return true;
	}
	if (l->n == l->max)
		return false;
	l->e[l->n++] =
	    (struct proto_extent){ .length = (uint32_t)len, .flags = flags };
	return true;
}

/* A run of pages in one state, up to END (bytes). */
struct bs_crun {
	uint64_t end;
	unsigned state;
};

/*
 * What the cache holds over [OFF, STOP), in runs: up to MAX of them into
 * CR.  Returns how many; the last ends at STOP, or sooner if MAX ran out.
 */
static uint32_t
bs_cache_runs(const struct bs_source *src, uint64_t off, uint64_t stop,
    struct bs_crun *cr, uint32_t max)
{
	uint64_t ps = src->page_size, pos = off;
	uint32_t n = 0;

	while (pos < stop && n < max) {
		uint64_t page = pos / ps, pages = (stop + ps - 1) / ps - page;
		uint64_t k =
		    cache_state_run(src->cf, page, pages, &cr[n].state);
		cr[n].end = (page + k) * ps < stop ? (page + k) * ps : stop;
		pos = cr[n++].end;
	}
	return n;
}

/* base:allocation's flags where the device says DEV and the cache CSTATE. */
static uint32_t
bs_allocation(uint32_t dev, unsigned cstate)
{
	if (!(cstate & CACHE_STATE_DIRTY))
		return dev;
	if (cstate & CACHE_STATE_ZERO)
		return (dev & NBD_STATE_HOLE) | NBD_STATE_ZERO;
	return 0;
}

static uint32_t
bs_dirty(unsigned cstate)
{
	uint32_t flags = 0;

	if (cstate & CACHE_STATE_DIRTY)
		flags |= META_DIRTY_STATE_DIRTY;
	if (cstate & CACHE_STATE_WRITEBACK)
		flags |= META_DIRTY_STATE_WRITEBACK;
	return flags;
}

/*
 * The extents of context M from OFF into L: for wbd:dirty, the cache's
 * runs CR (N_CR of them, from OFF); for base:allocation, those overlaid on
 * the device's extents DEV (N_DEV of them, from OFF, covering at least as
 * far as the runs).
 */
static void
bs_context(enum meta_context m, uint64_t off, const struct bs_crun *cr,
    uint32_t n_cr, const struct backend_extent *dev, int n_dev,
    struct bs_list *l)
{
	uint64_t pos = off, dend = off;
	uint32_t ci = 0;
	int di = -1;

	while (ci < n_cr) {
		uint64_t end = cr[ci].end;
		uint32_t flags;
		if (m == META_BASE_ALLOCATION) {
			while (pos >= dend && di + 1 < n_dev)
				dend += dev[++di].length;
			if (end > dend)
				end = dend;
			flags = bs_allocation(dev[di].flags, cr[ci].state);
		} else {
			flags = bs_dirty(cr[ci].state);
		}
		if (!bs_add(l, end - pos, flags))
			break;
		pos = end;
		if (pos == cr[ci].end)
			ci++;
	}
}

int
bs_reply(const struct bs_source *src, const struct nbd_request *req,
    unsigned contexts, void **reply, size_t *bytes)
{
	uint32_t max = (req->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : BS_MAX_EXTENTS;
	uint64_t off = req->offset, stop = off + req->count;
	uint64_t ps = src->page_size;
	struct bs_list lists[META_N_CONTEXTS] = { 0 };
	struct backend_extent *dev = NULL;
	struct bs_crun *cr = malloc(max * sizeof *cr);
	int n_dev = 0, r = -ENOMEM;

	if (!cr)
		goto out;
	/* Pages are looked at one by one only where some are not written
	 * back (cache_state_run): then no more than BS_MAX_SCAN_PAGES. */
	uint64_t first = off / ps, npages = (stop - 1) / ps - first + 1;
	if (npages > BS_MAX_SCAN_PAGES && cache_file_unwritten_pages(src->cf))
		stop = (first + BS_MAX_SCAN_PAGES) * ps;
	/* The cache first: what it has not written back by now, the device
	 * does not have; the rest, written back before, it has. */
	uint32_t n_cr = bs_cache_runs(src, off, stop, cr, max);
	stop = cr[n_cr - 1].end;

	if (contexts & (1u << META_BASE_ALLOCATION)) {
		if (!(dev = malloc(max * sizeof *dev)))
			goto out;
		/* After the cache: a page found clean was written back, and
		 * counted, before. */
		if (src->before_backend)
			src->before_backend(src->arg, off, stop - off);
		n_dev =
		    backend_extents(src->backend, stop - off, off, dev, max);
		if (n_dev < 0) {
			log_debug("block status at %llu: the backing device "
				  "could not tell (%s): reporting data",
			    (unsigned long long)off, strerror(-n_dev));
			dev[0] =
			    (struct backend_extent){ .length = stop - off };
			n_dev = 1;
		}
		/* The device may cover less: so does the reply. */
		uint64_t covered = off;
		for (int i = 0; i < n_dev; i++)
			covered += dev[i].length;
		while (n_cr > 1 && cr[n_cr - 2].end >= covered)
			n_cr--;
		if (cr[n_cr - 1].end > covered)
			cr[n_cr - 1].end = covered;
	}

	size_t total = 0;
	for (unsigned m = 0; m < META_N_CONTEXTS; m++) {
		if (!(contexts & (1u << m)))
			continue;
		lists[m].max = max;
		if (!(lists[m].e = malloc(max * sizeof *lists[m].e)))
			goto out;
		bs_context(m, off, cr, n_cr, dev, n_dev, &lists[m]);
		total += proto_block_status_bytes(lists[m].n);
	}

	uint8_t *p = malloc(total);
	if (!p)
		goto out;
	*reply = p;
	*bytes = total;
	for (unsigned m = 0; m < META_N_CONTEXTS; m++) {
		if (!(contexts & (1u << m)))
			continue;
		total -= proto_block_status_bytes(lists[m].n);
		p += proto_encode_block_status(p, req->cookie, total == 0,
		    meta_context_id(m), lists[m].e, lists[m].n);
	}
	r = 0;
out:
	for (unsigned m = 0; m < META_N_CONTEXTS; m++)
		free(lists[m].e);
	free(dev);
	free(cr);
	return r;
}
