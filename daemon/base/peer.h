/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * peer.h - who is at the other end of a connection: the identity an allow
 * list (access.h) is matched against.
 *
 * Gathered once by the connection's I/O thread from the accepted socket
 * (peer_ident_from_fd: the address of a TCP peer; the credentials of a
 * Unix-socket peer), completed by conn.c once the TLS handshake is done
 * (conn_tls_step: the PSK username, the verified client certificate's
 * common name), and read by that thread alone.
 */
#ifndef WBD_PEER_H
#define WBD_PEER_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* A TLS identity: a PSK username or a certificate's common name. */
#define PEER_TLS_NAME_BYTES 256

enum peer_transport {
	PEER_UNKNOWN = 0, /* getpeername failed: matches no
	                                   address or credential entry */
	PEER_TCP,
	PEER_UNIX,
};

struct peer_ident {
	enum peer_transport transport;

	/* PEER_TCP: the client's address; an IPv4-mapped IPv6 address is
	 * stored as the IPv4 address it carries. */
	int family;            /* AF_INET or AF_INET6 */
	struct in6_addr addr6; /* AF_INET6 */
	struct in_addr addr4;  /* AF_INET */

	/* PEER_UNIX: the credentials of the process that connected, as the
	 * kernel recorded them at connect() (SO_PEERCRED, SO_PEERGROUPS). */
	bool has_cred;
	uid_t uid;     /* effective uid */
	gid_t gid;     /* effective gid */
	gid_t *groups; /* supplementary groups (malloc'd) */
	size_t n_groups;

	/*
	 * Set by the TLS code once the TLS handshake has succeeded, before any
	 * option that follows it is handled; "" until then, and on a plain
	 * connection.  NUL-terminated, cut to PEER_TLS_NAME_BYTES - 1 bytes
	 * (a longer name matches no entry: see peer_set_tls_name).
	 */
	char tls_psk[PEER_TLS_NAME_BYTES]; /* the PSK username */
	char tls_cn[PEER_TLS_NAME_BYTES];  /* the verified client
	                                           certificate's CN */
};

/* Fill *P from the accepted socket FD: 0, or -1 with errno (P then holds
 * what could be read; PEER_UNKNOWN if nothing).  A Unix peer's group list
 * is left empty if it cannot be read: its effective gid still counts. */
int peer_ident_from_fd(struct peer_ident *p, int fd);
/* Free what *P holds (the group list) and zero it. */
void peer_ident_clear(struct peer_ident *p);

/*
 * Copy NAME (LEN bytes, not necessarily NUL-terminated) into DST, one of
 * tls_psk or tls_cn.  A name that holds a NUL or does not fit is stored as
 * "" and -1 is returned: it then matches no psk: or cn: entry.
 */
int
peer_set_tls_name(char dst[PEER_TLS_NAME_BYTES], const char *name, size_t len);

/*
 * The key a TCP client's connections are counted under
 * (limits.max_connections_per_client), from its address SS: an IPv4
 * address (also when IPv4-mapped IPv6) as it is; an IPv6 one cut to its
 * first V6_PREFIX bits, 1 to 128, as "2001:db8:1:2::/64" (a host given a
 * whole /64 could otherwise take a share per address of it); whole at
 * 128.
 * Returns BUF (at least PEER_CLIENT_KEY_BYTES).
 */
#define PEER_CLIENT_KEY_BYTES 64
const char *peer_client_key(const struct sockaddr_storage *ss,
    unsigned v6_prefix, char *buf, size_t len);

/* "127.0.0.2", "[::1]", "uid 1000 gid 1000", with " psk alice" or
 * " cn host1" once TLS is up: for the log.  Returns BUF. */
const char *peer_describe(const struct peer_ident *p, char *buf, size_t len);

#endif
