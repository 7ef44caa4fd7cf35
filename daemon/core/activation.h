/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * activation.h - listening sockets handed over by the service manager
 * (systemd socket activation: $LISTEN_FDS, $LISTEN_FDNAMES).
 *
 * Taken once at start-up, before anything binds; each configured socket
 * (listen.tcp, listen.unix, control.socket) then claims the passed socket
 * bound to its address instead of binding one, and the listeners serve
 * whatever is left unclaimed too.  Main thread only.
 */
#ifndef WBD_ACTIVATION_H
#define WBD_ACTIVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct activated {
	int fd;                       /* -1 once claimed */
	char name[64];                /* FileDescriptorName=, or "" */
	struct sockaddr_storage addr; /* what it is bound to */
	socklen_t addrlen;
};

struct activation {
	struct activated *v;
	size_t n;
};

/*
 * Take the sockets passed to this process (none when $LISTEN_PID is not
 * ours), and unset the variables.  Each must be a listening stream
 * socket; it is made non-blocking and close-on-exec.  0, or -1 after
 * logging why.
 */
int activation_take(struct activation *a);
/* The passed socket bound to ADDR, now the caller's; -1 if none is. */
int activation_claim(struct activation *a, const struct sockaddr *addr,
    socklen_t len);
/* The same for a Unix socket at PATH. */
int activation_claim_unix(struct activation *a, const char *path);
/* The next socket no one claimed, now the caller's; NULL when none is
 * left.  Its entry (name, address) stays readable until activation_free. */
const struct activated *
activation_next_unclaimed(struct activation *a, int *fd);
/* "tcp 127.0.0.1:10809", "unix /run/wbd/nbd.sock": ENT's address. */
void activation_describe(const struct activated *ent, char *buf, size_t len);
/* Close what no one claimed, free the table. */
void activation_free(struct activation *a);

#endif
