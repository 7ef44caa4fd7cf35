/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fake-backend.h - a backing device for unit tests: N bytes of memory
 * behind the real struct backend, reached through the same door
 * (backend_read_begin, backend_write_begin, ...) as a file or a remote.
 *
 * It is deterministic and scriptable:
 *
 *  - every operation is logged (fake_op), in the order it was issued, with
 *    the tick it was issued and the tick it completed on one clock, so a
 *    test can say "the flush came after every write";
 *  - it fails on demand: the next K writes, every write overlapping an
 *    offset, the next K flushes (fake_fail_*), until fake_heal();
 *  - it takes writes in one step (pwrite, or pwritev if asked for) or in
 *    two (pwrite_start/pwrite_end, as a remote), and counts the writes in
 *    flight (started, not ended) and the most ever in flight at once;
 *  - it holds writes on demand: after fake_hold() a write is not completed
 *    (one step: pwrite blocks; two steps: pwrite_end blocks) until the
 *    test releases it, in issue order or newest first (out of order);
 *    and flushes (fake_hold_flushes: a flush blocks until released);
 *  - it has a latency on demand (fake_set_latency_us): a write ends no
 *    sooner than that long after it was issued, as over a link, and it
 *    counts the bytes of the writes in flight and the most at once.
 *
 * Data lands in the memory when a write completes; a failed write changes
 * nothing.  The lock is internal: every function may be called from any
 * thread.  backend_close() only marks the fake closed (an export closes its
 * backend when freed); fake_free() frees it.
 */
#ifndef WBD_FAKE_BACKEND_H
#define WBD_FAKE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct fake;

enum fake_op_type {
	FAKE_PREAD,
	FAKE_PWRITE,            /* any write: one step, two steps, gathered */
	FAKE_FLUSH,
	FAKE_TRIM,
	FAKE_ZERO,
};

struct fake_op {
	enum fake_op_type type;
	uint64_t off;
	uint32_t count;
	unsigned flags;                 /* BACKEND_WRITE_FUA, or 0 */
	bool vectored;                  /* came through pwritev */
	bool two_step;                  /* came through pwrite_start */
	int result;                     /* 0 or a negative errno */
	uint64_t issued_tick, done_tick;        /* done_tick 0: in flight */
};

struct fake_params {
	uint64_t size_bytes;
	unsigned caps;                  /* BACKEND_* capability flags */
	bool two_step;                  /* offer pwrite_start/pwrite_end */
	bool pwritev;                   /* offer pwritev (gather) */
};

struct fake *fake_new(const struct fake_params *p);
void fake_free(struct fake *f);
/* The struct backend to hand to the daemon's code. */
struct backend *fake_backend(struct fake *f);
/* The fake behind B (which must be one). */
struct fake *fake_of(struct backend *b);
bool fake_closed(struct fake *f);

/* The device's memory: copy it in (no log entry) or out. */
void fake_set_data(struct fake *f, uint64_t off, const void *buf, size_t len);
void fake_get_data(struct fake *f, uint64_t off, void *buf, size_t len);

/* --- the log ------------------------------------------------------------ */

/* Operations issued so far; *OP a copy of the Ith (0 is the first). */
size_t fake_n_ops(struct fake *f);
void fake_op(struct fake *f, size_t i, struct fake_op *op);
/* How many operations of TYPE were issued (FLAGS_SET: with all of these
 * write flags; 0 for any). */
size_t fake_count(struct fake *f, enum fake_op_type type, unsigned flags_set);
/* A tick of the log's clock, now: an operation issued after this call
 * has a later issued_tick, one completed before it an earlier done_tick,
 * so that a test can place its own events among the device's. */
uint64_t fake_tick(struct fake *f);
/* Forget the log and the in-flight maximum (the data stays). */
void fake_clear_log(struct fake *f);
/* Writes started and not ended now, and the most at once since the log
 * was last cleared. */
unsigned fake_in_flight(struct fake *f);
unsigned fake_max_in_flight(struct fake *f);
/* The same in bytes. */
uint64_t fake_in_flight_bytes(struct fake *f);
uint64_t fake_max_in_flight_bytes(struct fake *f);

/* Wait until at least N operations of TYPE have completed (or, for
 * fake_wait_in_flight, N writes are in flight); false after TIMEOUT_MS. */
bool fake_wait_done(struct fake *f, enum fake_op_type type, size_t n,
    unsigned timeout_ms);
bool fake_wait_in_flight(struct fake *f, unsigned n, unsigned timeout_ms);

/* --- failures ----------------------------------------------------------- */

/* The next K writes fail with -ERR (errno, positive). */
void fake_fail_writes(struct fake *f, unsigned k, int err);
/* Every write overlapping byte OFF fails with -ERR until healed. */
void fake_fail_writes_at(struct fake *f, uint64_t off, int err);
/* The next K flushes fail with -ERR. */
void fake_fail_flushes(struct fake *f, unsigned k, int err);
/* No more failures. */
void fake_heal(struct fake *f);

/* --- holding writes in flight ------------------------------------------- */

/* Writes issued from now on are held, not completed, until released. */
void fake_hold(struct fake *f);
/* Complete the writes held now, in issue order or newest first, and stop
 * holding. */
void fake_release(struct fake *f);
void fake_release_newest_first(struct fake *f);
/* Flushes issued from now on are held (the caller blocks in the flush)
 * until fake_release_flushes, which completes them and stops holding.
 * A flush's failure (fake_fail_flushes) is decided when it is issued. */
void fake_hold_flushes(struct fake *f);
void fake_release_flushes(struct fake *f);
/* Complete the flushes held now, and hold those issued from now on. */
void fake_release_held_flushes(struct fake *f);

/* --- latency ------------------------------------------------------------ */

/* Every write issued from now on ends no sooner than US microseconds
 * after it was issued (0: at once). */
void fake_set_latency_us(struct fake *f, unsigned us);

#endif
