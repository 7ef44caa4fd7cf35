/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * settings-apply.c - making a set of writeback settings live (wbctl tune,
 * reload), under daemon.tune_lock; the new values reach other threads
 * through the atomic stores of wb_ctl_update, pool_set_params and the
 * device ratios.  Kept apart from the table (settings.c), which knows
 * nothing of the running daemon.
 */
#include <string.h>

#include "atomics.h"
#include "config-load.h"
#include "daemon.h"
#include "pool.h"
#include "settings.h"
#include "settings-apply.h"
#include "wbdev.h"
#include "writeback.h"

void
settings_apply(struct daemon *d, struct writeback_conf *wc,
    const struct device_conf *dev_ratios)
{
	struct writeback_conf *live = &d->cfg.writeback;
	struct device_conf *devs = live->devices;
	size_t n_devs = live->n_devices;
	const struct setting *s;
	struct pool_params pp;
	unsigned lo, hi;

	for (s = settings_table; s < settings_table + settings_n; s++)
		if (s->runtime)
			memcpy((char *)live + s->offset, (char *)wc + s->offset,
			    s->size);
	live->devices = wc->devices;
	live->n_devices = wc->n_devices;
	wc->devices = devs;
	wc->n_devices = n_devs;

	wb_ctl_update(&d->wb, live);
	settings_pool_params(live, &pp);
	for (size_t i = 0; i < daemon_n_devs(d); i++) {
		struct wb_dev *dev = d->devs[i];

		pool_set_params(dev->pool, &pp);
		if (dev_ratios != NULL) {
			lo = dev_ratios[i].min_ratio;
			hi = dev_ratios[i].max_ratio;
		} else {
			config_device_ratios(&d->cfg, dev->name, &lo, &hi);
		}
		store_relaxed(&dev->min_ratio, lo);
		store_relaxed(&dev->max_ratio, hi);
		wb_kick_background(dev);
	}
}
