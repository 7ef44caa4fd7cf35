/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend.h - the backing-device interface: a table of operations, and
 * the one door every caller goes through (backend_read_begin, backend_flush,
 * backend_write_begin/end, ...): the wrappers assert the preconditions
 * (range, read-only, flags) and supply the optional operations a backend
 * lacks.  Nothing outside backend*.c calls b->ops-> itself.
 *
 * A backend is opened once per export and shared by every worker of its
 * writeback device, so each operation must be safe to call concurrently
 * from several threads (positioned I/O only).  Operations return 0 or a
 * negative errno.  They may block: they run on worker threads, never on an
 * I/O thread.
 */
#ifndef WBD_BACKEND_H
#define WBD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct backend;
struct backend_extent;
struct backend_io;
struct backend_state;
struct export_conf;
struct remote_conf;

struct backend_ops {
	const char *name;
	int (*pread)(struct backend *b, void *buf, uint32_t count, uint64_t off);
	/* FLAGS: BACKEND_WRITE_FUA, or 0. */
	int (*pwrite)(struct backend *b, const void *buf, uint32_t count,
	    uint64_t off, unsigned flags);
	/* Optional: gather-write (zero-copy writeback); NULL if absent. */
	int (*pwritev)(struct backend *b, const struct iovec *iov, int iovcnt,
	    uint64_t off, unsigned flags);
	/*
	 * Optional: a write in two steps, so that writeback keeps several
	 * in flight on a device whose latency, not its bandwidth, limits
	 * it (a remote).  pwrite_start submits it (0 and *IO set, or a
	 * negative errno and nothing in flight); BUF must stay valid until
	 * pwrite_end, which waits for it, frees IO and returns its result.
	 * Both on the same thread.
	 */
	int (*pwrite_start)(struct backend *b, const void *buf, uint32_t count,
	    uint64_t off, unsigned flags, struct backend_io **io);
	int (*pwrite_end)(struct backend *b, struct backend_io *io);
	/* Optional: a read in two steps, the same way (several cache misses
	 * in flight on one thread); NULL if absent. */
	int (*pread_start)(struct backend *b, void *buf, uint32_t count,
	    uint64_t off, struct backend_io **io);
	int (*pread_end)(struct backend *b, struct backend_io *io);
	/* With pread_start: wait until IO is done (true) or WAKE_FD is
	 * readable (false; it is not read). */
	bool (
	    *pread_wait)(struct backend *b, struct backend_io *io, int wake_fd);
	int (*flush)(struct backend *b);
	int (*trim)(struct backend *b, uint32_t count, uint64_t off);
	/* FAST: fail with -ENOTSUP rather than writing zeroes slowly. */
	int (*zero)(struct backend *b, uint32_t count, uint64_t off,
	    bool may_trim, bool fast);
	/* Optional: allocation (backend_extents); NULL: all data. */
	int (*extents)(struct backend *b, uint64_t count, uint64_t off,
	    struct backend_extent *ext, unsigned max);
	uint64_t (*size)(struct backend *b);
	void (*close)(struct backend *b);
	/* Optional (NULL for local devices): the connection state. */
	void (*get_state)(struct backend *b, struct backend_state *st);
	/* Optional: new remote settings (reload); any thread. */
	void (*reconfigure)(struct backend *b, const struct remote_conf *rc);
};

/*
 * Write flags.  FUA: the data is durable on the device when the call
 * returns (NBD_CMD_FLAG_FUA to a remote, RWF_DSYNC to a file), without
 * flushing anything else; a device that cannot do that flushes after.
 */
#define BACKEND_WRITE_FUA       (1u << 0)

/* What a backend can do; decides the flags an export advertises. */
#define BACKEND_CAN_TRIM        (1u << 0)
#define BACKEND_CAN_ZERO        (1u << 1)
#define BACKEND_CAN_FAST_ZERO   (1u << 2)
#define BACKEND_READ_ONLY       (1u << 3)
#define BACKEND_ROTATIONAL      (1u << 4)
#define BACKEND_REMOTE          (1u << 5)      /* has get_state */
/* A write's buffer must not change until it completes (O_DIRECT: the
 * device reads it by DMA, and a checksumming or parity layer below would
 * store a mismatch): writeback copies the pages rather than pointing at
 * them. */
#define BACKEND_STABLE_PAGES    (1u << 6)
/* Reads do not go through the host's page cache, so get none of the
 * kernel's read-ahead (O_DIRECT, a remote): wbd's own is worth having. */
#define BACKEND_UNCACHED (1u << 7)
/* A read may go on another connection than the writes before it (an NBD
 * remote with multi-conn): a completed write is certain to be seen by it
 * only once a FLUSH has covered it, so a read (or a block status query)
 * of a range written to the remote since the last flush waits for one:
 * wb_flush_before_read, per range (wb_target.uf). */
#define BACKEND_FLUSH_BEFORE_READ (1u << 9)
/* Its connection can be lost and its server restarted, losing what it
 * acknowledged that no FLUSH covered (an NBD remote with FLUSH): writeback
 * keeps the ranges written since the last flush (wb_target.uf) and, after
 * a loss (backend.losses), writes them again before the next flush. */
#define BACKEND_REDO_AFTER_LOSS (1u << 10)
/* A flush that fails may have lost what was written since the last one
 * that succeeded (a local file or block device: the kernel marks the
 * pages it could not write clean, and may drop them, and reports the
 * error once): writeback keeps the ranges written since the last good
 * flush (wb_target.uf; once backend->unflushed_max are kept, a new one
 * is merged into the nearest, never given up) and, when a flush fails,
 * dirties them again where the cache holds them, to be written again
 * (wb_redo_failed_flush). */
#define BACKEND_REDO_AFTER_FAILED_FLUSH (1u << 11)
/* A write with BACKEND_WRITE_FUA costs what a plain write does: the
 * device takes FUA itself (an NBD remote that offers it), rather than
 * the backend following the write with a flush.  Writeback then makes a
 * FLUSH that has one run to write, and nothing else unflushed, with that
 * run alone, written with FUA: one round trip instead of two. */
#define BACKEND_NATIVE_FUA (1u << 12)

/* A remote backend's connection, for the log and wbctl status. */
struct backend_state {
	bool connected;
	uint64_t since_realtime_ns;     /* when it last connected/disconnected */
	unsigned retries;               /* failed reconnections since then */
	uint64_t reconnects;            /* outages ended since start-up */
	uint64_t failed_attempts; /* reconnections failed since start-up */
	unsigned connections;           /* open connections (multi-conn: >1) */
	bool multi_conn;                /* the remote offers multi-conn */
	unsigned conn_depth;            /* remote.conn_depth */
	bool read_connection;           /* misses read on one of their own */
	uint64_t read_connection_failures; /* it failed or could not open */
	bool write_connection;             /* writeback's writes on their own */
	unsigned write_connections;        /* ... on so many open now */
	uint64_t write_connection_failures; /* it failed or could not open */
	char last_error[256];           /* "" if none */
	/* Every connection open or opening, libnbd's and wbd's own; their
	 * bound (remote.max_connections); and connections it held back. */
	unsigned all_connections;
	unsigned max_connections;
	uint64_t connections_held_back;
	/* remote.connect_timeout_ms, reconnect_max_ms, io_timeout_ms. */
	unsigned connect_timeout_ms, reconnect_max_ms, io_timeout_ms;
};

struct backend {
	const struct backend_ops *ops;
	unsigned caps;
	/* Identity of the writeback device it belongs to ("MAJ:MIN"). */
	dev_t dev;
	char dev_name[32];
	char *description;      /* what it is, for logs ("file /x/y.img") */
	const char *io_engine;  /* backend_io_engine_used */
	/* With BACKEND_FLUSH_BEFORE_READ (atomics, set by the backend from
	 * remote.unflushed_ranges and remote.commit_interval_ms, changed by
	 * a reload): see wb_target.uf and wb_commit.  With
	 * BACKEND_REDO_AFTER_FAILED_FLUSH, unflushed_max is the backend's
	 * own (BACKEND_FILE_UNSYNCED_RANGES). */
	_Atomic unsigned unflushed_max;
	_Atomic unsigned commit_ms;
	/* With BACKEND_REDO_AFTER_LOSS (atomic, only rising): times its
	 * connection was lost, each outage counted once. */
	_Atomic uint64_t losses;
	/* Of them (counted first), losses of a connection that had served:
	 * one that had answered a request, or had been open longer than a
	 * request may take and a second more (backend-nbd.c, bn_settled).
	 * A remote, or a NAT or firewall between, closing a connection it
	 * had kept, idle or not: a write that fails with one is written
	 * again on a new connection, not a writeback error.  A connection
	 * that fails straight after it was opened (a remote that stalls or
	 * drops every connection) is not counted here: its writes fail. */
	_Atomic uint64_t losses_served;
	/* A remote's write may also fail with -EAGAIN: a reconnection is
	 * due, after a loss counted just before it began, and the write
	 * found no connection yet; not the remote's answer either. */
	/* A remote's (atomics, from remote.max_writeback_inflight_bytes and
	 * remote.write_behind, changed by a reload); 0 and false for a local
	 * one: the bound of writeback's window, in bytes (linkest.h), and
	 * whether an idle device's dirty data is written back at once. */
	_Atomic uint64_t max_inflight_bytes;
	_Atomic bool write_behind;
	/* A remote's (atomic, remote.min_writeback_inflight, changed by a
	 * reload); 0 for a local one: the least of writeback's window, in
	 * writes (writeback.c, wb_dev_budget). */
	_Atomic unsigned min_inflight;
	/* A remote's (atomic, remote.write_behind_defer_ms, changed by a
	 * reload): how long after a FLUSH write-behind leaves an export's
	 * pages to the next (writeback.c, wb_behind_defers); 0: never. */
	_Atomic unsigned behind_defer_ms;
	/* A remote's (atomic, remote.fua_max_runs, changed by a reload); 0
	 * for a local one: how many runs writeback may write with FUA
	 * between two FLUSHes of an export's clients, so that the FLUSH
	 * needs no flush of the remote (writeback.c, wb_fua_ok). */
	_Atomic unsigned fua_max_runs;
	/* A remote's (atomic, remote.max_readahead_bytes, changed by a
	 * reload); 0 for a local one: the most read-ahead grows to with the
	 * link, and the bound in bytes of the read window (fill.c). */
	_Atomic uint64_t max_readahead_bytes;
};

/*
 * How a local file's writeback writes go (writeback.io_engine), chosen
 * once before the backends are opened:
 *   PWRITEV   the cache pages themselves, gathered by pwritev (zero-copy);
 *   PWRITE    the pages copied into one buffer, one pwrite per run;
 *   IO_URING  copied likewise, the runs of a writeback window submitted
 *             together through a per-thread io_uring; where the kernel
 *             refuses io_uring, PWRITE, with a log line;
 *   AUTO      PWRITEV (the measurements: docs/design-writeback.md).
 */
enum backend_io_engine {
	BACKEND_IO_AUTO,
	BACKEND_IO_PWRITEV,
	BACKEND_IO_PWRITE,
	BACKEND_IO_URING,
};
void backend_set_io_engine(enum backend_io_engine e);
/* "auto", "pwritev", "pwrite", "io_uring"; -1 for anything else. */
int backend_io_engine_parse(const char *s);
const char *backend_io_engine_name(enum backend_io_engine e);
/* The engine a backend's writes use ("pwritev", "pwrite", "io_uring"),
 * or "" for one that has no choice (a remote). */
const char *backend_io_engine_used(struct backend *b);

/*
 * Open a local file or block device.  A regular file that does not exist
 * is created sparse with SIZE_BYTES; an existing one smaller than
 * SIZE_BYTES is extended.  SIZE_BYTES 0 means "use the file's size".
 * Returns NULL with errno set, after logging why.
 */
struct backend *backend_file_open(const char *path, uint64_t size_bytes,
    bool readonly, bool direct);

/* Is BACKING an NBD URI, for backend_nbd_open (backing.h chooses)? */
bool backend_is_uri(const char *backing);

/*
 * Open a remote NBD export through libnbd.  Each remote server (host and
 * port, or socket path) is one writeback device, 43:N in order of first
 * appearance.  The size, read-only state and commands come from the
 * remote; SIZE_BYTES, if not 0, must not exceed its size.  Returns NULL
 * with errno set, after logging why.
 */
struct backend *backend_nbd_open(const char *uri, uint64_t size_bytes,
    bool readonly, const struct remote_conf *rc);
/*
 * The same for a remote that does not answer yet, served at SIZE_BYTES
 * (an export whose write log holds data to serve: docs/journal.md): the
 * first connection is made when writeback or a read needs it, and checks
 * the remote as a reconnection does (large enough, FLUSH, writable).
 * Until wbd restarts it is used with one connection, FUA as a write and a
 * FLUSH, and no TRIM.  WHY: the failed attempt, for wbctl status.
 */
struct backend *backend_nbd_open_unconnected(const char *uri,
    uint64_t size_bytes, const char *why, const struct remote_conf *rc);

static inline void
backend_close(struct backend *b)
{
	if (b)
		b->ops->close(b);
}

/* --- the door ------------------------------------------------------------ */

uint64_t backend_size(struct backend *b);
/* Not on a read-only backend. */
int backend_flush(struct backend *b);
int backend_trim(struct backend *b, uint32_t count, uint64_t off);
int backend_zero(struct backend *b, uint32_t count, uint64_t off,
    bool may_trim, bool fast);
/*
 * Allocation, for block status: [OFF, OFF+COUNT) described from OFF as up
 * to MAX extents (MAX >= 1) in offset order, none empty, none past
 * OFF+COUNT; they may cover less than COUNT.  Returns how many (>= 1), or
 * a negative errno.  A backend that cannot tell reports all data: one
 * extent, flags 0.
 */
#define BACKEND_EXTENT_HOLE (1u << 0) /* not allocated */
#define BACKEND_EXTENT_ZERO (1u << 1) /* reads as zeroes */
struct backend_extent {
	uint64_t length;
	uint32_t flags;
};
int backend_extents(struct backend *b, uint64_t count, uint64_t off,
    struct backend_extent *ext, unsigned max);
/* A remote's connection state; false (and *ST zeroed) for a local one. */
bool backend_get_state(struct backend *b, struct backend_state *st);
/* New remote settings (reload); nothing for a local backend. */
void backend_reconfigure(struct backend *b, const struct remote_conf *rc);

/*
 * Writes as writeback issues them: begun, then ended, with up to
 * backend_max_in_flight() begun and not yet ended on one thread.  A
 * backend that takes writes in two steps (a remote) keeps them in flight
 * in between; for any other the whole write happens in begin.  The
 * buffers are the cache's pages (IOV, COUNT bytes in all): written in
 * place where the backend can gather (pwritev) and does not need stable
 * pages, else gathered into a page-aligned copy, which BACKEND_BUF_PRIVATE
 * (the caller's own snapshot, one iovec) makes unnecessary.  The iovecs
 * need not outlive begin; the pages must stay until end.
 */
#define BACKEND_BUF_PRIVATE     (1u << 8)

struct backend_write {
	struct backend *b;
	void *bounce;                   /* the gathered copy, if any */
	size_t bounce_cap;              /* its size */
	struct backend_io *io;          /* in flight, or NULL */
	int r;                          /* the result, if not in flight */
};

unsigned backend_max_in_flight(struct backend *b);

/*
 * Reads the same way: begun, then ended, with up to
 * backend_max_reads_in_flight() in flight on one thread (1 for a backend
 * without two-step reads: the whole read happens in begin).  BUF must stay
 * until end.
 */
struct backend_read {
	struct backend *b;
	struct backend_io *io; /* in flight, or NULL */
	int r;                 /* the result, if not in flight */
};

unsigned backend_max_reads_in_flight(struct backend *b);
void backend_read_begin(struct backend *b, struct backend_read *rd, void *buf,
    uint32_t count, uint64_t off);
/* Wait until RD's read is done (true), or WAKE_FD is readable first
 * (false; the caller reads it). */
bool backend_read_wait(struct backend_read *rd, int wake_fd);
/* Wait for RD's read to end; 0 or a negative errno. */
int backend_read_end(struct backend_read *rd);
void backend_write_begin(struct backend *b, struct backend_write *w,
    const struct iovec *iov, int iovcnt, uint32_t count, uint64_t off,
    unsigned flags);
/* Wait for W's write to end; 0 or a negative errno. */
int backend_write_end(struct backend_write *w);

#endif
