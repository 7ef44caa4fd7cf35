/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-slots.c - connection slots per client: a client holds at most its
 * share, others are not affected, released slots can be taken again, and
 * a client with no slot left is forgotten.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "slots.h"

static void
test_a_client_holds_at_most_its_share(void **state)
{
	struct slots *s = slots_new(3);

	assert_non_null(s);
	for (int i = 0; i < 3; i++)
		assert_true(slots_take(s, "10.0.0.1"));
	assert_false(slots_take(s, "10.0.0.1"));
	/* Another client is not affected. */
	assert_true(slots_take(s, "uid 1000"));
	assert_int_equal(slots_clients(s), 2);
	assert_int_equal(slots_held(s, "10.0.0.1"), 3);
	assert_int_equal(slots_held(s, "uid 1000"), 1);
	assert_int_equal(slots_held(s, "10.0.0.2"), 0);
	slots_release(s, "10.0.0.1");
	assert_true(slots_take(s, "10.0.0.1"));
	assert_false(slots_take(s, "10.0.0.1"));
	slots_free(s);
}

static void
test_a_client_with_no_slot_is_forgotten(void **state)
{
	struct slots *s = slots_new(2);
	char key[32];

	/* Many clients, each coming and going: the table holds none. */
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof key, "client %d", i);
		assert_true(slots_take(s, key));
		assert_true(slots_take(s, key));
		slots_release(s, key);
		slots_release(s, key);
	}
	assert_int_equal(slots_clients(s), 0);
	/* Releasing what was never taken changes nothing. */
	slots_release(s, "nobody");
	assert_int_equal(slots_clients(s), 0);
	slots_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_client_holds_at_most_its_share),
		cmocka_unit_test(test_a_client_with_no_slot_is_forgotten),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
