/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbdev.c - writeback devices and their worker pools.  Created by the
 * main thread (start-up) or under tune_lock; the target slots are filled
 * and emptied under tune_lock and read without a lock (see wbdev.h).
 * The device's own figures: its writeback rate and CPU share (sampled by
 * the control thread), its link estimate (linkest.h, under est_lock, fed
 * by the workers' writes and the read window's reads), and on a remote
 * its writeback window, one budget of writes in flight shared by every
 * job on the device (wb_dev_write_admit, under est_lock, waited for on
 * est_cond).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "lock.h"
#include "log.h"
#include "wbdev.h"

struct wb_dev *
wb_dev_new(dev_t id, const char *name, const struct pool_params *params,
    struct grace *grace)
{
	struct wb_dev *dev = calloc(1, sizeof *dev);
	char thread_name[32];

	if (!dev)
		return NULL;
	dev->id = id;
	pthread_mutex_init(&dev->read_lock, NULL);
	lock_init(&dev->est_lock);
	pthread_cond_init(&dev->est_cond, NULL);
	dev->read_tail = &dev->read_head;
	dev->read_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	snprintf(dev->name, sizeof dev->name, "%s", name);
	snprintf(thread_name, sizeof thread_name, "flush-%s", name);
	if (dev->read_wake >= 0 &&
	    pubtab_init(&dev->targets, WB_DEV_MAX_TARGETS) == 0)
		dev->pool = pool_new(thread_name, params, grace);
	if (!dev->pool) {
		pubtab_free(&dev->targets);
		if (dev->read_wake >= 0)
			close(dev->read_wake);
		pthread_mutex_destroy(&dev->read_lock);
		pthread_mutex_destroy(&dev->est_lock);
		pthread_cond_destroy(&dev->est_cond);
		free(dev);
		return NULL;
	}
	log_debug("writeback device %s: %u..%u workers", name,
	    params->min_workers, params->max_workers);
	return dev;
}

int
wb_dev_add_target(struct wb_dev *dev, struct wb_target *t)
{
	return pubtab_add(&dev->targets, t) < 0 ? -1 : 0;
}

void
wb_dev_remove_target(struct wb_dev *dev, struct wb_target *t)
{
	pubtab_remove(&dev->targets, t);
}

void
wb_dev_free(struct wb_dev *dev)
{
	if (!dev)
		return;
	pool_free(dev->pool);
	pubtab_free(&dev->targets);
	close(dev->read_wake);
	free(dev->read_ring);
	pthread_mutex_destroy(&dev->read_lock);
	pthread_mutex_destroy(&dev->est_lock);
	pthread_cond_destroy(&dev->est_cond);
	free(dev);
}

void
wb_dev_link_begin(struct wb_dev *dev, struct linkest *est, uint64_t bytes,
    uint64_t now)
{
	pthread_mutex_lock(&dev->est_lock);
	linkest_begin(est, bytes, now);
	pthread_mutex_unlock(&dev->est_lock);
}

void
wb_dev_link_end(struct wb_dev *dev, struct linkest *est, uint64_t bytes,
    uint64_t latency_ns, bool ok, uint64_t now)
{
	pthread_mutex_lock(&dev->est_lock);
	linkest_end(est, bytes, latency_ns, ok, now);
	/* Room in the window for a job waiting (wb_dev_write_admit). */
	if (est == &dev->est && dev->budget_waiters > 0)
		pthread_cond_broadcast(&dev->est_cond);
	pthread_mutex_unlock(&dev->est_lock);
}

unsigned
wb_dev_link_window(struct wb_dev *dev, struct linkest *est,
    _Atomic unsigned *shown, unsigned floor, uint64_t max_bytes, unsigned max)
{
	pthread_mutex_lock(&dev->est_lock);
	unsigned w = linkest_window(est, floor, max_bytes, max);
	pthread_mutex_unlock(&dev->est_lock);
	store_relaxed(shown, w);
	return w;
}

/* Does a write of BYTES fit in DEV's window now?  est_lock held. */
static bool
wb_dev_fits_locked(struct wb_dev *dev, uint64_t bytes,
    const struct wb_dev_room *room)
{
	lock_assert_held(&dev->est_lock);
	const struct linkest *e = &dev->est;
	unsigned w =
	    linkest_window(e, room->floor, room->max_bytes, room->max_writes);

	store_relaxed(&dev->window, w);
	if (!room->sync && dev->sync_waiting > 0)
		return false;
	return e->inflight == 0 ||
	    (e->inflight < w &&
		(room->max_bytes == 0 ||
		    e->inflight_bytes + bytes <= room->max_bytes));
}

uint64_t
wb_dev_write_admit(struct wb_dev *dev, uint64_t bytes,
    const struct wb_dev_room *room, bool (*end_one)(void *), void *arg)
{
	bool counted = false;

	pthread_mutex_lock(&dev->est_lock);
	while (!wb_dev_fits_locked(dev, bytes, room)) {
		/* A sync's write waits: the others yield until it fits. */
		if (room->sync && !counted) {
			dev->sync_waiting++;
			counted = true;
		}
		if (end_one) {
			pthread_mutex_unlock(&dev->est_lock);
			bool ended = end_one(arg);
			pthread_mutex_lock(&dev->est_lock);
			/* Looked at again before the wait: what made room
			 * while the lock was let go (a write's end, a sync
			 * admitted) woke only the waiters counted then, and
			 * this caller was not one.  Waiting on it regardless
			 * hung write-behind with nothing in flight and a
			 * FLUSH waiting for the run it had taken. */
			if (ended || wb_dev_fits_locked(dev, bytes, room))
				continue;
		}
		dev->budget_waiters++;
		pthread_cond_wait(&dev->est_cond, &dev->est_lock);
		dev->budget_waiters--;
	}
	if (counted && --dev->sync_waiting == 0 && dev->budget_waiters > 0)
		pthread_cond_broadcast(&dev->est_cond);
	uint64_t now = now_ns();
	linkest_begin(&dev->est, bytes, now);
	pthread_mutex_unlock(&dev->est_lock);
	return now;
}

void
wb_dev_link(struct wb_dev *dev, struct wb_dev_link *l)
{
	pthread_mutex_lock(&dev->est_lock);
	*l = (struct wb_dev_link){ .rtt_ns = linkest_rtt_ns(&dev->est),
		.srtt_ns = dev->est.srtt_ns,
		.bandwidth_bps = dev->est.bw_bps,
		.inflight = dev->est.inflight,
		.inflight_max = dev->est.inflight_max,
		.inflight_bytes = dev->est.inflight_bytes,
		.read_rtt_ns = linkest_rtt_ns(&dev->rest),
		.read_bandwidth_bps = dev->rest.bw_bps,
		.reads_inflight_max = dev->rest.inflight_max };
	pthread_mutex_unlock(&dev->est_lock);
	l->window = load_relaxed(&dev->window);
	l->read_window = load_relaxed(&dev->read_window);
	l->readahead_bytes = load_relaxed(&dev->readahead_bytes);
}

uint64_t
wb_dev_readahead(struct wb_dev *dev, uint64_t base, uint64_t max)
{
	pthread_mutex_lock(&dev->est_lock);
	uint64_t n = linkest_readahead(&dev->rest, base, max);
	pthread_mutex_unlock(&dev->est_lock);
	store_relaxed(&dev->readahead_bytes, n);
	return n;
}

/* OLD and a new SAMPLE, averaged: smoothed over a few seconds. */
static uint64_t
wb_dev_smooth(uint64_t old, uint64_t sample)
{
	return (old + sample) / 2;
}

void
wb_dev_sample(struct wb_dev *dev, uint64_t now)
{
	uint64_t bytes = load_relaxed(&dev->written_bytes);
	uint64_t cpu = load_relaxed(&dev->wb_cpu_ns);

	if (dev->bw_last_ns && now > dev->bw_last_ns) {
		uint64_t dt = now - dev->bw_last_ns;
		uint64_t rate =
		    (bytes - dev->bw_last_bytes) * 1000000000ull / dt;
		uint64_t share = (cpu - dev->cpu_last_ns) * 1000000ull / dt;
		store_relaxed(&dev->bandwidth_bps,
		    wb_dev_smooth(load_relaxed(&dev->bandwidth_bps), rate));
		store_relaxed(&dev->wb_cpu_share_ppm,
		    wb_dev_smooth(load_relaxed(&dev->wb_cpu_share_ppm), share));
	}
	dev->cpu_last_ns = cpu;
	dev->bw_last_bytes = bytes;
	dev->bw_last_ns = now;
}
