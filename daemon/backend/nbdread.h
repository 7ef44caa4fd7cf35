/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbdread.h - NBD READs of wbd's own, on a connection libnbd negotiated.
 *
 * A cache miss on a remote is one READ.  Through libnbd each reply costs
 * several system calls (its state machine receives a reply's header, its
 * parts and its payload one recv(2) each); at thousands of misses a
 * second on a busy host those calls were most of the read window's CPU.
 * An nbdread connection sends the READs of one round in one send(2) and
 * takes every reply that has arrived in one recv(2).
 *
 * The connection is one libnbd opened and negotiated with simple replies
 * only (no structured replies, no TLS): its transmission phase is then a
 * 28-byte request and a 16-byte reply header followed, for a READ that
 * succeeded, by exactly the bytes asked for.  It carries READs and
 * nothing else; libnbd is not used on it again.
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

/* One READ: its caller's, alive until done. */
struct nbdread_req {
	void *buf;
	uint32_t count;
	uint64_t off;
	int error; /* when done: 0, or a positive errno */
	bool done;
	uint32_t got; /* payload bytes received */
};

/* A connection over FD (a connected stream socket, not owned, left
 * open by nbdread_free); NULL with errno set. */
struct nbdread *nbdread_new(int fd);
void nbdread_free(struct nbdread *nr);

/* Queue REQ's READ: sent by the next nbdread_wait.  0, -EBUSY (as many
 * in flight as allowed), or -ENOTCONN (the connection failed). */
int nbdread_submit(struct nbdread *nr, struct nbdread_req *req);

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
 * reply that breaks the protocol) completes every READ in flight with
 * ENOTCONN and stays failed: nbdread_failed says why.
 */
bool nbdread_wait(struct nbdread *nr, struct nbdread_req *req, int timeout_ms,
    int caller_fd);

/* NULL while the connection works, else why it failed. */
const char *nbdread_failed(const struct nbdread *nr);

/* Fail the connection now (no reply in time): every READ in flight
 * completes with ENOTCONN. */
void nbdread_fail(struct nbdread *nr, const char *why);

#endif /* WBD_NBDREAD_H */
