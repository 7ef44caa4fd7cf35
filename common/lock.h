/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lock.h - mutexes whose holder can be asserted: lock_init() and
 * lock_assert_held(), for the `_locked' helpers.  No state of its own.
 *
 * With assertions enabled (debug and sanitizer builds: NDEBUG unset), a
 * mutex made by lock_init() is PTHREAD_MUTEX_ERRORCHECK, so locking it
 * again from its holder fails with EDEADLK instead of deadlocking; that is
 * how lock_assert_held() tells "held by me" from "free" or "held by
 * another thread" (both fail the assertion; it never waits).  In release
 * builds (NDEBUG) lock_init() makes a default mutex and lock_assert_held()
 * compiles to nothing.
 *
 * Only mutexes made by lock_init() may be passed to lock_assert_held().
 */
#ifndef WBD_LOCK_H
#define WBD_LOCK_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

/* pthread_mutex_init() for a mutex lock_assert_held() may be used on. */
static inline int
lock_init(pthread_mutex_t *m)
{
#ifdef NDEBUG
	return pthread_mutex_init(m, NULL);
#else
	pthread_mutexattr_t attr;
	int r;

	if ((r = pthread_mutexattr_init(&attr)) != 0)
		return r;
	r = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
	if (r == 0)
		r = pthread_mutex_init(m, &attr);
	pthread_mutexattr_destroy(&attr);
	return r;
#endif
}

#ifndef NDEBUG
/* Does the calling thread hold M (made by lock_init)?  Never waits: a
 * deadline in the past makes a mutex held by another thread time out. */
static inline bool
lock_held(pthread_mutex_t *m)
{
	static const struct timespec past = { 0, 0 };
	int r = pthread_mutex_timedlock(m, &past);

	if (r == 0)
		pthread_mutex_unlock(m);
	return r == EDEADLK;
}
#endif

/* A macro, so that a failure names the caller's file and line. */
#define lock_assert_held(m)     assert(lock_held(m))

#endif
