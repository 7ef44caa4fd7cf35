/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * linkest.h - a device's link as writeback sees it: the round trip and
 * the write bandwidth, estimated from completed writes, and the window
 * of writes to keep in flight, bandwidth x round trip.
 *
 * After the kernel's wb_update_bandwidth (mm/page-writeback.c): bytes
 * written over periods of at least LINKEST_PERIOD_NS, smoothed over
 * LINKEST_SMOOTH_NS; and after BBR: the round trip is the least latency
 * of a write seen within LINKEST_RTT_WINDOW_NS, the bandwidth the window
 * follows the most of the last LINKEST_BW_PERIODS periods, and the window
 * holds twice the product, so that a window that limits the bandwidth
 * sees it rise and grows with it (doubling per period at most).
 *
 * Pure functions of a struct linkest and the times they are given, for
 * the unit tests; the caller serialises them (wb_dev.est_lock).  Only time
 * with writes in flight counts: an idle device's bandwidth is not zero.
 */
#ifndef WBD_LINKEST_H
#define WBD_LINKEST_H

#include <stdbool.h>
#include <stdint.h>

#define LINKEST_PERIOD_NS (200ull * 1000000ull)
#define LINKEST_SMOOTH_NS (3000ull * 1000000ull)
#define LINKEST_RTT_WINDOW_NS (10000ull * 1000000ull)
#define LINKEST_BW_PERIODS 8
#define LINKEST_GAIN 2
/*
 * A window's floor holds at most LINKEST_FLOOR_BYTES, and at least
 * LINKEST_FLOOR_MIN writes: a floor of 16 writes is 64 KiB of 4 KiB
 * pages but 16 MiB of 1 MiB runs, and 64 MiB at a sync's floor of 64,
 * where the link's own product was 1-3 MiB.  What is in flight past the
 * link's product only queues at the remote, costing it and wbd CPU for
 * each write it holds (WAN profile, 2 GiB of 1 MiB writes: nbdkit's CPU
 * 2.57 s, wbd's 1.43 s with the floor of 16; 1.55 s and 1.12 s with a
 * bound of 8 MiB; the LAN profile, bound by CPU, 950 -> 1,100 MiB/s).
 */
#define LINKEST_FLOOR_BYTES (4ull << 20)
#define LINKEST_FLOOR_MIN 2

struct linkest {
	/* Round trip: the least write latency since rtt_stamp_ns (taken
	 * afresh once it is LINKEST_RTT_WINDOW_NS old), and a smoothed
	 * latency (gain 1/8, as TCP's srtt).  0: none yet. */
	uint64_t rtt_min_ns, rtt_stamp_ns, srtt_ns;
	/* Bandwidth, bytes/s: smoothed (bw_bps), and the period samples the
	 * window follows (a ring, newest at bw_next - 1). */
	uint64_t bw_bps;
	uint64_t bw_ring[LINKEST_BW_PERIODS];
	unsigned bw_next;
	uint64_t periods; /* samples taken */
	/* The period under way: bytes completed, busy time so far, and
	 * the last begin or end. */
	uint64_t period_bytes, period_busy_ns, last_ns;
	/* Writes in flight now, their bytes, the most at once, and the
	 * size of a write, smoothed (gain 1/8). */
	unsigned inflight, inflight_max;
	uint64_t inflight_bytes;
	uint64_t avg_write_bytes;
};

/* A write of BYTES begins at NOW_NS. */
void linkest_begin(struct linkest *e, uint64_t bytes, uint64_t now_ns);
/* A write of BYTES begun LATENCY_NS ago ends at NOW_NS, written (OK) or
 * failed (then it counts in neither estimate). */
void linkest_end(struct linkest *e, uint64_t bytes, uint64_t latency_ns,
    bool ok, uint64_t now_ns);
/* The round trip, 0 if none is known yet. */
uint64_t linkest_rtt_ns(const struct linkest *e);
/* The bandwidth the window follows: the most of the recent periods. */
uint64_t linkest_bw_max_bps(const struct linkest *e);
/*
 * The writes to keep in flight: LINKEST_GAIN x bandwidth x round trip in
 * writes of the average size, at least FLOOR (and FLOOR until an
 * estimate exists) but no more of them than LINKEST_FLOOR_BYTES holds
 * (LINKEST_FLOOR_MIN at least), then at most MAX_BYTES in bytes (0: no
 * bound) and MAX_WRITES; never below 1.
 */
unsigned linkest_window(const struct linkest *e, unsigned floor,
    uint64_t max_bytes, unsigned max_writes);

/*
 * Read-ahead on a link: LINKEST_GAIN x bandwidth x round trip in bytes
 * (the estimate of a device's reads), so that a sequential reader keeps
 * the link full however long its round trip; at least BASE (and BASE
 * until an estimate exists), at most MAX (never below BASE).
 */
uint64_t
linkest_readahead(const struct linkest *e, uint64_t base, uint64_t max);

#endif
