/*
 * writeback.h - writing dirty pages back to the backing devices, the
 * kernel's way: background writeback above dirty_background, periodic
 * writeback of pages older than dirty_expire, FLUSH as "everything dirtied
 * before now is on the device", and writer throttling towards dirty_limit.
 *
 * Work runs on the writeback device's pool (flush-MAJ:MIN threads).  The
 * thresholds are read by every thread without a lock; they are set at
 * start-up.
 */
#ifndef WBD_WRITEBACK_H
#define WBD_WRITEBACK_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

struct cache;
struct export;
struct wb_dev;

enum wb_reason {
	WB_REASON_BACKGROUND,
	WB_REASON_PERIODIC,
	WB_REASON_FLUSH,
	WB_REASON_FUA,
	WB_REASON_SHUTDOWN,
	WB_REASON_SYNC,
};

struct wb_ctl {
	struct cache *cache;
	uint32_t page_size;
	uint64_t total_pages;
	uint64_t bg_pages;              /* dirty_background in pages */
	uint64_t limit_pages;           /* dirty limit in pages */
	uint64_t expire_ns;             /* dirty_expire_centisecs */
	uint32_t max_run_pages;         /* coalescing cap */
	unsigned writeback_cs;          /* dirty_writeback_centisecs, 0: off */
	int stopping;                   /* shutting down: stop holding writers */
};

const char *wb_reason_name(enum wb_reason r);

/* Resolve the configured thresholds against the cache size. */
void wb_ctl_init(struct wb_ctl *wb, struct cache *cache,
    const struct wbd_config *cfg);
/* Change them at run time (tune, reload); other threads see each field
 * change atomically. */
void wb_ctl_update(struct wb_ctl *wb, const struct writeback_conf *wc);

/*
 * Write back every page of E dirtied at or before sequence MAX_SEQ, wait for
 * writeback of such pages already in flight, then flush the backend.
 * Returns 0 or a negative errno.  Worker threads only (it blocks).
 */
int wb_flush_export(struct export *e, uint64_t max_seq, enum wb_reason why);

/*
 * FUA: make the write at [OFF, OFF+LEN) (already in the cache with
 * sequence SEQ) durable, passing FUA to the device: only that range is
 * written, with BACKEND_WRITE_FUA.  Returns 0 or a negative errno.
 * Worker threads only.
 */
int wb_write_range_fua(struct export *e, uint64_t off, uint64_t len,
    uint64_t seq);

/* Queue background writeback on DEV if none is queued (any thread). */
void wb_kick_background(struct wb_dev *dev);
/* Queue periodic writeback of expired pages on DEV (any thread). */
void wb_kick_periodic(struct wb_dev *dev);

/*
 * How long to hold the reply to a write, given the dirty pages now:
 * 0 below the midpoint between the background threshold and the limit,
 * rising smoothly to 200 ms towards the limit; -1 at or above the limit
 * (hold until writeback has made room).
 */
int wb_throttle_pause_ms(const struct wb_ctl *wb, uint64_t dirty_pages);

/*
 * The same for a writer to one device, which also holds a share of the
 * limit: at most MAX_RATIO % of it (held at that share, paced in the upper
 * half of it), and a device under MIN_RATIO % is not paced below the
 * global limit.  DEV_DIRTY counts the device's dirty pages.
 */
int wb_throttle_dev_ms(const struct wb_ctl *wb, uint64_t dirty_pages,
    uint64_t dev_dirty, unsigned min_ratio, unsigned max_ratio);

/* Dirty pages of every export on DEV (any thread). */
uint64_t wb_dev_dirty_pages(struct wb_dev *dev);

/* Wait (worker thread) until E's writeback state changes or MS pass. */
void wb_wait_progress(struct export *e, unsigned ms);

#endif
