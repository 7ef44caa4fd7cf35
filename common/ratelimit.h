/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ratelimit.h - at most a few log lines per interval for an event that may
 * repeat fast (a refused client, a failed accept, a handshake cut short),
 * with a count of those not logged.  A window of INTERVAL_NS opens with the
 * first line after the last window closed and holds up to BURST lines
 * (ratelimit_burst_due); ratelimit_due is a burst of one.  Any thread: the
 * state is atomic (two threads racing at a window's start may let one line
 * more through, never fewer).
 */
#ifndef WBD_RATELIMIT_H
#define WBD_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"

struct ratelimit {
	uint64_t next_ns; /* the window closes (the next one may open) */
	unsigned logged;  /* lines logged in the window, and those refused */
	unsigned quiet;   /* events not logged since the last line */
};

/*
 * Is a line due now (at most BURST in a window of INTERVAL_NS)?  If so,
 * *QUIET gets the number of events not logged since the last line; if not,
 * this one is counted.
 */
static inline bool
ratelimit_burst_due(struct ratelimit *rl, uint64_t interval_ns, unsigned burst,
    unsigned *quiet)
{
	uint64_t now = now_ns();
	uint64_t next = __atomic_load_n(&rl->next_ns, __ATOMIC_RELAXED);

	if (now >= next &&
	    __atomic_compare_exchange_n(&rl->next_ns, &next, now + interval_ns,
		false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		__atomic_store_n(&rl->logged, 1, __ATOMIC_RELAXED);
	} else if (now >= next ||
	    __atomic_add_fetch(&rl->logged, 1, __ATOMIC_RELAXED) > burst) {
		__atomic_add_fetch(&rl->quiet, 1, __ATOMIC_RELAXED);
		return false;
	}
	*quiet = __atomic_exchange_n(&rl->quiet, 0, __ATOMIC_RELAXED);
	return true;
}

/* One line per INTERVAL_NS at most (a burst of one). */
static inline bool
ratelimit_due(struct ratelimit *rl, uint64_t interval_ns, unsigned *quiet)
{
	return ratelimit_burst_due(rl, interval_ns, 1, quiet);
}

#endif
