/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbdread.h - NBD READs and WRITEs of wbd's own, on a connection libnbd
 * negotiated.
 *
 * A cache miss on a remote is one READ.  Through libnbd each reply costs
 * several system calls (its state machine receives a reply's header, its
 * parts and its payload one recv(2) each); at thousands of misses a
 * second on a busy host those calls were most of the read window's CPU.
 * An nbdread connection sends the READs of one round in one send(2) and
 * takes every reply that has arrived in one recv(2).  Writeback's WRITEs
 * cost libnbd two send(2)s each and a recv(2) and a poll(2) for each
 * reply; here the WRITEs of one round, headers and payloads, go in one
 * sendmsg(2), and their replies (headers only) come as READs' do.
 *
 * The connection is one libnbd opened and negotiated with simple replies
 * only (no structured replies, no TLS): its transmission phase is then a
 * 28-byte request (a WRITE's followed by its payload) and a 16-byte
 * reply header followed, for a READ that succeeded, by exactly the bytes
 * asked for.  It carries READs or WRITEs (a connection for each, in
 * backend-nbd.c, though nothing here needs that) and nothing else:
 * libnbd is not used on it again.
 *
 * One thread at a time: every call on one connection comes from the
 * thread that keeps its reads in flight (backend-nbd.c sees to it).
 */
#ifndef WBD_NBDREAD_H
#define WBD_NBDREAD_H

#include <stdbool.h>
#include <stdint.h>

/* At most this many READs in flight on one connection. */
#define NBDREAD_MAX_INFLIGHT 128

struct nbdread;

/* One READ or WRITE: its caller's, alive until done (a WRITE's BUF too,
 * which is sent from as it is). */
struct nbdread_req {
	void *buf;
	uint32_t count;
	uint64_t off;
	bool write;     /* a WRITE of BUF, else a READ into it */
	uint16_t flags; /* a WRITE's command flags (NBD_CMD_FLAG_FUA) */
	int error;      /* when done: 0, or a positive errno */
	bool done;
	uint32_t got; /* payload bytes received */
};

/* A connection over FD (a connected stream socket, not owned, left
 * open by nbdread_free); NULL with errno set. */
struct nbdread *nbdread_new(int fd);
void nbdread_free(struct nbdread *nr);

/* Queue REQ: sent by the next nbdread_wait or nbdread_send.  0, -EBUSY
 * (as many in flight as allowed), or -ENOTCONN (the connection failed). */
int nbdread_submit(struct nbdread *nr, struct nbdread_req *req);

/* The bytes queued and not sent yet (headers and payloads). */
size_t nbdread_unsent(const struct nbdread *nr);

/* Send what is queued, as far as the socket takes it now: before its
 * owner waits for something else (a read through libnbd). */
void nbdread_send(struct nbdread *nr);

/* Tests: each sending round sends at most BYTES (0: no limit) and stops,
 * as a full socket would make it. */
void nbdread_test_send_limit(struct nbdread *nr, size_t bytes);

/*
 * Send what is queued and take replies until REQ is done (true), or
 * TIMEOUT_MS (-1: none) passes or CALLER_FD (-1: none) is readable
 * (false).  A connection that fails (closed, a system call's error, a
 * reply that breaks the protocol) completes every request in flight with
 * ENOTCONN and stays failed: nbdread_failed says why.
 */
bool nbdread_wait(struct nbdread *nr, struct nbdread_req *req, int timeout_ms,
    int caller_fd);

/* The socket it speaks on, as given to nbdread_new: any thread may poll
 * it (backend-nbd.c looks for the remote's end of it after a FLUSH). */
int nbdread_fd(const struct nbdread *nr);

/* NULL while the connection works, else why it failed. */
const char *nbdread_failed(const struct nbdread *nr);

/* Fail the connection now (no reply in time): every READ in flight
 * completes with ENOTCONN. */
void nbdread_fail(struct nbdread *nr, const char *why);

/* An idle connection (nothing in flight or queued): does it still work?
 * A server sends nothing unasked, so anything to read on it (its end of
 * the connection, or bytes) fails it, as an error on the socket does.
 * False if it failed (now or before); true if it works or is not idle
 * (its owner's waits find out). */
bool nbdread_idle_ok(struct nbdread *nr);

#endif /* WBD_NBDREAD_H */
