/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbdread.c - NBD READs of wbd's own: see nbdread.h.
 *
 * Requests queued by nbdread_submit wait in OUT until nbdread_wait sends
 * them, all in one send(2) when the socket takes them.  Replies are
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

#include "clock.h"
#include "nbd-proto.h"
#include "nbdread.h"

#define NR_IN_BYTES (256u << 10)
/* A payload part at least this large, not yet in IN, goes straight to
 * the request's buffer. */
#define NR_DIRECT_BYTES (16u << 10)

struct nbdread {
	int fd;
	char why[128]; /* failed: why; "" while it works */
	uint32_t seq;
	unsigned inflight;
	struct nbdread_req *slot[NBDREAD_MAX_INFLIGHT];
	uint32_t slot_seq[NBDREAD_MAX_INFLIGHT];
	/* Requests not yet sent: OUT[out_pos .. out_len). */
	uint8_t out[NBDREAD_MAX_INFLIGHT * NBD_REQUEST_SIZE];
	size_t out_pos, out_len;
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
	nr->out_pos = nr->out_len = 0;
	nr->in_pos = nr->in_len = 0;
}

static void
nr_fail_errno(struct nbdread *nr, const char *what, int err)
{
	char why[128];

	snprintf(why, sizeof why, "%s: %s", what, strerror(err));
	nbdread_fail(nr, why);
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
	if (nr->out_pos > 0) {
		/* What a partial send left: requests still in flight, so with
		 * this one never more than OUT holds. */
		memmove(nr->out, nr->out + nr->out_pos,
		    nr->out_len - nr->out_pos);
		nr->out_len -= nr->out_pos;
		nr->out_pos = 0;
	}
	assert(nr->out_len + NBD_REQUEST_SIZE <= sizeof nr->out);
	nr->slot[s] = req;
	nr->slot_seq[s] = ++nr->seq;
	nr->inflight++;

	uint8_t *p = nr->out + nr->out_len;
	uint32_t magic = htobe32(NBD_REQUEST_MAGIC);
	uint16_t flags = 0, type = htobe16(NBD_CMD_READ);
	uint64_t cookie = htobe64((uint64_t)nr->slot_seq[s] << 32 | s);
	uint64_t off = htobe64(req->off);
	uint32_t len = htobe32(req->count);
	memcpy(p, &magic, 4);
	memcpy(p + 4, &flags, 2);
	memcpy(p + 6, &type, 2);
	memcpy(p + 8, &cookie, 8);
	memcpy(p + 16, &off, 8);
	memcpy(p + 24, &len, 4);
	nr->out_len += NBD_REQUEST_SIZE;
	return 0;
}

/* Send what OUT holds, as far as the socket takes it. */
static void
nr_send(struct nbdread *nr)
{
	while (nr->out_pos < nr->out_len) {
		size_t len = nr->out_len - nr->out_pos;
		/* Tests: a send that takes only part, as from a full socket. */
		bool limited = nr->send_limit && len > nr->send_limit;
		if (limited)
			len = nr->send_limit;
		ssize_t n = send(nr->fd, nr->out + nr->out_pos, len,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				nr_fail_errno(nr, "send", errno);
			return;
		}
		nr->out_pos += (size_t)n;
		if (limited)
			return;
	}
	nr->out_pos = nr->out_len = 0;
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
	if (error != 0 || nr->slot[s]->count == 0) {
		/* A failed READ has no payload. */
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
		if (nr->out_len > nr->out_pos)
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
