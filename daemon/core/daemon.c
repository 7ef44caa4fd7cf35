/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.c - the daemon's lifecycle and the tables around it.
 *
 * daemon_init, daemon_open (before detaching: what can fail on bad input),
 * daemon_start (the cache, exports, devices, I/O threads, the tick),
 * daemon_run, daemon_shutdown (stop accepting, finish requests, write
 * every export back on its own device's pool, all devices at once) and
 * daemon_free, all on the main thread.  Also: the device table, installing
 * an export, handing accepted sockets to I/O threads, and the tick
 * (periodic writeback, removed exports written back and freed, waiting
 * exports installed).  Reload is in reload.c.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "atomics.h"
#include "backend.h"
#include "backing.h"
#include "cache.h"
#include "config-load.h"
#include "daemon.h"
#include "export-journal.h"
#include "export.h"
#include "ioloop.h"
#include "lock.h"
#include "log.h"
#include "nbd-proto.h"
#include "notify.h"
#include "pending.h"
#include "pool.h"
#include "prefault.h"
#include "settings.h"
#include "size.h"
#include "slots.h"
#include "wbdev.h"
#include "writeback.h"

#define DAEMON_MAX_IO_THREADS   64
#define DAEMON_TICK_S           0.1
/* Shutdown retries a failing device until it is written: 1, 2, 4 ... s
 * apart, at most this long. */
#define DAEMON_DRAIN_RETRY_MAX_S 30
#define DAEMON_REFUSE_LOG_NS (10ull * 1000000000ull)
/* A long drain is reported this often, and asks the service manager
 * for this much more time each time. */
#define DAEMON_DRAIN_REPORT_S 5
#define DAEMON_DRAIN_EXTEND_S 60
/* Free memory given back to the kernel this often (daemon_trim_memory). */
#define DAEMON_TRIM_S 10

_Static_assert(WB_DEV_MAX_TARGETS >= EXPORT_TABLE_MAX,
    "a device takes every export the table holds");

struct wb_dev *
daemon_get_dev(struct daemon *d, const struct backend *b)
{
	struct pool_params pp;
	unsigned lo, hi;

	for (size_t i = 0; i < load_relaxed(&d->n_devs); i++)
		if (d->devs[i]->id == b->dev)
			return d->devs[i];
	settings_pool_params(&d->cfg.writeback, &pp);
	struct wb_dev *dev = wb_dev_new(b->dev, b->dev_name, &pp, &d->grace);
	if (!dev)
		return NULL;
	config_device_ratios(&d->cfg, dev->name, &lo, &hi);
	store_relaxed(&dev->min_ratio, lo);
	store_relaxed(&dev->max_ratio, hi);
	if (load_relaxed(&d->n_devs) >= DAEMON_MAX_DEVS) {
		log_warnx("device %s: %u writeback devices made since wbd "
			  "started, the most it keeps (a device is kept until "
			  "wbd restarts, whether an export still uses it or "
			  "not): restart wbd to add another",
		    b->dev_name, DAEMON_MAX_DEVS);
		wb_dev_free(dev);
		return NULL;
	}
	d->devs[load_relaxed(&d->n_devs)] = dev;
	store_release(&d->n_devs, load_relaxed(&d->n_devs) + 1);
	return dev;
}

/* --- removed exports (see export.h for the steps) --------------------- */

bool
daemon_remove_export(struct daemon *d, struct export *e)
{
	int expect = EXPORT_LIVE;

	if (!atomic_compare_exchange_strong_explicit(&e->removed, &expect,
		EXPORT_REMOVING, memory_order_acq_rel, memory_order_relaxed))
		return false;
	/* Taken after the handshake stopped finding it: once it is over, a
	 * handshake that found it before has counted its connection. */
	store_release(&e->grace_token, grace_start(&d->grace));
	return true;
}

/* Step 2, on E's pool: everything written back and flushed, then RETIRED;
 * on failure REMOVING again (its data stays dirty), tried on a later tick.
 * The last thing it does with E is to say so. */
static void
daemon_retire_run(struct job *job)
{
	struct export *e = container_of(job, struct export, retire_job);

	if (export_flush(e, UINT64_MAX, WB_REASON_SYNC) == 0) {
		log_info("export \"%s\" removed: written back and no longer "
		    "served", e->name);
		store_release(&e->removed, EXPORT_RETIRED);
	} else {
		store_release(&e->removed, EXPORT_REMOVING);
	}
}

/* Step 2: a removed export no handshake can still reach, with no client
 * left, is written back. */
static void
daemon_sync_removed(struct daemon *d, struct export *e)
{
	uint64_t token = load_acquire(&e->grace_token);
	int expect = EXPORT_REMOVING;

	if (token == 0 || !grace_done(&d->grace, token) ||
	    load_acquire(&e->connections) != 0)
		return;
	if (!atomic_compare_exchange_strong_explicit(&e->removed, &expect,
		EXPORT_WRITING_BACK, memory_order_acq_rel,
		memory_order_relaxed))
		return;
	memset(&e->retire_job, 0, sizeof e->retire_job);
	e->retire_job.run = daemon_retire_run;
	pool_submit(e->dev->pool, &e->retire_job);
}

/* Step 3: a written-back export leaves the table and its device; it is
 * freed once no reader can hold it.  tune_lock held (the tables' writer). */
static void
daemon_unlink_retired_locked(struct daemon *d, struct export *e)
{
	uint64_t cached, dirty;

	lock_assert_held(&d->tune_lock);
	cache_file_stats(e->cf, &cached, &dirty);
	if (dirty || cache_file_writeback_pages(e->cf)) {
		/* Never drop dirty data: written back again first. */
		log_warnx("export \"%s\": dirty again after its final "
			  "writeback; writing it back again",
		    e->name);
		store_release(&e->removed, EXPORT_REMOVING);
		return;
	}
	export_table_remove(&d->exports, e);
	wb_dev_remove_target(e->dev, &e->wt);
	store_release(&e->grace_token, grace_start(&d->grace));
	e->freeing_next = d->freeing;
	d->freeing = e;
}

/* Step 4: free what no reader, connection or wbctl flush can hold. */
static void
daemon_free_removed(struct daemon *d)
{
	struct export **p = &d->freeing;

	while (*p) {
		struct export *e = *p;
		uint64_t token = load_acquire(&e->grace_token);
		if (!grace_done(&d->grace, token) ||
		    load_acquire(&e->holds) != 0) {
			p = &e->freeing_next;
			continue;
		}
		*p = e->freeing_next;
		log_debug("export \"%s\": freed", e->name);
		export_free(e);
	}
}

/* The tick's part in removing exports: each step that can be taken. */
static void
daemon_reap_exports(struct daemon *d)
{
	int locked = 0; /* 1 held, -1 busy: next tick */
	struct export *e;

	export_table_foreach(&d->exports, i, e) {
		switch (load_acquire(&e->removed)) {
		case EXPORT_REMOVING:
			daemon_sync_removed(d, e);
			break;
		case EXPORT_RETIRED:
			/* Never waits: a reload may hold it for a while. */
			if (locked == 0)
				locked =
				    pthread_mutex_trylock(&d->tune_lock) == 0 ?
				    1 :
				    -1;
			if (locked > 0)
				daemon_unlink_retired_locked(d, e);
			break;
		}
	}
	if (locked > 0)
		pthread_mutex_unlock(&d->tune_lock);
	daemon_free_removed(d);
}

/* Refuse a client: closed at once, one log line every 10 s at most. */
static void
daemon_refuse(struct daemon *d, int fd, const char *peer, const char *why)
{
	unsigned quiet;

	close(fd);
	add_relaxed(&d->refused_conns, 1);
	if (ratelimit_due(&d->refuse_log, DAEMON_REFUSE_LOG_NS, &quiet))
		log_warnx("%s: refused: %s (%u more refusals not logged)", peer,
		    why, quiet);
}

void
daemon_dispatch_conn(struct daemon *d, int fd, const char *peer,
    const char *client, int idle_s)
{
	const struct limits_conf *lc = &d->cfg.limits;
	char why[128];

	if (load_relaxed(&d->n_conns) >= lc->max_connections) {
		snprintf(why, sizeof why,
		    "already %u connections (limits.max_connections)",
		    lc->max_connections);
		daemon_refuse(d, fd, peer, why);
		return;
	}
	/* The last limits.reserved_connections are for clients holding
	 * none: a few clients filling the rest do not lock out a new one. */
	unsigned held = slots_held(d->slots, client);
	if (held > 0 &&
	    load_relaxed(&d->n_conns) + lc->reserved_connections >=
		lc->max_connections) {
		snprintf(why, sizeof why,
		    "client %s has %u connections and the last %u are for "
		    "new clients (limits.reserved_connections)",
		    client, held, lc->reserved_connections);
		daemon_refuse(d, fd, peer, why);
		return;
	}
	if (!slots_take(d->slots, client)) {
		snprintf(why, sizeof why,
		    "client %s already has %u connections "
		    "(limits.max_connections_per_client)",
		    client, lc->max_connections_per_client);
		daemon_refuse(d, fd, peer, why);
		return;
	}
	struct ioloop *io = d->io[d->next_io++ % d->n_io];
	add_relaxed(&d->n_conns, 1);
	if (ioloop_hand_conn(io, fd, peer, client, idle_s) < 0) {
		sub_relaxed(&d->n_conns, 1);
		slots_release(d->slots, client);
	}
}

int
daemon_install_export(struct daemon *d, const struct export_conf *ec,
    struct backend *b)
{
	if (!export_table_has_room(&d->exports)) {
		log_warnx(
		    "export \"%s\": the export table is full (%u "
		    "exports, counting removed ones not yet written back)",
		    ec->name, EXPORT_TABLE_MAX);
		backend_close(b);
		return -1;
	}
	struct wb_dev *dev = daemon_get_dev(d, b);
	struct export *e = dev ? export_new(ec, dev, b, &d->wb) : NULL;
	char sz[32];

	if (!e) {
		if (dev && errno == ENOSPC)
			log_warnx("export \"%s\": device %s already carries %u "
				  "exports, the most one device takes",
			    ec->name, dev->name, WB_DEV_MAX_TARGETS);
		else
			log_warn("export \"%s\": cannot be set up", ec->name);
		backend_close(b);
		return -1;
	}
	if (ec->journal.path) {
		/* Replayed before anyone sees it; never served without. */
		char why[768];
		if (export_journal_open(e, &ec->journal, &d->grace, why,
			sizeof why) < 0) {
			/* A replay that needed the remote (a partial page to
			 * read, room to make) while it does not answer: wait
			 * for it, as any export does, and replay then. */
			struct backend_state st;
			bool wait = backend_get_state(b, &st) &&
			    !st.connected && pending_wanted(ec, ENOTCONN);
			wb_dev_remove_target(dev, &e->wt);
			export_free(e); /* and its backend */
			if (wait &&
			    pending_add(d->pending, ec, &d->cfg.remote) == 0) {
				log_warnx("export \"%s\": %s; waiting for its "
					  "remote to replay the log",
				    ec->name, why);
				return 0;
			}
			log_errorx("export \"%s\": %s", ec->name, why);
			return -1;
		}
	}
	export_table_add(&d->exports, e);       /* room checked above */
	log_info("export \"%s\": %s, %s, device %s%s", e->name,
	    b->description, size_human(e->size_bytes, sz, sizeof sz),
	    dev->name, (e->tflags & NBD_FLAG_READ_ONLY) ? ", read-only" : "");
	return 0;
}

/* Open the backing devices: files, block devices, remote NBD servers
 * (no threads yet). */
static int
daemon_open_backends(struct daemon *d, struct backend **backends)
{
	char why[512];

	backend_set_io_engine(d->cfg.writeback.io_engine);
	for (size_t i = 0; i < d->cfg.n_exports; i++) {
		const struct export_conf *ec = &d->cfg.exports[i];
		/* What goes wrong is said once: a warning if the export
		 * waits for its remote, an error with the file and line if
		 * wbd cannot start. */
		log_capture_begin(why, sizeof why);
		backends[i] = backing_open(ec, &d->cfg.remote);
		int err = errno;
		log_capture_end();
		if (!backends[i] && pending_wanted(ec, err) &&
		    ec->journal.path &&
		    (backends[i] =
			    pending_open_logged(ec, &d->cfg.remote, why))) {
			continue; /* its log's data served meanwhile */
		}
		if (backends[i] ||
		    (pending_wanted(ec, err) &&
			pending_add(d->pending, ec, &d->cfg.remote) == 0)) {
			if (why[0])
				log_warnx("%s", why);
			continue; /* without a backend: served once its
					   remote answers */
		}
		/* At the backing setting's own line, as wbd -n says it. */
		char where[PATH_MAX + 32];
		config_where_str(&d->cfg, &ec->backing_at, where, sizeof where);
		if (why[0])
			log_errorx("%s: export \"%s\": %s", where, ec->name,
			    why);
		else
			log_errorx("%s: export \"%s\": cannot open backing "
				   "\"%s\": %s",
			    where, ec->name, ec->backing, strerror(err));
		return -1;
	}
	return 0;
}

static int
daemon_create_cache(struct daemon *d)
{
	struct cache_params cp = {
		.size_bytes = d->cfg.cache.size_bytes,
		.page_size = d->cfg.cache.page_size,
		.chunk_bytes = (uint32_t)d->cfg.writeback.max_io_bytes,
	};
	char a[32], b[32], l[32];

	d->cache = cache_new(&cp);
	if (!d->cache) {
		log_error("cannot set up a %llu-byte cache",
		    (unsigned long long)cp.size_bytes);
		return -1;
	}
	cache_set_zero_copy(d->cache, true);
	wb_ctl_init(&d->wb, d->cache, &d->cfg);
	if (d->cfg.memory.prefault) {
		/* Its thread takes no signal: they go to the main loop. */
		sigset_t all, old;
		size_t bytes;
		void *mem = cache_memory(d->cache, &bytes);
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		d->prefault = prefault_start(mem, bytes);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	log_info("cache: %s in %u-byte pages; dirty background %s, limit %s",
	    size_human(d->wb.total_pages * d->wb.page_size, a, sizeof a),
	    d->wb.page_size,
	    size_human(load_relaxed(&d->wb.bg_pages) * d->wb.page_size, b,
		sizeof b),
	    size_human(load_relaxed(&d->wb.limit_pages) * d->wb.page_size, l,
		sizeof l));
	return 0;
}

static int
daemon_create_exports(struct daemon *d, struct backend **backends)
{
	if (daemon_create_cache(d) < 0)
		return -1;
	if (d->cfg.n_exports > EXPORT_TABLE_MAX) {
		log_warnx("%zu exports: the export table holds %u",
		    d->cfg.n_exports, EXPORT_TABLE_MAX);
		return -1;
	}
	for (size_t i = 0; i < d->cfg.n_exports; i++) {
		struct backend *b = backends[i];
		if (!b)
			continue;       /* waiting for its remote */
		backends[i] = NULL;     /* the export's, or closed */
		/* Room for all an install may say: a replay, and why the
		 * export waits for its remote (a reason of up to 768). */
		char why[2048];
		log_capture_begin(why, sizeof why);
		int r = daemon_install_export(d, &d->cfg.exports[i], b);
		log_capture_end();
		if (r < 0) {
			log_errorx("%s:%d: %s", d->cfg.path,
			    d->cfg.exports[i].line, why);
			return -1;
		}
		if (why[0])
			log_warnx("%s", why);
	}
	return 0;
}

/* Per-device settings for a device no export is on are a likely typo. */
static int
daemon_check_devices(struct daemon *d)
{
	for (size_t i = 0; i < d->cfg.writeback.n_devices; i++) {
		const struct device_conf *dc = &d->cfg.writeback.devices[i];
		size_t j;
		for (j = 0; j < load_relaxed(&d->n_devs); j++)
			if (strcmp(d->devs[j]->name, dc->device) == 0)
				break;
		if (j == load_relaxed(&d->n_devs))
			log_warnx("%s:%d: writeback device %s: no export is "
			    "on this device; its settings are unused",
			    d->cfg.path, dc->line, dc->device);
	}
	for (size_t j = 0; j < load_relaxed(&d->n_devs); j++)
		log_info("writeback device %s: %u..%u workers, min_ratio %u, "
			 "max_ratio %u",
		    d->devs[j]->name, d->cfg.writeback.min_workers,
		    d->cfg.writeback.max_workers,
		    load_relaxed(&d->devs[j]->min_ratio),
		    load_relaxed(&d->devs[j]->max_ratio));
	return 0;
}

static int
daemon_start_io_threads(struct daemon *d)
{
	unsigned n = d->cfg.io_threads;
	sigset_t all, old;

	if (n == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus > 0 ? (unsigned)cpus : 1;
	}
	if (n > DAEMON_MAX_IO_THREADS) {
		log_warnx("io_threads: %u asked for (%s), %u started, the most "
			  "wbd runs",
		    n, d->cfg.io_threads ? "io_threads" : "one per CPU",
		    DAEMON_MAX_IO_THREADS);
		n = DAEMON_MAX_IO_THREADS;
	}
	d->io = calloc(n, sizeof *d->io);
	if (!d->io) {
		log_errorx("start-up: out of memory for the I/O threads");
		return -1;
	}

	/* Threads inherit a full signal mask: signals go to the main loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = 0;
	for (unsigned i = 0; i < n; i++) {
		d->io[i] = ioloop_new(d, i);
		if (d->io[i]) {
			d->io[i]->open_conns = &d->n_conns;
			d->io[i]->slots = d->slots;
			d->io[i]->host.limits = d->cfg.limits;
			d->io[i]->host.exports = &d->exports;
			d->io[i]->host.pending = d->pending;
			d->io[i]->host.budget = &d->budget;
			d->io[i]->host.tls = &d->tls;
			d->io[i]->grace = &d->grace;
			d->io[i]->sched_batch = d->cfg.io_threads_batch;
		}
		if (!d->io[i])
			log_errorx("start-up: out of memory for I/O thread %u",
			    i);
		if (!d->io[i] || ioloop_start(d->io[i]) < 0) {
			ioloop_free(d->io[i]);
			d->io[i] = NULL;
			r = -1;
			break;
		}
		d->n_io++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* Install the exports whose remote answered.  Never waits on tune_lock:
 * a reload may hold it for a while (connecting to a new remote), and this
 * is the main loop. */
static void
daemon_install_ready(struct daemon *d)
{
	struct pending_ready r;

	if (pthread_mutex_trylock(&d->tune_lock) != 0)
		return;
	while (pending_poll(d->pending, !load_relaxed(&d->stopping), &r)) {
		if (daemon_install_export(d, &r.ec, r.backend) < 0)
			log_warnx("export \"%s\": cannot be added", r.ec.name);
		r.backend = NULL;       /* the export's, or closed */
		pending_ready_clear(&r);
	}
	pthread_mutex_unlock(&d->tune_lock);
}

/*
 * Give the memory malloc keeps free back to the kernel, every
 * DAEMON_TRIM_S: requests' buffers freed after a burst (a storm of
 * clients that hung up with megabytes in flight) otherwise stay in
 * malloc's arenas, and the daemon's RSS only ever grows (measured: 1.2 GiB
 * after such a storm with a 128 MiB cache, 0.2 GiB once trimmed).  The
 * arenas are few (main.c), so one pass is short.
 */
static void
daemon_trim_memory(struct daemon *d, uint64_t now)
{
	if (now - d->last_trim_ns < DAEMON_TRIM_S * 1000000000ull)
		return;
	d->last_trim_ns = now;
	malloc_trim(0);
	uint64_t took = now_ns() - now;
	if (took > 50000000ull)
		log_debug("malloc_trim took %llu ms",
		    (unsigned long long)(took / 1000000));
}

/* Every tick: periodic writeback when dirty_writeback_centisecs (which
 * may be tuned at run time) have passed since the last pass; memory
 * trimmed now and then. */
/*
 * Write logs give their space back as the backing device is written and
 * flushed: a reclaim (on the export's pool) every dirty_writeback interval
 * (5 s if periodic writeback is off), or at once once a log is half full.
 */
static void
daemon_reclaim_journals(struct daemon *d, unsigned cs)
{
	uint64_t interval = cs ? cs * 10000000ull : 5000000000ull;
	struct export *e;

	if (load_relaxed(&d->stopping))
		return;
	export_table_foreach(&d->exports, j, e) {
		if (e->journal && load_acquire(&e->removed) == EXPORT_LIVE)
			xj_tick(e->journal, interval);
	}
}

static void
daemon_periodic_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = w->data;
	unsigned cs = load_relaxed(&d->wb.writeback_cs);
	uint64_t now = now_ns();

	daemon_reap_exports(d);
	daemon_install_ready(d);
	daemon_trim_memory(d, now);
	daemon_reclaim_journals(d, cs);
	if (cs == 0 || now - d->last_periodic_ns < cs * 10000000ull)
		return;
	d->last_periodic_ns = now;
	for (size_t i = 0; i < load_relaxed(&d->n_devs); i++)
		wb_kick_periodic(d->devs[i]);
}

/* Shutdown writeback of one export, on its device's pool.  Allocated
 * with the export table, at start-up. */
struct drain_job {
	struct job job;
	struct export *e;
	int r;
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
	unsigned *left;                 /* jobs not finished, under lock */
	bool done;                      /* under lock */
	/* What is left of the export, in pages dirty or under writeback:
	 * at the last progress report (or when the drain began), and at
	 * this one.  The main thread's alone. */
	uint64_t reported_pages, left_pages;
};

/*
 * A device that keeps failing is tried again, with back-off, until its
 * data is written and flushed: wbd never exits holding data it
 * acknowledged (SIGKILL is the operator's way to give it up).
 */
static void
drain_job_run(struct job *job)
{
	struct drain_job *dj = (struct drain_job *)job;
	struct export *e = dj->e;
	unsigned wait_s = 1;
	char b[32];

	for (unsigned attempt = 1;; attempt++) {
		dj->r = export_flush(e, UINT64_MAX, WB_REASON_SHUTDOWN);
		if (dj->r == 0)
			return;
		uint64_t left = cache_file_unwritten_pages(e->cf);
		char what[96];
		if (left)
			snprintf(what, sizeof what,
			    "%s of dirty data not written back",
			    size_human(left * e->wb->page_size, b, sizeof b));
		else
			snprintf(what, sizeof what,
			    "all written, but the device's flush failed");
		errno = -dj->r;
		log_warn("stopping: export \"%s\" (%s, device %s): %s "
			 "(attempt %u); trying again in %u s: wbd does not "
			 "exit while it holds data it acknowledged (SIGKILL "
			 "gives it up, and LOSES it)",
		    e->name, e->backend->description, e->dev->name, what,
		    attempt, wait_s);
		sleep(wait_s);
		if (wait_s < DAEMON_DRAIN_RETRY_MAX_S)
			wait_s = wait_s * 2 < DAEMON_DRAIN_RETRY_MAX_S ?
			    wait_s * 2 :
			    DAEMON_DRAIN_RETRY_MAX_S;
	}
}

static void
drain_job_done(struct job *job)
{
	struct drain_job *dj = (struct drain_job *)job;

	pthread_mutex_lock(dj->lock);
	dj->done = true;
	if (--*dj->left == 0)
		pthread_cond_signal(dj->cond);
	pthread_mutex_unlock(dj->lock);
}

/* "12 s", "7 min", "3.5 h": a time left, for the log. */
static const char *
daemon_duration_human(double s, char *buf, size_t len)
{
	if (s < 100)
		snprintf(buf, len, "%.0f s", s < 1 ? 1 : s);
	else if (s < 100 * 60)
		snprintf(buf, len, "%.0f min", s / 60);
	else
		snprintf(buf, len, "%.1f h", s / 3600);
	return buf;
}

/* "3.1 MiB/s, about 6 s to go", or "no progress in 5 s, time left
 * unknown": the rate at which what is left shrank from BEFORE_PAGES to
 * LEFT_PAGES in ELAPSED_NS, and the time LEFT_PAGES take at that rate. */
static void
daemon_drain_rate(struct daemon *d, uint64_t before_pages, uint64_t left_pages,
    uint64_t elapsed_ns, char *buf, size_t len)
{
	double s = (double)(elapsed_ns ? elapsed_ns : 1) / 1e9;
	uint64_t gone =
	    before_pages > left_pages ? before_pages - left_pages : 0;
	double bps = (double)gone * d->wb.page_size / s;
	char rate[32], eta[32];

	if (gone == 0) {
		snprintf(buf, len, "no progress in %.0f s, time left unknown",
		    s);
		return;
	}
	size_human((uint64_t)bps, rate, sizeof rate);
	snprintf(buf, len, "%s/s, about %s to go", rate,
	    daemon_duration_human((double)left_pages * d->wb.page_size / bps,
		eta, sizeof eta));
}

/*
 * A progress report of the drain (LOCK held): a line for the whole, then
 * one for each export not finished, all by one measure, what is left
 * (pages dirty or under writeback), each read once, so that the exports'
 * lines add up to the whole's.  The rate is how fast what is left shrank
 * since the last report (since the drain began for the first); the time
 * left is what is left at that rate.  The whole's line also goes to the
 * service manager, with more time.
 */
static void
daemon_drain_report(struct daemon *d, uint64_t elapsed_ns, unsigned running)
{
	struct drain_job *jobs = d->drain_jobs; /* by slot */
	uint64_t total = 0, before = 0;
	struct export *e;
	char b[32], rate[96], line[256];

	export_table_foreach(&d->exports, i, e) {
		if (jobs[i].e != e)
			continue; /* read-only: nothing to write */
		jobs[i].left_pages = cache_file_unwritten_pages(e->cf);
		total += jobs[i].left_pages;
		before += jobs[i].reported_pages;
	}
	daemon_drain_rate(d, before, total, elapsed_ns, rate, sizeof rate);
	snprintf(line, sizeof line,
	    "stopping: writing back, %s of dirty data left, %u export(s) not "
	    "finished; %s",
	    size_human(total * d->wb.page_size, b, sizeof b), running, rate);
	log_info("%s", line);
	notify_extend_timeout(DAEMON_DRAIN_EXTEND_S * 1000000ull, line);
	export_table_foreach(&d->exports, i, e) {
		if (jobs[i].e != e)
			continue;
		struct drain_job *dj = &jobs[i];
		if (!dj->done || dj->left_pages) {
			daemon_drain_rate(d, dj->reported_pages, dj->left_pages,
			    elapsed_ns, rate, sizeof rate);
			log_info("stopping: export \"%s\" (device %s): %s "
				 "left; %s",
			    e->name, e->dev->name,
			    size_human(dj->left_pages * d->wb.page_size, b,
				sizeof b),
			    rate);
		}
		dj->reported_pages = dj->left_pages;
	}
}

/* Stop signals received during the shutdown (daemon_signal_again): how
 * many, and the last one. */
static volatile sig_atomic_t daemon_again_count, daemon_again_sig;

void
daemon_signal_again(int sig)
{
	daemon_again_sig = sig;
	daemon_again_count = daemon_again_count + 1;
}

/*
 * Wait, LOCK held, until no drain job is left RUNNING, with a progress
 * report every DAEMON_DRAIN_REPORT_S (daemon_drain_report), so that a
 * slow drain is never killed half-way by TimeoutStopSec=.  A device that
 * keeps failing keeps it going (drain_job_run).  A stop signal received
 * again is answered with a report at once: wbd exits when the data is
 * written, not before, and says so.
 */
static void
daemon_drain_wait(struct daemon *d, pthread_mutex_t *lock, pthread_cond_t *cond,
    unsigned *running, uint64_t began_ns)
{
	uint64_t last_ns = began_ns;
	sig_atomic_t again_seen = 0;

	while (*running > 0) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(cond, lock, &until);
		uint64_t now = now_ns();
		if (*running == 0)
			continue;
		sig_atomic_t again = daemon_again_count;
		if (again != again_seen) {
			again_seen = again;
			log_warnx("received %s again: still writing back; wbd "
				  "exits once every dirty page is written back "
				  "and flushed, and not before (SIGKILL would "
				  "lose what is left)",
			    strsignal(daemon_again_sig));
		} else if (now - last_ns <
		    DAEMON_DRAIN_REPORT_S * 1000000000ull) {
			continue;
		}
		daemon_drain_report(d, now - last_ns, *running);
		last_ns = now;
	}
}

/*
 * Write back everything (shutdown): every export on its own device's
 * workers, all devices at once, so a device that fails or is slow holds up
 * no other.  Returns once every export is written back and flushed.
 */
static void
daemon_drain_all(struct daemon *d)
{
	char b[32], line[96];
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	unsigned running = 0;
	struct drain_job *jobs = d->drain_jobs; /* by slot */
	uint64_t pages = 0;
	struct export *e;

	/* tune_lock held: no reload adds or removes, and the tick is over. */
	export_table_foreach(&d->exports, i, e) {
		if (e->tflags & NBD_FLAG_READ_ONLY) {
			jobs[i].e = NULL;
			continue;
		}
		jobs[i] = (struct drain_job){
			.job = { .run = drain_job_run, .done = drain_job_done },
			.e = e,
			.lock = &lock,
			.cond = &cond,
			.left = &running,
			.reported_pages = cache_file_unwritten_pages(e->cf),
		};
		pages += jobs[i].reported_pages;
	}
	if (pages) {
		size_human(pages * d->wb.page_size, b, sizeof b);
		snprintf(line, sizeof line,
		    "stopping: writing back %s of dirty data", b);
		log_info("shutdown: writing back %s of dirty data", b);
		notify_extend_timeout(DAEMON_DRAIN_EXTEND_S * 1000000ull, line);
	}
	uint64_t began_ns = now_ns();
	pthread_mutex_lock(&lock);
	export_table_foreach(&d->exports, i, e) {
		if (jobs[i].e != e)
			continue;
		running++;
		pool_submit(e->dev->pool, &jobs[i].job);
	}
	daemon_drain_wait(d, &lock, &cond, &running, began_ns);
	pthread_mutex_unlock(&lock);
}

/* --- lifecycle --------------------------------------------------------- */

/* An accepted socket from the listeners (main thread). */
static void
daemon_accept(void *arg, int fd, const char *peer, const char *client,
    int idle_s)
{
	daemon_dispatch_conn(arg, fd, peer, client, idle_s);
}

/*
 * Each connection is a descriptor: raise the soft RLIMIT_NOFILE to the
 * hard one, and say so if even that does not cover limits.max_connections,
 * the connections each remote export may open to its remote (at most
 * remote.max_connections, two descriptors each: libnbd's socket and
 * wbd's wake-up for it), and a margin for listeners, files, write logs,
 * the control socket and the event loops.  Counted for the exports at
 * start-up.
 */
static void
daemon_raise_nofile(struct daemon *d)
{
	struct rlimit rl;
	unsigned remotes = 0;

	for (size_t i = 0; i < d->cfg.n_exports; i++)
		remotes += backend_is_uri(d->cfg.exports[i].backing);
	rlim_t to_remotes = (rlim_t)remotes * d->cfg.remote.max_connections * 2;
	rlim_t want = (rlim_t)d->cfg.limits.max_connections + to_remotes + 256;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
		log_warnx(
		    "the open file limit (%llu) does not cover "
		    "limits.max_connections (%u), %llu for the connections "
		    "of %u remote export(s) (remote.max_connections %u, two "
		    "files each) and wbd's own files (%llu in all): raise it "
		    "(LimitNOFILE=, ulimit -n) or lower limits.max_connections; "
		    "clients beyond it are refused",
		    (unsigned long long)rl.rlim_cur,
		    d->cfg.limits.max_connections,
		    (unsigned long long)to_remotes, remotes,
		    d->cfg.remote.max_connections, (unsigned long long)want);
}

int
daemon_init(struct daemon *d, struct wbd_config *cfg)
{
	memset(d, 0, sizeof *d);
	d->cfg = *cfg;
	memset(cfg, 0, sizeof *cfg);
	d->ctl_fd = -1;
	d->started_ns = now_ns();
	lock_init(&d->tune_lock);
	lock_init(&d->status_lock);
	grace_init(&d->grace);
	d->loop = ev_default_loop(EVFLAG_AUTO);
	d->listeners = (struct listeners){ .loop = d->loop,
		.accept = daemon_accept,
		.arg = d,
		.spare_fd = -1 };
	d->slots = slots_new(d->cfg.limits.max_connections_per_client);
	budget_init(&d->budget, d->cfg.limits.max_inflight_bytes,
	    d->cfg.limits.max_client_share);
	tls_server_init(&d->tls);
	daemon_raise_nofile(d);
	d->pending = pending_new();
	d->opened = calloc(d->cfg.n_exports ? d->cfg.n_exports : 1,
	    sizeof *d->opened);
	d->devs = calloc(DAEMON_MAX_DEVS, sizeof *d->devs);
	d->drain_jobs = calloc(EXPORT_TABLE_MAX, sizeof *d->drain_jobs);
	if (!d->loop || !d->pending || !d->opened || !d->devs || !d->slots ||
	    !d->drain_jobs || export_table_init(&d->exports) < 0 ||
	    export_table_set_default(&d->exports, d->cfg.default_export) < 0) {
		log_errorx("start-up: out of memory");
		return -1;
	}
	return 0;
}

void
daemon_warn_exposed(const struct wbd_config *cfg)
{
	const bool tls_on = cfg->tls.mode != TLS_OFF;
	const char *exposed[8];
	char names[256] = "";
	size_t n = config_exposed_listeners(cfg, tls_on, exposed, 8);
	size_t len = 0, shown = 0, open = 0;

	for (size_t i = 0; i < cfg->n_exports; i++) {
		const struct export_conf *ec = &cfg->exports[i];
		if (!config_export_open_to_all(ec))
			continue;
		open++;
		if (shown < 4 && len < sizeof names) {
			len += (size_t)snprintf(names + len, sizeof names - len,
			    "%s\"%.64s\"", shown ? ", " : "", ec->name);
			shown++;
		}
	}
	for (size_t i = 0; i < n && i < 8; i++)
		log_warnx(
		    "listen tcp %s: not a loopback address, and TLS is "
		    "off: anyone who reaches it can read and write export%s "
		    "%s%s, which ha%s no allow list (see \"Security\" in "
		    "wbd(8))",
		    exposed[i], open == 1 ? "" : "s", names,
		    open > shown ? ", ..." : "", open == 1 ? "s" : "ve");
}

/* The tls group: credentials loaded and checked before serving. */
static int
daemon_open_tls(struct daemon *d)
{
	struct tls_creds *cr = NULL;
	char err[512];

	if (d->cfg.tls.mode != TLS_OFF &&
	    !(cr = tls_creds_load(&d->cfg.tls, err, sizeof err))) {
		log_warnx("start-up: TLS: %s", err);
		return -1;
	}
	tls_server_set(&d->tls, d->cfg.tls.mode, cr);
	return 0;
}

int
daemon_open(struct daemon *d)
{
	if (daemon_open_tls(d) < 0 || activation_take(&d->act) < 0 ||
	    daemon_open_backends(d, d->opened) < 0 ||
	    listeners_open(&d->listeners, &d->act, &d->cfg) < 0)
		return -1;
	daemon_warn_exposed(&d->cfg);
	return 0;
}

int
daemon_start(struct daemon *d)
{
	ev_loop_fork(d->loop);          /* harmless if it did not fork */
	if (daemon_create_exports(d, d->opened) < 0 ||
	    daemon_check_devices(d) < 0 || daemon_start_io_threads(d) < 0)
		return -1;
	d->last_periodic_ns = now_ns();
	ev_timer_init(&d->periodic, daemon_periodic_cb, DAEMON_TICK_S,
	    DAEMON_TICK_S);
	d->periodic.data = d;
	ev_timer_start(d->loop, &d->periodic);
	if (listeners_adopt_rest(&d->listeners, &d->act) < 0)
		return -1;
	listeners_start(&d->listeners);
	log_info("wbd %s ready: %zu export(s), %u I/O thread(s), %zu "
		 "writeback device(s)%s",
	    WBD_VERSION, daemon_n_exports(d), d->n_io, load_relaxed(&d->n_devs),
	    pending_count(d->pending) ? "; some exports wait for "
					"their remote" :
					"");
	return 0;
}

void
daemon_run(struct daemon *d)
{
	ev_run(d->loop, 0);
}

void
daemon_stop(struct daemon *d, const char *why)
{
	if (atomic_exchange_explicit(&d->stopping, true, memory_order_acq_rel))
		return;
	store_relaxed(&d->wb.stopping, 1);
	log_info("%s: finishing requests in flight, then flushing and exiting",
	    why);
	ev_break(d->loop, EVBREAK_ALL);
}

int
daemon_shutdown(struct daemon *d)
{
	store_release(&d->stopping, true);
	store_relaxed(&d->wb.stopping, 1);
	listeners_close(&d->listeners);
	/* Freed in daemon_free: wbctl status may still read it. */
	prefault_stop(d->prefault);
	/* The I/O threads cut a connection that takes longer than 30 s. */
	if (d->n_io)
		notify_extend_timeout(DAEMON_DRAIN_EXTEND_S * 1000000ull,
		    "stopping: finishing the requests in flight");
	for (unsigned i = 0; i < d->n_io; i++)
		ioloop_drain(d->io[i]);
	for (unsigned i = 0; i < d->n_io; i++)
		ioloop_join(d->io[i]);
	ev_timer_stop(d->loop, &d->periodic);
	if (!d->cache) {
		pthread_mutex_lock(&d->tune_lock);
		d->drained = true;
		pthread_mutex_unlock(&d->tune_lock);
		return 0;               /* never started: nothing cached */
	}
	/* A reload still running on the control thread ends first, and none
	 * adds an export during the drain. */
	pthread_mutex_lock(&d->tune_lock);
	pending_stop(d->pending);
	pthread_mutex_lock(&d->status_lock);
	d->draining = true;
	d->drain_began_ns = now_ns();
	pthread_mutex_unlock(&d->status_lock);
	daemon_drain_all(d);
	/* No status reads as the drain's guest from here. */
	pthread_mutex_lock(&d->status_lock);
	d->draining = false;
	pthread_mutex_unlock(&d->status_lock);
	d->drained = true;
	pthread_mutex_unlock(&d->tune_lock);
	/* No job outlives its owner: the device pools end here, running
	 * what is queued, while the control thread (stopped after this)
	 * still takes the completions of its flush jobs. */
	for (size_t i = 0; i < load_relaxed(&d->n_devs); i++) {
		pool_free(d->devs[i]->pool);
		d->devs[i]->pool = NULL;
	}
	log_info("shutdown complete: all dirty data written back and flushed");
	return 0;
}

void
daemon_free(struct daemon *d)
{
	listeners_close(&d->listeners);
	activation_free(&d->act);
	for (unsigned i = 0; i < d->n_io; i++)
		ioloop_free(d->io[i]);
	free(d->io);
	for (size_t i = 0; d->devs && i < load_relaxed(&d->n_devs); i++)
		wb_dev_free(d->devs[i]);
	free(d->devs);
	if (d->exports.slots.v)
		export_table_free(&d->exports);
	while (d->freeing) {
		struct export *e = d->freeing;
		d->freeing = e->freeing_next;
		export_free(e);
	}
	for (size_t i = 0; d->opened && i < d->cfg.n_exports; i++)
		backend_close(d->opened[i]);
	free(d->opened);
	free(d->drain_jobs);
	slots_free(d->slots);
	budget_fini(&d->budget);
	tls_server_destroy(&d->tls);
	if (d->pending) {
		pending_stop(d->pending);
		pending_free(d->pending);
	}
	prefault_free(d->prefault);
	cache_free(d->cache);
	config_free(&d->cfg);
	if (d->loop)
		ev_loop_destroy(d->loop);
	pthread_mutex_destroy(&d->tune_lock);
	pthread_mutex_destroy(&d->status_lock);
	grace_destroy(&d->grace);
}

