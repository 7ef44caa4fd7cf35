/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * linkest.c - the round-trip and bandwidth estimate of a device's link,
 * and the window that follows it (see linkest.h).  No locks, no clocks:
 * the caller holds its device's est_lock and passes the time.
 */
#include "linkest.h"

/* Busy time up to NOW: time with writes in flight since the last event. */
static void
linkest_tick(struct linkest *e, uint64_t now_ns)
{
	if (e->inflight > 0 && now_ns > e->last_ns)
		e->period_busy_ns += now_ns - e->last_ns;
	e->last_ns = now_ns;
}

void
linkest_begin(struct linkest *e, uint64_t bytes, uint64_t now_ns)
{
	linkest_tick(e, now_ns);
	e->inflight++;
	e->inflight_bytes += bytes;
	if (e->inflight > e->inflight_max)
		e->inflight_max = e->inflight;
	e->avg_write_bytes =
	    e->avg_write_bytes ? (e->avg_write_bytes * 7 + bytes) / 8 : bytes;
}

/* A period is at least LINKEST_PERIOD_NS and one round trip long. */
static uint64_t
linkest_period_ns(const struct linkest *e)
{
	return e->srtt_ns > LINKEST_PERIOD_NS ? e->srtt_ns : LINKEST_PERIOD_NS;
}

/* End the period: its rate into the ring and, as the kernel smooths
 * avg_write_bandwidth, into bw_bps weighted by the period's length. */
static void
linkest_sample(struct linkest *e)
{
	uint64_t busy = e->period_busy_ns;
	uint64_t bw = (uint64_t)((double)e->period_bytes * 1e9 / (double)busy);

	e->bw_ring[e->bw_next] = bw;
	e->bw_next = (e->bw_next + 1) % LINKEST_BW_PERIODS;
	if (e->periods++ == 0 || busy >= LINKEST_SMOOTH_NS)
		e->bw_bps = bw;
	else
		e->bw_bps =
		    (uint64_t)(((double)e->bw_bps *
				       (double)(LINKEST_SMOOTH_NS - busy) +
				   (double)bw * (double)busy) /
			(double)LINKEST_SMOOTH_NS);
	e->period_bytes = 0;
	e->period_busy_ns = 0;
}

void
linkest_end(struct linkest *e, uint64_t bytes, uint64_t latency_ns, bool ok,
    uint64_t now_ns)
{
	linkest_tick(e, now_ns);
	if (e->inflight > 0)
		e->inflight--;
	e->inflight_bytes -=
	    bytes < e->inflight_bytes ? bytes : e->inflight_bytes;
	if (!ok)
		return;
	e->period_bytes += bytes;
	if (latency_ns == 0)
		latency_ns = 1;
	if (e->rtt_min_ns == 0 || latency_ns <= e->rtt_min_ns ||
	    now_ns - e->rtt_stamp_ns > LINKEST_RTT_WINDOW_NS) {
		e->rtt_min_ns = latency_ns;
		e->rtt_stamp_ns = now_ns;
	}
	e->srtt_ns =
	    e->srtt_ns ? (e->srtt_ns * 7 + latency_ns) / 8 : latency_ns;
	if (e->period_busy_ns >= linkest_period_ns(e))
		linkest_sample(e);
}

uint64_t
linkest_rtt_ns(const struct linkest *e)
{
	return e->rtt_min_ns;
}

uint64_t
linkest_bw_max_bps(const struct linkest *e)
{
	uint64_t max = 0;

	for (unsigned i = 0; i < LINKEST_BW_PERIODS; i++)
		if (e->bw_ring[i] > max)
			max = e->bw_ring[i];
	return max;
}

uint64_t
linkest_readahead(const struct linkest *e, uint64_t base, uint64_t max)
{
	uint64_t bw = linkest_bw_max_bps(e), rtt = linkest_rtt_ns(e);
	uint64_t want = base;

	if (bw > 0 && rtt > 0) {
		double bdp = (double)bw * (double)rtt / 1e9 * LINKEST_GAIN;
		if (bdp > (double)want)
			want = bdp > 1e18 ? UINT64_MAX : (uint64_t)bdp;
	}
	if (want > max)
		want = max > base ? max : base;
	return want;
}

unsigned
linkest_window(const struct linkest *e, unsigned floor, uint64_t max_bytes,
    unsigned max_writes)
{
	uint64_t size = e->avg_write_bytes ? e->avg_write_bytes : 1;
	uint64_t want = floor;
	uint64_t bw = linkest_bw_max_bps(e), rtt = linkest_rtt_ns(e);

	/* The floor in bytes: large writes fill a link in fewer
	 * (LINKEST_FLOOR_BYTES). */
	if (want > LINKEST_FLOOR_MIN && want * size > LINKEST_FLOOR_BYTES) {
		want = LINKEST_FLOOR_BYTES / size;
		if (want < LINKEST_FLOOR_MIN)
			want = LINKEST_FLOOR_MIN;
	}
	if (bw > 0 && rtt > 0) {
		double bdp = (double)bw * (double)rtt / 1e9 * LINKEST_GAIN;
		double writes = bdp / (double)size + 1;
		if (writes > (double)want)
			want = writes > 1e9 ? 1000000000u : (uint64_t)writes;
	}
	if (max_bytes > 0 && want > max_bytes / size)
		want = max_bytes / size;
	if (want > max_writes)
		want = max_writes;
	return want < 1 ? 1 : (unsigned)want;
}
