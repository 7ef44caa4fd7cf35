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

#include "atomics.h"
#include "clock.h"

struct ratelimit {
	_Atomic uint64_t next_ns; /* the window closes (the next may open) */
	_Atomic unsigned logged;  /* lines logged in the window, and refused */
	_Atomic unsigned quiet;   /* events not logged since the last line */
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
	uint64_t next = load_relaxed(&rl->next_ns);

	if (now >= next &&
	    atomic_compare_exchange_strong_explicit(&rl->next_ns, &next,
		now + interval_ns, memory_order_relaxed,
		memory_order_relaxed)) {
		store_relaxed(&rl->logged, 1);
	} else if (now >= next ||
	    (atomic_fetch_add_explicit(&rl->logged, 1, memory_order_relaxed) +
		(1)) > burst) {
		add_relaxed(&rl->quiet, 1);
		return false;
	}
	*quiet = atomic_exchange_explicit(&rl->quiet, 0, memory_order_relaxed);
	return true;
}

/* One line per INTERVAL_NS at most (a burst of one). */
static inline bool
ratelimit_due(struct ratelimit *rl, uint64_t interval_ns, unsigned *quiet)
{
	return ratelimit_burst_due(rl, interval_ns, 1, quiet);
}

#endif
