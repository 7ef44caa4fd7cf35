/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * notify.c - sd_notify(3) messages to the service manager.
 *
 * libsystemd does the sending; $NOTIFY_SOCKET is left in the environment
 * (unset_environment 0) because wbd notifies for as long as it runs.  A
 * failed send is ignored: the manager's state is informative, and wbd
 * never stops serving because it could not be told.
 */
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "notify.h"

bool
notify_enabled(void)
{
	const char *s = getenv("NOTIFY_SOCKET");

	return s && *s;
}

void
notify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void
notify_status(const char *status)
{
	sd_notifyf(0, "STATUS=%s", status);
}

void
notify_reloading(void)
{
	struct timespec ts;

	/* MONOTONIC_USEC: what Type=notify-reload (systemd 253) wants. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	sd_notifyf(0,
	    "RELOADING=1\nSTATUS=reloading the configuration\n"
	    "MONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ull +
		(unsigned long long)ts.tv_nsec / 1000);
}

void
notify_stopping(const char *status)
{
	sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status);
}

void
notify_extend_timeout(uint64_t usec, const char *status)
{
	sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu\nSTATUS=%s",
	    (unsigned long long)usec, status);
}

void
notify_watchdog(void)
{
	sd_notify(0, "WATCHDOG=1");
}

uint64_t
notify_watchdog_usec(void)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	return usec;
}
