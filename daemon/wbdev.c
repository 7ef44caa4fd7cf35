/*
 * wbdev.c - writeback devices and their worker pools.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	snprintf(dev->name, sizeof dev->name, "%s", name);
	snprintf(thread_name, sizeof thread_name, "flush-%s", name);
	dev->exports = calloc(WB_DEV_MAX_EXPORTS, sizeof *dev->exports);
	dev->pool = dev->exports ? pool_new(thread_name, params) : NULL;
	if (!dev->pool) {
		free(dev->exports);
		free(dev);
		return NULL;
	}
	log_debug("writeback device %s: %u..%u workers", name,
	    params->min_workers, params->max_workers);
	return dev;
}

int
wb_dev_add_export(struct wb_dev *dev, struct export *e)
{
	if (dev->n_exports >= WB_DEV_MAX_EXPORTS)
		return -1;
	dev->exports[dev->n_exports] = e;
	__atomic_store_n(&dev->n_exports, dev->n_exports + 1, __ATOMIC_RELEASE);
	return 0;
}

void
wb_dev_free(struct wb_dev *dev)
{
	if (!dev)
		return;
	pool_free(dev->pool);
	free(dev->exports);
	free(dev);
}
