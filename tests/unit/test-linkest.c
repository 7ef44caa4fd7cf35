/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-linkest.c - a device's link estimate (linkest.h): the round trip
 * is the least latency seen lately, the bandwidth counts only time with
 * writes in flight, failed writes count in neither, and the window of
 * writes starts at its floor, grows to twice bandwidth x round trip on a
 * simulated link (a programmed latency and bandwidth, time passed
 * explicitly), and keeps within its bounds; read-ahead grows with the
 * round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "linkest.h"

#define MS 1000000ull
#define S 1000000000ull

static void
test_no_estimate_keeps_the_floor(void **state)
{
	struct linkest e = { 0 };

	(void)state;
	assert_int_equal(linkest_window(&e, 16, 0, 1024), 16);
	assert_int_equal(linkest_rtt_ns(&e), 0);
	assert_int_equal(linkest_bw_max_bps(&e), 0);
	/* One write, shorter than a period: a round trip, no bandwidth. */
	linkest_begin(&e, 4096, 1 * S);
	linkest_end(&e, 4096, 5 * MS, true, 1 * S + 5 * MS);
	assert_int_equal(linkest_rtt_ns(&e), 5 * MS);
	assert_int_equal(linkest_bw_max_bps(&e), 0);
	assert_int_equal(linkest_window(&e, 16, 0, 1024), 16);
}

static void
test_round_trip_is_the_recent_minimum(void **state)
{
	struct linkest e = { 0 };
	uint64_t t = 1 * S;

	(void)state;
	for (unsigned i = 0; i < 10; i++) {
		uint64_t lat = (i % 2 ? 30 : 20) * MS;
		linkest_begin(&e, 4096, t);
		t += lat;
		linkest_end(&e, 4096, lat, true, t);
	}
	assert_int_equal(linkest_rtt_ns(&e), 20 * MS);
	assert_true(e.srtt_ns > 20 * MS && e.srtt_ns < 30 * MS);
	/* The path got longer: the old minimum expires with its window. */
	t += LINKEST_RTT_WINDOW_NS;
	linkest_begin(&e, 4096, t);
	t += 50 * MS;
	linkest_end(&e, 4096, 50 * MS, true, t);
	assert_int_equal(linkest_rtt_ns(&e), 50 * MS);
}

static void
test_bandwidth_counts_busy_time_only(void **state)
{
	struct linkest e = { 0 };
	uint64_t t = 1 * S;

	(void)state;
	/* 1 MiB every 10 ms, one at a time: 100 MiB/s while busy, with a
	 * second idle between each batch of 30. */
	for (unsigned batch = 0; batch < 4; batch++) {
		for (unsigned i = 0; i < 30; i++) {
			linkest_begin(&e, 1 << 20, t);
			t += 10 * MS;
			linkest_end(&e, 1 << 20, 10 * MS, true, t);
		}
		t += 1 * S;
	}
	assert_true(e.periods >= 4);
	uint64_t want = 100ull << 20;
	assert_true(e.bw_bps > want * 95 / 100 && e.bw_bps < want * 105 / 100);
	assert_true(linkest_bw_max_bps(&e) < want * 105 / 100);
	assert_int_equal(e.inflight, 0);
	assert_int_equal(e.inflight_bytes, 0);
	assert_int_equal(e.inflight_max, 1);
}

static void
test_failed_writes_count_in_neither(void **state)
{
	struct linkest e = { 0 };
	uint64_t t = 1 * S;

	(void)state;
	for (unsigned i = 0; i < 100; i++) {
		linkest_begin(&e, 1 << 20, t);
		t += 1 * MS;
		linkest_end(&e, 1 << 20, 1 * MS, false, t);
	}
	assert_int_equal(linkest_rtt_ns(&e), 0);
	assert_int_equal(e.period_bytes, 0);
	assert_int_equal(e.bw_bps, 0);
	assert_int_equal(e.inflight, 0);
	/* The floor, no estimate: in bytes for writes of 1 MiB. */
	assert_int_equal(linkest_window(&e, 16, 0, 1024),
	    LINKEST_FLOOR_BYTES / (1 << 20));
}

/*
 * A link of BW bytes/s and a round trip of RTT_NS, writes of SIZE bytes
 * kept WINDOW at a time (linkest_window, between FLOOR and MAX_WRITES),
 * for DURATION_NS: each write is sent once the link is free, and
 * answered a round trip after its last byte went.  Returns the window
 * at the end.
 */
struct sim_link {
	uint64_t bw, rtt_ns, size;
	unsigned floor, max_writes;
	uint64_t max_bytes;
};

static unsigned
sim_run(struct linkest *e, const struct sim_link *l, uint64_t duration_ns,
    unsigned *max_window)
{
	enum {
		MAXQ = 4096
	};
	static uint64_t start[MAXQ], done[MAXQ];
	unsigned head = 0, n = 0, window = l->floor;
	uint64_t t = 1 * S, end = t + duration_ns, link_free = t;

	*max_window = 0;
	while (t < end) {
		window =
		    linkest_window(e, l->floor, l->max_bytes, l->max_writes);
		if (window > *max_window)
			*max_window = window;
		while (n < window && n < MAXQ) {
			unsigned k = (head + n++) % MAXQ;
			uint64_t sent = link_free > t ? link_free : t;
			link_free = sent + l->size * S / l->bw;
			start[k] = t;
			done[k] = link_free + l->rtt_ns;
			linkest_begin(e, l->size, t);
		}
		t = done[head];
		linkest_end(e, l->size, t - start[head], true, t);
		head = (head + 1) % MAXQ;
		n--;
	}
	return window;
}

static void
test_window_grows_to_the_bandwidth_delay_product(void **state)
{
	struct linkest e = { 0 };
	/* 100 MB/s, 20 ms: 2 MB in flight, 31 writes of 64 KiB; twice that
	 * kept. */
	struct sim_link l = { .bw = 100000000,
		.rtt_ns = 20 * MS,
		.size = 64 << 10,
		.floor = 16,
		.max_writes = 1024 };
	unsigned max_window;

	(void)state;
	unsigned w = sim_run(&e, &l, 10 * S, &max_window);
	uint64_t bdp_writes = l.bw * l.rtt_ns / S / l.size;
	assert_true(w >= 2 * bdp_writes - 4 && w <= 2 * bdp_writes + 8);
	assert_true(max_window <= 2 * bdp_writes + 8);
	/* The link is full: its bandwidth, and its round trip unqueued. */
	assert_true(e.bw_bps > l.bw * 95 / 100 && e.bw_bps <= l.bw * 101 / 100);
	assert_true(linkest_rtt_ns(&e) >= l.rtt_ns &&
	    linkest_rtt_ns(&e) < l.rtt_ns + 2 * MS);
	assert_true(e.inflight_max >= 2 * bdp_writes - 4);
}

static void
test_a_short_link_keeps_the_floor(void **state)
{
	struct linkest e = { 0 };
	/* 1 GB/s, 0.1 ms: under two writes of 64 KiB in flight. */
	struct sim_link l = { .bw = 1000000000,
		.rtt_ns = MS / 10,
		.size = 64 << 10,
		.floor = 16,
		.max_writes = 1024 };
	unsigned max_window;

	(void)state;
	assert_int_equal(sim_run(&e, &l, 2 * S, &max_window), 16);
	assert_int_equal(max_window, 16);
}

static void
test_window_keeps_within_its_bounds(void **state)
{
	struct linkest e = { 0 };
	struct sim_link l = { .bw = 100000000,
		.rtt_ns = 100 * MS,
		.size = 64 << 10,
		.floor = 16,
		.max_writes = 1024,
		.max_bytes = 4 << 20 };
	unsigned max_window;

	(void)state;
	/* max_bytes: 4 MiB of 64 KiB writes. */
	assert_int_equal(sim_run(&e, &l, 5 * S, &max_window), 64);
	assert_int_equal(max_window, 64);
	/* The setting may say less than the floor. */
	assert_int_equal(linkest_window(&e, 16, 256 << 10, 1024), 4);
	/* The writes the window can hold. */
	assert_int_equal(linkest_window(&e, 16, 0, 100), 100);
	assert_int_equal(linkest_window(&e, 16, 1, 100), 1);
}

/*
 * The floor holds LINKEST_FLOOR_BYTES at most: 16 writes of 4 KiB, but 4
 * of 1 MiB, never under LINKEST_FLOOR_MIN.  Large writes fill a link in
 * fewer, and more of them in flight only queue at the remote (16 MiB
 * in flight across the WAN profile cost nbdkit 70% more CPU per MiB and
 * wbd 25%, for no more bandwidth).
 */
static void
test_large_writes_keep_a_floor_in_bytes(void **state)
{
	struct linkest small = { 0 }, large = { 0 }, huge = { 0 }, e = { 0 };
	/* 128 MiB/s and 5 ms, the WAN profile: a write of 1 MiB takes 8 ms
	 * to send, so 2.6 are in flight on a full link, 5.2 kept. */
	struct sim_link l = { .bw = 128u << 20,
		.rtt_ns = 5 * MS,
		.size = 1 << 20,
		.floor = 16,
		.max_writes = 1024 };
	unsigned max_window;

	(void)state;
	linkest_begin(&small, 4096, 1 * S);
	linkest_begin(&large, 1 << 20, 1 * S);
	linkest_begin(&huge, 16 << 20, 1 * S);
	assert_int_equal(linkest_window(&small, 16, 0, 1024), 16);
	assert_int_equal(linkest_window(&small, 64, 0, 1024), 64);
	assert_int_equal(linkest_window(&large, 16, 0, 1024), 4);
	assert_int_equal(linkest_window(&large, 64, 0, 1024), 4);
	assert_int_equal(linkest_window(&huge, 16, 0, 1024), LINKEST_FLOOR_MIN);
	/* A floor that is small already stays. */
	assert_int_equal(linkest_window(&large, 1, 0, 1024), 1);
	/* On the link, the estimate rules: the link full, with a window of
	 * twice its product, not 16 (the size of its writes known from one
	 * that failed, which counts in neither estimate). */
	linkest_begin(&e, 1 << 20, S / 2);
	linkest_end(&e, 1 << 20, 13 * MS, false, S / 2 + 13 * MS);
	unsigned w = sim_run(&e, &l, 5 * S, &max_window);
	assert_true(w >= 4 && w <= 7);
	assert_true(max_window <= 7);
	assert_true(e.bw_bps > l.bw * 95 / 100 && e.bw_bps <= l.bw * 101 / 100);
}

/* Read-ahead follows the link: twice bandwidth x round trip, so a round
 * trip four times longer gets four times more; the base until an
 * estimate exists, and within its bounds. */
static void
test_readahead_grows_with_the_round_trip(void **state)
{
	struct linkest near = { 0 }, far = { 0 }, none = { 0 };
	struct sim_link l = { .bw = 50000000,
		.rtt_ns = 10 * MS,
		.size = 16 << 10,
		.floor = 64,
		.max_writes = 1024 };
	unsigned max_window;
	uint64_t base = 256 << 10, max = 1 << 30;

	(void)state;
	assert_int_equal(linkest_readahead(&none, base, max), base);
	(void)sim_run(&near, &l, 5 * S, &max_window);
	l.rtt_ns = 40 * MS;
	(void)sim_run(&far, &l, 5 * S, &max_window);
	uint64_t ra_near = linkest_readahead(&near, base, max);
	uint64_t ra_far = linkest_readahead(&far, base, max);
	/* 50 MB/s x 10 ms x 2 = 1 MB; x 40 ms x 2 = 4 MB (a round trip is
	 * a little more: a read's own time on the link). */
	assert_true(ra_near >= 950000 && ra_near <= 1150000);
	assert_true(ra_far >= 3800000 && ra_far <= 4400000);
	assert_true(ra_far > 3 * ra_near);
	/* Bounded by MAX, never below BASE. */
	assert_int_equal(linkest_readahead(&far, base, 2 << 20), 2 << 20);
	assert_int_equal(linkest_readahead(&far, base, base / 2), base);
	assert_int_equal(linkest_readahead(&far, 8 << 20, max), 8 << 20);
	(void)max_window;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_estimate_keeps_the_floor),
		cmocka_unit_test(test_round_trip_is_the_recent_minimum),
		cmocka_unit_test(test_bandwidth_counts_busy_time_only),
		cmocka_unit_test(test_failed_writes_count_in_neither),
		cmocka_unit_test(
		    test_window_grows_to_the_bandwidth_delay_product),
		cmocka_unit_test(test_a_short_link_keeps_the_floor),
		cmocka_unit_test(test_window_keeps_within_its_bounds),
		cmocka_unit_test(test_large_writes_keep_a_floor_in_bytes),
		cmocka_unit_test(test_readahead_grows_with_the_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
