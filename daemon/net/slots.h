/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * slots.h - connection slots per client, so that one client cannot take
 * every slot: a count of open connections per client key (an address for
 * TCP, "uid N" for a Unix socket), capped.  Any thread; one mutex.
 */
#ifndef WBD_SLOTS_H
#define WBD_SLOTS_H

#include <stdbool.h>

struct slots;

struct slots *slots_new(unsigned per_client_max);
void slots_free(struct slots *s);
/* Take a slot for CLIENT: false if it holds per_client_max already (or
 * out of memory). */
bool slots_take(struct slots *s, const char *client);
/* Give back a slot CLIENT took. */
void slots_release(struct slots *s, const char *client);
/* Slots CLIENT holds now. */
unsigned slots_held(struct slots *s, const char *client);
/* Clients holding at least one slot. */
unsigned slots_clients(struct slots *s);

#endif
