/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics-http.c - GET /metrics over HTTP, for Prometheus, with
 * libmicrohttpd: a small, long-maintained HTTP server library (GNU, in
 * Debian as libmicrohttpd12) that parses requests, keeps connections and
 * timeouts and lets us serve from a thread of its own instead of writing
 * an HTTP server into wbd.
 *
 * Threads: the socket is bound by the main thread before detaching; the
 * requests are answered on libmicrohttpd's one polling thread (named
 * wbd-metrics), which builds the exposition (metrics_render: the locks of
 * "wbctl status", each for a few loads) into memory before sending any of
 * it, so a client that reads slowly or never holds no lock, and no I/O
 * thread ever waits for it.
 *
 * Bounds (metrics.*): at most max_connections at once, and
 * max_connections_per_client of one client.  Each step of a connection --
 * sending a whole request, taking its whole answer, the wait for the next
 * request on a kept-alive one -- has timeout_s in all, not per byte: a
 * client that drips a byte every few seconds is closed all the same.  And
 * a new client finding every connection taken closes the one waiting
 * longest (a second at least) for its request (a slow sender, an idle
 * keep-alive), so that
 * clients that never finish a request cannot keep Prometheus out.  Only
 * /metrics exists (404 for any other path, 405 for a method other than GET
 * or HEAD); while wbd shuts down the answer is 503.
 *
 * Every callback runs on libmicrohttpd's one thread: the list of
 * connections below is that thread's alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "atomics.h"
#include "clock.h"
#include "config-load.h"
#include "daemon.h"
#include "log.h"
#include "metrics-http.h"
#include "metrics.h"
#include "peer.h"
#include "ratelimit.h"
#include "slots.h"

#define METRICS_HTTP_BACKLOG 1024
#define METRICS_HTTP_REFUSE_LOG_NS (10ull * 1000000000ull)
#define METRICS_HTTP_PATH "/metrics"
/* A connection younger than this is never closed to make room: its
 * request may be in its socket, not yet read (a storm of scrapes). */
#define METRICS_HTTP_MAKE_ROOM_NS (1000000000ull)

/* A connection, from its start to its close (the MHD thread's). */
struct metrics_http_conn {
	char key[PEER_CLIENT_KEY_BYTES]; /* its client's */
	int fd;
	uint64_t since_ns; /* this step began (connected, request whole,
	                      answer sent) */
	bool answering;    /* its request is whole: being answered */
	bool cut;          /* shut down by wbd, not yet closed */
	struct metrics_http_conn *prev, *next;
};

struct metrics_http {
	struct daemon *d;
	char *listen; /* as configured, for the log */
	int fd;       /* the listening socket */
	struct MHD_Daemon *mhd;
	bool named; /* its thread is called wbd-metrics */
	/* The connections served now, and each client's (by
	 * peer_client_key: metrics.max_connections_per_client); the MHD
	 * thread's alone. */
	unsigned n_clients;
	struct slots *slots;
	struct metrics_http_conn *conns; /* newest first */
	struct ratelimit refuse_rl;
	struct ratelimit full_rl;
	struct ratelimit cut_rl;
};

/* Is SA a loopback address (127.0.0.0/8, ::1)? */
static bool
metrics_http_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)
				  ->sin_addr.s_addr) >>
			   24) == 127;
	return sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* Bind SPEC ("host:port") to the first address that takes it. */
static int
metrics_http_bind(const char *spec)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	}, *res, *ai;
	char *host, *port;
	int fd = -1, r;

	if (config_parse_hostport(spec, &host, &port) < 0) {
		log_warnx("metrics.listen %s: expected HOST:PORT", spec);
		return -1;
	}
	r = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	free(host);
	free(port);
	if (r != 0) {
		log_warnx("metrics.listen %s: %s", spec, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		int one = 1;
		fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
		    listen(fd, METRICS_HTTP_BACKLOG) < 0) {
			log_warn("metrics.listen %s", spec);
			close(fd);
			fd = -1;
		} else if (!metrics_http_loopback(ai->ai_addr)) {
			log_warnx(
			    "metrics.listen %s is not a loopback address: "
			    "whoever can reach it can read the metrics",
			    spec);
		}
	}
	freeaddrinfo(res);
	return fd;
}

int
metrics_http_open(struct daemon *d, struct metrics_http **out)
{
	const char *spec = d->cfg.metrics.listen;
	struct metrics_http *mh;

	*out = NULL;
	if (!spec)
		return 0;
	mh = calloc(1, sizeof *mh);
	if (!mh || !(mh->listen = strdup(spec))) {
		log_warnx("metrics.listen: out of memory");
		free(mh);
		return -1;
	}
	mh->d = d;
	mh->fd = metrics_http_bind(spec);
	if (mh->fd < 0) {
		free(mh->listen);
		free(mh);
		return -1;
	}
	*out = mh;
	return 0;
}

/* A plain-text answer (TEXT static). */
static enum MHD_Result
metrics_http_text(struct MHD_Connection *conn, unsigned status,
    const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text),
	    (void *)text, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	    "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
metrics_http_answer(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **req_cls)
{
	static int seen;
	struct metrics_http *mh = cls;

	if (!mh->named) {
		pthread_setname_np(pthread_self(), "wbd-metrics");
		mh->named = true;
	}
	if (*req_cls == NULL) {
		/* The headers: answer once any body has been read.  The
		 * request is whole: its answer has a step of its own. */
		*req_cls = &seen;
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(conn,
			MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		struct metrics_http_conn *c = ci ? ci->socket_context : NULL;
		if (c) {
			c->answering = true;
			c->since_ns = now_ns();
		}
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0; /* a body: ignored */
		return MHD_YES;
	}
	if (strcmp(url, METRICS_HTTP_PATH) != 0)
		return metrics_http_text(conn, MHD_HTTP_NOT_FOUND,
		    "not found: wbd serves " METRICS_HTTP_PATH " only\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return metrics_http_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		    "method not allowed: GET or HEAD\n");
	if (load_acquire(&mh->d->stopping))
		return metrics_http_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
		    "wbd is shutting down\n");

	size_t len;
	char *text = metrics_render(mh->d, &len);
	if (!text)
		return metrics_http_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		    "out of memory\n");
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	    METRICS_CONTENT_TYPE);
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ADDR's key (peer_client_key), as the NBD listeners count clients. */
static void
metrics_http_key(const struct metrics_http *mh, const struct sockaddr *addr,
    char key[PEER_CLIENT_KEY_BYTES])
{
	struct sockaddr_storage ss = { 0 };

	if (addr && addr->sa_family == AF_INET6)
		memcpy(&ss, addr, sizeof(struct sockaddr_in6));
	else if (addr && addr->sa_family == AF_INET)
		memcpy(&ss, addr, sizeof(struct sockaddr_in));
	peer_client_key(&ss, mh->d->cfg.limits.client_ipv6_prefix, key,
	    PEER_CLIENT_KEY_BYTES);
}

/* Close C for good: its socket is shut down, and libmicrohttpd, finding
 * it ended, closes it and calls metrics_http_notify. */
static void
metrics_http_cut(struct metrics_http *mh, struct metrics_http_conn *c,
    const char *why)
{
	unsigned quiet;

	if (c->cut)
		return;
	c->cut = true;
	shutdown(c->fd, SHUT_RDWR);
	add_relaxed(&mh->d->metrics_cut, 1);
	if (ratelimit_due(&mh->cut_rl, METRICS_HTTP_REFUSE_LOG_NS, &quiet))
		log_warnx("metrics: closed a connection of %s: %s (%u more "
			  "not logged)",
		    c->key, why, quiet);
}

/*
 * Close every connection whose step has outlasted metrics.timeout_s; then,
 * if all max_connections are still taken, the one waiting longest for a
 * request.  Run when a client connects: that is when a slot is wanted.
 */
static void
metrics_http_sweep(struct metrics_http *mh)
{
	const struct metrics_conf *mc = &mh->d->cfg.metrics;
	uint64_t now = now_ns(), limit = (uint64_t)mc->timeout_s * 1000000000u;
	struct metrics_http_conn *c, *oldest = NULL;
	unsigned open = 0;

	for (c = mh->conns; c; c = c->next) {
		if (c->cut)
			continue;
		if (now - c->since_ns >= limit) {
			metrics_http_cut(mh, c,
			    c->answering ?
				"its answer was not taken within "
				"metrics.timeout_s" :
				"no whole request within metrics.timeout_s");
			continue;
		}
		open++;
		if (!c->answering &&
		    now - c->since_ns >= METRICS_HTTP_MAKE_ROOM_NS)
			oldest = c; /* the list is newest first */
	}
	if (open >= mc->max_connections && oldest)
		metrics_http_cut(mh, oldest,
		    "all metrics.max_connections taken, and a new client "
		    "came: the one waiting longest for a request makes room");
}

/* Take a client only within metrics.max_connections_per_client; a
 * refusal is counted and logged (once in 10 s), so that no client,
 * however many connections it opens and leaves idle, keeps Prometheus
 * out.  Room among metrics.max_connections is made by metrics_http_sweep. */
static enum MHD_Result
metrics_http_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	struct metrics_http *mh = cls;
	const struct metrics_conf *mc = &mh->d->cfg.metrics;
	char key[PEER_CLIENT_KEY_BYTES];
	unsigned same, quiet;

	(void)len;
	metrics_http_sweep(mh);
	metrics_http_key(mh, addr, key);
	/* Taken once it starts (metrics_http_notify): this thread runs
	 * both, one connection at a time. */
	if ((same = slots_held(mh->slots, key)) <
	    mc->max_connections_per_client)
		return MHD_YES;
	add_relaxed(&mh->d->metrics_refused, 1);
	if (ratelimit_due(&mh->refuse_rl, METRICS_HTTP_REFUSE_LOG_NS, &quiet))
		log_warnx("metrics: refused a client at %s: it has %u "
			  "connections (metrics.max_connections_per_client) "
			  "(%u more refusals not logged)",
		    key, same, quiet);
	return MHD_NO;
}

/* A request answered (or given up): the wait for the next one on a
 * kept-alive connection is a step of its own. */
static void
metrics_http_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
    enum MHD_RequestTerminationCode toe)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct metrics_http_conn *c = ci ? ci->socket_context : NULL;

	if (c) {
		c->answering = false;
		c->since_ns = now_ns();
	}
}

/* Count the connections served and each client's (MHD's thread); *CTX
 * is the connection's struct metrics_http_conn, listed in MH->conns. */
static void
metrics_http_notify(void *cls, struct MHD_Connection *conn, void **ctx,
    enum MHD_ConnectionNotificationCode toe)
{
	struct metrics_http *mh = cls;
	struct metrics_http_conn *c = *ctx;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(conn,
			MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		const union MHD_ConnectionInfo *fi =
		    MHD_get_connection_info(conn,
			MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!fi || !(c = calloc(1, sizeof *c)))
			return; /* not counted: its client gets one more */
		metrics_http_key(mh, ci ? ci->client_addr : NULL, c->key);
		if (!slots_take(mh->slots, c->key)) {
			free(c);
			return;
		}
		c->fd = fi->connect_fd;
		c->since_ns = now_ns();
		c->next = mh->conns;
		if (mh->conns)
			mh->conns->prev = c;
		mh->conns = c;
		mh->n_clients++;
		*ctx = c;
		unsigned quiet;
		if (mh->n_clients >= mh->d->cfg.metrics.max_connections &&
		    ratelimit_due(&mh->full_rl, METRICS_HTTP_REFUSE_LOG_NS,
			&quiet))
			log_warnx("metrics: all %u connections in use "
				  "(metrics.max_connections): the next client "
				  "closes the one waiting longest for a "
				  "request (%u more times not logged)",
			    mh->n_clients, quiet);
	} else if (c) {
		slots_release(mh->slots, c->key);
		if (c->prev)
			c->prev->next = c->next;
		else
			mh->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		mh->n_clients--;
		free(c);
		*ctx = NULL;
	}
	store_relaxed(&mh->d->metrics_clients, mh->n_clients);
}

/* libmicrohttpd's own complaints, into wbd's log. */
static void metrics_http_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
metrics_http_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	log_debug("metrics: %s", msg);
}

int
metrics_http_start(struct metrics_http *mh)
{
	sigset_t all, old;

	if (!mh)
		return 0;
	mh->slots = slots_new(mh->d->cfg.metrics.max_connections_per_client);
	if (!mh->slots) {
		log_warnx("metrics: out of memory");
		return -1;
	}
	/* Its thread takes no signal: they go to the main loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	/* poll(), not epoll: libmicrohttpd's edge-triggered epoll can miss
	 * the end of a client that sent half a request and closed, keeping
	 * its connection until the timeout; a thousand sockets at most. */
	const struct metrics_conf *mc = &mh->d->cfg.metrics;
	mh->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
		MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG,
	    0, metrics_http_accept, mh, metrics_http_answer, mh,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)mh->fd,
	    /* One more than ours: the one that makes room. */
	    MHD_OPTION_CONNECTION_LIMIT, mc->max_connections + 1,
	    MHD_OPTION_CONNECTION_TIMEOUT, mc->timeout_s,
	    MHD_OPTION_NOTIFY_CONNECTION, metrics_http_notify, mh,
	    MHD_OPTION_NOTIFY_COMPLETED, metrics_http_completed, mh,
	    MHD_OPTION_EXTERNAL_LOGGER, metrics_http_log, NULL, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!mh->mhd) {
		log_warnx("metrics.listen %s: cannot start the HTTP endpoint",
		    mh->listen);
		return -1;
	}
	log_info("metrics: serving http://%s" METRICS_HTTP_PATH, mh->listen);
	return 0;
}

void
metrics_http_stop(struct metrics_http *mh)
{
	if (!mh)
		return;
	if (mh->mhd) {
		/* The socket stays ours to close. */
		MHD_quiesce_daemon(mh->mhd);
		MHD_stop_daemon(mh->mhd);
	}
	close(mh->fd);
	slots_free(mh->slots);
	free(mh->listen);
	free(mh);
}
