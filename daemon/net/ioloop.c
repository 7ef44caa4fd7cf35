/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ioloop.c - I/O threads, their mailboxes, and the hand-off of new
 * connections to them.
 *
 * io->lock guards only the mailbox; everything else in struct ioloop is
 * touched by its own thread alone (but open_conns and drain_posted,
 * atomics).  Posted jobs are completed in the order they arrived.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomics.h"
#include "conn.h"
#include "ioloop.h"
#include "log.h"
#include "peer.h"
#include "slots.h"

/* How long a draining connection may take to finish before it is cut. */
#define IOLOOP_DRAIN_TIMEOUT_S  30.0

static void
ioloop_wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct ioloop *io = w->data;

	pthread_mutex_lock(&io->lock);
	struct job *job = io->mail_head;
	io->mail_head = NULL;
	io->mail_tail = &io->mail_head;
	pthread_mutex_unlock(&io->lock);

	/* The replies of these completions go out together. */
	conn_host_cork(&io->host);
	while (job) {
		struct job *next = job->next;
		job->next = NULL;
		job->done(job);
		job = next;
	}
	conn_host_uncork(&io->host);
}

static void
ioloop_maybe_exit(struct ioloop *io)
{
	if (io->host.draining && io->host.conns == NULL) {
		ev_timer_stop(io->loop, &io->drain_timer);
		ev_async_stop(io->loop, &io->wake);
		ev_break(io->loop, EVBREAK_ALL);
	}
}

/* A connection of IO's has been freed, or refused. */
static void
ioloop_conn_gone(struct conn_host *h, const char *client)
{
	struct ioloop *io = container_of(h, struct ioloop, host);

	if (io->slots)
		slots_release(io->slots, client);
	if (io->open_conns)
		sub_relaxed(io->open_conns, 1);
	ioloop_maybe_exit(io);
}

static void
ioloop_drain_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ioloop *io = w->data;

	log_warnx("io-%u: %u connection(s) did not finish within %.0f s; "
	    "closing them", io->index, io->host.n_conns,
	    IOLOOP_DRAIN_TIMEOUT_S);
	conn_abort_all(&io->host);
}

/* Mailbox message: start draining. */
static void
ioloop_drain_msg(struct job *job)
{
	struct ioloop *io = ioloop_of(job->owner);

	conn_drain_all(&io->host);
	ev_timer_init(&io->drain_timer, ioloop_drain_timeout_cb,
	    IOLOOP_DRAIN_TIMEOUT_S, 0);
	io->drain_timer.data = io;
	ev_timer_start(io->loop, &io->drain_timer);
	ioloop_maybe_exit(io);
}

static void
ioloop_owner_post(struct job_owner *owner, struct job *job)
{
	ioloop_post(ioloop_of(owner), job);
}

/* Around the wait in poll(): no callback runs, so the thread holds no
 * pointer read from a lock-free table (grace.h). */
static void
ioloop_release_cb(struct ev_loop *loop)
{
	struct ioloop *io = ev_userdata(loop);

	grace_offline(&io->reader);
}

static void
ioloop_acquire_cb(struct ev_loop *loop)
{
	struct ioloop *io = ev_userdata(loop);

	grace_online(io->grace, &io->reader);
}

static void *
ioloop_main(void *arg)
{
	struct ioloop *io = arg;

	/*
	 * SCHED_BATCH: a request arriving does not preempt the thread that
	 * sent it.  On a CPU shared with a client (fio, QEMU, the kernel's
	 * NBD client), each of the client's requests woke this thread at
	 * once, which read that one request, answered it and slept again:
	 * two context switches a request, the client's queue never seen
	 * whole.  Not preempting it, the client sends its queue and blocks,
	 * and this thread reads the queue in one go.  A thread alone on its
	 * CPU, or one the client waits for (QD1), runs as before.  LAN
	 * network benchmark, 4 KiB random writes at QD32: the thread slept
	 * 50,000-75,000 times in 39,168 writes in the runs where the
	 * scheduler had put both on one CPU (74,000-121,000 writes/s), and
	 * at most 1,600 times as SCHED_BATCH.  Any user may choose it.
	 * A thread started from this one would inherit it (Linux resets
	 * only real-time policies on fork): the pool starts its workers as
	 * SCHED_OTHER explicitly (pool.c).
	 */
	if (io->sched_batch) {
		struct sched_param sp = { .sched_priority = 0 };
		int r = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
		if (r != 0) {
			store_relaxed(&io->sched_batch_failed, r);
			log_warnx("io_threads_batch: I/O thread %u cannot run "
				  "as SCHED_BATCH (%s): it runs as before",
			    io->index, strerror(r));
		}
	}
	if (io->grace) {
		grace_register(io->grace, &io->reader);
		grace_online(io->grace, &io->reader);
		ev_set_userdata(io->loop, io);
		ev_set_loop_release_cb(io->loop, ioloop_release_cb,
		    ioloop_acquire_cb);
	}
	ev_run(io->loop, 0);
	if (io->grace)
		grace_unregister(io->grace, &io->reader);
	return NULL;
}

struct ioloop *
ioloop_new(struct daemon *d, unsigned index)
{
	struct ioloop *io = calloc(1, sizeof *io);

	if (!io)
		return NULL;
	io->d = d;
	io->index = index;
	io->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (!io->loop) {
		free(io);
		errno = ENOMEM;
		return NULL;
	}
	io->owner.post = ioloop_owner_post;
	io->host = (struct conn_host){ .loop = io->loop, .owner = &io->owner,
	    .index = index, .conn_gone = ioloop_conn_gone };
	io->drain_msg.done = ioloop_drain_msg;
	io->drain_msg.owner = &io->owner;
	pthread_mutex_init(&io->lock, NULL);
	io->mail_tail = &io->mail_head;
	ev_async_init(&io->wake, ioloop_wake_cb);
	io->wake.data = io;
	ev_async_start(io->loop, &io->wake);
	return io;
}

int
ioloop_start_named(struct ioloop *io, const char *name)
{
	int r = pthread_create(&io->thread, NULL, ioloop_main, io);

	if (r != 0) {
		errno = r;
		log_error("cannot start thread %s", name);
		return -1;
	}
	pthread_setname_np(io->thread, name);
	return 0;
}

int
ioloop_start(struct ioloop *io)
{
	char name[16];

	snprintf(name, sizeof name, "wbd-io-%u", io->index);
	return ioloop_start_named(io, name);
}

void
ioloop_post(struct ioloop *io, struct job *job)
{
	bool was_empty;

	job->next = NULL;
	pthread_mutex_lock(&io->lock);
	was_empty = io->mail_head == NULL;
	*io->mail_tail = job;
	io->mail_tail = &job->next;
	pthread_mutex_unlock(&io->lock);
	/* One wake-up per batch: the callback drains the whole mailbox. */
	if (was_empty)
		ev_async_send(io->loop, &io->wake);
}

void
ioloop_drain(struct ioloop *io)
{
	if (!atomic_exchange_explicit(&io->drain_posted, 1,
		memory_order_acq_rel))
		ioloop_post(io, &io->drain_msg);
}

/* Mailbox message carrying a new connection to an I/O thread. */
struct new_conn {
	struct job job;
	int fd;
	char peer[64];
	char client[PEER_CLIENT_KEY_BYTES];
	int idle_s; /* its listener's idle_timeout_s, or -1 */
};

static void
ioloop_new_conn_msg(struct job *job)
{
	struct new_conn *nc = container_of(job, struct new_conn, job);

	conn_start(&ioloop_of(job->owner)->host, nc->fd, nc->peer, nc->client,
	    nc->idle_s);
	free(nc);
}

int
ioloop_hand_conn(struct ioloop *io, int fd, const char *peer,
    const char *client, int idle_s)
{
	struct new_conn *nc = calloc(1, sizeof *nc);

	if (!nc) {
		log_warnx("%s: out of memory, dropping connection", peer);
		close(fd);
		return -1;
	}
	nc->fd = fd;
	snprintf(nc->peer, sizeof nc->peer, "%s", peer);
	snprintf(nc->client, sizeof nc->client, "%s", client);
	nc->idle_s = idle_s;
	nc->job.done = ioloop_new_conn_msg;
	nc->job.owner = &io->owner;
	ioloop_post(io, &nc->job);
	return 0;
}

void
ioloop_join(struct ioloop *io)
{
	pthread_join(io->thread, NULL);
}

void
ioloop_free(struct ioloop *io)
{
	if (!io)
		return;
	ev_loop_destroy(io->loop);
	pthread_mutex_destroy(&io->lock);
	stats_io_free(&io->host.stats);
	free(io);
}
