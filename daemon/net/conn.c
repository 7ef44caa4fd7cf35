/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * conn.c - a client connection: the handshake, then the transmission phase.
 *
 * Runs entirely on the connection's I/O thread.  Input is read into a
 * buffer (large WRITE payloads straight into the request: into the cache
 * pages it will occupy when the cache can spare them, so the payload is
 * copied once, from the socket) and parsed by a
 * small state machine; each state names what it is waiting for.  At most one
 * read() happens per wake-up, so a busy client cannot starve the others on
 * the same thread.  Requests are carried out out of order and their replies
 * are queued as they complete; reading stops while too many requests or
 * bytes are in flight (back-pressure), and resumes as replies drain.
 *
 * After NBD_OPT_STARTTLS the same machine runs over TLS: the option's
 * reply goes out in the clear, then the TLS handshake is driven by the
 * socket's readiness like everything else, and from then on every byte is
 * read and written through the session (conn_recv, conn_send).
 *
 * Lifetime: a connection is freed only when its socket is closed and no
 * request is in flight on a worker (c->inflight == 0).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "blockstatus.h"
#include "budget.h"
#include "buf.h"
#include "bufstash.h"
#include "cache.h"
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
#define CONN_DIRECT_READ_BYTES  (64u << 10)
/* WRITEs from this size on are received into cache pages (one copy). */
#define CONN_ZERO_COPY_BYTES CONN_DIRECT_READ_BYTES
#define CONN_MAX_IOV            64
/* Pieces of a payload read at once (a 1 MiB write in 4 KiB pages). */
#define CONN_MAX_PAYLOAD_IOV 256
/* Requests that failed (the device's errors): a line a second at most on
 * each I/O thread. */
#define CONN_FAIL_LOG_NS 1000000000ull
#define CONN_WAITING_LOG_NS (10ull * 1000000000ull)
/* A write held at the dirty limit looks again this often. */
#define CONN_PACE_POLL_S        0.01
/* A connection waiting for the memory budget looks again this often. */
#define CONN_BUDGET_POLL_S 0.01

enum conn_state {
	CS_HS_CLIENT_FLAGS,     /* waiting for the client's 32-bit flags */
	CS_HS_OPT_HEADER,       /* waiting for IHAVEOPT, option, length */
	CS_HS_OPT_DATA,         /* waiting for an option's data */
	CS_HS_OPT_DISCARD,      /* skipping an oversized option's data */
	CS_TLS_START,           /* STARTTLS answered: sending the reply */
	CS_TLS_HANDSHAKE,       /* in the TLS handshake */
	CS_TX_HEADER,           /* waiting for a 28-byte request header */
	CS_TX_PAYLOAD,          /* filling a WRITE's payload */
	CS_TX_DISCARD,          /* skipping a rejected WRITE's payload */
	CS_DONE,                /* reading no more */
};

struct conn {
	struct conn *next, *prev;       /* on host->conns */
	struct conn_host *host;
	int fd;
	char peer[64];
	char client[64]; /* whose slot it holds */
	ev_io rw, ww;
	ev_timer hs_timer;      /* handshake deadline, then the idle
	                                   timeout (limits.idle_timeout_s) */
	ev_tstamp last_request; /* when the last request came */
	/* Since when it holds replies not sent or a request not all
	 * received and has made no progress (limits.stall_timeout_s): the
	 * last byte moved either way, or the first reply queued. */
	ev_tstamp stall_since;
	ev_timer budget_timer;  /* waiting for the memory budget */
	ev_tstamp connected_at; /* when it chose its export */
	enum conn_state state;
	bool reading;                   /* rw is started */
	bool paused;                    /* stopped by back-pressure */
	bool budget_wait;               /* paused until budget_timer */
	bool budget_starved;            /* has waited since its last take */
	bool closing;                   /* no more input; close when idle */
	bool dead;                      /* socket closed */
	bool flushing;                  /* inside conn_flush_out() */
	bool corked;                    /* parsing input: replies wait for
	                                   its end, then go in one writev */
	bool cork_listed;               /* on host->cork_list */
	struct conn *cork_next;

	struct hs_ctx hs;
	struct tls_session *tls; /* once STARTTLS began */
	struct peer_ident ident; /* who the allow lists see (with the
	                                TLS names once TLS is up) */
	bool refusal_logged;     /* the log says so once */
	struct export *exp;
	struct stats_export_io *stats; /* exp's on this thread */
	struct proto_export_view view;

	uint8_t *rbuf;
	size_t rstart, rend;

	uint32_t opt, optlen;
	uint64_t discard_left;
	struct request *cur;            /* the WRITE being filled or skipped */
	uint32_t cur_got;

	struct out *out_head, **out_tail;
	size_t out_off;                 /* bytes of out_head already sent */

	unsigned inflight;
	size_t inflight_bytes;          /* request buffers, in the budget */
	unsigned throttled;             /* replies held by throttling */
	size_t hs_unsent;               /* handshake replies not yet sent,
	                                   in the budget */
	uint64_t err_seq;               /* export errors already reported */
	bool flushed;                   /* client has sent FLUSH */
	struct fill_ra ra;              /* its reading, for read-ahead */
};

static void conn_process(struct conn *c);
static void conn_flush_out(struct conn *c);
static void conn_maybe_finish(struct conn *c);
static void conn_maybe_resume(struct conn *c);
static void conn_tls_step(struct conn *c);
static void conn_tls_maybe_begin(struct conn *c);

/* --- the socket, in the clear or through TLS ---------------------------- */

static ssize_t
conn_recv(struct conn *c, void *buf, size_t len)
{
	ssize_t r = c->tls ? tls_recv(c->tls, buf, len) : read(c->fd, buf, len);

	if (r > 0)
		c->stall_since = ev_now(c->host->loop);
	return r;
}

/* Into several pieces: TLS fills them one after the other. */
static ssize_t
conn_recvv(struct conn *c, const struct iovec *iov, int n)
{
	ssize_t total = 0;

	if (!c->tls) {
		total = readv(c->fd, iov, n);
	} else {
		for (int i = 0; i < n; i++) {
			ssize_t r =
			    tls_recv(c->tls, iov[i].iov_base, iov[i].iov_len);
			if (r <= 0) {
				if (total == 0)
					total = r;
				break;
			}
			total += r;
			if ((size_t)r < iov[i].iov_len)
				break;
		}
	}
	if (total > 0)
		c->stall_since = ev_now(c->host->loop);
	return total;
}

static ssize_t
conn_send(struct conn *c, const struct iovec *iov, int n)
{
	ssize_t r = c->tls ? tls_writev(c->tls, iov, n) : writev(c->fd, iov, n);

	if (r > 0)
		c->stall_since = ev_now(c->host->loop);
	return r;
}

/* --- output ------------------------------------------------------------ */

static void
conn_queue_out(struct conn *c, struct out *o)
{
	if (c->dead) {
		o->release(o);
		return;
	}
	o->next = NULL;
	if (!c->out_head)
		c->stall_since = ev_now(c->host->loop);
	*c->out_tail = o;
	c->out_tail = &o->next;
	/* Inside a flush, the running loop picks it up; while corked, the
	 * end of the parse does, or conn_host_uncork. */
	if (c->flushing || c->corked || ev_is_active(&c->ww))
		return;
	if (!c->host->corked) {
		conn_flush_out(c);
	} else if (!c->cork_listed) {
		c->cork_listed = true;
		c->cork_next = c->host->cork_list;
		c->host->cork_list = c;
	}
}

void
conn_host_cork(struct conn_host *h)
{
	h->corked = true;
}

void
conn_host_uncork(struct conn_host *h)
{
	h->corked = false;
	while (h->cork_list) {
		struct conn *c = h->cork_list;
		h->cork_list = c->cork_next;
		c->cork_listed = false;
		if (!c->dead && c->out_head && !ev_is_active(&c->ww))
			conn_flush_out(c);
		conn_maybe_finish(c);
	}
}

static void
conn_drop_out(struct conn *c)
{
	struct out *o = c->out_head;

	c->out_head = NULL;
	c->out_tail = &c->out_head;
	c->out_off = 0;
	while (o) {
		struct out *next = o->next;
		o->release(o);
		o = next;
	}
}

static void
conn_close_socket(struct conn *c)
{
	if (c->dead)
		return;
	if (c->corked && c->out_head) {
		/* Replies held while parsing: send what the socket takes
		 * now, as they would have gone before the cork. */
		c->corked = false;
		conn_flush_out(c);
		if (c->dead)
			return;
	}
	ev_io_stop(c->host->loop, &c->rw);
	ev_io_stop(c->host->loop, &c->ww);
	ev_timer_stop(c->host->loop, &c->hs_timer);
	ev_timer_stop(c->host->loop, &c->budget_timer);
	if (c->tls) {
		if (c->hs.tls_active)
			tls_bye(c->tls);
		tls_session_free(c->tls);
		c->tls = NULL;
	}
	c->budget_wait = false;
	c->reading = false;
	close(c->fd);
	c->fd = -1;
	__atomic_store_n(&c->dead, true, __ATOMIC_RELEASE); /* req->gone */
	c->closing = true;
	c->state = CS_DONE;
	conn_drop_out(c);
}

static void
conn_flush_out(struct conn *c)
{
	c->flushing = true;
	while (c->out_head) {
		struct iovec iov[CONN_MAX_IOV];
		int n = 0;
		size_t skip = c->out_off;

		for (struct out *o = c->out_head; o && n < CONN_MAX_IOV - 1;
		    o = o->next) {
			for (unsigned i = 0; i < o->niov; i++) {
				size_t len = o->iov[i].iov_len;
				if (skip >= len) {
					skip -= len;
					continue;
				}
				iov[n].iov_base = (char *)o->iov[i].iov_base + skip;
				iov[n].iov_len = len - skip;
				skip = 0;
				n++;
			}
		}
		ssize_t w = conn_send(c, iov, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(c->host->loop, &c->ww);
				c->flushing = false;
				return;
			}
			if (errno != EPIPE && errno != ECONNRESET)
				log_warn("%s: write", c->peer);
			else
				log_debug("%s: peer went away", c->peer);
			c->flushing = false;
			conn_close_socket(c);
			return;
		}
		size_t done = c->out_off + (size_t)w;
		while (c->out_head && done >= c->out_head->bytes) {
			struct out *o = c->out_head;
			done -= o->bytes;
			c->out_head = o->next;
			if (!c->out_head)
				c->out_tail = &c->out_head;
			o->release(o);
		}
		c->out_off = done;
	}
	c->flushing = false;
	ev_io_stop(c->host->loop, &c->ww);
}

struct hs_out {
	struct out out;
	struct conn *c;
	uint8_t data[];
};

static void
conn_hs_out_release(struct out *o)
{
	struct hs_out *h = container_of(o, struct hs_out, out);
	struct conn *c = h->c;

	c->hs_unsent -= o->bytes;
	budget_give(c->host->budget, o->bytes);
	free(h);
	conn_maybe_resume(c);
}

/* Queue the handshake bytes in B; returns -1 if out of memory. */
static int
conn_queue_buf(struct conn *c, const struct buf *b)
{
	if (b->oom)
		return -1;
	if (b->len == 0)
		return 0;
	struct hs_out *h = malloc(sizeof *h + b->len);
	if (!h)
		return -1;
	memcpy(h->data, b->data, b->len);
	h->out.iov[0].iov_base = h->data;
	h->out.iov[0].iov_len = b->len;
	h->out.niov = 1;
	h->out.bytes = b->len;
	h->out.release = conn_hs_out_release;
	h->c = c;
	c->hs_unsent += b->len;
	budget_charge(c->host->budget, b->len);
	conn_queue_out(c, &h->out);
	return 0;
}

/* --- reading ----------------------------------------------------------- */

/* The pieces of REQ's payload from byte GOT on, at most MAX of them. */
static int
conn_payload_iov(const struct request *req, uint32_t got, struct iovec *out,
    int max)
{
	unsigned n;
	const struct iovec *iov;
	int k = 0;

	if (!req->wbuf) {
		out[0].iov_base = (char *)req->data + got;
		out[0].iov_len = req->nbd.count - got;
		return 1;
	}
	iov = cache_wbuf_iov(req->wbuf, &n);
	for (unsigned i = 0; i < n && k < max; i++) {
		if (got >= iov[i].iov_len) {
			got -= (uint32_t)iov[i].iov_len;
			continue;
		}
		out[k].iov_base = (char *)iov[i].iov_base + got;
		out[k].iov_len = iov[i].iov_len - got;
		got = 0;
		k++;
	}
	return k;
}

/* Copy N bytes of REQ's payload from byte GOT on out of the input. */
static void
conn_payload_copy(const struct request *req, uint32_t got, const uint8_t *p,
    size_t n)
{
	struct iovec iov[CONN_MAX_IOV];

	while (n > 0) {
		int niov = conn_payload_iov(req, got, iov, CONN_MAX_IOV);
		for (int i = 0; i < niov && n > 0; i++) {
			size_t k = iov[i].iov_len < n ? iov[i].iov_len : n;
			memcpy(iov[i].iov_base, p, k);
			p += k;
			n -= k;
			got += (uint32_t)k;
		}
	}
}

static void
conn_stop_reading(struct conn *c)
{
	if (c->reading) {
		ev_io_stop(c->host->loop, &c->rw);
		c->reading = false;
	}
}

/* Stop reading and close once every reply has gone out. */
static void
conn_close_gracefully(struct conn *c)
{
	conn_stop_reading(c);
	c->closing = true;
	c->state = CS_DONE;
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

static void
conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	ssize_t n;

	if (c->state == CS_TLS_HANDSHAKE) {
		conn_tls_step(c);
		conn_maybe_finish(c);
		return;
	}
	if (c->state == CS_TX_PAYLOAD && c->rstart == c->rend &&
	    c->cur->nbd.count - c->cur_got >= CONN_DIRECT_READ_BYTES) {
		/* Large payload: read it in place, no copy. */
		struct iovec iov[CONN_MAX_PAYLOAD_IOV];
		int niov = conn_payload_iov(c->cur, c->cur_got, iov,
		    CONN_MAX_PAYLOAD_IOV);
		n = conn_recvv(c, iov, niov);
		if (n > 0)
			c->cur_got += (uint32_t)n;
	} else {
		if (c->rstart > 0) {
			memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
			c->rend -= c->rstart;
			c->rstart = 0;
		}
		/* Full (a resume after a pause with the buffer full): parse
		 * what is there first.  read() of 0 bytes would return 0 and
		 * look like the client's end of file. */
		if (c->rend == CONN_RBUF_BYTES)
			goto process;
		n = conn_recv(c, c->rbuf + c->rend, CONN_RBUF_BYTES - c->rend);
		if (n > 0)
			c->rend += (size_t)n;
	}
	if (n < 0) {
		/* Woken to parse what is already buffered (see resume). */
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			goto process;
		if (errno == EPROTO && c->tls)
			log_warnx("%s: TLS error; disconnecting", c->peer);
		else if (errno != ECONNRESET)
			log_warn("%s: read", c->peer);
		conn_close_socket(c);
		conn_maybe_finish(c);
		return;
	}
	if (n == 0) {
		if (c->state != CS_TX_HEADER || c->rstart != c->rend)
			log_info("%s: client closed the connection mid-%s",
			    c->peer, c->state < CS_TX_HEADER ? "handshake" :
			    "request");
		else
			log_debug("%s: client closed the connection", c->peer);
		conn_close_gracefully(c);
		conn_maybe_finish(c);
		return;
	}
process:
	/* Replies to requests answered inline (cache hits, writes that
	 * land) while parsing this input go out together. */
	c->corked = true;
	conn_process(c);
	c->corked = false;
	if (!c->dead && c->out_head && !ev_is_active(&c->ww))
		conn_flush_out(c);
	conn_tls_maybe_begin(c);
	/* Decrypted input already held by TLS wakes no socket event. */
	if (c->tls && c->reading && tls_pending(c->tls))
		ev_feed_event(loop, &c->rw, EV_READ);
	conn_maybe_finish(c);
}

/* --- requests ---------------------------------------------------------- */

static void
conn_request_release(struct out *o)
{
	struct request *req = container_of(o, struct request, out);
	struct conn *c = req->conn;

	c->inflight--;
	c->ra.inflight_bytes -= req->ra_bytes;
	if (req->budget) {
		c->inflight_bytes -= req->budget;
		budget_give(c->host->budget, req->budget);
	}
	if (req->data || req->wbuf) {
		bufstash_put(req->data, req->data_cap);
		/* Pages not committed (a client gone mid-payload) go back
		 * to the cache unseen. */
		cache_wbuf_free(req->wbuf);
	}
	free(req->reply);
	free(req);
	conn_maybe_resume(c);
}

static void
conn_maybe_resume(struct conn *c)
{
	if (c->paused && !c->budget_wait && !conn_over_limit(c) &&
	    !c->closing && !c->dead) {
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
			budget_give(c->host->budget, budget);
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
	else if (req->err && !(req->err == ECANCELED && c->dead) &&
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

	__atomic_add_fetch(&c->host->budget->client_errors, 1,
	    __ATOMIC_RELAXED);
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
	conn_maybe_resume(c);
}

/* Take N bytes (0: is there room at all?), or stop reading and look again
 * in a moment. */
static bool
conn_budget_take(struct conn *c, size_t n)
{
	struct budget *b = c->host->budget;

	if (budget_take(b, n, c->inflight_bytes + c->hs_unsent)) {
		c->budget_starved = false;
		return true;
	}
	if (!c->budget_starved)
		budget_note_wait(b, n, c->peer);
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
		c->state = CS_TX_DISCARD;
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
			c->state = CS_TX_DISCARD;
		} else {
			conn_reply_error(c, nbd, NBD_ENOMEM);
		}
		return;
	}
	if (payload) {
		c->cur = req;
		c->cur_got = 0;
		c->state = CS_TX_PAYLOAD;
		return;
	}
	conn_submit(c, req);
}

/* --- the input state machine ------------------------------------------ */

/* limits.idle_timeout_s: a client that sends nothing for that long, with
 * nothing in flight, is closed. */
static void
conn_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	ev_tstamp left =
	    c->last_request + c->host->limits.idle_timeout_s - ev_now(loop);

	if (left > 0 || c->inflight > 0) {
		ev_timer_set(w,
		    left > 0 ? left : c->host->limits.idle_timeout_s, 0);
		ev_timer_start(loop, w);
		return;
	}
	log_info("%s: no request for %u s (limits.idle_timeout_s); closing",
	    c->peer, c->host->limits.idle_timeout_s);
	conn_close_gracefully(c);
	conn_maybe_finish(c);
}

/*
 * limits.stall_timeout_s, on each I/O thread: a connection that holds
 * replies it does not read, or a request whose payload it does not
 * finish sending, and has moved no byte for that long, is closed (its
 * requests still complete on the backend).  It holds the memory budget
 * (and the cache pages a payload is received into) that others need.
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
		if (c->dead || c->state < CS_TX_HEADER ||
		    now - c->stall_since < h->limits.stall_timeout_s)
			continue;
		const char *what = c->out_head ?
		    "replies not read" :
		    c->state == CS_TX_PAYLOAD || c->state == CS_TX_DISCARD ?
		    "a request's payload not finished" :
		    NULL;
		if (!what)
			continue;
		budget_note_stall(h->budget, c->peer, h->limits.stall_timeout_s,
		    what);
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
	__atomic_add_fetch(&c->exp->connections, 1, __ATOMIC_RELAXED);
	c->state = CS_TX_HEADER;
	c->connected_at = ev_now(c->host->loop);
	c->stall_since = c->connected_at;
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
	if (c->host->limits.idle_timeout_s) {
		c->last_request = ev_now(c->host->loop);
		ev_timer_init(&c->hs_timer, conn_idle_cb,
		    c->host->limits.idle_timeout_s, 0);
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
		c->state = CS_HS_OPT_HEADER;
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
		c->state = CS_TLS_START;
		break;
	}
}

static void
conn_process(struct conn *c)
{
	while (!c->dead && !c->closing) {
		size_t avail = c->rend - c->rstart;
		uint8_t *p = c->rbuf + c->rstart;

		switch (c->state) {
		case CS_HS_CLIENT_FLAGS:
			if (avail < 4)
				return;
			c->rstart += 4;
			if (hs_client_flags(&c->hs, get_u32(p)) == HS_CLOSE) {
				conn_close_socket(c);
				return;
			}
			c->state = CS_HS_OPT_HEADER;
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
				c->state = CS_HS_OPT_DISCARD;
			} else {
				c->state = CS_HS_OPT_DATA;
			}
			break;

		case CS_HS_OPT_DATA:
			if (avail < c->optlen)
				return;
			c->rstart += c->optlen;
			conn_handle_option(c, p);
			break;

		case CS_HS_OPT_DISCARD:
		case CS_TX_DISCARD: {
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
				c->state = CS_HS_OPT_HEADER;
			} else {
				struct request *req = c->cur;
				c->cur = NULL;
				c->state = CS_TX_HEADER;
				conn_reply(req);
			}
			break;
		}

		case CS_TX_HEADER: {
			struct nbd_request nbd;
			const char *why = "";
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
			uint32_t need = req->nbd.count - c->cur_got;
			if (c->cur_got == 0 && avail >= need && !req->wbuf) {
				/* All in the input buffer: into the cache from
				 * there, not through the request's buffer. */
				c->rstart += need;
				c->cur = NULL;
				c->state = CS_TX_HEADER;
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
			c->state = CS_TX_HEADER;
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

static void
conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;

	if (c->state == CS_TLS_HANDSHAKE) {
		conn_tls_step(c);
		conn_maybe_finish(c);
		return;
	}
	conn_flush_out(c);
	conn_tls_maybe_begin(c);
	conn_maybe_finish(c);
}

/* --- TLS: the handshake after STARTTLS --------------------------------- */

/* One step of the TLS handshake, when the socket is ready for it.  On
 * failure the socket is closed; the caller then calls conn_maybe_finish
 * (C may be freed there, so only as its last use of C). */
static void
conn_tls_step(struct conn *c)
{
	struct ev_loop *loop = c->host->loop;
	char err[256], desc[64];

	switch (tls_handshake(c->tls, err, sizeof err)) {
	case TLS_AGAIN:
		if (tls_wants_write(c->tls)) {
			conn_stop_reading(c);
			ev_io_start(loop, &c->ww);
		} else {
			ev_io_stop(loop, &c->ww);
			c->reading = true;
			ev_io_start(loop, &c->rw);
		}
		return;
	case TLS_FAILED:
		log_warnx("%s: TLS handshake failed: %s; disconnecting",
		    c->peer, err);
		conn_close_socket(c);
		return;
	case TLS_DONE:
		break;
	}
	ev_io_stop(loop, &c->ww);
	c->hs.tls_active = true;
	/* The TLS identity, for the allow lists (peer.h). */
	const char *psk = tls_session_psk(c->tls);
	if (psk)
		peer_set_tls_name(c->ident.tls_psk, psk, strlen(psk));
	if (!tls_session_cn(c->tls, c->ident.tls_cn, sizeof c->ident.tls_cn))
		c->ident.tls_cn[0] = '\0';
	tls_session_describe(c->tls, desc, sizeof desc);
	log_info("%s: TLS up (%s)%s%s%s%s", c->peer, desc,
	    c->ident.tls_psk[0] ? ", PSK user " : "", c->ident.tls_psk,
	    c->ident.tls_cn[0] ? ", certificate CN " : "", c->ident.tls_cn);
	/* The options start over, encrypted. */
	c->state = CS_HS_OPT_HEADER;
	c->reading = true;
	ev_io_start(loop, &c->rw);
	if (tls_pending(c->tls))
		ev_feed_event(loop, &c->rw, EV_READ);
}

/* STARTTLS's reply has gone out: begin TLS, with what the client already
 * sent of its handshake.  As conn_tls_step, it only closes the socket on
 * failure: the caller calls conn_maybe_finish. */
static void
conn_tls_maybe_begin(struct conn *c)
{
	struct tls_creds *cr = NULL;

	if (c->state != CS_TLS_START || c->dead || c->out_head)
		return;
	if (c->host->tls)
		tls_server_get(c->host->tls, &cr);
	if (!cr) {
		log_warnx("%s: TLS was turned off by a reload; disconnecting",
		    c->peer);
		conn_close_socket(c);
		return;
	}
	c->tls = tls_session_new(cr, c->fd, c->rbuf + c->rstart,
	    c->rend - c->rstart);
	tls_creds_unref(cr);
	if (!c->tls) {
		log_warnx("%s: out of memory for TLS", c->peer);
		conn_close_socket(c);
		return;
	}
	c->rstart = c->rend = 0;
	c->state = CS_TLS_HANDSHAKE;
	conn_tls_step(c);
}

/* Free C if it is closing and nothing is left in flight or queued. */
static void
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
	if (!c->dead && c->out_head)
		return;         /* replies still going out */

	struct conn_host *h = c->host;
	conn_close_socket(c);
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
		__atomic_sub_fetch(&c->exp->connections, 1, __ATOMIC_RELAXED);
	if (c->exp)
		log_info("%s: connection to export \"%s\" closed after %.1f s",
		    c->peer, c->exp->name, ev_now(h->loop) - c->connected_at);
	else
		log_debug("%s: closed", c->peer);
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

	__atomic_add_fetch(&c->host->budget->hs_timeouts, 1, __ATOMIC_RELAXED);
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
		const char *d = __atomic_load_n(&c->host->exports->default_name,
		    __ATOMIC_ACQUIRE);
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
		log_warnx("%s: export \"%s\" refused: %s", c->peer, e->name,
		    why);
	}
	return false;
}

void
conn_start(struct conn_host *h, int fd, const char *peer, const char *client)
{
	struct conn *c = calloc(1, sizeof *c);

	if (c)
		c->rbuf = malloc(CONN_RBUF_BYTES);
	if (!c || !c->rbuf || h->draining) {
		if (c && c->rbuf)
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
	if (c->dead) {
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
