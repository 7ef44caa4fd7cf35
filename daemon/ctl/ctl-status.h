/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl-status.h - what the daemon's counters say, as the control socket's
 * "status" and "exports" answers, and the request statistics of an export
 * summed over the I/O threads; the Prometheus exposition (metrics.c) is
 * built from the same.  Any thread but an I/O thread (see ctl-status.c for
 * the locks taken).
 */
#ifndef WBD_CTL_STATUS_H
#define WBD_CTL_STATUS_H

#include <jansson.h>

#include "stats.h"

struct daemon;
struct export;

json_t *ctl_status_json(struct daemon *d);
json_t *ctl_exports_json(struct daemon *d);

/* E's request statistics, every I/O thread's added up, into *SUM. */
void ctl_export_stats(struct daemon *d, struct export *e,
    struct stats_export_io *sum);

#endif
