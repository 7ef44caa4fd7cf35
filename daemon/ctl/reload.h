/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reload.h - rereading the configuration file while running (SIGHUP,
 * wbctl reload).
 */
#ifndef WBD_RELOAD_H
#define WBD_RELOAD_H

#include <stddef.h>

struct daemon;

/*
 * Reread the configuration and apply what can change at run time (main or
 * control thread; takes tune_lock).  Returns 0, or -1 if the file is
 * rejected (the running configuration stays); MSG says what changed, what
 * needs a restart, or why the file was rejected.
 */
int daemon_reload(struct daemon *d, char *msg, size_t msglen);

#endif
