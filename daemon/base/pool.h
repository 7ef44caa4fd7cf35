/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool.h - a pool of worker threads that run jobs, one pool per writeback
 * device.  Threads are named after the pool ("flush-8:1"), as the kernel
 * names its writeback workers.  The pool holds between min and max threads:
 * it grows when work has waited on busy workers for longer than the grow
 * delay, and a worker idle for longer than the idle timeout exits while more
 * than min remain (pdflush's rule, per device).
 */
#ifndef WBD_POOL_H
#define WBD_POOL_H

#include <stdbool.h>

#include "clock.h"
#include "job.h"

struct grace;
struct pool;

struct pool_stats {
	unsigned threads;
	unsigned busy;
	unsigned queued;
	unsigned spawned_total;
	unsigned reaped_total;
	unsigned at_max_total; /* a client's job queued, all max busy */
};

struct pool_params {
	unsigned min_workers;
	unsigned max_workers;
	unsigned grow_delay_ms;         /* work waits this long before growth */
	unsigned idle_timeout_ms;       /* an idle worker above min exits */
};

/* A pool whose workers are readers of GRACE (grace.h; may be NULL):
 * online while they run a job, offline between jobs. */
struct pool *pool_new(const char *name, const struct pool_params *params,
    struct grace *grace);
/* Queue JOB; any thread. */
void pool_submit(struct pool *p, struct job *job);
void pool_set_params(struct pool *p, const struct pool_params *params);
void pool_get_stats(struct pool *p, struct pool_stats *st);
/* Run everything queued, stop the threads, free the pool. */
void pool_free(struct pool *p);

#endif
