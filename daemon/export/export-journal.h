/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * export-journal.h - an export's persistent write log in use: what a
 * FLUSH (or a FUA write, or every write with mode "on-write") puts into
 * it, the replay at start, and the space given back as writeback makes
 * the data durable on the backing device.  The log's format is
 * journal/journal.h's; docs/journal.md says why each choice.
 *
 * Writes are noted (their page ranges) as they land in the cache.  A
 * commit takes every range noted so far, reads those pages from the cache
 * and appends them to the log as one group, then syncs the log once: all
 * the FLUSHes waiting at that moment are answered by that one sync (group
 * commit).  When the log cannot take them (full, broken, a TRIM or zeroing
 * among them, a page no longer in the cache), the commit does what a FLUSH
 * does without a log: writes back and flushes the backing device, then
 * empties the log, never failing for want of log space.
 *
 * Every call may come from any thread; xj_commit and xj_reclaim block
 * (workers only).  Lock order: xj.lock -> xj.apply_lock -> xj.ep_lock,
 * and xj.lock -> xj.set_lock; xj.lock is held across a commit's writeback
 * (wb_flush) and, ordered, across applying epochs when the log is short
 * of space; apply_lock across one epoch's writes and flush; neither is
 * ever taken under a lock of writeback or the cache.
 */
#ifndef WBD_EXPORT_JOURNAL_H
#define WBD_EXPORT_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "journal.h"

struct cache_file;
struct export_journal;
struct grace;
struct pool;
struct wb_target;

/* What a log works for: one export's identity, its pages and writeback
 * (export.c fills it in; the pointers outlive the log). */
struct xj_target {
	const char *name, *backing;
	uint64_t size_bytes;
	uint32_t page_size;
	struct cache_file *cf;
	struct wb_target *wt;
	_Atomic uint64_t *write_seq; /* the export's last write's sequence */
	struct pool *pool;           /* where reclaim runs */
	_Atomic unsigned *holds;     /* raised while a reclaim is queued */
	struct grace *grace; /* the daemon's, for the log's own workers */
};

/*
 * Open TG's log (JC) and replay it into TG's cache, dirty, before the
 * export is served.  NULL with ERR set (another export's log, another
 * size, an I/O error): the export must then not be served, so that
 * nothing the log holds is lost or replayed onto the wrong device.
 */
struct export_journal *xj_open(const struct xj_target *tg,
    const struct export_journal_conf *jc, char *err, size_t errlen);
void xj_close(struct export_journal *xj);

/*
 * The state file of JC's log (docs/journal.md, "A log that fails"), in
 * BUF: with journal.state_dir, a file there named after the log's path
 * (journal_file_name, ".state"); else PATH.state beside a file, and for a
 * block device (whose node lies in /dev, gone at a reboot) a file so
 * named in the top level's journal.dir.  0; -EDESTADDRREQ for a block
 * device with neither; -ENAMETOOLONG.  Stats the log's path.
 */
int xj_state_path(const struct export_journal_conf *jc, char *buf, size_t len);

/* A write over bytes [OFF, OFF+LEN) is in the cache: the next commit logs
 * it.  Returns the generation to pass to xj_commit to make it durable. */
uint64_t xj_note_write(struct export_journal *xj, uint64_t off, uint64_t len);
/* The same for a TRIM or zeroing (not logged: the next commit writes
 * back and flushes the backing device instead). */
uint64_t xj_note_discard(struct export_journal *xj);
/* The generation a FLUSH arriving now is to pass to xj_commit. */
uint64_t xj_gen(struct export_journal *xj);
bool xj_on_write(const struct export_journal *xj);
/*
 * The log's own workers ("wal-NAME"), where FLUSHes are to be carried out
 * while the log works: the log is a device of its own, and a FLUSH that
 * waits for nothing but its sync should not wait behind writeback on the
 * backing device's pool.  NULL once the log is broken (FLUSHes write back
 * then: the device's pool).
 */
struct pool *xj_pool(struct export_journal *xj);
/* Whether XJ is what JC configures (a reload compares them); XJ may be
 * NULL (no log), as JC's path. */
bool
xj_same(const struct export_journal *xj, const struct export_journal_conf *jc);

/*
 * Make durable everything noted before GEN was handed out: 1 if it is in
 * the log, 0 if it was written back and flushed on the backing device
 * instead, or a negative errno (that failed; what it covered is kept and
 * tried again by the next commit).  A worker: it blocks.
 */
int xj_commit(struct export_journal *xj, uint64_t gen);

/*
 * Ordered writeback (journal.ordered): the backing device receives whole
 * epochs only (a commit's batch of the log), in order, each written and
 * flushed before the next begins, applied from the log by a job on the
 * export's pool; writeback never takes the export's pages
 * (wb_target.ordered).  docs/journal.md, "Ordered writeback".
 */
bool xj_ordered(const struct export_journal *xj);
/* Dirty pressure (or a writer held at the limit): an epoch of what is
 * noted, no FLUSH needed, then applied.  Any thread; nothing unless
 * ordered. */
void xj_kick(struct export_journal *xj);
/* Ordered: a writer on a worker that finds no page to take makes room
 * itself, as writeback's writers do (wb_write_for_space): the oldest
 * epoch applied (what is noted committed first if none is), its pages
 * cleaned.  False if nothing could be applied (then wait for progress).
 * Nothing unless ordered. */
bool xj_make_room(struct export_journal *xj);
/* Ordered: commit everything noted and apply every epoch (the log left
 * empty): wbctl flush, a removed export, the shutdown drain.  0 or a
 * negative errno.  A worker: it blocks. */
int xj_sync(struct export_journal *xj);
/*
 * A TRIM or WRITE_ZEROES: FN(ARG) sends it to the backing device (and
 * drops it from the cache); *GEN is what xj_note_discard gives.  Ordered,
 * every epoch is applied first and none while FN runs, so the backing
 * device never receives it before an older epoch.  FN's result, or a
 * negative errno (applying failed: FN not called).  A worker.
 */
int xj_discard(struct export_journal *xj, int (*fn)(void *arg), void *arg,
    uint64_t *gen);

/* The export's writeback wrote back and flushed everything dirtied up to
 * write sequence MAX_SEQ: give the log's space for it back.  0, or -EIO
 * when the log is broken and, holding nothing the backing device lacks,
 * can be neither emptied nor marked stale: a start would replay it over
 * newer data (a drain must not end so). */
int xj_flushed(struct export_journal *xj, uint64_t max_seq);

/* From the daemon's tick: queue a reclaim (write back, flush the backing,
 * give the space back) on the export's pool if the log holds records, at
 * most once per INTERVAL_NS, or at once when it is half full. */
void xj_tick(struct export_journal *xj, uint64_t interval_ns);

struct xj_stats {
	const char *path;
	enum journal_mode mode;
	bool broken;
	bool stale; /* broken and not yet emptied: FLUSH fails */
	struct journal_usage usage;
	uint64_t commits;         /* groups appended and synced */
	uint64_t shared;          /* FLUSHes answered by another's commit */
	uint64_t fallbacks;       /* commits written back instead */
	const char *fallback_why; /* the last one's reason, or NULL */
	uint64_t logged_bytes;
	uint64_t log_ns, backing_ns; /* total time in the log, the backing */
	uint64_t reclaims;
	/* Ordered writeback: epochs (batches of the log) applied to the
	 * backing device, their bytes and time, failures (retried); the
	 * lag: epochs committed and not yet applied, and their bytes; and
	 * whether order could not be kept once (the log unreadable). */
	bool ordered, order_lost;
	uint64_t epochs_applied, applied_bytes, apply_ns, apply_errors;
	uint64_t lag_epochs, lag_bytes;
	struct journal_replay_stats replay;
	uint64_t replay_ns;
};
void xj_get_stats(struct export_journal *xj, struct xj_stats *st);

#endif
