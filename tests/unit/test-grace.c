/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-grace.c - grace periods (grace.h) and the tables they protect
 * (pubtab.h): a grace period waits for every reader online when it began
 * and for no other; emptied slots are filled again; and, with threads,
 * nothing is freed while a reader may still use it (run under ASan and
 * TSan, a use after free would be reported).
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "atomics.h"
#include "grace.h"
#include "pubtab.h"

static void
test_an_offline_reader_holds_up_nothing(void **state)
{
	struct grace g;
	struct grace_reader r;

	grace_init(&g);
	grace_register(&g, &r);
	assert_true(grace_done(&g, grace_start(&g)));
	grace_online(&g, &r);
	grace_offline(&r);
	assert_true(grace_done(&g, grace_start(&g)));
	grace_unregister(&g, &r);
	grace_destroy(&g);
}

static void
test_a_grace_period_waits_for_readers_online_when_it_began(void **state)
{
	struct grace g;
	struct grace_reader a, b;

	grace_init(&g);
	grace_register(&g, &a);
	grace_register(&g, &b);
	grace_online(&g, &a);
	uint64_t token = grace_start(&g);
	/* B comes online after the start: it cannot hold what was
	 * unpublished before, and is not waited for. */
	grace_online(&g, &b);
	assert_false(grace_done(&g, token));
	/* A quiescent state (online again) ends A's part... */
	grace_online(&g, &a);
	assert_true(grace_done(&g, token));
	/* ...and so does going offline, for the next period. */
	token = grace_start(&g);
	assert_false(grace_done(&g, token));
	grace_offline(&a);
	grace_offline(&b);
	assert_true(grace_done(&g, token));
	/* An unregistered reader is not waited for. */
	grace_online(&g, &a);
	token = grace_start(&g);
	assert_false(grace_done(&g, token));
	grace_unregister(&g, &a);
	assert_true(grace_done(&g, token));
	grace_unregister(&g, &b);
	grace_destroy(&g);
}

static void
test_emptied_slots_are_filled_again(void **state)
{
	struct pubtab t;
	int objs[4];

	assert_int_equal(pubtab_init(&t, 3), 0);
	assert_int_equal(pubtab_add(&t, &objs[0]), 0);
	assert_int_equal(pubtab_add(&t, &objs[1]), 1);
	assert_int_equal(pubtab_add(&t, &objs[2]), 2);
	assert_false(pubtab_has_room(&t));
	assert_int_equal(pubtab_add(&t, &objs[3]), -1);
	assert_int_equal(pubtab_remove(&t, &objs[1]), 0);
	assert_int_equal(pubtab_remove(&t, &objs[1]), -1);
	assert_null(pubtab_get(&t, 1));
	assert_true(pubtab_has_room(&t));
	assert_int_equal(pubtab_add(&t, &objs[3]), 1);
	assert_ptr_equal(pubtab_get(&t, 1), &objs[3]);
	/* The count is of slots ever used: it never shrinks. */
	assert_int_equal(pubtab_count(&t), 3);
	pubtab_free(&t);
}

/* Readers look objects up and check them while a writer replaces and
 * frees them, each only after a grace period. */
#define SLOTS 4
#define OBJ_MAGIC 0x600dcafeu
#define ROUNDS 2000

struct obj {
	unsigned magic;
	unsigned long serial;
};

struct shared {
	struct grace g;
	struct pubtab t;
	_Atomic int started, stop;
	_Atomic unsigned long bad; /* dead objects seen */
};

static void *
reader_main(void *arg)
{
	struct shared *sh = arg;
	struct grace_reader r;

	grace_register(&sh->g, &r);
	atomic_fetch_add_explicit(&sh->started, 1, memory_order_release);
	while (!load_acquire(&sh->stop)) {
		grace_online(&sh->g, &r);
		for (size_t i = 0; i < pubtab_count(&sh->t); i++) {
			struct obj *o = pubtab_get(&sh->t, i);
			sched_yield(); /* hold it a while */
			if (o && o->magic != OBJ_MAGIC)
				add_relaxed(&sh->bad, 1);
		}
		grace_offline(&r);
	}
	grace_unregister(&sh->g, &r);
	return NULL;
}

static void
test_nothing_is_freed_while_a_reader_may_hold_it(void **state)
{
	struct shared sh = { .started = 0, .stop = 0 };
	struct obj *limbo[ROUNDS];
	uint64_t tokens[ROUNDS];
	size_t n_limbo = 0, freed = 0;
	pthread_t th[3];

	grace_init(&sh.g);
	assert_int_equal(pubtab_init(&sh.t, SLOTS), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader_main, &sh),
		    0);
	while (load_acquire(&sh.started) < 3)
		sched_yield();
	for (unsigned long round = 0; round < ROUNDS; round++) {
		struct obj *o = malloc(sizeof *o);
		assert_non_null(o);
		*o = (struct obj){ .magic = OBJ_MAGIC, .serial = round };
		size_t victim = round % SLOTS;
		struct obj *old = victim < pubtab_count(&sh.t) ?
		    pubtab_get(&sh.t, victim) :
		    NULL;
		if (old) {
			pubtab_remove(&sh.t, old);
			tokens[n_limbo] = grace_start(&sh.g);
			limbo[n_limbo++] = old;
		}
		assert_int_equal(pubtab_add(&sh.t, o), (long)victim);
		sched_yield();
		/* Free what no reader can hold any more (poisoned first, so a
		 * reader that still held it would see it). */
		while (freed < n_limbo && grace_done(&sh.g, tokens[freed])) {
			limbo[freed]->magic = 0;
			free(limbo[freed]);
			freed++;
		}
	}
	store_release(&sh.stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(load_relaxed(&sh.bad), 0);
	/* Every reader is gone: everything can be freed. */
	while (freed < n_limbo) {
		assert_true(grace_done(&sh.g, tokens[freed]));
		free(limbo[freed++]);
	}
	for (size_t i = 0; i < pubtab_count(&sh.t); i++)
		free(pubtab_get(&sh.t, i));
	pubtab_free(&sh.t);
	grace_destroy(&sh.g);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_an_offline_reader_holds_up_nothing),
		cmocka_unit_test(
		    test_a_grace_period_waits_for_readers_online_when_it_began),
		cmocka_unit_test(test_emptied_slots_are_filled_again),
		cmocka_unit_test(
		    test_nothing_is_freed_while_a_reader_may_hold_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
