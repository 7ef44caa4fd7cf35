/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbdev.c - writeback devices and their worker pools.  Created by the
 * main thread (start-up) or under tune_lock; the target slots are filled
 * and emptied under tune_lock and read without a lock (see wbdev.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
	pthread_mutex_destroy(&dev->read_lock);
	free(dev);
}
