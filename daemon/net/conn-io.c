/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * conn-io.c - a connection's transport: bytes in and out of its socket,
 * in the clear or through TLS.  The input buffer and a large WRITE's
 * payload read in place, the output queue and its corking, and the TLS
 * handshake after STARTTLS; what the bytes mean is conn.c's.
 *
 * Runs entirely on the connection's I/O thread.  At most one read()
 * happens per wake-up, so a busy client cannot starve the others on the
 * same thread; what was read is handed to conn_process() (conn.c).
 *
 * After NBD_OPT_STARTTLS the same machine runs over TLS: the option's
 * reply goes out in the clear, then the TLS handshake is driven by the
 * socket's readiness like everything else, and from then on every byte is
 * read and written through the session (conn_recv, conn_send).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "atomics.h"
#include "budget.h"
#include "buf.h"
#include "conn-internal.h"
#include "conn.h"
#include "export.h"
#include "log.h"
#include "peer.h"
#include "request.h"
#include "tls.h"

static void conn_flush_out(struct conn *c);
static void conn_hs_out_release(struct out *o);
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
		c->stall_since = c->sent_at = ev_now(c->host->loop);
	return r;
}

/* --- output ------------------------------------------------------------ */

void
conn_queue_out(struct conn *c, struct out *o)
{
	if (load_relaxed(&c->dead)) {
		o->release(o);
		return;
	}
	o->next = NULL;
	if (!c->out_head)
		c->stall_since = c->out_since = ev_now(c->host->loop);
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
		if (!load_relaxed(&c->dead) && c->out_head &&
		    !ev_is_active(&c->ww))
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

void
conn_close_socket(struct conn *c)
{
	if (load_relaxed(&c->dead))
		return;
	if (c->corked && c->out_head) {
		/* Replies held while parsing: send what the socket takes
		 * now, as they would have gone before the cork. */
		c->corked = false;
		conn_flush_out(c);
		if (load_relaxed(&c->dead))
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
	store_release(&c->dead, true); /* req->gone */
	c->closing = true;
	conn_set_state(c, CS_DONE);
	conn_drop_out(c);
}

static void
conn_flush_out(struct conn *c)
{
	/* Replies queued meanwhile wait. */
	assert(!load_relaxed(&c->dead) && !c->flushing);
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
			/* A request's reply (not the handshake's) gone out
			 * whole: the client takes its replies. */
			if (o->release != conn_hs_out_release)
				c->replied = true;
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
	budget_give(c->host->budget, c->share, o->bytes);
	free(h);
	conn_maybe_resume(c);
}

/* Queue the handshake bytes in B; returns -1 if out of memory. */
int
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
	budget_charge(c->host->budget, c->share, b->len);
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
	iov = export_wbuf_iov(req->wbuf, &n);
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
void
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

void
conn_stop_reading(struct conn *c)
{
	if (c->reading) {
		ev_io_stop(c->host->loop, &c->rw);
		c->reading = false;
	}
}

/* --- the socket's watchers: read and parse, write ---------------------- */

void
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
			conn_log_refusal(c, true, "TLS error; disconnecting");
		else if (errno != ECONNRESET)
			log_warn("%s: read", c->peer);
		conn_close_socket(c);
		conn_maybe_finish(c);
		return;
	}
	if (n == 0) {
		if (c->state != CS_TX_HEADER || c->rstart != c->rend)
			conn_log_refusal(c, false,
			    "client closed the connection mid-%s",
			    c->state < CS_TX_HEADER ? "handshake" : "request");
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
	if (!load_relaxed(&c->dead) && c->out_head && !ev_is_active(&c->ww))
		conn_flush_out(c);
	conn_tls_maybe_begin(c);
	/* Decrypted input already held by TLS wakes no socket event. */
	if (c->tls && c->reading && tls_pending(c->tls))
		ev_feed_event(loop, &c->rw, EV_READ);
	conn_maybe_finish(c);
}

void
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
		conn_log_refusal(c, true,
		    "TLS handshake failed: %s; disconnecting", err);
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
	conn_set_state(c, CS_HS_OPT_HEADER);
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

	if (c->state != CS_TLS_START || load_relaxed(&c->dead) || c->out_head)
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
	conn_set_state(c, CS_TLS_HANDSHAKE);
	conn_tls_step(c);
}
