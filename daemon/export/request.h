/* SPDX-License-Identifier: GPL-2.0-or-later */
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
#include "fill.h"
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
	size_t data_cap;                /* its size, for bufstash_put */
	/* Or a WRITE's payload received straight into cache pages (one copy
	 * per write; cache.h), committed by the export. */
	struct cache_wbuf *wbuf;
	int err;                        /* result: 0 or a positive errno */
	uint32_t nbd_err;               /* set instead when validation failed */
	uint64_t seq;                   /* a write's sequence (cache) */
	uint64_t jgen;                  /* the write log's commit that is to
	                                   cover it (export-journal.h) */
	bool writethrough;              /* reply only once durable */
	/* A WRITE already in the cache, queued only to be made durable in
	 * the write log (mode on-write, export-journal.h). */
	bool logged_write;
	/*
	 * What the export reads from and hands back to the connection:
	 * conn.c fills them in before export_submit and takes them back
	 * when it answers, so the export never calls into the connection.
	 */
	uint64_t err_seq;               /* in: export errors the connection
	                                   has seen; out: the new count */
	bool err_seq_checked;           /* out: err_seq is to be kept */
	bool flushed;                   /* in/out: the client sent a FLUSH */
	unsigned meta;                  /* in: the metadata contexts selected */
	struct fill_ra *ra;             /* in: the client's reading (fill.h) */
	uint32_t ra_bytes;              /* counted in ra->inflight_bytes */
	/* in: the connection's "socket closed" flag (atomic): once it is
	 * set no reply reaches the client, and a READ, BLOCK_STATUS or
	 * CACHE that has not begun is skipped (ECANCELED), so that a
	 * client that leaves with requests queued frees its share of the
	 * budget and the workers at once. */
	const _Atomic bool *gone;
	/* out: a reply the export encoded whole (BLOCK_STATUS), freed with
	 * the request */
	void *reply;
	size_t reply_bytes;
	/* Bytes of the connections' budget it holds until released: its
	 * data (READ, WRITE) or the largest reply it can get (BLOCK_STATUS;
	 * conn.c). */
	uint32_t budget;
	int pause_ms;                   /* out, EXPORT_PACE: hold the reply
	                                   this long (-1: until room) */
	/* For the statistics (stats.h), kept by the connection. */
	uint64_t start_ns;              /* submitted to the export */
	uint64_t paced_ns;              /* its reply held from then */
	bool queued;                    /* carried out on a worker */
	bool prefetching;               /* a CACHE counted by
	                                   export_prefetch_begin */
	ev_timer throttle;              /* a paced write's reply delay */
	union {
		struct fill_read fill;      /* a read miss, on a worker */
		struct wb_flush_wait flush; /* a FLUSH, queued for a pass */
	};
	struct out out;
	uint8_t hdr[NBD_STRUCTURED_REPLY_SIZE + 8];
};

#endif
