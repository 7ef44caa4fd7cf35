/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-ratelimit.c - the log's rate limiter (common/ratelimit.h): a burst
 * of lines per window, the window opened by the first line after the last
 * one closed, the next line counting those left out; ratelimit_due as a
 * burst of one.  Windows are long (an hour) or short (20 ms, waited out).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "ratelimit.h"

#define HOUR_NS (3600ull * 1000000000ull)
#define SHORT_NS (20ull * 1000000ull)

static void
sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
		(long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* The first BURST lines of a window are due, the rest counted. */
static void
test_burst_then_quiet(void **state)
{
	struct ratelimit rl = { 0 };
	unsigned quiet = 99;

	(void)state;
	for (unsigned i = 0; i < 10; i++) {
		assert_true(ratelimit_burst_due(&rl, HOUR_NS, 10, &quiet));
		assert_int_equal(quiet, 0);
	}
	for (unsigned i = 0; i < 25; i++)
		assert_false(ratelimit_burst_due(&rl, HOUR_NS, 10, &quiet));
	assert_int_equal(rl.quiet, 25);
}

/* Once the window closes, the next line opens another, counting those
 * left out of the last; a new burst follows. */
static void
test_next_window_counts_left_out(void **state)
{
	struct ratelimit rl = { 0 };
	unsigned quiet = 99;

	(void)state;
	for (unsigned i = 0; i < 3; i++)
		assert_true(ratelimit_burst_due(&rl, SHORT_NS, 3, &quiet));
	for (unsigned i = 0; i < 7; i++)
		assert_false(ratelimit_burst_due(&rl, SHORT_NS, 3, &quiet));
	sleep_ns(2 * SHORT_NS);
	assert_true(ratelimit_burst_due(&rl, SHORT_NS, 3, &quiet));
	assert_int_equal(quiet, 7);
	assert_true(ratelimit_burst_due(&rl, SHORT_NS, 3, &quiet));
	assert_int_equal(quiet, 0);
	assert_true(ratelimit_burst_due(&rl, SHORT_NS, 3, &quiet));
	assert_false(ratelimit_burst_due(&rl, SHORT_NS, 3, &quiet));
}

/* ratelimit_due: one line a window. */
static void
test_due_is_a_burst_of_one(void **state)
{
	struct ratelimit rl = { 0 };
	unsigned quiet = 99;

	(void)state;
	assert_true(ratelimit_due(&rl, SHORT_NS, &quiet));
	assert_int_equal(quiet, 0);
	assert_false(ratelimit_due(&rl, SHORT_NS, &quiet));
	assert_false(ratelimit_due(&rl, SHORT_NS, &quiet));
	sleep_ns(2 * SHORT_NS);
	assert_true(ratelimit_due(&rl, SHORT_NS, &quiet));
	assert_int_equal(quiet, 2);
	assert_false(ratelimit_due(&rl, SHORT_NS, &quiet));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_quiet),
		cmocka_unit_test(test_next_window_counts_left_out),
		cmocka_unit_test(test_due_is_a_burst_of_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
