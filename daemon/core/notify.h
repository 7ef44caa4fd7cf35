/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * notify.h - telling the service manager how wbd is doing: systemd's
 * sd_notify(3) protocol (READY=1, STATUS=, RELOADING=1, STOPPING=1,
 * EXTEND_TIMEOUT_USEC=, WATCHDOG=1).
 *
 * No state of its own: each call sends one datagram to $NOTIFY_SOCKET, or
 * nothing when it is not set (wbd run by hand, by a test, by another
 * init), so calling these costs nothing outside systemd.  Any thread.
 */
#ifndef WBD_NOTIFY_H
#define WBD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* Is there a service manager to tell ($NOTIFY_SOCKET)? */
bool notify_enabled(void);
/* Serving: READY=1 with STATUS. */
void notify_ready(const char *status);
/* STATUS= only: one line for "systemctl status". */
void notify_status(const char *status);
/* A reload begins (RELOADING=1); notify_ready() ends it. */
void notify_reloading(void);
/* Shutdown begins (STOPPING=1), with STATUS. */
void notify_stopping(const char *status);
/* Shutdown goes on: the manager waits USEC more from now (STATUS too). */
void notify_extend_timeout(uint64_t usec, const char *status);
/* Alive (WATCHDOG=1). */
void notify_watchdog(void);
/*
 * The watchdog interval the manager asked for (WatchdogSec=, passed as
 * $WATCHDOG_USEC for this process), in microseconds; 0 if none.
 */
uint64_t notify_watchdog_usec(void);

#endif
