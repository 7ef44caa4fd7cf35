/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-nbdread.c - wbd's own NBD READs (nbdread.h), against a server
 * played by the test on the other end of a socket pair: the requests of
 * one round leave in one send, replies are taken in any order, split
 * anywhere, with payloads large and small; an error reply has no payload;
 * a reply that breaks the protocol, or the end of the connection, fails
 * every READ in flight with ENOTCONN (the caller reads them again through
 * libnbd).  WRITEs: headers and payloads of one round leave in order in
 * one sendmsg, or in pieces as the socket takes them; their replies
 * carry no payload, an error is the write's own.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "nbd-proto.h"
#include "nbdread.h"

struct pair {
	int fd[2]; /* [0] nbdread's, [1] the server's */
	struct nbdread *nr;
};

static void
pair_open(struct pair *p)
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fd), 0);
	p->nr = nbdread_new(p->fd[0]);
	assert_non_null(p->nr);
}

static void
pair_close(struct pair *p)
{
	nbdread_free(p->nr);
	close(p->fd[0]);
	if (p->fd[1] >= 0)
		close(p->fd[1]);
}

/* A request as the server sees it. */
struct seen {
	uint16_t type;
	uint64_t cookie, off;
	uint32_t len;
};

/* Read N requests, all there now (one send), as the server. */
static void
server_take(struct pair *p, struct seen *s, unsigned n)
{
	uint8_t buf[NBD_REQUEST_SIZE * 8];
	size_t want = (size_t)n * NBD_REQUEST_SIZE;

	assert_true(n <= 8);
	assert_int_equal(recv(p->fd[1], buf, sizeof buf, MSG_DONTWAIT),
	    (ssize_t)want);
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *q = buf + i * NBD_REQUEST_SIZE;
		uint32_t magic, len;
		uint16_t type;
		uint64_t cookie, off;
		memcpy(&magic, q, 4);
		memcpy(&type, q + 6, 2);
		memcpy(&cookie, q + 8, 8);
		memcpy(&off, q + 16, 8);
		memcpy(&len, q + 24, 4);
		assert_int_equal(be32toh(magic), NBD_REQUEST_MAGIC);
		s[i] = (struct seen){ .type = be16toh(type),
			.cookie = be64toh(cookie),
			.off = be64toh(off),
			.len = be32toh(len) };
		assert_int_equal(s[i].type, NBD_CMD_READ);
	}
}

/* A simple reply into OUT: its length. */
static size_t
reply(uint8_t *out, uint32_t magic, uint32_t error, uint64_t cookie)
{
	uint32_t m = htobe32(magic), e = htobe32(error);
	uint64_t c = htobe64(cookie);

	memcpy(out, &m, 4);
	memcpy(out + 4, &e, 4);
	memcpy(out + 8, &c, 8);
	return NBD_SIMPLE_REPLY_SIZE;
}

/* The byte a server holds at OFF. */
static uint8_t
pattern(uint64_t off)
{
	return (uint8_t)(off * 7 + (off >> 12));
}

static size_t
payload(uint8_t *out, uint64_t off, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		out[i] = pattern(off + i);
	return len;
}

static void
assert_pattern(const uint8_t *buf, uint64_t off, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if (buf[i] != pattern(off + i))
			fail_msg("byte %u of the read at %llu is wrong", i,
			    (unsigned long long)off);
}

static void
write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

static void
test_one_send_replies_in_any_order(void **state)
{
	struct pair p;
	uint8_t b0[4096], b1[8192], b2[100], out[32768];
	struct nbdread_req r[3] = {
		{ .buf = b0, .count = sizeof b0, .off = 0 },
		{ .buf = b1, .count = sizeof b1, .off = 4096 },
		{ .buf = b2, .count = sizeof b2, .off = 12345 },
	};
	struct seen s[3];
	size_t n = 0;

	pair_open(&p);
	for (int i = 0; i < 3; i++)
		assert_int_equal(nbdread_submit(p.nr, &r[i]), 0);
	/* Nothing is sent before a wait; then all three at once. */
	assert_int_equal(recv(p.fd[1], out, sizeof out, MSG_DONTWAIT), -1);
	assert_false(nbdread_wait(p.nr, &r[0], 0, -1));
	server_take(&p, s, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(s[i].off, r[i].off);
		assert_int_equal(s[i].len, r[i].count);
	}
	/* Replies 2, 0, 1, in one write. */
	const int order[3] = { 2, 0, 1 };
	for (int k = 0; k < 3; k++) {
		int i = order[k];
		n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 0, s[i].cookie);
		n += payload(out + n, s[i].off, s[i].len);
	}
	write_all(p.fd[1], out, n);
	assert_true(nbdread_wait(p.nr, &r[1], 1000, -1));
	for (int i = 0; i < 3; i++) {
		assert_true(r[i].done);
		assert_int_equal(r[i].error, 0);
	}
	assert_pattern(b0, 0, sizeof b0);
	assert_pattern(b1, 4096, sizeof b1);
	assert_pattern(b2, 12345, sizeof b2);
	assert_null(nbdread_failed(p.nr));
	pair_close(&p);
}

static void
test_a_reply_split_byte_by_byte(void **state)
{
	struct pair p;
	uint8_t buf[300], out[512];
	struct nbdread_req r = { .buf = buf, .count = sizeof buf, .off = 77 };
	struct seen s;

	pair_open(&p);
	assert_int_equal(nbdread_submit(p.nr, &r), 0);
	assert_false(nbdread_wait(p.nr, &r, 0, -1));
	server_take(&p, &s, 1);
	size_t n = reply(out, NBD_SIMPLE_REPLY_MAGIC, 0, s.cookie);
	n += payload(out + n, 77, sizeof buf);
	for (size_t i = 0; i < n; i++) {
		assert_false(r.done);
		write_all(p.fd[1], out + i, 1);
		(void)nbdread_wait(p.nr, &r, 0, -1);
	}
	assert_true(r.done);
	assert_int_equal(r.error, 0);
	assert_pattern(buf, 77, sizeof buf);
	pair_close(&p);
}

struct big {
	int fd;
	uint64_t cookie;
	uint32_t len;
};

/* The server of a large reply: it does not fit the socket's buffer. */
static void *
big_writer(void *arg)
{
	struct big *b = arg;
	uint8_t *out = malloc(NBD_SIMPLE_REPLY_SIZE + b->len);

	size_t n = reply(out, NBD_SIMPLE_REPLY_MAGIC, 0, b->cookie);
	n += payload(out + n, 1 << 20, b->len);
	for (size_t i = 0; i < n; i += 5000)
		write_all(b->fd, out + i, n - i < 5000 ? n - i : 5000);
	free(out);
	return NULL;
}

static void
test_a_large_payload(void **state)
{
	struct pair p;
	uint32_t len = 3 << 20;
	uint8_t *buf = malloc(len);
	struct nbdread_req r = { .buf = buf, .count = len, .off = 1 << 20 };
	struct seen s;
	pthread_t t;

	pair_open(&p);
	assert_int_equal(nbdread_submit(p.nr, &r), 0);
	assert_false(nbdread_wait(p.nr, &r, 0, -1));
	server_take(&p, &s, 1);
	struct big b = { .fd = p.fd[1], .cookie = s.cookie, .len = len };
	assert_int_equal(pthread_create(&t, NULL, big_writer, &b), 0);
	assert_true(nbdread_wait(p.nr, &r, 10000, -1));
	pthread_join(t, NULL);
	assert_int_equal(r.error, 0);
	assert_pattern(buf, 1 << 20, len);
	free(buf);
	pair_close(&p);
}

static void
test_an_error_reply_has_no_payload(void **state)
{
	struct pair p;
	uint8_t b[3][512], out[2048];
	struct nbdread_req r[3];
	struct seen s[3];
	size_t n = 0;

	pair_open(&p);
	for (int i = 0; i < 3; i++) {
		r[i] = (struct nbdread_req){ .buf = b[i],
			.count = 512,
			.off = (uint64_t)i * 512 };
		assert_int_equal(nbdread_submit(p.nr, &r[i]), 0);
	}
	assert_false(nbdread_wait(p.nr, &r[0], 0, -1));
	server_take(&p, s, 3);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, NBD_EIO, s[0].cookie);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 1234, s[1].cookie);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 0, s[2].cookie);
	n += payload(out + n, s[2].off, 512);
	write_all(p.fd[1], out, n);
	assert_true(nbdread_wait(p.nr, &r[2], 1000, -1));
	assert_int_equal(r[0].error, EIO);
	assert_int_equal(r[1].error,
	    EINVAL); /* unknown: EINVAL, as the spec says */
	assert_int_equal(r[2].error, 0);
	assert_pattern(b[2], 1024, 512);
	assert_null(nbdread_failed(p.nr));
	pair_close(&p);
}

/* Two READs in flight, then WHAT from the server (or a reply to the
 * first with ERROR): both fail, with ENOTCONN, and so does the next
 * submit. */
static void
broken(const uint8_t *what, size_t len, bool hang_up, uint32_t error)
{
	struct pair p;
	uint8_t b[2][64];
	struct nbdread_req r[2] = {
		{ .buf = b[0], .count = 64, .off = 0 },
		{ .buf = b[1], .count = 64, .off = 64 },
	};
	struct seen s[2];

	pair_open(&p);
	assert_int_equal(nbdread_submit(p.nr, &r[0]), 0);
	assert_int_equal(nbdread_submit(p.nr, &r[1]), 0);
	assert_false(nbdread_wait(p.nr, &r[0], 0, -1));
	server_take(&p, s, 2);
	if (len > 0)
		write_all(p.fd[1], what, len);
	if (error) {
		uint8_t out[NBD_SIMPLE_REPLY_SIZE];
		write_all(p.fd[1], out,
		    reply(out, NBD_SIMPLE_REPLY_MAGIC, error, s[0].cookie));
	}
	if (hang_up) {
		close(p.fd[1]);
		p.fd[1] = -1;
	}
	assert_true(nbdread_wait(p.nr, &r[0], 1000, -1));
	assert_true(r[1].done);
	assert_int_equal(r[0].error, ENOTCONN);
	assert_int_equal(r[1].error, ENOTCONN);
	assert_non_null(nbdread_failed(p.nr));
	struct nbdread_req again = { .buf = b[0], .count = 64 };
	assert_int_equal(nbdread_submit(p.nr, &again), -ENOTCONN);
	pair_close(&p);
}

static void
test_a_bad_magic_fails_the_connection(void **state)
{
	uint8_t out[NBD_STRUCTURED_REPLY_SIZE] = { 0 };

	/* A structured reply: not negotiated, so not allowed. */
	reply(out, NBD_STRUCTURED_REPLY_MAGIC, 0, 0);
	broken(out, sizeof out, false, 0);
}

static void
test_a_reply_to_nothing_fails_the_connection(void **state)
{
	uint8_t out[NBD_SIMPLE_REPLY_SIZE];

	reply(out, NBD_SIMPLE_REPLY_MAGIC, 0, 99);
	broken(out, sizeof out, false, 0);
}

static void
test_the_end_of_the_connection_fails_reads(void **state)
{
	broken(NULL, 0, true, 0);
}

static void
test_eshutdown_fails_the_connection(void **state)
{
	/* The server is going away: not an answer for the client, but the
	 * cue to read everything in flight again elsewhere. */
	broken(NULL, 0, false, NBD_ESHUTDOWN);
}

/* As the server: take the requests that have arrived whole (IN holds
 * *GOT bytes, *AT of them taken) and answer each one-byte READ with its
 * offset's byte.  How many it answered. */
static unsigned
serve_bytes(struct pair *p, uint8_t *in, size_t cap, size_t *got, size_t *at)
{
	uint8_t out[NBD_SIMPLE_REPLY_SIZE + 1];
	unsigned n = 0;
	ssize_t k = recv(p->fd[1], in + *got, cap - *got, MSG_DONTWAIT);

	if (k > 0)
		*got += (size_t)k;
	for (; *at + NBD_REQUEST_SIZE <= *got; *at += NBD_REQUEST_SIZE, n++) {
		uint64_t cookie, off;
		memcpy(&cookie, in + *at + 8, 8);
		memcpy(&off, in + *at + 16, 8);
		reply(out, NBD_SIMPLE_REPLY_MAGIC, 0, be64toh(cookie));
		out[NBD_SIMPLE_REPLY_SIZE] = pattern(be64toh(off));
		write_all(p->fd[1], out, sizeof out);
	}
	return n;
}

static void
test_submits_after_a_partial_send(void **state)
{
	enum {
		N = NBDREAD_MAX_INFLIGHT,
		M = 8
	};
	static struct nbdread_req r[N + M];
	static uint8_t b[N + M], in[(N + M) * NBD_REQUEST_SIZE];
	size_t got = 0, at = 0;
	struct pair p;

	/* Every send takes 100 bytes (three requests and part of a fourth)
	 * and stops, as from a full socket: replies to what was sent free
	 * slots while most of OUT is still unsent, and more READs are
	 * queued behind it. */
	pair_open(&p);
	nbdread_test_send_limit(p.nr, 100);
	for (int i = 0; i < N; i++) {
		r[i] = (struct nbdread_req){ .buf = &b[i],
			.count = 1,
			.off = (uint64_t)i * 4096 };
		assert_int_equal(nbdread_submit(p.nr, &r[i]), 0);
	}
	nbdread_send(p.nr);
	assert_int_equal(serve_bytes(&p, in, sizeof in, &got, &at), 3);
	/* Slots are taken lowest first: READ i is in slot i. */
	assert_true(nbdread_wait(p.nr, &r[2], 1000, -1));
	assert_true(r[0].done && r[1].done);
	assert_true(got < (size_t)N * NBD_REQUEST_SIZE);
	for (int i = 0; i < M; i++) {
		r[N + i] = (struct nbdread_req){ .buf = &b[N + i],
			.count = 1,
			.off = (uint64_t)(N + i) * 4096 };
		if (i < 3)
			assert_int_equal(nbdread_submit(p.nr, &r[N + i]), 0);
		else
			assert_int_equal(nbdread_submit(p.nr, &r[N + i]),
			    -EBUSY);
	}
	/* Serve the rest: every READ gets its offset's byte. */
	for (unsigned i = 0, rounds = 0; i < N + 3; rounds++) {
		assert_true(rounds < 100000);
		if (r[i].done) {
			i++;
			continue;
		}
		nbdread_send(p.nr);
		serve_bytes(&p, in, sizeof in, &got, &at);
		(void)nbdread_wait(p.nr, &r[i], 10, -1);
	}
	for (int i = 0; i < N + 3; i++) {
		assert_int_equal(r[i].error, 0);
		assert_int_equal(b[i], pattern(r[i].off));
	}
	assert_int_equal(got, (size_t)(N + 3) * NBD_REQUEST_SIZE);
	assert_null(nbdread_failed(p.nr));
	pair_close(&p);
}

static void
test_in_flight_is_bounded(void **state)
{
	struct pair p;
	static struct nbdread_req r[NBDREAD_MAX_INFLIGHT + 1];
	uint8_t b[1];

	pair_open(&p);
	for (int i = 0; i < NBDREAD_MAX_INFLIGHT; i++) {
		r[i] = (struct nbdread_req){ .buf = b, .count = 1 };
		assert_int_equal(nbdread_submit(p.nr, &r[i]), 0);
	}
	r[NBDREAD_MAX_INFLIGHT] = (struct nbdread_req){ .buf = b, .count = 1 };
	assert_int_equal(nbdread_submit(p.nr, &r[NBDREAD_MAX_INFLIGHT]),
	    -EBUSY);
	/* Freed with READs in flight: they complete, failed. */
	nbdread_free(p.nr);
	p.nr = NULL;
	assert_true(r[0].done);
	assert_int_equal(r[0].error, ENOTCONN);
	pair_close(&p);
}

/* The server's side of WRITEs and READs: each request in IN (all of it
 * there), a WRITE's payload checked against the pattern at its offset;
 * the number of requests into *N, their headers into S. */
static size_t
server_parse(const uint8_t *in, size_t len, struct seen *s, uint16_t *flags,
    unsigned max)
{
	size_t at = 0;
	unsigned n = 0;

	while (at < len) {
		uint32_t magic, l;
		uint16_t type, f;
		uint64_t cookie, off;
		assert_true(len - at >= NBD_REQUEST_SIZE && n < max);
		memcpy(&magic, in + at, 4);
		memcpy(&f, in + at + 4, 2);
		memcpy(&type, in + at + 6, 2);
		memcpy(&cookie, in + at + 8, 8);
		memcpy(&off, in + at + 16, 8);
		memcpy(&l, in + at + 24, 4);
		assert_int_equal(be32toh(magic), NBD_REQUEST_MAGIC);
		s[n] = (struct seen){ .type = be16toh(type),
			.cookie = be64toh(cookie),
			.off = be64toh(off),
			.len = be32toh(l) };
		flags[n] = be16toh(f);
		at += NBD_REQUEST_SIZE;
		if (s[n].type == NBD_CMD_WRITE) {
			assert_true(len - at >= s[n].len);
			assert_pattern(in + at, s[n].off, s[n].len);
			at += s[n].len;
		}
		n++;
	}
	return n;
}

static void
test_writes_go_with_their_payloads(void **state)
{
	struct pair p;
	static uint8_t w0[4096], w1[100], w2[65536], rb[512], in[80000],
	    out[1024];
	struct nbdread_req r[4] = {
		{ .buf = w0, .count = sizeof w0, .off = 8192, .write = true },
		{ .buf = w1,
		    .count = sizeof w1,
		    .off = 777,
		    .write = true,
		    .flags = NBD_CMD_FLAG_FUA },
		{ .buf = rb, .count = sizeof rb, .off = 4096 },
		{ .buf = w2,
		    .count = sizeof w2,
		    .off = 1 << 20,
		    .write = true },
	};
	struct seen s[4];
	uint16_t f[4];
	size_t got = 0, n = 0;

	payload(w0, 8192, sizeof w0);
	payload(w1, 777, sizeof w1);
	payload(w2, 1 << 20, sizeof w2);
	pair_open(&p);
	for (int i = 0; i < 4; i++)
		assert_int_equal(nbdread_submit(p.nr, &r[i]), 0);
	assert_int_equal(nbdread_unsent(p.nr),
	    4 * NBD_REQUEST_SIZE + sizeof w0 + sizeof w1 + sizeof w2);
	/* Nothing before a send; then everything, in order. */
	assert_int_equal(recv(p.fd[1], in, sizeof in, MSG_DONTWAIT), -1);
	nbdread_send(p.nr);
	assert_int_equal(nbdread_unsent(p.nr), 0);
	for (ssize_t k;
	     (k = recv(p.fd[1], in + got, sizeof in - got, MSG_DONTWAIT)) > 0;)
		got += (size_t)k;
	assert_int_equal(server_parse(in, got, s, f, 4), 4);
	const uint16_t types[4] = { NBD_CMD_WRITE, NBD_CMD_WRITE, NBD_CMD_READ,
		NBD_CMD_WRITE };
	for (int i = 0; i < 4; i++) {
		assert_int_equal(s[i].type, types[i]);
		assert_int_equal(s[i].off, r[i].off);
		assert_int_equal(s[i].len, r[i].count);
		assert_int_equal(f[i], i == 1 ? NBD_CMD_FLAG_FUA : 0);
	}
	/* Replies 3, 2 (with its payload), 1 (failed), 0: a WRITE's has
	 * none. */
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 0, s[3].cookie);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 0, s[2].cookie);
	n += payload(out + n, s[2].off, s[2].len);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, NBD_ENOSPC, s[1].cookie);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 0, s[0].cookie);
	write_all(p.fd[1], out, n);
	assert_true(nbdread_wait(p.nr, &r[0], 1000, -1));
	for (int i = 0; i < 4; i++)
		assert_true(r[i].done);
	assert_int_equal(r[0].error, 0);
	assert_int_equal(r[1].error, ENOSPC);
	assert_int_equal(r[2].error, 0);
	assert_int_equal(r[3].error, 0);
	assert_pattern(rb, 4096, sizeof rb);
	assert_null(nbdread_failed(p.nr));
	pair_close(&p);
}

/* A socket that takes 1000 bytes at a time: a WRITE's payload goes in
 * pieces, in order, and a WRITE queued meanwhile follows it whole. */
static void
test_a_write_sent_in_pieces(void **state)
{
	struct pair p;
	static uint8_t w0[10000], w1[3000], in[16384], out[64];
	struct nbdread_req r[2] = {
		{ .buf = w0, .count = sizeof w0, .off = 40960, .write = true },
		{ .buf = w1, .count = sizeof w1, .off = 3, .write = true },
	};
	struct seen s[2];
	uint16_t f[2];
	size_t got = 0, n = 0;
	unsigned rounds = 0;

	payload(w0, r[0].off, sizeof w0);
	payload(w1, r[1].off, sizeof w1);
	pair_open(&p);
	nbdread_test_send_limit(p.nr, 1000);
	assert_int_equal(nbdread_submit(p.nr, &r[0]), 0);
	nbdread_send(p.nr);
	assert_int_equal(nbdread_unsent(p.nr),
	    NBD_REQUEST_SIZE + sizeof w0 - 1000);
	assert_int_equal(nbdread_submit(p.nr, &r[1]), 0);
	while (nbdread_unsent(p.nr) > 0) {
		assert_true(++rounds < 100);
		nbdread_send(p.nr);
	}
	assert_int_equal(rounds, 13); /* 12,056 bytes left, 1,000 a send */
	for (ssize_t k;
	     (k = recv(p.fd[1], in + got, sizeof in - got, MSG_DONTWAIT)) > 0;)
		got += (size_t)k;
	assert_int_equal(got, 2 * NBD_REQUEST_SIZE + sizeof w0 + sizeof w1);
	assert_int_equal(server_parse(in, got, s, f, 2), 2);
	assert_int_equal(s[0].off, r[0].off);
	assert_int_equal(s[1].off, r[1].off);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 0, s[1].cookie);
	n += reply(out + n, NBD_SIMPLE_REPLY_MAGIC, 0, s[0].cookie);
	write_all(p.fd[1], out, n);
	assert_true(nbdread_wait(p.nr, &r[0], 1000, -1));
	assert_true(r[1].done);
	assert_int_equal(r[0].error, 0);
	assert_int_equal(r[1].error, 0);
	pair_close(&p);
}

/* A WRITE in flight when the connection fails: ENOTCONN, as a READ. */
static void
test_a_write_on_a_failed_connection(void **state)
{
	struct pair p;
	static uint8_t w[4096];
	struct nbdread_req r = { .buf = w,
		.count = sizeof w,
		.off = 0,
		.write = true };

	pair_open(&p);
	assert_int_equal(nbdread_submit(p.nr, &r), 0);
	nbdread_send(p.nr);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_true(nbdread_wait(p.nr, &r, 1000, -1));
	assert_int_equal(r.error, ENOTCONN);
	assert_non_null(nbdread_failed(p.nr));
	assert_int_equal(nbdread_submit(p.nr, &r), -ENOTCONN);
	pair_close(&p);
}

/* An idle connection: works while the server says nothing; fails once
 * the server closes it, or sends anything unasked; not idle (a request
 * queued), it is not looked at. */
static void
test_an_idle_connection_is_checked(void **state)
{
	struct pair p;
	static uint8_t w[4096];
	struct nbdread_req r = { .buf = w,
		.count = sizeof w,
		.off = 0,
		.write = true };

	pair_open(&p);
	assert_true(nbdread_idle_ok(p.nr));
	assert_null(nbdread_failed(p.nr));
	assert_int_equal(nbdread_submit(p.nr, &r), 0);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_true(nbdread_idle_ok(p.nr)); /* queued: its owner finds out */
	assert_true(nbdread_wait(p.nr, &r, 1000, -1));
	assert_int_equal(r.error, ENOTCONN);
	assert_false(nbdread_idle_ok(p.nr));
	pair_close(&p);

	pair_open(&p);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_false(nbdread_idle_ok(p.nr));
	assert_non_null(nbdread_failed(p.nr));
	assert_int_equal(nbdread_submit(p.nr, &r), -ENOTCONN);
	pair_close(&p);

	pair_open(&p);
	assert_int_equal(write(p.fd[1], "x", 1), 1);
	assert_false(nbdread_idle_ok(p.nr));
	assert_non_null(nbdread_failed(p.nr));
	pair_close(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_send_replies_in_any_order),
		cmocka_unit_test(test_writes_go_with_their_payloads),
		cmocka_unit_test(test_a_write_sent_in_pieces),
		cmocka_unit_test(test_a_write_on_a_failed_connection),
		cmocka_unit_test(test_a_reply_split_byte_by_byte),
		cmocka_unit_test(test_a_large_payload),
		cmocka_unit_test(test_an_error_reply_has_no_payload),
		cmocka_unit_test(test_a_bad_magic_fails_the_connection),
		cmocka_unit_test(test_a_reply_to_nothing_fails_the_connection),
		cmocka_unit_test(test_the_end_of_the_connection_fails_reads),
		cmocka_unit_test(test_eshutdown_fails_the_connection),
		cmocka_unit_test(test_submits_after_a_partial_send),
		cmocka_unit_test(test_in_flight_is_bounded),
		cmocka_unit_test(test_an_idle_connection_is_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
