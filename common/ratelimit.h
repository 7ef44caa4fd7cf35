/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ratelimit.h - at most one log line per interval for an event that may
 * repeat fast (a refused client, a failed accept), with a count of those
 * not logged.  Any thread: the state is atomic.
 */
#ifndef WBD_RATELIMIT_H
#define WBD_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"

struct ratelimit {
	uint64_t next_ns; /* the next line is due after */
	unsigned quiet;   /* events not logged since the last */
};

/*
 * Is a line due now (one per INTERVAL_NS)?  If so, *QUIET gets the number
 * of events not logged since the last line; if not, this one is counted.
 */
static inline bool
ratelimit_due(struct ratelimit *rl, uint64_t interval_ns, unsigned *quiet)
{
	uint64_t now = now_ns();
	uint64_t next = __atomic_load_n(&rl->next_ns, __ATOMIC_RELAXED);

	if (now < next ||
	    !__atomic_compare_exchange_n(&rl->next_ns, &next, now + interval_ns,
		false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(&rl->quiet, 1, __ATOMIC_RELAXED);
		return false;
	}
	*quiet = __atomic_exchange_n(&rl->quiet, 0, __ATOMIC_RELAXED);
	return true;
}

#endif
