/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-writeback.c - threshold arithmetic (ratios and bytes resolved
 * against the cache, the writer-throttling curve), and the writeback code
 * itself driven over a real cache and a real device pool onto the fake
 * backend: what a FLUSH covers and when it flushes the device, FUA, the
 * window of writes in flight (one per device, shared by its jobs), group
 * commit of the device's flushes, errors, the back-off and the error
 * sequence.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "atomics.h"
#include "cache.h"
#include "clock.h"
#include "config-load.h"
#include "fake-backend.h"
#include "wbdev.h"
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

/* --- writeback over a fake backend ---------------------------------------- */

#define PS              4096u
#define DEV_BYTES       (1u << 20)              /* 256 pages */
#define CACHE_BYTES     (4u << 20)              /* 1024 pages */
#define WAIT_MS         10000u                  /* generous: never a pace */

struct wfx {
	struct wbd_config cfg;
	struct cache *cache;
	struct wb_ctl wb;
	struct wb_dev *dev;
	struct fake *fake;
	struct wb_target t;
};

/* A cache and a device as the daemon builds them (zero-copy runs, one
 * flush worker, the default ratios) over a fake with P's abilities. */
static int
wfx_setup(void **state, const struct fake_params *p)
{
	struct wfx *x = calloc(1, sizeof *x);
	struct cache_params cp = { .size_bytes = CACHE_BYTES, .page_size = PS,
	    .chunk_bytes = 1 << 20 };
	struct pool_params pp = { .min_workers = 1, .max_workers = 1,
	    .grow_delay_ms = 1000, .idle_timeout_ms = 1000 };

	assert_non_null(x);
	config_defaults(&x->cfg);
	x->cache = cache_new(&cp);
	assert_non_null(x->cache);
	cache_set_zero_copy(x->cache, true);
	wb_ctl_init(&x->wb, x->cache, &x->cfg);
	x->dev = wb_dev_new(makedev(250, 1), "250:1", &pp, NULL);
	assert_non_null(x->dev);
	x->dev->min_ratio = 0;
	x->dev->max_ratio = 100;
	x->fake = fake_new(p);
	x->t = (struct wb_target){ .name = "test", .backend = fake_backend(x->fake),
	    .dev = x->dev, .wb = &x->wb, .size_bytes = p->size_bytes,
	    .read_only = p->caps & BACKEND_READ_ONLY };
	x->t.cf = cache_file_new(x->cache, p->size_bytes);
	assert_non_null(x->t.cf);
	wb_target_init(&x->t);
	assert_int_equal(wb_dev_add_target(x->dev, &x->t), 0);
	*state = x;
	return 0;
}

static int
setup_one_step(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES };
	return wfx_setup(state, &p);
}

static int
setup_two_step(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES, .two_step = true };
	return wfx_setup(state, &p);
}

static int
setup_gather(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES, .pwritev = true };
	return wfx_setup(state, &p);
}

static int
setup_gather_stable_pages(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES, .pwritev = true,
	    .caps = BACKEND_STABLE_PAGES };
	return wfx_setup(state, &p);
}

/* A remote's settings as wbd.conf(5) has them by default, but 8 ranges
 * kept. */
#define UF_CAP 8
static int
setup_flush_before_read(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES,
		.caps = BACKEND_FLUSH_BEFORE_READ };
	int r = wfx_setup(state, &p);
	struct wfx *x = *state;

	x->t.backend->unflushed_max = UF_CAP;
	x->t.backend->commit_ms = 50;
	return r;
}

/* A remote that can flush, without multi-conn: what it answered is kept
 * until a flush, to be written again after a loss. */
static int
setup_redo_after_loss(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES,
		.caps = BACKEND_REDO_AFTER_LOSS };
	int r = wfx_setup(state, &p);
	struct wfx *x = *state;

	x->t.backend->unflushed_max = UF_CAP;
	x->t.backend->commit_ms = 0;
	return r;
}

/* A local file: a failed flush may lose what it did not cover; 2 ranges
 * kept, to see them merge. */
static int
setup_redo_after_failed_flush(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES,
		.caps = BACKEND_REDO_AFTER_FAILED_FLUSH };
	int r = wfx_setup(state, &p);
	struct wfx *x = *state;

	x->t.backend->unflushed_max = 2;
	return r;
}

/* A file whose reads flush first (as a remote's do), 3 ranges kept: a
 * full array joins neighbours. */
static int
setup_flush_before_read_joining(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES,
		.caps = BACKEND_FLUSH_BEFORE_READ |
		    BACKEND_REDO_AFTER_FAILED_FLUSH };
	int r = wfx_setup(state, &p);
	struct wfx *x = *state;

	x->t.backend->unflushed_max = 3;
	x->t.backend->commit_ms = 0;
	return r;
}

/* A remote whose window is 8 pages (remote.max_writeback_inflight_bytes)
 * and whose writes take two steps, on 4 MiB: room for 512 runs of one
 * page on each of two exports (even and odd pages). */
#define REMOTE_BYTES (4u << 20)
#define REMOTE_WINDOW 8u
static int
setup_remote(void **state)
{
	struct fake_params p = { .size_bytes = REMOTE_BYTES,
		.two_step = true,
		.caps = BACKEND_REMOTE };
	int r = wfx_setup(state, &p);
	struct wfx *x = *state;

	x->t.backend->max_inflight_bytes = REMOTE_WINDOW * PS;
	return r;
}

static int
setup_read_only(void **state)
{
	struct fake_params p = { .size_bytes = DEV_BYTES,
	    .caps = BACKEND_READ_ONLY };
	return wfx_setup(state, &p);
}

static int
wfx_teardown(void **state)
{
	struct wfx *x = *state;

	fake_release(x->fake);          /* nothing left held */
	fake_release_flushes(x->fake);
	wb_dev_free(x->dev);            /* runs what is queued, stops */
	wb_target_destroy(&x->t);
	cache_file_free(x->t.cf);
	cache_free(x->cache);
	fake_free(x->fake);
	config_free(&x->cfg);
	free(x);
	return 0;
}

/* Thresholds in pages (background 0: write everything back) and the
 * expiry, as wbctl tune would set them. */
static void
set_thresholds(struct wfx *x, uint64_t bg_pages, uint64_t limit_pages,
    unsigned expire_cs)
{
	struct writeback_conf wc = x->cfg.writeback;

	wc.dirty_background = (struct threshold){ .ratio_pct = 0,
	    .bytes = bg_pages * PS };
	wc.dirty = (struct threshold){ .ratio_pct = 0, .bytes = limit_pages * PS };
	wc.dirty_expire_centisecs = expire_cs;
	wb_ctl_update(&x->wb, &wc);
	assert_int_equal(x->wb.bg_pages, bg_pages);
	assert_int_equal(x->wb.limit_pages, limit_pages);
}

/* Write page INDEX in the cache, filled with BYTE, with sequence SEQ. */
static void
dirty_page(struct wfx *x, uint64_t index, uint8_t byte, uint64_t seq)
{
	uint8_t buf[PS];
	uint64_t fill;

	memset(buf, byte, sizeof buf);
	assert_int_equal(cache_write(x->t.cf, buf, index * PS, PS, seq, &fill),
	    CACHE_WRITE_OK);
}

/* N pages, one run each (every other page): page 2i holds byte i+1 and
 * has sequence i+1. */
static void
dirty_separate_pages(struct wfx *x, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		dirty_page(x, 2 * i, (uint8_t)(i + 1), i + 1);
}

static bool
device_page_is(struct wfx *x, uint64_t index, uint8_t byte)
{
	uint8_t buf[PS];

	fake_get_data(x->fake, index * PS, buf, sizeof buf);
	for (unsigned i = 0; i < PS; i++)
		if (buf[i] != byte)
			return false;
	return true;
}

static uint64_t
dirty_pages(struct wfx *x)
{
	uint64_t cached, dirty;

	cache_file_stats(x->t.cf, &cached, &dirty);
	return dirty;
}

static uint64_t
load64(_Atomic uint64_t *p)
{
	return load_acquire(p);
}

/* Every write in the log completed before the last operation, a flush,
 * was issued. */
static void
assert_flush_after_every_write(struct fake *f)
{
	size_t n = fake_n_ops(f);
	struct fake_op last, op;

	assert_true(n > 0);
	fake_op(f, n - 1, &last);
	assert_int_equal(last.type, FAKE_FLUSH);
	for (size_t i = 0; i + 1 < n; i++) {
		fake_op(f, i, &op);
		if (op.type == FAKE_PWRITE)
			assert_true(op.done_tick != 0 &&
			    op.done_tick < last.issued_tick);
	}
}

/* Wait for a queued flag of DEV's (bg_queued, periodic_queued) to drop:
 * the work it stands for has run. */
static void
wait_work_done(_Atomic int *queued)
{
	uint64_t until = now_ns() + WAIT_MS * 1000000ull;

	while (load_acquire(queued)) {
		if (now_ns() > until)
			fail_msg("writeback work did not finish");
		usleep(1000);
	}
}

/* wb_flush on a thread of its own (it blocks while writes are held);
 * DONE_TICK: when it was answered, on the fake's clock. */
struct flusher {
	pthread_t thread;
	struct wb_target *t;
	uint64_t max_seq;
	int r;
	uint64_t done_tick;
};

static void *
flusher_run(void *arg)
{
	struct flusher *fl = arg;

	fl->r = wb_flush(fl->t, fl->max_seq, WB_REASON_FLUSH);
	fl->done_tick = fake_tick(fake_of(fl->t->backend));
	return NULL;
}

static void
flusher_start(struct flusher *fl, struct wb_target *t, uint64_t max_seq)
{
	*fl = (struct flusher){ .t = t, .max_seq = max_seq, .r = 1 };
	assert_int_equal(pthread_create(&fl->thread, NULL, flusher_run, fl), 0);
}

static int
flusher_join(struct flusher *fl)
{
	pthread_join(fl->thread, NULL);
	return fl->r;
}

/* --- FLUSH ---------------------------------------------------------------- */

static void
test_flush_writes_back_every_page_dirtied_up_to_its_sequence(void **state)
{
	struct wfx *x = *state;

	dirty_separate_pages(x, 8);
	assert_int_equal(wb_flush(&x->t, 5, WB_REASON_FLUSH), 0);

	/* Sequences 1..5 are on the device and clean... */
	for (unsigned i = 0; i < 5; i++)
		assert_true(device_page_is(x, 2 * i, (uint8_t)(i + 1)));
	assert_int_equal(dirty_pages(x), 3);
	assert_int_equal(cache_min_dirty_seq(x->t.cf), 6);
	/* ...later ones are not: a FLUSH is not a sync. */
	for (unsigned i = 5; i < 8; i++)
		assert_true(device_page_is(x, 2 * i, 0));
	/* One device flush, after the writes. */
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 5);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, BACKEND_WRITE_FUA), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_flush_after_every_write(x->fake);
	assert_int_equal(load64(&x->t.written), 5);
	assert_int_equal(load64(&x->t.flushed_upto), 5);
}

static void
test_flush_with_nothing_new_written_skips_the_device_flush(void **state)
{
	struct wfx *x = *state;

	/* Nothing ever written: nothing to flush. */
	assert_int_equal(wb_flush(&x->t, UINT64_MAX, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_n_ops(x->fake), 0);

	dirty_separate_pages(x, 4);
	assert_int_equal(wb_flush(&x->t, 2, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	/* Covered already: no write, no flush. */
	fake_clear_log(x->fake);
	assert_int_equal(wb_flush(&x->t, 2, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_n_ops(x->fake), 0);
	assert_true(load64(&x->t.flushed_upto) == load64(&x->t.written));
	/* New writes back: flushed again. */
	assert_int_equal(wb_flush(&x->t, 4, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 2);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_flush_after_every_write(x->fake);
}

/* N separate pages dirtied and written back by background writeback. */
static void
background_writeback(struct wfx *x, unsigned n)
{
	set_thresholds(x, 0, 64, 3000);
	dirty_separate_pages(x, n);
	wb_kick_background(x->dev);
	wait_work_done(&x->dev->bg_queued);
	assert_int_equal(dirty_pages(x), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), n);
}

/* Background writeback looks at the threshold before it starts and then
 * between chunks (1/64 of this 1024-page cache: 16 pages), as the kernel's
 * flusher does, not after every run. */
static void
test_background_writes_a_chunk_then_looks_at_the_threshold(void **state)
{
	struct wfx *x = *state;

	set_thresholds(x, 10, 64, 3000);
	/* At the threshold: nothing to do. */
	dirty_separate_pages(x, 10);
	wb_kick_background(x->dev);
	wait_work_done(&x->dev->bg_queued);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 0);
	assert_int_equal(dirty_pages(x), 10);
	/* Ten over it: a whole chunk goes, oldest first, not just the ten
	 * that bring it back to the threshold; then it is below, and the
	 * worker stops. */
	for (unsigned i = 10; i < 20; i++)
		dirty_page(x, 2 * i, (uint8_t)(i + 1), i + 1);
	wb_kick_background(x->dev);
	wait_work_done(&x->dev->bg_queued);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 16);
	assert_int_equal(dirty_pages(x), 4);
	for (unsigned i = 0; i < 16; i++)
		assert_true(device_page_is(x, 2 * i, (uint8_t)(i + 1)));
	for (unsigned i = 16; i < 20; i++)
		assert_true(device_page_is(x, 2 * i, 0));
}

static void
test_flush_after_background_writeback_flushes_the_device(void **state)
{
	struct wfx *x = *state;

	/* Background writeback leaves the device unflushed... */
	background_writeback(x, 3);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	/* ...so a FLUSH with no page of its own left still flushes it. */
	assert_int_equal(wb_flush(&x->t, 3, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 3);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

static void
test_read_flushes_first_only_where_written_unflushed(void **state)
{
	struct wfx *x = *state;

	wb_count_written(&x->t, 0, PS);
	wb_count_written(&x->t, 4 * PS, PS);
	/* Next to both, inside neither: no flush. */
	wb_flush_before_read(&x->t, PS, 3 * PS);
	wb_flush_before_read(&x->t, 5 * PS, 8 * PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	/* One byte of one: a flush, covering both. */
	wb_flush_before_read(&x->t, 4 * PS + PS - 1, 2 * PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	wb_flush_before_read(&x->t, 0, 8 * PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(x->t.uf_n, 0);
}

static void
test_unflushed_ranges_merge_and_overflow(void **state)
{
	struct wfx *x = *state;

	/* Touching or overlapping: one range. */
	wb_count_written(&x->t, 0, PS);
	wb_count_written(&x->t, PS, PS);
	wb_count_written(&x->t, PS / 2, 2 * PS);
	assert_int_equal(x->t.uf_n, 1);
	assert_int_equal(x->t.uf[0].lo, 0);
	assert_int_equal(x->t.uf[0].hi, 5 * PS / 2);
	assert_int_equal(x->t.uf[0].written, 3);
	/* One more than are kept: every read flushes, until one has. */
	for (unsigned i = 1; i <= UF_CAP; i++)
		wb_count_written(&x->t, (2ull * i + 2) * PS, PS);
	assert_int_equal(wb_target_unflushed(&x->t), UF_CAP);
	assert_true(x->t.uf_lost != 0);
	assert_int_equal(x->dev->unflushed_overflows, 1);
	wb_count_written(&x->t, DEV_BYTES / 2, PS); /* one episode */
	assert_int_equal(x->dev->unflushed_overflows, 1);
	wb_flush_before_read(&x->t, DEV_BYTES - PS, PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(x->dev->read_flushes, 1);
	wb_flush_before_read(&x->t, DEV_BYTES - PS, PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(x->t.uf_lost, 0);
	assert_int_equal(x->t.uf_n, 0);
}

/* T's ranges in order of offset and apart (none touches the next). */
static void
assert_ranges_in_order(const struct wb_target *t)
{
	for (unsigned i = 0; i < t->uf_n; i++) {
		assert_true(t->uf[i].lo <= t->uf[i].hi);
		if (i > 0)
			assert_true(t->uf[i - 1].hi < t->uf[i].lo);
	}
}

static void
test_unflushed_ranges_stay_in_order_and_join_across_several(void **state)
{
	struct wfx *x = *state;
	static const unsigned pages[] = { 10, 2, 6, 14 };

	for (unsigned i = 0; i < 4; i++)
		wb_count_written(&x->t, pages[i] * PS, PS);
	assert_int_equal(x->t.uf_n, 4);
	assert_ranges_in_order(&x->t);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(x->t.uf[i].lo, (2 + 4 * i) * PS);
	/* Between pages 10 and 14, touching neither: no flush; on 14's
	 * last byte, one. */
	wb_flush_before_read(&x->t, 11 * PS, 3 * PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	/* Touching 2's end and 10's start, over 6: the three are one. */
	wb_count_written(&x->t, 3 * PS, 7 * PS);
	assert_int_equal(x->t.uf_n, 2);
	assert_ranges_in_order(&x->t);
	assert_int_equal(x->t.uf[0].lo, 2 * PS);
	assert_int_equal(x->t.uf[0].hi, 11 * PS);
	assert_int_equal(x->t.uf[0].written, 5);
	assert_int_equal(x->t.uf[1].lo, 14 * PS);
	assert_int_equal(x->t.uf[1].written, 4);
	wb_flush_before_read(&x->t, 15 * PS - 1, 1);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(wb_target_unflushed(&x->t), 0);
	/* Eight pages in a scrambled order (one next to another): as many
	 * ranges as runs of pages, in order, each covering its run. */
	bool seen[64] = { false };
	unsigned first = 64, last = 0;
	for (unsigned i = 0, pg = 7; i < UF_CAP;
	     i++, pg = (pg * 37 + 11) % 64) {
		seen[pg] = true;
		first = pg < first ? pg : first;
		last = pg > last ? pg : last;
		wb_count_written(&x->t, pg * PS, PS);
		assert_ranges_in_order(&x->t);
	}
	unsigned runs = 0;
	for (unsigned pg = 0; pg < 64; pg++)
		if (seen[pg] && (pg == 0 || !seen[pg - 1]))
			runs++;
	assert_int_equal(runs, UF_CAP - 1);
	assert_int_equal(wb_target_unflushed(&x->t), runs);
	assert_int_equal(x->t.uf_lost, 0);
	for (unsigned pg = 0; pg < 64; pg++) {
		bool in = false;
		for (unsigned i = 0; i < x->t.uf_n; i++)
			in |= x->t.uf[i].lo <= pg * PS &&
			    (pg + 1) * PS <= x->t.uf[i].hi;
		assert_true(in == seen[pg]);
	}
	/* One write from the first to the last: one range. */
	wb_count_written(&x->t, first * PS, (last - first + 1) * PS);
	assert_int_equal(x->t.uf_n, 1);
	assert_int_equal(x->t.uf[0].lo, first * PS);
	assert_int_equal(x->t.uf[0].hi, (last + 1) * PS);
}

/*
 * The ranges against a model: a page for each page of a small device,
 * set when a write is counted on it and cleared when a FLUSH covers it.
 * Thousands of writes of 1 to 4 pages and reads, in an order a
 * generator of its own gives (the same every run), with few ranges kept:
 * after each step the ranges are in order and apart, never more than
 * kept, and cover every page set unless ranges were given up (uf_lost);
 * a read of a set page always flushes first.  The ranges may cover more
 * than was written (a full array joins), never less.
 */
#define UFM_PAGES 96
static void
uf_against_the_model(struct wfx *x, uint32_t seed)
{
	bool set[UFM_PAGES] = { false };
	uint32_t g = seed;
	unsigned flushes = 0, needed = 0, joined_over = 0;

	for (unsigned step = 0; step < 4000; step++) {
		g = g * 1103515245u + 12345u;
		unsigned pg = (g >> 8) % UFM_PAGES;
		unsigned n = 1 + (g >> 20) % 4;
		if (pg + n > UFM_PAGES)
			n = UFM_PAGES - pg;
		if ((g >> 28) % 8 < 5) {
			wb_count_written(&x->t, (uint64_t)pg * PS,
			    (uint64_t)n * PS);
			for (unsigned k = pg; k < pg + n; k++)
				set[k] = true;
		} else {
			size_t before = fake_count(x->fake, FAKE_FLUSH, 0);
			bool need = false;
			for (unsigned k = pg; k < pg + n; k++)
				need |= set[k];
			wb_flush_before_read(&x->t, (uint64_t)pg * PS,
			    (uint64_t)n * PS);
			bool flushed =
			    fake_count(x->fake, FAKE_FLUSH, 0) > before;
			assert_true(flushed || !need);
			needed += need;
			joined_over += flushed && !need;
			if (flushed) {
				flushes++;
				memset(set, 0, sizeof set);
			}
		}
		assert_ranges_in_order(&x->t);
		assert_true(x->t.uf_n <= x->t.uf_cap);
		if (x->t.uf_lost)
			continue;
		for (unsigned k = 0; k < UFM_PAGES; k++) {
			bool in = false;
			for (unsigned i = 0; i < x->t.uf_n && !in; i++)
				in = x->t.uf[i].lo <= (uint64_t)k * PS &&
				    (uint64_t)(k + 1) * PS <= x->t.uf[i].hi;
			assert_true(in || !set[k]);
		}
	}
	/* The walk did what it is for: reads that had to flush, and
	 * (ranges joined or given up) some that flushed for nothing. */
	assert_true(flushes > 100 && needed > 100);
	assert_true(joined_over > 0);
}

/* Ranges given up when the array is full (a remote): a read flushes. */
static void
test_unflushed_ranges_hold_against_a_model_when_given_up(void **state)
{
	struct wfx *x = *state;

	x->t.backend->unflushed_max = 4;
	uf_against_the_model(x, 1);
	uf_against_the_model(x, 77);
}

/* Ranges joined when the array is full (a file): never given up. */
static void
test_unflushed_ranges_hold_against_a_model_when_joined(void **state)
{
	struct wfx *x = *state;

	uf_against_the_model(x, 5);
	assert_int_equal(x->t.uf_lost, 0);
	uf_against_the_model(x, 4242);
	assert_int_equal(x->t.uf_lost, 0);
}

/* A file's array full (2 ranges): a new range joins the nearer of its
 * two neighbours, and the two stay in order and apart. */
static void
test_a_full_file_array_joins_the_nearer_neighbour(void **state)
{
	struct wfx *x = *state;

	wb_count_written(&x->t, 10 * PS, PS);
	wb_count_written(&x->t, 30 * PS, PS);
	wb_count_written(&x->t, 28 * PS, PS); /* nearer the one above */
	assert_int_equal(x->t.uf_n, 2);
	assert_int_equal(x->t.uf[1].lo, 28 * PS);
	assert_int_equal(x->t.uf[1].hi, 31 * PS);
	wb_count_written(&x->t, 12 * PS, PS); /* nearer the one below */
	assert_int_equal(x->t.uf[0].lo, 10 * PS);
	assert_int_equal(x->t.uf[0].hi, 13 * PS);
	wb_count_written(&x->t, 0, PS);       /* below both */
	wb_count_written(&x->t, 40 * PS, PS); /* above both */
	assert_int_equal(x->t.uf_n, 2);
	assert_ranges_in_order(&x->t);
	assert_int_equal(x->t.uf[0].lo, 0);
	assert_int_equal(x->t.uf[0].hi, 13 * PS);
	assert_int_equal(x->t.uf[1].lo, 28 * PS);
	assert_int_equal(x->t.uf[1].hi, 41 * PS);
	assert_int_equal(x->t.uf_lost, 0);
}

/* The remote lost (a server restarted loses what no FLUSH covered). */
static void
lose_the_remote(struct wfx *x)
{
	atomic_fetch_add_explicit(&x->t.backend->losses, 1,
	    memory_order_acq_rel);
}

static void
test_flush_after_a_loss_writes_again_what_no_flush_covered(void **state)
{
	struct wfx *x = *state;
	uint64_t err = x->t.err_seq;

	background_writeback(x, 3); /* pages 0, 2, 4: written, clean */
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	lose_the_remote(x);
	/* The FLUSH writes the three again before it flushes. */
	assert_int_equal(wb_flush(&x->t, 3, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 6);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(x->dev->redo_pages, 3);
	assert_int_equal(dirty_pages(x), 0);
	assert_true(x->t.err_seq == err); /* nothing lost */
	for (unsigned i = 0; i < 3; i++)
		assert_true(device_page_is(x, 2 * i, (uint8_t)(i + 1)));
	/* Covered now: a second loss has nothing to write again. */
	lose_the_remote(x);
	assert_int_equal(wb_flush(&x->t, 3, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 6);
	assert_int_equal(x->dev->redo_pages, 3);
}

static void
test_a_loss_of_what_is_no_longer_cached_is_reported(void **state)
{
	struct wfx *x = *state;
	uint64_t err = x->t.err_seq;

	background_writeback(x, 2); /* pages 0 and 2 */
	/* Page 2 gone from the cache (as if evicted) before the loss. */
	cache_discard(x->t.cf, 2 * PS, PS, 10);
	lose_the_remote(x);
	assert_int_equal(wb_flush(&x->t, 10, WB_REASON_FLUSH), 0);
	/* Page 0 written again; page 2 cannot be: a writeback failure,
	 * which the export reports to each connection's next FLUSH. */
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 3);
	assert_int_equal(x->dev->redo_pages, 1);
	assert_true(x->t.err_seq != err);
	assert_int_equal(wb_target_last_err(&x->t), EIO);
}

static void
test_commit_after_a_loss_dirties_again_and_writes_nothing(void **state)
{
	struct wfx *x = *state;

	/* Commits on: a commit after a loss sends no FLUSH over what the
	 * remote may have lost; the pages are dirty again, and the next
	 * FLUSH writes them. */
	x->t.backend->commit_ms = 1;
	set_thresholds(x, 0, 64, 3000);
	dirty_separate_pages(x, 2);
	lose_the_remote(x);
	wb_kick_background(x->dev);
	wait_work_done(&x->dev->bg_queued);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	assert_int_equal(dirty_pages(x), 2);
	assert_int_equal(wb_flush(&x->t, 2, WB_REASON_FLUSH), 0);
	assert_int_equal(dirty_pages(x), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

static void
test_a_reload_resizes_the_unflushed_ranges(void **state)
{
	struct wfx *x = *state;

	for (unsigned i = 0; i < 6; i++)
		wb_count_written(&x->t, 2ull * i * PS, PS);
	/* Fewer kept: the rest are given up, so reads flush first... */
	x->t.backend->unflushed_max = 4;
	wb_count_written(&x->t, 100 * PS, PS);
	assert_int_equal(x->t.uf_cap, 4);
	assert_int_equal(wb_target_unflushed(&x->t), 4);
	assert_true(x->t.uf_lost != 0);
	assert_int_equal(x->dev->unflushed_overflows, 1);
	wb_flush_before_read(&x->t, 200 * PS, PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	/* ...until one has covered them; more kept again. */
	x->t.backend->unflushed_max = 16;
	for (unsigned i = 0; i < 10; i++)
		wb_count_written(&x->t, 2ull * i * PS, PS);
	assert_int_equal(wb_target_unflushed(&x->t), 10);
	assert_int_equal(x->t.uf_lost, 0);
	wb_flush_before_read(&x->t, 200 * PS, PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

static void
test_a_range_that_bridges_two_joins_them(void **state)
{
	struct wfx *x = *state;

	wb_count_written(&x->t, 0, PS);
	wb_count_written(&x->t, 2 * PS, PS);
	wb_count_written(&x->t, 8 * PS, PS);
	assert_int_equal(x->t.uf_n, 3);
	wb_count_written(&x->t, PS, PS);
	assert_int_equal(x->t.uf_n, 2);
	for (unsigned i = 0; i < x->t.uf_n; i++)
		if (x->t.uf[i].lo == 0)
			assert_int_equal(x->t.uf[i].hi, 3 * PS);
		else
			assert_int_equal(x->t.uf[i].lo, 8 * PS);
	assert_int_equal(x->dev->unflushed_overflows, 0);
}

static void
test_only_writeback_is_committed(void **state)
{
	struct wfx *x = *state;

	/* A TRIM's range (not writeback's): periodic work commits nothing;
	 * a read of it flushes. */
	wb_count_written(&x->t, 0, PS);
	wb_kick_periodic(x->dev);
	wait_work_done(&x->dev->periodic_queued);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	/* Writeback's runs: committed, by the job that wrote them or by
	 * periodic work after it, which runs with nothing to write. */
	background_writeback(x, 2);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(x->dev->commits, 1);
	wb_kick_periodic(x->dev);
	wait_work_done(&x->dev->periodic_queued);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(wb_target_unflushed(&x->t), 0);
}

static void
test_commit_interval_zero_never_commits(void **state)
{
	struct wfx *x = *state;

	x->t.backend->commit_ms = 0;
	background_writeback(x, 3);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	assert_int_equal(x->dev->commits, 0);
	/* So a miss in what was written flushes first. */
	wb_flush_before_read(&x->t, 0, PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(x->dev->read_flushes, 1);
}

static void
test_read_after_a_failed_flush_flushes_again(void **state)
{
	struct wfx *x = *state;

	wb_count_written(&x->t, 0, PS);
	fake_fail_flushes(x->fake, 1, EIO);
	wb_flush_before_read(&x->t, 0, PS); /* fails: the read goes on */
	assert_int_equal(x->t.uf_n, 1);
	assert_int_equal(wb_target_last_err(&x->t), EIO);
	wb_flush_before_read(&x->t, 0, PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 2);
	assert_true(load64(&x->t.flushed_upto) == load64(&x->t.written));
	wb_flush_before_read(&x->t, 0, PS); /* covered now */
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 2);
	assert_int_equal(x->t.uf_n, 0);
}

static void
test_background_writeback_commits_unflushed_ranges(void **state)
{
	struct wfx *x = *state;

	/* Written back, then flushed by the same job: a read needs none. */
	background_writeback(x, 3);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(x->dev->commits, 1);
	assert_flush_after_every_write(x->fake);
	wb_flush_before_read(&x->t, 0, 8 * PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

static void
test_read_without_the_capability_never_flushes(void **state)
{
	struct wfx *x = *state;

	wb_count_written(&x->t, 0, PS);
	wb_flush_before_read(&x->t, 0, PS);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	assert_int_equal(x->t.uf_n, 0);
	assert_int_equal(load64(&x->t.written), 1);
}

static void
test_flush_waits_for_writeback_of_its_pages_already_in_flight(void **state)
{
	struct wfx *x = *state;
	struct flusher fl;
	struct timespec soon;

	/* Background writeback holds page 0 in flight. */
	set_thresholds(x, 0, 64, 3000);
	dirty_page(x, 0, 0xaa, 1);
	fake_hold(x->fake);
	wb_kick_background(x->dev);
	assert_true(fake_wait_in_flight(x->fake, 1, WAIT_MS));
	/* A FLUSH of it cannot end while that write is in flight. */
	flusher_start(&fl, &x->t, 1);
	clock_gettime(CLOCK_REALTIME, &soon);
	soon.tv_nsec += 50 * 1000000;
	if (soon.tv_nsec >= 1000000000) {
		soon.tv_sec++;
		soon.tv_nsec -= 1000000000;
	}
	assert_int_equal(pthread_timedjoin_np(fl.thread, NULL, &soon),
	    ETIMEDOUT);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	fake_release(x->fake);
	assert_int_equal(flusher_join(&fl), 0);
	wait_work_done(&x->dev->bg_queued);
	assert_true(device_page_is(x, 0, 0xaa));
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 1);
	assert_flush_after_every_write(x->fake);
}

static void
test_flush_of_a_read_only_target_touches_nothing(void **state)
{
	struct wfx *x = *state;

	assert_int_equal(wb_flush(&x->t, UINT64_MAX, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_n_ops(x->fake), 0);
}

/* --- FUA ------------------------------------------------------------------ */

static void
test_fua_writes_only_its_range_with_fua(void **state)
{
	struct wfx *x = *state;
	struct fake_op op;

	dirty_page(x, 0, 0x11, 1);
	dirty_page(x, 2, 0x22, 2);
	dirty_page(x, 4, 0x33, 3);
	assert_int_equal(wb_write_range_fua(&x->t, 2 * PS, PS, 2), 0);

	assert_int_equal(fake_n_ops(x->fake), 1);
	fake_op(x->fake, 0, &op);
	assert_int_equal(op.type, FAKE_PWRITE);
	assert_int_equal(op.off, 2 * PS);
	assert_int_equal(op.count, PS);
	assert_int_equal(op.flags, BACKEND_WRITE_FUA);
	assert_true(device_page_is(x, 2, 0x22));
	/* The other pages stay dirty, and nothing was flushed. */
	assert_int_equal(dirty_pages(x), 2);
	assert_true(device_page_is(x, 0, 0));
	assert_true(device_page_is(x, 4, 0));
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	/* A FUA write needs no later flush. */
	assert_int_equal(load64(&x->t.written), 0);
}

static void
test_fua_does_not_flush_what_others_wrote(void **state)
{
	struct wfx *x = *state;

	/* Page 0 written back without FUA, not flushed. */
	set_thresholds(x, 0, 64, 0);
	dirty_page(x, 0, 0x11, 1);
	wb_kick_periodic(x->dev);
	wait_work_done(&x->dev->periodic_queued);
	assert_true(device_page_is(x, 0, 0x11));
	assert_int_equal(load64(&x->t.written), 1);
	/* A FUA write of page 2 makes page 2 durable, not page 0. */
	fake_clear_log(x->fake);
	dirty_page(x, 2, 0x22, 2);
	assert_int_equal(wb_write_range_fua(&x->t, 2 * PS, PS, 2), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, BACKEND_WRITE_FUA), 1);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
}

static void
test_fua_flushes_when_its_page_was_written_back_without_fua(void **state)
{
	struct wfx *x = *state;

	/* The FUA write's page went out through periodic writeback first. */
	set_thresholds(x, 0, 64, 0);
	dirty_page(x, 2, 0x22, 1);
	dirty_page(x, 3, 0x33, 1);
	wb_kick_periodic(x->dev);
	wait_work_done(&x->dev->periodic_queued);
	assert_int_equal(dirty_pages(x), 0);
	fake_clear_log(x->fake);
	/* Nothing left to write with FUA, so the device is flushed. */
	assert_int_equal(wb_write_range_fua(&x->t, 2 * PS, 2 * PS, 1), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

/* --- the window ----------------------------------------------------------- */

static void
test_flush_keeps_several_writes_in_flight_on_a_two_step_device(void **state)
{
	struct wfx *x = *state;

	dirty_separate_pages(x, 40);
	assert_int_equal(wb_flush(&x->t, 40, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 40);
	assert_in_range(fake_max_in_flight(x->fake), 2, 16);
	assert_int_equal(fake_in_flight(x->fake), 0);
	for (unsigned i = 0; i < 40; i++)
		assert_true(device_page_is(x, 2 * i, (uint8_t)(i + 1)));
	assert_int_equal(dirty_pages(x), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_flush_after_every_write(x->fake);
}

static void
test_background_keeps_several_writes_in_flight_on_a_two_step_device(
    void **state)
{
	struct wfx *x = *state;

	set_thresholds(x, 4, 64, 3000);
	dirty_separate_pages(x, 40);
	wb_kick_background(x->dev);
	wait_work_done(&x->dev->bg_queued);
	assert_true(dirty_pages(x) <= 4);
	assert_true(fake_count(x->fake, FAKE_PWRITE, 0) >= 36);
	assert_in_range(fake_max_in_flight(x->fake), 2, 16);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
}

static void
test_window_is_full_at_16_and_survives_out_of_order_completion(void **state)
{
	struct wfx *x = *state;
	struct flusher fl;

	dirty_separate_pages(x, 40);
	fake_hold(x->fake);
	flusher_start(&fl, &x->t, 40);
	/* Sixteen begun, none ended: the window is full, and no more. */
	assert_true(fake_wait_in_flight(x->fake, 16, WAIT_MS));
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 16);
	assert_int_equal(fake_in_flight(x->fake), 16);
	/* The device finishes them newest first. */
	fake_release_newest_first(x->fake);
	assert_int_equal(flusher_join(&fl), 0);
	assert_int_equal(fake_max_in_flight(x->fake), 16);
	for (unsigned i = 0; i < 40; i++)
		assert_true(device_page_is(x, 2 * i, (uint8_t)(i + 1)));
	assert_int_equal(dirty_pages(x), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_flush_after_every_write(x->fake);
}

static void
test_one_step_device_has_one_write_in_flight(void **state)
{
	struct wfx *x = *state;
	struct flusher fl;

	dirty_separate_pages(x, 40);
	fake_hold(x->fake);
	flusher_start(&fl, &x->t, 40);
	assert_true(fake_wait_in_flight(x->fake, 1, WAIT_MS));
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 1);
	fake_release(x->fake);
	assert_int_equal(flusher_join(&fl), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 40);
	assert_int_equal(fake_max_in_flight(x->fake), 1);
	assert_int_equal(dirty_pages(x), 0);
}

static void
test_zero_copy_runs_are_gathered_unless_pages_must_be_stable(void **state)
{
	struct wfx *x = *state;
	bool stable = fake_backend(x->fake)->caps & BACKEND_STABLE_PAGES;
	struct fake_op op;

	/* Three adjacent pages: one run. */
	dirty_page(x, 4, 0x44, 1);
	dirty_page(x, 5, 0x55, 1);
	dirty_page(x, 6, 0x66, 1);
	assert_int_equal(wb_flush(&x->t, 1, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 1);
	fake_op(x->fake, 0, &op);
	assert_int_equal(op.off, 4 * PS);
	assert_int_equal(op.count, 3 * PS);
	/* Pages the device may read while they change: the pages
	 * themselves; else a copy the cache cannot change. */
	assert_int_equal(op.vectored, !stable);
	assert_true(device_page_is(x, 4, 0x44));
	assert_true(device_page_is(x, 5, 0x55));
	assert_true(device_page_is(x, 6, 0x66));
}

/* --- errors and back-off -------------------------------------------------- */

static void
test_failed_write_keeps_pages_dirty_and_arms_the_backoff(void **state)
{
	struct wfx *x = *state;

	dirty_separate_pages(x, 3);
	fake_fail_writes(x->fake, 1, EIO);
	uint64_t before = now_ns();
	assert_int_equal(wb_flush(&x->t, 3, WB_REASON_FLUSH), -EIO);
	uint64_t after = now_ns();

	assert_int_equal(dirty_pages(x), 3);
	assert_int_equal(cache_min_dirty_seq(x->t.cf), 1);
	assert_true(device_page_is(x, 0, 0));
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	assert_int_equal(load64(&x->t.err_seq), 1);
	assert_int_equal(x->dev->errors, 1);
	assert_int_equal(x->dev->last_err, EIO);
	assert_int_equal(x->dev->backoff_ms, 100);
	assert_true(x->dev->backoff_until_ns >= before + 100000000ull);
	assert_true(x->dev->backoff_until_ns <= after + 100000000ull);
}

/* The back-off has passed: the test moves its deadline rather than wait. */
static void
backoff_passes(struct wfx *x)
{
	store_relaxed(&x->dev->backoff_until_ns, now_ns());
}

static void
test_backoff_doubles_up_to_1s_and_background_waits_it_out(void **state)
{
	struct wfx *x = *state;

	set_thresholds(x, 0, 64, 3000);
	dirty_page(x, 0, 0xaa, 1);
	fake_fail_writes_at(x->fake, 0, EIO);
	for (unsigned i = 0; i < 6; i++) {
		uint32_t want = 100u << i;
		assert_int_equal(wb_flush(&x->t, 1, WB_REASON_FLUSH), -EIO);
		assert_int_equal(x->dev->backoff_ms, want < 1000 ? want : 1000);
		backoff_passes(x);
	}
	assert_int_equal(x->dev->errors, 6);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 6);

	/* Failed again: background and periodic work leave the device
	 * alone meanwhile (the work ends well inside the second). */
	assert_int_equal(wb_flush(&x->t, 1, WB_REASON_FLUSH), -EIO);
	set_thresholds(x, 0, 64, 0);
	fake_heal(x->fake);
	wb_kick_background(x->dev);
	wait_work_done(&x->dev->bg_queued);
	wb_kick_periodic(x->dev);
	wait_work_done(&x->dev->periodic_queued);
	assert_true(now_ns() < x->dev->backoff_until_ns);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 7);
	assert_int_equal(dirty_pages(x), 1);

	/* Once it has passed, background writeback succeeds, which ends
	 * the back-off: both its length and its deadline. */
	backoff_passes(x);
	wb_kick_background(x->dev);
	wait_work_done(&x->dev->bg_queued);
	assert_int_equal(dirty_pages(x), 0);
	assert_true(device_page_is(x, 0, 0xaa));
	assert_int_equal(x->dev->backoff_ms, 0);
	assert_int_equal(x->dev->backoff_until_ns, 0);
	assert_int_equal(x->dev->errors, 7);
}

/* Writes that fail together in one outage count once: failures before
 * the back-off has passed do not double it. */
static void
test_failures_within_one_backoff_count_once(void **state)
{
	struct wfx *x = *state;

	dirty_separate_pages(x, 3);
	fake_fail_writes(x->fake, 100, EIO);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(wb_flush(&x->t, 3, WB_REASON_FLUSH), -EIO);
	assert_int_equal(x->dev->errors, 5);
	assert_int_equal(x->dev->backoff_ms, 100);
	backoff_passes(x);
	assert_int_equal(wb_flush(&x->t, 3, WB_REASON_FLUSH), -EIO);
	assert_int_equal(x->dev->backoff_ms, 200);
}

static void
test_flush_ignores_the_backoff_and_its_success_clears_it(void **state)
{
	struct wfx *x = *state;

	dirty_separate_pages(x, 2);
	fake_fail_writes(x->fake, 1, EIO);
	assert_int_equal(wb_flush(&x->t, 2, WB_REASON_FLUSH), -EIO);
	assert_int_equal(x->dev->backoff_ms, 100);
	/* Backing off, yet a FLUSH tries at once, and lands the data. */
	assert_int_equal(wb_flush(&x->t, 2, WB_REASON_FLUSH), 0);
	assert_true(device_page_is(x, 0, 1));
	assert_true(device_page_is(x, 2, 2));
	assert_int_equal(dirty_pages(x), 0);
	assert_int_equal(x->dev->backoff_ms, 0);
	/* The failure stays counted. */
	assert_int_equal(load64(&x->t.err_seq), 1);
	assert_int_equal(x->dev->errors, 1);
}

static void
test_failed_device_flush_is_an_error_and_is_retried(void **state)
{
	struct wfx *x = *state;

	dirty_separate_pages(x, 2);
	fake_fail_flushes(x->fake, 1, EIO);
	assert_true(wb_flush(&x->t, 2, WB_REASON_FLUSH) < 0);
	assert_int_equal(dirty_pages(x), 0);    /* written, not durable */
	assert_int_equal(load64(&x->t.err_seq), 1);
	assert_int_equal(wb_target_last_err(&x->t), EIO);
	/* Nothing new written, but the last flush failed: flush again. */
	fake_clear_log(x->fake);
	assert_int_equal(wb_flush(&x->t, 2, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

/* A file whose flush fails (fdatasync: the kernel marked what it could not
 * write clean): what was written since the last good flush is dirtied
 * again where the cache holds it and kept until a good flush covers it;
 * past the cap a new range joins the nearest rather than being given up. */
static void
test_failed_flush_of_a_file_dirties_again_what_it_may_have_lost(void **state)
{
	struct wfx *x = *state;

	dirty_page(x, 40, 9, 1);
	dirty_page(x, 2, 8, 1); /* cached, clean: never dirtied again */
	assert_int_equal(wb_flush(&x->t, 1, WB_REASON_FLUSH), 0);
	assert_int_equal(wb_target_unflushed(&x->t), 0);
	dirty_page(x, 0, 1, 2);
	dirty_page(x, 4, 2, 3);
	/* A third range: joins page 4's, the nearest (page 0's would take
	 * in page 2). */
	dirty_page(x, 20, 3, 4);
	fake_fail_flushes(x->fake, 1, EIO);
	assert_true(wb_flush(&x->t, 4, WB_REASON_FLUSH) < 0);
	assert_int_equal(wb_target_unflushed(&x->t), 2);
	assert_int_equal(dirty_pages(x), 3); /* 0, 4 and 20; not 2, 40 */
	assert_int_equal(x->dev->flush_redo_pages, 3);
	assert_int_equal(load64(&x->t.err_seq), 1);
	/* The device recovered: the next FLUSH writes them again, then
	 * flushes, and the ranges are gone. */
	fake_clear_log(x->fake);
	assert_int_equal(wb_flush(&x->t, 4, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 3);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(dirty_pages(x), 0);
	assert_int_equal(wb_target_unflushed(&x->t), 0);
	assert_true(device_page_is(x, 0, 1) && device_page_is(x, 4, 2) &&
	    device_page_is(x, 20, 3) && device_page_is(x, 40, 9) &&
	    device_page_is(x, 2, 8));
}

static void
test_err_seq_counts_every_failure_and_keeps_the_last_errno(void **state)
{
	struct wfx *x = *state;

	assert_int_equal(wb_target_last_err(&x->t), 0);
	dirty_separate_pages(x, 1);
	fake_fail_writes(x->fake, 1, EIO);
	assert_int_equal(wb_flush(&x->t, 1, WB_REASON_FLUSH), -EIO);
	assert_int_equal(load64(&x->t.err_seq), 1);
	assert_int_equal(wb_target_last_err(&x->t), EIO);
	fake_fail_writes(x->fake, 1, ENOSPC);
	assert_int_equal(wb_flush(&x->t, 1, WB_REASON_FLUSH), -EIO);
	assert_int_equal(load64(&x->t.err_seq), 2);
	assert_int_equal(wb_target_last_err(&x->t), ENOSPC);
	assert_int_equal(x->dev->errors, 2);
	/* Success leaves both where they are. */
	assert_int_equal(wb_flush(&x->t, 1, WB_REASON_FLUSH), 0);
	assert_int_equal(load64(&x->t.err_seq), 2);
	assert_int_equal(wb_target_last_err(&x->t), ENOSPC);
}

static void
test_failed_fua_write_keeps_its_pages_dirty(void **state)
{
	struct wfx *x = *state;

	dirty_page(x, 2, 0x22, 1);
	fake_fail_writes(x->fake, 1, EIO);
	assert_int_equal(wb_write_range_fua(&x->t, 2 * PS, PS, 1), -EIO);
	assert_int_equal(dirty_pages(x), 1);
	assert_int_equal(load64(&x->t.err_seq), 1);
	assert_int_equal(wb_write_range_fua(&x->t, 2 * PS, PS, 1), 0);
	assert_true(device_page_is(x, 2, 0x22));
	assert_int_equal(dirty_pages(x), 0);
}

static void
test_periodic_writes_expired_pages_only(void **state)
{
	struct wfx *x = *state;

	/* Young pages (expiry one hour) stay. */
	set_thresholds(x, 0, 64, 360000);
	dirty_separate_pages(x, 3);
	wb_kick_periodic(x->dev);
	wait_work_done(&x->dev->periodic_queued);
	assert_int_equal(fake_n_ops(x->fake), 0);
	/* Expired ones go, without a device flush. */
	set_thresholds(x, 0, 64, 0);
	wb_kick_periodic(x->dev);
	wait_work_done(&x->dev->periodic_queued);
	assert_int_equal(dirty_pages(x), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 3);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
}

/* --- one window per device ------------------------------------------------ */

/* A second export on X's device and backend (the odd pages of the fake),
 * with a cache file of its own. */
static void
second_target(struct wfx *x, struct wb_target *t2)
{
	*t2 = (struct wb_target){ .name = "second",
		.backend = x->t.backend,
		.dev = x->dev,
		.wb = &x->wb,
		.size_bytes = x->t.size_bytes };
	t2->cf = cache_file_new(x->cache, t2->size_bytes);
	assert_non_null(t2->cf);
	wb_target_init(t2);
	assert_int_equal(wb_dev_add_target(x->dev, t2), 0);
}

static void
second_target_free(struct wfx *x, struct wb_target *t2)
{
	wb_dev_remove_target(x->dev, t2);
	wb_target_destroy(t2);
	cache_file_free(t2->cf);
}

/* Page INDEX of T, filled with BYTE, sequence SEQ. */
static void
dirty_page_of(struct wb_target *t, uint64_t index, uint8_t byte, uint64_t seq)
{
	uint8_t buf[PS];
	uint64_t fill;

	memset(buf, byte, sizeof buf);
	assert_int_equal(cache_write(t->cf, buf, index * PS, PS, seq, &fill),
	    CACHE_WRITE_OK);
}

static void
test_two_jobs_on_one_device_share_its_window(void **state)
{
	struct wfx *x = *state;
	struct wb_target t2;
	struct flusher f1, f2;

	second_target(x, &t2);
	for (unsigned i = 0; i < 40; i++) {
		dirty_page_of(&x->t, 2 * i, 1, i + 1);
		dirty_page_of(&t2, 2 * i + 1, 2, i + 1);
	}
	fake_hold(x->fake);
	flusher_start(&f1, &x->t, 40);
	flusher_start(&f2, &t2, 40);
	/* The device's window holds 8 pages: both jobs together, not 8
	 * each.  Given time to begin more, they begin none. */
	assert_true(fake_wait_in_flight(x->fake, REMOTE_WINDOW, WAIT_MS));
	usleep(200 * 1000);
	assert_int_equal(fake_in_flight(x->fake), REMOTE_WINDOW);
	assert_int_equal(fake_in_flight_bytes(x->fake), REMOTE_WINDOW * PS);
	struct wb_dev_link l;
	wb_dev_link(x->dev, &l);
	assert_int_equal(l.inflight, REMOTE_WINDOW);
	assert_int_equal(l.inflight_bytes, REMOTE_WINDOW * PS);
	fake_release(x->fake);
	assert_int_equal(flusher_join(&f1), 0);
	assert_int_equal(flusher_join(&f2), 0);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 80);
	assert_true(fake_max_in_flight_bytes(x->fake) <= REMOTE_WINDOW * PS);
	assert_true(fake_max_in_flight(x->fake) <= REMOTE_WINDOW);
	wb_dev_link(x->dev, &l);
	assert_int_equal(l.inflight, 0);
	pthread_mutex_lock(&x->dev->est_lock);
	assert_int_equal(x->dev->sync_waiting, 0);
	assert_int_equal(x->dev->budget_waiters, 0);
	pthread_mutex_unlock(&x->dev->est_lock);
	for (unsigned i = 0; i < 40; i++) {
		assert_true(device_page_is(x, 2 * i, 1));
		assert_true(device_page_is(x, 2 * i + 1, 2));
	}
	second_target_free(x, &t2);
}

/* A backlog of background work on one export of a slow device, and a
 * FLUSH of a few pages on another: the FLUSH takes the device's window
 * first, and is answered long before the backlog is written. */
#define BACKLOG_PAGES 400u
static void
test_flush_is_not_starved_by_background_work(void **state)
{
	struct wfx *x = *state;
	struct wb_target t2;
	struct flusher fl;

	second_target(x, &t2);
	set_thresholds(x, 1, 1024, 3000);
	fake_set_latency_us(x->fake, 5000);
	for (unsigned i = 0; i < BACKLOG_PAGES; i++)
		dirty_page_of(&x->t, 2 * i, 1, i + 1);
	wb_kick_background(x->dev);
	/* The background job is writing, its window full. */
	assert_true(fake_wait_in_flight(x->fake, REMOTE_WINDOW, WAIT_MS));
	for (unsigned i = 0; i < 4; i++)
		dirty_page_of(&t2, 2 * i + 1, 2, BACKLOG_PAGES + 1 + i);
	flusher_start(&fl, &t2, BACKLOG_PAGES + 4);
	assert_int_equal(flusher_join(&fl), 0);
	/* The backlog takes 400 / 8 round trips of 5 ms at least; the FLUSH
	 * a few.  At most half of it was written by then. */
	size_t backlog_done = 0, n = fake_n_ops(x->fake);
	for (size_t i = 0; i < n; i++) {
		struct fake_op op;
		fake_op(x->fake, i, &op);
		if (op.type == FAKE_PWRITE && op.done_tick &&
		    (op.off / PS) % 2 == 0)
			backlog_done++;
	}
	assert_true(backlog_done < BACKLOG_PAGES / 2);
	for (unsigned i = 0; i < 4; i++)
		assert_true(device_page_is(x, 2 * i + 1, 2));
	wait_work_done(&x->dev->bg_queued);
	assert_true(fake_max_in_flight_bytes(x->fake) <= REMOTE_WINDOW * PS);
	second_target_free(x, &t2);
}

/* --- group commit ----------------------------------------------------------- */

/* Wait until N FLUSHes of T wait for the device flush in flight. */
static void
wait_gc_waiters(struct wb_target *t, unsigned n)
{
	uint64_t until = now_ns() + WAIT_MS * 1000000ull;

	for (;;) {
		pthread_mutex_lock(&t->gc_lock);
		unsigned w = t->gc_waiters;
		pthread_mutex_unlock(&t->gc_lock);
		if (w >= n)
			return;
		if (now_ns() > until)
			fail_msg("%u FLUSHes wait for the flush, not %u", w, n);
		usleep(1000);
	}
}

static void
wait_flushes_issued(struct fake *f, size_t n)
{
	uint64_t until = now_ns() + WAIT_MS * 1000000ull;

	while (fake_count(f, FAKE_FLUSH, 0) < n) {
		if (now_ns() > until)
			fail_msg("no flush was issued");
		usleep(1000);
	}
}

/*
 * What a FLUSH answered 0 promises, read in the fake's log: every page it
 * covers (page 2i has sequence i + 1, as dirty_separate_pages and
 * gc_start write them) was written, and a flush of the device that
 * succeeded was issued after the last of those writes had completed, and
 * ended before the FLUSH was answered.
 */
static void
assert_answered_durable(struct wfx *x, const struct flusher *fl)
{
	size_t n = fake_n_ops(x->fake);
	uint64_t last_write = 0;
	struct fake_op op;

	assert_int_equal(fl->r, 0);
	for (uint64_t i = 0; i < fl->max_seq; i++) {
		uint64_t off = 2 * i * PS, written = 0;
		for (size_t k = 0; k < n; k++) {
			fake_op(x->fake, k, &op);
			if (op.type == FAKE_PWRITE && op.done_tick &&
			    op.result == 0 && op.done_tick < fl->done_tick &&
			    op.off <= off && off < op.off + op.count &&
			    op.done_tick > written)
				written = op.done_tick;
		}
		if (!written)
			fail_msg("a FLUSH of sequences up to %llu was answered "
				 "before page %llu was written",
			    (unsigned long long)fl->max_seq,
			    (unsigned long long)(2 * i));
		if (written > last_write)
			last_write = written;
	}
	for (size_t k = 0; k < n; k++) {
		fake_op(x->fake, k, &op);
		if (op.type == FAKE_FLUSH && op.done_tick && op.result == 0 &&
		    op.issued_tick > last_write && op.done_tick < fl->done_tick)
			return;
	}
	fail_msg("a FLUSH of sequences up to %llu was answered 0 with no good "
		 "flush of the device issued after its writes",
	    (unsigned long long)fl->max_seq);
}

/* One FLUSH's device flush in flight (held), then three FLUSHes of
 * pages written since: FLUSHES[0..3], flushing sequences 1..4. */
static void
gc_start(struct wfx *x, struct flusher *fl)
{
	dirty_page(x, 0, 1, 1);
	fake_hold_flushes(x->fake);
	flusher_start(&fl[0], &x->t, 1);
	wait_flushes_issued(x->fake, 1);
	for (unsigned k = 1; k < 4; k++) {
		dirty_page(x, 2 * k, (uint8_t)(k + 1), k + 1);
		flusher_start(&fl[k], &x->t, k + 1);
	}
	/* Their pages are written; the flush in flight read `written`
	 * before, so cannot cover them: they wait for it to end. */
	wait_gc_waiters(&x->t, 3);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 4);
}

/* The flush in flight ends; one of the three sends the next (held), and
 * the other two wait for that one (gc_waiters counts only those waiting
 * for the flush in flight: not one woken by the first and not yet run,
 * which may yet find no flush in flight and send its own). */
static void
gc_second(struct wfx *x)
{
	fake_release_held_flushes(x->fake);
	wait_flushes_issued(x->fake, 2);
	wait_gc_waiters(&x->t, 2);
}

static void
test_flushes_arriving_while_one_is_in_flight_share_the_next(void **state)
{
	struct wfx *x = *state;
	struct flusher fl[4];

	gc_start(x, fl);
	gc_second(x);
	fake_release_flushes(x->fake);
	/* Each FLUSH answered after a good flush that covers it... */
	for (unsigned k = 0; k < 4; k++) {
		flusher_join(&fl[k]);
		assert_answered_durable(x, &fl[k]);
	}
	/* ...and four FLUSHes cost two flushes of the device: the one in
	 * flight, and one more for the three, which the two that did not
	 * send it shared. */
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 2);
	assert_int_equal(load64(&x->dev->flushes_shared), 2);
	assert_true(load64(&x->t.flushed_upto) >= load64(&x->t.written));
	assert_flush_after_every_write(x->fake);
	/* Nothing new: the next FLUSH sends nothing. */
	assert_int_equal(wb_flush(&x->t, 4, WB_REASON_FLUSH), 0);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 2);
}

static void
test_a_failed_shared_flush_fails_every_flush_it_covered(void **state)
{
	struct wfx *x = *state;
	struct flusher fl[4];

	gc_start(x, fl);
	/* The next flush issued (the shared one) fails. */
	fake_fail_flushes(x->fake, 1, EIO);
	gc_second(x);
	fake_release_flushes(x->fake);
	/* A FLUSH answered 0 was covered by a good flush, whatever came
	 * first.  Here the first was, by the flush that held; the three
	 * were covered by the one that failed: its sender and the two that
	 * shared it fail. */
	for (unsigned k = 0; k < 4; k++)
		if (flusher_join(&fl[k]) == 0)
			assert_answered_durable(x, &fl[k]);
	assert_int_equal(fl[0].r, 0);
	for (unsigned k = 1; k < 4; k++)
		assert_int_equal(fl[k].r, -EIO);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 2);
	assert_int_equal(load64(&x->dev->flushes_shared), 2);
	assert_true(load64(&x->t.flushed_upto) < load64(&x->t.written));
	assert_int_equal(wb_target_last_err(&x->t), EIO);
	/* The next FLUSH tries the device again, and it holds now. */
	struct flusher again;
	flusher_start(&again, &x->t, 4);
	assert_int_equal(flusher_join(&again), 0);
	assert_answered_durable(x, &again);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 3);
	assert_true(load64(&x->t.flushed_upto) >= load64(&x->t.written));
	for (unsigned k = 0; k < 4; k++)
		assert_true(device_page_is(x, 2 * k, (uint8_t)(k + 1)));
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
#define T(f, setup) cmocka_unit_test_setup_teardown(f, setup, wfx_teardown)
		T(test_flush_writes_back_every_page_dirtied_up_to_its_sequence,
		    setup_one_step),
		T(test_flush_with_nothing_new_written_skips_the_device_flush,
		    setup_one_step),
		T(test_flush_after_background_writeback_flushes_the_device,
		    setup_one_step),
		T(test_background_writes_a_chunk_then_looks_at_the_threshold,
		    setup_one_step),
		T(test_read_flushes_first_only_where_written_unflushed,
		    setup_flush_before_read),
		T(test_unflushed_ranges_merge_and_overflow,
		    setup_flush_before_read),
		T(test_unflushed_ranges_stay_in_order_and_join_across_several,
		    setup_flush_before_read),
		T(test_read_after_a_failed_flush_flushes_again,
		    setup_flush_before_read),
		T(test_a_reload_resizes_the_unflushed_ranges,
		    setup_flush_before_read),
		T(test_unflushed_ranges_hold_against_a_model_when_given_up,
		    setup_flush_before_read),
		T(test_unflushed_ranges_hold_against_a_model_when_joined,
		    setup_flush_before_read_joining),
		T(test_flush_after_a_loss_writes_again_what_no_flush_covered,
		    setup_redo_after_loss),
		T(test_a_loss_of_what_is_no_longer_cached_is_reported,
		    setup_redo_after_loss),
		T(test_commit_after_a_loss_dirties_again_and_writes_nothing,
		    setup_redo_after_loss),
		T(test_commit_interval_zero_never_commits,
		    setup_flush_before_read),
		T(test_a_range_that_bridges_two_joins_them,
		    setup_flush_before_read),
		T(test_only_writeback_is_committed, setup_flush_before_read),
		T(test_background_writeback_commits_unflushed_ranges,
		    setup_flush_before_read),
		T(test_read_without_the_capability_never_flushes,
		    setup_one_step),
		T(test_flush_waits_for_writeback_of_its_pages_already_in_flight,
		    setup_two_step),
		T(test_flush_of_a_read_only_target_touches_nothing,
		    setup_read_only),
		T(test_fua_writes_only_its_range_with_fua, setup_one_step),
		T(test_fua_does_not_flush_what_others_wrote, setup_one_step),
		T(test_fua_flushes_when_its_page_was_written_back_without_fua,
		    setup_one_step),
		T(test_flush_keeps_several_writes_in_flight_on_a_two_step_device,
		    setup_two_step),
		T(test_background_keeps_several_writes_in_flight_on_a_two_step_device,
		    setup_two_step),
		T(test_window_is_full_at_16_and_survives_out_of_order_completion,
		    setup_two_step),
		T(test_one_step_device_has_one_write_in_flight, setup_one_step),
		T(test_zero_copy_runs_are_gathered_unless_pages_must_be_stable,
		    setup_gather),
		T(test_zero_copy_runs_are_gathered_unless_pages_must_be_stable,
		    setup_gather_stable_pages),
		T(test_failed_write_keeps_pages_dirty_and_arms_the_backoff,
		    setup_one_step),
		T(test_failures_within_one_backoff_count_once, setup_one_step),
		T(test_backoff_doubles_up_to_1s_and_background_waits_it_out,
		    setup_one_step),
		T(test_flush_ignores_the_backoff_and_its_success_clears_it,
		    setup_one_step),
		T(test_failed_device_flush_is_an_error_and_is_retried,
		    setup_one_step),
		T(test_failed_flush_of_a_file_dirties_again_what_it_may_have_lost,
		    setup_redo_after_failed_flush),
		T(test_a_full_file_array_joins_the_nearer_neighbour,
		    setup_redo_after_failed_flush),
		T(test_err_seq_counts_every_failure_and_keeps_the_last_errno,
		    setup_one_step),
		T(test_failed_fua_write_keeps_its_pages_dirty, setup_two_step),
		T(test_periodic_writes_expired_pages_only, setup_one_step),
		T(test_two_jobs_on_one_device_share_its_window, setup_remote),
		T(test_flush_is_not_starved_by_background_work, setup_remote),
		T(test_flushes_arriving_while_one_is_in_flight_share_the_next,
		    setup_one_step),
		T(test_a_failed_shared_flush_fails_every_flush_it_covered,
		    setup_one_step),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
