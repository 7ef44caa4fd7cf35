/*
 * wbdev.h - a writeback device: the backing device under one or more
 * exports, identified as MAJ:MIN like the kernel's backing_dev_info, with
 * its own pool of flush-MAJ:MIN workers.  Two exports on one filesystem
 * share a device and its pool.
 */
#ifndef WBD_WBDEV_H
#define WBD_WBDEV_H

#include <sys/types.h>

#include "pool.h"

struct wb_dev {
	dev_t id;
	char name[32];                  /* "MAJ:MIN" */
	struct pool *pool;
	unsigned n_exports;
};

struct wb_dev *wb_dev_new(dev_t id, const char *name,
    const struct pool_params *params);
void wb_dev_free(struct wb_dev *dev);

#endif
