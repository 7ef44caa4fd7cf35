/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * peer.c - a connection's peer identity from its socket: see peer.h.
 * Runs on the connection's I/O thread; no locks, no name lookups.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peer.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux 4.13 */
#endif

/* Most processes have a handful of supplementary groups. */
#define PEER_GROUPS_GUESS 32

static void
peer_set_addr(struct peer_ident *p, const struct sockaddr_storage *ss)
{
	p->transport = PEER_TCP;
	if (ss->ss_family == AF_INET) {
		p->family = AF_INET;
		p->addr4 = ((const struct sockaddr_in *)ss)->sin_addr;
		return;
	}
	const struct in6_addr *a =
	    &((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a)) {
		p->family = AF_INET;
		memcpy(&p->addr4, a->s6_addr + 12, 4);
	} else {
		p->family = AF_INET6;
		p->addr6 = *a;
	}
}

/* The supplementary groups of the process that connected. */
static void
peer_read_groups(struct peer_ident *p, int fd)
{
	socklen_t len = PEER_GROUPS_GUESS * sizeof(gid_t);

	for (int tries = 0; tries < 2; tries++) {
		gid_t *g = malloc(len ? len : sizeof(gid_t));
		if (!g)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
			p->groups = g;
			p->n_groups = len / sizeof(gid_t);
			return;
		}
		free(g);
		/* ERANGE: LEN now says how much is needed. */
		if (errno != ERANGE)
			return;
	}
}

int
peer_ident_from_fd(struct peer_ident *p, int fd)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof ss;

	memset(p, 0, sizeof *p);
	if (getpeername(fd, (struct sockaddr *)&ss, &sslen) < 0)
		return -1;
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
		peer_set_addr(p, &ss);
		return 0;
	}
	if (ss.ss_family != AF_UNIX) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	p->transport = PEER_UNIX;

	struct ucred uc;
	socklen_t len = sizeof uc;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -1;
	p->uid = uc.uid;
	p->gid = uc.gid;
	p->has_cred = true;
	/* Without the list (an old kernel, no memory), only the effective
	 * gid counts. */
	peer_read_groups(p, fd);
	return 0;
}

void
peer_ident_clear(struct peer_ident *p)
{
	free(p->groups);
	memset(p, 0, sizeof *p);
}

int
peer_set_tls_name(char dst[PEER_TLS_NAME_BYTES], const char *name, size_t len)
{
	if (len >= PEER_TLS_NAME_BYTES || memchr(name, '\0', len)) {
		dst[0] = '\0';
		return -1;
	}
	memcpy(dst, name, len);
	dst[len] = '\0';
	return 0;
}

const char *
peer_describe(const struct peer_ident *p, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	int n;

	switch (p->transport) {
	case PEER_TCP:
		if (p->family == AF_INET)
			n = snprintf(buf, len, "%s",
			    inet_ntop(AF_INET, &p->addr4, a, sizeof a));
		else
			n = snprintf(buf, len, "[%s]",
			    inet_ntop(AF_INET6, &p->addr6, a, sizeof a));
		break;
	case PEER_UNIX:
		if (p->has_cred)
			n = snprintf(buf, len, "uid %u gid %u",
			    (unsigned)p->uid, (unsigned)p->gid);
		else
			n = snprintf(buf, len,
			    "unix peer (credentials unknown)");
		break;
	default:
		n = snprintf(buf, len, "unknown peer");
		break;
	}
	if (n < 0 || (size_t)n >= len)
		return buf;
	if (p->tls_psk[0])
		n += snprintf(buf + n, len - (size_t)n, " psk %.64s",
		    p->tls_psk);
	if ((size_t)n < len && p->tls_cn[0])
		snprintf(buf + n, len - (size_t)n, " cn %.64s", p->tls_cn);
	return buf;
}

const char *
peer_client_key(const struct sockaddr_storage *ss, unsigned v6_prefix,
    char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)ss;
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
		snprintf(buf, len, "%s", host);
		return buf;
	}
	if (ss->ss_family != AF_INET6) {
		snprintf(buf, len, "?");
		return buf;
	}
	const struct sockaddr_in6 *sin6 = (const void *)ss;
	struct in6_addr a = sin6->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(&a)) {
		inet_ntop(AF_INET, &a.s6_addr[12], host, sizeof host);
		snprintf(buf, len, "%s", host);
		return buf;
	}
	if (v6_prefix == 0 || v6_prefix > 128)
		v6_prefix = 128;
	for (unsigned bit = v6_prefix; bit < 128; bit++)
		a.s6_addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
	inet_ntop(AF_INET6, &a, host, sizeof host);
	if (v6_prefix == 128)
		snprintf(buf, len, "%s", host);
	else
		snprintf(buf, len, "%s/%u", host, v6_prefix);
	return buf;
}
