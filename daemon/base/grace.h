/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * grace.h - grace periods: when may an object that other threads read
 * without a lock be freed?  Quiescent-state-based reclamation, as in the
 * kernel's RCU and liburcu's QSBR flavour, polled rather than waited for.
 *
 * A thread that reads a lock-free table (the export table, a device's
 * targets) registers as a reader.  It is online while it may hold a
 * pointer read from such a table, offline while it holds none: an I/O
 * thread is offline while it waits in poll(), a worker while it waits for
 * a job.  A pointer read while online is dropped before the thread goes
 * offline, unless something else keeps the object (a connection counted
 * on it, a job holding it).
 *
 * To free an object: unpublish it (no reader can find it any more), take
 * token = grace_start(), and free it once grace_done(token): every reader
 * has since been offline, or has come online again, so none still holds a
 * pointer it read before the object was unpublished.
 *
 * Rule: a reader's seen is written only by its own thread; the list of
 * readers is under grace.lock, a leaf lock (nothing is taken inside it).
 */
#ifndef WBD_GRACE_H
#define WBD_GRACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct grace_reader {
	/* Atomic, written by the reader's thread only: the epoch it saw when
	 * it last came online; 0 while offline. */
	_Atomic uint64_t seen;
	struct grace_reader *next; /* grace.lock */
};

struct grace {
	_Atomic uint64_t epoch; /* grace_start's count, from 1 */
	pthread_mutex_t lock;   /* the list of readers */
	struct grace_reader *readers;
};

void grace_init(struct grace *g);
void grace_destroy(struct grace *g);

/* Add R, offline (any thread; R stays valid until unregistered). */
void grace_register(struct grace *g, struct grace_reader *r);
void grace_unregister(struct grace *g, struct grace_reader *r);

/* R's thread may read lock-free tables from now on; every pointer it read
 * before is dropped (a quiescent state).  R's thread only. */
void grace_online(struct grace *g, struct grace_reader *r);
/* R's thread holds no pointer read from a lock-free table.  R's thread
 * only. */
void grace_offline(struct grace_reader *r);

/* After unpublishing something: a token for grace_done (any thread). */
uint64_t grace_start(struct grace *g);
/* Has every reader been offline or come online since TOKEN was taken? */
bool grace_done(struct grace *g, uint64_t token);

#endif
