/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * budget.c - the memory budget of limits.max_inflight_bytes (budget.h).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "budget.h"
#include "log.h"

/* A "budget full" line at most this often. */
#define BUDGET_LOG_INTERVAL_NS (10ull * 1000000000u)

/* A client with a connection open: its key, and what it holds. */
struct budget_client {
	struct budget_client *next; /* in its bucket */
	unsigned refs;              /* connections; under clients_lock */
	_Atomic uint64_t used;
	_Atomic uint64_t stalled_ns; /* budget_client_mark_stalled */
	char key[];
};

void
budget_init(struct budget *b, uint64_t limit, unsigned share_pct)
{
	*b = (struct budget){ .limit = limit, .share_pct = share_pct };
	pthread_mutex_init(&b->clients_lock, NULL);
}

void
budget_fini(struct budget *b)
{
	for (unsigned i = 0; i < BUDGET_CLIENT_BUCKETS; i++) {
		struct budget_client *cl = b->clients[i], *next;
		for (; cl; cl = next) {
			next = cl->next;
			free(cl);
		}
		b->clients[i] = NULL;
	}
	pthread_mutex_destroy(&b->clients_lock);
}

void
budget_set_limit(struct budget *b, uint64_t limit)
{
	store_relaxed(&b->limit, limit);
}

void
budget_set_share(struct budget *b, unsigned share_pct)
{
	store_relaxed(&b->share_pct, share_pct);
}

/* FNV-1a. */
static unsigned
budget_hash(const char *key)
{
	uint32_t h = 2166136261u;

	for (; *key; key++)
		h = (h ^ (uint8_t)*key) * 16777619u;
	return h % BUDGET_CLIENT_BUCKETS;
}

struct budget_client *
budget_client_get(struct budget *b, const char *key)
{
	struct budget_client **pp = &b->clients[budget_hash(key)], *cl;

	pthread_mutex_lock(&b->clients_lock);
	for (cl = *pp; cl && strcmp(cl->key, key) != 0; cl = cl->next)
		;
	if (!cl) {
		size_t len = strlen(key) + 1;
		cl = calloc(1, sizeof *cl + len);
		if (cl) {
			memcpy(cl->key, key, len);
			cl->next = *pp;
			*pp = cl;
			b->n_clients++;
		}
	}
	if (cl)
		cl->refs++;
	pthread_mutex_unlock(&b->clients_lock);
	return cl;
}

void
budget_client_put(struct budget *b, struct budget_client *cl)
{
	struct budget_client **pp;

	if (!cl)
		return;
	pthread_mutex_lock(&b->clients_lock);
	assert(cl->refs > 0);
	if (--cl->refs == 0) {
		/* Its last connection gave back all it held. */
		assert(load_relaxed(&cl->used) == 0);
		for (pp = &b->clients[budget_hash(cl->key)]; *pp != cl;
		     pp = &(*pp)->next)
			;
		*pp = cl->next;
		b->n_clients--;
		free(cl);
	}
	pthread_mutex_unlock(&b->clients_lock);
}

void
budget_client_mark_stalled(struct budget_client *cl, uint64_t now_ns)
{
	if (cl)
		store_release(&cl->stalled_ns, now_ns);
}

uint64_t
budget_client_stalled_ns(const struct budget_client *cl)
{
	return cl ? load_acquire(&cl->stalled_ns) : 0;
}

uint64_t
budget_client_used(const struct budget_client *cl)
{
	return cl ? load_relaxed(&cl->used) : 0;
}

static uint64_t
budget_share(uint64_t limit, unsigned pct)
{
	return limit / 100 * pct + limit % 100 * pct / 100;
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
	uint64_t peak = load_relaxed(&b->peak);

	while (used > peak &&
	    !atomic_compare_exchange_weak_explicit(&b->peak, &peak, used,
		memory_order_relaxed, memory_order_relaxed))
		;
}

/* Take N bytes of CL's share: false if CL holds its share already. */
static bool
budget_client_take(struct budget *b, struct budget_client *cl, size_t n)
{
	uint64_t share =
	    budget_share(load_relaxed(&b->limit), load_relaxed(&b->share_pct));
	uint64_t used = load_relaxed(&cl->used);

	do {
		/* Holding nothing, a client may take any one request. */
		if (used + n > share && used > 0)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&cl->used, &used,
	    used + n, memory_order_relaxed, memory_order_relaxed));
	return true;
}

bool
budget_take(struct budget *b, struct budget_client *cl, size_t n, size_t held,
    bool *at_share)
{
	uint64_t limit = load_relaxed(&b->limit);
	uint64_t cap = limit - budget_reserve(limit);

	if (at_share)
		*at_share = false;
	if (cl && n > 0 && !budget_client_take(b, cl, n)) {
		if (at_share)
			*at_share = true;
		return false;
	}
	/* Whoever holds little may use the reserve too. */
	if (held + n <= budget_small(limit))
		cap = limit;
	uint64_t used = load_relaxed(&b->used);

	do {
		/* Alone, any request fits: none can wait for ever. */
		if (used + n > cap && used > 0) {
			if (cl && n > 0)
				sub_relaxed(&cl->used, n);
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(&b->used, &used,
	    used + n, memory_order_relaxed, memory_order_relaxed));
	budget_note_peak(b, used + n);
	return true;
}

/* Count an event in *N: is a line due (at most one in 10 s; *QUIET gets
 * the number not logged since)? */
static bool
budget_event(_Atomic uint64_t *n, struct ratelimit *rl, unsigned *quiet)
{
	add_relaxed(n, 1);
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
	    who, (unsigned long long)load_relaxed(&b->used),
	    (unsigned long long)load_relaxed(&b->limit), n, quiet);
}

void
budget_note_share_wait(struct budget *b, const struct budget_client *cl,
    size_t n, const char *who)
{
	unsigned quiet;

	add_relaxed(&b->waits, 1);
	if (!budget_event(&b->share_waits, &b->share_rl, &quiet))
		return;
	uint64_t limit = load_relaxed(&b->limit);
	unsigned pct = load_relaxed(&b->share_pct);
	log_warnx("%s: client %s holds %llu bytes, its share of the memory "
		  "budget (limits.max_client_share = %u%% of %llu bytes): "
		  "waiting for %zu bytes before reading more (%u other waits "
		  "not logged)",
	    who, cl->key, (unsigned long long)load_relaxed(&cl->used), pct,
	    (unsigned long long)limit, n, quiet);
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
budget_charge(struct budget *b, struct budget_client *cl, size_t n)
{
	if (cl)
		add_relaxed(&cl->used, n);
	budget_note_peak(b, add_fetch_u64(&b->used, n, memory_order_relaxed));
}

bool
budget_full(const struct budget *b)
{
	return load_relaxed(&b->used) >= load_relaxed(&b->limit);
}

void
budget_give(struct budget *b, struct budget_client *cl, size_t n)
{
	if (cl)
		sub_relaxed(&cl->used, n);
	sub_relaxed(&b->used, n);
}

void
budget_get_stats(struct budget *b, struct budget_stats *st)
{
	st->limit = load_relaxed(&b->limit);
	st->used = load_relaxed(&b->used);
	st->peak = load_relaxed(&b->peak);
	st->waits = load_relaxed(&b->waits);
	st->stalls = load_relaxed(&b->stalls);
	st->pauses = load_relaxed(&b->pauses);
	st->hs_timeouts = load_relaxed(&b->hs_timeouts);
	st->client_errors = load_relaxed(&b->client_errors);
	st->cache_skips = load_relaxed(&b->cache_skips);
	st->reserve_bytes = budget_reserve(st->limit);
	st->small_bytes = budget_small(st->limit);
	st->share_pct = load_relaxed(&b->share_pct);
	st->share_bytes = budget_share(st->limit, (unsigned)st->share_pct);
	st->share_waits = load_relaxed(&b->share_waits);
	st->client_max_bytes = 0;
	pthread_mutex_lock(&b->clients_lock);
	st->clients = b->n_clients;
	for (unsigned i = 0; i < BUDGET_CLIENT_BUCKETS; i++)
		for (const struct budget_client *cl = b->clients[i]; cl;
		     cl = cl->next)
			if (load_relaxed(&cl->used) > st->client_max_bytes)
				st->client_max_bytes = load_relaxed(&cl->used);
	pthread_mutex_unlock(&b->clients_lock);
}
