/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats.h - request counters and latency histograms, kept per I/O thread
 * and summed when someone asks (memcached's way), and writeback counters
 * per device.
 *
 * Requests: each I/O thread has a struct stats_io, a list of one struct
 * stats_export_io per export its connections have served.  Only that
 * thread writes a stats_export_io, with relaxed atomic stores (no locked
 * instruction, no cache line shared with another writer); any thread reads
 * it with relaxed atomic loads and adds up the threads' figures
 * (stats_io_add).  An entry, once published (a release store of the list
 * head), stays until the thread's stats are freed with the daemon.
 *
 * Writeback: a device's flush-MAJ:MIN workers update its struct stats_wb
 * with relaxed atomic additions, once per run written (not per request).
 *
 * The counters are _Atomic (atomics.h).  A reader's copy (stats_io_add's
 * SUM, stats_wb_get's OUT) has the same types; it is its thread's own.
 *
 * Histograms have fixed log-scale buckets: bucket i counts durations of at
 * most 2^i microseconds (1 us .. 2^24 us, about 16.8 s), the last one
 * everything longer (+Inf).
 */
#ifndef WBD_STATS_H
#define WBD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"

#define STATS_HIST_FINITE 25
#define STATS_HIST_BUCKETS (STATS_HIST_FINITE + 1)

struct stats_hist {
	_Atomic uint64_t bucket[STATS_HIST_BUCKETS]; /* not cumulative */
	_Atomic uint64_t sum_ns;
};

/* The latency histograms of an export's requests. */
enum stats_op {
	STATS_OP_READ_HIT,  /* a READ answered from the cache */
	STATS_OP_READ_MISS, /* a READ that went to the backing */
	STATS_OP_WRITE,     /* a WRITE without FUA */
	STATS_OP_FLUSH,
	STATS_OP_FUA, /* a WRITE with FUA */
	STATS_N_OPS,
	STATS_OP_NONE = STATS_N_OPS, /* not timed (TRIM, ...) */
};

/* Requests are counted by NBD command type (READ 0 .. BLOCK_STATUS 7);
 * any other type is "other". */
#define STATS_N_CMDS 9
#define STATS_CMD_OTHER (STATS_N_CMDS - 1)

/* One export on one I/O thread.  Written by that thread only. */
struct stats_export_io {
	struct stats_export_io *next;
	const void *key; /* the export */
	_Atomic uint64_t requests[STATS_N_CMDS];
	_Atomic uint64_t errors[STATS_N_CMDS]; /* answered with an NBD error */
	_Atomic uint64_t read_bytes, written_bytes;
	_Atomic uint64_t paced;      /* write replies held (throttled) */
	_Atomic uint64_t held;       /* of those, held at the limit */
	_Atomic uint64_t paced_done; /* of those, answered */
	_Atomic uint64_t pause_ns;   /* time they were held, in all */
	struct stats_hist lat[STATS_N_OPS];
};

/* One I/O thread's statistics. */
struct stats_io {
	/* Published by release stores. */
	_Atomic(struct stats_export_io *) head;
};

/* The writeback reasons counted (enum wb_reason's values). */
#define STATS_WB_REASONS 6

/* One writeback device.  Updated by its workers (atomic additions). */
struct stats_wb {
	/* Written by runs that worked, and those runs. */
	_Atomic uint64_t bytes[STATS_WB_REASONS];
	_Atomic uint64_t runs[STATS_WB_REASONS];
	_Atomic uint64_t failed_runs;
	_Atomic uint64_t in_flight; /* runs begun, not ended */
	struct stats_hist run_time; /* every run, failed or not */
};

/* --- histograms --------------------------------------------------------- */

/* The upper bound of bucket I in seconds (I < STATS_HIST_FINITE). */
double stats_hist_bound_s(unsigned i);

static inline unsigned
stats_hist_index(uint64_t ns)
{
	uint64_t q = ns ? (ns - 1) / 1000 : 0;
	unsigned i = q ? 64u - (unsigned)__builtin_clzll(q) : 0;

	return i < STATS_HIST_FINITE ? i : STATS_HIST_FINITE;
}

/* The estimated Q-quantile (0 < Q <= 1) of H in nanoseconds, by linear
 * interpolation inside its bucket (as Prometheus's histogram_quantile);
 * 0 if H is empty. */
uint64_t stats_hist_quantile_ns(const struct stats_hist *h, double q);
/* Observations in H. */
uint64_t stats_hist_count(const struct stats_hist *h);

/* --- an I/O thread's side ------------------------------------------------ */

/* Its own thread only: a relaxed store, seen whole by readers. */
#define STATS_BUMP(p, n) store_relaxed((p), load_relaxed(p) + (n))

/* S's entry for export KEY, made on first use (S's thread only); NULL if
 * out of memory (its requests then go uncounted). */
struct stats_export_io *stats_io_export(struct stats_io *s, const void *key);
/* Free S's entries, once no thread reads them. */
void stats_io_free(struct stats_io *s);

/* A write reply of export X is held by throttling from now (X's thread),
 * HELD: at the dirty limit, until there is room.  Returns now_ns(), for
 * stats_request_done's PACED_NS. */
uint64_t stats_pace_begin(struct stats_export_io *x, bool held);

/*
 * A request of export X has been answered (X's thread; X may be NULL): NBD
 * command TYPE and FLAGS, COUNT bytes, FAILED or not.  QUEUED: it went to
 * a worker (a READ then missed).  START_NS: when it was submitted (0:
 * never, refused by validation: not timed); PACED_NS: when its reply
 * began to be held (0: never).
 */
void stats_request_done(struct stats_export_io *x, uint16_t type,
    uint16_t flags, uint32_t count, bool failed, bool queued, uint64_t start_ns,
    uint64_t paced_ns);

/* --- readers (any thread) ----------------------------------------------- */

/* Add S's figures for export KEY into SUM (zeroed by the caller). */
void
stats_io_add(struct stats_io *s, const void *key, struct stats_export_io *sum);

/* --- writeback (workers) ------------------------------------------------- */

void stats_wb_run_begin(struct stats_wb *w);
void stats_wb_run_end(struct stats_wb *w, unsigned reason, uint64_t bytes,
    uint64_t ns, bool ok);
/* A copy of W, read with relaxed loads. */
void stats_wb_get(const struct stats_wb *w, struct stats_wb *out);

#endif
