/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * settings-apply.h - making a set of writeback settings live.
 */
#ifndef WBD_SETTINGS_APPLY_H
#define WBD_SETTINGS_APPLY_H

struct daemon;
struct device_conf;
struct writeback_conf;

/*
 * Make the run-time settings of WC live (d->tune_lock held): copy its
 * run-time rows into d->cfg.writeback (max_io_bytes needs a restart and is
 * kept), the thresholds and timings (wb_ctl_update), each device's pool,
 * each device's ratios -- DEV_RATIOS[i] for d->devs[i] (wbctl tune), or with
 * NULL the configured ones (reload) -- and start a background pass on every
 * device, which finds for itself whether it is above its threshold.  WC's
 * devices list is adopted and WC given the old one, for its owner to free.
 */
void settings_apply(struct daemon *d, struct writeback_conf *wc,
    const struct device_conf *dev_ratios);

#endif
