/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blockstatus.h - NBD_CMD_BLOCK_STATUS: the extents of each metadata
 * context a client selected (meta.h), built from the backing device's
 * allocation overlaid with what the cache holds that the device does not
 * have yet, and encoded as the reply's chunks.  Runs on a worker: the
 * backing device may be asked (lseek, or a remote's own block status).
 *
 *   base:allocation  the backing device's holes and zeroes, except where a
 *                    page is dirty or under writeback: data, or zeroes
 *                    (NBD_STATE_ZERO, a hole only if the device's range
 *                    is one) where a TRIM or WRITE_ZEROES left zeroes not
 *                    yet written back;
 *   wbd:dirty        META_DIRTY_STATE_DIRTY where pages are dirty or
 *                    under writeback, with META_DIRTY_STATE_WRITEBACK
 *                    where they are under writeback.
 *
 * A reply holds at most BS_MAX_EXTENTS extents per context and looks at
 * no more than BS_MAX_SCAN_PAGES pages of a cache holding anything not
 * written back; it may so cover less than asked for (clients ask again
 * from where it ends), never more.
 */
#ifndef WBD_BLOCKSTATUS_H
#define WBD_BLOCKSTATUS_H

#include <stddef.h>
#include <stdint.h>

#define BS_MAX_EXTENTS 8192u
#define BS_MAX_SCAN_PAGES 65536u

struct backend;
struct cache_file;
struct nbd_request;

/* What block status is asked of: one export's pages and device. */
struct bs_source {
	struct cache_file *cf;
	struct backend *backend;
	uint32_t page_size;
	/* Called (if set) with ARG once the cache has been looked at and
	 * before the backend is asked about [off, off + len): a multi-conn
	 * remote's answer covers what was written back only once flushed
	 * (wb_flush_before_read). */
	void (*before_backend)(void *arg, uint64_t off, uint64_t len);
	void *arg;
};

/*
 * The reply to REQ (a validated BLOCK_STATUS) for the contexts in
 * CONTEXTS (a meta.h selection, not empty): every chunk, encoded, in
 * *REPLY (malloc'ed) of *BYTES.  0, or -ENOMEM.
 */
int bs_reply(const struct bs_source *src, const struct nbd_request *req,
    unsigned contexts, void **reply, size_t *bytes);

#endif
