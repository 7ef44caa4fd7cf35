/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * budget.h - one memory budget for everything a client makes wbd hold
 * outside the cache (limits.max_inflight_bytes): WRITE payloads being
 * received, READ buffers and their queued replies, handshake replies.
 *
 * A connection takes bytes before it allocates them and gives them back
 * when they are freed; when the budget is full it waits, reading nothing
 * more, instead of allocating.  So that clients which take a share and
 * never read their replies cannot lock the others out, the last eighth of
 * the budget (the reserve) is only for connections holding little — less
 * than a 1024th of the budget (256 KiB of the default 256 MiB) — which is
 * what a well-behaved client with small requests needs to keep going.
 *
 * Any thread: the counters are atomic.
 */
#ifndef WBD_BUDGET_H
#define WBD_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ratelimit.h"

#define BUDGET_DEFAULT_BYTES (256ull << 20)
#define BUDGET_MIN_BYTES (64ull << 20)
#define BUDGET_MAX_BYTES (1ull << 50)

struct budget {
	uint64_t limit;          /* limits.max_inflight_bytes; atomic */
	uint64_t used;           /* atomic */
	uint64_t peak;           /* highest USED seen; atomic */
	uint64_t waits;          /* times a connection had to wait; atomic */
	struct ratelimit log_rl; /* "budget full" lines */
	/* Connections closed for holding it without progress
	 * (limits.stall_timeout_s; conn.c); atomic. */
	uint64_t stalls;
	struct ratelimit stall_rl;
	/* Times a connection stopped reading requests at its own limits
	 * (limits.max_requests_per_connection,
	 * max_inflight_bytes_per_connection; conn.c); atomic. */
	uint64_t pauses;
	struct ratelimit pause_rl[3]; /* enum budget_pause */
	/* Connections closed for not finishing the handshake in
	 * limits.handshake_timeout_s (conn.c, which logs them); atomic. */
	uint64_t hs_timeouts;
	/* Clients' errors: rejected requests, oversized options, bad magic
	 * (conn.c, which logs them); atomic. */
	uint64_t client_errors;
	/* CACHE requests answered without prefetching: their device had
	 * limits.max_cache_requests being carried out (conn.c); atomic. */
	uint64_t cache_skips;
	struct ratelimit cache_skip_rl;
};

void budget_init(struct budget *b, uint64_t limit);
/* Change the limit (reload); what is held stays held. */
void budget_set_limit(struct budget *b, uint64_t limit);
/*
 * Take N bytes for a connection that already holds HELD: true if they fit
 * (the reserve only when HELD + N stays small), false if the connection
 * must wait.
 */
bool budget_take(struct budget *b, size_t n, size_t held);
/* A connection WHO starts waiting for N bytes: counted, and logged at
 * most once in 10 s. */
void budget_note_wait(struct budget *b, size_t n, const char *who);
/* Take N bytes whether or not they fit (a reply already built). */
void budget_charge(struct budget *b, size_t n);
/* Is there room for anything at all? */
bool budget_full(const struct budget *b);
void budget_give(struct budget *b, size_t n);

/* A connection WHO closed after holding replies or a payload with no
 * progress for S seconds: counted, and logged at most once in 10 s. */
void budget_note_stall(struct budget *b, const char *who, unsigned s,
    const char *what);

/* A connection WHO holding HELD of what KIND counts, its limit LIMIT,
 * stops reading until replies go out: counted, and logged at most once in
 * 10 s for each kind. */
enum budget_pause {
	BUDGET_PAUSE_REQUESTS,  /* limits.max_requests_per_connection */
	BUDGET_PAUSE_BYTES,     /* limits.max_inflight_bytes_per_connection */
	BUDGET_PAUSE_HANDSHAKE, /* handshake replies unread (conn.c) */
};
void budget_note_pause(struct budget *b, const char *who, uint64_t held,
    enum budget_pause kind, uint64_t limit);

/* A CACHE request from WHO answered at once, device DEV having MAX being
 * carried out: counted, and logged at most once in 10 s. */
void budget_note_cache_skip(struct budget *b, const char *who, const char *dev,
    unsigned max);

struct budget_stats {
	uint64_t limit, used, peak, waits, reserve_bytes, small_bytes, stalls;
	uint64_t pauses, hs_timeouts, client_errors, cache_skips;
};
void budget_get_stats(const struct budget *b, struct budget_stats *st);

#endif
