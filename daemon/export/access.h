/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * access.h - per-export access control: the allow list of wbd.conf,
 *
 *     allow = [ "127.0.0.0/8", "::1", "uid:1000", "user:backup",
 *               "group:disk", "psk:alice", "cn:host1.example.org" ];
 *
 * parsed into entries (access_list_add, at configuration load: user and
 * group names are looked up then, never while serving) and matched against
 * a connection's identity (peer.h).  A client is let in if any entry
 * matches; an export without a list lets everyone in.
 *
 * A list is immutable once built and reference-counted, so a configuration,
 * a waiting export and a live export can share it.  An export holds its
 * current list in a struct access_policy: the handshake (I/O threads) reads
 * it and a reload (under tune_lock) replaces it, under the policy's own
 * mutex, a leaf lock.
 */
#ifndef WBD_ACCESS_H
#define WBD_ACCESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peer.h"

enum access_kind {
	ACCESS_NET4, /* "192.168.10.0/24", "127.0.0.2" */
	ACCESS_NET6, /* "fd00::/8", "::1" */
	ACCESS_UID,  /* "uid:N", "user:NAME" (resolved) */
	ACCESS_GID,  /* "group:NAME" (resolved) */
	ACCESS_PSK,  /* "psk:NAME": the TLS PSK username */
	ACCESS_CN,   /* "cn:NAME": the client certificate's CN */
};

struct access_entry {
	enum access_kind kind;
	char *text;           /* as written, for the log and comparison */
	uint8_t addr[16];     /* NET4: 4 bytes, NET6: 16; host bits 0 */
	unsigned prefix_bits; /* NET4: 0..32, NET6: 0..128 */
	uint32_t id;          /* UID, GID */
	const char *name;     /* PSK, CN: points into text */
};

struct access_list {
	_Atomic unsigned refs;
	size_t n, cap;
	struct access_entry v[];
};

/* An empty list with room for CAP entries (refs 1), or NULL (ENOMEM). */
struct access_list *access_list_new(size_t cap);
/*
 * Parse S and append it to L (which has room).  Returns 0, or -1 with
 * "expected ..." in ERR (ERRLEN bytes) and errno EINVAL (bad entry, unknown
 * user or group) or ENOMEM.
 */
int
access_list_add(struct access_list *l, const char *s, char *err, size_t errlen);
/* Another reference to L (may be NULL); returns L. */
struct access_list *access_list_ref(struct access_list *l);
/* Drop a reference (L may be NULL); the last one frees it. */
void access_list_unref(struct access_list *l);
/* Same entries, resolved to the same ids, in the same order?  Two NULLs
 * (no list) are equal; NULL and an empty list are not. */
bool
access_list_equal(const struct access_list *a, const struct access_list *b);
/* The first entry of L that admits P, or NULL. */
const struct access_entry *
access_list_match(const struct access_list *l, const struct peer_ident *p);

/*
 * Name lookups, for the allow list and the rest of the configuration (at
 * load time: they may block): the uid and primary gid of user NAME, the
 * gid of group NAME.  0, ENOENT if there is none, or why the lookup failed
 * (an errno).
 */
int access_user_ids(const char *name, uint32_t *uid, uint32_t *gid);
int access_group_id(const char *name, uint32_t *gid);

/* An export's current allow list; NULL: everyone may open it. */
struct access_policy {
	pthread_mutex_t lock;
	struct access_list *list; /* under lock */
};

/* Start with L (the policy takes a reference of its own). */
void access_policy_init(struct access_policy *ap, struct access_list *l);
void access_policy_destroy(struct access_policy *ap);
/* The list AP holds now, with a reference of its own (NULL: no list). */
struct access_list *access_policy_get(struct access_policy *ap);
/* Replace the list with L (a reference of its own); false if it already
 * had an equal one (nothing changed). */
bool access_policy_set(struct access_policy *ap, struct access_list *l);
/*
 * May P open the export?  When not, WHY (WHYLEN bytes) says so for the
 * log: who P is and that no entry matched.
 */
bool access_policy_allows(struct access_policy *ap, const struct peer_ident *p,
    char *why, size_t whylen);

#endif
