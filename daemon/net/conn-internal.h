/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * conn-internal.h - what the two halves of a connection share; nothing
 * outside them includes it.  struct conn and its states, and the calls
 * between conn.c (the handshake and the request state machine) and
 * conn-io.c (the transport: the socket, TLS, the output queue).
 * Everything here runs on the connection's I/O thread.
 */
#ifndef WBD_CONN_INTERNAL_H
#define WBD_CONN_INTERNAL_H

#include <assert.h>
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fill.h"
#include "handshake.h"
#include "peer.h"
#include "proto.h"

struct budget_client;
struct buf;
struct conn_host;
struct export;
struct out;
struct request;
struct stats_export_io;
struct tls_session;

#define CONN_DIRECT_READ_BYTES (64u << 10)
/* WRITEs from this size on are received into cache pages (one copy). */
#define CONN_ZERO_COPY_BYTES CONN_DIRECT_READ_BYTES
#define CONN_MAX_IOV 64
/* Pieces of a payload read at once (a 1 MiB write in 4 KiB pages). */
#define CONN_MAX_PAYLOAD_IOV 256

enum conn_state {
	CS_HS_CLIENT_FLAGS, /* waiting for the client's 32-bit flags */
	CS_HS_OPT_HEADER,   /* waiting for IHAVEOPT, option, length */
	CS_HS_OPT_DATA,     /* waiting for an option's data */
	CS_HS_OPT_DISCARD,  /* skipping an oversized option's data */
	CS_TLS_START,       /* STARTTLS answered: sending the reply */
	CS_TLS_HANDSHAKE,   /* in the TLS handshake */
	CS_TX_HEADER,       /* waiting for a 28-byte request header */
	CS_TX_PAYLOAD,      /* filling a WRITE's payload */
	CS_TX_DISCARD,      /* skipping a rejected WRITE's payload */
	CS_DONE,            /* reading no more */
};

struct conn {
	struct conn *next, *prev; /* on host->conns */
	struct conn_host *host;
	int fd;
	char peer[64];
	char client[64]; /* whose slot it holds */
	ev_io rw, ww;
	ev_timer hs_timer;      /* handshake deadline, then the idle
	                           timeout (limits.idle_timeout_s) */
	ev_tstamp last_request; /* when the last request came */
	unsigned idle_s;        /* its idle timeout: the export's
	                           idle_timeout_s, else its listener's,
	                           else limits.idle_timeout_s, or
	                           local_idle_timeout_s for a client
	                           counted by uid; 0: none */
	const char *idle_key;   /* which of them, for the log */
	int listen_idle_s;      /* its listener's, or -1 */
	/* Since when it holds replies not sent or a request not all
	 * received and has made no progress (limits.stall_timeout_s): the
	 * last byte moved either way, or the first reply queued. */
	ev_tstamp stall_since;
	ev_tstamp sent_at;      /* when it last sent a byte (or chose
	                           its export) */
	ev_tstamp out_since;    /* when its output queue last filled
	                           from empty */
	bool replied;           /* a reply to a request of its has gone
	                           out whole: it reads them (conn.c,
	                           conn_not_reading) */
	ev_timer budget_timer;  /* waiting for the memory budget */
	ev_tstamp connected_at; /* when it chose its export */
	enum conn_state state;
	bool reading;        /* rw is started */
	bool paused;         /* stopped by back-pressure */
	bool budget_wait;    /* paused until budget_timer */
	bool budget_starved; /* has waited since its last take */
	uint64_t starved_ns; /* since when (now_ns()) */
	bool closing;        /* no more input; close when idle */
	_Atomic bool dead;   /* socket closed */
	bool flushing;       /* inside conn_flush_out() */
	bool corked;         /* parsing input: replies wait for
	                        its end, then go in one writev */
	bool cork_listed;    /* on host->cork_list */
	struct conn *cork_next;

	struct hs_ctx hs;
	struct tls_session *tls;     /* once STARTTLS began */
	struct budget_client *share; /* its client's part of the budget */
	struct peer_ident ident;     /* who the allow lists see (with the
	                                TLS names once TLS is up) */
	bool refusal_logged;         /* the log says so once */
	struct export *exp;
	struct stats_export_io *stats; /* exp's on this thread */
	struct proto_export_view view;

	uint8_t *rbuf;
	size_t rstart, rend;

	uint32_t opt, optlen;
	uint64_t discard_left;
	struct request *cur; /* the WRITE being filled or skipped */
	uint32_t cur_got;

	struct out *out_head, **out_tail;
	size_t out_off; /* bytes of out_head already sent */

	unsigned inflight;
	size_t inflight_bytes; /* request buffers, in the budget */
	unsigned throttled;    /* replies held by throttling */
	size_t hs_unsent;      /* handshake replies not yet sent,
	                          in the budget */
	uint64_t err_seq;      /* export errors already reported */
	bool flushed;          /* client has sent FLUSH */
	struct fill_ra ra;     /* its reading, for read-ahead */
};

/*
 * May C's input go from state FROM to TO?  The handshake's options follow
 * each other (over TLS once STARTTLS is answered) until one chooses an
 * export; then requests, each with its payload read or skipped.  Any
 * state may end in CS_DONE (closing); nothing leaves it.
 */
static inline bool
conn_state_follows(enum conn_state from, enum conn_state to)
{
	switch (to) {
	case CS_HS_CLIENT_FLAGS:
		return false; /* the first state only */
	case CS_HS_OPT_HEADER:
		return from == CS_HS_CLIENT_FLAGS || from == CS_HS_OPT_DATA ||
		    from == CS_HS_OPT_DISCARD || from == CS_TLS_HANDSHAKE;
	case CS_HS_OPT_DATA:
	case CS_HS_OPT_DISCARD:
		return from == CS_HS_OPT_HEADER;
	case CS_TLS_START:
		return from == CS_HS_OPT_DATA;
	case CS_TLS_HANDSHAKE:
		return from == CS_TLS_START;
	case CS_TX_HEADER:
		return from == CS_HS_OPT_DATA || from == CS_TX_PAYLOAD ||
		    from == CS_TX_DISCARD;
	case CS_TX_PAYLOAD:
	case CS_TX_DISCARD:
		return from == CS_TX_HEADER;
	case CS_DONE:
		return true;
	}
	return false;
}

/* C's input goes to state TO, which must follow the one it is in. */
static inline void
conn_set_state(struct conn *c, enum conn_state to)
{
	assert(conn_state_follows(c->state, to));
	c->state = to;
}

/* conn-io.c: the transport. */

/* Queue O on C's output (released at once if C's socket is closed). */
void conn_queue_out(struct conn *c, struct out *o);
/* Queue the handshake bytes in B; returns -1 if out of memory. */
int conn_queue_buf(struct conn *c, const struct buf *b);
/* Copy N bytes of REQ's payload from byte GOT on out of the input. */
void conn_payload_copy(const struct request *req, uint32_t got,
    const uint8_t *p, size_t n);
void conn_stop_reading(struct conn *c);
/* Close C's socket now (replies it does not take at once are dropped);
 * the caller then calls conn_maybe_finish, which may free C. */
void conn_close_socket(struct conn *c);
/* C's socket watchers (rw, ww). */
void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents);
void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents);

/* conn.c: what the bytes mean. */

/* Parse what is in C's input buffer and act on it. */
void conn_process(struct conn *c);
/* Free C if it is closing and nothing is left in flight or queued. */
void conn_maybe_finish(struct conn *c);
/* Read again if back-pressure stopped C and it is under its limits now. */
void conn_maybe_resume(struct conn *c);
/* Stop reading and close once every reply has gone out. */
void conn_close_gracefully(struct conn *c);

/* Refusals and handshakes cut short: at most CONN_REFUSE_LOG_MAX lines in
 * CONN_REFUSE_LOG_NS on one I/O thread, the next line counting those left
 * out (conn_log_refusal), so that a client repeating them cannot flood the
 * log (2,000 refused connections once wrote 4,000 lines in 1.3 s). */
#define CONN_REFUSE_LOG_NS (10ull * 1000000000ull)
#define CONN_REFUSE_LOG_MAX 10

/* Log a refusal of C's (printf FMT) within the host's rate limit. */
void conn_log_refusal(struct conn *c, bool warning, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
