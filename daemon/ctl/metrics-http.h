/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics-http.h - the optional HTTP endpoint for Prometheus
 * (metrics.listen in wbd.conf): GET /metrics, served on a thread of its
 * own that never touches the data path.  Off unless configured.
 */
#ifndef WBD_METRICS_HTTP_H
#define WBD_METRICS_HTTP_H

struct daemon;
struct metrics_http;

/*
 * Bind metrics.listen (main thread, before detaching, like the other
 * sockets).  *OUT is NULL when the endpoint is off.  Returns 0, or -1
 * after logging why.
 */
int metrics_http_open(struct daemon *d, struct metrics_http **out);
/* Serve on its own thread (main thread, once the daemon has started);
 * nothing if MH is NULL.  0, or -1 after logging why. */
int metrics_http_start(struct metrics_http *mh);
/* Stop serving, close the socket, free MH (may be NULL). */
void metrics_http_stop(struct metrics_http *mh);

#endif
