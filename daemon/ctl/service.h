/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * service.h - wbd as a systemd service (service.c): readiness, a STATUS=
 * line kept current, reload and the watchdog, through notify.h.
 *
 * Main thread: started once the daemon serves (service_start), stopped
 * when shutdown begins (service_stop), freed after the device pools are
 * gone (service_free: a watchdog ping may still sit in a pool's queue
 * until then).  service_reload is called by the main thread (SIGHUP) and
 * the control thread (wbctl reload).
 */
#ifndef WBD_SERVICE_H
#define WBD_SERVICE_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

struct daemon;

/* A watchdog ping: a job run by an I/O thread or a device's pool. */
struct service_ping {
	struct job job;
	unsigned sent;             /* round it was sent in (main) */
	_Atomic unsigned answered; /* round answered */
};

struct service {
	struct daemon *d;
	ev_timer status_timer;   /* STATUS= every few seconds */
	ev_timer watchdog_timer; /* half the watchdog interval */
	uint64_t watchdog_usec;  /* 0: no watchdog */
	unsigned round;
	struct service_ping *io_pings;  /* one per I/O thread */
	struct service_ping *dev_pings; /* one per device slot */
	bool stalled;                   /* last round had a silent thread */
	char status[256];               /* last STATUS= sent */
};

/* Serving: READY=1, the timers.  0, or -1 if out of memory (logged). */
int service_start(struct service *s, struct daemon *d);
/* Shutdown begins: STOPPING=1, the timers stopped. */
void service_stop(struct service *s);
/* After daemon_shutdown: nothing of S is queued anywhere any more. */
void service_free(struct service *s);

/* daemon_reload between RELOADING=1 and READY=1 (main or control). */
int service_reload(struct daemon *d, char *msg, size_t msglen);
/* One line for STATUS=: exports, connections, dirty data, its age. */
void service_status_line(struct daemon *d, char *buf, size_t len);

#endif
