/*
 * export.h - an NBD export: a name, a backing device and the writeback
 * device (with its worker pool) that serves it.
 *
 * Exports are created by the main thread at start-up, or by a reload
 * under daemon.tune_lock, and never freed while the daemon runs.  What
 * does not change after creation (name, backend, device, cache file, size,
 * flags) is read without a lock; what does is atomic: cache_mode (reload,
 * wbctl tune), removed (reload, the tick), connections, write_seq, and the
 * writeback state in wt (see writeback.h); the allow list is under its
 * policy's own lock (access.h).
 */
#ifndef WBD_EXPORT_H
#define WBD_EXPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "access.h"
#include "backend.h"
#include "config.h"
#include "handshake.h"
#include "job.h"
#include "writeback.h"

struct cache_file;
struct request;
struct wb_dev;

/* Removal by a reload: no new clients, then written back, then retired. */
enum export_state {
	EXPORT_LIVE = 0,
	EXPORT_REMOVING,                /* waiting for its clients to go */
	EXPORT_WRITING_BACK,
	EXPORT_RETIRED,
};

struct export {
	char *name;
	char *description;
	struct backend *backend;
	struct wb_dev *dev;
	struct wb_ctl *wb;
	struct cache_file *cf;          /* this export's pages */
	uint64_t size_bytes;
	uint16_t tflags;
	enum cache_mode cache_mode;     /* atomic: reload, wbctl tune */
	struct hs_export hs;            /* what the handshake shows */
	struct access_policy allow;     /* who may open it (reload
	                                   replaces the list) */

	uint64_t write_seq;             /* atomic: last write's sequence */
	/* What writeback keeps for this export: the error sequence, the
	 * flush counters, the lock writeback signals progress on. */
	struct wb_target wt;
	unsigned connections;           /* atomic: clients in transmission */
	char *backing;                  /* as configured */
	bool direct;                    /* as configured (O_DIRECT) */
	int removed;                    /* atomic: enum export_state */
	struct job retire_job;
};

/* Removed by a reload and written back: no longer shown anywhere. */
static inline bool
export_retired(struct export *e)
{
	return __atomic_load_n(&e->removed, __ATOMIC_ACQUIRE) == EXPORT_RETIRED;
}

/* NULL with errno ENOMEM, or ENOSPC if DEV carries WB_DEV_MAX_TARGETS. */
struct export *export_new(const struct export_conf *ec, struct wb_dev *dev,
    struct backend *b, struct wb_ctl *wb);
void export_free(struct export *e);

/* Write back everything E had dirty at sequence MAX_SEQ and flush its
 * device (a worker: it blocks).  0 or a negative errno. */
static inline int
export_flush(struct export *e, uint64_t max_seq, enum wb_reason why)
{
	return wb_flush(&e->wt, max_seq, why);
}

/* Export errors so far: a connection reports those after this count. */
static inline uint64_t
export_err_seq(struct export *e)
{
	return __atomic_load_n(&e->wt.err_seq, __ATOMIC_ACQUIRE);
}

/* What the connection is to do with a request's reply. */
enum export_verdict {
	EXPORT_REPLY,           /* answered (req->err): reply now */
	EXPORT_QUEUED,          /* a job on the device's pool: req->job.done
	                           runs on req->job.owner's thread later */
	EXPORT_PACE,            /* a write in the cache: hold the reply
	                           req->pause_ms (-1: while export_write_held) */
};

/*
 * Carry out a validated request (its I/O thread).  The caller sets
 * req->job.done and .owner (used if queued) and the connection state in
 * the request (err_seq, flushed), and takes the latter back when it
 * replies.
 */
enum export_verdict export_submit(struct export *e, struct request *req);
/* A queued request's job is done (back on its I/O thread): REPLY or PACE. */
enum export_verdict export_complete(struct export *e, struct request *req);
/* A paced write held with pause -1: still at the dirty limit?  (Kicks
 * background writeback if so; false once shutting down.) */
bool export_write_held(struct export *e);

#endif
