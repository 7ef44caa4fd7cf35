/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * grace.c - grace periods: see grace.h.
 *
 * Why it is safe.  A reader coming online stores the epoch it sees, then
 * (a full fence) reads the tables; the reclaimer unpublishes, advances the
 * epoch (a full fence), then reads each reader's seen.  Either the
 * reclaimer sees the reader's new seen, or the reader's table reads come
 * after the fence that followed the unpublishing and cannot find the
 * object (the store-buffering case the two fences rule out).  A reader
 * seen offline (0) or with seen >= token went offline, or came online
 * again, after reading what it read before; its release store of seen,
 * read with acquire, orders those reads before the free.
 */
#include "atomics.h"
#include "grace.h"

void
grace_init(struct grace *g)
{
	store_relaxed(&g->epoch, 1);
	g->readers = NULL;
	pthread_mutex_init(&g->lock, NULL);
}

void
grace_destroy(struct grace *g)
{
	pthread_mutex_destroy(&g->lock);
}

void
grace_register(struct grace *g, struct grace_reader *r)
{
	store_release(&r->seen, 0);
	pthread_mutex_lock(&g->lock);
	r->next = g->readers;
	g->readers = r;
	pthread_mutex_unlock(&g->lock);
}

void
grace_unregister(struct grace *g, struct grace_reader *r)
{
	pthread_mutex_lock(&g->lock);
	for (struct grace_reader **p = &g->readers; *p; p = &(*p)->next) {
		if (*p == r) {
			*p = r->next;
			break;
		}
	}
	pthread_mutex_unlock(&g->lock);
}

void
grace_online(struct grace *g, struct grace_reader *r)
{
	store_release(&r->seen, load_acquire(&g->epoch));
	atomic_thread_fence(memory_order_seq_cst);
}

void
grace_offline(struct grace_reader *r)
{
	store_release(&r->seen, 0);
}

uint64_t
grace_start(struct grace *g)
{
	uint64_t token = add_fetch_u64(&g->epoch, 1, memory_order_seq_cst);

	atomic_thread_fence(memory_order_seq_cst);
	return token;
}

bool
grace_done(struct grace *g, uint64_t token)
{
	bool done = true;

	pthread_mutex_lock(&g->lock);
	for (struct grace_reader *r = g->readers; r && done; r = r->next) {
		uint64_t seen = load_acquire(&r->seen);
		done = seen == 0 || seen >= token;
	}
	pthread_mutex_unlock(&g->lock);
	return done;
}
