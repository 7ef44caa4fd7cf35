/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats.c - per-I/O-thread request statistics, per-device writeback
 * statistics, and the fixed log-scale histograms both use (see stats.h for
 * who writes what).  Nothing here takes a lock.
 */
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "clock.h"
#include "nbd-proto.h"
#include "stats.h"

double
stats_hist_bound_s(unsigned i)
{
	return (double)(1ull << i) / 1e6;
}

uint64_t
stats_hist_count(const struct stats_hist *h)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < STATS_HIST_BUCKETS; i++)
		n += load_relaxed(&h->bucket[i]);
	return n;
}

uint64_t
stats_hist_quantile_ns(const struct stats_hist *h, double q)
{
	uint64_t n = stats_hist_count(h), seen = 0;

	if (n == 0)
		return 0;
	double rank = q * (double)n;
	for (unsigned i = 0; i < STATS_HIST_FINITE; i++) {
		uint64_t b = load_relaxed(&h->bucket[i]);
		if (b == 0 || (double)(seen + b) < rank) {
			seen += b;
			continue;
		}
		double lo = i ? (double)(1ull << (i - 1)) * 1000 : 0;
		double hi = (double)(1ull << i) * 1000;
		double frac = (rank - (double)seen) / (double)b;
		return (uint64_t)(lo + (hi - lo) * frac);
	}
	/* In the +Inf bucket: the last finite bound is all that is known. */
	return (1ull << (STATS_HIST_FINITE - 1)) * 1000;
}

static void
stats_hist_note(struct stats_hist *h, uint64_t ns)
{
	STATS_BUMP(&h->bucket[stats_hist_index(ns)], 1);
	STATS_BUMP(&h->sum_ns, ns);
}

static void
stats_hist_add(struct stats_hist *sum, const struct stats_hist *h)
{
	for (unsigned i = 0; i < STATS_HIST_BUCKETS; i++)
		STATS_BUMP(&sum->bucket[i], load_relaxed(&h->bucket[i]));
	STATS_BUMP(&sum->sum_ns, load_relaxed(&h->sum_ns));
}

/* --- per I/O thread ----------------------------------------------------- */

struct stats_export_io *
stats_io_export(struct stats_io *s, const void *key)
{
	struct stats_export_io *x;

	for (x = load_relaxed(&s->head); x; x = x->next)
		if (x->key == key)
			return x;
	x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->key = key;
	x->next = load_relaxed(&s->head);
	store_release(&s->head, x);
	return x;
}

void
stats_io_free(struct stats_io *s)
{
	struct stats_export_io *x = load_relaxed(&s->head), *next;

	for (; x; x = next) {
		next = x->next;
		free(x);
	}
	store_relaxed(&s->head, NULL);
}

uint64_t
stats_pace_begin(struct stats_export_io *x, bool held)
{
	if (x) {
		STATS_BUMP(&x->paced, 1);
		if (held)
			STATS_BUMP(&x->held, 1);
	}
	return now_ns();
}

void
stats_request_done(struct stats_export_io *x, uint16_t type, uint16_t flags,
    uint32_t count, bool failed, bool queued, uint64_t start_ns,
    uint64_t paced_ns)
{
	unsigned cmd = type < STATS_CMD_OTHER ? type : STATS_CMD_OTHER;
	enum stats_op op = STATS_OP_NONE;

	if (!x)
		return;
	STATS_BUMP(&x->requests[cmd], 1);
	if (failed)
		STATS_BUMP(&x->errors[cmd], 1);
	else if (type == NBD_CMD_READ)
		STATS_BUMP(&x->read_bytes, count);
	else if (type == NBD_CMD_WRITE)
		STATS_BUMP(&x->written_bytes, count);
	if (!start_ns)
		return;
	uint64_t now = now_ns();
	if (paced_ns) {
		STATS_BUMP(&x->paced_done, 1);
		STATS_BUMP(&x->pause_ns, now - paced_ns);
	}
	if (type == NBD_CMD_READ)
		op = queued ? STATS_OP_READ_MISS : STATS_OP_READ_HIT;
	else if (type == NBD_CMD_WRITE)
		op = flags & NBD_CMD_FLAG_FUA ? STATS_OP_FUA : STATS_OP_WRITE;
	else if (type == NBD_CMD_FLUSH)
		op = STATS_OP_FLUSH;
	if (op != STATS_OP_NONE)
		stats_hist_note(&x->lat[op], now - start_ns);
}

void
stats_io_add(struct stats_io *s, const void *key, struct stats_export_io *sum)
{
	struct stats_export_io *x = load_acquire(&s->head);

	for (; x; x = x->next) {
		if (x->key != key)
			continue;
		for (unsigned i = 0; i < STATS_N_CMDS; i++) {
			STATS_BUMP(&sum->requests[i],
			    load_relaxed(&x->requests[i]));
			STATS_BUMP(&sum->errors[i],
			    load_relaxed(&x->errors[i]));
		}
		STATS_BUMP(&sum->read_bytes, load_relaxed(&x->read_bytes));
		STATS_BUMP(&sum->written_bytes,
		    load_relaxed(&x->written_bytes));
		STATS_BUMP(&sum->paced, load_relaxed(&x->paced));
		STATS_BUMP(&sum->held, load_relaxed(&x->held));
		STATS_BUMP(&sum->paced_done, load_relaxed(&x->paced_done));
		STATS_BUMP(&sum->pause_ns, load_relaxed(&x->pause_ns));
		for (unsigned i = 0; i < STATS_N_OPS; i++)
			stats_hist_add(&sum->lat[i], &x->lat[i]);
	}
}

/* --- per device ---------------------------------------------------------- */

void
stats_wb_run_begin(struct stats_wb *w)
{
	add_relaxed(&w->in_flight, 1);
}

void
stats_wb_run_end(struct stats_wb *w, unsigned reason, uint64_t bytes,
    uint64_t ns, bool ok)
{
	if (reason >= STATS_WB_REASONS)
		reason = 0;
	if (ok) {
		add_relaxed(&w->bytes[reason], bytes);
		add_relaxed(&w->runs[reason], 1);
	} else {
		add_relaxed(&w->failed_runs, 1);
	}
	add_relaxed(&w->run_time.bucket[stats_hist_index(ns)], 1);
	add_relaxed(&w->run_time.sum_ns, ns);
	sub_relaxed(&w->in_flight, 1);
}

void
stats_wb_get(const struct stats_wb *w, struct stats_wb *out)
{
	memset(out, 0, sizeof *out);
	for (unsigned i = 0; i < STATS_WB_REASONS; i++) {
		store_relaxed(&out->bytes[i], load_relaxed(&w->bytes[i]));
		store_relaxed(&out->runs[i], load_relaxed(&w->runs[i]));
	}
	store_relaxed(&out->failed_runs, load_relaxed(&w->failed_runs));
	store_relaxed(&out->in_flight, load_relaxed(&w->in_flight));
	stats_hist_add(&out->run_time, &w->run_time);
}
