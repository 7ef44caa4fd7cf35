/*
 * pending.h - exports waiting for their remote backing device.
 *
 * An export whose remote NBD server cannot be reached when wbd starts (or
 * when a reload adds it) does not stop the daemon or hold up the other
 * exports: it waits here, and a connection attempt is made on a thread of
 * its own, again and again with back-off (100 ms doubling up to
 * remote.reconnect_max_ms).  Once the remote answers, the main thread's
 * tick installs the export and it is served from then on.  Until then a
 * client asking for it is told it does not exist (NBD_REP_ERR_UNKNOWN),
 * and wbctl status lists it as waiting.
 *
 * The table has its own lock; adding, installing and dropping entries
 * also hold daemon.tune_lock (start-up, reload, the tick, shutdown), which
 * the tick only tries to take.  The attempt threads touch only their own
 * entry's result.
 */
#ifndef WBD_PENDING_H
#define WBD_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct daemon;
struct export_conf;

/* A waiting export, as wbctl status shows it. */
struct pending_info {
	char name[256];                 /* truncated copies */
	char backing[512];
	unsigned attempts;              /* failed so far */
	uint64_t since_realtime_ns;     /* waiting since */
};

/* Is this open failure one to wait out (a remote that did not answer)? */
bool pending_wanted(const struct export_conf *ec, int err);
/* Start waiting for EC's remote; the first attempt is made at the next
 * tick.  Returns 0, or -1 (out of memory, table full). */
int pending_add(struct daemon *d, const struct export_conf *ec);
bool pending_has(struct daemon *d, const char *name);
/* Tick (main thread): install exports whose remote answered, start the
 * attempts that are due. */
void pending_poll(struct daemon *d);
/* Reload: stop waiting for exports that are no longer configured, or whose
 * settings changed (they are added anew by the reload). */
void pending_prune(struct daemon *d, const struct export_conf *exports,
    size_t n);
size_t pending_count(struct daemon *d);
/* The Ith waiting export; false past the end. */
bool pending_get(struct daemon *d, size_t i, struct pending_info *info);
/* Shutdown: wait for attempts in flight (at most connect_timeout_ms) and
 * forget every entry (tune_lock held). */
void pending_stop(struct daemon *d);
/* Free the table, once no other thread runs (after the control thread). */
void pending_free(struct daemon *d);

#endif
