/*
 * wbdev.c - writeback devices and their worker pools.  Created by the
 * main thread (start-up) or a reload under tune_lock; the target list is
 * append-only and published by a release store of its count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "wbdev.h"

struct wb_dev *
wb_dev_new(dev_t id, const char *name, const struct pool_params *params)
{
	struct wb_dev *dev = calloc(1, sizeof *dev);
	char thread_name[32];

	if (!dev)
		return NULL;
	dev->id = id;
	pthread_mutex_init(&dev->read_lock, NULL);
	dev->read_tail = &dev->read_head;
	dev->read_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	snprintf(dev->name, sizeof dev->name, "%s", name);
	snprintf(thread_name, sizeof thread_name, "flush-%s", name);
	dev->targets = calloc(WB_DEV_MAX_TARGETS, sizeof *dev->targets);
	if (dev->targets && dev->read_wake >= 0)
		dev->pool = pool_new(thread_name, params);
	if (!dev->pool) {
		if (dev->read_wake >= 0)
			close(dev->read_wake);
		pthread_mutex_destroy(&dev->read_lock);
		free(dev->targets);
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
	if (dev->n_targets >= WB_DEV_MAX_TARGETS)
		return -1;
	dev->targets[dev->n_targets] = t;
	__atomic_store_n(&dev->n_targets, dev->n_targets + 1, __ATOMIC_RELEASE);
	return 0;
}

void
wb_dev_free(struct wb_dev *dev)
{
	if (!dev)
		return;
	pool_free(dev->pool);
	close(dev->read_wake);
	pthread_mutex_destroy(&dev->read_lock);
	free(dev->targets);
	free(dev);
}
