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
 * each local backing's directory and access, the control socket and the
 * listeners (in use, or not bindable), the control group.  Each problem
 * is printed on stderr as "wbd: FILE[:LINE]: what"; returns their count.
 * With LISTENERS false the listeners are not checked (systemd may hold
 * them for socket activation).
 */
int check_host(const struct wbd_config *cfg, bool listeners);

#endif
