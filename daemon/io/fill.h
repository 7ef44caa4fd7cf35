/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fill.h - filling the cache from the backing device: read misses, page
 * fills for partial writes, NBD_CMD_CACHE and read-ahead; and the read
 * window, which keeps many reads in flight on one worker of a device
 * that takes reads in two steps (a remote), as writeback's write window
 * keeps writes.
 *
 * It works on a struct wb_target (an export's pages and backing device),
 * as writeback does, and knows nothing else of the export.  Reads run on
 * the device's flush-MAJ:MIN workers: one at a time each on a local
 * device (several workers), or many in flight on the one worker running
 * the device's window (a remote).
 *
 * The window's queue is under wb_dev.read_lock, a leaf: nothing else is
 * taken while it is held.
 */
#ifndef WBD_FILL_H
#define WBD_FILL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "cache.h" /* struct cache_fill_mark */

struct wb_target;

/* One read through the cache. */
struct fill_read {
	/* Set by the caller. */
	struct wb_target *t;
	void *buf; /* a copy goes here too, or NULL */
	uint64_t off;
	uint32_t len;
	bool ahead; /* read ahead: pages marked so */
	/* Called on the worker once read (R->err set); may free R. */
	void (*done)(struct fill_read *r);
	int err; /* out: 0 or a negative errno */

	/* Private. */
	struct fill_read *next; /* on the device's window queue */
	uint8_t *need, *tmp;
	size_t tmp_cap; /* tmp's size (bufstash.h) */
	bool direct;    /* tmp is inside buf */
	uint64_t first;
	struct cache_fill_mark mark; /* taken after the placeholders */
	uint32_t npages, lo, hi;     /* lo == npages: nothing to read */
	struct backend_read br;
	uint32_t rd_len;   /* its bytes */
	uint64_t rd_start; /* when it began (a remote's), or 0 */
};

/* Read R on this worker (it blocks); R->done is not called. */
int fill_read_now(struct fill_read *r);

/*
 * Does T's device keep reads in flight (a remote)?  Then fill_queue is
 * how its reads go; else each read is a job of its own.
 */
bool fill_window_wanted(struct wb_target *t);

/* Queue R on its device's read window (any thread); R->done runs on the
 * window's worker. */
void fill_queue(struct fill_read *r);

/*
 * Read-ahead.  A client's reading, kept by its connection and touched on
 * its I/O thread only: once READs follow each other (each starts where
 * the last ended) a third time, the range after them is read into the
 * cache in the background, a window at a time; the window starts at four
 * times the read (at least 128 KiB) and doubles up to
 * cache.readahead_bytes, and the next is read once the client is within
 * half a window of the end.  Any other read ends the streak.  Pages read
 * ahead count a read-ahead hit when a read finds them (cache_stats).
 */
struct fill_ra {
	uint64_t next;   /* where a sequential read starts */
	uint64_t ahead;  /* read ahead up to here */
	uint32_t window; /* the next read-ahead's size */
	unsigned streak; /* sequential reads in a row */
	/* The bytes of the client's READs in flight, this one included
	 * (kept by the connection): a client that keeps more than a window
	 * of reads in flight reads ahead by itself. */
	uint64_t inflight_bytes;
};

/* A READ of [OFF, OFF+LEN) of T by the client whose reading is RA (its
 * I/O thread): read ahead if it is due. */
void fill_readahead(struct wb_target *t, struct fill_ra *ra, uint64_t off,
    uint32_t len);

/* Bring page INDEX of T in from the backing device (a partial write). */
int fill_page(struct wb_target *t, uint64_t index);

/*
 * NBD_CMD_CACHE: read [OFF, OFF+LEN) of T into the cache, marked read
 * ahead, piece by piece, and stop (it is advice) before it would take more
 * than a quarter of the cache, or more than half of what is not dirty.
 */
int fill_prefetch(struct wb_target *t, uint64_t off, uint64_t len);

#endif
