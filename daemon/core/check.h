/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * check.h - what "wbd -n" checks beyond the file (check.c): that what the
 * configuration names on this host lets wbd start.
 */
#ifndef WBD_CHECK_H
#define WBD_CHECK_H

#include <stdbool.h>

#include "config.h"

/*
 * Check CFG against this host, as far as can be done without starting:
 * each local backing's directory and access, each write log and its
 * state file (what one says is printed on stdout), the control group, the
 * control socket and the listeners (in use, or not bindable).  Each
 * problem is printed on stderr as "wbd: FILE[:LINE]: what"; returns their
 * count.  FOR_START (systemd's ExecStartPre=): the listeners are not
 * checked (wbd.socket may hold them).  Otherwise a live control socket is
 * taken for the running wbd the file is checked for before a reload, and
 * a socket in use is taken to be that wbd's (nothing is said of it).
 */
int check_host(const struct wbd_config *cfg, bool for_start);

#endif
