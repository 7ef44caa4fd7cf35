/*
 * ioloop.h - an I/O thread: one libev loop that owns a set of connections.
 *
 * Connections are handed to an I/O thread by the acceptor and live there
 * until they close.  Other threads talk to an I/O thread only through its
 * mailbox: ioloop_post() queues a job whose done() then runs on the I/O
 * thread (memcached's model, with ev_async as the wake-up).
 */
#ifndef WBD_IOLOOP_H
#define WBD_IOLOOP_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>

#include "clock.h"
#include "job.h"

struct daemon;
struct conn;

struct ioloop {
	struct job_owner owner;         /* jobs completed here: the mailbox */
	struct daemon *d;
	unsigned index;
	struct ev_loop *loop;
	pthread_t thread;
	ev_async wake;

	pthread_mutex_t lock;           /* protects the mailbox only */
	struct job *mail_head, **mail_tail;

	/* Owned by the I/O thread. */
	struct conn *conns;             /* doubly linked through conn->next */
	unsigned n_conns;
	bool draining;                  /* shutting down: no new requests */
	ev_timer drain_timer;
};

struct ioloop *ioloop_new(struct daemon *d, unsigned index);
int ioloop_start(struct ioloop *io);
int ioloop_start_named(struct ioloop *io, const char *name);
/* Queue JOB for JOB->done() on IO's thread; any thread. */
void ioloop_post(struct ioloop *io, struct job *job);
/* Ask the thread to finish its connections and exit; any thread. */
void ioloop_drain(struct ioloop *io);
void ioloop_join(struct ioloop *io);
void ioloop_free(struct ioloop *io);

/* Called by a connection when it has closed (I/O thread). */
void ioloop_conn_gone(struct ioloop *io);

static inline struct ioloop *
ioloop_of(struct job_owner *owner)
{
	return container_of(owner, struct ioloop, owner);
}

static inline struct ev_loop *
ioloop_loop(struct ioloop *io)
{
	return io->loop;
}

#endif
