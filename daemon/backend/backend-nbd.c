/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend-nbd.c - backing device: an export on a remote NBD server, through
 * libnbd.
 *
 * Identity.  Each remote server (host and port, or Unix socket path) is one
 * writeback device, MAJ:MIN = 43:N (NBD's block major, as the kernel names
 * /dev/nbdN), N counted from 0 in order of first appearance in this
 * process; two exports on one server share the device and its
 * flush-43:N pool.
 *
 * Threads.  The operations run on the device's workers, several at once.
 * A remote that advertises multi-conn gets up to BN_MAX_CONNS connections,
 * opened as concurrent callers need them; any other remote gets one.
 * Either way several commands may be in flight on one connection: a
 * caller submits its command with libnbd's aio API, then either drives
 * the connection (polls its socket, with no lock held, and hands events
 * to libnbd) or, if another caller is driving it, waits on the condition
 * variable until its own command has completed.  A submitter wakes the
 * driver through the connection's eventfd, so a command queued while the
 * driver sleeps on a read is sent at once.
 *
 * The read connection.  On a multi-conn remote without TLS the read
 * window's misses go on one more connection, spoken by nbdread.c (opened
 * by libnbd with simple replies, on a thread of its own), used by one
 * thread at a time; what it cannot carry, or what it failed, goes through
 * libnbd.  See docs/remote.md.
 *
 * Connection loss.  A command that fails because the connection died
 * (libnbd's handle is dead, or the error is ENOTCONN, EPIPE, ECONNRESET,
 * ...) or that gets no reply within io_timeout_ms marks the backend
 * disconnected: logged once, with the reason.  Every connection is then
 * retired (closed once its commands are done) and the next caller
 * reconnects, at once the first time, then no sooner than a back-off of
 * 100 ms doubling up to reconnect_max_ms.  Writes, flushes, trims and
 * zeroes fail at once while disconnected (ENOTCONN): writeback keeps the
 * pages dirty and retries them later.  Reads wait for a reconnection up to
 * io_timeout_ms from when they started, then fail with EIO.
 *
 * Locking.  bn.lock protects the connection table, each bn_conn's fields
 * and the connection state; it is never held across a system call that
 * may block, except shutdown(2) of a stalled socket.  Lock order:
 * bn.lock, then libnbd's handle lock (a few aio_get_* calls made under
 * bn.lock); completion callbacks run under the handle lock and take no
 * lock.
 */
#include <assert.h>
#include <errno.h>
#include <libnbd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "atomics.h"
#include "backend.h"
#include "config.h"
#include "lock.h"
#include "log.h"
#include "nbd-proto.h"
#include "nbdread.h"
#include "ratelimit.h"

#define BN_MAJOR                43      /* NBD's block major */
#define BN_MAX_SERVERS          1024
#define BN_MAX_CONNS            8       /* to a remote with multi-conn */
/* Commands in flight on every connection before another is opened to a
 * multi-conn remote, unless remote.conn_depth says otherwise
 * (bn.conn_depth): as many as a server serves of one connection's at
 * once (nbdkit's default --threads, qemu-nbd's requests per client).
 * Each connection costs the remote workers and buffers of its own
 * (nbdkit: --threads of them, each with a buffer the size of the largest
 * request it served, zeroed as it grows), and copies spread over them.
 * Measured: 2 GiB written in 1 MiB requests through wbd to nbdkit (64
 * threads, file plugin) behind the LAN profile's delay and rate
 * (bench/net), two runs each: the remote's CPU 3.6-3.9 s with a
 * connection added at 1 in flight (8 connections), 2.2-3.1 s at 4,
 * 1.3-1.5 s at 16 (one connection for a window of 16), 1.0 s for fio
 * writing to it directly; wbd's write 2.1-2.7 s at 16, 3.3-4.1 at 1.
 * A remote that serves one command of a connection at a time (nbdkit
 * --threads 1, a plugin that serializes requests) wants 1. */
static_assert(REMOTE_DEFAULT_CONN_DEPTH == 16,
    "remote.conn_depth's default is the one measured above");
#define BN_BACKOFF_MIN_MS       100
#define BN_GROW_RETRY_MS        1000    /* after failing to add a connection */
#define BN_POLL_SLICE_MS        1000
#define BN_WAIT_SLICE_MS        100
#define BN_CALLER_SLICE_MS 5 /* a waiter with a CALLER_FD */
#define BN_MAX_REQUEST_BYTES    (32u << 20)
/* Reads in flight on the read connection before more go over libnbd's
 * connections, spread (a server serves a connection's requests a few at
 * a time: nbdkit 16 threads, qemu-nbd 16 requests): a read window sized
 * to a long link is served on several connections at once.  A queue of
 * up to this many misses (fio's 32) keeps the read connection's cheaper
 * path alone. */
#define BN_RD_SHARE 32
/*
 * Write connections of wbd's own, at most: one for each thread writing
 * back at once (write-behind, and FLUSH passes that overlap it), so that
 * each thread's window leaves in one sendmsg and its replies come in a
 * few reads.  With one, the thread that had it kept it, and a FLUSH
 * pass's writes went through libnbd, a send and a poll each: wbd's CPU
 * per write was most of it in wake-ups (LAN profile, 4 KiB writes with a
 * FLUSH every 64).  The first opens with the device, the others as
 * writers find none idle.
 */
#define BN_WR_CONNS 4
/* remote.max_connections bounds them all, one export's. */
static_assert(REMOTE_MAX_CONNECTIONS == BN_MAX_CONNS + 1 + BN_WR_CONNS,
    "remote.max_connections's bound is every connection an export opens");
/* The line saying remote.max_connections held a connection back, at
 * most this often. */
#define BN_CONN_LIMIT_LOG_NS (60 * 1000000000ull)
#define BN_DEFAULT_PORT         "10809"

#define NS_PER_MS               1000000ull

/* The remote servers seen so far, in order: the index is the minor. */
static pthread_mutex_t bn_servers_lock = PTHREAD_MUTEX_INITIALIZER;
static char *bn_servers[BN_MAX_SERVERS];
static unsigned bn_n_servers;

/* One command in flight, on its caller's stack. */
struct bn_cmd {
	int error;              /* errno from the remote or libnbd, 0 success */
	_Atomic int done;       /* set last by the completion callback */
};

/* One connection (libnbd handle).  Fields under bn.lock. */
struct bn_conn {
	struct nbd_handle *h;   /* NULL: free slot */
	int wake_fd;            /* eventfd: a command was queued */
	unsigned inflight;      /* callers using h; h is closed only at 0 */
	bool polling;           /* a caller is driving h */
	bool retired;           /* no new commands; closed once idle */
	bool shut;              /* its socket was shut down (timeout) */
	_Atomic bool served;    /* a command was answered on it */
	uint64_t opened_ns;     /* monotonic */
};

/*
 * A connection of wbd's own (nbdread.h), on a multi-conn remote without
 * TLS: the read connection carries the read window's misses, the write
 * connection writeback's writes.  Fields under bn.lock; NR itself is used
 * by OWNER alone, while INFLIGHT > 0 (and by whoever takes it at 0).
 */
struct bn_own {
	struct backend_nbd *bn;
	const char *what; /* "read", "write" */
	struct nbd_handle *h;
	struct nbdread *nr;
	pthread_t owner;
	unsigned inflight;
	bool off;            /* TLS: libnbd only */
	bool connecting;     /* OPENER is opening it */
	bool opener_started; /* OPENER to be joined */
	pthread_t opener;
	bool write;              /* a write connection */
	bool announced;          /* logged once */
	bool loss_counted;       /* a write connection's failure, in b.losses */
	bool served;             /* a request was answered on it */
	bool stale;              /* a loss retired it: closed once idle */
	uint64_t opened_ns;      /* monotonic */
	unsigned backoff_ms;     /* after a failure; 0 once a request worked */
	uint64_t failures;       /* since start-up */
	uint64_t retry_after_ns; /* monotonic */
};

struct backend_nbd {
	struct backend b;
	char *uri;
	uint64_t size_bytes;            /* as served: at most the remote's */
	bool readonly;
	bool can_flush, can_fua, can_trim, can_zero, can_fast_zero;
	bool can_extents; /* serves base:allocation */
	bool multi_conn;
	/*
	 * Opened before its first connection (backend_nbd_open_unconnected):
	 * that connection checks what the other calls check at every
	 * reconnection, and lowers max_request_bytes to the remote's.
	 * Under bn.lock.
	 */
	bool unconnected;
	/* Atomic: lowered by the first connection. */
	_Atomic uint32_t max_request_bytes;
	/* Atomic: a reload changes them (bn_reconfigure). */
	_Atomic uint64_t io_timeout_ns;
	_Atomic unsigned connect_timeout_ms;
	_Atomic unsigned reconnect_max_ms;
	_Atomic bool read_connection;  /* remote.read_connection */
	_Atomic bool write_connection; /* remote.write_connection */
	_Atomic unsigned conn_depth;   /* remote.conn_depth */
	/* remote.max_connections; connections it held back (under lock),
	 * and the line that says so. */
	_Atomic unsigned max_connections;
	uint64_t conn_limit_hits;
	struct ratelimit conn_limit_rl;

	pthread_mutex_t lock;
	pthread_cond_t cond;            /* connection up, poll round ended */
	struct bn_conn conns[BN_MAX_CONNS];
	unsigned max_conns;             /* BN_MAX_CONNS or 1 */
	bool connecting;                /* a caller is connecting */
	bool connected;
	uint64_t since_realtime_ns;     /* of the last state change */
	uint64_t since_mono_ns;
	unsigned retries;               /* failed reconnections */
	uint64_t reconnects;            /* outages ended, since start-up */
	uint64_t failed_attempts;       /* reconnections failed, since then */
	unsigned backoff_ms;
	uint64_t next_try_ns;           /* monotonic: earliest reconnection */
	uint64_t grow_after_ns;         /* monotonic: next extra connection */
	char last_error[256];
	/* The read connection (the read window's misses) and the write
	 * connections (writeback's writes), one per thread writing at once
	 * (BN_WR_CONNS): see struct bn_own. */
	struct bn_own rd, wr[BN_WR_CONNS];
};

#define BN(b) ((struct backend_nbd *)(b))

/* The largest request the remote takes. */
static uint32_t
bn_max_request(const struct backend_nbd *bn)
{
	return load_relaxed(&bn->max_request_bytes);
}

enum bn_op {
	BN_PREAD,
	BN_PWRITE,
	BN_FLUSH,
	BN_TRIM,
	BN_ZERO,
	BN_EXTENTS
};

/* What BN_EXTENTS collects: base:allocation from OFF, up to END. */
struct bn_extents {
	uint64_t off, end;
	struct backend_extent *ext;
	unsigned max, n;
};

static uint64_t
bn_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
bn_now(void)
{
	return bn_clock_ns(CLOCK_MONOTONIC);
}

static void
bn_cond_wait_until(struct backend_nbd *bn, uint64_t until_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(until_ns / 1000000000u),
		.tv_nsec = (long)(until_ns % 1000000000u),
	};
	pthread_cond_timedwait(&bn->cond, &bn->lock, &ts);
}

/* --- identity --------------------------------------------------------- */

/* The server part of URI: "unix:PATH" or "tcp:HOST:PORT"; NULL if none. */
static char *
bn_server_key(const char *uri)
{
	const char *p = strstr(uri, "://");
	char *key = NULL;

	if (!p)
		return NULL;
	p += 3;
	if (strncmp(uri, "nbd+unix:", 9) == 0 ||
	    strncmp(uri, "nbds+unix:", 10) == 0) {
		const char *q = strchr(p, '?');
		while (q) {
			q++;
			if (strncmp(q, "socket=", 7) == 0) {
				size_t n = strcspn(q + 7, "&#");
				if (asprintf(&key, "unix:%.*s", (int)n, q + 7) < 0)
					key = NULL;
				return key;
			}
			q = strchr(q, '&');
		}
		return NULL;
	}
	size_t n = strcspn(p, "/?#");
	const char *at = memchr(p, '@', n);
	if (at) {               /* user@host: the user is not the server */
		n -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	const char *close_br = p[0] == '[' ? memchr(p, ']', n) : NULL;
	const char *colon = close_br ? (close_br + 1 < p + n &&
	    close_br[1] == ':' ? close_br + 1 : NULL) : memchr(p, ':', n);
	if (asprintf(&key, "tcp:%.*s%s", (int)n, p,
	    colon ? "" : ":" BN_DEFAULT_PORT) < 0)
		key = NULL;
	return key;
}

/* The minor of the server of URI, numbering new servers; -1 if none. */
static int
bn_server_minor(const char *uri)
{
	char *key = bn_server_key(uri);
	int minor = -1;

	if (!key) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&bn_servers_lock);
	for (unsigned i = 0; i < bn_n_servers; i++)
		if (strcmp(bn_servers[i], key) == 0)
			minor = (int)i;
	if (minor < 0 && bn_n_servers < BN_MAX_SERVERS) {
		minor = (int)bn_n_servers;
		bn_servers[bn_n_servers++] = key;
		key = NULL;
	}
	pthread_mutex_unlock(&bn_servers_lock);
	free(key);
	if (minor < 0) {
		log_warnx("%s: %u remote servers named since wbd started, the "
			  "most it numbers (a server's device, %u:N, is kept "
			  "until wbd restarts, whether an export still uses "
			  "it or not): restart wbd to serve from another",
		    uri, BN_MAX_SERVERS, BN_MAJOR);
		errno = ENFILE;
	}
	return minor;
}

/* --- connecting ------------------------------------------------------- */

static const char *
bn_errmsg(void)
{
	const char *m = nbd_get_error();
	return m ? m : "unknown libnbd error";
}

/*
 * The send buffer asked for on a connection to a remote on a Unix
 * socket (the kernel caps it at net.core.wmem_max).  A Unix socket's is
 * about 208 KiB by default, and a 1 MiB write went out in five pieces,
 * each when the worker next came to the connection: while it filled its
 * window it came once per run, and the remote got a run every 10-25 ms,
 * one at a time (bench/net, WAN profile, 1M writes: the first 8 MiB
 * written back 60 ms later than fio wrote them straight to the remote).
 * TCP sizes its own buffer (autotuning), which a setting would stop.
 */
#define BN_UNIX_SNDBUF (4 << 20)

static void
bn_unix_sndbuf(int fd)
{
	int domain = 0, size = BN_UNIX_SNDBUF;
	socklen_t len = sizeof domain;

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
	    domain == AF_UNIX)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

/* Connect within connect_timeout_ms; NULL with ERR filled.  SIMPLE: for
 * the read connection, simple replies only. */
static struct nbd_handle *
bn_connect(struct backend_nbd *bn, bool simple, char *err, size_t errlen)
{
	struct nbd_handle *h = nbd_create();
	unsigned timeout_ms = load_relaxed(&bn->connect_timeout_ms);
	uint64_t deadline = bn_now() + timeout_ms * NS_PER_MS;

	if (!h) {
		snprintf(err, errlen, "%s", bn_errmsg());
		return NULL;
	}
	/* The configuration is trusted: allow tls-psk-file= and the like. */
	nbd_set_uri_allow_local_file(h, true);
	/*
	 * libnbd zeroes every read buffer before the read, in case the
	 * caller uses one after a failed read: wbd never does (a failed read
	 * installs nothing and replies with the error), and the zeroing was
	 * a quarter of wbd's CPU on cold 1 MiB reads.  A read the server
	 * did not cover completely fails in libnbd.
	 */
	nbd_set_pread_initialize(h, false);
	/* For block status (bn_extents); a server without it is all data. */
	if (simple ?
		nbd_set_request_structured_replies(h, false) == -1 :
		nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1)
		goto fail;
	if (nbd_aio_connect_uri(h, bn->uri) == -1)
		goto fail;
	while (nbd_aio_is_connecting(h) == 1) {
		uint64_t now = bn_now();
		if (now >= deadline) {
			snprintf(err, errlen, "no answer within %u ms",
			    timeout_ms);
			nbd_close(h);
			return NULL;
		}
		int ms = (int)((deadline - now) / NS_PER_MS) + 1;
		if (nbd_poll(h, ms) == -1)
			goto fail;
	}
	if (nbd_aio_is_ready(h) != 1) {
		snprintf(err, errlen, "%s", nbd_get_error() ? nbd_get_error() :
		    "the server closed the connection during the handshake");
		nbd_close(h);
		return NULL;
	}
	bn_unix_sndbuf(nbd_aio_get_fd(h));
	return h;

fail:
	snprintf(err, errlen, "%s", bn_errmsg());
	nbd_close(h);
	return NULL;
}

/* A reconnection must find the export as it was. */
static int
bn_check_same(struct backend_nbd *bn, struct nbd_handle *h, char *err,
    size_t errlen)
{
	int64_t size = nbd_get_size(h);

	if (size < 0 || (uint64_t)size < bn->size_bytes) {
		snprintf(err, errlen, "the remote export is now %lld bytes, "
		    "smaller than the %llu served", (long long)size,
		    (unsigned long long)bn->size_bytes);
		return -1;
	}
	if (!bn->readonly && nbd_is_read_only(h) == 1) {
		snprintf(err, errlen, "the remote export is now read-only");
		return -1;
	}
	/* What reads after writeback rely on (BACKEND_FLUSH_BEFORE_READ):
	 * several connections see one another's writes once flushed. */
	if (bn->multi_conn && nbd_can_multi_conn(h) != 1) {
		snprintf(err, errlen, "the remote no longer offers multi-conn");
		return -1;
	}
	if (bn->can_flush && nbd_can_flush(h) != 1) {
		snprintf(err, errlen, "the remote no longer offers FLUSH");
		return -1;
	}
	return 0;
}

/* Put H (connected) into slot C. */
static void
bn_conn_install_locked(struct backend_nbd *bn, struct bn_conn *c,
    struct nbd_handle *h, int wake_fd)
{
	lock_assert_held(&bn->lock);
	assert(!c->h && h);
	c->h = h;
	c->wake_fd = wake_fd;
	c->inflight = 0;
	c->polling = c->retired = c->shut = false;
	store_relaxed(&c->served, false);
	c->opened_ns = bn_now();
}

static unsigned
bn_live_conns_locked(struct backend_nbd *bn)
{
	unsigned n = 0;

	lock_assert_held(&bn->lock);
	for (unsigned i = 0; i < bn->max_conns; i++)
		if (bn->conns[i].h && !bn->conns[i].retired)
			n++;
	return n;
}

/* Connections open to the remote or opening: libnbd's (retired ones
 * too, until closed) and wbd's own. */
static unsigned
bn_conns_locked(struct backend_nbd *bn)
{
	unsigned n = bn->connecting;

	lock_assert_held(&bn->lock);
	for (unsigned i = 0; i < bn->max_conns; i++)
		n += bn->conns[i].h != NULL;
	n += bn->rd.nr != NULL || bn->rd.connecting;
	for (unsigned i = 0; i < BN_WR_CONNS; i++)
		n += bn->wr[i].nr != NULL || bn->wr[i].connecting;
	return n;
}

static bool
bn_over_limit_locked(struct backend_nbd *bn)
{
	return bn_conns_locked(bn) > load_relaxed(&bn->max_connections);
}

/*
 * May one more connection open (remote.max_connections)?  If not, it is
 * counted and said (once a minute at most); WHAT names the connection
 * held back.  The first of libnbd's, without which nothing is served,
 * is never asked about.
 */
static bool
bn_may_open_locked(struct backend_nbd *bn, const char *what)
{
	unsigned n = bn_conns_locked(bn);
	unsigned max = load_relaxed(&bn->max_connections), quiet;

	if (n < max)
		return true;
	bn->conn_limit_hits++;
	if (ratelimit_due(&bn->conn_limit_rl, BN_CONN_LIMIT_LOG_NS, &quiet))
		log_info("remote %s (device %s): %u connection(s) open, "
			 "remote.max_connections %u: no %s connection "
			 "opened (%u more time(s) since the last such line)",
		    bn->uri, bn->b.dev_name, n, max, what, quiet);
	return false;
}

/*
 * Had a connection lost now served (backend.losses_served)?  It answered
 * a request (SERVED), or was open (since OPENED_NS) longer than one
 * request may take and a second more, so it was not opened for the
 * request that failed.  A connection that fails straight after it was
 * opened says the remote is not serving: a stalled remote, one that
 * drops every connection; its writes are writeback errors, and a FLUSH
 * does not try again on a new one (with the default io_timeout_ms that
 * held a FLUSH for minutes).
 */
static bool
bn_settled(struct backend_nbd *bn, bool served, uint64_t opened_ns)
{
	return served ||
	    bn_now() - opened_ns >
	    load_relaxed(&bn->io_timeout_ns) + 1000 * NS_PER_MS;
}

static void bn_count_loss(struct backend_nbd *bn, bool served,
    struct bn_own *except, const char *why);

/*
 * Connection C was lost: retire every connection (the server is likely
 * gone), and log it once.  A connection already retired was counted when
 * it was retired: its late failures say nothing about newer connections.
 */
static void
bn_lost_locked(struct backend_nbd *bn, struct bn_conn *c, const char *why)
{
	lock_assert_held(&bn->lock);
	if (c->retired)
		return;
	/* Before anything goes on a new connection (writeback, wb_redo). */
	bn_count_loss(bn,
	    bn_settled(bn, load_relaxed(&c->served), c->opened_ns), NULL, why);
}

/* The remote is taken for lost (WHY): said once, until reconnected. */
static void
bn_disconnected_locked(struct backend_nbd *bn, const char *why)
{
	lock_assert_held(&bn->lock);
	if (!bn->connected)
		return;
	bn->connected = false;
	bn->since_realtime_ns = bn_clock_ns(CLOCK_REALTIME);
	bn->since_mono_ns = bn_now();
	bn->retries = 0;
	bn->backoff_ms = 0;
	bn->next_try_ns = 0;            /* the first reconnection: at once */
	snprintf(bn->last_error, sizeof bn->last_error, "%s", why);
	log_warnx("remote %s (device %s): disconnected: %s; dirty data is "
	    "kept and written back once it is reconnected", bn->uri,
	    bn->b.dev_name, why);
}

static void
bn_connect_failed_locked(struct backend_nbd *bn, const char *why)
{
	lock_assert_held(&bn->lock);
	bn->retries++;
	bn->failed_attempts++;
	bn->backoff_ms = bn->backoff_ms ? bn->backoff_ms * 2 : BN_BACKOFF_MIN_MS;
	unsigned max_ms = load_relaxed(&bn->reconnect_max_ms);
	if (bn->backoff_ms > max_ms)
		bn->backoff_ms = max_ms;
	bn->next_try_ns = bn_now() + bn->backoff_ms * NS_PER_MS;
	bool changed = strcmp(bn->last_error, why) != 0;
	snprintf(bn->last_error, sizeof bn->last_error, "%s", why);
	if (bn->retries == 1 || changed)
		log_warnx("remote %s (device %s): cannot reconnect: %s; "
		    "retrying, at most every %u ms", bn->uri, bn->b.dev_name,
		    why, max_ms);
	else
		log_debug("remote %s: reconnection %u failed: %s", bn->uri,
		    bn->retries, why);
}

static void
bn_connected_locked(struct backend_nbd *bn)
{
	lock_assert_held(&bn->lock);
	if (bn->connected)
		return;
	uint64_t down_ms = (bn_now() - bn->since_mono_ns) / NS_PER_MS;
	log_info("remote %s (device %s): reconnected after %u failed "
	    "attempt%s, %llu.%01llu s disconnected", bn->uri, bn->b.dev_name,
	    bn->retries, bn->retries == 1 ? "" : "s",
	    (unsigned long long)(down_ms / 1000),
	    (unsigned long long)(down_ms % 1000 / 100));
	bn->connected = true;
	bn->since_realtime_ns = bn_clock_ns(CLOCK_REALTIME);
	bn->since_mono_ns = bn_now();
	bn->retries = 0;
	bn->reconnects++;
	bn->backoff_ms = 0;
}

/*
 * Open a connection into SLOT (reserved by bn->connecting), with bn.lock
 * dropped meanwhile.  GROWING: another connection is up, so a failure is
 * not a disconnection.
 */
static void
bn_connect_slot_locked(struct backend_nbd *bn, struct bn_conn *slot,
    bool growing)
{
	char err[256];
	int wake_fd = -1;

	lock_assert_held(&bn->lock);
	bool first = bn->unconnected;
	int64_t max = 0;
	bn->connecting = true;
	pthread_mutex_unlock(&bn->lock);
	struct nbd_handle *h = bn_connect(bn, false, err, sizeof err);
	if (h && bn_check_same(bn, h, err, sizeof err) < 0) {
		nbd_close(h);
		h = NULL;
	}
	if (h && first)
		max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
	if (h && (wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		snprintf(err, sizeof err, "eventfd: %s", strerror(errno));
		nbd_close(h);
		h = NULL;
	}
	pthread_mutex_lock(&bn->lock);
	bn->connecting = false;
	if (h) {
		if (first && bn->unconnected) {
			bn->unconnected = false;
			if (max > 0 && max < bn->max_request_bytes)
				store_relaxed(&bn->max_request_bytes,
				    (uint32_t)max);
			log_info("remote %s (device %s): first connection; "
				 "served with one connection, FUA as a write "
				 "and a FLUSH, no TRIM, until wbd restarts",
			    bn->uri, bn->b.dev_name);
		}
		bn_conn_install_locked(bn, slot, h, wake_fd);
		bn_connected_locked(bn);
	} else if (growing) {
		log_debug("remote %s: cannot add a connection: %s", bn->uri,
		    err);
		bn->grow_after_ns = bn_now() + BN_GROW_RETRY_MS * NS_PER_MS;
	} else {
		bn_connect_failed_locked(bn, err);
	}
	pthread_cond_broadcast(&bn->cond);
}

/*
 * A connection for one command, its inflight count taken (the least
 * busy); connects when none is up and the back-off allows, or adds one to
 * a multi-conn remote when every connection has conn_depth commands in
 * flight.  When disconnected: WAIT_UNTIL_NS 0 fails at once while the
 * back-off lasts; a reconnection under way (another caller's) it waits
 * for, within connect_timeout_ms; one due but with no slot free yet
 * (the connections a loss retired are still in use) fails with EAGAIN,
 * not ENOTCONN.  A write after an idle connection's loss found either,
 * and failed as if the remote were away: a FLUSH's EIO with the remote
 * up.  Otherwise waits until WAIT_UNTIL_NS (monotonic).  NULL: *ERR is
 * set.
 *
 * OLDEST (a FLUSH): the connection open longest, however busy.  A FLUSH
 * covers what the server it reaches answered; one sent on a connection
 * opened later than another that carried writes may reach a server that
 * came back after a power cut, while the other, idle since and closed by
 * nothing, still looks open: what it carried is gone, and nothing says
 * so.  The one open longest reaches the oldest server still answering:
 * every connection opened since reached that one too (or is failing),
 * and a connection is closed only with a loss counted (its unflushed
 * writes written again).  A server that went away without a word fails
 * the FLUSH there, and that is counted.
 */
static struct bn_conn *
bn_conn_get(struct backend_nbd *bn, uint64_t wait_until_ns, bool oldest,
    int *err)
{
	unsigned depth = load_relaxed(&bn->conn_depth);
	uint64_t reconnect_until = 0;

	pthread_mutex_lock(&bn->lock);
	for (;;) {
		struct bn_conn *best = NULL, *free_slot = NULL;
		uint64_t now = bn_now();

		for (unsigned i = 0; i < bn->max_conns; i++) {
			struct bn_conn *c = &bn->conns[i];
			/* Retired by a loss while nobody used it: nobody
			 * would close it (bn_conn_put closes the others), and
			 * it would hold its slot and socket for good. */
			if (c->h && c->retired && c->inflight == 0 &&
			    !c->polling) {
				nbd_close(c->h);
				if (c->wake_fd >= 0)
					close(c->wake_fd);
				c->h = NULL;
				c->wake_fd = -1;
			}
			if (!c->h) {
				if (!free_slot)
					free_slot = c;
			} else if (!c->retired &&
			    (!best ||
				(oldest ? c->opened_ns < best->opened_ns :
					  c->inflight < best->inflight))) {
				best = c;
			}
		}
		if (best &&
		    (oldest || best->inflight < depth || !free_slot ||
			bn->connecting || now < bn->grow_after_ns ||
			!bn_may_open_locked(bn, "libnbd"))) {
			best->inflight++;
			pthread_mutex_unlock(&bn->lock);
			return best;
		}
		if (free_slot && !bn->connecting &&
		    (best || now >= bn->next_try_ns)) {
			bn_connect_slot_locked(bn, free_slot, best != NULL);
			continue;
		}
		/* Disconnected: a reconnection is under way or not yet due,
		 * or due with no slot free yet (the connections a loss
		 * retired close as their commands end: maybe this caller's
		 * own, so it must not wait for them). */
		if (wait_until_ns == 0 && bn->connecting) {
			if (!reconnect_until)
				reconnect_until = now +
				    load_relaxed(&bn->connect_timeout_ms) *
					NS_PER_MS;
			if (now < reconnect_until) {
				bn_cond_wait_until(bn, reconnect_until);
				continue;
			}
		}
		if (wait_until_ns == 0 || now >= wait_until_ns) {
			*err = bn->connected ? ETIMEDOUT : ENOTCONN;
			/* Not the remote's absence: the loss just counted
			 * (backend.h: a remote write's -EAGAIN). */
			if (!bn->connecting && now >= bn->next_try_ns &&
			    !free_slot)
				*err = EAGAIN;
			pthread_mutex_unlock(&bn->lock);
			return NULL;
		}
		uint64_t until = wait_until_ns;
		if (!bn->connecting && free_slot && bn->next_try_ns < until)
			until = bn->next_try_ns;
		bn_cond_wait_until(bn, until);
	}
}

/* Done with C; the last user of a retired connection closes it. */
static void
bn_conn_put(struct backend_nbd *bn, struct bn_conn *c)
{
	struct nbd_handle *h = NULL;
	int wake_fd = -1;

	pthread_mutex_lock(&bn->lock);
	c->inflight--;
	/* Over remote.max_connections (a reload lowered it): one of several
	 * that goes idle is closed.  Its writes not yet flushed may go with
	 * it (NBD promises nothing of them), so that counts as a loss: they
	 * are written again before the next flush (wb_redo). */
	if (c->inflight == 0 && !c->retired && !c->polling &&
	    bn_live_conns_locked(bn) > 1 && bn_over_limit_locked(bn)) {
		atomic_fetch_add_explicit(&bn->b.losses, 1,
		    memory_order_acq_rel);
		c->retired = true;
	}
	/* Another caller may be driving it with its own (bn_poll_claim_locked):
	 * closed once that round is over. */
	while (c->inflight == 0 && c->retired && c->polling)
		pthread_cond_wait(&bn->cond, &bn->lock);
	if (c->inflight == 0 && c->retired && c->h) {
		h = c->h;
		wake_fd = c->wake_fd;
		c->h = NULL;
		c->wake_fd = -1;
		pthread_cond_broadcast(&bn->cond);
	}
	pthread_mutex_unlock(&bn->lock);
	if (h)
		nbd_close(h);
	if (wake_fd >= 0)
		close(wake_fd);
}

/* --- commands --------------------------------------------------------- */

static int
bn_cmd_done(void *user_data, int *error)
{
	struct bn_cmd *cmd = user_data;

	cmd->error = *error;
	store_release(&cmd->done, 1);
	return 1;               /* retire the command */
}

static bool
bn_handle_dead(struct nbd_handle *h)
{
	return nbd_aio_is_dead(h) == 1 || nbd_aio_is_closed(h) == 1;
}

/* Errors that mean the connection, not the command, failed. */
static bool
bn_errno_is_connection(int err)
{
	switch (err) {
	case ENOTCONN:
	case EPIPE:
	case ECONNRESET:
	case ECONNABORTED:
	case ECONNREFUSED:
	case ESHUTDOWN:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENETDOWN:
		return true;
	default:
		return false;
	}
}

/* libnbd's extent callback: base:allocation's extents into a bn_extents,
 * clipped to its range, neighbours of one kind merged. */
static int
bn_extent_cb(void *user_data, const char *metacontext, uint64_t offset,
    uint32_t *entries, size_t nr_entries, int *error)
{
	struct bn_extents *x = user_data;
	uint64_t pos = offset;

	if (strcmp(metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0 ||
	    offset != x->off || x->n > 0)
		return 0;
	for (size_t i = 0; i + 1 < nr_entries * 2 && pos < x->end; i += 2) {
		uint64_t len = entries[i];
		uint32_t flags = entries[i + 1] &
		    (BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO);
		if (len == 0)
			break;
		if (len > x->end - pos)
			len = x->end - pos;
		if (x->n > 0 && x->ext[x->n - 1].flags == flags)
			x->ext[x->n - 1].length += len;
		else if (x->n < x->max)
			x->ext[x->n++] = (struct backend_extent){ .length = len,
				.flags = flags };
		else
			break;
		pos += len;
	}
	return 0;
}

static int64_t
bn_submit(struct nbd_handle *h, enum bn_op op, void *buf, uint32_t count,
    uint64_t off, uint32_t flags, struct bn_cmd *cmd)
{
	nbd_completion_callback cb = {
		.callback = bn_cmd_done,
		.user_data = cmd,
	};

	switch (op) {
	case BN_PREAD:
		return nbd_aio_pread(h, buf, count, off, cb, 0);
	case BN_PWRITE:
		return nbd_aio_pwrite(h, buf, count, off, cb, flags);
	case BN_FLUSH:
		return nbd_aio_flush(h, cb, 0);
	case BN_TRIM:
		return nbd_aio_trim(h, count, off, cb, flags);
	case BN_ZERO:
		return nbd_aio_zero(h, count, off, cb, flags);
	case BN_EXTENTS: {
		nbd_extent_callback ecb = { .callback = bn_extent_cb,
			.user_data = buf };
		return nbd_aio_block_status(h, count, off, ecb, cb, flags);
	}
	}
	errno = EINVAL;
	return -1;
}

/* Add C's socket (if its handle lives) and wake-up to FDS at *N. */
static void
bn_poll_add(struct bn_conn *c, struct pollfd *fds, unsigned *n)
{
	struct pollfd *s = &fds[(*n)++], *w = &fds[(*n)++];

	*s = (struct pollfd){ .fd = -1 };
	*w = (struct pollfd){ .fd = c->wake_fd, .events = POLLIN };
	if (bn_handle_dead(c->h))
		return;
	unsigned dir = nbd_aio_get_direction(c->h);
	s->fd = nbd_aio_get_fd(c->h);
	if (dir & LIBNBD_AIO_DIRECTION_READ)
		s->events |= POLLIN;
	if (dir & LIBNBD_AIO_DIRECTION_WRITE)
		s->events |= POLLOUT;
}

/* Tell libnbd what happened on C's socket (S) and drain its wake-up
 * (W): one notification per round, as the first may change the state. */
static void
bn_poll_notify(struct bn_conn *c, const struct pollfd *s,
    const struct pollfd *w)
{
	short ev = s->revents;

	if (w->revents & POLLIN) {
		uint64_t v;
		if (read(c->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN)
			log_debug("eventfd read: %s", strerror(errno));
	}
	if (s->fd < 0 || ev == 0)
		return;
	if ((ev & POLLOUT) && (s->events & POLLOUT))
		nbd_aio_notify_write(c->h);
	else if ((ev & (POLLIN | POLLHUP | POLLERR)) && (s->events & POLLIN))
		nbd_aio_notify_read(c->h);
	else if (ev & (POLLHUP | POLLERR))
		nbd_aio_notify_write(c->h);
}

/*
 * Drive the N handles of CS once (CS[0] the caller's, the others busy
 * connections nobody else drives): wait for their sockets (or a wake-up,
 * or CALLER_FD readable: then true), with no lock held, and tell libnbd
 * what happened.  Driving them all is what keeps a window of writes
 * spread over a multi-conn remote moving: a write larger than the
 * socket's buffer is only sent as its connection is driven.
 */
static bool
bn_poll_once(struct bn_conn **cs, unsigned n, int timeout_ms, int caller_fd)
{
	struct pollfd fds[2 * BN_MAX_CONNS + 1];
	unsigned nfds = 0;

	for (unsigned i = 0; i < n; i++)
		bn_poll_add(cs[i], fds, &nfds);
	/* libnbd completed every command when it died; nothing should be
	 * waiting.  Do not spin if something is. */
	if (bn_handle_dead(cs[0]->h))
		timeout_ms = 10;
	fds[nfds++] = (struct pollfd){ .fd = caller_fd, .events = POLLIN };
	if (poll(fds, nfds, timeout_ms) <= 0)
		return false;
	for (unsigned i = 0; i < n; i++)
		bn_poll_notify(cs[i], &fds[2 * i], &fds[2 * i + 1]);
	return fds[nfds - 1].revents & POLLIN;
}

/* Mark C (to be driven) and every other live connection with commands in
 * flight that nobody drives as polled, into CS; how many. */
static unsigned
bn_poll_claim_locked(struct backend_nbd *bn, struct bn_conn *c,
    struct bn_conn **cs)
{
	unsigned n = 0;

	lock_assert_held(&bn->lock);
	cs[n++] = c;
	c->polling = true;
	for (unsigned i = 0; i < bn->max_conns; i++) {
		struct bn_conn *o = &bn->conns[i];
		if (o == c || !o->h || o->polling || o->inflight == 0 ||
		    bn_handle_dead(o->h))
			continue;
		o->polling = true;
		cs[n++] = o;
	}
	return n;
}

/* Is FD readable now? */
static bool
bn_fd_ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* A command on C got no reply in time: shut the socket down, so libnbd
 * fails every command on it, and count the connection lost. */
static void
bn_conn_timeout_locked(struct backend_nbd *bn, struct bn_conn *c)
{
	char why[96];
	int fd = nbd_aio_get_fd(c->h);

	lock_assert_held(&bn->lock);
	c->shut = true;
	/* Not if it died meanwhile: libnbd closed the socket, and its number
	 * may be another's by now. */
	if (fd >= 0 && !bn_handle_dead(c->h))
		shutdown(fd, SHUT_RDWR);
	snprintf(why, sizeof why, "no reply within io_timeout_ms (%llu ms)",
	    (unsigned long long)(load_relaxed(&bn->io_timeout_ns) / NS_PER_MS));
	bn_lost_locked(bn, c, why);
}

/*
 * Wait until CMD (submitted on C) is done, driving C when nobody else is:
 * true.  CALLER_FD (-1: none) readable first: false, CMD still in flight
 * (while another thread drives C, it is looked at every
 * BN_CALLER_SLICE_MS).
 */
static bool
bn_wait(struct backend_nbd *bn, struct bn_conn *c, struct bn_cmd *cmd,
    uint64_t deadline_ns, int caller_fd)
{
	bool done;

	pthread_mutex_lock(&bn->lock);
	while (!(done = load_acquire(&cmd->done))) {
		uint64_t now = bn_now();
		if (now >= deadline_ns && !c->shut)
			bn_conn_timeout_locked(bn, c);
		if (c->polling) {
			if (bn_fd_ready(caller_fd))
				break;
			uint64_t until = now +
			    (caller_fd >= 0 ? BN_CALLER_SLICE_MS :
					      BN_WAIT_SLICE_MS) *
				NS_PER_MS;
			if (!c->shut && deadline_ns < until)
				until = deadline_ns;
			bn_cond_wait_until(bn, until);
			continue;
		}
		int ms = BN_POLL_SLICE_MS;
		if (!c->shut && deadline_ns - now < ms * NS_PER_MS)
			ms = (int)((deadline_ns - now) / NS_PER_MS) + 1;
		struct bn_conn *cs[BN_MAX_CONNS];
		unsigned n = bn_poll_claim_locked(bn, c, cs);
		pthread_mutex_unlock(&bn->lock);
		bool called = bn_poll_once(cs, n, ms, caller_fd);
		pthread_mutex_lock(&bn->lock);
		for (unsigned i = 0; i < n; i++)
			cs[i]->polling = false;
		pthread_cond_broadcast(&bn->cond);
		if (called && !load_acquire(&cmd->done))
			break;
	}
	pthread_mutex_unlock(&bn->lock);
	return done || load_acquire(&cmd->done);
}

/*
 * Submit CMD on C and wake whoever polls C.  0, or a negative errno:
 * -ENOTCONN if the connection has died (it is then counted lost).
 */
static int
bn_start(struct backend_nbd *bn, struct bn_conn *c, enum bn_op op,
    void *buf, uint32_t count, uint64_t off, uint32_t flags,
    struct bn_cmd *cmd)
{
	uint64_t one = 1;

	if (bn_submit(c->h, op, buf, count, off, flags, cmd) == -1) {
		int err = nbd_get_errno() ? nbd_get_errno() : EIO;
		if (!bn_handle_dead(c->h))
			return -err;
		pthread_mutex_lock(&bn->lock);
		bn_lost_locked(bn, c, bn_errmsg());
		pthread_mutex_unlock(&bn->lock);
		return -ENOTCONN;
	}
	/* Only a thread in poll() on C needs waking: one that polls C later
	 * sees the command (libnbd's direction), and whoever waits for it
	 * drives C if nobody else does.  A write less per command. */
	pthread_mutex_lock(&bn->lock);
	bool polled = c->polling;
	pthread_mutex_unlock(&bn->lock);
	if (polled && write(c->wake_fd, &one, sizeof one) < 0 &&
	    errno != EAGAIN)
		log_debug("eventfd write: %s", strerror(errno));
	return 0;
}

/*
 * Wait for CMD, submitted on C, until DEADLINE.  0, its negative errno,
 * or -ENOTCONN if the connection, not the command, failed (it is then
 * counted lost).
 */
static int
bn_finish(struct backend_nbd *bn, struct bn_conn *c, struct bn_cmd *cmd,
    uint64_t deadline)
{
	bn_wait(bn, c, cmd, deadline, -1);
	if (cmd->error == 0) {
		if (!load_relaxed(&c->served))
			store_relaxed(&c->served, true);
		return 0;
	}
	if (bn_handle_dead(c->h) || bn_errno_is_connection(cmd->error)) {
		pthread_mutex_lock(&bn->lock);
		bn_lost_locked(bn, c, strerror(cmd->error));
		pthread_mutex_unlock(&bn->lock);
		return -ENOTCONN;       /* writeback retries it */
	}
	return -cmd->error;
}

/*
 * Run one command.  A read that finds the connection lost is tried again
 * on a new one until io_timeout_ms after it started, then fails with EIO;
 * any other command fails at once (writeback retries it).
 */
static int
bn_run(struct backend_nbd *bn, enum bn_op op, void *buf, uint32_t count,
    uint64_t off, uint32_t flags)
{
	uint64_t deadline = bn_now() + load_relaxed(&bn->io_timeout_ns);
	bool is_read = op == BN_PREAD || op == BN_EXTENTS;

	for (;;) {
		struct bn_cmd cmd = { 0 };
		int err = 0;
		struct bn_conn *c = bn_conn_get(bn, is_read ? deadline : 0,
		    op == BN_FLUSH, &err);
		if (!c)
			return is_read ? -EIO : -err;
		int r = bn_start(bn, c, op, buf, count, off, flags, &cmd);
		if (r == 0)
			r = bn_finish(bn, c, &cmd, deadline);
		bn_conn_put(bn, c);
		if (r != -ENOTCONN || !is_read)
			return r;
		if (bn_now() >= deadline)
			return -EIO;
	}
}

/* --- connections of wbd's own: reads, writes ----------------------- */

#define BN_RD_BACKOFF_MIN_MS 1000
#define BN_RD_BACKOFF_MAX_MS 60000
/* A write's payload queued on the write connection goes out at once
 * from this much on; less waits for the next wait on the connection, so
 * that a window's writes leave together. */
#define BN_WR_SEND_BYTES (256u << 10)

/* O failed, or could not be opened: not again for a while, the wait
 * doubling from 1 s to a minute until one opens. */
static void
bn_own_backoff_locked(struct backend_nbd *bn, struct bn_own *o)
{
	lock_assert_held(&bn->lock);
	o->failures++;
	o->backoff_ms =
	    o->backoff_ms ? o->backoff_ms * 2 : BN_RD_BACKOFF_MIN_MS;
	if (o->backoff_ms > BN_RD_BACKOFF_MAX_MS)
		o->backoff_ms = BN_RD_BACKOFF_MAX_MS;
	o->retry_after_ns = bn_now() + o->backoff_ms * NS_PER_MS;
}

/*
 * Open a connection of wbd's own, on a thread of its own: a handshake may
 * take up to connect_timeout_ms (a server that has stopped accepting, a
 * full listen backlog), and reads and writes go on through libnbd
 * meanwhile.
 */
static void *
bn_own_opener(void *arg)
{
	struct bn_own *o = arg;
	struct backend_nbd *bn = o->bn;
	char err[256] = "";
	struct nbdread *nr = NULL;

	struct nbd_handle *h = bn_connect(bn, true, err, sizeof err);
	bool tls = h && nbd_get_tls_negotiated(h) == 1;
	if (h && !tls && bn_check_same(bn, h, err, sizeof err) == 0 &&
	    !(nr = nbdread_new(nbd_aio_get_fd(h))))
		snprintf(err, sizeof err, "%s", strerror(errno));
	if (h && !nr) {
		nbd_close(h);
		h = NULL;
	}
	pthread_mutex_lock(&bn->lock);
	o->connecting = false;
	if (tls) {
		/* nbdread speaks the protocol in the clear only. */
		o->off = true;
		if (o->write)
			for (unsigned i = 0; i < BN_WR_CONNS; i++)
				bn->wr[i].off = true;
		log_debug("remote %s: TLS: no %s connection of wbd's own",
		    bn->uri, o->what);
	} else if (nr) {
		/* The back-off stays until it has worked (bn_own_put): one
		 * that opens and then fails is not reopened every second. */
		o->h = h;
		o->nr = nr;
		o->loss_counted = false;
		o->served = false;
		o->stale = false;
		o->opened_ns = bn_now();
		if (!o->announced && o != &bn->rd && o != &bn->wr[0])
			log_debug("remote %s (device %s): write connection "
				  "%u of wbd's own open",
			    bn->uri, bn->b.dev_name,
			    (unsigned)(o - bn->wr) + 1);
		else if (!o->announced)
			log_info("remote %s (device %s): %s on a connection of "
				 "their own, simple replies",
			    bn->uri, bn->b.dev_name,
			    o == &bn->rd ? "cache misses are read" :
					   "writeback's writes go");
		o->announced = true;
	} else {
		bn_own_backoff_locked(bn, o);
		log_debug("remote %s: cannot open the %s connection: %s; "
			  "again in %u ms",
		    bn->uri, o->what, err, o->backoff_ms);
	}
	pthread_mutex_unlock(&bn->lock);
	return NULL;
}

/* Start opening O (the last opener has ended). */
static void
bn_own_open_locked(struct backend_nbd *bn, struct bn_own *o)
{
	lock_assert_held(&bn->lock);
	if (o->opener_started)
		pthread_join(o->opener, NULL);
	o->opener_started = false;
	o->connecting = true;
	/* Signals go to the main loop, as for every thread of wbd's. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int e = pthread_create(&o->opener, NULL, bn_own_opener, o);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0) {
		o->connecting = false;
		bn_own_backoff_locked(bn, o);
		log_debug("remote %s: cannot start the %s connection's "
			  "opener: %s",
		    bn->uri, o->what, strerror(e));
		return;
	}
	o->opener_started = true;
}

/* A connection taken out of its bn_own, to be closed with no lock held. */
struct bn_own_gone {
	struct nbd_handle *h;
	struct nbdread *nr;
};

static void
bn_own_detach_locked(struct backend_nbd *bn, struct bn_own *o,
    struct bn_own_gone *g)
{
	lock_assert_held(&bn->lock);
	assert(o->inflight == 0);
	g->h = o->h;
	g->nr = o->nr;
	o->h = NULL;
	o->nr = NULL;
}

/* Take O out to be closed by wbd's choice (a reload turned it off or
 * lowered remote.max_connections).  A write connection's writes not yet
 * flushed may go with it, so its closing counts as a loss, as its
 * failure would (bn_own_put): they are written again first. */
static void
bn_own_retire_locked(struct backend_nbd *bn, struct bn_own *o,
    struct bn_own_gone *g)
{
	lock_assert_held(&bn->lock);
	if (o->write && o->nr && !o->loss_counted) {
		o->loss_counted = true;
		atomic_fetch_add_explicit(&bn->b.losses, 1,
		    memory_order_acq_rel);
	}
	bn_own_detach_locked(bn, o, g);
}

static void
bn_own_close(struct bn_own_gone *g)
{
	nbdread_free(g->nr);
	if (g->h)
		nbd_close(g->h);
}

/*
 * Count a loss of a connection that failed (WHY); SERVED: it had served
 * (bn_settled).  losses_served first: whoever sees the loss sees it too.
 * Every other connection is retired with it, libnbd's and wbd's own but
 * EXCEPT (its caller's, which it closes itself): likely gone too (a
 * remote restarted, a NAT that dropped them all), and what is tried
 * again must go on new connections, so that a remote that fails those
 * as well is seen failing (a new connection has not served), not taken
 * for one more dropped connection, once per connection open.  The
 * remote is taken for disconnected until a connection is made again.
 */
static void
bn_count_loss(struct backend_nbd *bn, bool served, struct bn_own *except,
    const char *why)
{
	lock_assert_held(&bn->lock);
	if (served)
		atomic_fetch_add_explicit(&bn->b.losses_served, 1,
		    memory_order_acq_rel);
	atomic_fetch_add_explicit(&bn->b.losses, 1, memory_order_acq_rel);
	for (unsigned i = 0; i < bn->max_conns; i++)
		if (bn->conns[i].h)
			bn->conns[i].retired = true;
	for (unsigned i = 0; i < 1 + BN_WR_CONNS; i++) {
		struct bn_own *o = i == 0 ? &bn->rd : &bn->wr[i - 1];
		if (o == except || !o->nr)
			continue;
		if (o->inflight > 0) {
			o->stale = true; /* bn_own_put closes it */
			continue;
		}
		struct bn_own_gone gone;
		bn_own_detach_locked(bn, o, &gone);
		bn_own_close(&gone); /* no I/O: its socket is only closed */
	}
	bn_disconnected_locked(bn, why);
}

/*
 * O's connection for this thread, its inflight count taken; NULL when
 * there is none (its opening is started then, if the remote is up), when
 * it is busy with another thread's requests or has SHARE in flight, when
 * ON (its setting) is false, or when it would not be consistent with the
 * other connections (a remote without multi-conn: there a FLUSH covers
 * only the writes of its own connection, and a read might not see them).
 */
static struct nbdread *
bn_own_get(struct backend_nbd *bn, struct bn_own *o, bool on, unsigned share)
{
	struct nbdread *nr = NULL;
	pthread_t self = pthread_self();

	if (!bn->multi_conn)
		return NULL;
	pthread_mutex_lock(&bn->lock);
	if (!on || (o->nr && o->inflight == 0 && bn_over_limit_locked(bn))) {
		/* Turned off by a reload, or over remote.max_connections
		 * after one: closed once idle. */
		struct bn_own_gone gone = { 0 };
		if (o->inflight == 0)
			bn_own_retire_locked(bn, o, &gone);
		pthread_mutex_unlock(&bn->lock);
		bn_own_close(&gone);
		return NULL;
	}
	if (!o->nr && !o->off && !o->connecting && bn->connected &&
	    bn_now() >= o->retry_after_ns && bn_may_open_locked(bn, o->what))
		bn_own_open_locked(bn, o);
	if (o->nr && !o->stale && o->inflight < share &&
	    (o->inflight == 0 || pthread_equal(o->owner, self))) {
		o->owner = self;
		o->inflight++;
		nr = o->nr;
	}
	pthread_mutex_unlock(&bn->lock);
	return nr;
}

static struct nbdread *
bn_rd_get(struct backend_nbd *bn)
{
	return bn_own_get(bn, &bn->rd, load_relaxed(&bn->read_connection),
	    BN_RD_SHARE);
}

/* Close the write connections no thread is using (write_connection
 * turned off by a reload). */
static void
bn_wr_close_idle(struct backend_nbd *bn)
{
	struct bn_own_gone gone[BN_WR_CONNS] = { 0 };

	pthread_mutex_lock(&bn->lock);
	for (unsigned i = 0; i < BN_WR_CONNS; i++)
		if (bn->wr[i].inflight == 0)
			bn_own_retire_locked(bn, &bn->wr[i], &gone[i]);
	pthread_mutex_unlock(&bn->lock);
	for (unsigned i = 0; i < BN_WR_CONNS; i++)
		bn_own_close(&gone[i]);
}

/*
 * A write connection for this thread, its inflight count taken, into
 * *OP: one it has in use with room (at most remote.conn_depth writes on
 * it, as on any connection: a deeper window's others go to another, or
 * spread over libnbd's), else one nobody uses.  NULL when there is none;
 * then one more is opened, if none is opening, so that the next window
 * finds it.  As bn_own_get otherwise.
 */
static struct nbdread *
bn_wr_get(struct backend_nbd *bn, struct bn_own **op)
{
	unsigned depth = load_relaxed(&bn->conn_depth);
	pthread_t self = pthread_self();
	struct bn_own *mine = NULL, *idle = NULL, *shut = NULL;
	bool opening = false;
	uint64_t hold = 0; /* the back-off of them all: the latest */

	if (!bn->multi_conn)
		return NULL;
	if (!load_relaxed(&bn->write_connection)) {
		bn_wr_close_idle(bn);
		return NULL;
	}
	if (depth > NBDREAD_MAX_INFLIGHT)
		depth = NBDREAD_MAX_INFLIGHT;
	uint64_t now = bn_now();
	pthread_mutex_lock(&bn->lock);
	for (unsigned i = 0; i < BN_WR_CONNS; i++) {
		struct bn_own *o = &bn->wr[i];
		opening |= o->connecting;
		if (o->retry_after_ns > hold)
			hold = o->retry_after_ns;
		if (!o->nr) {
			if (!shut && !o->off && !o->connecting)
				shut = o;
		} else if (o->stale) {
			/* closed once idle (bn_own_put) */
		} else if (o->inflight == 0) {
			if (!idle)
				idle = o;
		} else if (pthread_equal(o->owner, self) &&
		    o->inflight < depth && !mine) {
			mine = o;
		}
	}
	/* Over remote.max_connections after a reload: the idle one is
	 * closed rather than used. */
	struct bn_own_gone gone = { 0 };
	if (idle && bn_over_limit_locked(bn)) {
		bn_own_retire_locked(bn, idle, &gone);
		idle = shut = NULL;
	}
	struct bn_own *o = mine ? mine : idle;
	struct nbdread *nr = NULL;
	if (o) {
		o->owner = self;
		o->inflight++;
		nr = o->nr;
		*op = o;
	} else if (shut && !opening && bn->connected && now >= hold &&
	    bn_may_open_locked(bn, "write")) {
		/* One that failed holds the others back too: a server
		 * that closes them is not sent four in a row. */
		bn_own_open_locked(bn, shut);
	}
	pthread_mutex_unlock(&bn->lock);
	bn_own_close(&gone);
	return nr;
}

/*
 * Done with NR (O's, this thread's) for one request, which WORKED (was
 * answered on it: the back-off starts over); closed if it failed and
 * nothing is in flight, to be opened again a little later.  A write
 * connection that failed counts as a lost connection (backend.losses)
 * before any write it failed is made again elsewhere: the writes it
 * carried that were answered and not yet flushed may be gone with the
 * server, and are written again (wb_redo), as after libnbd's.
 */
static void
bn_own_put(struct backend_nbd *bn, struct bn_own *o, struct nbdread *nr,
    bool worked)
{
	struct bn_own_gone gone = { 0 };

	pthread_mutex_lock(&bn->lock);
	o->inflight--;
	if (worked && !nbdread_failed(nr))
		o->backoff_ms = 0;
	if (o->write && nbdread_failed(nr) && !o->loss_counted) {
		o->loss_counted = true;
		bn_count_loss(bn, bn_settled(bn, o->served, o->opened_ns), o,
		    nbdread_failed(nr));
	}
	if (worked && !nbdread_failed(nr))
		o->served = true;
	if (o->inflight == 0 && nbdread_failed(nr)) {
		log_info("remote %s (device %s): the %s connection failed "
			 "(%s); %ss go through libnbd until it is reopened",
		    bn->uri, bn->b.dev_name, o->what, nbdread_failed(nr),
		    o->what);
		bn_own_detach_locked(bn, o, &gone);
		bn_own_backoff_locked(bn, o);
	} else if (o->inflight == 0 && o->stale) {
		/* Retired by another connection's loss (bn_count_loss). */
		bn_own_detach_locked(bn, o, &gone);
	}
	pthread_mutex_unlock(&bn->lock);
	bn_own_close(&gone);
}

/* A read or write in flight (pread_start .. pread_end, pwrite_start ..
 * pwrite_end). */
struct backend_io {
	struct bn_cmd cmd;              /* libnbd's completion writes here */
	struct bn_conn *c;              /* NULL: done already, see result */
	uint64_t deadline;
	int result;
	void *buf; /* a read's, to read again */
	uint32_t count;
	uint64_t off;
	struct nbdread *nr; /* on a connection of wbd's own: OWN's */
	struct bn_own *own;
	struct nbdread_req rq;
};

/* --- the operations --------------------------------------------------- */

static int
bn_pread(struct backend *b, void *buf, uint32_t count, uint64_t off)
{
	struct backend_nbd *bn = BN(b);
	char *p = buf;

	while (count > 0) {
		uint32_t max = bn_max_request(bn);
		uint32_t n = count < max ? count : max;
		int r = bn_run(bn, BN_PREAD, p, n, off, 0);
		if (r < 0)
			return r;
		p += n;
		off += n;
		count -= n;
	}
	return 0;
}

static int bn_flush(struct backend *b);

/* The NBD flags of a write: FUA if asked for, or if the remote cannot
 * flush (then every write must be durable), when the remote offers it. */
static uint32_t
bn_write_flags(const struct backend_nbd *bn, unsigned wflags)
{
	bool fua = (wflags & BACKEND_WRITE_FUA) || !bn->can_flush;

	return fua && bn->can_fua ? LIBNBD_CMD_FLAG_FUA : 0;
}

/* Times a FUA write made as writes and a FLUSH is tried when the remote
 * is lost between them. */
#define BN_FUA_TRIES 3

/*
 * FUA (BACKEND_WRITE_FUA) goes to the remote as NBD_CMD_FLAG_FUA when it
 * offers it, else as the writes followed by NBD_CMD_FLUSH; if the remote
 * was lost between them (backend.losses), the FLUSH may have reached a
 * server that never kept the writes: they are made again.  A remote that
 * cannot flush but offers FUA gets every write with FUA.
 */
static int
bn_pwrite(struct backend *b, const void *buf, uint32_t count, uint64_t off,
    unsigned wflags)
{
	struct backend_nbd *bn = BN(b);
	uint32_t flags = bn_write_flags(bn, wflags);
	bool then_flush = (wflags & BACKEND_WRITE_FUA) && !bn->can_fua;

	for (unsigned tries = 1;; tries++) {
		uint64_t losses = load_acquire(&b->losses);
		const char *p = buf;
		for (uint32_t left = count, at = 0; left > 0;) {
			uint32_t max = bn_max_request(bn);
			uint32_t n = left < max ? left : max;
			int r = bn_run(bn, BN_PWRITE, (void *)p, n, off + at,
			    flags);
			if (r < 0)
				return r;
			p += n;
			at += n;
			left -= n;
		}
		if (!then_flush)
			return 0;
		int r = bn_flush(b);
		if (r < 0 || load_acquire(&b->losses) == losses)
			return r;
		if (tries == BN_FUA_TRIES)
			return -EIO;
	}
}

static bool bn_own_wait(struct backend_io *io, int wake_fd);
static void bn_own_send_queued(struct backend_nbd *bn);
static void bn_wr_check_idle(struct backend_nbd *bn);

static struct backend_io *
bn_io_done(int result)
{
	struct backend_io *io = calloc(1, sizeof *io);

	if (io)
		io->result = result;
	return io;
}

/*
 * Submit the write and return: several callers' writes, or one caller's
 * several, share a connection (and a multi-conn remote gets more
 * connections as they are busy).  What cannot go as one command (larger
 * than the remote's limit, or FUA to a remote without it) is done whole
 * here, and pwrite_end only returns its result.
 */
static int
bn_pwrite_start(struct backend *b, const void *buf, uint32_t count,
    uint64_t off, unsigned wflags, struct backend_io **iop)
{
	struct backend_nbd *bn = BN(b);
	uint32_t flags = bn_write_flags(bn, wflags);
	struct backend_io *io;
	int err = 0;

	if (count > bn_max_request(bn) ||
	    ((wflags & BACKEND_WRITE_FUA) && !bn->can_fua)) {
		int r = bn_pwrite(b, buf, count, off, wflags);
		*iop = bn_io_done(r);
		return *iop ? 0 : -ENOMEM;
	}
	io = calloc(1, sizeof *io);
	if (!io)
		return -ENOMEM;
	io->deadline = bn_now() + load_relaxed(&bn->io_timeout_ns);
	/* On the write connection if this thread may have it: the window's
	 * writes leave together, and their replies come together. */
	if ((io->nr = bn_wr_get(bn, &io->own))) {
		io->rq = (struct nbdread_req){ .buf = (void *)buf,
			.count = count,
			.off = off,
			.write = true,
			.flags = (flags & LIBNBD_CMD_FLAG_FUA) ?
			    NBD_CMD_FLAG_FUA :
			    0 };
		if (nbdread_submit(io->nr, &io->rq) == 0) {
			if (nbdread_unsent(io->nr) >= BN_WR_SEND_BYTES)
				nbdread_send(io->nr);
			*iop = io;
			return 0;
		}
		bn_own_put(bn, io->own, io->nr, false);
		io->nr = NULL;
	}
	io->c = bn_conn_get(bn, 0, false, &err);
	if (!io->c) {
		free(io);
		return -err;
	}
	int r = bn_start(bn, io->c, BN_PWRITE, (void *)buf, count, off, flags,
	    &io->cmd);
	if (r < 0) {
		bn_conn_put(bn, io->c);
		free(io);
		return r;
	}
	*iop = io;
	return 0;
}

static int
bn_pwrite_end(struct backend *b, struct backend_io *io)
{
	struct backend_nbd *bn = BN(b);
	int r = io->result;

	if (io->nr) {
		bn_own_send_queued(bn);
		while (!bn_own_wait(io, -1))
			;
		/* ENOTCONN: the connection failed; writeback writes it again
		 * (the failure counted as a loss first: bn_own_put). */
		r = -io->rq.error;
		bn_own_put(bn, io->own, io->nr, io->rq.error != ENOTCONN);
	} else if (io->c) {
		bn_own_send_queued(bn);
		r = bn_finish(bn, io->c, &io->cmd, io->deadline);
		bn_conn_put(bn, io->c);
	}
	free(io);
	return r;
}

/*
 * A read in two steps, so that one thread keeps many cache misses in
 * flight on the remote.  A read the remote cannot take as one command is
 * done whole here; one whose connection is lost is read again in
 * pread_end, as bn_pread would (waiting for a reconnection up to
 * io_timeout_ms).
 */
static int
bn_pread_start(struct backend *b, void *buf, uint32_t count, uint64_t off,
    struct backend_io **iop)
{
	struct backend_nbd *bn = BN(b);
	struct backend_io *io;
	int err = 0;

	if (count > bn_max_request(bn)) {
		*iop = bn_io_done(bn_pread(b, buf, count, off));
		return *iop ? 0 : -ENOMEM;
	}
	if (!(io = calloc(1, sizeof *io)))
		return -ENOMEM;
	*io = (struct backend_io){ .buf = buf, .count = count, .off = off };
	io->deadline = bn_now() + load_relaxed(&bn->io_timeout_ns);
	if ((io->nr = bn_rd_get(bn))) {
		io->rq = (struct nbdread_req){ .buf = buf,
			.count = count,
			.off = off };
		if (nbdread_submit(io->nr, &io->rq) == 0) {
			*iop = io;
			return 0;
		}
		bn_own_put(bn, &bn->rd, io->nr, false);
		io->nr = NULL;
	}
	/* The least busy connection (a multi-conn remote gets more as they
	 * are busy), as writes go: the window's reads spread. */
	io->c = bn_conn_get(bn, io->deadline, false, &err);
	if (io->c &&
	    bn_start(bn, io->c, BN_PREAD, buf, count, off, 0, &io->cmd) < 0) {
		bn_conn_put(bn, io->c);
		io->c = NULL;
		err = ENOTCONN;
	}
	if (!io->c)
		io->result = err == ENOTCONN ? 1 : -EIO; /* 1: read again */
	*iop = io;
	return 0;
}

/* Wait on a connection of wbd's own; a request with no reply by its
 * deadline (none in the socket either) fails the connection (a read is
 * then read again through libnbd, a write written again by writeback). */
static bool
bn_own_wait(struct backend_io *io, int wake_fd)
{
	uint64_t now = bn_now();

	if (now >= io->deadline) {
		if (nbdread_wait(io->nr, &io->rq, 0, -1))
			return true;
		nbdread_fail(io->nr, "no reply within io_timeout_ms");
		return true;
	}
	int ms = (int)((io->deadline - now) / NS_PER_MS) + 1;
	return nbdread_wait(io->nr, &io->rq, ms, wake_fd);
}

/*
 * Before this thread waits for anything else (a request through libnbd,
 * or one on its other connection of wbd's own): send what it queued on
 * its connections of wbd's own (requests go out when their owner waits
 * on them, and it is not going to, yet).  A window holds both kinds
 * while such a connection opens, or when another thread had it.
 */
static void
bn_own_send_queued(struct backend_nbd *bn)
{
	struct nbdread *nr[1 + BN_WR_CONNS] = { NULL };
	pthread_t self = pthread_self();

	pthread_mutex_lock(&bn->lock);
	for (unsigned i = 0; i < 1 + BN_WR_CONNS; i++) {
		struct bn_own *o = i == 0 ? &bn->rd : &bn->wr[i - 1];
		if (o->nr && o->inflight > 0 && pthread_equal(o->owner, self))
			nr[i] = o->nr;
	}
	pthread_mutex_unlock(&bn->lock);
	for (unsigned i = 0; i < 1 + BN_WR_CONNS; i++)
		if (nr[i] && nbdread_unsent(nr[i]) > 0)
			nbdread_send(nr[i]);
}

/*
 * Before a flush: a write connection no thread is using that the remote
 * closed (or that failed) has its failure counted as a lost connection
 * now (bn_own_put), not at its next use.  The writes it carried that were
 * answered and not flushed may be gone with it, and the flush, sent on
 * another connection, would not cover them; counted, the loss makes the
 * flush's caller write them again (wb_redo).  With four write
 * connections, some stay idle a long time.
 */
static void
bn_wr_check_idle(struct backend_nbd *bn)
{
	struct bn_own *took[BN_WR_CONNS];
	pthread_t self = pthread_self();
	unsigned n = 0;

	pthread_mutex_lock(&bn->lock);
	for (unsigned i = 0; i < BN_WR_CONNS; i++) {
		struct bn_own *o = &bn->wr[i];
		if (o->nr && o->inflight == 0) {
			o->owner = self;
			o->inflight++;
			took[n++] = o;
		}
	}
	pthread_mutex_unlock(&bn->lock);
	for (unsigned i = 0; i < n; i++) {
		(void)nbdread_idle_ok(took[i]->nr);
		/* Not a request that worked: the back-off stays. */
		bn_own_put(bn, took[i], took[i]->nr, false);
	}
}

/*
 * After a FLUSH was answered: a connection the remote closed before it
 * answered is counted lost now (backend.losses), before the flush's
 * caller looks (wb_lost_since), not when a thread next uses it or
 * wakes from waiting on it.  The writes it carried that were answered
 * and not flushed may have gone with it (a restarted server, one that
 * keeps a connection's unflushed writes with the connection), and the
 * FLUSH, answered on another connection (maybe one opened to the server
 * that came back), does not cover them; counted, the loss makes the
 * caller write them again (wb_redo) and flush once more.  The remote
 * closed it before it answered the FLUSH, so its end of the connection
 * (or a reset) is on the socket by now: a dead libnbd handle, or a
 * socket with its end, an error, or (idle: a server sends nothing
 * unasked) anything to read.  One poll(2), no I/O: done under bn.lock.
 */
static void
bn_check_after_flush(struct backend_nbd *bn)
{
	struct pollfd fds[BN_MAX_CONNS + BN_WR_CONNS];
	struct bn_conn *cs[BN_MAX_CONNS];
	struct bn_own *os[BN_WR_CONNS];
	unsigned nc = 0, no = 0;
	const short gone = POLLRDHUP | POLLHUP | POLLERR | POLLNVAL;

	pthread_mutex_lock(&bn->lock);
	for (unsigned i = 0; i < bn->max_conns; i++) {
		struct bn_conn *c = &bn->conns[i];
		if (!c->h || c->retired)
			continue;
		int fd = nbd_aio_get_fd(c->h);
		if (fd < 0 || bn_handle_dead(c->h)) {
			bn_lost_locked(bn, c, "closed by the remote");
			goto out;
		}
		/* Idle (nobody can drive it meanwhile): nothing to read.  A
		 * TLS record with no NBD data in it (a key update) may come
		 * unasked, so not under TLS. */
		bool idle = c->inflight == 0 && !c->polling &&
		    nbd_get_tls_negotiated(c->h) != 1;
		fds[nc] = (struct pollfd){ .fd = fd,
			.events = (short)(POLLRDHUP | (idle ? POLLIN : 0)) };
		cs[nc++] = c;
	}
	for (unsigned i = 0; i < BN_WR_CONNS; i++) {
		struct bn_own *o = &bn->wr[i];
		if (!o->nr || o->stale || o->loss_counted)
			continue;
		fds[nc + no] = (struct pollfd){ .fd = nbdread_fd(o->nr),
			.events = (short)(POLLRDHUP |
			    (o->inflight == 0 ? POLLIN : 0)) };
		os[no++] = o;
	}
	int ready = poll(fds, nc + no, 0);
	/* A thread driving a busy one may have seen its end meanwhile: libnbd
	 * then closed its socket (maybe polled above under a number reused
	 * since), and the handle says so. */
	for (unsigned i = 0; i < nc; i++)
		if (bn_handle_dead(cs[i]->h)) {
			bn_lost_locked(bn, cs[i], "closed by the remote");
			goto out;
		}
	if (ready <= 0)
		goto out;
	for (unsigned i = 0; i < nc; i++)
		if (fds[i].revents & (gone | POLLIN)) {
			bn_lost_locked(bn, cs[i],
			    "closed by the remote before it answered a FLUSH");
			goto out;
		}
	for (unsigned i = 0; i < no; i++)
		if (fds[nc + i].revents & (gone | POLLIN)) {
			struct bn_own *o = os[i];
			o->loss_counted = true;
			bn_count_loss(bn,
			    bn_settled(bn, o->served, o->opened_ns), NULL,
			    "write connection closed by the remote before it "
			    "answered a FLUSH");
			goto out;
		}
out:
	pthread_mutex_unlock(&bn->lock);
}

static bool
bn_pread_wait(struct backend *b, struct backend_io *io, int wake_fd)
{
	bn_own_send_queued(BN(b));
	if (io->nr)
		return bn_own_wait(io, wake_fd);
	if (!io->c)
		return true;
	return bn_wait(BN(b), io->c, &io->cmd, io->deadline, wake_fd);
}

static int
bn_pread_end(struct backend *b, struct backend_io *io)
{
	struct backend_nbd *bn = BN(b);
	int r = io->result;

	if (io->nr) {
		bn_own_send_queued(bn);
		while (!bn_own_wait(io, -1))
			;
		/* ENOTCONN: the connection failed (never an NBD error). */
		r = io->rq.error == ENOTCONN ? 1 : -io->rq.error;
		bn_own_put(bn, &bn->rd, io->nr, io->rq.error != ENOTCONN);
	} else if (io->c) {
		bn_own_send_queued(bn);
		r = bn_finish(bn, io->c, &io->cmd, io->deadline);
		bn_conn_put(bn, io->c);
		if (r == -ENOTCONN)
			r = 1;
	}
	if (r == 1)
		r = bn_pread(b, io->buf, io->count, io->off);
	free(io);
	return r;
}

static int
bn_flush(struct backend *b)
{
	struct backend_nbd *bn = BN(b);

	/* Without FLUSH every write was sent with FUA, or the remote says
	 * it has no volatile cache to flush (see docs/remote.md). */
	if (!bn->can_flush)
		return 0;
	/* A miss's FLUSH (wb_flush_before_read) in the read window: the
	 * READs queued before it go out before it is waited for. */
	bn_own_send_queued(bn);
	bn_wr_check_idle(bn);
	int r = bn_run(bn, BN_FLUSH, NULL, 0, 0, 0);
	if (r == 0)
		bn_check_after_flush(bn);
	return r;
}

static int
bn_trim(struct backend *b, uint32_t count, uint64_t off)
{
	struct backend_nbd *bn = BN(b);

	if (!bn->can_trim)
		return 0;       /* TRIM is advisory */
	return bn_run(bn, BN_TRIM, NULL, count, off, 0);
}

static int
bn_write_zero_buffer(struct backend_nbd *bn, uint32_t count, uint64_t off)
{
	uint32_t chunk = count < (1u << 20) ? count : (1u << 20);
	void *zeroes = calloc(1, chunk ? chunk : 1);
	int r = 0;

	if (!zeroes)
		return -ENOMEM;
	while (count > 0 && r == 0) {
		uint32_t n = count < chunk ? count : chunk;
		r = bn_pwrite(&bn->b, zeroes, n, off, 0);
		off += n;
		count -= n;
	}
	free(zeroes);
	return r;
}

static int
bn_zero(struct backend *b, uint32_t count, uint64_t off, bool may_trim,
    bool fast)
{
	struct backend_nbd *bn = BN(b);
	uint32_t flags = may_trim ? 0 : LIBNBD_CMD_FLAG_NO_HOLE;

	if (fast && !(bn->can_zero && bn->can_fast_zero))
		return -ENOTSUP;
	if (!bn->can_zero)
		return bn_write_zero_buffer(bn, count, off);
	if (fast)
		flags |= LIBNBD_CMD_FLAG_FAST_ZERO;
	if (!bn->can_flush && bn->can_fua)
		flags |= LIBNBD_CMD_FLAG_FUA;
	return bn_run(bn, BN_ZERO, NULL, count, off, flags);
}

/* The remote's own base:allocation; all data if it has none. */
static int
bn_extents(struct backend *b, uint64_t count, uint64_t off,
    struct backend_extent *ext, unsigned max)
{
	struct backend_nbd *bn = BN(b);
	struct bn_extents x = { .off = off,
		.end = off + count,
		.ext = ext,
		.max = max };

	if (!bn->can_extents) {
		ext[0] = (struct backend_extent){ .length = count, .flags = 0 };
		return 1;
	}
	/* A request's length is 32 bits; the reply may cover less. */
	if (count > UINT32_MAX)
		count = UINT32_MAX;
	int r = bn_run(bn, BN_EXTENTS, &x, (uint32_t)count, off, 0);
	if (r < 0)
		return r;
	if (x.n == 0)
		return -EIO; /* no extent for our context */
	return (int)x.n;
}

static uint64_t
bn_size(struct backend *b)
{
	return BN(b)->size_bytes;
}

static void
bn_get_state(struct backend *b, struct backend_state *st)
{
	struct backend_nbd *bn = BN(b);

	pthread_mutex_lock(&bn->lock);
	st->connected = bn->connected;
	st->since_realtime_ns = bn->since_realtime_ns;
	st->retries = bn->retries;
	st->reconnects = bn->reconnects;
	st->failed_attempts = bn->failed_attempts;
	st->connections = bn_live_conns_locked(bn);
	st->all_connections = bn_conns_locked(bn);
	st->max_connections = load_relaxed(&bn->max_connections);
	st->connections_held_back = bn->conn_limit_hits;
	st->connect_timeout_ms = load_relaxed(&bn->connect_timeout_ms);
	st->reconnect_max_ms = load_relaxed(&bn->reconnect_max_ms);
	st->io_timeout_ms =
	    (unsigned)(load_relaxed(&bn->io_timeout_ns) / NS_PER_MS);
	st->multi_conn = bn->multi_conn;
	st->conn_depth = load_relaxed(&bn->conn_depth);
	st->read_connection = bn->rd.nr != NULL;
	st->read_connection_failures = bn->rd.failures;
	st->write_connection = false;
	st->write_connections = 0;
	st->write_connection_failures = 0;
	for (unsigned i = 0; i < BN_WR_CONNS; i++) {
		st->write_connection |= bn->wr[i].nr != NULL;
		st->write_connections += bn->wr[i].nr != NULL;
		st->write_connection_failures += bn->wr[i].failures;
	}
	snprintf(st->last_error, sizeof st->last_error, "%s", bn->last_error);
	pthread_mutex_unlock(&bn->lock);
}

/* At exit, with no command in flight. */
static void
bn_close(struct backend *b)
{
	struct backend_nbd *bn = BN(b);

	for (unsigned i = 0; i < BN_MAX_CONNS; i++) {
		struct bn_conn *c = &bn->conns[i];
		if (!c->h)
			continue;
		/* No NBD_CMD_DISC: nbd_shutdown could wait on a stalled
		 * server; closing the socket says the same. */
		nbd_close(c->h);
		if (c->wake_fd >= 0)
			close(c->wake_fd);
	}
	/* An opener still connecting gives up within connect_timeout_ms. */
	for (unsigned i = 0; i < 1 + BN_WR_CONNS; i++) {
		struct bn_own *o = i == 0 ? &bn->rd : &bn->wr[i - 1];
		if (o->opener_started)
			pthread_join(o->opener, NULL);
		struct bn_own_gone gone = { 0 };
		pthread_mutex_lock(&bn->lock); /* nobody else is left */
		bn_own_detach_locked(bn, o, &gone);
		pthread_mutex_unlock(&bn->lock);
		bn_own_close(&gone);
	}
	pthread_mutex_destroy(&bn->lock);
	pthread_cond_destroy(&bn->cond);
	free(bn->uri);
	free(b->description);
	free(bn);
}

static void
bn_reconfigure(struct backend *b, const struct remote_conf *rc)
{
	struct backend_nbd *bn = BN(b);

	store_relaxed(&bn->connect_timeout_ms, rc->connect_timeout_ms);
	store_relaxed(&bn->reconnect_max_ms, rc->reconnect_max_ms);
	store_relaxed(&bn->io_timeout_ns, rc->io_timeout_ms * NS_PER_MS);
	store_relaxed(&bn->read_connection, rc->read_connection);
	store_relaxed(&bn->write_connection, rc->write_connection);
	store_relaxed(&bn->max_connections, rc->max_connections);
	store_relaxed(&bn->conn_depth, rc->conn_depth);
	store_relaxed(&bn->b.unflushed_max, rc->unflushed_ranges);
	store_relaxed(&bn->b.commit_ms, rc->commit_interval_ms);
	store_relaxed(&bn->b.max_inflight_bytes,
	    rc->max_writeback_inflight_bytes);
	store_relaxed(&bn->b.min_inflight, rc->min_writeback_inflight);
	store_relaxed(&bn->b.behind_defer_ms, rc->write_behind_defer_ms);
	store_relaxed(&bn->b.write_behind, rc->write_behind);
	store_relaxed(&bn->b.fua_max_runs, rc->fua_max_runs);
	store_relaxed(&bn->b.max_readahead_bytes, rc->max_readahead_bytes);
}

static const struct backend_ops backend_nbd_ops = {
	.name = "nbd",
	.pread = bn_pread,
	.pwrite = bn_pwrite,
	.pwrite_start = bn_pwrite_start,
	.pwrite_end = bn_pwrite_end,
	.pread_start = bn_pread_start,
	.pread_wait = bn_pread_wait,
	.pread_end = bn_pread_end,
	.flush = bn_flush,
	.trim = bn_trim,
	.zero = bn_zero,
	.extents = bn_extents,
	.size = bn_size,
	.close = bn_close,
	.get_state = bn_get_state,
	.reconfigure = bn_reconfigure,
};

/* What the remote offers, read from the first connection. */
static int
bn_learn(struct backend_nbd *bn, struct nbd_handle *h, uint64_t size_bytes,
    bool readonly)
{
	int64_t size = nbd_get_size(h);

	if (size < 0) {
		log_warnx("%s: cannot get the export's size: %s", bn->uri,
		    bn_errmsg());
		return -1;
	}
	if (size_bytes > (uint64_t)size) {
		log_warnx("%s: configured size %llu exceeds the remote "
		    "export's %lld bytes", bn->uri,
		    (unsigned long long)size_bytes, (long long)size);
		errno = EINVAL;
		return -1;
	}
	bn->size_bytes = size_bytes ? size_bytes : (uint64_t)size;
	bn->readonly = readonly;
	if (!readonly && nbd_is_read_only(h) == 1) {
		log_info("%s: the remote export is read-only; so is this one",
		    bn->uri);
		bn->readonly = true;
	}
	bn->can_flush = nbd_can_flush(h) == 1;
	bn->can_fua = nbd_can_fua(h) == 1;
	bn->can_trim = nbd_can_trim(h) == 1;
	bn->can_zero = nbd_can_zero(h) == 1;
	bn->can_fast_zero = nbd_can_fast_zero(h) == 1;
	bn->multi_conn = nbd_can_multi_conn(h) == 1;
	bn->can_extents =
	    nbd_can_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
	bn->max_conns = bn->multi_conn ? BN_MAX_CONNS : 1;

	int64_t max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
	bn->max_request_bytes = BN_MAX_REQUEST_BYTES;
	if (max > 0 && max < BN_MAX_REQUEST_BYTES)
		bn->max_request_bytes = (uint32_t)max;

	if (!bn->readonly && !bn->can_flush && !bn->can_fua)
		log_warnx("%s: the remote offers neither FLUSH nor FUA: a "
		    "completed write is taken as durable, as the server "
		    "thereby claims", bn->uri);
	bn->b.caps = BACKEND_REMOTE;
	if (bn->readonly)
		bn->b.caps |= BACKEND_READ_ONLY;
	if (bn->can_trim)
		bn->b.caps |= BACKEND_CAN_TRIM;
	/* Without FLUSH every write goes with FUA, seen on every
	 * connection at once. */
	if (bn->multi_conn && bn->can_flush)
		bn->b.caps |= BACKEND_FLUSH_BEFORE_READ;
	/* A server restarted loses what no FLUSH covered. */
	if (bn->can_flush)
		bn->b.caps |= BACKEND_REDO_AFTER_LOSS;
	/* FUA as NBD_CMD_FLAG_FUA, not as a write and a FLUSH. */
	if (bn->can_fua && bn->can_flush)
		bn->b.caps |= BACKEND_NATIVE_FUA;
	/* Zeroes can always be written; fast only if the remote says so. */
	bn->b.caps |= BACKEND_CAN_ZERO;
	if (bn->can_zero && bn->can_fast_zero)
		bn->b.caps |= BACKEND_CAN_FAST_ZERO;
	log_debug("%s: %lld bytes; flush %d fua %d trim %d zero %d fast_zero "
	    "%d multi_conn %d; max request %u", bn->uri, (long long)size,
	    bn->can_flush, bn->can_fua, bn->can_trim, bn->can_zero,
	    bn->can_fast_zero, bn->multi_conn, bn->max_request_bytes);
	return 0;
}

/* A backend for URI with RC's settings (the daemon's remote group, its
 * defaults from the settings table: never NULL), not yet connected; NULL
 * with errno set. */
static struct backend_nbd *
bn_new(const char *uri, const struct remote_conf *rc)
{
	struct backend_nbd *bn = calloc(1, sizeof *bn);
	pthread_condattr_t ca;

	assert(rc);
	if (!bn)
		return NULL;
	lock_init(&bn->lock);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bn->cond, &ca);
	pthread_condattr_destroy(&ca);
	for (unsigned i = 0; i < BN_MAX_CONNS; i++)
		bn->conns[i].wake_fd = -1;
	bn_reconfigure(&bn->b, rc);
	bn->rd = (struct bn_own){ .bn = bn, .what = "read" };
	for (unsigned i = 0; i < BN_WR_CONNS; i++)
		bn->wr[i] =
		    (struct bn_own){ .bn = bn, .what = "write", .write = true };
	bn->uri = strdup(uri);
	int minor = bn->uri ? bn_server_minor(uri) : -1;
	if (bn->uri && minor < 0 && errno == EINVAL)
		log_warnx("%s: expected an NBD URI naming a server "
			  "(nbd://HOST[:PORT]/EXPORT or "
			  "nbd+unix:///EXPORT?socket=PATH)",
		    uri);
	if (minor < 0 || asprintf(&bn->b.description, "nbd %s", uri) < 0) {
		bn->b.description = NULL;
		int saved = errno;
		pthread_mutex_destroy(&bn->lock);
		pthread_cond_destroy(&bn->cond);
		free(bn->uri);
		free(bn);
		errno = minor < 0 && saved != ENOMEM && saved != ENFILE ?
		    EINVAL :
		    saved;
		return NULL;
	}
	bn->b.dev = makedev(BN_MAJOR, (unsigned)minor);
	snprintf(bn->b.dev_name, sizeof bn->b.dev_name, "%u:%u", BN_MAJOR,
	    (unsigned)minor);
	bn->b.ops = &backend_nbd_ops;
	bn->max_conns = 1;
	bn->max_request_bytes = BN_MAX_REQUEST_BYTES;
	return bn;
}

struct backend *
backend_nbd_open(const char *uri, uint64_t size_bytes, bool readonly,
    const struct remote_conf *rc)
{
	struct backend_nbd *bn = bn_new(uri, rc);
	char err[256];
	int wake_fd = -1;

	if (!bn)
		return NULL;
	struct nbd_handle *h = bn_connect(bn, false, err, sizeof err);
	if (!h) {
		log_warnx("%s: cannot connect: %s", uri, err);
		bn_close(&bn->b);
		errno = ENOTCONN;
		return NULL;
	}
	int bad = bn_learn(bn, h, size_bytes, readonly);
	if (bad == 0 &&
	    (wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		log_warn("eventfd");
		bad = -1;
	}
	if (bad < 0) {
		int saved = errno;
		nbd_close(h);
		bn_close(&bn->b);
		errno = saved;
		return NULL;
	}
	/* Not shared until the openers below start: locked for the rule. */
	pthread_mutex_lock(&bn->lock);
	bn_conn_install_locked(bn, &bn->conns[0], h, wake_fd);
	bn->connected = true;
	bn->since_realtime_ns = bn_clock_ns(CLOCK_REALTIME);
	bn->since_mono_ns = bn_now();
	/*
	 * The connections of wbd's own are opened now, not at the first
	 * read or write: opened then, the first writes went through libnbd
	 * and the next waited while the remote set the new connection up
	 * (nbdkit starts its threads): 20-30 ms of a link idle at the
	 * start of a stream (WAN profile, 1M writes).
	 */
	if (bn->multi_conn) {
		if (!readonly && load_relaxed(&bn->write_connection))
			bn_own_open_locked(bn, &bn->wr[0]);
		if (load_relaxed(&bn->read_connection))
			bn_own_open_locked(bn, &bn->rd);
	}
	pthread_mutex_unlock(&bn->lock);
	log_info("%s: device %s, %s%s%s%s%s", uri, bn->b.dev_name,
	    bn->multi_conn ? "multi-conn" : "one connection",
	    bn->can_flush ? ", flush" : "", bn->can_fua ? ", fua" : "",
	    bn->can_trim ? ", trim" : "", bn->can_zero ? ", zero" : "");
	return &bn->b;
}

struct backend *
backend_nbd_open_unconnected(const char *uri, uint64_t size_bytes,
    const char *why, const struct remote_conf *rc)
{
	struct backend_nbd *bn = bn_new(uri, rc);

	if (!bn)
		return NULL;
	/*
	 * What every NBD server that wbd can write back to offers: FLUSH
	 * (checked at the first connection, as at every reconnection), one
	 * connection.  FUA is a write and a FLUSH; TRIM is not offered;
	 * zeroes are written.  Learning more later would change what the
	 * clients and writeback were told; a restart does.
	 */
	bn->size_bytes = size_bytes;
	bn->can_flush = true;
	bn->b.caps =
	    BACKEND_REMOTE | BACKEND_REDO_AFTER_LOSS | BACKEND_CAN_ZERO;
	bn->connected = false;
	bn->unconnected = true;
	bn->since_realtime_ns = bn_clock_ns(CLOCK_REALTIME);
	bn->since_mono_ns = bn_now();
	bn->next_try_ns = 0;
	snprintf(bn->last_error, sizeof bn->last_error, "%s", why);
	/* WHY is the failed attempt as logged ("URI: cannot connect:
	 * ..."): the URI is said once, by it if it names it. */
	bool named = strstr(why, uri) != NULL;
	log_warnx("remote %s%sdevice %s: not connected yet: %s; tried "
		  "again as writeback needs it, at most every %u ms; until "
		  "it answers, reads of data not in the cache fail",
	    named ? "" : uri, named ? "" : ", ", bn->b.dev_name, why,
	    bn->reconnect_max_ms);
	return &bn->b;
}
