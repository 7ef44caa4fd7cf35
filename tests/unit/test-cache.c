/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-cache.c - page states, dirty accounting, coalescing, the flush
 * sequence rule, fills and scan resistance of the page cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cache.h"

#define PS 4096u
#define CHUNK (16 * PS)

struct fx {
	struct cache *c;
	struct cache_file *f;
	uint8_t page[PS];
};

static int
setup_n(void **state, uint64_t pages, uint64_t file_bytes)
{
	struct fx *x = calloc(1, sizeof *x);
	struct cache_params p = { .size_bytes = pages * PS, .page_size = PS,
	    .chunk_bytes = CHUNK };
	x->c = cache_new(&p);
	assert_non_null(x->c);
	x->f = cache_file_new(x->c, file_bytes);
	assert_non_null(x->f);
	*state = x;
	return 0;
}

static int
setup(void **state)
{
	return setup_n(state, 64, 1 << 20);
}

static int
teardown(void **state)
{
	struct fx *x = *state;
	cache_file_free(x->f);
	cache_free(x->c);
	free(x);
	return 0;
}

static uint64_t
dirty(struct fx *x)
{
	uint64_t cached, d;
	cache_file_stats(x->f, &cached, &d);
	return d;
}

static void
write_ok(struct fx *x, uint64_t off, uint32_t len, uint8_t v, uint64_t seq)
{
	uint8_t *b = malloc(len);
	uint64_t fill;
	memset(b, v, len);
	assert_int_equal(cache_write(x->f, b, off, len, seq, &fill),
	    CACHE_WRITE_OK);
	free(b);
}

static void
test_full_page_write_reads_back(void **state)
{
	struct fx *x = *state;
	uint8_t buf[2 * PS];

	assert_false(cache_read(x->f, buf, 0, PS));
	write_ok(x, PS, 2 * PS, 0xab, 1);
	assert_true(cache_read(x->f, buf, PS, 2 * PS));
	for (size_t i = 0; i < sizeof buf; i++)
		assert_int_equal(buf[i], 0xab);
	assert_int_equal(dirty(x), 2);
}

static void
test_partial_write_needs_fill(void **state)
{
	struct fx *x = *state;
	uint8_t b[100], buf[PS];
	uint64_t fill = 0;

	memset(b, 0x11, sizeof b);
	/* 100 bytes at 513 of page 3: the rest of the page must come first. */
	assert_int_equal(cache_write(x->f, b, 3 * PS + 513, sizeof b, 1, &fill),
	    CACHE_WRITE_NEED_FILL);
	assert_int_equal(fill, 3);
	assert_int_equal(dirty(x), 0);

	memset(x->page, 0x77, PS);      /* "the backend's data" */
	assert_int_equal(cache_fill(x->f, 3, x->page), 0);
	assert_int_equal(cache_write(x->f, b, 3 * PS + 513, sizeof b, 1, &fill),
	    CACHE_WRITE_OK);
	assert_true(cache_read(x->f, buf, 3 * PS, PS));
	for (size_t i = 0; i < PS; i++)
		assert_int_equal(buf[i], (i >= 513 && i < 613) ? 0x11 : 0x77);
}

static void
test_write_spanning_pages_fills_both_ends(void **state)
{
	struct fx *x = *state;
	uint64_t fill;
	uint8_t *b = calloc(1, 3 * PS);

	/* From the middle of page 1 to the middle of page 4. */
	assert_int_equal(cache_write(x->f, b, PS + 10, 3 * PS, 1, &fill),
	    CACHE_WRITE_NEED_FILL);
	assert_int_equal(fill, 1);
	cache_fill(x->f, 1, x->page);
	assert_int_equal(cache_write(x->f, b, PS + 10, 3 * PS, 1, &fill),
	    CACHE_WRITE_NEED_FILL);
	assert_int_equal(fill, 4);
	cache_fill(x->f, 4, x->page);
	assert_int_equal(cache_write(x->f, b, PS + 10, 3 * PS, 1, &fill),
	    CACHE_WRITE_OK);
	assert_int_equal(dirty(x), 4);
	free(b);
}

static void
test_tail_page_of_short_export(void **state)
{
	struct fx *x = *state;
	cache_file_free(x->f);
	x->f = cache_file_new(x->c, 2 * PS + 1000);     /* last page: 1000 bytes */
	uint8_t b[1000];
	uint64_t fill;

	memset(b, 1, sizeof b);
	/* Writing to the export's end covers the page. */
	assert_int_equal(cache_write(x->f, b, 2 * PS, 1000, 1, &fill),
	    CACHE_WRITE_OK);
	cache_file_free(x->f);
	x->f = cache_file_new(x->c, 2 * PS + 1000);
	/* Not reaching the end does not. */
	assert_int_equal(cache_write(x->f, b, 2 * PS, 999, 1, &fill),
	    CACHE_WRITE_NEED_FILL);
}

static void
test_fill_never_overwrites_resident_data(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];

	write_ok(x, 0, PS, 0x42, 1);
	memset(x->page, 0, PS);
	assert_int_equal(cache_fill(x->f, 0, x->page), 0);
	assert_true(cache_read(x->f, buf, 0, PS));
	assert_int_equal(buf[0], 0x42);
	assert_int_equal(dirty(x), 1);
}

static void
test_dirty_accounting(void **state)
{
	struct fx *x = *state;
	struct cache_stats st;

	write_ok(x, 0, 4 * PS, 1, 1);
	write_ok(x, 0, 4 * PS, 2, 2);   /* rewrite: no double count */
	assert_int_equal(dirty(x), 4);
	cache_get_stats(x->c, &st);
	assert_int_equal(st.dirty_pages, 4);
	assert_int_equal(st.writeback_pages, 0);

	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r);
	assert_int_equal(r->npages, 4);
	assert_int_equal(dirty(x), 0);
	cache_get_stats(x->c, &st);
	assert_int_equal(st.writeback_pages, 4);
	cache_end_run(r, true);
	cache_get_stats(x->c, &st);
	assert_int_equal(st.dirty_pages, 0);
	assert_int_equal(st.writeback_pages, 0);
	assert_true(cache_min_dirty_seq(x->f) == UINT64_MAX);
}

static void
test_first_dirty_seq_is_kept(void **state)
{
	struct fx *x = *state;

	write_ok(x, 0, PS, 1, 5);
	write_ok(x, 0, PS, 2, 9);
	assert_true(cache_min_dirty_seq(x->f) > 1);
}

static void
test_coalescing_in_offset_order(void **state)
{
	struct fx *x = *state;

	/* Dirty 6, then 5, 7 and 9 (8 stays clean). */
	write_ok(x, 6 * PS, PS, 6, 1);
	write_ok(x, 5 * PS, PS, 5, 2);
	write_ok(x, 7 * PS, PS, 7, 3);
	write_ok(x, 9 * PS, PS, 9, 4);

	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r);
	assert_int_equal(r->first_index, 5);
	assert_int_equal(r->npages, 3);
	assert_true(r->min_seq == 1);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(((uint8_t *)r->data)[i * PS], 5 + i);
	struct cache_run *r2 = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r2);
	assert_int_equal(r2->first_index, 9);
	assert_int_equal(r2->npages, 1);
	assert_null(cache_take_run(x->f, UINT64_MAX, 256));
	cache_end_run(r, true);
	cache_end_run(r2, true);
}

static void
test_coalescing_cap_and_chunk(void **state)
{
	struct fx *x = *state;

	/* Pages 14..17 dirty: 16 starts a new chunk (CHUNK = 16 pages). */
	write_ok(x, 14 * PS, 4 * PS, 1, 1);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_int_equal(r->first_index, 14);
	assert_int_equal(r->npages, 2);
	cache_end_run(r, true);
	r = cache_take_run(x->f, UINT64_MAX, 1);        /* cap of one page */
	assert_int_equal(r->first_index, 16);
	assert_int_equal(r->npages, 1);
	cache_end_run(r, true);
	r = cache_take_run(x->f, UINT64_MAX, 1);
	assert_int_equal(r->first_index, 17);
	cache_end_run(r, true);
}

static void
test_flush_sequence_limit(void **state)
{
	struct fx *x = *state;

	write_ok(x, 0, PS, 1, 1);
	write_ok(x, 8 * PS, PS, 1, 10);
	/* A flush at seq 5 takes page 0 only. */
	struct cache_run *r = cache_take_run(x->f, 5, 256);
	assert_non_null(r);
	assert_int_equal(r->first_index, 0);
	assert_null(cache_take_run(x->f, 5, 256));
	assert_true(cache_min_dirty_seq(x->f) == 1);    /* still in flight */
	cache_end_run(r, true);
	assert_true(cache_min_dirty_seq(x->f) == 10);   /* > 5: flush done */
}

/* A sync takes every run up to its sequence, in batches, whatever the
 * shards' order; nothing newer. */
static void
test_take_runs_up_to_a_sequence(void **state)
{
	struct fx *x = *state;
	struct cache_run *runs[8];

	/* Four chunks (shards), the later ones written first, and a page
	 * newer than the sync. */
	write_ok(x, 3 * CHUNK, PS, 1, 1);
	write_ok(x, 2 * CHUNK, PS, 1, 2);
	write_ok(x, 1 * CHUNK, PS, 1, 3);
	write_ok(x, 0, PS, 1, 4);
	write_ok(x, 4 * CHUNK, PS, 1, 9);
	/* At most N. */
	assert_int_equal(cache_take_runs(x->f, 5, 256, runs, 3), 3);
	assert_int_equal(cache_take_runs(x->f, 5, 256, runs + 3, 8), 1);
	assert_int_equal(cache_take_runs(x->f, 5, 256, runs + 4, 4), 0);
	uint64_t seen = 0;
	for (int i = 0; i < 4; i++) {
		assert_true(runs[i]->min_seq <= 5);
		seen |= 1u << (runs[i]->first_index * PS / CHUNK);
		cache_end_run(runs[i], true);
	}
	assert_int_equal(seen, 0xf);
	assert_int_equal(dirty(x), 1);
	assert_true(cache_min_dirty_seq(x->f) == 9);
}

/* One run at a time: the oldest across the shards, as heads come and go
 * (a failed run puts its pages back as old as they were). */
static void
test_take_run_oldest_across_shards(void **state)
{
	struct fx *x = *state;

	write_ok(x, 3 * CHUNK, PS, 1, 1);
	write_ok(x, 1 * CHUNK, PS, 1, 2);
	write_ok(x, 2 * CHUNK, PS, 1, 3);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_int_equal(r->first_index, 3 * CHUNK / PS);
	cache_end_run(r, false); /* back, still the oldest */
	r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_int_equal(r->first_index, 3 * CHUNK / PS);
	cache_end_run(r, true);
	write_ok(x, 0, PS, 1, 4); /* a head in an empty shard */
	r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_int_equal(r->first_index, 1 * CHUNK / PS);
	cache_end_run(r, true);
	r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_int_equal(r->first_index, 2 * CHUNK / PS);
	cache_end_run(r, true);
	/* Periodic writeback: none dirtied before the epoch. */
	assert_null(cache_take_expired_run(x->f, 0, 256));
	r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_int_equal(r->first_index, 0);
	cache_end_run(r, true);
	assert_null(cache_take_run(x->f, UINT64_MAX, 256));
	assert_int_equal(dirty(x), 0);
}

static void
test_redirty_during_writeback(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];

	write_ok(x, 0, PS, 0xaa, 1);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	write_ok(x, 0, PS, 0xbb, 7);    /* while the snapshot is written */
	assert_int_equal(((uint8_t *)r->data)[0], 0xaa);
	cache_end_run(r, true);
	/* Still dirty, with the new data and the new sequence. */
	assert_int_equal(dirty(x), 1);
	assert_true(cache_min_dirty_seq(x->f) == 7);
	assert_true(cache_read(x->f, buf, 0, PS));
	assert_int_equal(buf[0], 0xbb);
}

/*
 * A page written again while its run is in flight is dirty, but no second
 * run may take it before the first ends: two runs of one page in flight at
 * once could land in either order (and the first to end would unpin a page
 * the second still points at).
 */
static void
test_redirtied_page_not_taken_twice(void **state)
{
	struct fx *x = *state;

	write_ok(x, 0, 2 * PS, 0xaa, 1);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 1);
	assert_non_null(r);
	assert_int_equal(r->first_index, 0);
	write_ok(x, 0, PS, 0xbb, 7);
	/* Only page 1 is takeable now. */
	struct cache_run *r2 = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r2);
	assert_int_equal(r2->first_index, 1);
	assert_int_equal(r2->npages, 1);
	assert_null(cache_take_run(x->f, UINT64_MAX, 256));
	/* The FLUSH rule still sees page 0's old sequence in flight. */
	assert_true(cache_min_dirty_seq(x->f) == 1);
	cache_end_run(r2, true);
	cache_end_run(r, true);
	/* Now page 0 is dirty with the new data, and takeable. */
	assert_int_equal(dirty(x), 1);
	assert_true(cache_min_dirty_seq(x->f) == 7);
	r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r);
	assert_int_equal(r->first_index, 0);
	assert_int_equal(((uint8_t *)r->data)[0], 0xbb);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 0);
	assert_true(cache_min_dirty_seq(x->f) == UINT64_MAX);
}

/* Re-dirtied during a run that fails: dirty with the older sequence. */
static void
test_redirtied_page_failed_run(void **state)
{
	struct fx *x = *state;

	write_ok(x, 0, PS, 0xaa, 2);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	write_ok(x, 0, PS, 0xbb, 9);
	assert_null(cache_take_run(x->f, UINT64_MAX, 256));
	cache_end_run(r, false);
	assert_int_equal(dirty(x), 1);
	assert_true(cache_min_dirty_seq(x->f) == 2);
	r = cache_take_run(x->f, 2, 256);
	assert_non_null(r);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 0);
}

/* FUA takes the dirty pages of its range only, and says what it passed. */
static void
test_range_run(void **state)
{
	struct fx *x = *state;
	unsigned seen = 0;
	uint64_t next = 2;

	write_ok(x, 0, 8 * PS, 0x11, 1);                /* pages 0..7 dirty */
	struct cache_run *busy = cache_take_run(x->f, UINT64_MAX, 1); /* 0 */
	struct cache_run *r = cache_take_range_run(x->f, &next, 6, 256, &seen);
	assert_non_null(r);
	assert_int_equal(r->first_index, 2);            /* not 1, not 0 */
	assert_int_equal(r->npages, 4);                 /* not 6, 7 */
	assert_int_equal(next, 6);
	assert_int_equal(seen, 0);
	cache_end_run(r, true);
	assert_null(cache_take_range_run(x->f, &next, 6, 256, &seen));
	assert_int_equal(dirty(x), 3);                  /* 1, 6, 7 */

	/* Clean pages (2..5 now) and a page under writeback (0) are seen. */
	next = 0;
	r = cache_take_range_run(x->f, &next, 3, 256, &seen);
	assert_non_null(r);
	assert_int_equal(r->first_index, 1);
	assert_int_equal(r->npages, 1);
	assert_int_equal(seen, CACHE_RANGE_BUSY);
	cache_end_run(r, true);
	assert_null(cache_take_range_run(x->f, &next, 3, 256, &seen));
	assert_int_equal(seen, CACHE_RANGE_BUSY | CACHE_RANGE_CLEAN);
	cache_end_run(busy, true);

	/* Past the end of the file: stops at its last page. */
	next = 250;
	seen = 0;
	assert_null(cache_take_range_run(x->f, &next, 1000, 256, &seen));
	assert_int_equal(seen, CACHE_RANGE_CLEAN);
}

static void
test_failed_writeback_keeps_data_dirty(void **state)
{
	struct fx *x = *state;

	write_ok(x, 0, 2 * PS, 0xcc, 3);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	cache_end_run(r, false);
	assert_int_equal(dirty(x), 2);
	assert_true(cache_min_dirty_seq(x->f) == 3);
	/* Failed, re-dirtied meanwhile: the older sequence wins. */
	r = cache_take_run(x->f, UINT64_MAX, 256);
	write_ok(x, 0, PS, 0xdd, 8);
	cache_end_run(r, false);
	assert_int_equal(dirty(x), 2);
	assert_true(cache_min_dirty_seq(x->f) == 3);
}

static void
test_dirty_pages_are_never_evicted(void **state)
{
	struct fx *x = *state;              /* 64 pages */
	uint64_t fill;
	uint8_t b[PS], buf[PS];

	for (uint64_t i = 0; i < 64; i++)
		write_ok(x, i * PS, PS, (uint8_t)i, i + 1);
	memset(b, 0xee, PS);
	assert_int_equal(cache_write(x->f, b, 100 * PS, PS, 100, &fill),
	    CACHE_WRITE_NO_SPACE);
	for (uint64_t i = 0; i < 64; i++) {
		assert_true(cache_read(x->f, buf, i * PS, PS));
		assert_int_equal(buf[0], (uint8_t)i);
	}
	/* Once written back, the space is reusable. */
	struct cache_run *r;
	while ((r = cache_take_run(x->f, UINT64_MAX, 256)))
		cache_end_run(r, true);
	assert_int_equal(cache_write(x->f, b, 100 * PS, PS, 100, &fill),
	    CACHE_WRITE_OK);
}

static void
test_scan_resistance(void **state)
{
	struct fx *x = *state;              /* 64 pages, 1 MiB file */
	cache_file_free(x->f);
	x->f = cache_file_new(x->c, 64 << 20);
	uint8_t buf[PS];

	/* A hot set of 16 pages, each read several times. */
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(cache_fill(x->f, i, x->page), 0);
	for (int round = 0; round < 3; round++)
		for (uint64_t i = 0; i < 16; i++)
			assert_true(cache_read(x->f, buf, i * PS, PS));
	/* A one-pass scan of 2000 other pages. */
	for (uint64_t i = 1000; i < 3000; i++) {
		if (!cache_read(x->f, buf, i * PS, PS))
			assert_int_equal(cache_fill(x->f, i, x->page), 0);
	}
	unsigned hot = 0;
	for (uint64_t i = 0; i < 16; i++)
		hot += cache_read(x->f, buf, i * PS, PS);
	assert_int_equal(hot, 16);
}

static void
test_discard(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];

	memset(x->page, 0x33, PS);
	cache_fill(x->f, 2, x->page);           /* clean */
	write_ok(x, 3 * PS, PS, 0x44, 1);      /* dirty */
	cache_discard(x->f, 2 * PS, 2 * PS, 2);
	assert_false(cache_read(x->f, buf, 2 * PS, PS));   /* dropped */
	assert_true(cache_read(x->f, buf, 3 * PS, PS));    /* zeroed, dirty */
	assert_int_equal(buf[0], 0);
	assert_int_equal(dirty(x), 1);
}

static void
test_zero_copy_run_points_at_pages(void **state)
{
	struct fx *x = *state;

	cache_set_zero_copy(x->c, true);
	write_ok(x, 2 * PS, 2 * PS, 0x5a, 1);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r);
	assert_null(r->data);
	assert_non_null(r->iov);
	assert_int_equal(r->npages, 2);
	assert_int_equal(r->iov[0].iov_len, PS);
	assert_int_equal(((uint8_t *)r->iov[1].iov_base)[PS - 1], 0x5a);
	/* Written again during writeback: dirty again afterwards. */
	write_ok(x, 2 * PS, PS, 0x77, 5);
	assert_int_equal(((uint8_t *)r->iov[0].iov_base)[0], 0x77);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 1);
	assert_true(cache_min_dirty_seq(x->f) > 1);
}

static void
test_read_miss_begins_and_ends_fills(void **state)
{
	struct fx *x = *state;
	uint8_t buf[3 * PS], b[10];
	uint8_t need[3];
	uint64_t fill = 0;

	memset(x->page, 0x21, PS);
	assert_int_equal(cache_fill(x->f, 1, x->page), 0);
	assert_int_equal(cache_read_prepare(x->f, buf, 0, sizeof buf, need), 2);
	struct cache_fill_mark m = cache_fill_mark(x->f);
	assert_true(need[0] && !need[1] && need[2]);
	assert_int_equal(buf[PS], 0x21);        /* the resident page, now */
	/* A placeholder is neither readable nor writable. */
	assert_false(cache_read(x->f, buf, 0, PS));
	memset(b, 0x99, sizeof b);
	assert_int_equal(cache_write(x->f, b, 5, sizeof b, 1, &fill),
	    CACHE_WRITE_NEED_FILL);
	assert_int_equal(fill, 0);
	/* Page 0 read, page 2 failed: only page 0 is installed. */
	memset(x->page, 0x22, PS);
	cache_fill_end(x->f, 0, x->page, &m);
	cache_fill_end(x->f, 2, NULL, &m);
	assert_true(cache_read(x->f, buf, 0, PS));
	assert_int_equal(buf[PS - 1], 0x22);
	assert_false(cache_read(x->f, buf, 2 * PS, PS));
	assert_int_equal(dirty(x), 0);
	/* Every fill begun was ended: teardown's cache_file_free checks. */
}

static void
test_first_fill_end_wins(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS], need[1];

	assert_int_equal(cache_read_prepare(x->f, buf, 5 * PS, PS, need), 1);
	struct cache_fill_mark m1 = cache_fill_mark(x->f);
	/* A second filler of the same page while the first reads. */
	assert_true(cache_fill_begin(x->f, 5));
	struct cache_fill_mark m2 = cache_fill_mark(x->f);
	memset(x->page, 0x31, PS);
	cache_fill_end(x->f, 5, x->page, &m2);
	memset(x->page, 0x32, PS);
	cache_fill_end(x->f, 5, x->page, &m1);
	assert_true(cache_read(x->f, buf, 5 * PS, PS));
	assert_int_equal(buf[0], 0x31);
	/* Resident now: nothing to begin, nothing to end. */
	assert_false(cache_fill_begin(x->f, 5));
}

static void
test_fill_after_discard_not_installed(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];

	assert_true(cache_fill_begin(x->f, 7));
	struct cache_fill_mark m = cache_fill_mark(x->f);
	cache_discard(x->f, 7 * PS, PS, 1);     /* the read may predate it */
	memset(x->page, 0x41, PS);
	cache_fill_end(x->f, 7, x->page, &m);
	assert_false(cache_read(x->f, buf, 7 * PS, PS));
}

static void
test_redirty_dirties_what_is_held_and_counts_what_is_not(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];

	/* Pages 0-2 written back (clean), page 3 dirty, 4 not cached. */
	write_ok(x, 0, 4 * PS, 0x71, 5);
	struct cache_run *r = cache_take_run(x->f, 5, 3);
	assert_non_null(r);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 1);
	/* Bytes 100 .. 4 pages + 100: five pages, one not held. */
	assert_int_equal(cache_redirty(x->f, 100, 4 * PS, 1, NULL), 1);
	assert_int_equal(dirty(x), 4);
	/* The oldest sequence: a FLUSH of anything takes them first. */
	assert_true(cache_min_dirty_seq(x->f) == 1);
	r = cache_take_run(x->f, 1, 256);
	assert_non_null(r);
	cache_end_run(r, true);
	assert_true(cache_min_dirty_seq(x->f) > 1);
	assert_true(cache_read(x->f, buf, 2 * PS, PS));
	assert_int_equal(buf[0], 0x71);
}

/* Data that may be lost: a page dirty again since keeps none of its newer
 * sequence (a FLUSH between the two must write it), and a page under
 * writeback stays dirty after its run, its run standing for the older
 * sequence meanwhile. */
static void
test_redirty_takes_the_older_sequence_and_outlives_a_run(void **state)
{
	struct fx *x = *state;
	uint64_t again;

	write_ok(x, 0, 2 * PS, 0x11, 5);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 1); /* page 0 */
	assert_non_null(r);
	write_ok(x, PS, PS, 0x22, 9); /* page 1: dirty, now sequence 9 */
	assert_true(cache_min_dirty_seq(x->f) == 5); /* the run's */
	assert_int_equal(cache_redirty(x->f, 0, 2 * PS, 2, &again), 0);
	assert_int_equal(again, 2);
	assert_true(cache_min_dirty_seq(x->f) == 2);
	/* A FLUSH up to sequence 3 takes page 1 now... */
	struct cache_run *r1 = cache_take_run(x->f, 3, 256);
	assert_non_null(r1);
	assert_int_equal(r1->first_index, 1);
	cache_end_run(r1, true);
	/* ...and page 0, once its run ends, though the run succeeded. */
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 1);
	assert_true(cache_min_dirty_seq(x->f) == 2);
	r = cache_take_run(x->f, 3, 256);
	assert_non_null(r);
	assert_int_equal(r->first_index, 0);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 0);
	/* Clean and not newer: nothing to do. */
	assert_int_equal(cache_redirty(x->f, 0, PS, 2, &again), 0);
	assert_int_equal(again, 1);
	assert_int_equal(cache_redirty(x->f, 0, PS, 2, &again), 0);
	assert_int_equal(again, 0);
}

/* A range far wider than what is cached (a merged range over a large
 * export) is dirtied by walking the cached pages, not the range: the same
 * answer. */
static void
test_redirty_of_a_wide_range_walks_the_cached_pages(void **state)
{
	struct fx *x = *state;
	struct cache_file *g = cache_file_new(x->c, 1ull << 40); /* 1 TiB */
	uint64_t fill;
	uint8_t buf[PS];

	assert_non_null(g);
	memset(buf, 0x5a, PS);
	for (uint64_t i = 0; i < 3; i++)
		assert_int_equal(cache_write(g, buf, (i << 28) + PS, PS, 2,
				     &fill),
		    CACHE_WRITE_OK);
	struct cache_run *r;
	while ((r = cache_take_run(g, UINT64_MAX, 256)))
		cache_end_run(r, true);
	uint64_t cached, dirty;
	cache_file_stats(g, &cached, &dirty);
	assert_int_equal(cached, 3);
	assert_int_equal(dirty, 0);
	/* Pages 1 .. 2^29 / PS: two of the three, the rest not held. */
	uint64_t span = (2ull << 28) / PS;
	assert_int_equal(cache_redirty(g, PS, span * PS, 1, NULL), span - 2);
	cache_file_stats(g, &cached, &dirty);
	assert_int_equal(dirty, 2);
	assert_true(cache_min_dirty_seq(g) == 1);
	/* The whole file: the third too, in well under a second. */
	assert_int_equal(cache_redirty(g, 0, 1ull << 40, 1, NULL),
	    (1ull << 40) / PS - 3);
	cache_file_stats(g, &cached, &dirty);
	assert_int_equal(dirty, 3);
	while ((r = cache_take_run(g, UINT64_MAX, 256)))
		cache_end_run(r, true);
	cache_file_free(g);
}

static void
test_fill_never_installs_into_a_later_placeholder(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS], need[1];

	/* Read A of page 3 begins and reads the old data D0... */
	assert_true(cache_fill_begin(x->f, 3));
	struct cache_fill_mark a = cache_fill_mark(x->f);
	/* ... a second filler installs it first (or A had no placeholder);
	 * then D1 is written, written back and evicted. */
	memset(x->page, 0xd0, PS);
	assert_int_equal(cache_fill(x->f, 3, x->page), 0);
	write_ok(x, 3 * PS, PS, 0xd1, 5);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r);
	cache_end_run(r, true);
	for (uint64_t i = 4; i < 256; i++) /* evicts page 3 */
		cache_fill(x->f, i, x->page);
	assert_false(cache_read(x->f, buf, 3 * PS, PS));
	/* Read B puts a placeholder in and reads D1. */
	assert_int_equal(cache_read_prepare(x->f, buf, 3 * PS, PS, need), 1);
	assert_int_equal(need[0], CACHE_NEED_FILL);
	struct cache_fill_mark b = cache_fill_mark(x->f);
	/* A ends first, with D0: B's placeholder is not A's to fill. */
	cache_fill_end(x->f, 3, x->page, &a);
	assert_false(cache_read(x->f, buf, 3 * PS, PS));
	memset(x->page, 0xd1, PS);
	cache_fill_end(x->f, 3, x->page, &b);
	assert_true(cache_read(x->f, buf, 3 * PS, PS));
	assert_int_equal(buf[0], 0xd1);
}

/* Block status: what differs from the backing device, run by run. */
static void
test_state_runs(void **state)
{
	struct fx *x = *state;
	unsigned st;

	/* Nothing written: one run of everything, whatever is cached. */
	assert_int_equal(cache_fill(x->f, 3, x->page), 0);
	assert_int_equal(cache_state_run(x->f, 0, 256, &st), 256);
	assert_int_equal(st, 0);
	assert_int_equal(cache_file_unwritten_pages(x->f), 0);

	write_ok(x, 4 * PS, 2 * PS, 1, 1); /* pages 4, 5 dirty */
	assert_int_equal(cache_file_unwritten_pages(x->f), 2);
	assert_int_equal(cache_state_run(x->f, 0, 256, &st), 4);
	assert_int_equal(st, 0);
	assert_int_equal(cache_state_run(x->f, 4, 252, &st), 2);
	assert_int_equal(st, CACHE_STATE_DIRTY);
	assert_int_equal(cache_state_run(x->f, 6, 250, &st), 250);
	assert_int_equal(st, 0);
	/* At most N. */
	assert_int_equal(cache_state_run(x->f, 4, 1, &st), 1);

	/* Under writeback, then written again meanwhile. */
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 16);
	assert_non_null(r);
	assert_int_equal(cache_state_run(x->f, 4, 10, &st), 2);
	assert_int_equal(st, CACHE_STATE_DIRTY | CACHE_STATE_WRITEBACK);
	write_ok(x, 5 * PS, PS, 2, 2);
	assert_int_equal(cache_state_run(x->f, 5, 10, &st), 1);
	assert_int_equal(st, CACHE_STATE_DIRTY | CACHE_STATE_WRITEBACK);
	assert_int_equal(cache_file_unwritten_pages(x->f), 2);
	cache_end_run(r, true);
	/* Page 4 is clean now, 5 still dirty. */
	assert_int_equal(cache_file_unwritten_pages(x->f), 1);
	assert_int_equal(cache_state_run(x->f, 4, 10, &st), 1);
	assert_int_equal(st, 0);
	assert_int_equal(cache_state_run(x->f, 5, 10, &st), 1);
	assert_int_equal(st, CACHE_STATE_DIRTY);

	/* A failed run keeps them unwritten. */
	r = cache_take_run(x->f, UINT64_MAX, 16);
	cache_end_run(r, false);
	assert_int_equal(cache_file_unwritten_pages(x->f), 1);
	r = cache_take_run(x->f, UINT64_MAX, 16);
	cache_end_run(r, true);
	assert_int_equal(cache_file_unwritten_pages(x->f), 0);
	assert_int_equal(cache_state_run(x->f, 0, 256, &st), 256);
}

/* A dirty page zeroed whole by a discard is known to hold zeroes until
 * written again; one zeroed in part is not. */
static void
test_state_zeroed_by_discard(void **state)
{
	struct fx *x = *state;
	unsigned st;

	write_ok(x, 0, 3 * PS, 7, 1);
	cache_discard(x->f, 0, PS + 100, 2);
	assert_int_equal(cache_state_run(x->f, 0, 8, &st), 1);
	assert_int_equal(st, CACHE_STATE_DIRTY | CACHE_STATE_ZERO);
	assert_int_equal(cache_state_run(x->f, 1, 8, &st), 2);
	assert_int_equal(st, CACHE_STATE_DIRTY);
	write_ok(x, 10, 1, 9, 3);
	assert_int_equal(cache_state_run(x->f, 0, 8, &st), 3);
	assert_int_equal(st, CACHE_STATE_DIRTY);
}

/* --- one copy per write (cache_wbuf) ------------------------------------ */

/* Receive LEN bytes of V into W's pieces, as a connection would. */
static void
wbuf_fill(struct cache_wbuf *w, uint8_t v, uint32_t len)
{
	unsigned n;
	const struct iovec *iov = cache_wbuf_iov(w, &n);
	uint32_t total = 0;

	for (unsigned i = 0; i < n; i++) {
		memset(iov[i].iov_base, v, iov[i].iov_len);
		total += (uint32_t)iov[i].iov_len;
	}
	assert_int_equal(total, len);
}

static uint64_t
private_pages(struct fx *x)
{
	return cache_private_pages(x->c);
}

/* Whole pages: received into private pages, invisible until committed,
 * then published dirty; a rewrite replaces resident pages. */
static void
test_wbuf_whole_pages(void **state)
{
	struct fx *x = *state;
	uint8_t buf[3 * PS];
	uint64_t fill;
	unsigned n;

	struct cache_wbuf *w = cache_wbuf_new(x->f, PS, 3 * PS);
	assert_non_null(w);
	cache_wbuf_iov(w, &n);
	assert_int_equal(n, 3);
	assert_int_equal(private_pages(x), 3);
	wbuf_fill(w, 0x5a, 3 * PS);
	/* Nothing visible before the commit. */
	assert_false(cache_read(x->f, buf, PS, PS));
	assert_int_equal(dirty(x), 0);
	assert_int_equal(cache_wbuf_commit(w, 1, &fill), CACHE_WRITE_OK);
	cache_wbuf_free(w);
	assert_int_equal(private_pages(x), 0);
	assert_int_equal(dirty(x), 3);
	assert_true(cache_read(x->f, buf, PS, 3 * PS));
	for (size_t i = 0; i < sizeof buf; i++)
		assert_int_equal(buf[i], 0x5a);

	/* Rewritten: the resident pages are replaced, keep their older
	 * sequence, and stay the only copies (nothing leaks). */
	w = cache_wbuf_new(x->f, PS, 3 * PS);
	assert_non_null(w);
	wbuf_fill(w, 0x6b, 3 * PS);
	assert_int_equal(cache_wbuf_commit(w, 5, &fill), CACHE_WRITE_OK);
	cache_wbuf_free(w);
	assert_int_equal(dirty(x), 3);
	assert_int_equal(cache_min_dirty_seq(x->f), 1);
	assert_true(cache_read(x->f, buf, PS, 3 * PS));
	for (size_t i = 0; i < sizeof buf; i++)
		assert_int_equal(buf[i], 0x6b);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 16);
	assert_non_null(r);
	assert_int_equal(r->first_index, 1);
	assert_int_equal(r->npages, 3);
	for (size_t i = 0; i < 3 * PS; i++)
		assert_int_equal(((uint8_t *)r->data)[i], 0x6b);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 0);
	uint64_t cached, d;
	cache_file_stats(x->f, &cached, &d);
	assert_int_equal(cached, 3);

	/* Every frame is usable again: the whole cache can be filled. */
	for (uint64_t i = 0; i < 64; i++)
		write_ok(x, (16 + i) * PS, PS, 1, 10 + i);
	assert_int_equal(dirty(x), 64);
}

/* A freed buffer (a client gone mid-payload) leaves no trace. */
static void
test_wbuf_abandoned(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];

	write_ok(x, 2 * PS, PS, 0x11, 1);
	struct cache_wbuf *w = cache_wbuf_new(x->f, PS, 2 * PS);
	assert_non_null(w);
	wbuf_fill(w, 0x22, 2 * PS);
	cache_wbuf_free(w);
	assert_int_equal(private_pages(x), 0);
	assert_int_equal(dirty(x), 1);
	assert_false(cache_read(x->f, buf, PS, PS));
	assert_true(cache_read(x->f, buf, 2 * PS, PS));
	assert_int_equal(buf[0], 0x11);
}

/* Unaligned edges need their pages filled first, as cache_write; a
 * commit goes on where it stopped. */
static void
test_wbuf_partial_edges(void **state)
{
	struct fx *x = *state;
	uint8_t buf[5 * PS];
	uint64_t fill;

	struct cache_wbuf *w = cache_wbuf_new(x->f, PS + 100, 3 * PS);
	assert_non_null(w);
	wbuf_fill(w, 0x33, 3 * PS);
	assert_int_equal(cache_wbuf_commit(w, 1, &fill), CACHE_WRITE_NEED_FILL);
	assert_int_equal(fill, 1);
	assert_int_equal(dirty(x), 0);
	memset(x->page, 0x44, PS);
	assert_int_equal(cache_fill(x->f, 1, x->page), 0);
	assert_int_equal(cache_wbuf_commit(w, 1, &fill), CACHE_WRITE_NEED_FILL);
	assert_int_equal(fill, 4);
	assert_int_equal(cache_fill(x->f, 4, x->page), 0);
	assert_int_equal(cache_wbuf_commit(w, 1, &fill), CACHE_WRITE_OK);
	cache_wbuf_free(w);
	assert_int_equal(private_pages(x), 0);
	assert_int_equal(dirty(x), 4);
	assert_true(cache_read(x->f, buf, PS, 4 * PS));
	for (size_t i = 0; i < 4 * PS; i++)
		assert_int_equal(buf[i],
		    (i >= 100 && i < 100 + 3 * PS) ? 0x33 : 0x44);
}

/* A page under (zero-copy) writeback is copied into, not replaced: the
 * run's pointer stays valid, and the page is dirty again after it. */
static void
test_wbuf_page_under_writeback(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];
	uint64_t fill;

	cache_set_zero_copy(x->c, true);
	write_ok(x, 0, 2 * PS, 0x01, 1);
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 16);
	assert_non_null(r);
	assert_int_equal(r->npages, 2);
	void *was = r->iov[0].iov_base;
	struct cache_wbuf *w = cache_wbuf_new(x->f, 0, PS);
	assert_non_null(w);
	wbuf_fill(w, 0x02, PS);
	assert_int_equal(cache_wbuf_commit(w, 2, &fill), CACHE_WRITE_OK);
	cache_wbuf_free(w);
	assert_ptr_equal(r->iov[0].iov_base, was);
	assert_int_equal(((uint8_t *)was)[0], 0x02);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 1);
	assert_int_equal(cache_min_dirty_seq(x->f), 2);
	assert_true(cache_read(x->f, buf, 0, PS));
	assert_int_equal(buf[PS - 1], 0x02);
	assert_int_equal(private_pages(x), 0);
}

/* No private pages when every page is dirty, nor beyond a quarter of the
 * cache: the caller falls back to a buffer. */
static void
test_wbuf_no_pages(void **state)
{
	struct fx *x = *state;

	struct cache_wbuf *big = cache_wbuf_new(x->f, 0, 17 * PS);
	assert_null(big); /* 64-page cache: at most 16 private */
	struct cache_wbuf *w = cache_wbuf_new(x->f, 0, 16 * PS);
	assert_non_null(w);
	assert_null(cache_wbuf_new(x->f, 0, PS));
	cache_wbuf_free(w);
	for (uint64_t i = 0; i < 64; i++)
		write_ok(x, i * PS, PS, 1, 1 + i);
	assert_null(cache_wbuf_new(x->f, 100 * PS, PS));
	assert_int_equal(private_pages(x), 0);
}

/* A write across chunks (shards) lands whole. */
static void
test_wbuf_across_chunks(void **state)
{
	struct fx *x = *state;
	uint8_t buf[PS];
	uint64_t fill;

	/* Pages 14..17: chunks 0 and 1 (16 pages a chunk). */
	struct cache_wbuf *w = cache_wbuf_new(x->f, 14 * PS, 4 * PS);
	assert_non_null(w);
	wbuf_fill(w, 0x7e, 4 * PS);
	assert_int_equal(cache_wbuf_commit(w, 3, &fill), CACHE_WRITE_OK);
	cache_wbuf_free(w);
	assert_int_equal(dirty(x), 4);
	for (uint64_t i = 14; i < 18; i++) {
		assert_true(cache_read(x->f, buf, i * PS, PS));
		assert_int_equal(buf[0], 0x7e);
	}
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 16);
	assert_int_equal(r->npages, 2); /* runs never cross chunks */
	cache_end_run(r, true);
	r = cache_take_run(x->f, UINT64_MAX, 16);
	assert_int_equal(r->npages, 2);
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 0);
}

/* Hits and misses are counted per shard and summed on asking, and a
 * freed file's stay in the totals. */
static void
test_hit_miss_counts(void **state)
{
	struct fx *x = *state;
	struct cache_stats st;
	uint8_t buf[3 * PS];

	write_ok(x, 15 * PS, 3 * PS, 1, 1); /* across two chunks */
	assert_true(cache_read(x->f, buf, 15 * PS, 3 * PS));
	assert_true(cache_read(x->f, buf, 16 * PS, 100));
	assert_false(cache_read(x->f, buf, 17 * PS, 2 * PS));
	cache_get_stats(x->c, &st);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 1);
	struct cache_file *g = cache_file_new(x->c, 1 << 20);
	assert_false(cache_read(g, buf, 0, PS));
	cache_file_free(g);
	cache_get_stats(x->c, &st);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 2);
}

/* The ordered write log's cleaning: a page is cleaned only while its
 * last write sequence is the one read. */
static void
test_peek_seq_gives_each_pages_last_write(void **state)
{
	struct fx *x = *state;
	uint8_t *buf = malloc(3 * PS);
	uint64_t seqs[3] = { 0 };

	uint64_t before[3];

	write_ok(x, 0, 3 * PS, 1, 5);
	assert_true(cache_peek_seq(x->f, buf, 0, 3 * PS, before));
	write_ok(x, PS, PS, 2, 9); /* the middle page written again */
	assert_true(cache_peek_seq(x->f, buf, 0, 3 * PS, seqs));
	assert_true(before[0] != 0 && before[1] != 0 && before[2] != 0);
	assert_int_equal(seqs[0], before[0]);
	assert_true(seqs[1] != before[1]);
	assert_int_equal(seqs[2], before[2]);
	assert_int_equal(buf[PS], 2);
	/* The first-dirty sequence is still the older one. */
	assert_int_equal(cache_min_dirty_seq(x->f), 5);
	/* A page not resident: false. */
	assert_false(cache_peek_seq(x->f, buf, 8 * PS, PS, seqs));
	free(buf);
}

static void
test_clean_if_unchanged(void **state)
{
	struct fx *x = *state;
	struct cache_stats st;
	uint64_t seqs[2];

	uint8_t *two = malloc(2 * PS);
	uint64_t now1;

	write_ok(x, 0, 2 * PS, 1, 3);
	assert_true(cache_peek_seq(x->f, two, 0, 2 * PS, seqs));
	free(two);
	/* Page 1 written again after it was read: it stays dirty. */
	write_ok(x, PS, PS, 2, 4);
	assert_false(cache_clean_if_unchanged(x->f, 1, seqs[1]));
	assert_true(cache_clean_if_unchanged(x->f, 0, seqs[0]));
	assert_int_equal(dirty(x), 1);
	cache_get_stats(x->c, &st);
	assert_int_equal(st.dirty_pages, 1);
	assert_int_equal(cache_file_unwritten_pages(x->f), 1);
	assert_int_equal(cache_min_dirty_seq(x->f), 3);
	/* Once clean, a second clean does nothing. */
	assert_false(cache_clean_if_unchanged(x->f, 0, seqs[0]));
	/* The page still dirty is what writeback takes, alone. */
	struct cache_run *r = cache_take_run(x->f, UINT64_MAX, 256);
	assert_non_null(r);
	assert_int_equal(r->first_index, 1);
	assert_int_equal(r->npages, 1);
	/* Under writeback: never cleaned by this. */
	assert_true(cache_peek_seq(x->f, x->page, PS, PS, &now1));
	assert_false(cache_clean_if_unchanged(x->f, 1, now1));
	cache_end_run(r, true);
	assert_int_equal(dirty(x), 0);
	assert_true(cache_min_dirty_seq(x->f) == UINT64_MAX);
	/* A page not resident. */
	assert_false(cache_clean_if_unchanged(x->f, 40, now1));
}

/* Rewritten with the same data, or zeroed by a discard, or written
 * through a write buffer: a new last write sequence all the same. */
static void
test_clean_if_unchanged_sees_every_write(void **state)
{
	struct fx *x = *state;
	uint64_t seq, seen;

	write_ok(x, 0, PS, 7, 10);
	assert_true(cache_peek_seq(x->f, x->page, 0, PS, &seen));
	write_ok(x, 0, PS, 7, 11); /* the same bytes, written again */
	assert_false(cache_clean_if_unchanged(x->f, 0, seen));
	assert_true(cache_peek_seq(x->f, x->page, 0, PS, &seen));
	/* A TRIM's two discards carry one sequence: a write between them
	 * and the second still change the stamp each time. */
	cache_discard(x->f, 0, 512, 12);
	assert_false(cache_clean_if_unchanged(x->f, 0, seen));
	assert_true(cache_peek_seq(x->f, x->page, 0, PS, &seen));
	write_ok(x, 1024, 512, 3, 13);
	cache_discard(x->f, 0, 512, 12);
	assert_true(cache_peek_seq(x->f, x->page, 0, PS, &seq));
	assert_true(seq != seen);
	assert_false(cache_clean_if_unchanged(x->f, 0, seen));
	assert_int_equal(x->page[1024], 3);

	struct cache_wbuf *w = cache_wbuf_new(x->f, 0, PS);
	assert_non_null(w);
	unsigned niov;
	const struct iovec *iov = cache_wbuf_iov(w, &niov);
	memset(iov[0].iov_base, 9, iov[0].iov_len);
	uint64_t fill;
	assert_int_equal(cache_wbuf_commit(w, 14, &fill), CACHE_WRITE_OK);
	cache_wbuf_free(w);
	assert_false(cache_clean_if_unchanged(x->f, 0, seq));
	assert_true(cache_peek_seq(x->f, x->page, 0, PS, &seen));
	assert_int_equal(x->page[0], 9);
	assert_true(cache_clean_if_unchanged(x->f, 0, seen));
	assert_int_equal(dirty(x), 0);

	/* A clean page redirtied (its data unchanged) keeps its stamp. */
	cache_redirty(x->f, 0, PS, 20, NULL);
	assert_true(cache_peek_seq(x->f, x->page, 0, PS, &seq));
	assert_int_equal(seq, seen);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_full_page_write_reads_back),
		T(test_partial_write_needs_fill),
		T(test_write_spanning_pages_fills_both_ends),
		T(test_tail_page_of_short_export),
		T(test_fill_never_overwrites_resident_data),
		T(test_dirty_accounting),
		T(test_first_dirty_seq_is_kept),
		T(test_coalescing_in_offset_order),
		T(test_coalescing_cap_and_chunk),
		T(test_flush_sequence_limit),
		T(test_take_runs_up_to_a_sequence),
		T(test_take_run_oldest_across_shards),
		T(test_redirty_during_writeback),
		T(test_redirtied_page_not_taken_twice),
		T(test_redirtied_page_failed_run),
		T(test_range_run),
		T(test_failed_writeback_keeps_data_dirty),
		T(test_dirty_pages_are_never_evicted),
		T(test_scan_resistance),
		T(test_discard),
		T(test_zero_copy_run_points_at_pages),
		T(test_read_miss_begins_and_ends_fills),
		T(test_first_fill_end_wins),
		T(test_fill_after_discard_not_installed),
		T(test_fill_never_installs_into_a_later_placeholder),
		T(test_redirty_dirties_what_is_held_and_counts_what_is_not),
		T(test_redirty_of_a_wide_range_walks_the_cached_pages),
		T(test_redirty_takes_the_older_sequence_and_outlives_a_run),
		T(test_state_runs),
		T(test_state_zeroed_by_discard),
		T(test_wbuf_whole_pages),
		T(test_wbuf_abandoned),
		T(test_wbuf_partial_edges),
		T(test_wbuf_page_under_writeback),
		T(test_wbuf_no_pages),
		T(test_wbuf_across_chunks),
		T(test_hit_miss_counts),
		T(test_peek_seq_gives_each_pages_last_write),
		T(test_clean_if_unchanged),
		T(test_clean_if_unchanged_sees_every_write),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
