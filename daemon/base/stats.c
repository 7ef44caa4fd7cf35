/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats.c - per-I/O-thread request statistics, per-device writeback
 * statistics, and the fixed log-scale histograms both use (see stats.h for
 * who writes what).  Nothing here takes a lock.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "nbd-proto.h"
#include "stats.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

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
		n += h->bucket[i];
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
		if (h->bucket[i] == 0 || (double)(seen + h->bucket[i]) < rank) {
			seen += h->bucket[i];
			continue;
		}
		double lo = i ? (double)(1ull << (i - 1)) * 1000 : 0;
		double hi = (double)(1ull << i) * 1000;
		double frac = (rank - (double)seen) / (double)h->bucket[i];
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
		sum->bucket[i] += LOAD(&h->bucket[i]);
	sum->sum_ns += LOAD(&h->sum_ns);
}

/* --- per I/O thread ----------------------------------------------------- */

struct stats_export_io *
stats_io_export(struct stats_io *s, const void *key)
{
	struct stats_export_io *x;

	for (x = s->head; x; x = x->next)
		if (x->key == key)
			return x;
	x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->key = key;
	x->next = s->head;
	__atomic_store_n(&s->head, x, __ATOMIC_RELEASE);
	return x;
}

void
stats_io_free(struct stats_io *s)
{
	struct stats_export_io *x = s->head, *next;

	for (; x; x = next) {
		next = x->next;
		free(x);
	}
	s->head = NULL;
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
	struct stats_export_io *x = __atomic_load_n(&s->head, __ATOMIC_ACQUIRE);

	for (; x; x = x->next) {
		if (x->key != key)
			continue;
		for (unsigned i = 0; i < STATS_N_CMDS; i++) {
			sum->requests[i] += LOAD(&x->requests[i]);
			sum->errors[i] += LOAD(&x->errors[i]);
		}
		sum->read_bytes += LOAD(&x->read_bytes);
		sum->written_bytes += LOAD(&x->written_bytes);
		sum->paced += LOAD(&x->paced);
		sum->held += LOAD(&x->held);
		sum->paced_done += LOAD(&x->paced_done);
		sum->pause_ns += LOAD(&x->pause_ns);
		for (unsigned i = 0; i < STATS_N_OPS; i++)
			stats_hist_add(&sum->lat[i], &x->lat[i]);
	}
}

/* --- per device ---------------------------------------------------------- */

#define ADD(p, n) __atomic_add_fetch((p), (n), __ATOMIC_RELAXED)

void
stats_wb_run_begin(struct stats_wb *w)
{
	ADD(&w->in_flight, 1);
}

void
stats_wb_run_end(struct stats_wb *w, unsigned reason, uint64_t bytes,
    uint64_t ns, bool ok)
{
	if (reason >= STATS_WB_REASONS)
		reason = 0;
	if (ok) {
		ADD(&w->bytes[reason], bytes);
		ADD(&w->runs[reason], 1);
	} else {
		ADD(&w->failed_runs, 1);
	}
	ADD(&w->run_time.bucket[stats_hist_index(ns)], 1);
	ADD(&w->run_time.sum_ns, ns);
	__atomic_sub_fetch(&w->in_flight, 1, __ATOMIC_RELAXED);
}

void
stats_wb_get(const struct stats_wb *w, struct stats_wb *out)
{
	memset(out, 0, sizeof *out);
	for (unsigned i = 0; i < STATS_WB_REASONS; i++) {
		out->bytes[i] = LOAD(&w->bytes[i]);
		out->runs[i] = LOAD(&w->runs[i]);
	}
	out->failed_runs = LOAD(&w->failed_runs);
	out->in_flight = LOAD(&w->in_flight);
	stats_hist_add(&out->run_time, &w->run_time);
}
