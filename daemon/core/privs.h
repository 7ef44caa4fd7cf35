/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * privs.h - giving up root: once wbd holds everything that needs it (the
 * listeners, the control socket, every backing device), it becomes the
 * configured user and group (user = ...; group = ...;) for good.
 */
#ifndef WBD_PRIVS_H
#define WBD_PRIVS_H

#include "config.h"

/*
 * Become RA's user and group, with the user's supplementary groups
 * (initgroups), keeping no capability.  Nothing to do without a user, or
 * when wbd already runs as exactly that user and group.  Started as
 * anyone else but root, it cannot: -1 after logging why, as for any
 * failure (main thread, at start-up, before serving).
 */
int privs_drop(const struct run_as_conf *ra);

/*
 * Before any thread starts (both are per-thread and inherited): set
 * no_new_privs, as wbd never executes anything, and, when RA names a user
 * to become and wbd runs as root, empty the capability bounding set, so
 * that nothing wbd could ever execute gains a capability.  Neither takes
 * a capability wbd holds now (it still opens its sockets and backings as
 * root, then privs_drop gives that up).  A failure is logged as a
 * warning, and wbd goes on.
 */
void privs_harden(const struct run_as_conf *ra);

#endif
