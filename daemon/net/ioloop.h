/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ioloop.h - an I/O thread: one libev loop that owns a set of connections.
 *
 * Connections are handed to an I/O thread by the acceptor
 * (ioloop_hand_conn) and live there until they close.  Other threads talk
 * to an I/O thread only through its mailbox: ioloop_post() queues a job
 * whose done() then runs on the I/O thread (memcached's model, with
 * ev_async as the wake-up).  The control thread is an ioloop too.
 */
#ifndef WBD_IOLOOP_H
#define WBD_IOLOOP_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>

#include "clock.h"
#include "conn.h"
#include "grace.h"
#include "job.h"

struct daemon;

struct ioloop {
	struct job_owner owner;         /* jobs completed here: the mailbox */
	struct daemon *d;
	unsigned index;
	struct ev_loop *loop;
	pthread_t thread;
	ev_async wake;
	/* Open connections daemon-wide (atomic), lowered as one goes; may
	 * be NULL. */
	_Atomic unsigned *open_conns;
	struct slots *slots; /* whose slot a closed one frees;
	                                   may be NULL */
	/* Set before ioloop_start, may be NULL: the thread is a reader of
	 * it (grace.h), offline only while it waits in poll(). */
	struct grace *grace;
	struct grace_reader reader;
	/* Set before ioloop_start: the thread runs as SCHED_BATCH
	 * (io_threads_batch); sched_batch_failed: it could not (errno). */
	bool sched_batch;
	_Atomic int sched_batch_failed;

	pthread_mutex_t lock;           /* protects the mailbox only */
	struct job *mail_head, **mail_tail;
	/* Allocated with the thread, so that shutting down cannot fail. */
	struct job drain_msg;
	_Atomic int drain_posted;

	/* Owned by the I/O thread. */
	struct conn_host host;          /* its connections */
	ev_timer drain_timer;
};

struct ioloop *ioloop_new(struct daemon *d, unsigned index);
int ioloop_start(struct ioloop *io);
int ioloop_start_named(struct ioloop *io, const char *name);
/* Queue JOB for JOB->done() on IO's thread; any thread. */
void ioloop_post(struct ioloop *io, struct job *job);
/* Hand an accepted socket to IO's thread, which starts its connection
 * (closed there if out of memory; IDLE_S is conn_start's); any thread.
 * 0, or -1 if out of memory (then FD is closed here). */
int ioloop_hand_conn(struct ioloop *io, int fd, const char *peer,
    const char *client, int idle_s);
/* Ask the thread to finish its connections and exit; any thread, once or
 * more. */
void ioloop_drain(struct ioloop *io);
void ioloop_join(struct ioloop *io);
void ioloop_free(struct ioloop *io);

static inline struct ioloop *
ioloop_of(struct job_owner *owner)
{
	return container_of(owner, struct ioloop, owner);
}

#endif
