/*
 * ioloop.c - I/O threads and their mailboxes.
 *
 * io->lock guards only the mailbox; everything else in struct ioloop is
 * touched by its own thread alone.  Posted jobs are completed in the order
 * they arrived.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ioloop.h"
#include "log.h"

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

	while (job) {
		struct job *next = job->next;
		job->next = NULL;
		job->done(job);
		job = next;
	}
}

static void
ioloop_maybe_exit(struct ioloop *io)
{
	if (io->draining && io->conns == NULL) {
		ev_timer_stop(io->loop, &io->drain_timer);
		ev_async_stop(io->loop, &io->wake);
		ev_break(io->loop, EVBREAK_ALL);
	}
}

void
ioloop_conn_gone(struct ioloop *io)
{
	ioloop_maybe_exit(io);
}

static void
ioloop_drain_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ioloop *io = w->data;

	log_warnx("io-%u: %u connection(s) did not finish within %.0f s; "
	    "closing them", io->index, io->n_conns, IOLOOP_DRAIN_TIMEOUT_S);
	for (struct conn *c = io->conns, *next; c; c = next) {
		next = conn_next(c);
		conn_abort(c);
	}
}

/* Mailbox message: start draining. */
static void
ioloop_drain_msg(struct job *job)
{
	struct ioloop *io = ioloop_of(job->owner);

	free(job);
	io->draining = true;
	for (struct conn *c = io->conns, *next; c; c = next) {
		next = conn_next(c);
		conn_drain(c);
	}
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

static void *
ioloop_main(void *arg)
{
	struct ioloop *io = arg;

	ev_run(io->loop, 0);
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
		log_warn("cannot start thread %s", name);
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
	struct job *job = calloc(1, sizeof *job);

	if (!job) {
		log_warnx("io-%u: out of memory while shutting down", io->index);
		return;
	}
	job->done = ioloop_drain_msg;
	job->owner = &io->owner;
	ioloop_post(io, job);
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
	free(io);
}
