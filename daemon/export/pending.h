/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pending.h - exports waiting for their remote backing device.
 *
 * An export whose remote NBD server cannot be reached when wbd starts (or
 * when a reload adds it) does not stop the daemon or hold up the other
 * exports: it waits here, and a connection attempt is made on a thread of
 * its own, again and again with back-off (100 ms doubling up to
 * remote.reconnect_max_ms).  Once the remote answers, the main thread's
 * tick installs the export and it is served from then on.  Until then a
 * client asking for it gets NBD_REP_ERR_UNKNOWN with a message saying it
 * waits for its remote (conn.c), and wbctl status lists it as waiting.
 *
 * The table has its own lock; adding, installing and dropping entries
 * also hold daemon.tune_lock (start-up, reload, the tick, shutdown), which
 * the tick only tries to take.  The attempt threads touch only their own
 * entry's result.  The table knows nothing of the daemon: an export whose
 * remote answered is handed back by pending_poll, and the daemon installs
 * it.
 */
#ifndef WBD_PENDING_H
#define WBD_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct backend;
struct pending_table;
struct remote_conf;

/* A waiting export, as wbctl status shows it. */
struct pending_info {
	char name[256];                 /* truncated copies */
	char backing[512];
	unsigned attempts;              /* failed so far */
	uint64_t since_realtime_ns;     /* waiting since */
};

/* An export whose remote answered: its settings (the strings are the
 * holder's) and its open backend, to be installed. */
struct pending_ready {
	struct export_conf ec;
	struct backend *backend;
};

struct pending_table *pending_new(void);
/* Free the table, once no other thread uses it (after the control thread
 * and pending_stop). */
void pending_free(struct pending_table *pt);
/* Is this open failure one to wait out (a remote that did not answer)? */
bool pending_wanted(const struct export_conf *ec, int err);
/*
 * An export whose remote did not answer at start (pending_wanted) need
 * not wait when its write log holds data: that data is served from the
 * cache, and writes and FLUSHes go on into the log, while the remote is
 * tried again (docs/journal.md, "A remote down at start").  If EC's log
 * is its own (name, backing, size) and holds records, a backend not yet
 * connected (backend_nbd_open_unconnected) at the log's size; else NULL
 * (wait as any export does).  WHY: the failed attempt.
 */
struct backend *pending_open_logged(const struct export_conf *ec,
    const struct remote_conf *rc, const char *why);
/* Start waiting for EC's remote, connecting with RC; the first attempt is
 * made at the next poll.  Returns 0, or -1 (out of memory, table full). */
int pending_add(struct pending_table *pt, const struct export_conf *ec,
    const struct remote_conf *rc);
bool pending_has(struct pending_table *pt, const char *name);
/*
 * Tick (main thread): reap the attempts that ended, start those that are
 * due (if START), and hand back in *READY one export whose remote
 * answered (true), which the caller installs and then clears with
 * pending_ready_clear.  Call again while it returns true.
 */
bool pending_poll(struct pending_table *pt, bool start,
    struct pending_ready *ready);
/* Free what READY holds (the backend too, if still there). */
void pending_ready_clear(struct pending_ready *ready);
/* Reload: stop waiting for exports that are no longer configured, or whose
 * settings changed (they are added anew by the reload); the others connect
 * with RC from now on. */
void pending_prune(struct pending_table *pt, const struct export_conf *exports,
    size_t n, const struct remote_conf *rc);
size_t pending_count(struct pending_table *pt);
/* The Ith waiting export; false past the end. */
bool pending_get(struct pending_table *pt, size_t i, struct pending_info *info);
/* Shutdown: wait for attempts in flight (at most connect_timeout_ms) and
 * forget every entry. */
void pending_stop(struct pending_table *pt);

#endif
