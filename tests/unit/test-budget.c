/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-budget.c - the memory budget (limits.max_inflight_bytes): takes
 * stop at the limit, the last eighth is only for connections holding
 * little, a request alone always fits, and what is given back can be taken
 * again; and one client holds at most its share (limits.max_client_share)
 * while the others still get theirs.
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

	budget_init(&b, 64 * MiB, 100);
	/* Big takes: up to the general part, 56 MiB. */
	for (int i = 0; i < 7; i++)
		assert_true(budget_take(&b, NULL, 8 * MiB, 0, NULL));
	assert_false(budget_take(&b, NULL, 8 * MiB, 0, NULL));
	assert_false(budget_take(&b, NULL, 1 * MiB, 0, NULL));
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

	budget_init(&b, 64 * MiB, 100);
	assert_true(budget_take(&b, NULL, 56 * MiB, 0, NULL));
	/* A connection holding nothing gets a small request in... */
	assert_true(budget_take(&b, NULL, 64 * 1024, 0, NULL));
	/* ...but not a second one while it holds the first. */
	assert_false(budget_take(&b, NULL, 64 * 1024, 64 * 1024, NULL));
	/* Another small holder fills the reserve, never past the limit. */
	for (int i = 1; i < 128; i++)
		assert_true(budget_take(&b, NULL, 64 * 1024, 0, NULL));
	assert_false(budget_take(&b, NULL, 1, 0, NULL));
	assert_true(budget_full(&b));
	budget_give(&b, NULL, 64 * 1024);
	assert_false(budget_full(&b));
	assert_true(budget_take(&b, NULL, 64 * 1024, 0, NULL));
}

static void
test_a_request_alone_always_fits(void **state)
{
	struct budget b;

	budget_init(&b, 64 * MiB, 100);
	/* Larger than the limit itself: let in when nothing is held. */
	assert_true(budget_take(&b, NULL, 100 * MiB, 0, NULL));
	assert_false(budget_take(&b, NULL, 4096, 0, NULL));
	budget_give(&b, NULL, 100 * MiB);
	assert_true(budget_take(&b, NULL, 4096, 0, NULL));
	assert_false(budget_take(&b, NULL, 100 * MiB, 0, NULL));
}

static void
test_a_lower_limit_applies_to_new_takes(void **state)
{
	struct budget b;
	struct budget_stats st;

	budget_init(&b, 128 * MiB, 100);
	assert_true(budget_take(&b, NULL, 64 * MiB, 0, NULL));
	budget_set_limit(&b, 64 * MiB);
	/* What is held stays held; nothing more fits until it is given. */
	assert_false(budget_take(&b, NULL, 1 * MiB, 0, NULL));
	budget_give(&b, NULL, 64 * MiB);
	assert_true(budget_take(&b, NULL, 1 * MiB, 0, NULL));
	budget_charge(&b, NULL, 100 * MiB);
	budget_get_stats(&b, &st);
	assert_int_equal(st.used, 101 * MiB);
	assert_int_equal(st.peak, 101 * MiB);
	assert_int_equal(st.limit, 64 * MiB);
}

static void
test_a_client_holds_at_most_its_share(void **state)
{
	struct budget b;
	struct budget_stats st;
	bool at_share;

	budget_init(&b, 256 * MiB, 25);
	struct budget_client *one = budget_client_get(&b, "127.0.0.1");
	struct budget_client *again = budget_client_get(&b, "127.0.0.1");
	struct budget_client *other = budget_client_get(&b, "uid 1000");
	assert_ptr_equal(one, again); /* one client, two connections */
	/* Holding nothing, any one request: 100 MiB past its 64 MiB. */
	assert_true(budget_take(&b, one, 100 * MiB, 0, &at_share));
	assert_false(budget_take(&b, one, 4096, 0, &at_share));
	assert_true(at_share);
	budget_give(&b, one, 100 * MiB);
	for (int i = 0; i < 4; i++)
		assert_true(budget_take(&b, one, 16 * MiB, 0, &at_share));
	assert_false(budget_take(&b, again, 1 * MiB, 0, &at_share));
	assert_true(at_share);
	/* The other client is not held back by it. */
	assert_true(budget_take(&b, other, 64 * MiB, 0, &at_share));
	assert_false(at_share);
	budget_get_stats(&b, &st);
	assert_int_equal(st.share_pct, 25);
	assert_int_equal(st.share_bytes, 64 * MiB);
	assert_int_equal(st.clients, 2);
	assert_int_equal(st.client_max_bytes, 64 * MiB);
	assert_int_equal(st.used, 128 * MiB);
	assert_int_equal(budget_client_used(one), 64 * MiB);
	/* A larger share applies to new takes. */
	budget_set_share(&b, 50);
	assert_true(budget_take(&b, one, 1 * MiB, 0, &at_share));
	assert_true(budget_take(&b, other, 50 * MiB, 0, &at_share));
	assert_false(budget_take(&b, other, 50 * MiB, 0, &at_share));
	assert_true(at_share);
	assert_int_equal(budget_client_used(other), 114 * MiB);
	/* The budget itself still caps them all: 179 MiB held, 224 MiB
	 * for large takes. */
	struct budget_client *third = budget_client_get(&b, "127.0.0.2");
	assert_false(budget_take(&b, third, 50 * MiB, 0, &at_share));
	assert_false(at_share);
	assert_int_equal(budget_client_used(third), 0);
	budget_client_put(&b, third);
	budget_give(&b, one, 65 * MiB);
	budget_give(&b, other, 114 * MiB);
	/* A stall mark is kept until the client goes. */
	assert_int_equal(budget_client_stalled_ns(one), 0);
	budget_client_mark_stalled(one, 42);
	assert_int_equal(budget_client_stalled_ns(again), 42);
	budget_client_put(&b, one);
	budget_client_put(&b, again);
	budget_client_put(&b, other);
	budget_get_stats(&b, &st);
	assert_int_equal(st.clients, 0);
	assert_int_equal(st.used, 0);
	budget_fini(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_takes_stop_short_of_the_reserve),
		cmocka_unit_test(test_the_reserve_is_for_those_holding_little),
		cmocka_unit_test(test_a_request_alone_always_fits),
		cmocka_unit_test(test_a_lower_limit_applies_to_new_takes),
		cmocka_unit_test(test_a_client_holds_at_most_its_share),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
