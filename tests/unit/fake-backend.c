/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fake-backend.c - the in-memory, scriptable backing device of the unit
 * tests (see fake-backend.h).
 *
 * Locking: f->lock protects everything below it in struct fake; f->cond is
 * broadcast whenever an operation is issued or completes, or a held write
 * is released.  Operations run on whichever thread calls them (the tests'
 * and the pools' workers).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "fake-backend.h"

/* A write issued and not yet ended (the two-step handle, or the one-step
 * call's own record). */
struct backend_io {
	struct backend_io *next;        /* on the held list */
	size_t op;                      /* its log entry */
	void *copy;                     /* the data, taken when issued */
	uint32_t count;
	uint64_t due_ns; /* the latency's end; 0: none */
	bool done;
	int result;
};

struct fake {
	struct backend b;               /* first: fake_of() casts */
	struct backend_ops ops;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint8_t *data;
	uint64_t size_bytes;
	bool closed;

	struct fake_op *log;
	size_t n_ops, cap_ops;
	uint64_t tick;

	unsigned in_flight, max_in_flight;
	uint64_t in_flight_bytes, max_in_flight_bytes;
	unsigned latency_us;
	bool holding_flushes;
	uint64_t flush_gen; /* bumped by each release */

	unsigned fail_writes;
	int fail_writes_err;
	bool fail_at_set;
	uint64_t fail_at;
	int fail_at_err;
	unsigned fail_flushes;
	int fail_flushes_err;

	bool holding;
	struct backend_io *held, **held_tail;
};

struct fake *
fake_of(struct backend *b)
{
	return (struct fake *)b;
}

/* Append an operation to the log, issued now; its index.  Lock held. */
static size_t
fake_log_locked(struct fake *f, enum fake_op_type type, uint64_t off,
    uint32_t count, unsigned flags)
{
	if (f->n_ops == f->cap_ops) {
		size_t cap = f->cap_ops ? f->cap_ops * 2 : 64;
		struct fake_op *log = realloc(f->log, cap * sizeof *log);
		if (!log)
			abort();        /* a test's own memory: nothing to save */
		f->log = log;
		f->cap_ops = cap;
	}
	f->log[f->n_ops] = (struct fake_op){ .type = type, .off = off,
	    .count = count, .flags = flags, .issued_tick = ++f->tick };
	pthread_cond_broadcast(&f->cond);
	return f->n_ops++;
}

/* Operation I is over with result R.  Lock held. */
static void
fake_done_locked(struct fake *f, size_t i, int r)
{
	f->log[i].result = r;
	f->log[i].done_tick = ++f->tick;
	pthread_cond_broadcast(&f->cond);
}

/* What the script says of a write of [OFF, OFF+COUNT): 0 or -errno.
 * Lock held. */
static int
fake_write_verdict_locked(struct fake *f, uint64_t off, uint32_t count)
{
	if (f->fail_at_set && f->fail_at >= off && f->fail_at < off + count)
		return -f->fail_at_err;
	if (f->fail_writes > 0) {
		f->fail_writes--;
		return -f->fail_writes_err;
	}
	return 0;
}

/* Complete write IO: its data lands unless it failed.  Lock held. */
static void
fake_complete_locked(struct fake *f, struct backend_io *io)
{
	struct fake_op *op = &f->log[io->op];

	if (io->result == 0)
		memcpy(f->data + op->off, io->copy, op->count);
	io->done = true;
	fake_done_locked(f, io->op, io->result);
}

/* Issue a write of BUF; completed at once unless writes are held. */
static struct backend_io *
fake_issue_write(struct fake *f, const void *buf, uint32_t count, uint64_t off,
    unsigned flags, bool vectored, bool two_step)
{
	struct backend_io *io = calloc(1, sizeof *io);

	if (!io || !(io->copy = malloc(count)))
		abort();
	memcpy(io->copy, buf, count);
	pthread_mutex_lock(&f->lock);
	io->op = fake_log_locked(f, FAKE_PWRITE, off, count, flags);
	f->log[io->op].vectored = vectored;
	f->log[io->op].two_step = two_step;
	io->result = fake_write_verdict_locked(f, off, count);
	io->count = count;
	if (f->latency_us)
		io->due_ns = now_ns() + (uint64_t)f->latency_us * 1000u;
	if (++f->in_flight > f->max_in_flight)
		f->max_in_flight = f->in_flight;
	f->in_flight_bytes += count;
	if (f->in_flight_bytes > f->max_in_flight_bytes)
		f->max_in_flight_bytes = f->in_flight_bytes;
	if (f->holding) {
		*f->held_tail = io;
		f->held_tail = &io->next;
	} else {
		fake_complete_locked(f, io);
	}
	pthread_mutex_unlock(&f->lock);
	return io;
}

/* Sleep until NS on the monotonic clock. */
static void
fake_sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u) };

	int r;

	do
		r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	while (r == EINTR);
}

/* Wait for IO to complete (and its latency to pass), end it and free it;
 * its result. */
static int
fake_end_write(struct fake *f, struct backend_io *io)
{
	int r;

	if (io->due_ns)
		fake_sleep_until(io->due_ns);
	pthread_mutex_lock(&f->lock);
	while (!io->done)
		pthread_cond_wait(&f->cond, &f->lock);
	f->in_flight--;
	f->in_flight_bytes -= io->count;
	r = io->result;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	free(io->copy);
	free(io);
	return r;
}

/* --- the operations ----------------------------------------------------- */

static int
fake_pread(struct backend *b, void *buf, uint32_t count, uint64_t off)
{
	struct fake *f = fake_of(b);

	pthread_mutex_lock(&f->lock);
	size_t i = fake_log_locked(f, FAKE_PREAD, off, count, 0);
	memcpy(buf, f->data + off, count);
	fake_done_locked(f, i, 0);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int
fake_pwrite(struct backend *b, const void *buf, uint32_t count, uint64_t off,
    unsigned flags)
{
	struct fake *f = fake_of(b);

	return fake_end_write(f, fake_issue_write(f, buf, count, off, flags,
	    false, false));
}

static int
fake_pwritev(struct backend *b, const struct iovec *iov, int iovcnt,
    uint64_t off, unsigned flags)
{
	struct fake *f = fake_of(b);
	size_t count = 0;

	for (int i = 0; i < iovcnt; i++)
		count += iov[i].iov_len;
	uint8_t *buf = malloc(count ? count : 1);
	if (!buf)
		abort();
	for (int i = 0, done = 0; i < iovcnt; i++) {
		memcpy(buf + done, iov[i].iov_base, iov[i].iov_len);
		done += (int)iov[i].iov_len;
	}
	int r = fake_end_write(f, fake_issue_write(f, buf, (uint32_t)count, off,
	    flags, true, false));
	free(buf);
	return r;
}

static int
fake_pwrite_start(struct backend *b, const void *buf, uint32_t count,
    uint64_t off, unsigned flags, struct backend_io **io)
{
	*io = fake_issue_write(fake_of(b), buf, count, off, flags, false, true);
	return 0;
}

static int
fake_pwrite_end(struct backend *b, struct backend_io *io)
{
	return fake_end_write(fake_of(b), io);
}

static int
fake_flush(struct backend *b)
{
	struct fake *f = fake_of(b);
	int r = 0;

	pthread_mutex_lock(&f->lock);
	size_t i = fake_log_locked(f, FAKE_FLUSH, 0, 0, 0);
	if (f->fail_flushes > 0) {
		f->fail_flushes--;
		r = -f->fail_flushes_err;
	}
	uint64_t gen = f->flush_gen;
	while (f->holding_flushes && f->flush_gen == gen)
		pthread_cond_wait(&f->cond, &f->lock);
	fake_done_locked(f, i, r);
	pthread_mutex_unlock(&f->lock);
	return r;
}

/* TRIM and WRITE_ZEROES: the range reads back as zeroes (a thin device). */
static int
fake_discard(struct fake *f, enum fake_op_type type, uint32_t count,
    uint64_t off)
{
	pthread_mutex_lock(&f->lock);
	size_t i = fake_log_locked(f, type, off, count, 0);
	memset(f->data + off, 0, count);
	fake_done_locked(f, i, 0);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int
fake_trim(struct backend *b, uint32_t count, uint64_t off)
{
	return fake_discard(fake_of(b), FAKE_TRIM, count, off);
}

static int
fake_zero(struct backend *b, uint32_t count, uint64_t off, bool may_trim,
    bool fast)
{
	(void)may_trim;
	/* Refused, as a remote that cannot zero fast refuses. */
	if (fast && !(b->caps & BACKEND_CAN_FAST_ZERO))
		return -ENOTSUP;
	return fake_discard(fake_of(b), FAKE_ZERO, count, off);
}

static uint64_t
fake_size(struct backend *b)
{
	return fake_of(b)->size_bytes;
}

static void
fake_close(struct backend *b)
{
	struct fake *f = fake_of(b);

	pthread_mutex_lock(&f->lock);
	f->closed = true;
	pthread_mutex_unlock(&f->lock);
}

/* --- set-up ------------------------------------------------------------- */

struct fake *
fake_new(const struct fake_params *p)
{
	struct fake *f = calloc(1, sizeof *f);
	pthread_condattr_t ca;

	if (!f || !(f->data = calloc(1, p->size_bytes)))
		abort();
	f->size_bytes = p->size_bytes;
	f->ops = (struct backend_ops){ .name = "fake", .pread = fake_pread,
	    .pwrite = fake_pwrite, .flush = fake_flush, .trim = fake_trim,
	    .zero = fake_zero, .size = fake_size, .close = fake_close };
	if (p->pwritev)
		f->ops.pwritev = fake_pwritev;
	if (p->two_step) {
		f->ops.pwrite_start = fake_pwrite_start;
		f->ops.pwrite_end = fake_pwrite_end;
	}
	f->b.ops = &f->ops;
	f->b.caps = p->caps;
	snprintf(f->b.dev_name, sizeof f->b.dev_name, "250:1");
	f->held_tail = &f->held;
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &ca);
	pthread_condattr_destroy(&ca);
	return f;
}

void
fake_free(struct fake *f)
{
	if (!f)
		return;
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f->log);
	free(f->data);
	free(f);
}

struct backend *
fake_backend(struct fake *f)
{
	return &f->b;
}

bool
fake_closed(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	bool closed = f->closed;
	pthread_mutex_unlock(&f->lock);
	return closed;
}

void
fake_set_data(struct fake *f, uint64_t off, const void *buf, size_t len)
{
	pthread_mutex_lock(&f->lock);
	memcpy(f->data + off, buf, len);
	pthread_mutex_unlock(&f->lock);
}

void
fake_get_data(struct fake *f, uint64_t off, void *buf, size_t len)
{
	pthread_mutex_lock(&f->lock);
	memcpy(buf, f->data + off, len);
	pthread_mutex_unlock(&f->lock);
}

/* --- the log ------------------------------------------------------------ */

size_t
fake_n_ops(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	size_t n = f->n_ops;
	pthread_mutex_unlock(&f->lock);
	return n;
}

void
fake_op(struct fake *f, size_t i, struct fake_op *op)
{
	pthread_mutex_lock(&f->lock);
	if (i < f->n_ops)
		*op = f->log[i];
	else
		memset(op, 0, sizeof *op);
	pthread_mutex_unlock(&f->lock);
}

size_t
fake_count(struct fake *f, enum fake_op_type type, unsigned flags_set)
{
	size_t n = 0;

	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n_ops; i++)
		if (f->log[i].type == type &&
		    (f->log[i].flags & flags_set) == flags_set)
			n++;
	pthread_mutex_unlock(&f->lock);
	return n;
}

uint64_t
fake_tick(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	uint64_t tick = ++f->tick;
	pthread_mutex_unlock(&f->lock);
	return tick;
}

void
fake_clear_log(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->n_ops = 0;
	f->max_in_flight = f->in_flight;
	f->max_in_flight_bytes = f->in_flight_bytes;
	pthread_mutex_unlock(&f->lock);
}

unsigned
fake_in_flight(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	unsigned n = f->in_flight;
	pthread_mutex_unlock(&f->lock);
	return n;
}

unsigned
fake_max_in_flight(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	unsigned n = f->max_in_flight;
	pthread_mutex_unlock(&f->lock);
	return n;
}

uint64_t
fake_in_flight_bytes(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	uint64_t n = f->in_flight_bytes;
	pthread_mutex_unlock(&f->lock);
	return n;
}

uint64_t
fake_max_in_flight_bytes(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	uint64_t n = f->max_in_flight_bytes;
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* Completed operations of TYPE.  Lock held. */
static size_t
fake_n_done_locked(struct fake *f, enum fake_op_type type)
{
	size_t n = 0;

	for (size_t i = 0; i < f->n_ops; i++)
		if (f->log[i].type == type && f->log[i].done_tick != 0)
			n++;
	return n;
}

/* Wait on f->cond until DEADLINE; false once it has passed.  Lock held. */
static bool
fake_wait_locked(struct fake *f, const struct timespec *deadline)
{
	return pthread_cond_timedwait(&f->cond, &f->lock, deadline) !=
	    ETIMEDOUT;
}

static struct timespec
fake_deadline(unsigned timeout_ms)
{
	uint64_t ns = now_ns() + (uint64_t)timeout_ms * 1000000u;

	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u),
	    .tv_nsec = (long)(ns % 1000000000u) };
}

bool
fake_wait_done(struct fake *f, enum fake_op_type type, size_t n,
    unsigned timeout_ms)
{
	struct timespec deadline = fake_deadline(timeout_ms);
	bool ok = true;

	pthread_mutex_lock(&f->lock);
	while (ok && fake_n_done_locked(f, type) < n)
		ok = fake_wait_locked(f, &deadline);
	ok = fake_n_done_locked(f, type) >= n;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

bool
fake_wait_in_flight(struct fake *f, unsigned n, unsigned timeout_ms)
{
	struct timespec deadline = fake_deadline(timeout_ms);
	bool ok = true;

	pthread_mutex_lock(&f->lock);
	while (ok && f->in_flight < n)
		ok = fake_wait_locked(f, &deadline);
	ok = f->in_flight >= n;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

/* --- failures ----------------------------------------------------------- */

void
fake_fail_writes(struct fake *f, unsigned k, int err)
{
	pthread_mutex_lock(&f->lock);
	f->fail_writes = k;
	f->fail_writes_err = err;
	pthread_mutex_unlock(&f->lock);
}

void
fake_fail_writes_at(struct fake *f, uint64_t off, int err)
{
	pthread_mutex_lock(&f->lock);
	f->fail_at_set = true;
	f->fail_at = off;
	f->fail_at_err = err;
	pthread_mutex_unlock(&f->lock);
}

void
fake_fail_flushes(struct fake *f, unsigned k, int err)
{
	pthread_mutex_lock(&f->lock);
	f->fail_flushes = k;
	f->fail_flushes_err = err;
	pthread_mutex_unlock(&f->lock);
}

void
fake_heal(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->fail_writes = f->fail_flushes = 0;
	f->fail_at_set = false;
	pthread_mutex_unlock(&f->lock);
}

/* --- holding writes in flight ------------------------------------------- */

void
fake_hold(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->holding = true;
	pthread_mutex_unlock(&f->lock);
}

void
fake_release(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	for (struct backend_io *io = f->held; io; io = io->next)
		fake_complete_locked(f, io);
	f->held = NULL;
	f->held_tail = &f->held;
	f->holding = false;
	pthread_mutex_unlock(&f->lock);
}

void
fake_release_newest_first(struct fake *f)
{
	struct backend_io *rev = NULL;

	pthread_mutex_lock(&f->lock);
	while (f->held) {
		struct backend_io *io = f->held;
		f->held = io->next;
		io->next = rev;
		rev = io;
	}
	for (struct backend_io *io = rev; io; io = io->next)
		fake_complete_locked(f, io);
	f->held_tail = &f->held;
	f->holding = false;
	pthread_mutex_unlock(&f->lock);
}

void
fake_hold_flushes(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->holding_flushes = true;
	pthread_mutex_unlock(&f->lock);
}

void
fake_release_flushes(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->holding_flushes = false;
	f->flush_gen++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

void
fake_release_held_flushes(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->flush_gen++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* --- latency ------------------------------------------------------------ */

void
fake_set_latency_us(struct fake *f, unsigned us)
{
	pthread_mutex_lock(&f->lock);
	f->latency_us = us;
	pthread_mutex_unlock(&f->lock);
}
