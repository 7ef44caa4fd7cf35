/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * export.h - an NBD export: a name, a backing device and the writeback
 * device (with its worker pool) that serves it.
 *
 * Exports are created by the main thread at start-up, or under
 * daemon.tune_lock (a reload, installing a waiting export).  What does not
 * change after creation (name, backend, device, cache file, size, flags)
 * is read without a lock; what does is atomic: cache_mode (reload, wbctl
 * tune), removed (reload, the tick, the sync job), connections, holds,
 * write_seq, and the writeback state in wt (see writeback.h); the allow
 * list is under its policy's own lock (access.h).
 *
 * Lifetime.  An export found in the export table or on its device's
 * targets may be used by the thread that found it until that thread's next
 * quiescent state (grace.h); a connection keeps it for longer by counting
 * itself in connections (from the handshake callback that found it), a
 * wbctl flush by counting itself in holds.  An export removed by a reload
 * is freed by the tick (daemon.c), in this order, never sooner:
 *   1. REMOVING: no longer found by the handshake; a grace period
 *      (grace_token) lets a handshake that found it before count itself;
 *   2. once that grace period is over and connections is 0 (it never
 *      rises again), WRITING_BACK: a sync job writes back everything and
 *      flushes its backend; a failure goes back to REMOVING, data dirty;
 *   3. RETIRED, clean: the tick (under tune_lock) takes it out of the
 *      table and off its device's targets, and takes a new grace_token;
 *   4. once that grace period is over and holds is 0: freed (its backend
 *      closed, its clean pages dropped).  Its table slot is used again.
 */
#ifndef WBD_EXPORT_H
#define WBD_EXPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "access.h"
#include "atomics.h"
#include "backend.h"
#include "config.h"
#include "handshake.h"
#include "job.h"
#include "ratelimit.h"
#include "writeback.h"

struct cache_file;
struct export_journal;
struct request;
struct wb_dev;

/* Removal by a reload: no new clients, then written back, then retired. */
enum export_state {
	EXPORT_LIVE = 0,
	EXPORT_REMOVING,                /* waiting for its clients to go */
	EXPORT_WRITING_BACK,            /* the sync job is queued or running */
	EXPORT_RETIRED,                 /* written back; freed after a grace */
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
	_Atomic enum cache_mode cache_mode; /* reload, wbctl tune */
	struct hs_export hs;            /* what the handshake shows */
	struct access_policy allow;     /* who may open it (reload
	                                   replaces the list) */
	_Atomic int idle_timeout_s;     /* reload: its connections'
	                                   idle timeout; -1: limits' */

	_Atomic uint64_t write_seq; /* last write's sequence */
	/* What writeback keeps for this export: the error sequence, the
	 * flush counters, the lock writeback signals progress on. */
	struct wb_target wt;
	_Atomic unsigned connections;   /* clients in transmission */
	struct ratelimit space_rl;      /* "waiting for cache space" */
	struct ratelimit pace_rl;       /* "writers paced" / "held" */
	char *backing;                  /* as configured */
	/* Its write log (export-journal.h), NULL if none: set before it is
	 * served, closed when it is freed. */
	struct export_journal *journal;
	bool direct;                    /* as configured (O_DIRECT) */
	_Atomic int removed;            /* enum export_state */
	struct job retire_job;
	/* Its place in the order of adding: "" is the first still live. */
	unsigned long added;
	/* Removal (see above): the grace period under way (atomic: set by a
	 * reload, read by the tick), wbctl flushes still holding it, and the
	 * list of exports out of the table waiting to be freed (the tick). */
	_Atomic uint64_t grace_token;
	_Atomic unsigned holds;
	struct export *freeing_next;
};

/* Removed by a reload and written back: no longer shown anywhere. */
static inline bool
export_retired(struct export *e)
{
	return load_acquire(&e->removed) == EXPORT_RETIRED;
}

/* Keep E from being freed beyond the caller's quiescent state (a wbctl
 * flush job), and let it go.  Taken while the caller may still use what
 * it found (grace.h). */
static inline void
export_hold(struct export *e)
{
	add_relaxed(&e->holds, 1);
}

static inline void
export_release(struct export *e)
{
	atomic_fetch_sub_explicit(&e->holds, 1, memory_order_release);
}

/* NULL with errno ENOMEM, or ENOSPC if DEV carries WB_DEV_MAX_TARGETS. */
struct export *export_new(const struct export_conf *ec, struct wb_dev *dev,
    struct backend *b, struct wb_ctl *wb);
void export_free(struct export *e);

/* Write back everything E had dirty at sequence MAX_SEQ and flush its
 * device (a worker: it blocks), then give back the write log's space for
 * it.  0 or a negative errno. */
int export_flush(struct export *e, uint64_t max_seq, enum wb_reason why);

/* Open E's write log (JC) and replay it into E's cache, before E is
 * served (export-journal.h); its workers are readers of GRACE.  0, or -1
 * with ERR set: E is not to be served. */
struct grace;
int export_journal_open(struct export *e, const struct export_journal_conf *jc,
    struct grace *grace, char *err, size_t errlen);

/* Export errors so far: a connection reports those after this count. */
static inline uint64_t
export_err_seq(struct export *e)
{
	return load_acquire(&e->wt.err_seq);
}

/*
 * An NBD_CMD_CACHE request may be carried out if E's device has fewer than
 * MAX being carried out (true: counted until export_prefetch_end); else it
 * is answered at once without prefetching, as the spec allows (CACHE is
 * advisory), so that no client's CACHE requests take every worker of the
 * device from other clients' reads.
 */
bool export_prefetch_begin(struct export *e, unsigned max);
void export_prefetch_end(struct export *e);

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
/*
 * The same for a WRITE (with a buffer, not cache pages) whose payload is
 * still at PAYLOAD, the connection's input (valid during the call): put
 * into the cache from there, and copied into req->data only if the write
 * is queued.
 */
enum export_verdict
export_submit_write(struct export *e, struct request *req, const void *payload);
/*
 * Cache pages to receive a WRITE of LEN bytes at OFF into (one copy per
 * write), committed by export_submit; NULL if the write is smaller than a
 * page or the cache has no pages to spare now: then a buffer (req->data).
 * The caller decides from which size this pays (conn.c).
 */
struct cache_wbuf *
export_write_pages(struct export *e, uint64_t off, uint32_t len);
/* The pieces of those pages the payload is received into, in order (*NIOV
 * of them), so that the connection needs nothing of the cache. */
const struct iovec *export_wbuf_iov(const struct cache_wbuf *w, unsigned *niov);
/* Give W's pages back unseen, if export_submit did not commit them (a
 * client gone mid-payload); W may be NULL. */
void export_wbuf_free(struct cache_wbuf *w);
/* A queued request's job is done (back on its I/O thread): REPLY or PACE. */
enum export_verdict export_complete(struct export *e, struct request *req);
/* A paced write held with pause -1: still at the dirty limit?  (Kicks
 * background writeback if so; false once shutting down.) */
bool export_write_held(struct export *e);

/* EC's idle_timeout_s as struct export keeps it: -1 if not given. */
static inline int
export_conf_idle(const struct export_conf *ec)
{
	return ec->idle_timeout_set ? (int)ec->idle_timeout_s : -1;
}

#endif
