/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-stats.c - the request and writeback statistics: durations land in
 * the log-scale bucket whose bound covers them, quantiles are read back
 * from the buckets, each request is counted once by command with its bytes
 * and errors, READs are told apart as hits and misses, paced replies are
 * counted with their pause, and two threads' figures add up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "clock.h"
#include "nbd-proto.h"
#include "stats.h"

static void
test_buckets_are_powers_of_two_microseconds(void **state)
{
	assert_int_equal(stats_hist_index(0), 0);
	assert_int_equal(stats_hist_index(1), 0);
	assert_int_equal(stats_hist_index(1000), 0); /* <= 1 us */
	assert_int_equal(stats_hist_index(1001), 1); /* <= 2 us */
	assert_int_equal(stats_hist_index(2000), 1);
	assert_int_equal(stats_hist_index(2001), 2);     /* <= 4 us */
	assert_int_equal(stats_hist_index(1000000), 10); /* 1 ms <= 1024 us */
	assert_int_equal(stats_hist_index(1024000), 10);
	assert_int_equal(stats_hist_index(1024001), 11);
	assert_int_equal(stats_hist_index((1ull << 24) * 1000), 24);
	assert_int_equal(stats_hist_index((1ull << 24) * 1000 + 1),
	    STATS_HIST_FINITE);
	assert_int_equal(stats_hist_index(UINT64_MAX), STATS_HIST_FINITE);
	assert_true(stats_hist_bound_s(0) == 1e-6);
	assert_true(stats_hist_bound_s(24) == 16.777216);
}

static void
test_quantiles_interpolate_inside_a_bucket(void **state)
{
	struct stats_hist h = { 0 };

	assert_int_equal(stats_hist_quantile_ns(&h, 0.5), 0);
	/* 100 observations in (512 us, 1024 us]. */
	h.bucket[10] = 100;
	assert_int_equal(stats_hist_count(&h), 100);
	assert_int_equal(stats_hist_quantile_ns(&h, 0.5), 768000);
	assert_int_equal(stats_hist_quantile_ns(&h, 1.0), 1024000);
	/* And one very slow one: p99 stays in the first bucket, p100 not. */
	h.bucket[STATS_HIST_FINITE] = 1;
	assert_true(stats_hist_quantile_ns(&h, 0.99) <= 1024000);
	assert_int_equal(stats_hist_quantile_ns(&h, 1.0), (1ull << 24) * 1000);
}

static void
test_requests_counted_by_command(void **state)
{
	struct stats_io io = { NULL };
	struct stats_export_io *x = stats_io_export(&io, &io);
	struct stats_export_io sum = { 0 };
	uint64_t t = now_ns();

	assert_non_null(x);
	assert_ptr_equal(stats_io_export(&io, &io), x);
	stats_request_done(x, NBD_CMD_READ, 0, 4096, false, false, t, 0);
	stats_request_done(x, NBD_CMD_READ, 0, 512, false, true, t, 0);
	stats_request_done(x, NBD_CMD_READ, 0, 512, true, true, t, 0);
	stats_request_done(x, NBD_CMD_WRITE, 0, 8192, false, false, t, 0);
	stats_request_done(x, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 100, false, true,
	    t, 0);
	stats_request_done(x, NBD_CMD_FLUSH, 0, 0, false, true, t, 0);
	stats_request_done(x, NBD_CMD_TRIM, 0, 1 << 20, false, true, t, 0);
	/* Refused by validation: counted, not timed. */
	stats_request_done(x, 42, 0, 0, true, false, 0, 0);
	stats_request_done(NULL, NBD_CMD_READ, 0, 1, false, false, t, 0);

	stats_io_add(&io, &io, &sum);
	assert_int_equal(sum.requests[NBD_CMD_READ], 3);
	assert_int_equal(sum.errors[NBD_CMD_READ], 1);
	assert_int_equal(sum.requests[NBD_CMD_WRITE], 2);
	assert_int_equal(sum.requests[NBD_CMD_FLUSH], 1);
	assert_int_equal(sum.requests[NBD_CMD_TRIM], 1);
	assert_int_equal(sum.requests[STATS_CMD_OTHER], 1);
	assert_int_equal(sum.errors[STATS_CMD_OTHER], 1);
	assert_int_equal(sum.read_bytes, 4096 + 512);
	assert_int_equal(sum.written_bytes, 8192 + 100);
	assert_int_equal(stats_hist_count(&sum.lat[STATS_OP_READ_HIT]), 1);
	assert_int_equal(stats_hist_count(&sum.lat[STATS_OP_READ_MISS]), 2);
	assert_int_equal(stats_hist_count(&sum.lat[STATS_OP_WRITE]), 1);
	assert_int_equal(stats_hist_count(&sum.lat[STATS_OP_FUA]), 1);
	assert_int_equal(stats_hist_count(&sum.lat[STATS_OP_FLUSH]), 1);
	stats_io_free(&io);
}

static void
test_paced_replies_and_threads_add_up(void **state)
{
	struct stats_io a = { NULL }, b = { NULL };
	static const int key, other;
	struct stats_export_io *xa = stats_io_export(&a, &key);
	struct stats_export_io *xb = stats_io_export(&b, &key);
	struct stats_export_io sum = { 0 };

	assert_non_null(stats_io_export(&b, &other));
	uint64_t t = now_ns() - 5000000;
	uint64_t p = stats_pace_begin(xa, false) - 2000000;
	stats_request_done(xa, NBD_CMD_WRITE, 0, 4096, false, false, t, p);
	p = stats_pace_begin(xb, true);
	stats_request_done(xb, NBD_CMD_WRITE, 0, 4096, false, false, t, p);
	stats_pace_begin(xb, true); /* still held */
	stats_request_done(stats_io_export(&b, &other), NBD_CMD_WRITE, 0, 1,
	    false, false, t, 0);

	stats_io_add(&a, &key, &sum);
	stats_io_add(&b, &key, &sum);
	assert_int_equal(sum.requests[NBD_CMD_WRITE], 2);
	assert_int_equal(sum.written_bytes, 8192);
	assert_int_equal(sum.paced, 3);
	assert_int_equal(sum.held, 2);
	assert_int_equal(sum.paced_done, 2);
	assert_true(sum.pause_ns >= 2000000);
	/* Both writes took at least 5 ms. */
	assert_true(sum.lat[STATS_OP_WRITE].sum_ns >= 10000000);
	assert_int_equal(sum.lat[STATS_OP_WRITE].bucket[0], 0);
	stats_io_free(&a);
	stats_io_free(&b);
}

static void
test_writeback_runs_by_reason(void **state)
{
	struct stats_wb w = { 0 }, got;

	stats_wb_run_begin(&w);
	stats_wb_run_begin(&w);
	stats_wb_run_begin(&w);
	stats_wb_run_end(&w, 0, 65536, 3000000, true);
	stats_wb_run_end(&w, 2, 4096, 1000, true);
	stats_wb_get(&w, &got);
	assert_int_equal(got.in_flight, 1);
	stats_wb_run_end(&w, 2, 4096, 1000, false);
	stats_wb_get(&w, &got);
	assert_int_equal(got.bytes[0], 65536);
	assert_int_equal(got.bytes[2], 4096);
	assert_int_equal(got.runs[0], 1);
	assert_int_equal(got.runs[2], 1);
	assert_int_equal(got.failed_runs, 1);
	assert_int_equal(got.in_flight, 0);
	assert_int_equal(stats_hist_count(&got.run_time), 3);
	assert_int_equal(got.run_time.bucket[0], 2);
	assert_int_equal(got.run_time.sum_ns, 3002000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets_are_powers_of_two_microseconds),
		cmocka_unit_test(test_quantiles_interpolate_inside_a_bucket),
		cmocka_unit_test(test_requests_counted_by_command),
		cmocka_unit_test(test_paced_replies_and_threads_add_up),
		cmocka_unit_test(test_writeback_runs_by_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
