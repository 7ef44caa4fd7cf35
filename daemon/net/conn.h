/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * conn.h - one client connection, from the handshake to the close.
 * Lives on a single I/O thread, whose loop and connection list it gets
 * through a struct conn_host (struct ioloop embeds one).
 */
#ifndef WBD_CONN_H
#define WBD_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "ratelimit.h"
#include "stats.h"

/* Each connection's own input buffer, outside the memory budget: with
 * limits.max_connections, part of wbd's fixed overhead. */
#define CONN_RBUF_BYTES (128u << 10)

struct budget;
struct conn;
struct tls_server;
struct export_table;
struct pending_table;
struct job_owner;

/* What connections need from the thread that runs them.  Touched by that
 * thread alone. */
struct conn_host {
	struct ev_loop *loop;
	struct job_owner *owner;        /* where their requests' jobs end */
	struct export_table *exports;   /* what clients may ask for */
	struct pending_table *pending;  /* exports waiting for their remote;
	                                   NULL: none */
	struct budget *budget;          /* limits.max_inflight_bytes, shared
	                                   by every I/O thread */
	struct tls_server *tls;         /* the tls group now; NULL: off */
	unsigned index;                 /* for the log */
	struct conn *conns;             /* doubly linked through conn->next */
	unsigned n_conns;
	bool draining;                  /* shutting down: refuse new ones */
	/* The limits group as at start (each needs a restart to change,
	 * but max_inflight_bytes, which is the budget's). */
	struct limits_conf limits;
	ev_timer stall_timer; /* looks for stalled connections */
	bool stall_timer_set;
	/* After a connection of CLIENT has been freed (or refused). */
	void (*conn_gone)(struct conn_host *h, const char *client);
	struct stats_io stats;          /* its requests, per export */
	struct ratelimit fail_rl;       /* "request failed" lines */
	struct ratelimit hs_timeout_rl; /* "handshake not finished" */
	struct ratelimit client_rl;     /* clients' errors */
	struct ratelimit waiting_rl;    /* asked for a waiting export */
	struct ratelimit idle_rl;       /* "no request for N s" */
	/* Refused exports, handshakes cut short, failed TLS handshakes:
	 * a burst of lines per window (conn_log_refusal). */
	struct ratelimit refuse_rl;
	/* Between conn_host_cork and conn_host_uncork: replies are queued,
	 * and the connections holding them listed, to go out together. */
	bool corked;
	struct conn *cork_list; /* through conn->cork_next */
};

/* Take ownership of an accepted, non-blocking socket (H's thread); PEER
 * names it in the log, CLIENT is who holds its slot (slots.h), IDLE_S is
 * its listener's idle_timeout_s (-1: not given, the limits' apply). */
void conn_start(struct conn_host *h, int fd, const char *peer,
    const char *client, int idle_s);
/* Every connection of H: stop reading requests, close when what is in
 * flight is done (still haggling: close now). */
void conn_drain_all(struct conn_host *h);
/* Every connection of H: close now; requests in flight still complete on
 * the backend. */
void conn_abort_all(struct conn_host *h);
/* Hold the replies of requests completed from now on (H's thread: the
 * completions of one wake-up), then send each connection's in one write:
 * fewer system calls, and fewer wake-ups of the client, per reply. */
/* Connections closed by their idle timeout since start (every host). */
uint64_t conn_idle_closed(void);
void conn_host_cork(struct conn_host *h);
void conn_host_uncork(struct conn_host *h);

#endif
