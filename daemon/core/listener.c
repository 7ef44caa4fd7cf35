/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * listener.c - TCP and Unix listening sockets.
 *
 * Main thread only.  A Unix socket path that is already in use by a live
 * server is never clobbered: binding fails with a clear message; a stale
 * socket file (nobody accepts on it) is removed and replaced.  A socket
 * passed by systemd (activation.c) for a configured address is used as it
 * is, and its file, which belongs to the .socket unit, is never removed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "activation.h"
#include "config-load.h"
#include "listener.h"
#include "log.h"
#include "peer.h"
#include "ratelimit.h"

/* The kernel's bound (net.core.somaxconn, which caps it): a reconnection
 * storm after a restart, up to limits.max_connections (1024) clients at
 * once, overflowed a backlog of 128 (TCP clients then wait a SYN
 * retransmission, a second or more; Unix ones get EAGAIN). */
#define LISTEN_BACKLOG SOMAXCONN
#define ACCEPTS_PER_WAKEUP      32
#define ACCEPT_PAUSE_S          0.5
#define LISTENER_LOG_NS (10ull * 1000000000ull)

struct listener {
	struct listener *next;
	struct listeners *ls;
	int fd;
	ev_io w;
	ev_timer pause;                 /* out of descriptors: retry later */
	char desc[128];
	char *unix_path;                /* to unlink at exit */
	unsigned long accepted;
	bool is_tcp;
	int idle_s; /* its idle_timeout_s for what it accepts; -1: the
	               limits' (a socket from systemd no listener names) */
};

/* Is A (of family A_FAM) an IPv4-mapped IPv6 address of B, an IPv4
 * one? */
static bool
listener_diag_mapped(const uint32_t *a, int a_fam, const uint32_t *b, int b_fam)
{
	return a_fam == AF_INET6 && b_fam == AF_INET && a[0] == 0 &&
	    a[1] == 0 && a[2] == htonl(0xffff) && a[3] == b[0];
}

/* Is GOT, an address of a socket of family GOT_FAM as sock_diag gives
 * it, WANT (of family WANT_FAM)?  An IPv4 socket is found for an
 * IPv4-mapped IPv6 address, and a dual-stack IPv6 socket for an IPv4
 * one. */
static bool
listener_diag_addr_eq(const uint32_t *got, int got_fam, const uint32_t *want,
    int want_fam)
{
	if (got_fam == want_fam)
		return memcmp(got, want, got_fam == AF_INET ? 4 : 16) == 0;
	return listener_diag_mapped(want, want_fam, got, got_fam) ||
	    listener_diag_mapped(got, got_fam, want, want_fam);
}

/*
 * The uid owning the other end of the TCP connection FD (whose peer is
 * SS), if that end is a socket on this host: asked of the kernel by its
 * four addresses (sock_diag, as ss(8) does; no privilege needed).  0 with
 * *UID set, or -1: a remote client, or the kernel cannot say.
 */
static int
listener_local_uid(struct listeners *ls, int fd,
    const struct sockaddr_storage *ss, uid_t *uid)
{
	struct sockaddr_storage self;
	socklen_t len = sizeof self;
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr nlh;
		char buf[1024];
	} ans;
	struct inet_diag_sockid *id = &req.r.id;

	if (!ls->diag_open ||
	    getsockname(fd, (struct sockaddr *)&self, &len) < 0 ||
	    self.ss_family != ss->ss_family)
		return -1;
	memset(&req, 0, sizeof req);
	req.nlh.nlmsg_len = sizeof req;
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.r.sdiag_family = (uint8_t)ss->ss_family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	/* The client's socket: its own address is our peer's. */
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *p = (const void *)ss;
		const struct sockaddr_in *m = (const void *)&self;
		id->idiag_sport = p->sin_port;
		id->idiag_dport = m->sin_port;
		memcpy(id->idiag_src, &p->sin_addr, 4);
		memcpy(id->idiag_dst, &m->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *p = (const void *)ss;
		const struct sockaddr_in6 *m = (const void *)&self;
		id->idiag_sport = p->sin6_port;
		id->idiag_dport = m->sin6_port;
		memcpy(id->idiag_src, &p->sin6_addr, 16);
		memcpy(id->idiag_dst, &m->sin6_addr, 16);
	} else {
		return -1;
	}
	id->idiag_cookie[0] = id->idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	req.nlh.nlmsg_seq = ++ls->diag_seq;
	if (send(ls->diag_fd, &req, sizeof req, 0) != (ssize_t)sizeof req)
		return -1;
	/* The kernel answers within send(): never waits; an answer left
	 * from before (its seq) is skipped. */
	ssize_t n;
	do
		n = recv(ls->diag_fd, &ans, sizeof ans, MSG_DONTWAIT);
	while (
	    n >= (ssize_t)sizeof ans.nlh && ans.nlh.nlmsg_seq != ls->diag_seq);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) ||
	    !NLMSG_OK(&ans.nlh, (size_t)n) ||
	    ans.nlh.nlmsg_type != SOCK_DIAG_BY_FAMILY)
		return -1; /* NLMSG_ERROR (ENOENT): not on this host */
	/* The lookup falls back to a listener on the peer's port (a remote
	 * client whose source port a local service listens on): only the
	 * socket connected to us is the client's. */
	const struct inet_diag_msg *m = NLMSG_DATA(&ans.nlh);
	if (m->idiag_state == TCP_LISTEN ||
	    m->id.idiag_sport != id->idiag_sport ||
	    m->id.idiag_dport != id->idiag_dport ||
	    !listener_diag_addr_eq(m->id.idiag_src, m->idiag_family,
		id->idiag_src, ss->ss_family) ||
	    !listener_diag_addr_eq(m->id.idiag_dst, m->idiag_family,
		id->idiag_dst, ss->ss_family))
		return -1;
	*uid = m->idiag_uid;
	return 0;
}

static void
listener_pause_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct listener *l = t->data;
	ev_io_start(loop, &l->w);
}

/*
 * accept() failed.  Out of descriptors (EMFILE, ENFILE) or memory: the
 * waiting clients are taken with the spare descriptor kept for this and
 * closed at once (they see the connection closed, rather than hang in the
 * backlog); without a spare, or out of memory, accepting pauses a moment
 * (no busy loop).  Logged at most every 10 s.
 */
static void
listener_accept_failed(struct listener *l, struct ev_loop *loop)
{
	int err = errno;
	unsigned quiet;

	if (ratelimit_due(&l->ls->accept_log, LISTENER_LOG_NS, &quiet)) {
		errno = err;
		log_warn("%s: accept (%u more failures not logged)%s", l->desc,
		    quiet,
		    err == EMFILE || err == ENFILE ?
			"; new clients are refused until descriptors are free "
			"(raise LimitNOFILE or lower limits.max_connections)" :
			"");
	}
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return;
	if ((err == EMFILE || err == ENFILE) && l->ls->spare_fd >= 0) {
		/* Refuse every client waiting now; the socket is then no
		 * longer readable, so there is no busy loop to pause. */
		close(l->ls->spare_fd);
		int fd;
		for (unsigned i = 0; i < ACCEPTS_PER_WAKEUP &&
		     (fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0;
		     i++)
			close(fd);
		l->ls->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (l->ls->spare_fd >= 0)
			return;
	}
	ev_io_stop(loop, &l->w);
	ev_timer_set(&l->pause, ACCEPT_PAUSE_S, 0);
	ev_timer_start(loop, &l->pause);
}

static void
listener_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct listener *l = w->data;

	for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof ss;
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sslen,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR || errno == ECONNABORTED)
				return;
			listener_accept_failed(l, loop);
			return;
		}

		char peer[64], client[PEER_CLIENT_KEY_BYTES];
		l->accepted++;
		if (l->is_tcp) {
			int one = 1;
			char host[INET6_ADDRSTRLEN] = "?";
			unsigned port = 0;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			if (ss.ss_family == AF_INET) {
				struct sockaddr_in *sin = (void *)&ss;
				inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
				port = ntohs(sin->sin_port);
				snprintf(peer, sizeof peer, "%s:%u", host, port);
			} else {
				struct sockaddr_in6 *sin6 = (void *)&ss;
				inet_ntop(AF_INET6, &sin6->sin6_addr, host,
				    sizeof host);
				port = ntohs(sin6->sin6_port);
				snprintf(peer, sizeof peer, "[%s]:%u", host, port);
			}
			uid_t uid;
			if (listener_local_uid(l->ls, fd, &ss, &uid) == 0)
				snprintf(client, sizeof client, "uid %u",
				    (unsigned)uid);
			else
				peer_client_key(&ss, l->ls->client_ipv6_prefix,
				    client, sizeof client);
		} else {
			struct ucred uc;
			socklen_t len = sizeof uc;
			snprintf(peer, sizeof peer, "unix#%lu", l->accepted);
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc,
				&len) == 0)
				snprintf(client, sizeof client, "uid %u",
				    (unsigned)uc.uid);
			else
				snprintf(client, sizeof client, "uid ?");
		}
		l->ls->accept(l->ls->arg, fd, peer, client, l->idle_s);
	}
}

static struct listener *
listener_add(struct listeners *ls, int fd, const char *desc, bool is_tcp,
    int idle_s)
{
	struct listener *l = calloc(1, sizeof *l);

	if (!l) {
		close(fd);
		return NULL;
	}
	l->ls = ls;
	l->fd = fd;
	l->is_tcp = is_tcp;
	l->idle_s = idle_s;
	snprintf(l->desc, sizeof l->desc, "%s", desc);
	ev_io_init(&l->w, listener_accept_cb, fd, EV_READ);
	l->w.data = l;
	ev_timer_init(&l->pause, listener_pause_cb, ACCEPT_PAUSE_S, 0);
	l->pause.data = l;
	l->next = ls->head;
	ls->head = l;
	return l;
}

static int
listener_open_tcp(struct listeners *ls, struct activation *act,
    const char *spec, int idle_s)
{
	char *host = NULL, *port = NULL;
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	}, *res, *ai;
	int n = 0, failed = 0, err = 0, r;
	const char *step = NULL;
	char desc[128];

	if (config_parse_hostport(spec, &host, &port) < 0) {
		log_errorx("listen %s: expected HOST:PORT or [V6ADDR]:PORT",
		    spec);
		return -1;
	}
	r = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	free(host);
	free(port);
	if (r != 0) {
		log_errorx("listen %s: %s", spec, gai_strerror(r));
		return -1;
	}
	snprintf(desc, sizeof desc, "tcp %s", spec);
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = activation_claim(act, ai->ai_addr, ai->ai_addrlen);
		if (fd >= 0) {
			if (listener_add(ls, fd, desc, true, idle_s))
				n++;
			log_info("listening on tcp %s (socket from systemd)",
			    spec);
			continue;
		}
		fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
		int one = 1;
		step = "socket";
		if (fd >= 0) {
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
			    sizeof one);
			if (ai->ai_family == AF_INET6)
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
				    sizeof one);
			step = "bind";
			if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
				step = "listen";
				if (listen(fd, LISTEN_BACKLOG) == 0) {
					if (listener_add(ls, fd, desc, true,
						idle_s))
						n++;
					continue;
				}
			}
		}
		err = errno;
		failed++;
		if (fd >= 0)
			close(fd);
	}
	freeaddrinfo(res);
	/* One line: every address failed (an error, wbd stops), or some
	 * did (a warning: "localhost" without IPv6, say). */
	if (n == 0) {
		log_errorx("listen %s: cannot %s: %s", spec,
		    step ? step : "bind", strerror(err));
		return -1;
	}
	if (failed)
		log_warnx("listen %s: %d of its addresses cannot be used "
			  "(%s: %s); serving on the others",
		    spec, failed, step, strerror(err));
	log_info("listening on tcp %s", spec);
	return 0;
}

/* Is a live server accepting on the Unix socket at PATH? */
static bool
unix_socket_is_live(const struct sockaddr_un *sun)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd < 0)
		return true;    /* cannot tell: do not clobber */
	live = connect(fd, (const struct sockaddr *)sun, sizeof *sun) == 0 ||
	    (errno != ECONNREFUSED && errno != ENOENT);
	close(fd);
	return live;
}

bool
listener_unix_in_use(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof sun.sun_path)
		return false;
	strcpy(sun.sun_path, path);
	return unix_socket_is_live(&sun);
}

int
unix_listen(const char *path, const char *what, int mode)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(path) >= sizeof sun.sun_path) {
		log_errorx("%s %s: path too long", what, path);
		return -1;
	}
	strcpy(sun.sun_path, path);

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_errorx("%s %s: exists and is not a socket; "
				   "not removing it",
			    what, path);
			return -1;
		}
		if (unix_socket_is_live(&sun)) {
			log_errorx("%s %s: already in use by a running "
				   "server",
			    what, path);
			return -1;
		}
		log_info("removing stale socket %s", path);
		if (unlink(path) < 0 && errno != ENOENT) {
			log_error("%s %s: cannot remove stale socket", what,
			    path);
			return -1;
		}
	} else {
		/* Create the socket's directory if only the last level is missing. */
		char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
		if (slash && slash != dir) {
			*slash = '\0';
			if (mkdir(dir, 0755) == 0)
				log_info("created directory %s", dir);
		}
		free(dir);
	}

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("%s %s: socket", what, path);
		return -1;
	}
	/* The mode is set at bind time: never a moment more open than asked. */
	mode_t old = mode >= 0 ? umask(~(mode_t)mode & 0777) : 0;
	int r = bind(fd, (struct sockaddr *)&sun, sizeof sun);
	if (mode >= 0)
		umask(old);
	if (r < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
		int err = errno;
		char *dir = strdup(path),
		     *slash = dir ? strrchr(dir, '/') : NULL;
		if (slash)
			*slash = '\0';
		if (r < 0 && err == ENOENT && slash && slash != dir)
			log_errorx("%s %s: directory %s does not exist", what,
			    path, dir);
		else
			log_errorx("%s %s: cannot %s: %s", what, path,
			    r < 0 ? "bind" : "listen", strerror(err));
		free(dir);
		close(fd);
		return -1;
	}
	if (mode >= 0 && chmod(path, (mode_t)mode) < 0)
		log_warn("%s %s: chmod", what, path);
	return fd;
}

/* An NBD Unix socket, with listen.unix_mode and listen.unix_group. */
static int
listener_open_unix(struct listeners *ls, struct activation *act,
    const char *path, const struct wbd_config *cfg, int idle_s)
{
	int fd = activation_claim_unix(act, path);
	bool passed = fd >= 0;

	/* A socket systemd passed has the socket unit's mode and group. */
	if (!passed) {
		fd = unix_listen(path, "listen unix", (int)cfg->unix_mode);
		if (fd < 0)
			return -1;
		if (cfg->unix_group &&
		    chown(path, (uid_t)-1, (gid_t)cfg->unix_gid) < 0) {
			log_warn("listen unix %s: chown to group %s", path,
			    cfg->unix_group);
			close(fd);
			unlink(path);
			return -1;
		}
	}
	char desc[128];
	snprintf(desc, sizeof desc, "unix %s", path);
	struct listener *l = listener_add(ls, fd, desc, false, idle_s);
	if (!l || (!passed && !(l->unix_path = strdup(path)))) {
		log_errorx("listen unix %s: out of memory", path);
		if (!passed)
			unlink(path);
		return -1;
	}
	if (passed)
		log_info("listening on unix %s (socket from systemd)", path);
	else
		log_info("listening on unix %s (mode %04o%s%s)", path,
		    cfg->unix_mode, cfg->unix_group ? ", group " : "",
		    cfg->unix_group ? cfg->unix_group : "");
	return 0;
}

int
listeners_open(struct listeners *ls, struct activation *act,
    const struct wbd_config *cfg)
{
	ls->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ls->client_ipv6_prefix = cfg->limits.client_ipv6_prefix;
	ls->diag_fd =
	    socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	ls->diag_open = ls->diag_fd >= 0;
	if (!ls->diag_open)
		log_warn("sock_diag: TCP clients of this host are counted by "
			 "address, not by user (limits.max_connections_per_"
			 "client)");
	for (size_t i = 0; i < cfg->n_listen_tcp; i++)
		if (listener_open_tcp(ls, act, cfg->listen_tcp[i],
			config_listen_idle_s(cfg->listen_tcp_idle_s, i)) < 0)
			return -1;
	for (size_t i = 0; i < cfg->n_listen_unix; i++)
		if (listener_open_unix(ls, act, cfg->listen_unix[i], cfg,
			config_listen_idle_s(cfg->listen_unix_idle_s, i)) < 0)
			return -1;
	return 0;
}

int
listeners_adopt_rest(struct listeners *ls, struct activation *act)
{
	const struct activated *ent;
	char desc[128];
	int fd;

	while ((ent = activation_next_unclaimed(act, &fd)) != NULL) {
		activation_describe(ent, desc, sizeof desc);
		bool is_tcp = ent->addr.ss_family != AF_UNIX;
		if (!listener_add(ls, fd, desc, is_tcp, -1)) {
			log_errorx("listen %s: out of memory", desc);
			return -1;
		}
		log_info("listening on %s (socket from systemd%s%s, not in "
			 "listen)",
		    desc, ent->name[0] ? " named " : "", ent->name);
	}
	return 0;
}

void
unix_unlink(const char *path)
{
	if (unlink(path) == 0 || errno == ENOENT)
		return;
	if (errno == EACCES || errno == EPERM)
		/* wbd gave up root and may not write the directory. */
		log_info("socket %s left in place (%s): the next start "
			 "replaces it",
		    path, strerror(errno));
	else
		log_warn("cannot remove %s", path);
}

void
listeners_start(struct listeners *ls)
{
	for (struct listener *l = ls->head; l; l = l->next)
		ev_io_start(ls->loop, &l->w);
}

void
listeners_close(struct listeners *ls)
{
	struct listener *l = ls->head;

	if (ls->spare_fd >= 0)
		close(ls->spare_fd);
	ls->spare_fd = -1;
	if (ls->diag_open)
		close(ls->diag_fd);
	ls->diag_open = false;
	ls->head = NULL;
	while (l) {
		struct listener *next = l->next;
		ev_io_stop(ls->loop, &l->w);
		ev_timer_stop(ls->loop, &l->pause);
		close(l->fd);
		if (l->unix_path) {
			unix_unlink(l->unix_path);
			free(l->unix_path);
		}
		free(l);
		l = next;
	}
}
