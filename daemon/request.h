/*
 * request.h - one NBD request in flight, from its header on the socket to
 * its reply on the output queue.  Owned by its connection's I/O thread,
 * except while its job runs on a worker (then the worker alone touches it).
 */
#ifndef WBD_REQUEST_H
#define WBD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <ev.h>

#include "clock.h"
#include "job.h"
#include "proto.h"

struct conn;
struct export;

/* A piece of output queued on a connection. */
struct out {
	struct out *next;
	struct iovec iov[2];
	unsigned niov;
	size_t bytes;                   /* total of iov lengths */
	void (*release)(struct out *o); /* once written (or dropped) */
};

struct request {
	struct job job;
	struct conn *conn;
	struct export *export;
	struct nbd_request nbd;
	void *data;                     /* WRITE payload or READ buffer */
	int err;                        /* result: 0 or a positive errno */
	uint32_t nbd_err;               /* set instead when validation failed */
	uint64_t seq;                   /* a write's sequence (cache) */
	uint64_t err_seq;               /* export error sequence seen/now */
	bool writethrough;              /* reply only once durable */
	bool err_seq_checked;           /* a FLUSH-like check saw err_seq */
	ev_timer throttle;              /* a paced write's reply delay */
	struct out out;
	uint8_t hdr[NBD_STRUCTURED_REPLY_SIZE + 8];
};

#endif
