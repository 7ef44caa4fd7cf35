/*
 * test-writeback.c - threshold arithmetic: ratios and bytes resolved
 * against the cache, and the writer-throttling curve.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cache.h"
#include "config.h"
#include "writeback.h"

static struct cache *
cache_of(uint64_t bytes)
{
	struct cache_params p = { .size_bytes = bytes, .page_size = 4096,
	    .chunk_bytes = 1 << 20 };
	struct cache *c = cache_new(&p);
	assert_non_null(c);
	return c;
}

static void
test_ratios_of_cache_size(void **state)
{
	struct wbd_config cfg;
	struct wb_ctl wb;
	struct cache *c = cache_of(100 << 20);     /* 25600 pages */

	config_defaults(&cfg);                     /* 10 % and 20 % */
	wb_ctl_init(&wb, c, &cfg);
	assert_int_equal(wb.total_pages, 25600);
	assert_int_equal(wb.bg_pages, 2560);
	assert_int_equal(wb.limit_pages, 5120);
	assert_true(wb.expire_ns == 30ull * 1000000000ull);
	assert_int_equal(wb.max_run_pages, 256);   /* 1M of 4K pages */
	config_free(&cfg);
	cache_free(c);
}

static void
test_bytes_win_over_ratios(void **state)
{
	struct wbd_config cfg;
	struct wb_ctl wb;
	struct cache *c = cache_of(64 << 20);

	config_defaults(&cfg);
	cfg.writeback.dirty_background.bytes = (4 << 20) + 1;  /* rounds up */
	cfg.writeback.dirty.bytes = 16 << 20;
	wb_ctl_init(&wb, c, &cfg);
	assert_int_equal(wb.bg_pages, 1025);
	assert_int_equal(wb.limit_pages, 4096);
	config_free(&cfg);
	cache_free(c);
}

static void
test_limits_clamped(void **state)
{
	struct wbd_config cfg;
	struct wb_ctl wb;
	struct cache *c = cache_of(1 << 20);      /* 256 pages */

	config_defaults(&cfg);
	cfg.writeback.dirty.bytes = 1ull << 40;   /* more than the cache */
	cfg.writeback.dirty_background.bytes = 1ull << 40;
	wb_ctl_init(&wb, c, &cfg);
	assert_int_equal(wb.limit_pages, 256);
	assert_true(wb.bg_pages < wb.limit_pages);
	config_free(&cfg);
	cache_free(c);
}

static void
test_throttle_curve(void **state)
{
	struct wb_ctl wb = { .bg_pages = 1000, .limit_pages = 2000 };

	/* No pause up to the midpoint between background and limit. */
	assert_int_equal(wb_throttle_pause_ms(&wb, 0), 0);
	assert_int_equal(wb_throttle_pause_ms(&wb, 1000), 0);
	assert_int_equal(wb_throttle_pause_ms(&wb, 1500), 0);
	/* Then a pause that only grows, smoothly, up to 200 ms. */
	int prev = 0;
	for (uint64_t d = 1501; d < 2000; d++) {
		int ms = wb_throttle_pause_ms(&wb, d);
		assert_true(ms >= 1 && ms <= 200);
		assert_true(ms >= prev);
		assert_true(ms - prev <= 2);      /* no jumps: not stop-and-go */
		prev = ms;
	}
	assert_true(prev >= 190);
	/* At and above the limit the writer is held. */
	assert_int_equal(wb_throttle_pause_ms(&wb, 2000), -1);
	assert_int_equal(wb_throttle_pause_ms(&wb, 5000), -1);
}

static void
test_device_share(void **state)
{
	struct wb_ctl wb = { .bg_pages = 1000, .limit_pages = 2000 };

	/* max_ratio 100: the global curve alone. */
	assert_int_equal(wb_throttle_dev_ms(&wb, 1200, 1200, 0, 100), 0);
	assert_int_equal(wb_throttle_dev_ms(&wb, 1900, 1900, 0, 100),
	    wb_throttle_pause_ms(&wb, 1900));
	/* max_ratio 25 (500 pages): paced above 250, held at 500, even
	 * with the global count low. */
	assert_int_equal(wb_throttle_dev_ms(&wb, 600, 200, 0, 25), 0);
	assert_true(wb_throttle_dev_ms(&wb, 600, 400, 0, 25) > 0);
	assert_int_equal(wb_throttle_dev_ms(&wb, 600, 500, 0, 25), -1);
	/* A writer to another device is not held by that device's share. */
	assert_int_equal(wb_throttle_dev_ms(&wb, 600, 100, 0, 100), 0);
	/* min_ratio 50 (1000 pages): no pacing within it, below the limit... */
	assert_int_equal(wb_throttle_dev_ms(&wb, 1900, 900, 50, 100), 0);
	/* ...but the hard limit binds everyone. */
	assert_int_equal(wb_throttle_dev_ms(&wb, 2000, 900, 50, 100), -1);
}

static void
test_reason_names(void **state)
{
	assert_string_equal(wb_reason_name(WB_REASON_BACKGROUND), "background");
	assert_string_equal(wb_reason_name(WB_REASON_PERIODIC), "periodic");
	assert_string_equal(wb_reason_name(WB_REASON_FLUSH), "flush");
	assert_string_equal(wb_reason_name(WB_REASON_FUA), "fua");
	assert_string_equal(wb_reason_name(WB_REASON_SHUTDOWN), "shutdown");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ratios_of_cache_size),
		cmocka_unit_test(test_bytes_win_over_ratios),
		cmocka_unit_test(test_limits_clamped),
		cmocka_unit_test(test_throttle_curve),
		cmocka_unit_test(test_device_share),
		cmocka_unit_test(test_reason_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
