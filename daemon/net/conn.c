/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * conn.c - a client connection: the handshake, then the transmission phase.
 *
 * Runs entirely on the connection's I/O thread.  What the transport
 * (conn-io.c) has read is parsed by a small state machine; each state
 * names what it is waiting for.  Large WRITE payloads go straight into
 * the request: into the cache pages they will occupy when the export can
 * spare them, so the payload is copied once, from the socket.  Requests
 * are carried out out of order and their replies are queued as they
 * complete; reading stops while too many requests or bytes are in flight
 * (back-pressure), and resumes as replies drain.
 *
 * Lifetime: a connection is freed only when its socket is closed and no
 * request is in flight on a worker (c->inflight == 0).
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "atomics.h"
#include "blockstatus.h"
#include "budget.h"
#include "buf.h"
#include "bufstash.h"
#include "conn-internal.h"
#include "conn.h"
#include "export.h"
#include "export-table.h"
#include "handshake.h"
#include "job.h"
#include "log.h"
#include "peer.h"
#include "pending.h"
#include "proto.h"
#include "request.h"
#include "tls.h"
#include "wbdev.h"

/* A client that sends options without reading the replies is not read
 * while this much of them waits. */
#define CONN_HS_MAX_UNSENT_BYTES (64u << 10)
/* Requests that failed (the device's errors): a line a second at most on
 * each I/O thread. */
#define CONN_FAIL_LOG_NS 1000000000ull
#define CONN_WAITING_LOG_NS (10ull * 1000000000ull)
/* A write held at the dirty limit looks again this often. */
#define CONN_PACE_POLL_S        0.01
/* A connection waiting for the memory budget looks again this often. */
#define CONN_BUDGET_POLL_S 0.01

/* An option is parsed where it lies in the input buffer. */
_Static_assert(HS_MAX_OPTION_BYTES <= CONN_RBUF_BYTES,
    "an option of HS_MAX_OPTION_BYTES fits in the input buffer");

/* --- when to stop reading --------------------------------------------- */

/* Stop reading and close once every reply has gone out. */
void
conn_close_gracefully(struct conn *c)
{
	conn_stop_reading(c);
	c->closing = true;
	conn_set_state(c, CS_DONE);
}

static bool
conn_over_limit(const struct conn *c)
{
	return c->inflight >= c->host->limits.max_requests_per_connection ||
	    c->inflight_bytes >=
	    c->host->limits.max_inflight_bytes_per_connection ||
	    c->throttled > 0 || c->hs_unsent > CONN_HS_MAX_UNSENT_BYTES;
}

/* C stops reading requests (conn_over_limit): if at its own limits,
 * counted and logged (budget_note_pause). */
static void
conn_note_pause(const struct conn *c)
{
	const struct conn_host *h = c->host;

	if (c->inflight >= h->limits.max_requests_per_connection)
		budget_note_pause(h->budget, c->peer, c->inflight,
		    BUDGET_PAUSE_REQUESTS,
		    h->limits.max_requests_per_connection);
	else if (c->inflight_bytes >=
	    h->limits.max_inflight_bytes_per_connection)
		budget_note_pause(h->budget, c->peer, c->inflight_bytes,
		    BUDGET_PAUSE_BYTES,
		    h->limits.max_inflight_bytes_per_connection);
	else if (c->hs_unsent > CONN_HS_MAX_UNSENT_BYTES)
		budget_note_pause(h->budget, c->peer, c->hs_unsent,
		    BUDGET_PAUSE_HANDSHAKE, CONN_HS_MAX_UNSENT_BYTES);
}

/* --- requests ---------------------------------------------------------- */

static void
conn_request_release(struct out *o)
{
	struct request *req = container_of(o, struct request, out);
	struct conn *c = req->conn;

	/* What it gives back was counted when it was made. */
	assert(c->inflight > 0 && c->inflight_bytes >= req->budget &&
	    c->ra.inflight_bytes >= req->ra_bytes);
	c->inflight--;
	c->ra.inflight_bytes -= req->ra_bytes;
	if (req->budget) {
		c->inflight_bytes -= req->budget;
		budget_give(c->host->budget, c->share, req->budget);
	}
	if (req->data || req->wbuf) {
		bufstash_put(req->data, req->data_cap);
		/* Pages not committed (a client gone mid-payload) go back
		 * to the cache unseen. */
		export_wbuf_free(req->wbuf);
	}
	free(req->reply);
	free(req);
	conn_maybe_resume(c);
}

void
conn_maybe_resume(struct conn *c)
{
	if (c->paused && !c->budget_wait && !conn_over_limit(c) &&
	    !c->closing && !load_relaxed(&c->dead)) {
		/*
		 * Input may already be buffered: have the read callback parse
		 * it even if the socket has nothing new.  Not parsed here, as
		 * this may run inside conn_flush_out().
		 */
		c->paused = false;
		c->reading = true;
		ev_io_start(c->host->loop, &c->rw);
		ev_feed_event(c->host->loop, &c->rw, EV_READ);
	}
}

/* A request holding BUDGET bytes the caller has taken from the budget
 * (conn_request_budget; given back here if out of memory); a READ or
 * WRITE with them gets a buffer of its length. */
static struct request *
conn_request_new(struct conn *c, const struct nbd_request *nbd, uint32_t budget)
{
	struct request *req = calloc(1, sizeof *req);
	bool data =
	    budget && (nbd->type == NBD_CMD_READ || nbd->type == NBD_CMD_WRITE);

	/*
	 * A large WRITE: into cache pages if the cache can spare them now.
	 * A smaller one comes through the input buffer anyway, and a buffer
	 * from malloc is cheaper than taking pages under the cache's queue
	 * lock (measured: 4 KiB random writes).
	 */
	if (req && data && nbd->type == NBD_CMD_WRITE &&
	    nbd->count >= CONN_ZERO_COPY_BYTES)
		req->wbuf = export_write_pages(c->exp, nbd->offset, nbd->count);
	if (req && data && !req->wbuf) {
		/* Page-aligned when it can hold a page: a read miss fills it in
		 * place, on an O_DIRECT backing too. */
		req->data = bufstash_get(nbd->count, &req->data_cap);
		if (!req->data) {
			free(req);
			req = NULL;
		}
	}
	if (!req) {
		if (budget)
			budget_give(c->host->budget, c->share, budget);
		return NULL;
	}
	req->conn = c;
	req->nbd = *nbd;
	req->budget = budget;
	c->inflight_bytes += budget;
	req->out.release = conn_request_release;
	c->inflight++;
	return req;
}

/* Build the reply to REQ and queue it. */
static void
conn_reply(struct request *req)
{
	struct conn *c = req->conn;
	uint32_t err = req->nbd_err ? req->nbd_err :
	    proto_errno_to_nbd(req->err);
	bool is_read = req->nbd.type == NBD_CMD_READ;
	struct out *o = &req->out;

	assert(req != c->cur); /* its payload has been read or skipped */
	o->niov = 1;
	if (err == 0 && req->reply) {
		/* Encoded whole by the export (BLOCK_STATUS). */
		o->iov[0].iov_base = req->reply;
		o->iov[0].iov_len = o->bytes = req->reply_bytes;
		conn_queue_out(c, o);
		return;
	}
	if (c->view.structured &&
	    (is_read || req->nbd.type == NBD_CMD_BLOCK_STATUS)) {
		if (err == 0) {
			proto_encode_structured_hdr(req->hdr, NBD_REPLY_FLAG_DONE,
			    NBD_REPLY_TYPE_OFFSET_DATA, req->nbd.cookie,
			    8 + req->nbd.count);
			put_u64(req->hdr + NBD_STRUCTURED_REPLY_SIZE,
			    req->nbd.offset);
			o->iov[0].iov_len = NBD_STRUCTURED_REPLY_SIZE + 8;
		} else {
			proto_encode_structured_hdr(req->hdr, NBD_REPLY_FLAG_DONE,
			    NBD_REPLY_TYPE_ERROR, req->nbd.cookie, 6);
			put_u32(req->hdr + NBD_STRUCTURED_REPLY_SIZE, err);
			put_u16(req->hdr + NBD_STRUCTURED_REPLY_SIZE + 4, 0);
			o->iov[0].iov_len = NBD_STRUCTURED_REPLY_SIZE + 6;
		}
	} else {
		proto_encode_simple_reply(req->hdr, req->nbd.cookie, err);
		o->iov[0].iov_len = NBD_SIMPLE_REPLY_SIZE;
	}
	o->iov[0].iov_base = req->hdr;
	if (is_read && err == 0) {
		o->iov[1].iov_base = req->data;
		o->iov[1].iov_len = req->nbd.count;
		o->niov = 2;
	}
	o->bytes = o->iov[0].iov_len + (o->niov == 2 ? o->iov[1].iov_len : 0);
	stats_request_done(c->stats, req->nbd.type, req->nbd.flags,
	    req->nbd.count, err != 0, req->queued, req->start_ns,
	    req->paced_ns);
	conn_queue_out(c, o);
}

/* A request's work is done, outside the parse: reply, and close if that
 * was the last thing the connection waited for. */
static void
conn_request_done(struct request *req)
{
	struct conn *c = req->conn;

	unsigned quiet;

	if (req->err == ENOTSUP && req->nbd.type == NBD_CMD_WRITE_ZEROES &&
	    (req->nbd.flags & NBD_CMD_FLAG_FAST_ZERO))
		/* The answer the spec asks for: zeroing would not be fast. */
		log_debug("%s: fast zero of %u bytes at %llu: not fast here",
		    c->peer, req->nbd.count,
		    (unsigned long long)req->nbd.offset);
	else if (req->err &&
	    !(req->err == ECANCELED && load_relaxed(&c->dead)) &&
	    ratelimit_due(&c->host->fail_rl, CONN_FAIL_LOG_NS, &quiet))
		log_warnx("%s: %s of %u bytes at %llu failed: %s (%u other "
			  "failed requests not logged)",
		    c->peer, proto_cmd_name(req->nbd.type), req->nbd.count,
		    (unsigned long long)req->nbd.offset, strerror(req->err),
		    quiet);
	conn_reply(req);
	conn_maybe_finish(c);
}

/*
 * A client's mistake (a rejected request, an oversized option, bad magic):
 * counted (limits.client_errors) and logged at most once a second on each
 * I/O thread, with the number not logged, so that no client fills the
 * log by repeating it, on one connection or reconnecting.
 */
static void conn_client_error(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
conn_client_error(struct conn *c, const char *fmt, ...)
{
	char msg[512];
	unsigned quiet;
	va_list ap;

	add_relaxed(&c->host->budget->client_errors, 1);
	if (!ratelimit_due(&c->host->client_rl, CONN_FAIL_LOG_NS, &quiet))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_warnx("%s: %s (%u other client errors not logged)", c->peer, msg,
	    quiet);
}

/* A request refused with ERR for WHY, and what follows (THEN). */
static void
conn_log_bad(struct conn *c, const struct nbd_request *nbd, uint32_t err,
    const char *why, const char *then)
{
	conn_client_error(c,
	    "rejected %s (type %u, flags 0x%x) offset %llu length %u: %s "
	    "(NBD error %u)%s",
	    proto_cmd_name(nbd->type), nbd->type, nbd->flags,
	    (unsigned long long)nbd->offset, nbd->count, why, err, then);
}

/* --- writer throttling: while any reply is held, the client is not read */

static void
conn_pace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct request *req = w->data;
	struct conn *c = req->conn;

	if (req->pause_ms < 0 && export_write_held(req->export)) {
		ev_timer_set(w, CONN_PACE_POLL_S, 0);
		ev_timer_start(loop, w);
		return;
	}
	assert(c->throttled > 0);
	c->throttled--;
	/* Before the request is done: that may free C (its last one, the
	 * connection closing). */
	conn_maybe_resume(c);
	conn_request_done(req);
}

/* Hold REQ's reply for req->pause_ms (-1: poll until there is room). */
static void
conn_pace(struct conn *c, struct request *req)
{
	assert(!ev_is_active(&req->throttle)); /* held once */
	ev_timer_init(&req->throttle, conn_pace_cb, req->pause_ms < 0 ?
	    CONN_PACE_POLL_S : req->pause_ms / 1000.0, 0);
	req->throttle.data = req;
	req->paced_ns = stats_pace_begin(c->stats, req->pause_ms < 0);
	c->throttled++;
	ev_timer_start(c->host->loop, &req->throttle);
}

/* A queued request's job is done (I/O thread, from the mailbox). */
static void
conn_job_done(struct job *job)
{
	struct request *req = container_of(job, struct request, job);
	struct conn *c = req->conn;

	assert(!req->queued && req->export == c->exp);
	req->queued = true;
	if (req->prefetching)
		export_prefetch_end(req->export);
	if (req->err_seq_checked)
		c->err_seq = req->err_seq;
	if (export_complete(req->export, req) == EXPORT_PACE)
		conn_pace(c, req);
	else
		conn_request_done(req);
}

/* Hand REQ to the export and act on its verdict (while parsing); a
 * WRITE's PAYLOAD may still be in the input buffer (else NULL). */
static void
conn_submit_payload(struct conn *c, struct request *req, const void *payload)
{
	/* A valid request, all read: the parse has gone on to the next. */
	assert(c->state == CS_TX_HEADER && c->exp && req != c->cur);
	assert(req->nbd_err == 0 && !req->export);
	assert(!payload || (req->nbd.type == NBD_CMD_WRITE && !req->wbuf));
	req->job.done = conn_job_done;
	req->job.owner = c->host->owner;
	req->err_seq = c->err_seq;
	req->flushed = c->flushed;
	req->gone = &c->dead;
	req->start_ns = now_ns();
	req->meta = c->view.meta;
	req->ra = &c->ra;
	if (req->nbd.type == NBD_CMD_READ) {
		req->ra_bytes = req->nbd.count;
		c->ra.inflight_bytes += req->ra_bytes;
	}
	if (req->nbd.type == NBD_CMD_CACHE) {
		unsigned max = c->host->limits.max_cache_requests;
		if (!export_prefetch_begin(c->exp, max)) {
			budget_note_cache_skip(c->host->budget, c->peer,
			    c->exp->dev->name, max);
			conn_reply(req); /* advisory: done, nothing read */
			return;
		}
		req->prefetching = true;
	}
	enum export_verdict v = payload ?
	    export_submit_write(c->exp, req, payload) :
	    export_submit(c->exp, req);
	c->flushed = req->flushed;
	switch (v) {
	case EXPORT_REPLY:
		conn_reply(req);        /* corked: goes out after the parse */
		break;
	case EXPORT_PACE:
		conn_pace(c, req);
		break;
	case EXPORT_QUEUED:
		break;
	}
}

static void
conn_submit(struct conn *c, struct request *req)
{
	conn_submit_payload(c, req, NULL);
}

/* Reply with an error at once (no payload pending). */
static void
conn_reply_error(struct conn *c, const struct nbd_request *nbd, uint32_t err)
{
	struct request *req = conn_request_new(c, nbd, 0);

	if (!req) {
		log_warnx("%s: out of memory replying to a request", c->peer);
		conn_close_socket(c);
		return;
	}
	req->nbd_err = err;
	conn_reply(req);
}

/* --- the memory budget: when it is full, read nothing more ------------ */

/*
 * Does C itself leave its replies unread, for FOR_S seconds up to NOW?
 * Replies of its waiting that have not moved (no byte sent since they
 * came or since the last one went out), or none waiting but none ever
 * taken either since it chose its export.  A connection whose replies go
 * out is not, however long it has waited for the budget.
 */
static bool
conn_not_reading(const struct conn *c, ev_tstamp now, ev_tstamp for_s)
{
	if (c->out_head) {
		ev_tstamp moved =
		    c->sent_at > c->out_since ? c->sent_at : c->out_since;
		return now - moved >= for_s;
	}
	return !c->replied && now - c->connected_at >= for_s;
}

static void
conn_budget_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	int err = 0;
	socklen_t len = sizeof err;

	c->budget_wait = false;
	/* A client that has gone is not served what it left queued. */
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
		log_debug("%s: %s while waiting for the memory budget", c->peer,
		    strerror(err));
		conn_close_socket(c);
		conn_maybe_finish(c);
		return;
	}
	/*
	 * Its client had a connection closed for not reading its replies
	 * while this one waited, and this one does not read its own either
	 * (for half the stall timeout or more: replies of its not moving,
	 * or none ever taken): its requests wait behind those replies, and
	 * would take their place (and another stall timeout) once they are
	 * freed.  Requests it was sent meanwhile do not count: a client
	 * could drip them to look alive.  A connection of the same client
	 * whose replies go out is left to be served.
	 */
	unsigned stall_s = c->host->limits.stall_timeout_s;
	if (stall_s && c->budget_starved && c->state >= CS_TX_HEADER &&
	    budget_client_stalled_ns(c->share) >= c->starved_ns &&
	    conn_not_reading(c, ev_now(loop), stall_s / 2.0)) {
		budget_note_stall(c->host->budget, c->peer, stall_s,
		    "requests waiting behind replies its client does not read");
		conn_close_socket(c);
		conn_maybe_finish(c);
		return;
	}
	conn_maybe_resume(c);
}

/* Take N bytes (0: is there room at all?), or stop reading and look again
 * in a moment. */
static bool
conn_budget_take(struct conn *c, size_t n)
{
	struct budget *b = c->host->budget;
	bool at_share;

	if (budget_take(b, c->share, n, c->inflight_bytes + c->hs_unsent,
		&at_share)) {
		c->budget_starved = false;
		return true;
	}
	if (!c->budget_starved) {
		c->starved_ns = now_ns();
		if (at_share)
			budget_note_share_wait(b, c->share, n, c->peer);
		else
			budget_note_wait(b, n, c->peer);
	}
	c->budget_starved = true;
	conn_stop_reading(c);
	c->paused = true;
	if (!c->budget_wait) {
		c->budget_wait = true;
		ev_timer_set(&c->budget_timer, CONN_BUDGET_POLL_S, 0);
		ev_timer_start(c->host->loop, &c->budget_timer);
	}
	return false;
}

/*
 * What a request takes from the budget while in flight: a READ's or
 * WRITE's data, or the largest reply a BLOCK_STATUS can get (every
 * context selected, each at most BS_MAX_EXTENTS extents: 64 KiB each),
 * which stays in memory until the client reads it.
 */
static uint32_t
conn_request_budget(const struct conn *c, const struct nbd_request *nbd)
{
	switch (nbd->type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		return nbd->count;
	case NBD_CMD_BLOCK_STATUS:
		return (uint32_t)__builtin_popcount(c->view.meta) *
		    (uint32_t)proto_block_status_bytes(
			(nbd->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 :
							      BS_MAX_EXTENTS);
	default:
		return 0;
	}
}

/* A complete request header has arrived, checked (ERR, WHY); a buffer for
 * its data is already taken from the budget. */
static void
conn_handle_request(struct conn *c, const struct nbd_request *nbd, uint32_t err,
    const char *why)
{
	c->last_request = ev_now(c->host->loop);
	uint32_t payload = proto_payload_bytes(nbd);

	if (err == 0 && nbd->type == NBD_CMD_DISC) {
		log_debug("%s: client sent DISC", c->peer);
		conn_close_gracefully(c);
		return;
	}
	if (err) {
		if (payload > proto_max_discard_bytes(&c->view)) {
			conn_log_bad(c, nbd, err, why,
			    "; its payload is too large to skip: "
			    "disconnecting");
			conn_close_socket(c);
			return;
		}
		conn_log_bad(c, nbd, err, why, "");
		if (payload == 0) {
			conn_reply_error(c, nbd, err);
			return;
		}
		/* Skip the payload, then reply, so the stream stays in sync. */
		c->cur = conn_request_new(c, nbd, 0);
		if (!c->cur) {
			conn_close_socket(c);
			return;
		}
		c->cur->nbd_err = err;
		c->discard_left = payload;
		conn_set_state(c, CS_TX_DISCARD);
		return;
	}

	struct request *req =
	    conn_request_new(c, nbd, conn_request_budget(c, nbd));
	if (!req) {
		log_warnx("%s: out of memory for a %u-byte %s", c->peer,
		    nbd->count, proto_cmd_name(nbd->type));
		if (payload) {
			c->cur = conn_request_new(c, nbd, 0);
			if (!c->cur) {
				conn_close_socket(c);
				return;
			}
			c->cur->nbd_err = NBD_ENOMEM;
			c->discard_left = payload;
			conn_set_state(c, CS_TX_DISCARD);
		} else {
			conn_reply_error(c, nbd, NBD_ENOMEM);
		}
		return;
	}
	if (payload) {
		c->cur = req;
		c->cur_got = 0;
		conn_set_state(c, CS_TX_PAYLOAD);
		return;
	}
	conn_submit(c, req);
}

/* --- the input state machine ------------------------------------------ */

/* A client of this host, counted by its uid (listener.h), not its
 * address. */
static bool
conn_client_local(const struct conn *c)
{
	return strncmp(c->client, "uid ", 4) == 0;
}

static _Atomic uint64_t conn_idle_closes; /* conn_idle_closed */

uint64_t
conn_idle_closed(void)
{
	return load_relaxed(&conn_idle_closes);
}

/* The connection's idle timeout (conn->idle_s: the export's, its
 * listener's, or limits.idle_timeout_s, local_idle_timeout_s for a client
 * of this host): a client that sends nothing for that long, with nothing
 * in flight, is closed; one line a second at most. */
static void
conn_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	ev_tstamp left = c->last_request + c->idle_s - ev_now(loop);
	unsigned quiet;

	if (left > 0 || c->inflight > 0) {
		ev_timer_set(w, left > 0 ? left : c->idle_s, 0);
		ev_timer_start(loop, w);
		return;
	}
	add_relaxed(&conn_idle_closes, 1);
	if (ratelimit_due(&c->host->idle_rl, CONN_FAIL_LOG_NS, &quiet))
		log_info("%s: no request for %u s (%s); closing (%u other "
			 "idle connections closed, not logged)",
		    c->peer, c->idle_s, c->idle_key, quiet);
	conn_close_gracefully(c);
	conn_maybe_finish(c);
}

/*
 * limits.stall_timeout_s, on each I/O thread: a connection that holds
 * replies it does not read, or a request whose payload it does not
 * finish sending, and has moved no byte for that long, is closed (its
 * requests still complete on the backend).  It holds the memory budget
 * (and the cache pages a payload is received into) that others need.
 * Holding replies, only what is sent counts (but while a payload comes
 * in): a client that does not read them could go on sending requests,
 * read while it waits for the budget, one now and then, to look alive.
 */
static void
conn_stall_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn_host *h = w->data;
	ev_tstamp now = ev_now(loop);
	struct conn *next;

	(void)revents;
	for (struct conn *c = h->conns; c; c = next) {
		next = c->next;
		if (load_relaxed(&c->dead) || c->state < CS_TX_HEADER)
			continue;
		bool payload =
		    c->state == CS_TX_PAYLOAD || c->state == CS_TX_DISCARD;
		ev_tstamp since = c->stall_since;
		const char *what = NULL;
		if (c->out_head) {
			what = "replies not read";
			if (!payload)
				since = c->sent_at > c->out_since ?
				    c->sent_at :
				    c->out_since;
		} else if (payload) {
			what = "a request's payload not finished";
		}
		if (!what || now - since < h->limits.stall_timeout_s)
			continue;
		budget_note_stall(h->budget, c->peer, h->limits.stall_timeout_s,
		    what);
		/* Its client's connections waiting behind it go too
		 * (conn_budget_cb): marked before what it holds is given
		 * back, which they could take. */
		budget_client_mark_stalled(c->share, now_ns());
		conn_close_socket(c);
		conn_maybe_finish(c);
	}
}

static void
conn_enter_transmission(struct conn *c)
{
	c->exp = container_of(c->hs.chosen, struct export, hs);
	c->view.size_bytes = c->exp->size_bytes;
	c->view.tflags = c->exp->tflags;
	c->view.structured = c->hs.structured;
	c->view.meta = c->hs.meta;
	c->view.max_request_bytes = c->host->limits.max_request_bytes;
	if (c->hs.block_sizes)
		c->view.max_request_bytes = PROTO_MAX_REQUEST_BYTES;
	c->err_seq = export_err_seq(c->exp);
	c->stats = stats_io_export(&c->host->stats, c->exp);
	add_relaxed(&c->exp->connections, 1);
	conn_set_state(c, CS_TX_HEADER);
	c->connected_at = ev_now(c->host->loop);
	c->stall_since = c->sent_at = c->connected_at;
	ev_timer_stop(c->host->loop, &c->hs_timer);
	if (c->host->limits.stall_timeout_s && !c->host->stall_timer_set) {
		/* Looked at every quarter of the timeout, at most 1 s. */
		ev_tstamp every = c->host->limits.stall_timeout_s / 4.0;
		if (every > 1)
			every = 1;
		ev_timer_init(&c->host->stall_timer, conn_stall_cb, every,
		    every);
		c->host->stall_timer.data = c->host;
		ev_timer_start(c->host->loop, &c->host->stall_timer);
		c->host->stall_timer_set = true;
	}
	int exp_idle = load_relaxed(&c->exp->idle_timeout_s);
	if (exp_idle >= 0) {
		c->idle_s = (unsigned)exp_idle;
		c->idle_key = "the export's idle_timeout_s";
	} else if (c->listen_idle_s >= 0) {
		c->idle_s = (unsigned)c->listen_idle_s;
		c->idle_key = "the listener's idle_timeout_s";
	} else if (conn_client_local(c)) {
		c->idle_s = c->host->limits.local_idle_timeout_s;
		c->idle_key = "limits.local_idle_timeout_s";
	} else {
		c->idle_s = c->host->limits.idle_timeout_s;
		c->idle_key = "limits.idle_timeout_s";
	}
	if (c->idle_s) {
		c->last_request = ev_now(c->host->loop);
		ev_timer_init(&c->hs_timer, conn_idle_cb, c->idle_s, 0);
		c->hs_timer.data = c;
		ev_timer_start(c->host->loop, &c->hs_timer);
	}
	log_info("%s: connected to export \"%s\"%s", c->peer, c->exp->name,
	    c->hs.structured ? " (structured replies)" : "");
}

static void
conn_handle_option(struct conn *c, const uint8_t *data)
{
	struct buf out;
	enum hs_action act;

	buf_init(&out);
	act = hs_option(&c->hs, c->opt, data, c->optlen, &out);
	if (conn_queue_buf(c, &out) < 0) {
		log_warnx("%s: out of memory in the handshake", c->peer);
		buf_free(&out);
		conn_close_socket(c);
		return;
	}
	buf_free(&out);
	switch (act) {
	case HS_CONTINUE:
		conn_set_state(c, CS_HS_OPT_HEADER);
		break;
	case HS_TRANSMISSION:
		conn_enter_transmission(c);
		break;
	case HS_CLOSE:
		conn_close_gracefully(c);
		break;
	case HS_STARTTLS:
		/* Nothing more in the clear: the reply goes out, then TLS. */
		conn_stop_reading(c);
		conn_set_state(c, CS_TLS_START);
		break;
	}
}

void
conn_process(struct conn *c)
{
	while (!load_relaxed(&c->dead) && !c->closing) {
		size_t avail = c->rend - c->rstart;
		uint8_t *p = c->rbuf + c->rstart;

		assert(c->rstart <= c->rend && c->rend <= CONN_RBUF_BYTES);
		/* Before an export is chosen, no request; after, no option. */
		assert(c->state < CS_TX_HEADER ? !c->exp && !c->cur : !!c->exp);
		switch (c->state) {
		case CS_HS_CLIENT_FLAGS:
			if (avail < 4)
				return;
			c->rstart += 4;
			if (hs_client_flags(&c->hs, get_u32(p)) == HS_CLOSE) {
				conn_close_socket(c);
				return;
			}
			conn_set_state(c, CS_HS_OPT_HEADER);
			break;

		case CS_HS_OPT_HEADER:
			if (conn_over_limit(c)) {
				/* Replies not read: read no more options. */
				if (avail >= 16)
					conn_note_pause(c);
				conn_stop_reading(c);
				c->paused = true;
				return;
			}
			if (!conn_budget_take(c, 0))
				return;
			if (avail < 16)
				return;
			if (get_u64(p) != NBD_OPT_MAGIC) {
				conn_client_error(c,
				    "bad option magic in the handshake; "
				    "disconnecting");
				conn_close_socket(c);
				return;
			}
			c->opt = get_u32(p + 8);
			c->optlen = get_u32(p + 12);
			c->rstart += 16;
			if (c->optlen > HS_MAX_DISCARD_BYTES) {
				conn_client_error(c,
				    "option %s with absurd length %u; "
				    "disconnecting",
				    hs_option_name(c->opt), c->optlen);
				conn_close_socket(c);
				return;
			}
			if (c->optlen > HS_MAX_OPTION_BYTES) {
				conn_client_error(c,
				    "option %s of %u bytes is too large; "
				    "skipping it",
				    hs_option_name(c->opt), c->optlen);
				c->discard_left = c->optlen;
				conn_set_state(c, CS_HS_OPT_DISCARD);
			} else {
				conn_set_state(c, CS_HS_OPT_DATA);
			}
			break;

		case CS_HS_OPT_DATA:
			assert(c->optlen <= HS_MAX_OPTION_BYTES);
			if (avail < c->optlen)
				return;
			c->rstart += c->optlen;
			conn_handle_option(c, p);
			break;

		case CS_HS_OPT_DISCARD:
		case CS_TX_DISCARD: {
			/* An oversized option, or the payload of a request
			 * rejected: its reply waits for the end. */
			assert(c->discard_left > 0);
			assert(c->state == CS_TX_DISCARD || !c->cur);
			assert(c->state == CS_HS_OPT_DISCARD ||
			    (c->cur && c->cur->nbd_err != 0));
			size_t n = avail < c->discard_left ? avail :
			    (size_t)c->discard_left;
			c->rstart += n;
			c->discard_left -= n;
			if (c->discard_left > 0)
				return;
			if (c->state == CS_HS_OPT_DISCARD) {
				struct buf out;
				buf_init(&out);
				hs_reply_error(&out, c->opt, NBD_REP_ERR_TOO_BIG,
				    "option too large");
				int r = conn_queue_buf(c, &out);
				buf_free(&out);
				if (r < 0) {
					conn_close_socket(c);
					return;
				}
				conn_set_state(c, CS_HS_OPT_HEADER);
			} else {
				struct request *req = c->cur;
				c->cur = NULL;
				conn_set_state(c, CS_TX_HEADER);
				conn_reply(req);
			}
			break;
		}

		case CS_TX_HEADER: {
			struct nbd_request nbd;
			const char *why = "";
			assert(!c->cur);
			if (conn_over_limit(c)) {
				/* Counted only if another request waits:
				 * one that merely reached the limit is not
				 * held back. */
				if (avail >= NBD_REQUEST_SIZE)
					conn_note_pause(c);
				conn_stop_reading(c);
				c->paused = true;
				return;
			}
			if (avail < NBD_REQUEST_SIZE)
				return;
			if (proto_decode_request(p, &nbd) < 0) {
				conn_client_error(c,
				    "bad request magic 0x%08x; disconnecting",
				    get_u32(p));
				conn_close_socket(c);
				return;
			}
			uint32_t err =
			    proto_check_request(&nbd, &c->view, &why);
			uint32_t budget =
			    err ? 0 : conn_request_budget(c, &nbd);
			if (budget && !conn_budget_take(c, budget))
				return;
			c->rstart += NBD_REQUEST_SIZE;
			conn_handle_request(c, &nbd, err, why);
			break;
		}

		case CS_TX_PAYLOAD: {
			struct request *req = c->cur;
			assert(req && req->nbd_err == 0 &&
			    c->cur_got <= req->nbd.count);
			uint32_t need = req->nbd.count - c->cur_got;
			if (c->cur_got == 0 && avail >= need && !req->wbuf) {
				/* All in the input buffer: into the cache from
				 * there, not through the request's buffer. */
				c->rstart += need;
				c->cur = NULL;
				conn_set_state(c, CS_TX_HEADER);
				conn_submit_payload(c, req, p);
				break;
			}
			size_t n = avail < need ? avail : need;
			conn_payload_copy(req, c->cur_got, p, n);
			c->rstart += n;
			c->cur_got += (uint32_t)n;
			if (c->cur_got < req->nbd.count)
				return;
			c->cur = NULL;
			conn_set_state(c, CS_TX_HEADER);
			conn_submit(c, req);
			break;
		}

		case CS_TLS_START:
		case CS_TLS_HANDSHAKE:
		case CS_DONE:
			return;
		}
	}
}

/* --- lifecycle --------------------------------------------------------- */

/* Free C if it is closing and nothing is left in flight or queued. */
void
conn_maybe_finish(struct conn *c)
{
	if (!c->closing)
		return;
	if (c->cur) {
		/* A request was being read when input ended: drop it. */
		struct request *req = c->cur;
		c->cur = NULL;
		req->out.release(&req->out);
	}
	if (c->inflight > 0)
		return;
	if (!load_relaxed(&c->dead) && c->out_head)
		return;         /* replies still going out */

	struct conn_host *h = c->host;
	conn_close_socket(c);
	/* Everything it held is given back (the budget's share too). */
	assert(c->throttled == 0 && c->inflight_bytes == 0 &&
	    c->hs_unsent == 0 && !c->out_head);
	for (struct conn **pp = &h->cork_list; c->cork_listed && *pp;
	     pp = &(*pp)->cork_next)
		if (*pp == c) {
			*pp = c->cork_next;
			break;
		}
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	h->n_conns--;
	if (c->exp)
		sub_relaxed(&c->exp->connections, 1);
	if (c->exp)
		log_info("%s: connection to export \"%s\" closed after %.1f s",
		    c->peer, c->exp->name, ev_now(h->loop) - c->connected_at);
	else
		log_debug("%s: closed", c->peer);
	budget_client_put(h->budget, c->share);
	h->conn_gone(h, c->client);
	hs_ctx_clear(&c->hs);
	peer_ident_clear(&c->ident);
	free(c->rbuf);
	free(c);
}

static void
conn_hs_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	unsigned quiet;

	add_relaxed(&c->host->budget->hs_timeouts, 1);
	if (ratelimit_due(&c->host->hs_timeout_rl, CONN_FAIL_LOG_NS * 10,
		&quiet))
		log_warnx("%s: handshake not finished within %u s "
			  "(limits.handshake_timeout_s); disconnecting (%u "
			  "other connections so, not logged)",
		    c->peer, c->host->limits.handshake_timeout_s, quiet);
	conn_close_socket(c);
	conn_maybe_finish(c);
}

static const struct hs_export *
conn_hs_lookup(void *arg, const char *name)
{
	struct conn *c = arg;
	struct export *e = export_table_find(c->host->exports, name);
	return e ? &e->hs : NULL;
}

static const struct hs_export *
conn_hs_nth(void *arg, size_t i)
{
	struct conn *c = arg;
	struct export *e = export_table_nth(c->host->exports, i);
	return e ? &e->hs : NULL;
}

/*
 * An export not served because its remote has not answered yet (pending.h)
 * is told apart from a name nobody configured: the client is told to try
 * again later, and the log says who asked and for which remote, once in
 * 10 s at most on each I/O thread.  The empty name stands for the default
 * export: the one named, or, as no export is served, the first waiting.
 */
static bool
conn_hs_waiting(void *arg, const char *name)
{
	struct conn *c = arg;
	struct pending_info pi;
	const char *want = name;
	bool found = false;
	unsigned quiet;

	if (!c->host->pending)
		return false;
	if (!*name) {
		const char *d = load_acquire(&c->host->exports->default_name);
		if (d == export_table_no_default)
			return false;
		want = d ? d : "";
	}
	for (size_t i = 0; !found && pending_get(c->host->pending, i, &pi); i++)
		found = !*want || strcmp(pi.name, want) == 0;
	if (!found)
		return false;
	if (ratelimit_due(&c->host->waiting_rl, CONN_WAITING_LOG_NS, &quiet))
		log_warnx("%s: asked for export \"%.64s\", which is not served "
			  "until its remote %s answers (%u more such requests "
			  "not logged)",
		    c->peer, pi.name, pi.backing, quiet);
	return true;
}

/* The export's allow list (access.h) decides; a refusal is logged once
 * per connection. */
static bool
conn_hs_may_open(void *arg, const struct hs_export *he, bool listing)
{
	struct conn *c = arg;
	struct export *e = container_of(he, struct export, hs);
	char why[320];

	if (access_policy_allows(&e->allow, &c->ident, why, sizeof why))
		return true;
	if (!listing && !c->refusal_logged) {
		c->refusal_logged = true;
		conn_log_refusal(c, true, "export \"%s\" refused: %s", e->name,
		    why);
	}
	return false;
}

void
conn_log_refusal(struct conn *c, bool warning, const char *fmt, ...)
{
	char msg[512], more[64] = "";
	unsigned quiet;
	va_list ap;

	if (!ratelimit_burst_due(&c->host->refuse_rl, CONN_REFUSE_LOG_NS,
		CONN_REFUSE_LOG_MAX, &quiet))
		return;
	if (quiet)
		snprintf(more, sizeof more,
		    " (%u more refused or cut short "
		    "not logged)",
		    quiet);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (warning)
		log_warnx("%s: %s%s", c->peer, msg, more);
	else
		log_info("%s: %s%s", c->peer, msg, more);
}

void
conn_start(struct conn_host *h, int fd, const char *peer, const char *client,
    int idle_s)
{
	struct conn *c = calloc(1, sizeof *c);

	if (c)
		c->rbuf = malloc(CONN_RBUF_BYTES);
	if (c && c->rbuf && !h->draining)
		c->share = budget_client_get(h->budget, client);
	if (!c || !c->rbuf || !c->share) {
		if (c && c->rbuf && h->draining)
			log_debug("%s: shutting down, refusing connection", peer);
		else
			log_warnx("%s: out of memory for a new connection", peer);
		if (c)
			free(c->rbuf);
		free(c);
		close(fd);
		h->conn_gone(h, client);
		return;
	}
	c->host = h;
	c->fd = fd;
	snprintf(c->peer, sizeof c->peer, "%s", peer);
	snprintf(c->client, sizeof c->client, "%s", client);
	c->listen_idle_s = idle_s;
	c->out_tail = &c->out_head;
	if (h->tls) {
		/* One mode for the whole connection, as the spec asks. */
		enum tls_mode m = tls_server_get(h->tls, NULL);
		c->hs.tls_offered = m != TLS_OFF;
		c->hs.tls_required = m == TLS_REQUIRE;
	}
	c->hs.lookup = conn_hs_lookup;
	c->hs.nth = conn_hs_nth;
	c->hs.may_open = conn_hs_may_open;
	c->hs.waiting = conn_hs_waiting;
	c->hs.arg = c;
	if (peer_ident_from_fd(&c->ident, fd) < 0 && errno != ENOTCONN)
		log_warn("%s: cannot tell who the peer is; allow lists will "
			 "refuse it",
		    peer);
	c->state = CS_HS_CLIENT_FLAGS;
	ev_io_init(&c->rw, conn_read_cb, fd, EV_READ);
	ev_io_init(&c->ww, conn_write_cb, fd, EV_WRITE);
	c->rw.data = c->ww.data = c;
	ev_timer_init(&c->hs_timer, conn_hs_timeout_cb,
	    (ev_tstamp)h->limits.handshake_timeout_s, 0);
	c->hs_timer.data = c;
	ev_timer_init(&c->budget_timer, conn_budget_cb, CONN_BUDGET_POLL_S, 0);
	c->budget_timer.data = c;

	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	h->n_conns++;
	log_debug("%s: new connection on I/O thread %u", peer, h->index);

	struct buf out;
	buf_init(&out);
	hs_greeting(&out);
	int r = conn_queue_buf(c, &out);
	buf_free(&out);
	if (r < 0)
		conn_close_socket(c);
	if (load_relaxed(&c->dead)) {
		/* Out of memory, or the client is already gone. */
		conn_maybe_finish(c);
		return;
	}
	c->reading = true;
	ev_io_start(h->loop, &c->rw);
	ev_timer_start(h->loop, &c->hs_timer);
}

static void
conn_drain(struct conn *c)
{
	if (c->state < CS_TX_HEADER) {
		/* Still haggling: nothing to finish. */
		conn_close_socket(c);
	} else {
		conn_close_gracefully(c);
	}
	conn_maybe_finish(c);
}

void
conn_drain_all(struct conn_host *h)
{
	h->draining = true;
	for (struct conn *c = h->conns, *next; c; c = next) {
		next = c->next;
		conn_drain(c);
	}
}

void
conn_abort_all(struct conn_host *h)
{
	for (struct conn *c = h->conns, *next; c; c = next) {
		next = c->next;
		conn_close_socket(c);
		conn_maybe_finish(c);
	}
}
