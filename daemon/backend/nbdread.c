/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbdread.c - NBD READs and WRITEs of wbd's own: see nbdread.h.
 *
 * Requests queued by nbdread_submit wait in OUT until nbdread_wait sends
 * them, all in one sendmsg(2) when the socket takes them: a request's
 * header (kept in its slot until its reply) and a WRITE's payload (its
 * caller's buffer) are pieces of OUT, sent in order.  Replies are
 * received into IN, as much as has arrived; a payload is copied from IN
 * to its request's buffer, or, for what IN does not hold yet of a large
 * one, received straight into that buffer.  A request's cookie is its
 * slot in the table of READs in flight and a sequence number, so a
 * reply to a READ not in flight is seen as the protocol error it is.
 */
#include <endian.h>
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "clock.h"
#include "nbd-proto.h"
#include "nbdread.h"

#define NR_IN_BYTES (256u << 10)
/* A payload part at least this large, not yet in IN, goes straight to
 * the request's buffer. */
#define NR_DIRECT_BYTES (16u << 10)

/* At most a header and a payload a request. */
#define NR_PIECES (2 * NBDREAD_MAX_INFLIGHT)
/* The pieces one sendmsg takes at most. */
#define NR_IOV 64

struct nbdread {
	int fd;
	char why[128]; /* failed: why; "" while it works */
	uint32_t seq;
	unsigned inflight;
	struct nbdread_req *slot[NBDREAD_MAX_INFLIGHT];
	uint32_t slot_seq[NBDREAD_MAX_INFLIGHT];
	uint8_t hdr[NBDREAD_MAX_INFLIGHT][NBD_REQUEST_SIZE];
	/* Not yet sent: OUT[out_head .. out_head + out_n) (a ring), the
	 * first of them from its byte OUT_OFF; OUT_BYTES in all. */
	struct iovec out[NR_PIECES];
	unsigned out_head, out_n;
	size_t out_off, out_bytes;
	/* Received, not yet taken: IN[in_pos .. in_len). */
	uint8_t *in;
	size_t in_pos, in_len;
	/* The READ whose payload is being received, and its slot. */
	struct nbdread_req *cur;
	unsigned cur_slot;
	size_t send_limit; /* nbdread_test_send_limit; 0: none */
};

struct nbdread *
nbdread_new(int fd)
{
	struct nbdread *nr = calloc(1, sizeof *nr);

	if (!nr)
		return NULL;
	if (!(nr->in = malloc(NR_IN_BYTES))) {
		free(nr);
		errno = ENOMEM;
		return NULL;
	}
	nr->fd = fd;
	return nr;
}

void
nbdread_free(struct nbdread *nr)
{
	if (!nr)
		return;
	nbdread_fail(nr, "closed");
	free(nr->in);
	free(nr);
}

const char *
nbdread_failed(const struct nbdread *nr)
{
	return nr->why[0] ? nr->why : NULL;
}

static void
nr_complete(struct nbdread *nr, unsigned slot, int error)
{
	struct nbdread_req *req = nr->slot[slot];

	nr->slot[slot] = NULL;
	nr->inflight--;
	req->error = error;
	req->done = true;
}

void
nbdread_fail(struct nbdread *nr, const char *why)
{
	if (!nr->why[0])
		snprintf(nr->why, sizeof nr->why, "%s", why);
	for (unsigned i = 0; i < NBDREAD_MAX_INFLIGHT; i++)
		if (nr->slot[i])
			nr_complete(nr, i, ENOTCONN);
	nr->cur = NULL;
	nr->out_head = nr->out_n = 0;
	nr->out_off = nr->out_bytes = 0;
	nr->in_pos = nr->in_len = 0;
}

int
nbdread_fd(const struct nbdread *nr)
{
	return nr->fd;
}

bool
nbdread_idle_ok(struct nbdread *nr)
{
	struct pollfd p = { .fd = nr->fd, .events = POLLIN };

	if (nr->why[0])
		return false;
	if (nr->inflight > 0 || nr->out_n > 0)
		return true;
	if (poll(&p, 1, 0) > 0 &&
	    (p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
		nbdread_fail(nr,
		    "closed by the remote, or data from it, "
		    "while idle");
	return !nr->why[0];
}

static void
nr_fail_errno(struct nbdread *nr, const char *what, int err)
{
	char why[128];

	snprintf(why, sizeof why, "%s: %s", what, strerror(err));
	nbdread_fail(nr, why);
}

/* P[0 .. LEN) to be sent after what OUT holds. */
static void
nr_out_add(struct nbdread *nr, const void *p, size_t len)
{
	struct iovec *v = &nr->out[(nr->out_head + nr->out_n) % NR_PIECES];

	v->iov_base = (void *)p;
	v->iov_len = len;
	nr->out_n++;
	nr->out_bytes += len;
}

int
nbdread_submit(struct nbdread *nr, struct nbdread_req *req)
{
	unsigned s;

	if (nr->why[0])
		return -ENOTCONN;
	if (nr->inflight == NBDREAD_MAX_INFLIGHT)
		return -EBUSY;
	for (s = 0; nr->slot[s]; s++)
		;
	req->error = 0;
	req->done = false;
	req->got = 0;
	/* What is not sent yet belongs to requests in flight: with this
	 * one, never more pieces than OUT holds. */
	assert(nr->out_n + 2 <= NR_PIECES);
	nr->slot[s] = req;
	nr->slot_seq[s] = ++nr->seq;
	nr->inflight++;

	uint8_t *p = nr->hdr[s];
	uint32_t magic = htobe32(NBD_REQUEST_MAGIC);
	uint16_t flags = htobe16(req->write ? req->flags : 0);
	uint16_t type = htobe16(req->write ? NBD_CMD_WRITE : NBD_CMD_READ);
	uint64_t cookie = htobe64((uint64_t)nr->slot_seq[s] << 32 | s);
	uint64_t off = htobe64(req->off);
	uint32_t len = htobe32(req->count);
	memcpy(p, &magic, 4);
	memcpy(p + 4, &flags, 2);
	memcpy(p + 6, &type, 2);
	memcpy(p + 8, &cookie, 8);
	memcpy(p + 16, &off, 8);
	memcpy(p + 24, &len, 4);
	nr_out_add(nr, p, NBD_REQUEST_SIZE);
	if (req->write && req->count > 0)
		nr_out_add(nr, req->buf, req->count);
	return 0;
}

size_t
nbdread_unsent(const struct nbdread *nr)
{
	return nr->out_bytes;
}

/* The first N bytes of OUT sent: the pieces they cover go. */
static void
nr_out_sent(struct nbdread *nr, size_t n)
{
	nr->out_bytes -= n;
	while (n > 0) {
		struct iovec *v = &nr->out[nr->out_head];
		size_t left = v->iov_len - nr->out_off;
		if (n < left) {
			nr->out_off += n;
			return;
		}
		n -= left;
		nr->out_off = 0;
		nr->out_head = (nr->out_head + 1) % NR_PIECES;
		nr->out_n--;
	}
}

/* Send what OUT holds, as far as the socket takes it. */
static void
nr_send(struct nbdread *nr)
{
	while (nr->out_n > 0) {
		struct iovec iov[NR_IOV];
		unsigned n = 0;
		size_t len = 0;
		/* Tests: a send that takes only part, as from a full socket. */
		size_t limit = nr->send_limit ? nr->send_limit : SIZE_MAX;
		for (unsigned i = 0; i < nr->out_n && n < NR_IOV && len < limit;
		     i++) {
			const struct iovec *v =
			    &nr->out[(nr->out_head + i) % NR_PIECES];
			size_t skip = i == 0 ? nr->out_off : 0;
			size_t take = v->iov_len - skip;
			if (take > limit - len)
				take = limit - len;
			iov[n].iov_base = (uint8_t *)v->iov_base + skip;
			iov[n++].iov_len = take;
			len += take;
		}
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };
		ssize_t sent =
		    sendmsg(nr->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				nr_fail_errno(nr, "send", errno);
			return;
		}
		nr_out_sent(nr, (size_t)sent);
		if (nr->send_limit || (size_t)sent < len)
			return;
	}
}

void
nbdread_test_send_limit(struct nbdread *nr, size_t bytes)
{
	nr->send_limit = bytes;
}

void
nbdread_send(struct nbdread *nr)
{
	if (!nr->why[0])
		nr_send(nr);
}

/* The errno of an NBD error; the spec has unknown values read as
 * EINVAL. */
static int
nr_errno(uint32_t nbd_error)
{
	switch (nbd_error) {
	case NBD_EPERM:
	case NBD_EIO:
	case NBD_ENOMEM:
	case NBD_EINVAL:
	case NBD_ENOSPC:
	case NBD_EOVERFLOW:
	case NBD_ENOTSUP:
		return (int)nbd_error; /* the same numbers as Linux's */
	default:
		return EINVAL;
	}
}

/* Take a reply header from IN (it holds one): false if it breaks the
 * protocol (the connection has failed then). */
static bool
nr_header(struct nbdread *nr)
{
	const uint8_t *p = nr->in + nr->in_pos;
	uint32_t magic, error;
	uint64_t cookie;

	memcpy(&magic, p, 4);
	memcpy(&error, p + 4, 4);
	memcpy(&cookie, p + 8, 8);
	nr->in_pos += NBD_SIMPLE_REPLY_SIZE;
	magic = be32toh(magic);
	cookie = be64toh(cookie);
	uint32_t s = (uint32_t)cookie;
	if (magic != NBD_SIMPLE_REPLY_MAGIC) {
		char why[64];
		snprintf(why, sizeof why, "a reply with magic 0x%08x",
		    (unsigned)magic);
		nbdread_fail(nr, why);
		return false;
	}
	if (s >= NBDREAD_MAX_INFLIGHT || !nr->slot[s] ||
	    nr->slot_seq[s] != (uint32_t)(cookie >> 32)) {
		nbdread_fail(nr, "a reply to no request in flight");
		return false;
	}
	error = be32toh(error);
	if (error == NBD_ESHUTDOWN) {
		/* The server is going away: every read in flight, this one
		 * too, is read again through libnbd, which reconnects. */
		nbdread_fail(nr, "the server is shutting down (ESHUTDOWN)");
		return false;
	}
	if (error != 0 || nr->slot[s]->count == 0 || nr->slot[s]->write) {
		/* A failed READ has no payload, nor has any WRITE's reply. */
		nr_complete(nr, s, error ? nr_errno(error) : 0);
		return true;
	}
	nr->cur = nr->slot[s];
	nr->cur_slot = s;
	return true;
}

/* Take what IN holds: replies and payloads. */
static void
nr_parse(struct nbdread *nr)
{
	while (!nr->why[0]) {
		size_t have = nr->in_len - nr->in_pos;
		struct nbdread_req *req = nr->cur;
		if (req) {
			uint32_t want = req->count - req->got;
			size_t n = have < want ? have : want;
			memcpy((uint8_t *)req->buf + req->got,
			    nr->in + nr->in_pos, n);
			req->got += (uint32_t)n;
			nr->in_pos += n;
			if (req->got < req->count)
				break;
			nr->cur = NULL;
			nr_complete(nr, nr->cur_slot, 0);
		} else if (have >= NBD_SIMPLE_REPLY_SIZE) {
			if (!nr_header(nr))
				return;
		} else {
			break;
		}
	}
	/* Keep a part of a header at the start of IN. */
	size_t left = nr->in_len - nr->in_pos;
	if (left > 0 && nr->in_pos > 0)
		memmove(nr->in, nr->in + nr->in_pos, left);
	nr->in_pos = 0;
	nr->in_len = left;
}

/* Receive once: true if anything came (then parsed), false if nothing
 * was there (or the connection failed). */
static bool
nr_recv(struct nbdread *nr)
{
	struct nbdread_req *req = nr->cur;
	void *to = nr->in + nr->in_len;
	size_t room = NR_IN_BYTES - nr->in_len;
	bool direct = false;

	/* The rest of a large payload: straight into its buffer. */
	if (req && nr->in_len == 0 &&
	    req->count - req->got >= NR_DIRECT_BYTES) {
		to = (uint8_t *)req->buf + req->got;
		room = req->count - req->got;
		direct = true;
	}
	for (;;) {
		ssize_t n = recv(nr->fd, to, room, MSG_DONTWAIT);
		if (n > 0) {
			if (direct) {
				req->got += (uint32_t)n;
				if (req->got == req->count) {
					nr->cur = NULL;
					nr_complete(nr, nr->cur_slot, 0);
				}
			} else {
				nr->in_len += (size_t)n;
				nr_parse(nr);
			}
			return true;
		}
		if (n == 0) {
			nbdread_fail(nr, "the server closed the connection");
			return false;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			nr_fail_errno(nr, "recv", errno);
		return false;
	}
}

bool
nbdread_wait(struct nbdread *nr, struct nbdread_req *req, int timeout_ms,
    int caller_fd)
{
	/* One deadline for the whole wait, however many replies come. */
	uint64_t until =
	    timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000u : 0;

	for (;;) {
		if (req->done)
			return true;
		if (nr->why[0])
			return false; /* cannot happen: failing completes all */
		nr_send(nr);
		if (nr_recv(nr))
			continue;
		if (req->done)
			return true;
		struct pollfd fds[2] = {
			{ .fd = nr->fd, .events = POLLIN },
			{ .fd = caller_fd, .events = POLLIN },
		};
		if (nr->out_n > 0)
			fds[0].events |= POLLOUT;
		int ms = timeout_ms;
		if (timeout_ms > 0) {
			uint64_t now = now_ns();
			ms = now >= until ?
			    0 :
			    (int)((until - now + 999999u) / 1000000u);
		}
		int r = poll(fds, 2, ms);
		if (r < 0 && errno != EINTR) {
			nr_fail_errno(nr, "poll", errno);
			continue;
		}
		if (r == 0 || (fds[1].revents & POLLIN))
			return req->done;
		if (fds[0].revents & (POLLERR | POLLNVAL)) {
			/* recv says what went wrong, or that the data is
			 * there; POLLHUP: recv sees the end. */
			if (!nr_recv(nr) && !nr->why[0])
				nbdread_fail(nr, "the socket failed");
		}
	}
}
