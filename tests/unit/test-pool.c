/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-pool.c - the work queue of a device's pool: jobs run in order on a
 * single worker, threads carry the pool's name, the pool grows when work
 * waits on busy workers and shrinks back to min_workers when idle.
 */
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "pool.h"

struct tjob {
	struct job job;
	int id;
	int *order;
	int *n;
	pthread_mutex_t *lock;
	unsigned sleep_ms;
	char name[16];
};

static void
tjob_run(struct job *job)
{
	struct tjob *t = (struct tjob *)job;
	pthread_getname_np(pthread_self(), t->name, sizeof t->name);
	if (t->sleep_ms)
		usleep(t->sleep_ms * 1000);
	pthread_mutex_lock(t->lock);
	t->order[(*t->n)++] = t->id;
	pthread_mutex_unlock(t->lock);
}

static void
wait_for(int *n, int want, pthread_mutex_t *lock)
{
	for (int i = 0; i < 5000; i++) {
		pthread_mutex_lock(lock);
		int v = *n;
		pthread_mutex_unlock(lock);
		if (v >= want)
			return;
		usleep(1000);
	}
	fail_msg("jobs did not finish");
}

/* Submit N jobs recording their ids into ORDER (count in *COUNT). */
static void
submit_jobs(struct pool *p, struct tjob *jobs, int n, int *order, int *count,
    pthread_mutex_t *lock, unsigned sleep_ms, bool waited_on)
{
	for (int i = 0; i < n; i++) {
		memset(&jobs[i], 0, sizeof jobs[i]);
		jobs[i].job.run = tjob_run;
		jobs[i].job.waited_on = waited_on;
		jobs[i].id = i;
		jobs[i].order = order;
		jobs[i].n = count;
		jobs[i].lock = lock;
		jobs[i].sleep_ms = sleep_ms;
		pool_submit(p, &jobs[i].job);
	}
}

static void
test_fifo_order_and_thread_name(void **state)
{
	struct pool_params pp = { .min_workers = 1, .max_workers = 1,
	    .grow_delay_ms = 1000, .idle_timeout_ms = 1000 };
	struct pool *p = pool_new("flush-8:16", &pp, NULL);
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int order[20], n = 0;
	struct tjob jobs[20];

	assert_non_null(p);
	submit_jobs(p, jobs, 20, order, &n, &lock, 0, false);
	wait_for(&n, 20, &lock);
	for (int i = 0; i < 20; i++)
		assert_int_equal(order[i], i);
	assert_string_equal(jobs[0].name, "flush-8:16");
	pool_free(p);
}

static void
test_grows_when_work_waits_and_shrinks_when_idle(void **state)
{
	struct pool_params pp = { .min_workers = 1, .max_workers = 4,
	    .grow_delay_ms = 20, .idle_timeout_ms = 200 };
	struct pool *p = pool_new("flush-test", &pp, NULL);
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int order[16], n = 0;
	struct tjob jobs[16];
	struct pool_stats st;

	pool_get_stats(p, &st);
	assert_int_equal(st.threads, 1);
	submit_jobs(p, jobs, 16, order, &n, &lock, 50, false);
	unsigned most = 0;
	for (int i = 0; i < 400; i++) {
		pool_get_stats(p, &st);
		if (st.threads > most)
			most = st.threads;
		pthread_mutex_lock(&lock);
		int done = n;
		pthread_mutex_unlock(&lock);
		if (done == 16)
			break;
		usleep(5000);
	}
	wait_for(&n, 16, &lock);
	assert_true(most > 1);
	assert_true(most <= 4);
	/* Idle: back to min_workers. */
	for (int i = 0; i < 300; i++) {
		pool_get_stats(p, &st);
		if (st.threads == 1)
			break;
		usleep(10000);
	}
	assert_int_equal(st.threads, 1);
	assert_true(st.reaped_total >= 1);
	pool_free(p);
}

/*
 * Jobs a client waits for get a thread at once (up to max_workers); other
 * work waits for the grow delay first.
 */
static void
test_waited_on_jobs_grow_at_once(void **state)
{
	struct pool_params pp = { .min_workers = 1, .max_workers = 4,
	    .grow_delay_ms = 10000, .idle_timeout_ms = 10000 };
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int order[8], n = 0;
	struct tjob jobs[8];
	struct pool_stats st;

	for (int waited = 0; waited <= 1; waited++) {
		struct pool *p = pool_new("flush-test", &pp, NULL);
		n = 0;
		submit_jobs(p, jobs, 8, order, &n, &lock, 100, waited);
		usleep(50 * 1000);      /* well before the 10 s grow delay */
		pool_get_stats(p, &st);
		if (waited)
			assert_int_equal(st.threads, 4);
		else
			assert_int_equal(st.threads, 1);
		wait_for(&n, 8, &lock);
		pool_free(p);
	}
}

static void
test_free_runs_queued_work(void **state)
{
	struct pool_params pp = { .min_workers = 1, .max_workers = 1,
	    .grow_delay_ms = 1000, .idle_timeout_ms = 1000 };
	struct pool *p = pool_new("flush-x", &pp, NULL);
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int order[8], n = 0;
	struct tjob jobs[8];

	submit_jobs(p, jobs, 8, order, &n, &lock, 5, false);
	pool_free(p);           /* must not drop queued jobs */
	assert_int_equal(n, 8);
}

/* Jobs a client waits for, queued while every worker is busy at
 * max_workers, are counted (and logged): a waited-on job behind one busy
 * worker at max_workers 1 is, jobs nobody waits for are not, and none is
 * while a worker may still be started. */
static void
test_waits_at_max_workers_counted(void **state)
{
	struct pool_params pp = { .min_workers = 1,
		.max_workers = 1,
		.grow_delay_ms = 1000,
		.idle_timeout_ms = 1000 };
	struct pool *p = pool_new("flush-max", &pp, NULL);
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int order[8], n = 0;
	struct tjob jobs[8];
	struct pool_stats st;

	(void)state;
	assert_non_null(p);
	submit_jobs(p, jobs, 1, order, &n, &lock, 200, false);
	usleep(50 * 1000); /* the one worker busy with it */
	submit_jobs(p, jobs + 1, 2, order, &n, &lock, 0, false);
	pool_get_stats(p, &st);
	assert_int_equal(st.at_max_total, 0);
	submit_jobs(p, jobs + 3, 3, order, &n, &lock, 0, true);
	pool_get_stats(p, &st);
	assert_int_equal(st.at_max_total, 3);
	wait_for(&n, 6, &lock);
	pool_free(p);

	/* Room for another worker: a waited-on job starts one, no wait. */
	pp.max_workers = 2;
	p = pool_new("flush-room", &pp, NULL);
	assert_non_null(p);
	n = 0;
	submit_jobs(p, jobs, 1, order, &n, &lock, 200, false);
	usleep(50 * 1000);
	submit_jobs(p, jobs + 1, 1, order, &n, &lock, 0, true);
	pool_get_stats(p, &st);
	assert_int_equal(st.at_max_total, 0);
	wait_for(&n, 2, &lock);
	pool_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_order_and_thread_name),
		cmocka_unit_test(
		    test_grows_when_work_waits_and_shrinks_when_idle),
		cmocka_unit_test(test_waited_on_jobs_grow_at_once),
		cmocka_unit_test(test_free_runs_queued_work),
		cmocka_unit_test(test_waits_at_max_workers_counted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
