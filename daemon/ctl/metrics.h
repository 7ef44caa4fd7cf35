/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics.h - the daemon's metrics in the Prometheus text exposition format
 * (version 0.0.4), for "wbctl metrics" and the HTTP endpoint
 * (metrics-http.h).  docs/metrics.md lists every metric.
 */
#ifndef WBD_METRICS_H
#define WBD_METRICS_H

#include <stddef.h>

struct daemon;

/* The content type of the exposition, for HTTP. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * The exposition of D, as a string to free (LEN bytes without the final
 * NUL in *LEN), or NULL if out of memory.  Any thread but an I/O thread or
 * a worker: it takes daemon.tune_lock as the status does (ctl-status.c).
 */
char *metrics_render(struct daemon *d, size_t *len);

#endif
