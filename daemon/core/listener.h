/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * listener.h - listening sockets (TCP and Unix) on the main thread's loop.
 * Accepted connections are handed to the I/O threads.
 */
#ifndef WBD_LISTENER_H
#define WBD_LISTENER_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

struct listener;

#include "ratelimit.h"

/* The listening sockets, on LOOP; each accepted socket (non-blocking) goes
 * to ACCEPT, which owns it from then on: PEER names it for the log, CLIENT
 * is who it is for the per-client limit: "uid N" for a Unix socket and for
 * a TCP client whose socket is on this host (local users share 127.0.0.1,
 * not a uid), else peer_client_key; IDLE_S is its listener's
 * idle_timeout_s (-1: not given, the limits' apply). */
struct listeners {
	struct ev_loop *loop;
	void (*accept)(void *arg, int fd, const char *peer, const char *client,
	    int idle_s);
	void *arg;
	struct listener *head;
	int spare_fd; /* given up to refuse a client when
	                                   out of descriptors */
	struct ratelimit accept_log;
	unsigned client_ipv6_prefix; /* limits.client_ipv6_prefix */
	/* NETLINK_SOCK_DIAG, to find a TCP client's own socket on this
	 * host (local users are told apart by uid); -1: cannot. */
	int diag_fd;
	bool diag_open;
	unsigned diag_seq;
};

struct activation;
struct wbd_config;

/* Bind CFG's TCP ("host:port", "[v6]:port") and Unix listeners (the
 * latter with listen.unix_mode and unix_group), or take the socket systemd
 * passed for the address from ACT; -1 after logging why (those bound
 * stay, for listeners_close). */
int listeners_open(struct listeners *ls, struct activation *act,
    const struct wbd_config *cfg);
/* Serve every socket of ACT that nothing claimed too; -1 if out of
 * memory. */
int listeners_adopt_rest(struct listeners *ls, struct activation *act);
void listeners_start(struct listeners *ls);
/* Stop accepting, close the sockets and remove Unix socket files. */
void listeners_close(struct listeners *ls);

/* Does a live server accept on the Unix socket at PATH? */
bool listener_unix_in_use(const char *path);

/*
 * Bind and listen on a Unix socket at PATH, refusing a path a live server
 * owns and replacing a stale socket file.  MODE >= 0 sets the file's mode
 * at bind time.  Returns the non-blocking socket, or -1 after logging
 * (WHAT names it in messages).
 */
int unix_listen(const char *path, const char *what, int mode);
/* Remove the socket file at PATH at exit; one wbd may no longer remove
 * (it gave up root) is left, and said so. */
void unix_unlink(const char *path);

#endif
