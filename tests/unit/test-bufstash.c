/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-bufstash.c - large buffers kept per thread: a buffer given back is
 * the one handed out next (best fit, never more than a quarter too
 * large), page-aligned; what a thread keeps is bounded in number and
 * bytes, the largest staying, and what all threads keep together too;
 * small buffers are not kept; buffers of BUFSTASH_MAP_MIN and more are
 * mapped for themselves, and unmapped when not kept.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "bufstash.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static void
test_a_buffer_given_back_is_used_again(void **state)
{
	size_t cap, cap2;
	void *p = bufstash_get(1 * MiB, &cap);

	assert_non_null(p);
	assert_true(cap >= 1 * MiB);
	assert_int_equal((uintptr_t)p % 4096, 0);
	memset(p, 0xa5, 1 * MiB);
	bufstash_put(p, cap);
	/* Slightly smaller: the same one. */
	void *q = bufstash_get(1 * MiB - 4096, &cap2);
	assert_ptr_equal(q, p);
	assert_int_equal(cap2, cap);
	bufstash_put(q, cap2);
	/* Much smaller: not that one (more than a quarter too large). */
	void *r = bufstash_get(64 * KiB, &cap2);
	assert_ptr_not_equal(r, p);
	assert_int_equal(cap2, 64 * KiB);
	bufstash_put(r, cap2);
	/* Larger: a new one. */
	void *s = bufstash_get(2 * MiB, &cap2);
	assert_ptr_not_equal(s, p);
	bufstash_put(s, cap2);
}

static void
test_best_fit(void **state)
{
	size_t c1, c2, c3, cap;
	void *a = bufstash_get(256 * KiB, &c1);
	void *b = bufstash_get(200 * KiB, &c2);
	void *c = bufstash_get(220 * KiB, &c3);

	bufstash_put(a, c1);
	bufstash_put(b, c2);
	bufstash_put(c, c3);
	void *p = bufstash_get(210 * KiB, &cap);
	assert_ptr_equal(p, c);
	assert_int_equal(cap, 220 * KiB);
	bufstash_put(p, cap);
}

static void
test_small_ones_are_not_kept(void **state)
{
	size_t cap;
	void *p = bufstash_get(100, &cap);

	assert_non_null(p);
	assert_int_equal(cap, 100);
	bufstash_put(p, cap); /* freed: ASan would report a leak if kept */
	p = bufstash_get(4096, &cap);
	assert_int_equal((uintptr_t)p % 4096, 0);
	assert_int_equal(cap, 4096);
	bufstash_put(p, cap);
}

/* More than BUFSTASH_KEEP buffers, or more bytes than BUFSTASH_KEEP_BYTES:
 * the largest stay, and only so many.  On a thread of its own, whose
 * stash starts empty (and is freed when it ends). */
static void *
bounded_main(void *arg)
{
	enum {
		N = BUFSTASH_KEEP + 8
	};
	void *p[N];
	size_t cap[N], bytes;

	if (bufstash_kept(&bytes) != 0 || bytes != 0)
		return NULL;
	for (int i = 0; i < N; i++)
		p[i] = bufstash_get(128 * KiB, &cap[i]);
	for (int i = 0; i < N; i++)
		bufstash_put(p[i], cap[i]);
	/* Only BUFSTASH_KEEP of them are kept. */
	if (bufstash_kept(&bytes) != BUFSTASH_KEEP ||
	    bytes != BUFSTASH_KEEP * 128 * KiB)
		return NULL;
	/* Eight of a quarter of BUFSTASH_KEEP_BYTES: the 128 KiB ones go
	 * first, and four large ones stay. */
	const size_t q = BUFSTASH_KEEP_BYTES / 4;
	for (int i = 0; i < 8; i++)
		p[i] = bufstash_get(q, &cap[i]);
	for (int i = 0; i < 8; i++)
		bufstash_put(p[i], cap[i]);
	if (bufstash_kept(&bytes) != 4 || bytes != BUFSTASH_KEEP_BYTES)
		return NULL;
	/* Taken again: the stash empties. */
	for (int i = 0; i < 4; i++)
		p[i] = bufstash_get(q, &cap[i]);
	if (bufstash_kept(&bytes) != 0 || bytes != 0)
		return NULL;
	for (int i = 0; i < 4; i++)
		bufstash_put(p[i], cap[i]);
	/* Larger than all it keeps: freed at once. */
	void *huge = bufstash_get(BUFSTASH_KEEP_BYTES + MiB, &cap[0]);
	if (!huge)
		return NULL;
	bufstash_put(huge, cap[0]);
	if (bufstash_kept(&bytes) != 4 || bytes != BUFSTASH_KEEP_BYTES)
		return NULL;
	return arg;
}

static void
test_what_is_kept_is_bounded(void **state)
{
	pthread_t t;
	void *ret = NULL;

	assert_int_equal(pthread_create(&t, NULL, bounded_main, state), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_ptr_equal(ret, state);
}

/* Threads that each fill their stash, more of them than BUFSTASH_ALL_BYTES
 * has room for: together they keep no more than that, and what each kept
 * goes when it ends. */
#define FILLERS (BUFSTASH_ALL_BYTES / BUFSTASH_KEEP_BYTES + 2)
static pthread_barrier_t filled, checked;

static void *
filler_main(void *arg)
{
	const size_t q = BUFSTASH_KEEP_BYTES / 4;
	void *p[4];
	size_t cap[4];
	bool ok = true;

	for (int i = 0; i < 4; i++)
		ok &= (p[i] = bufstash_get(q, &cap[i])) != NULL;
	for (int i = 0; i < 4; i++)
		bufstash_put(p[i], cap[i]);
	pthread_barrier_wait(&filled);
	pthread_barrier_wait(&checked);
	return ok ? arg : NULL;
}

static void
test_all_threads_keep_at_most_their_bound(void **state)
{
	pthread_t t[FILLERS];
	uint64_t before, all;
	void *ret;

	bufstash_kept_all(&before); /* this thread's, from the tests above */
	assert_true(before < BUFSTASH_ALL_BYTES / 2);
	assert_int_equal(pthread_barrier_init(&filled, NULL, FILLERS + 1), 0);
	assert_int_equal(pthread_barrier_init(&checked, NULL, FILLERS + 1), 0);
	for (unsigned i = 0; i < FILLERS; i++) {
		int r = pthread_create(&t[i], NULL, filler_main, state);
		assert_int_equal(r, 0);
	}
	pthread_barrier_wait(&filled);
	bufstash_kept_all(&all);
	pthread_barrier_wait(&checked);
	for (unsigned i = 0; i < FILLERS; i++) {
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_ptr_equal(ret, state);
	}
	/* Full, but no further: each filler kept what fitted. */
	assert_true(all <= BUFSTASH_ALL_BYTES);
	assert_true(all > BUFSTASH_ALL_BYTES - BUFSTASH_KEEP_BYTES / 4);
	/* The fillers' stashes went with them. */
	bufstash_kept_all(&all);
	assert_int_equal(all, before);
	pthread_barrier_destroy(&filled);
	pthread_barrier_destroy(&checked);
}

/* A buffer of 64 KiB and more is mapped (counted while handed out or
 * kept), and unmapped when it is not kept; a smaller one is not. */
static void
test_large_buffers_are_mapped_apart(void **state)
{
	uint64_t bytes0, bytes, n0, n;
	size_t cap, cap_small;

	(void)state;
	n0 = bufstash_mapped(&bytes0);
	void *small = bufstash_get(BUFSTASH_MAP_MIN - 4096, &cap_small);
	assert_non_null(small);
	n = bufstash_mapped(&bytes);
	assert_int_equal(n, n0);
	assert_int_equal(bytes, bytes0);

	/* Larger than a thread keeps: unmapped when given back. */
	size_t big = BUFSTASH_KEEP_BYTES + 4096;
	void *p = bufstash_get(big, &cap);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % 4096, 0);
	memset(p, 0x5a, big);
	n = bufstash_mapped(&bytes);
	assert_int_equal(n, n0 + 1);
	assert_int_equal(bytes, bytes0 + cap);
	bufstash_put(p, cap);
	n = bufstash_mapped(&bytes);
	assert_int_equal(n, n0);
	assert_int_equal(bytes, bytes0);

	/* Kept: still mapped, and handed out again. */
	p = bufstash_get(BUFSTASH_MAP_MIN, &cap);
	assert_non_null(p);
	bufstash_put(p, cap);
	n = bufstash_mapped(&bytes);
	assert_int_equal(n, n0 + 1);
	void *q = bufstash_get(BUFSTASH_MAP_MIN, &cap);
	assert_ptr_equal(q, p);
	bufstash_put(q, cap);
	bufstash_put(small, cap_small);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		/* First: one thread may keep all that all threads may
		 * (BUFSTASH_KEEP_BYTES == BUFSTASH_ALL_BYTES), so nothing
		 * else may be kept yet when it fills its stash. */
		cmocka_unit_test(test_what_is_kept_is_bounded),
		cmocka_unit_test(test_a_buffer_given_back_is_used_again),
		cmocka_unit_test(test_best_fit),
		cmocka_unit_test(test_small_ones_are_not_kept),
		cmocka_unit_test(test_all_threads_keep_at_most_their_bound),
		cmocka_unit_test(test_large_buffers_are_mapped_apart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
