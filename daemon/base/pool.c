/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool.c - per-device worker threads.
 *
 * Locking: p->lock protects everything in struct pool below it; workers
 * sleep on p->cond.  Jobs are run with no lock held.  A worker that finds
 * the queue's oldest job has waited longer than grow_delay_ms while no one
 * is idle starts another worker (up to max), and so does a job a client
 * waits for (job.waited_on: a read that missed, a FLUSH), at once: the grow
 * delay paces writeback, not a client's request on a device whose latency
 * (a remote) rather than its bandwidth limits it; a worker that has been idle for
 * idle_timeout_ms exits while more than min_workers remain.  A pool never
 * drops below one thread while work is queued.
 *
 * A job belongs to the worker from the moment it is taken off the queue
 * until its run returns, and no longer: the worker reads how to complete
 * it (owner, done) before running it.  A job with neither (background and
 * periodic writeback) says in its run that it may be queued again, and its
 * submitter then clears and resubmits it while this worker is still
 * returning from run.
 *
 * Each worker is a reader of the pool's grace (grace.h): online from
 * taking a job until it has handed the job back, offline in between, so
 * a job may use what it finds in a lock-free table while it runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grace.h"
#include "lock.h"
#include "log.h"
#include "pool.h"
#include "ratelimit.h"

struct pool {
	char name[16];                  /* thread name, 15 chars + NUL */

	pthread_mutex_t lock;
	pthread_cond_t cond;            /* work queued, or stopping */
	pthread_cond_t exited;          /* a worker exited */
	struct job *head, **tail;
	unsigned queued;
	unsigned waited_on;             /* queued jobs a client waits for */
	unsigned threads, busy, idle;
	unsigned spawned_total, reaped_total;
	/* Jobs a client waits for queued with every worker busy at
	 * max_workers; the line that says so. */
	unsigned at_max_total;
	struct ratelimit at_max_rl;
	struct pool_params params;
	bool stopping;
	struct grace *grace; /* may be NULL; set at creation */
};

/* The line saying max_workers holds a client's job back, at most this
 * often. */
#define POOL_AT_MAX_LOG_NS (10ull * 1000000000ull)

static void *pool_worker(void *arg);

/* Start one more worker.  Called with p->lock held. */
static int
pool_spawn_locked(struct pool *p)
{
	pthread_t t;
	pthread_attr_t attr;
	int r;

	lock_assert_held(&p->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* SCHED_OTHER, not the caller's policy: an I/O thread (SCHED_BATCH,
	 * io_threads_batch) starts a worker for a client's FLUSH or miss
	 * when none is idle, and that worker is on the client's path. */
	struct sched_param sp = { .sched_priority = 0 };
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	pthread_attr_setschedparam(&attr, &sp);
	r = pthread_create(&t, &attr, pool_worker, p);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		errno = r;
		log_warn("%s: cannot start a worker", p->name);
		return -1;
	}
	pthread_setname_np(t, p->name);
	p->threads++;
	p->spawned_total++;
	return 0;
}

/* Should the queue get another worker?  Called with p->lock held. */
static bool
pool_should_grow_locked(struct pool *p, uint64_t now)
{
	lock_assert_held(&p->lock);
	if (p->threads >= p->params.max_workers || p->idle > 0 || !p->head)
		return false;
	if (p->threads == 0 || p->waited_on > 0)
		return true;
	return now - p->head->queued_ns >=
	    (uint64_t)p->params.grow_delay_ms * 1000000u;
}

static void *
pool_worker(void *arg)
{
	struct pool *p = arg;
	uint64_t idle_since = now_ns();
	struct grace_reader reader;

	if (p->grace)
		grace_register(p->grace, &reader);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (!p->head) {
			if (p->stopping)
				break;
			uint64_t now = now_ns();
			uint64_t idle_ns = (uint64_t)p->params.idle_timeout_ms *
			    1000000u;
			if (p->threads > p->params.min_workers &&
			    now - idle_since >= idle_ns) {
				p->reaped_total++;
				break;
			}
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			uint64_t wait_ns = p->threads > p->params.min_workers ?
			    idle_ns - (now - idle_since) : 1000000000u;
			until.tv_sec += wait_ns / 1000000000u;
			until.tv_nsec += wait_ns % 1000000000u;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			p->idle++;
			pthread_cond_timedwait(&p->cond, &p->lock, &until);
			p->idle--;
			continue;
		}

		struct job *job = p->head;
		p->head = job->next;
		if (!p->head)
			p->tail = &p->head;
		p->queued--;
		if (job->waited_on)
			p->waited_on--;
		job->next = NULL;

		/* Work still waiting behind this one on busy workers? */
		if (pool_should_grow_locked(p, now_ns()))
			pool_spawn_locked(p);

		/* Not read after run: the job may be reused by then. */
		struct job_owner *owner = job->owner;
		void (*done)(struct job *) = job->done;

		p->busy++;
		pthread_mutex_unlock(&p->lock);

		if (p->grace)
			grace_online(p->grace, &reader);
		if (job->run)
			job->run(job);
		if (owner)
			owner->post(owner, job);
		else if (done)
			done(job);
		if (p->grace)
			grace_offline(&reader);

		pthread_mutex_lock(&p->lock);
		p->busy--;
		idle_since = now_ns();
	}
	/* Before it counts as gone: pool_free may free P, and the daemon
	 * the grace, as soon as it does. */
	if (p->grace)
		grace_unregister(p->grace, &reader);
	p->threads--;
	pthread_cond_broadcast(&p->exited);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct pool *
pool_new(const char *name, const struct pool_params *params,
    struct grace *grace)
{
	struct pool *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->grace = grace;
	strncpy(p->name, name, sizeof p->name - 1);
	lock_init(&p->lock);
	pthread_cond_init(&p->cond, NULL);
	pthread_cond_init(&p->exited, NULL);
	p->tail = &p->head;
	p->params = *params;
	if (p->params.min_workers < 1)
		p->params.min_workers = 1;
	if (p->params.max_workers < p->params.min_workers)
		p->params.max_workers = p->params.min_workers;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->params.min_workers; i++)
		if (pool_spawn_locked(p) < 0)
			break;
	unsigned n = p->threads;
	pthread_mutex_unlock(&p->lock);
	if (n == 0) {
		pool_free(p);
		return NULL;
	}
	return p;
}

void
pool_submit(struct pool *p, struct job *job)
{
	uint64_t now = now_ns();

	job->next = NULL;
	job->queued_ns = now;
	pthread_mutex_lock(&p->lock);
	*p->tail = job;
	p->tail = &job->next;
	p->queued++;
	if (job->waited_on)
		p->waited_on++;
	if (p->idle > 0)
		pthread_cond_signal(&p->cond);
	else if (pool_should_grow_locked(p, now))
		pool_spawn_locked(p);
	else if (job->waited_on && p->threads >= p->params.max_workers) {
		unsigned quiet;
		p->at_max_total++;
		if (ratelimit_due(&p->at_max_rl, POOL_AT_MAX_LOG_NS, &quiet))
			log_info(
			    "%s: a job a client waits for is queued behind "
			    "%u busy worker(s), the most "
			    "(writeback.max_workers); %u queued (%u more "
			    "time(s) since the last such line)",
			    p->name, p->threads, p->queued, quiet);
	}
	pthread_mutex_unlock(&p->lock);
}

void
pool_set_params(struct pool *p, const struct pool_params *params)
{
	pthread_mutex_lock(&p->lock);
	p->params = *params;
	while (p->threads < p->params.min_workers)
		if (pool_spawn_locked(p) < 0)
			break;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void
pool_get_stats(struct pool *p, struct pool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	st->threads = p->threads;
	st->busy = p->busy;
	st->queued = p->queued;
	st->spawned_total = p->spawned_total;
	st->reaped_total = p->reaped_total;
	st->at_max_total = p->at_max_total;
	pthread_mutex_unlock(&p->lock);
}

void
pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	if (p->head && p->threads == 0)
		pool_spawn_locked(p);
	pthread_cond_broadcast(&p->cond);
	while (p->threads > 0)
		pthread_cond_wait(&p->exited, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	pthread_cond_destroy(&p->exited);
	free(p);
}
