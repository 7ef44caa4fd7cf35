/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * budget.c - the memory budget of limits.max_inflight_bytes (budget.h).
 */
#include "budget.h"
#include "log.h"

/* A "budget full" line at most this often. */
#define BUDGET_LOG_INTERVAL_NS (10ull * 1000000000u)

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

void
budget_init(struct budget *b, uint64_t limit)
{
	*b = (struct budget){ .limit = limit };
}

void
budget_set_limit(struct budget *b, uint64_t limit)
{
	STORE(&b->limit, limit);
}

static uint64_t
budget_reserve(uint64_t limit)
{
	return limit / 8;
}

static uint64_t
budget_small(uint64_t limit)
{
	return limit / 1024;
}

static void
budget_note_peak(struct budget *b, uint64_t used)
{
	uint64_t peak = LOAD(&b->peak);

	while (used > peak &&
	    !__atomic_compare_exchange_n(&b->peak, &peak, used, true,
		__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

bool
budget_take(struct budget *b, size_t n, size_t held)
{
	uint64_t limit = LOAD(&b->limit);
	uint64_t cap = limit - budget_reserve(limit);

	/* Whoever holds little may use the reserve too. */
	if (held + n <= budget_small(limit))
		cap = limit;
	uint64_t used = LOAD(&b->used);

	do {
		/* Alone, any request fits: none can wait for ever. */
		if (used + n > cap && used > 0)
			return false;
	} while (!__atomic_compare_exchange_n(&b->used, &used, used + n, true,
	    __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	budget_note_peak(b, used + n);
	return true;
}

/* Count an event in *N: is a line due (at most one in 10 s; *QUIET gets
 * the number not logged since)? */
static bool
budget_event(uint64_t *n, struct ratelimit *rl, unsigned *quiet)
{
	__atomic_add_fetch(n, 1, __ATOMIC_RELAXED);
	return ratelimit_due(rl, BUDGET_LOG_INTERVAL_NS, quiet);
}

void
budget_note_wait(struct budget *b, size_t n, const char *who)
{
	unsigned quiet;

	if (!budget_event(&b->waits, &b->log_rl, &quiet))
		return;
	log_warnx(
	    "%s: memory budget full (%llu of limits.max_inflight_bytes "
	    "= %llu bytes in use): waiting for %zu bytes before reading more "
	    "(%u other waits not logged)",
	    who, (unsigned long long)LOAD(&b->used),
	    (unsigned long long)LOAD(&b->limit), n, quiet);
}

void
budget_note_stall(struct budget *b, const char *who, unsigned s,
    const char *what)
{
	unsigned quiet;

	if (!budget_event(&b->stalls, &b->stall_rl, &quiet))
		return;
	log_warnx("%s: %s for %u s (limits.stall_timeout_s): closing; its "
		  "requests still complete (%u other connections closed so, "
		  "not logged)",
	    who, what, s, quiet);
}

void
budget_note_pause(struct budget *b, const char *who, uint64_t held,
    enum budget_pause kind, uint64_t limit)
{
	static const struct {
		const char *what, *limit, *reading;
	} k[] = {
		[BUDGET_PAUSE_REQUESTS] = { "requests in flight",
		    "limits.max_requests_per_connection =", "requests" },
		[BUDGET_PAUSE_BYTES] = { "bytes in flight",
		    "limits.max_inflight_bytes_per_connection =", "requests" },
		[BUDGET_PAUSE_HANDSHAKE] = { "bytes of handshake replies unread",
		    "more than", "options" },
	};
	unsigned quiet;

	if (!budget_event(&b->pauses, &b->pause_rl[kind], &quiet))
		return;
	log_info("%s: %llu %s (%s %llu): reading no more %s until replies go "
		 "out (%u other pauses not logged)",
	    who, (unsigned long long)held, k[kind].what, k[kind].limit,
	    (unsigned long long)limit, k[kind].reading, quiet);
}

void
budget_note_cache_skip(struct budget *b, const char *who, const char *dev,
    unsigned max)
{
	unsigned quiet;

	if (!budget_event(&b->cache_skips, &b->cache_skip_rl, &quiet))
		return;
	log_info("%s: CACHE answered without prefetching: device %s has %u "
		 "being carried out (limits.max_cache_requests) (%u others "
		 "not logged)",
	    who, dev, max, quiet);
}

void
budget_charge(struct budget *b, size_t n)
{
	budget_note_peak(b, __atomic_add_fetch(&b->used, n, __ATOMIC_RELAXED));
}

bool
budget_full(const struct budget *b)
{
	return LOAD(&b->used) >= LOAD(&b->limit);
}

void
budget_give(struct budget *b, size_t n)
{
	__atomic_sub_fetch(&b->used, n, __ATOMIC_RELAXED);
}

void
budget_get_stats(const struct budget *b, struct budget_stats *st)
{
	st->limit = LOAD(&b->limit);
	st->used = LOAD(&b->used);
	st->peak = LOAD(&b->peak);
	st->waits = LOAD(&b->waits);
	st->stalls = LOAD(&b->stalls);
	st->pauses = LOAD(&b->pauses);
	st->hs_timeouts = LOAD(&b->hs_timeouts);
	st->client_errors = LOAD(&b->client_errors);
	st->cache_skips = LOAD(&b->cache_skips);
	st->reserve_bytes = budget_reserve(st->limit);
	st->small_bytes = budget_small(st->limit);
}
