/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl.h - the control socket: wbctl's way in.  Runs on its own thread
 * (wbd-ctl, an ioloop), so no control request ever runs on an I/O thread
 * or delays NBD clients.  Protocol: docs/control-protocol.md.
 */
#ifndef WBD_CTL_H
#define WBD_CTL_H

#include <jansson.h>
#include <stdbool.h>

#include "ctl-proto.h"

struct daemon;

/* Bind the socket (main thread, at start-up); -1 after logging. */
int ctl_open(struct daemon *d);
/* Start serving on the control thread. */
int ctl_start(struct daemon *d);
/* Stop, close, remove the socket file (main thread, at shutdown). */
void ctl_stop(struct daemon *d);

/* Tunables (tune.c), for the "tune" command.  tune_list_json returns
 * every tunable with its value; tune_set validates every key of SET first
 * and changes nothing unless all are valid, appends the keys it changed
 * to CHANGED, and on error returns -1 with a message in ERR. */
json_t *tune_list_json(struct daemon *d);
int tune_set(struct daemon *d, json_t *set, json_t *changed, char *err,
    size_t errlen);

#endif
