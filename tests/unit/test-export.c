/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-export.c - how an export carries out requests through the cache
 * (export_submit, export_complete, export_write_held), onto the fake
 * backend: what is answered at once, what is queued and what is paced;
 * FLUSH durability and who is told of a writeback error (errseq); the cache
 * modes; TRIM and WRITE_ZEROES; an ordered write log that breaks during
 * its sync (xj_sync).
 *
 * The test thread plays the connection: it fills in the request's
 * connection state, submits, and runs a queued request's completion when
 * the test job owner hands it back (no event loop).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "atomics.h"
#include "cache.h"
#include "clock.h"
#include "config-load.h"
#include "export-journal.h"
#include "export.h"
#include "fake-backend.h"
#include "proto.h"
#include "request.h"
#include "wbdev.h"
#include "writeback.h"

#define PS              4096u
#define DEV_BYTES       (1u << 20)              /* 256 pages */
#define CACHE_BYTES     (4u << 20)              /* 1024 pages */
#define WAIT_MS         10000u                  /* generous: never a pace */

/* --- a job owner: completions queued for the test thread ----------------- */

struct towner {
	struct job_owner owner;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, **tail;
};

static void
towner_post(struct job_owner *owner, struct job *job)
{
	struct towner *o = container_of(owner, struct towner, owner);

	pthread_mutex_lock(&o->lock);
	job->next = NULL;
	*o->tail = job;
	o->tail = &job->next;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
}

static void
towner_init(struct towner *o)
{
	pthread_condattr_t ca;

	o->owner.post = towner_post;
	o->head = NULL;
	o->tail = &o->head;
	pthread_mutex_init(&o->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* The next completion handed back, NULL if none within WAIT_MS. */
static struct job *
towner_next(struct towner *o)
{
	uint64_t ns = now_ns() + WAIT_MS * 1000000ull;
	struct timespec until = { .tv_sec = (time_t)(ns / 1000000000u),
	    .tv_nsec = (long)(ns % 1000000000u) };
	struct job *job;

	pthread_mutex_lock(&o->lock);
	while (!o->head && pthread_cond_timedwait(&o->cond, &o->lock, &until) !=
	    ETIMEDOUT)
		;
	job = o->head;
	if (job) {
		o->head = job->next;
		if (!o->head)
			o->tail = &o->head;
	}
	pthread_mutex_unlock(&o->lock);
	return job;
}

/* --- a log whose syncs fail on demand ----------------------------------- */

/* The log's fdatasync (journal.c), through the linker (-Wl,--wrap): the
 * Nth call from now fails with EIO when sync_fails_in is N, then none. */
static _Atomic int sync_fails_in;

int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);

int
__wrap_fdatasync(int fd)
{
	if (atomic_load(&sync_fails_in) > 0 &&
	    atomic_fetch_sub(&sync_fails_in, 1) == 1) {
		errno = EIO;
		return -1;
	}
	return __real_fdatasync(fd);
}

/* --- the fixture ---------------------------------------------------------- */

struct efx {
	struct wbd_config cfg;
	struct cache *cache;
	struct wb_ctl wb;
	struct wb_dev *dev;
	struct fake *fake;
	struct export *e;
	struct towner owner;
	/* The connection's state, as conn.c keeps it. */
	uint64_t conn_err_seq;
	bool conn_flushed;
	/* A job occupying the device's only worker (efx_plug). */
	struct job plug;
	pthread_mutex_t plug_lock;
	pthread_cond_t plug_cond;
	bool plugged;
};

static int
efx_setup_sized(void **state, enum cache_mode mode, uint64_t cache_bytes)
{
	struct efx *x = calloc(1, sizeof *x);
	struct cache_params cp = { .size_bytes = cache_bytes,
		.page_size = PS,
		.chunk_bytes = 1 << 20 };
	struct pool_params pp = { .min_workers = 1, .max_workers = 1,
	    .grow_delay_ms = 1000, .idle_timeout_ms = 1000 };
	struct fake_params fp = { .size_bytes = DEV_BYTES,
	    .caps = BACKEND_CAN_TRIM | BACKEND_CAN_ZERO };
	struct export_conf ec = { .name = "test", .backing = "fake",
	    .cache_mode = mode };

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
	x->fake = fake_new(&fp);
	x->e = export_new(&ec, x->dev, fake_backend(x->fake), &x->wb);
	assert_non_null(x->e);
	towner_init(&x->owner);
	pthread_mutex_init(&x->plug_lock, NULL);
	pthread_cond_init(&x->plug_cond, NULL);
	x->conn_err_seq = export_err_seq(x->e);
	*state = x;
	return 0;
}

static int
efx_setup(void **state, enum cache_mode mode)
{
	return efx_setup_sized(state, mode, CACHE_BYTES);
}

static int
setup_writeback(void **state)
{
	return efx_setup(state, CACHE_WRITEBACK);
}

/* A cache of SMALL_PAGES, smaller than the device. */
#define SMALL_PAGES 32u

static int
setup_small_cache(void **state)
{
	return efx_setup_sized(state, CACHE_WRITEBACK, SMALL_PAGES * PS);
}

static int
setup_writethrough(void **state)
{
	return efx_setup(state, CACHE_WRITETHROUGH);
}

static int
setup_writethrough_until_flush(void **state)
{
	return efx_setup(state, CACHE_WRITETHROUGH_UNTIL_FLUSH);
}

static void efx_unplug(struct efx *x);

static int
efx_teardown(void **state)
{
	struct efx *x = *state;

	efx_unplug(x);
	fake_release(x->fake);
	wb_dev_free(x->dev);            /* runs what is queued, stops */
	export_free(x->e);
	assert_true(fake_closed(x->fake));
	fake_free(x->fake);
	cache_free(x->cache);
	config_free(&x->cfg);
	pthread_mutex_destroy(&x->plug_lock);
	pthread_cond_destroy(&x->plug_cond);
	free(x);
	return 0;
}

static void
efx_plug_run(struct job *job)
{
	struct efx *x = container_of(job, struct efx, plug);

	pthread_mutex_lock(&x->plug_lock);
	while (x->plugged)
		pthread_cond_wait(&x->plug_cond, &x->plug_lock);
	pthread_mutex_unlock(&x->plug_lock);
}

/* Occupy the device's only worker: work queued from now on waits. */
static void
efx_plug(struct efx *x)
{
	x->plugged = true;
	memset(&x->plug, 0, sizeof x->plug);
	x->plug.run = efx_plug_run;
	pool_submit(x->dev->pool, &x->plug);
}

static void
efx_unplug(struct efx *x)
{
	pthread_mutex_lock(&x->plug_lock);
	x->plugged = false;
	pthread_cond_broadcast(&x->plug_cond);
	pthread_mutex_unlock(&x->plug_lock);
}

/* --- requests, as a connection makes them ------------------------------ */

static void
req_done(struct job *job)
{
	(void)job;      /* the test takes it from here (req_complete) */
}

/* A request of TYPE for [OFF, OFF+COUNT); a WRITE's payload is BYTE. */
static struct request *
req_new(uint16_t type, uint16_t flags, uint64_t off, uint32_t count,
    uint8_t byte)
{
	struct request *req = calloc(1, sizeof *req);

	assert_non_null(req);
	req->nbd = (struct nbd_request){ .type = type, .flags = flags,
	    .offset = off, .count = count };
	if (type == NBD_CMD_READ || type == NBD_CMD_WRITE) {
		req->data = malloc(count);
		assert_non_null(req->data);
		memset(req->data, type == NBD_CMD_WRITE ? byte : 0xee, count);
	}
	return req;
}

static void
req_free(struct request *req)
{
	free(req->data);
	free(req);
}

static enum export_verdict
req_submit(struct efx *x, struct request *req)
{
	req->job.done = req_done;
	req->job.owner = &x->owner.owner;
	req->err_seq = x->conn_err_seq;
	req->flushed = x->conn_flushed;
	enum export_verdict v = export_submit(x->e, req);
	x->conn_flushed = req->flushed;
	return v;
}

/* Wait for queued REQ's completion and carry it out; the verdict. */
static enum export_verdict
req_complete(struct efx *x, struct request *req)
{
	struct job *job = towner_next(&x->owner);

	if (!job)
		fail_msg("a queued request never completed");
	assert_ptr_equal(job, &req->job);
	job->done(job);
	if (req->err_seq_checked)
		x->conn_err_seq = req->err_seq;
	return export_complete(x->e, req);
}

/* Submit, and complete if queued: the final verdict. */
static enum export_verdict
req_run(struct efx *x, struct request *req)
{
	enum export_verdict v = req_submit(x, req);

	return v == EXPORT_QUEUED ? req_complete(x, req) : v;
}

/* A whole-page write of BYTE at page INDEX, answered at once. */
static void
write_page(struct efx *x, uint64_t index, uint8_t byte)
{
	struct request *req = req_new(NBD_CMD_WRITE, 0, index * PS, PS, byte);

	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
}

/* FLUSH; its errno. */
static int
flush(struct efx *x)
{
	struct request *req = req_new(NBD_CMD_FLUSH, 0, 0, 0, 0);

	assert_int_equal(req_submit(x, req), EXPORT_QUEUED);
	assert_true(req->flushed);
	assert_int_equal(req_complete(x, req), EXPORT_REPLY);
	assert_true(req->err_seq_checked);
	int err = req->err;
	req_free(req);
	return err;
}

static bool
bytes_are(const void *p, uint8_t byte, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != byte)
			return false;
	return true;
}

static bool
device_page_is(struct efx *x, uint64_t index, uint8_t byte)
{
	uint8_t buf[PS];

	fake_get_data(x->fake, index * PS, buf, sizeof buf);
	return bytes_are(buf, byte, PS);
}

static void
device_fill(struct efx *x, uint64_t index, unsigned npages, uint8_t byte)
{
	uint8_t buf[PS];

	memset(buf, byte, sizeof buf);
	for (unsigned i = 0; i < npages; i++)
		fake_set_data(x->fake, (index + i) * PS, buf, sizeof buf);
}

static uint64_t
dirty_pages(struct efx *x)
{
	uint64_t cached, dirty;

	cache_file_stats(x->e->cf, &cached, &dirty);
	return dirty;
}

static void
set_thresholds(struct efx *x, uint64_t bg_pages, uint64_t limit_pages)
{
	struct writeback_conf wc = x->cfg.writeback;

	wc.dirty_background = (struct threshold){ .bytes = bg_pages * PS };
	wc.dirty = (struct threshold){ .bytes = limit_pages * PS };
	wb_ctl_update(&x->wb, &wc);
	assert_int_equal(x->wb.bg_pages, bg_pages);
	assert_int_equal(x->wb.limit_pages, limit_pages);
}

static void
wait_background_done(struct efx *x)
{
	uint64_t until = now_ns() + WAIT_MS * 1000000ull;

	while (load_acquire(&x->dev->bg_queued)) {
		if (now_ns() > until)
			fail_msg("background writeback did not finish");
		usleep(1000);
	}
}

/* --- READ ------------------------------------------------------------------ */

static void
test_read_hit_is_answered_at_once(void **state)
{
	struct efx *x = *state;

	write_page(x, 3, 0x33);
	struct request *req = req_new(NBD_CMD_READ, 0, 3 * PS + 100, 200, 0);
	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	assert_true(bytes_are(req->data, 0x33, 200));
	assert_int_equal(fake_n_ops(x->fake), 0);
	req_free(req);
}

static void
test_read_miss_is_queued_and_reads_the_device(void **state)
{
	struct efx *x = *state;

	device_fill(x, 10, 2, 0xaa);
	struct request *req = req_new(NBD_CMD_READ, 0, 10 * PS, 2 * PS, 0);
	assert_int_equal(req_submit(x, req), EXPORT_QUEUED);
	assert_int_equal(req_complete(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	assert_true(bytes_are(req->data, 0xaa, 2 * PS));
	assert_int_equal(fake_count(x->fake, FAKE_PREAD, 0), 1);
	req_free(req);

	/* Now cached: a hit, the device untouched. */
	req = req_new(NBD_CMD_READ, 0, 10 * PS, 2 * PS, 0);
	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0xaa, 2 * PS));
	assert_int_equal(fake_count(x->fake, FAKE_PREAD, 0), 1);
	req_free(req);
}

static void
test_read_miss_shows_writes_already_cached(void **state)
{
	struct efx *x = *state;

	device_fill(x, 20, 3, 0xaa);
	write_page(x, 21, 0x21);
	struct request *req = req_new(NBD_CMD_READ, 0, 20 * PS, 3 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0xaa, PS));
	assert_true(bytes_are((uint8_t *)req->data + PS, 0x21, PS));
	assert_true(bytes_are((uint8_t *)req->data + 2 * PS, 0xaa, PS));
	req_free(req);
}

/* --- WRITE ----------------------------------------------------------------- */

static void
test_write_below_thresholds_is_answered_at_once(void **state)
{
	struct efx *x = *state;

	struct request *req = req_new(NBD_CMD_WRITE, 0, 4 * PS, 2 * PS, 0x44);
	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	assert_int_equal(req->pause_ms, 0);
	req_free(req);
	/* In the cache, not on the device. */
	assert_int_equal(dirty_pages(x), 2);
	assert_int_equal(fake_n_ops(x->fake), 0);
	assert_true(device_page_is(x, 4, 0));
}

static void
test_partial_write_of_an_uncached_page_fills_it_first(void **state)
{
	struct efx *x = *state;

	device_fill(x, 30, 1, 0xaa);
	struct request *req = req_new(NBD_CMD_WRITE, 0, 30 * PS + 512, 512, 0x55);
	assert_int_equal(req_submit(x, req), EXPORT_QUEUED);
	assert_int_equal(req_complete(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	assert_int_equal(fake_count(x->fake, FAKE_PREAD, 0), 1);
	req_free(req);

	req = req_new(NBD_CMD_READ, 0, 30 * PS, PS, 0);
	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0xaa, 512));
	assert_true(bytes_are((uint8_t *)req->data + 512, 0x55, 512));
	assert_true(bytes_are((uint8_t *)req->data + 1024, 0xaa, PS - 1024));
	req_free(req);
}

static void
test_writer_paced_near_and_held_at_the_dirty_limit(void **state)
{
	struct efx *x = *state;
	struct request *req;

	/* Background at 16 pages, the limit at 32: no pause up to the
	 * midpoint (24), a pause above it, held at 32.  Writeback is kept
	 * from making room until the test lets it. */
	set_thresholds(x, 16, 32);
	efx_plug(x);
	for (unsigned i = 0; i < 24; i++)
		write_page(x, i, 0x10);
	for (unsigned i = 24; i < 31; i++) {
		req = req_new(NBD_CMD_WRITE, 0, i * PS, PS, 0x10);
		assert_int_equal(req_submit(x, req), EXPORT_PACE);
		assert_in_range(req->pause_ms, 1, 200);
		req_free(req);
	}
	req = req_new(NBD_CMD_WRITE, 0, 31 * PS, PS, 0x10);
	assert_int_equal(req_submit(x, req), EXPORT_PACE);
	assert_int_equal(req->pause_ms, -1);
	req_free(req);
	assert_true(export_write_held(x->e));
	assert_int_equal(fake_n_ops(x->fake), 0);

	/* Writeback makes room, and the writer goes on. */
	efx_unplug(x);
	wait_background_done(x);
	assert_true(dirty_pages(x) <= 16);
	assert_false(export_write_held(x->e));
	assert_true(fake_count(x->fake, FAKE_PWRITE, 0) > 0);
}

static void
test_held_writer_is_let_go_when_shutting_down(void **state)
{
	struct efx *x = *state;

	set_thresholds(x, 2, 4);
	efx_plug(x);
	for (unsigned i = 0; i < 4; i++) {
		struct request *req = req_new(NBD_CMD_WRITE, 0, i * PS, PS, 1);
		req_submit(x, req);
		req_free(req);
	}
	assert_true(export_write_held(x->e));
	x->wb.stopping = 1;
	assert_false(export_write_held(x->e));
}

static void
test_writer_on_a_full_cache_makes_room_itself(void **state)
{
	struct efx *x = *state;

	/*
	 * Every page of the cache dirty, below the background threshold
	 * (nothing writes back on its own), and the device's only worker
	 * given to a write that finds no page: no background job could run
	 * before it ends.  The writer writes back a run itself.
	 */
	set_thresholds(x, SMALL_PAGES - 1, SMALL_PAGES);
	efx_plug(x);
	for (unsigned i = 0; i < SMALL_PAGES; i++) {
		struct request *req =
		    req_new(NBD_CMD_WRITE, 0, i * PS, PS, 0x21);
		assert_int_not_equal(req_submit(x, req), EXPORT_QUEUED);
		req_free(req);
	}
	assert_int_equal(dirty_pages(x), SMALL_PAGES);
	struct request *req = req_new(NBD_CMD_WRITE, 0, 100 * PS, PS, 0x22);
	assert_int_equal(req_submit(x, req), EXPORT_QUEUED);
	efx_unplug(x);
	assert_int_not_equal(req_complete(x, req), EXPORT_QUEUED);
	assert_int_equal(req->err, 0);
	req_free(req);
	/* Room made by writing back the oldest pages, not by losing any. */
	assert_true(fake_count(x->fake, FAKE_PWRITE, 0) > 0);
	assert_true(device_page_is(x, 0, 0x21));
	req = req_new(NBD_CMD_READ, 0, 100 * PS, PS, 0);
	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0x22, PS));
	req_free(req);
	assert_int_equal(flush(x), 0);
	for (unsigned i = 0; i < SMALL_PAGES; i++)
		assert_true(device_page_is(x, i, 0x21));
	assert_true(device_page_is(x, 100, 0x22));
}

static void
test_fua_write_is_queued_and_durable_before_the_reply(void **state)
{
	struct efx *x = *state;

	write_page(x, 0, 0x01);
	struct request *req = req_new(NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 2 * PS,
	    PS, 0x22);
	assert_int_equal(req_submit(x, req), EXPORT_QUEUED);
	assert_int_equal(req_complete(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
	assert_true(device_page_is(x, 2, 0x22));
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, BACKEND_WRITE_FUA), 1);
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, 0), 1);
	/* The other write stays in the cache. */
	assert_true(device_page_is(x, 0, 0));
	assert_int_equal(dirty_pages(x), 1);
}

/* --- FLUSH and errors -------------------------------------------------------- */

static void
test_flush_makes_acknowledged_writes_durable(void **state)
{
	struct efx *x = *state;
	struct fake_op last, op;

	write_page(x, 0, 0x01);
	write_page(x, 2, 0x02);
	write_page(x, 3, 0x03);
	assert_false(x->conn_flushed);
	assert_int_equal(flush(x), 0);
	assert_true(x->conn_flushed);

	assert_true(device_page_is(x, 0, 0x01));
	assert_true(device_page_is(x, 2, 0x02));
	assert_true(device_page_is(x, 3, 0x03));
	assert_int_equal(dirty_pages(x), 0);
	/* One flush, after every write. */
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
	fake_op(x->fake, fake_n_ops(x->fake) - 1, &last);
	assert_int_equal(last.type, FAKE_FLUSH);
	for (size_t i = 0; i + 1 < fake_n_ops(x->fake); i++) {
		fake_op(x->fake, i, &op);
		assert_int_equal(op.type, FAKE_PWRITE);
		assert_true(op.done_tick < last.issued_tick);
	}
}

/*
 * An ordered log whose checkpoint after the last epoch applied fails: the
 * log breaks with its superblock still pointing at that epoch, older than
 * the backing device now.  xj_sync commits once more (the guard), which
 * falls back and empties the log: a start must find nothing to replay.
 */
static void
test_sync_empties_an_ordered_log_broken_by_its_checkpoint(void **state)
{
	struct efx *x = *state;
	char path[] = "/tmp/wbd-test-export-XXXXXX", err[512];
	struct journal_peek pk;
	struct xj_stats st;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	struct export_journal_conf jc = { .path = path,
		.size_bytes = CONFIG_JOURNAL_MIN_BYTES,
		.mode = JOURNAL_ON_FLUSH,
		.ordered = true };
	if (export_journal_open(x->e, &jc, NULL, err, sizeof err) < 0)
		fail_msg("%s", err);
	write_page(x, 0, 0x01);
	/* The commit's sync works; the checkpoint's, after the epoch is
	 * applied, fails. */
	atomic_store(&sync_fails_in, 2);
	assert_int_equal(export_flush(x->e, UINT64_MAX, WB_REASON_SYNC), 0);
	assert_int_equal(atomic_load(&sync_fails_in), 0);
	assert_true(device_page_is(x, 0, 0x01));
	xj_get_stats(x->e->journal, &st);
	assert_true(st.broken);
	assert_false(st.stale);
	assert_int_equal(journal_peek(path, NULL, &pk), 0);
	unlink(path);
}

/* A WRITE whose payload is still in the connection's input: put into the
 * cache from there when it lands; copied into the request's own buffer
 * when it is queued (FUA), so the worker does not read the input. */
static void
test_write_from_the_input_buffer(void **state)
{
	struct efx *x = *state;
	uint8_t input[PS];

	memset(input, 0x5c, sizeof input);
	struct request *req = req_new(NBD_CMD_WRITE, 0, 6 * PS, PS, 0xee);
	req->job.done = req_done;
	req->job.owner = &x->owner.owner;
	assert_int_equal(export_submit_write(x->e, req, input), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0xee, PS)); /* not copied */
	req_free(req);
	req = req_new(NBD_CMD_READ, 0, 6 * PS, PS, 0);
	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0x5c, PS));
	req_free(req);

	memset(input, 0x6d, sizeof input);
	req = req_new(NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 7 * PS, PS, 0xee);
	req->job.done = req_done;
	req->job.owner = &x->owner.owner;
	assert_int_equal(export_submit_write(x->e, req, input), EXPORT_QUEUED);
	memset(input, 0, sizeof input); /* the input moves on */
	assert_int_equal(req_complete(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	assert_true(device_page_is(x, 7, 0x6d));
	req_free(req);
}

static void
test_writeback_failure_fails_the_next_flush_once(void **state)
{
	struct efx *x = *state;

	/* Background writeback of page 0 fails once. */
	write_page(x, 0, 0x01);
	fake_fail_writes(x->fake, 1, EIO);
	set_thresholds(x, 0, 64);
	wb_kick_background(x->dev);
	wait_background_done(x);
	assert_int_equal(x->dev->errors, 1);
	assert_int_equal(export_err_seq(x->e), 1);
	assert_int_equal(dirty_pages(x), 1);
	assert_int_equal(x->conn_err_seq, 0);

	/* The device has recovered: the FLUSH lands the data, yet reports
	 * the failure the connection had not seen... */
	assert_int_equal(flush(x), EIO);
	assert_int_equal(x->conn_err_seq, 1);
	assert_true(device_page_is(x, 0, 0x01));
	assert_int_equal(dirty_pages(x), 0);
	/* ...once. */
	assert_int_equal(flush(x), 0);
	assert_int_equal(x->conn_err_seq, 1);
}

static void
test_flush_fails_while_its_pages_cannot_be_written(void **state)
{
	struct efx *x = *state;

	write_page(x, 5, 0x05);
	fake_fail_writes_at(x->fake, 5 * PS, EIO);
	assert_int_equal(flush(x), EIO);
	assert_int_equal(flush(x), EIO);
	assert_int_equal(dirty_pages(x), 1);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 0);
	assert_int_equal(export_err_seq(x->e), 2);
	fake_heal(x->fake);
	assert_int_equal(flush(x), 0);
	assert_true(device_page_is(x, 5, 0x05));
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

static void
test_failure_is_told_to_each_connection_that_saw_it_happen(void **state)
{
	struct efx *x = *state;

	/* Connection A was open when writeback failed; B connected after. */
	write_page(x, 0, 0x01);
	fake_fail_writes(x->fake, 1, EIO);
	assert_int_equal(export_flush(x->e, UINT64_MAX, WB_REASON_SYNC), -EIO);
	uint64_t a = x->conn_err_seq, b = export_err_seq(x->e);

	x->conn_err_seq = b;
	assert_int_equal(flush(x), 0);          /* B: nothing to tell */
	x->conn_err_seq = a;
	assert_int_equal(flush(x), EIO);        /* A: told once */
	assert_int_equal(flush(x), 0);
}

/* --- cache modes ------------------------------------------------------------ */

static void
test_writethrough_write_is_durable_before_the_reply(void **state)
{
	struct efx *x = *state;

	struct request *req = req_new(NBD_CMD_WRITE, 0, 7 * PS, PS, 0x77);
	assert_int_equal(req_submit(x, req), EXPORT_QUEUED);
	assert_int_equal(req_complete(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
	assert_true(device_page_is(x, 7, 0x77));
	assert_int_equal(fake_count(x->fake, FAKE_PWRITE, BACKEND_WRITE_FUA), 1);
	assert_int_equal(dirty_pages(x), 0);
	/* Still readable from the cache. */
	req = req_new(NBD_CMD_READ, 0, 7 * PS, PS, 0);
	assert_int_equal(req_submit(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0x77, PS));
	req_free(req);
}

static void
test_writethrough_write_fails_when_the_device_does(void **state)
{
	struct efx *x = *state;

	/* Its own write fails: EIO, the data stays in the cache, dirty. */
	fake_fail_writes(x->fake, 1, EIO);
	struct request *req = req_new(NBD_CMD_WRITE, 0, 0, PS, 0x01);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, EIO);
	req_free(req);
	assert_int_equal(dirty_pages(x), 1);
	assert_true(device_page_is(x, 0, 0));
	/* The device recovers: the next one is durable, and succeeds (the
	 * failure was reported already). */
	req = req_new(NBD_CMD_WRITE, 0, 0, PS, 0x02);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
	assert_true(device_page_is(x, 0, 0x02));
	assert_int_equal(dirty_pages(x), 0);
}

static void
test_writethrough_write_reports_an_earlier_failure_once(void **state)
{
	struct efx *x = *state;

	/* Two failures: a writethrough write's own, then a sync's retry of
	 * the page it left dirty. */
	struct request *req = req_new(NBD_CMD_WRITE, 0, 0, PS, 0x01);
	fake_fail_writes(x->fake, 2, EIO);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	req_free(req);
	assert_int_equal(export_flush(x->e, UINT64_MAX, WB_REASON_SYNC), -EIO);
	assert_int_equal(export_err_seq(x->e), 2);
	/* A connection that saw neither is told by its next durable write,
	 * though that write itself succeeds; once. */
	x->conn_err_seq = 0;
	req = req_new(NBD_CMD_WRITE, 0, 8 * PS, PS, 0x08);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, EIO);
	req_free(req);
	assert_true(device_page_is(x, 8, 0x08));
	req = req_new(NBD_CMD_WRITE, 0, 9 * PS, PS, 0x09);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
}

static void
test_writethrough_until_flush_then_writeback(void **state)
{
	struct efx *x = *state;

	struct request *req = req_new(NBD_CMD_WRITE, 0, 0, PS, 0x01);
	assert_int_equal(req_submit(x, req), EXPORT_QUEUED);
	assert_int_equal(req_complete(x, req), EXPORT_REPLY);
	req_free(req);
	assert_true(device_page_is(x, 0, 0x01));

	assert_int_equal(flush(x), 0);
	write_page(x, 1, 0x02);                 /* now into the cache */
	assert_true(device_page_is(x, 1, 0));
	assert_int_equal(dirty_pages(x), 1);
}

/* --- TRIM and WRITE_ZEROES ------------------------------------------------ */

static void
test_trim_and_write_zeroes_reach_the_device(void **state)
{
	struct efx *x = *state;
	struct fake_op op;

	device_fill(x, 40, 4, 0xaa);
	write_page(x, 41, 0x41);                /* dirty in the cache */

	struct request *req = req_new(NBD_CMD_TRIM, 0, 42 * PS, 2 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
	assert_int_equal(fake_count(x->fake, FAKE_TRIM, 0), 1);
	fake_op(x->fake, 0, &op);
	assert_int_equal(op.type, FAKE_TRIM);
	assert_int_equal(op.off, 42 * PS);
	assert_int_equal(op.count, 2 * PS);

	req = req_new(NBD_CMD_WRITE_ZEROES, 0, 40 * PS, 2 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
	assert_int_equal(fake_count(x->fake, FAKE_ZERO, 0), 1);
	assert_true(device_page_is(x, 40, 0));

	/* The cached write under the zeroes reads as zeroes, and a FLUSH
	 * leaves zeroes on the device too. */
	req = req_new(NBD_CMD_READ, 0, 40 * PS, 4 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0, 4 * PS));
	req_free(req);
	assert_int_equal(flush(x), 0);
	for (unsigned i = 40; i < 44; i++)
		assert_true(device_page_is(x, i, 0));
}

static void
test_fast_zero_refused_changes_nothing(void **state)
{
	struct efx *x = *state;

	device_fill(x, 50, 2, 0xaa);
	write_page(x, 50, 0x50); /* dirty in the cache */
	struct request *req = req_new(NBD_CMD_READ, 0, 51 * PS, PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY); /* clean, cached */
	req_free(req);

	/* The device cannot zero fast: ENOTSUP, and neither the cache nor
	 * the device is changed (NBD_CMD_FLAG_FAST_ZERO, proto.md). */
	req = req_new(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 50 * PS,
	    2 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, ENOTSUP);
	req_free(req);
	assert_int_equal(fake_count(x->fake, FAKE_ZERO, 0), 0);
	assert_int_equal(dirty_pages(x), 1);
	req = req_new(NBD_CMD_READ, 0, 50 * PS, 2 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0x50, PS));
	assert_true(bytes_are((uint8_t *)req->data + PS, 0xaa, PS));
	req_free(req);
	assert_int_equal(flush(x), 0);
	assert_true(device_page_is(x, 50, 0x50));
	assert_true(device_page_is(x, 51, 0xaa));

	/* A device that can: zeroes, in the cache and on the device. */
	fake_backend(x->fake)->caps |= BACKEND_CAN_FAST_ZERO;
	write_page(x, 50, 0x51);
	req = req_new(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 50 * PS,
	    2 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	req_free(req);
	req = req_new(NBD_CMD_READ, 0, 50 * PS, 2 * PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_true(bytes_are(req->data, 0, 2 * PS));
	req_free(req);
	assert_int_equal(flush(x), 0);
	assert_true(device_page_is(x, 50, 0));
	assert_true(device_page_is(x, 51, 0));
}

static void
test_trim_with_fua_flushes_the_device(void **state)
{
	struct efx *x = *state;

	struct request *req = req_new(NBD_CMD_TRIM, NBD_CMD_FLAG_FUA, 0, PS, 0);
	assert_int_equal(req_run(x, req), EXPORT_REPLY);
	assert_int_equal(req->err, 0);
	assert_true(req->err_seq_checked);
	req_free(req);
	assert_int_equal(fake_count(x->fake, FAKE_TRIM, 0), 1);
	assert_int_equal(fake_count(x->fake, FAKE_FLUSH, 0), 1);
}

int
main(void)
{
#define T(f, setup) cmocka_unit_test_setup_teardown(f, setup, efx_teardown)
	const struct CMUnitTest tests[] = {
		T(test_read_hit_is_answered_at_once, setup_writeback),
		T(test_read_miss_is_queued_and_reads_the_device,
		    setup_writeback),
		T(test_read_miss_shows_writes_already_cached, setup_writeback),
		T(test_write_below_thresholds_is_answered_at_once,
		    setup_writeback),
		T(test_partial_write_of_an_uncached_page_fills_it_first,
		    setup_writeback),
		T(test_writer_paced_near_and_held_at_the_dirty_limit,
		    setup_writeback),
		T(test_held_writer_is_let_go_when_shutting_down,
		    setup_writeback),
		T(test_writer_on_a_full_cache_makes_room_itself,
		    setup_small_cache),
		T(test_fua_write_is_queued_and_durable_before_the_reply,
		    setup_writeback),
		T(test_flush_makes_acknowledged_writes_durable,
		    setup_writeback),
		T(test_writeback_failure_fails_the_next_flush_once,
		    setup_writeback),
		T(test_flush_fails_while_its_pages_cannot_be_written,
		    setup_writeback),
		T(test_failure_is_told_to_each_connection_that_saw_it_happen,
		    setup_writeback),
		T(test_writethrough_write_is_durable_before_the_reply,
		    setup_writethrough),
		T(test_writethrough_write_fails_when_the_device_does,
		    setup_writethrough),
		T(test_writethrough_write_reports_an_earlier_failure_once,
		    setup_writethrough),
		T(test_writethrough_until_flush_then_writeback,
		    setup_writethrough_until_flush),
		T(test_trim_and_write_zeroes_reach_the_device, setup_writeback),
		T(test_trim_with_fua_flushes_the_device, setup_writeback),
		T(test_fast_zero_refused_changes_nothing, setup_writeback),
		T(test_write_from_the_input_buffer, setup_writeback),
		T(test_sync_empties_an_ordered_log_broken_by_its_checkpoint,
		    setup_writeback),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
