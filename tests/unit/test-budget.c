/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-budget.c - the memory budget (limits.max_inflight_bytes): takes
 * stop at the limit, the last eighth is only for connections holding
 * little, a request alone always fits, and what is given back can be taken
 * again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "budget.h"

#define MiB (1u << 20)

static void
test_takes_stop_short_of_the_reserve(void **state)
{
	struct budget b;
	struct budget_stats st;

	budget_init(&b, 64 * MiB);
	/* Big takes: up to the general part, 56 MiB. */
	for (int i = 0; i < 7; i++)
		assert_true(budget_take(&b, 8 * MiB, 0));
	assert_false(budget_take(&b, 8 * MiB, 0));
	assert_false(budget_take(&b, 1 * MiB, 0));
	budget_get_stats(&b, &st);
	assert_int_equal(st.used, 56 * MiB);
	assert_int_equal(st.peak, 56 * MiB);
	assert_int_equal(st.reserve_bytes, 8 * MiB);
	assert_int_equal(st.small_bytes, 64 * 1024);
}

static void
test_the_reserve_is_for_those_holding_little(void **state)
{
	struct budget b;

	budget_init(&b, 64 * MiB);
	assert_true(budget_take(&b, 56 * MiB, 0));
	/* A connection holding nothing gets a small request in... */
	assert_true(budget_take(&b, 64 * 1024, 0));
	/* ...but not a second one while it holds the first. */
	assert_false(budget_take(&b, 64 * 1024, 64 * 1024));
	/* Another small holder fills the reserve, never past the limit. */
	for (int i = 1; i < 128; i++)
		assert_true(budget_take(&b, 64 * 1024, 0));
	assert_false(budget_take(&b, 1, 0));
	assert_true(budget_full(&b));
	budget_give(&b, 64 * 1024);
	assert_false(budget_full(&b));
	assert_true(budget_take(&b, 64 * 1024, 0));
}

static void
test_a_request_alone_always_fits(void **state)
{
	struct budget b;

	budget_init(&b, 64 * MiB);
	/* Larger than the limit itself: let in when nothing is held. */
	assert_true(budget_take(&b, 100 * MiB, 0));
	assert_false(budget_take(&b, 4096, 0));
	budget_give(&b, 100 * MiB);
	assert_true(budget_take(&b, 4096, 0));
	assert_false(budget_take(&b, 100 * MiB, 0));
}

static void
test_a_lower_limit_applies_to_new_takes(void **state)
{
	struct budget b;
	struct budget_stats st;

	budget_init(&b, 128 * MiB);
	assert_true(budget_take(&b, 64 * MiB, 0));
	budget_set_limit(&b, 64 * MiB);
	/* What is held stays held; nothing more fits until it is given. */
	assert_false(budget_take(&b, 1 * MiB, 0));
	budget_give(&b, 64 * MiB);
	assert_true(budget_take(&b, 1 * MiB, 0));
	budget_charge(&b, 100 * MiB);
	budget_get_stats(&b, &st);
	assert_int_equal(st.used, 101 * MiB);
	assert_int_equal(st.peak, 101 * MiB);
	assert_int_equal(st.limit, 64 * MiB);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_takes_stop_short_of_the_reserve),
		cmocka_unit_test(test_the_reserve_is_for_those_holding_little),
		cmocka_unit_test(test_a_request_alone_always_fits),
		cmocka_unit_test(test_a_lower_limit_applies_to_new_takes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
