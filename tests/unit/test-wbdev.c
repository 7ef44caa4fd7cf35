/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-wbdev.c - room in a device's window (wb_dev_write_admit): a write
 * that is not for a sync waits while a sync's waits, and is let in once
 * the room it waits for is there, however that room came.  The case
 * here is the one that hung wbd: write-behind, with nothing of its own in
 * flight, found a sync waiting; while it let the lock go to end a write
 * of its own (it had none), the one write in flight ended, the sync got
 * its room, and the sync's write ended too.  Every wake-up had gone out
 * before write-behind counted itself a waiter, and it then waited for a
 * write's end that would never come (the FLUSH behind the sync waited for
 * the run write-behind had taken).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <cmocka.h>

#include "clock.h"
#include "pool.h"
#include "wbdev.h"

#define BYTES 4096

struct race {
	struct wb_dev *dev;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool sync_in;         /* the sync's write was let in */
	bool sync_done;       /* and has ended */
	bool behind_in;       /* write-behind's was let in */
	uint64_t other_start; /* the write in flight from the start */
};

static void
race_set(struct race *r, bool *flag)
{
	pthread_mutex_lock(&r->lock);
	*flag = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Wait up to MS for *FLAG; its value. */
static bool
race_wait(struct race *r, const bool *flag, unsigned ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&r->lock);
	while (!*flag &&
	    pthread_cond_timedwait(&r->cond, &r->lock, &until) != ETIMEDOUT)
		;
	bool v = *flag;
	pthread_mutex_unlock(&r->lock);
	return v;
}

/* A FLUSH's write: waits for room (the window is one write), then ends. */
static void *
sync_writer(void *arg)
{
	struct race *r = arg;
	struct wb_dev_room room = { .floor = 1, .max_writes = 1, .sync = true };

	uint64_t start = wb_dev_write_admit(r->dev, BYTES, &room, NULL, NULL);
	race_set(r, &r->sync_in);
	wb_dev_link_end(r->dev, &r->dev->est, BYTES, now_ns() - start, true,
	    now_ns());
	race_set(r, &r->sync_done);
	return NULL;
}

/*
 * Write-behind's END_ONE: it has no write of its own in flight.  While
 * the lock is let go, the write in flight ends, the waiting sync is let
 * in and its write ends: the room is there before the caller waits.
 */
static bool
behind_end_one(void *arg)
{
	struct race *r = arg;

	wb_dev_link_end(r->dev, &r->dev->est, BYTES, now_ns() - r->other_start,
	    true, now_ns());
	assert_true(race_wait(r, &r->sync_done, 5000));
	return false;
}

static void *
behind_writer(void *arg)
{
	struct race *r = arg;
	struct wb_dev_room room = { .floor = 1, .max_writes = 1 };

	(void)wb_dev_write_admit(r->dev, BYTES, &room, behind_end_one, r);
	race_set(r, &r->behind_in);
	return NULL;
}

/* The device's pool: one worker (the tests call the device themselves). */
static const struct pool_params one_worker = { .min_workers = 1,
	.max_workers = 1,
	.grow_delay_ms = 1000,
	.idle_timeout_ms = 1000 };

static void
test_room_made_while_unlocked_lets_the_write_in(void **state)
{
	struct race r = { 0 };
	struct wb_dev_room one = { .floor = 1, .max_writes = 1 };
	pthread_t sync_t, behind_t;

	(void)state;
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	r.dev = wb_dev_new(makedev(250, 7), "250:7", &one_worker, NULL);
	assert_non_null(r.dev);

	/* One write in flight fills the window of one. */
	r.other_start = wb_dev_write_admit(r.dev, BYTES, &one, NULL, NULL);
	/* A sync's write waits for room. */
	assert_int_equal(pthread_create(&sync_t, NULL, sync_writer, &r), 0);
	for (int i = 0; i < 5000; i++) {
		pthread_mutex_lock(&r.dev->est_lock);
		unsigned waiting = r.dev->sync_waiting;
		pthread_mutex_unlock(&r.dev->est_lock);
		if (waiting > 0)
			break;
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	assert_int_equal(r.dev->sync_waiting, 1);
	assert_false(r.sync_in);

	/* Write-behind comes: a sync waits, so it yields; its END_ONE
	 * finds nothing of its own, and meanwhile the room is made. */
	assert_int_equal(pthread_create(&behind_t, NULL, behind_writer, &r), 0);
	bool in = race_wait(&r, &r.behind_in, 3000);
	if (!in) {
		/* Hung: wake it to let the test end, and fail. */
		pthread_mutex_lock(&r.dev->est_lock);
		r.dev->est.inflight = 0;
		pthread_cond_broadcast(&r.dev->est_cond);
		pthread_mutex_unlock(&r.dev->est_lock);
		race_wait(&r, &r.behind_in, 3000);
	}
	pthread_join(behind_t, NULL);
	pthread_join(sync_t, NULL);
	assert_true(in); /* let in at once: the room was there */
	assert_int_equal(r.dev->sync_waiting, 0);
	assert_int_equal(r.dev->est.inflight, 1); /* write-behind's own */
	assert_int_equal(r.dev->budget_waiters, 0);
	wb_dev_free(r.dev);
	pthread_cond_destroy(&r.cond);
	pthread_mutex_destroy(&r.lock);
}

/* A write that fits is let in at once, a sync's or not; one that does
 * not ends one of the caller's own first. */
static unsigned ended_own;

static bool
end_own(void *arg)
{
	struct wb_dev *dev = arg;

	ended_own++;
	wb_dev_link_end(dev, &dev->est, BYTES, 1000, true, now_ns());
	return true;
}

static void
test_a_full_window_ends_the_callers_own_first(void **state)
{
	struct wb_dev_room two = { .floor = 2, .max_writes = 2 };

	(void)state;
	struct wb_dev *dev =
	    wb_dev_new(makedev(250, 8), "250:8", &one_worker, NULL);
	assert_non_null(dev);
	ended_own = 0;
	(void)wb_dev_write_admit(dev, BYTES, &two, end_own, dev);
	(void)wb_dev_write_admit(dev, BYTES, &two, end_own, dev);
	assert_int_equal(ended_own, 0);
	assert_int_equal(dev->est.inflight, 2);
	(void)wb_dev_write_admit(dev, BYTES, &two, end_own, dev);
	assert_int_equal(ended_own, 1);
	assert_int_equal(dev->est.inflight, 2);
	wb_dev_free(dev);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_full_window_ends_the_callers_own_first),
		cmocka_unit_test(
		    test_room_made_while_unlocked_lets_the_write_in),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
