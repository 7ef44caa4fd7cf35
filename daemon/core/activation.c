/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * activation.c - sockets passed by systemd (sd_listen_fds_with_names).
 *
 * A passed socket is matched to a configured one by the address it is
 * bound to (getsockname), not by its name, so that a .socket unit and the
 * "listen" group that say the same thing agree whatever the unit calls
 * its sockets; the names only label the log.  Main thread only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "activation.h"
#include "log.h"

int
activation_take(struct activation *a)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names);
	int r = 0;

	memset(a, 0, sizeof *a);
	if (n < 0) {
		errno = -n;
		log_warn("socket activation: cannot take the passed sockets");
		return -1;
	}
	if (n > 0 && !(a->v = calloc((size_t)n, sizeof *a->v))) {
		log_warnx("socket activation: out of memory");
		r = -1;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		struct activated *ent = a->v ? &a->v[a->n] : NULL;
		if (!ent) {
			close(fd);
			continue;
		}
		ent->fd = fd;
		snprintf(ent->name, sizeof ent->name, "%s",
		    names && names[i] && strcmp(names[i], "unknown") != 0 ?
			names[i] :
			"");
		ent->addrlen = sizeof ent->addr;
		if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0 ||
		    getsockname(fd, (struct sockaddr *)&ent->addr,
			&ent->addrlen) < 0) {
			log_warnx("socket activation: passed descriptor %d "
				  "(%s) is not a listening stream socket",
			    fd, ent->name[0] ? ent->name : "no name");
			close(fd);
			r = -1;
			continue;
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		a->n++;
	}
	if (names)
		for (int i = 0; i < n; i++)
			free(names[i]);
	free(names);
	return r;
}

static bool
activation_same(const struct sockaddr_storage *a, const struct sockaddr *b,
    socklen_t blen)
{
	if (a->ss_family != b->sa_family)
		return false;
	switch (b->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *x = (const void *)a,
					 *y = (const void *)b;
		return x->sin_port == y->sin_port &&
		    x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *x = (const void *)a,
					  *y = (const void *)b;
		return x->sin6_port == y->sin6_port &&
		    memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) ==
		    0;
	}
	case AF_UNIX: {
		const struct sockaddr_un *x = (const void *)a,
					 *y = (const void *)b;
		return strncmp(x->sun_path, y->sun_path, sizeof x->sun_path) ==
		    0;
	}
	default:
		return false;
	}
}

int
activation_claim(struct activation *a, const struct sockaddr *addr,
    socklen_t len)
{
	for (size_t i = 0; i < a->n; i++) {
		struct activated *ent = &a->v[i];
		if (ent->fd >= 0 && activation_same(&ent->addr, addr, len)) {
			int fd = ent->fd;
			ent->fd = -1;
			return fd;
		}
	}
	return -1;
}

int
activation_claim_unix(struct activation *a, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof sun.sun_path)
		return -1;
	strcpy(sun.sun_path, path);
	return activation_claim(a, (struct sockaddr *)&sun, sizeof sun);
}

const struct activated *
activation_next_unclaimed(struct activation *a, int *fd)
{
	for (size_t i = 0; i < a->n; i++) {
		struct activated *ent = &a->v[i];
		if (ent->fd >= 0) {
			*fd = ent->fd;
			ent->fd = -1;
			return ent;
		}
	}
	return NULL;
}

void
activation_describe(const struct activated *ent, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	switch (ent->addr.ss_family) {
	case AF_INET: {
		const struct sockaddr_in *sin = (const void *)&ent->addr;
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
		snprintf(buf, len, "tcp %s:%u", host, ntohs(sin->sin_port));
		break;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *sin6 = (const void *)&ent->addr;
		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
		snprintf(buf, len, "tcp [%s]:%u", host, ntohs(sin6->sin6_port));
		break;
	}
	case AF_UNIX: {
		const struct sockaddr_un *sun = (const void *)&ent->addr;
		snprintf(buf, len, "unix %.*s", (int)sizeof sun->sun_path,
		    sun->sun_path[0] ? sun->sun_path : "(abstract)");
		break;
	}
	default:
		snprintf(buf, len, "socket of family %d", ent->addr.ss_family);
	}
}

void
activation_free(struct activation *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].fd >= 0)
			close(a->v[i].fd);
	free(a->v);
	memset(a, 0, sizeof *a);
}
