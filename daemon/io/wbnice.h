/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbnice.h - writeback that is not waited for runs at a lower CPU
 * priority (writeback.background_nice).
 *
 * Background, periodic and write-behind writeback are work nobody waits
 * on: the kernel's flushers do it on spare disk time, wbd's write-behind
 * on spare link time.  Unlike the kernel's, wbd's writeback costs CPU for
 * every page (a copy, a request, its reply), and wbd shares its host's
 * cores with its clients: at the same priority it takes CPU from the
 * writes it is meant to speed up.  A worker running such a job raises its
 * own nice value by the setting for the job's loop, and takes its
 * priority back before it waits for the runs it has in flight, which a
 * FLUSH may be waiting for.  The kernel's writeback workqueue has the
 * same knob, /sys/devices/virtual/workqueue/writeback/nice.
 *
 * Taking a priority back needs CAP_SYS_NICE or RLIMIT_NICE (systemd's
 * LimitNICE=).  Without either a thread could raise its nice value but
 * never lower it, and would then write for a FLUSH at the lower
 * priority: wbd looks once whether it may, and if not runs every job at
 * the daemon's own priority and says so in the log and `wbctl status`.
 */
#ifndef WBD_WBNICE_H
#define WBD_WBNICE_H

#include <stdbool.h>

/* May a thread take its priority back (looked at once)?  NICE: the
 * setting, for the line in the log if it may not (0: no line). */
bool wbnice_supported(unsigned nice);
/* This thread: the daemon's nice value plus NICE (at most 19), if
 * supported and NICE > 0. */
void wbnice_enter(unsigned nice);
/* This thread: the daemon's nice value again, if wbnice_enter raised
 * it. */
void wbnice_leave(void);

#endif
