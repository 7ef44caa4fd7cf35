/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbdev.h - a writeback device: the backing device under one or more
 * exports, identified as MAJ:MIN like the kernel's backing_dev_info, with
 * its own pool of flush-MAJ:MIN workers.  Two exports on one filesystem
 * share a device and its pool.
 */
#ifndef WBD_WBDEV_H
#define WBD_WBDEV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "job.h"
#include "linkest.h"
#include "pool.h"
#include "pubtab.h"
#include "ratelimit.h"
#include "stats.h"

struct grace;
struct fill_read;
struct wb_target;

struct wb_dev {
	dev_t id;
	char name[32]; /* "MAJ:MIN" */
	struct pool *pool;
	/* The exports on this device: WB_DEV_MAX_TARGETS slots (pubtab.h),
	 * read without a lock (wb_dev_target) by writeback, I/O and control
	 * threads; added to and emptied under daemon.tune_lock (at start-up,
	 * by the main thread alone).  A target taken off is freed only after
	 * a grace period (grace.h), so a reader may use what it found until
	 * its next quiescent state. */
	struct pubtab targets;

	/* Background and periodic work: at most one of each queued. */
	struct job bg_job, periodic_job;
	_Atomic int bg_queued, periodic_queued;

	/* Errors, and the back-off that follows them (atomics). */
	_Atomic uint64_t errors;
	_Atomic uint64_t backoff_until_ns;
	_Atomic uint32_t backoff_ms;
	_Atomic uint64_t written_bytes;
	_Atomic uint64_t read_bytes; /* from the device: misses, fills,
	                                   CACHE, read-ahead */
	_Atomic int last_err;        /* errno of the last failure, 0 none */
	struct ratelimit fail_log;   /* writeback failures logged */
	/* A remote with BACKEND_FLUSH_BEFORE_READ (atomics; writeback.h):
	 * misses that flushed first, writeback's commits, and times a
	 * range was not kept (remote.unflushed_ranges reached), logged
	 * at most once a minute. */
	_Atomic uint64_t read_flushes, commits, unflushed_overflows;
	/* Flushes of the device's backends (atomics): sent; needed but
	 * shared with another's (group commit); FLUSHes made by writing
	 * their runs with FUA instead of writes and a flush; and writeback
	 * writes that went with FUA (remote.fua_max_runs). */
	_Atomic uint64_t flushes_sent, flushes_shared, flushes_by_fua;
	_Atomic uint64_t flushes_merged; /* answered by another's writeback */
	_Atomic uint64_t flushes_joined; /* of them, by a pass under way */
	_Atomic uint64_t fua_writes;
	struct ratelimit overflow_log;
	/* BACKEND_REDO_AFTER_LOSS (atomic): pages dirtied again after their
	 * remote was lost before a flush covered them (wb_redo). */
	_Atomic uint64_t redo_pages;
	/* Writes that failed with a connection the remote lost while they
	 * were in flight: left dirty, no error (wb_run_end). */
	_Atomic uint64_t lost_writes;
	/* Pages dirtied again after a failed flush of a file or block
	 * device (wb_redo_failed_flush). */
	_Atomic uint64_t flush_redo_pages;
	/* The writeback rate (atomic), sampled once a second by
	 * wb_dev_sample from written_bytes; bw_last_* are its own. */
	_Atomic uint64_t bandwidth_bps;
	uint64_t bw_last_bytes, bw_last_ns;
	/* CPU time of writeback work on the device's workers (their thread
	 * CPU clocks, atomic), and its share of one CPU in millionths
	 * (atomic, sampled by wb_dev_sample, smoothed like bandwidth_bps). */
	_Atomic uint64_t wb_cpu_ns;
	_Atomic uint64_t wb_cpu_share_ppm;
	uint64_t cpu_last_ns;
	/* The link as writeback's completions measure it (linkest.h):
	 * round trip, bandwidth, writes in flight; under est_lock, a leaf
	 * taken once as each write begins and ends.  window (atomic): the
	 * writes the device's window on a remote was last sized to.
	 *
	 * On a remote that window is one budget for the whole device
	 * (wb_dev_write_admit): every writeback job (FLUSH, background,
	 * periodic, write-behind) draws its writes in flight from it.
	 * Under est_lock too: the writes for a sync (FLUSH, FUA, sync,
	 * shutdown) waiting for room (sync_waiting), before which the
	 * others yield; and how many wait on est_cond, which is broadcast
	 * as a write ends or the last sync waiting gets its room. */
	pthread_mutex_t est_lock;
	pthread_cond_t est_cond;
	struct linkest est;
	_Atomic unsigned window;
	unsigned sync_waiting, budget_waiters;
	/* The same for the reads of the read window (fill.c): their own
	 * estimate, under est_lock, the reads its window was last sized to
	 * and the read-ahead a sequential reader was last given (atomics). */
	struct linkest rest;
	_Atomic unsigned read_window;
	_Atomic uint64_t readahead_bytes;
	/* Bytes written back by write-behind (remote.write_behind), atomic. */
	_Atomic uint64_t write_behind_bytes;
	/* Write-behind found foreground work and yielded: owed to its end
	 * (wb_foreground_done), atomic. */
	_Atomic int behind_owed;
	/* When a client FLUSH of any of its exports last began, and the
	 * times write-behind left pages to the FLUSH expected
	 * (wb_behind_defers); atomics. */
	_Atomic uint64_t flush_seen_ns;
	_Atomic uint64_t behind_deferred;

	/* Work waiting or running, by reason (atomics; WB_REASON_*), besides
	 * the background and periodic flags above; "read" counts cache-miss
	 * reads and fills. */
	_Atomic unsigned work_by_reason[8];
	_Atomic unsigned work_reads;
	/* NBD_CMD_CACHE requests being carried out (limits.max_cache_requests;
	 * export_prefetch_begin), atomic. */
	_Atomic unsigned prefetching;

	/* Share of the dirty limit (bdi min_ratio / max_ratio), atomics. */
	_Atomic unsigned min_ratio, max_ratio;

	/* Runs written back, by reason, and how long they took. */
	struct stats_wb stats;
	/* The read window (fill.c): reads queued for it, and whether a
	 * worker runs it; under read_lock, a leaf. */
	pthread_mutex_t read_lock;
	struct fill_read *read_head, **read_tail;
	bool read_running;
	bool read_waiting; /* for a read in flight: wake it */
	struct job read_job;
	int read_wake; /* eventfd: a read was queued */
	/* The window's ring of reads in flight (FILL_WINDOW_MAX), made by
	 * its first run, used by the one running it (read_running). */
	struct fill_read **read_ring;
};

/* As many as the export table holds (daemon.c checks): a device takes
 * every export the table does. */
#define WB_DEV_MAX_TARGETS 1024

/* 0, or -1 if DEV carries WB_DEV_MAX_TARGETS already.  One writer. */
int wb_dev_add_target(struct wb_dev *dev, struct wb_target *t);
/* Take T off DEV (one writer); T is freed only after a grace period. */
void wb_dev_remove_target(struct wb_dev *dev, struct wb_target *t);

/* Slots to look at: [0, wb_dev_n_targets). */
static inline unsigned
wb_dev_n_targets(struct wb_dev *dev)
{
	return (unsigned)pubtab_count(&dev->targets);
}

/* The target in slot I, NULL if the slot is empty. */
static inline struct wb_target *
wb_dev_target(struct wb_dev *dev, unsigned i)
{
	return pubtab_get(&dev->targets, i);
}

/* The device's link, as read at one moment (wb_dev_link). */
struct wb_dev_link {
	uint64_t rtt_ns, srtt_ns; /* 0: none yet */
	uint64_t bandwidth_bps;   /* smoothed; 0: none yet */
	unsigned window;          /* writes, the last one sized */
	unsigned inflight, inflight_max;
	uint64_t inflight_bytes;
	/* Reads (fill.c): the same, and the read-ahead last given. */
	uint64_t read_rtt_ns, read_bandwidth_bps;
	unsigned read_window, reads_inflight_max;
	uint64_t readahead_bytes;
};

/* A write (EST: &DEV->est) or a read of the read window (&DEV->rest) of
 * BYTES begins, or ends after LATENCY_NS (OK: done), for the estimate
 * (any thread). */
void wb_dev_link_begin(struct wb_dev *dev, struct linkest *est, uint64_t bytes,
    uint64_t now);
void wb_dev_link_end(struct wb_dev *dev, struct linkest *est, uint64_t bytes,
    uint64_t latency_ns, bool ok, uint64_t now);
/* What to keep in flight on EST's link: linkest_window, at least FLOOR, at
 * most MAX_BYTES (0: no bound) and MAX; stored in *SHOWN (atomic: DEV's
 * window or read_window, for the status). */
unsigned wb_dev_link_window(struct wb_dev *dev, struct linkest *est,
    _Atomic unsigned *shown, unsigned floor, uint64_t max_bytes, unsigned max);

/* What a write asks of its device's window (wb_dev_write_admit). */
struct wb_dev_room {
	unsigned floor;      /* the window's least, in writes */
	uint64_t max_bytes;  /* its bound in bytes (0: none) */
	unsigned max_writes; /* and in writes */
	bool sync;           /* for a FLUSH, FUA, sync or the drain */
};

/*
 * Room in DEV's window for a write of BYTES (a remote's; see est_lock):
 * the window (wb_dev_link_window of the writes' estimate, ROOM's floor
 * and bounds) holds the writes of every job on DEV.  A write fits while
 * fewer writes than the window are in flight and their bytes with BYTES
 * are within max_bytes; one always fits when none are.  A write that is
 * not for a sync fits only while no sync write waits for room:
 * background work yields to a waiting sync, as the kernel's does.
 * Without room, END_ONE(ARG) ends one of the caller's own writes in
 * flight (false: it has none; END_ONE may be NULL), else the caller
 * waits for another's to end: no caller waits with a write of its own in
 * flight, so the writes holding the room always end.  Once it fits, the
 * write is begun for the estimate (as wb_dev_link_begin) and its start
 * time returned.
 */
uint64_t wb_dev_write_admit(struct wb_dev *dev, uint64_t bytes,
    const struct wb_dev_room *room, bool (*end_one)(void *), void *arg);
void wb_dev_link(struct wb_dev *dev, struct wb_dev_link *l);
/* The read-ahead a sequential reader gets (linkest_readahead of the
 * reads' estimate), stored for the status. */
uint64_t wb_dev_readahead(struct wb_dev *dev, uint64_t base, uint64_t max);
/* Once a second (the control thread): the writeback rate and CPU share
 * since the last call, smoothed, into bandwidth_bps and
 * wb_cpu_share_ppm. */
void wb_dev_sample(struct wb_dev *dev, uint64_t now);

/* A device and its pool, whose workers are readers of GRACE (may be
 * NULL). */
struct wb_dev *wb_dev_new(dev_t id, const char *name,
    const struct pool_params *params, struct grace *grace);
void wb_dev_free(struct wb_dev *dev);

#endif
