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
 * Nor can one client take most of it: each client (its address, or its
 * uid on a Unix socket: the key of its connection slots) holds at most
 * limits.max_client_share percent of the budget, however many connections
 * it opens; past that, its connections wait while the others are served.
 * A client holding nothing may take one request of any size, as alone.
 * When a connection of a client is closed for holding replies it does not
 * read (limits.stall_timeout_s), the client is marked: its connections
 * that were waiting for the budget since before, and do not read their
 * own replies either, are closed with it rather than take its place one
 * stall timeout after another; those whose replies go out are left to be
 * served (conn.c).
 *
 * Any thread: the counters are atomic; the table of clients has a mutex,
 * taken when a connection starts and when it is freed.
 */
#ifndef WBD_BUDGET_H
#define WBD_BUDGET_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ratelimit.h"

#define BUDGET_DEFAULT_BYTES (256ull << 20)
#define BUDGET_MIN_BYTES (64ull << 20)
#define BUDGET_MAX_BYTES (1ull << 50)
/* limits.max_client_share, percent of the budget. */
#define BUDGET_DEFAULT_SHARE_PCT 25u
#define BUDGET_MIN_SHARE_PCT 1u
#define BUDGET_MAX_SHARE_PCT 100u
#define BUDGET_CLIENT_BUCKETS 256

/* One client's part of the budget (budget_client_get). */
struct budget_client;

struct budget {
	_Atomic uint64_t limit; /* limits.max_inflight_bytes */
	_Atomic uint64_t used;
	_Atomic uint64_t peak;   /* highest USED seen */
	_Atomic uint64_t waits;  /* times a connection had to wait */
	struct ratelimit log_rl; /* "budget full" lines */
	/* Connections closed for holding it without progress
	 * (limits.stall_timeout_s; conn.c); atomic. */
	_Atomic uint64_t stalls;
	struct ratelimit stall_rl;
	/* Times a connection stopped reading requests at its own limits
	 * (limits.max_requests_per_connection,
	 * max_inflight_bytes_per_connection; conn.c); atomic. */
	_Atomic uint64_t pauses;
	struct ratelimit pause_rl[3]; /* enum budget_pause */
	/* Connections closed for not finishing the handshake in
	 * limits.handshake_timeout_s (conn.c, which logs them); atomic. */
	_Atomic uint64_t hs_timeouts;
	/* Clients' errors: rejected requests, oversized options, bad magic
	 * (conn.c, which logs them); atomic. */
	_Atomic uint64_t client_errors;
	/* CACHE requests answered without prefetching: their device had
	 * limits.max_cache_requests being carried out (conn.c); atomic. */
	_Atomic uint64_t cache_skips;
	struct ratelimit cache_skip_rl;
	/* limits.max_client_share, percent of LIMIT; atomic. */
	_Atomic unsigned share_pct;
	/* Times a connection waited because its client held its share
	 * (counted in WAITS too); atomic. */
	_Atomic uint64_t share_waits;
	struct ratelimit share_rl;
	/* Clients with a connection open, by key (budget_client_get). */
	pthread_mutex_t clients_lock;
	struct budget_client *clients[BUDGET_CLIENT_BUCKETS];
	unsigned n_clients;
};

void budget_init(struct budget *b, uint64_t limit, unsigned share_pct);
/* Free the table of clients (every one put back). */
void budget_fini(struct budget *b);
/* Change the limit, or the share (reload); what is held stays held. */
void budget_set_limit(struct budget *b, uint64_t limit);
void budget_set_share(struct budget *b, unsigned share_pct);

/* The share of the client KEY, for one more of its connections: NULL if
 * out of memory.  Each is put back once the connection holds nothing. */
struct budget_client *budget_client_get(struct budget *b, const char *key);
void budget_client_put(struct budget *b, struct budget_client *cl);
/* CL had a connection closed for not reading its replies, at NOW_NS
 * (now_ns()); and when it last had one closed so (0: never). */
void budget_client_mark_stalled(struct budget_client *cl, uint64_t now_ns);
uint64_t budget_client_stalled_ns(const struct budget_client *cl);
/* What CL holds now. */
uint64_t budget_client_used(const struct budget_client *cl);

/*
 * Take N bytes for a connection of client CL (NULL: none) that already
 * holds HELD: true if they fit (the reserve only when HELD + N stays
 * small; CL's share unless CL holds nothing), false if the connection must
 * wait, *AT_SHARE (if not NULL) telling whether for its client's share.
 */
bool budget_take(struct budget *b, struct budget_client *cl, size_t n,
    size_t held, bool *at_share);
/* A connection WHO starts waiting for N bytes: counted, and logged at
 * most once in 10 s. */
void budget_note_wait(struct budget *b, size_t n, const char *who);
/* The same when it waits for its client CL's share. */
void budget_note_share_wait(struct budget *b, const struct budget_client *cl,
    size_t n, const char *who);
/* Take N bytes whether or not they fit (a reply already built). */
void budget_charge(struct budget *b, struct budget_client *cl, size_t n);
/* Is there room for anything at all? */
bool budget_full(const struct budget *b);
void budget_give(struct budget *b, struct budget_client *cl, size_t n);

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
	uint64_t share_pct, share_bytes, share_waits;
	uint64_t clients;          /* with a connection open */
	uint64_t client_max_bytes; /* the most one of them holds now */
};
void budget_get_stats(struct budget *b, struct budget_stats *st);

#endif
