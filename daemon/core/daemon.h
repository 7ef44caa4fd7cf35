/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.h - the daemon as a whole: configuration, listeners, I/O threads,
 * exports and writeback devices, and their lifecycle (daemon.c): opened
 * before detaching, started, run, shut down (every dirty byte written
 * back), freed.  main.c drives it; reload.c changes it at run time.
 *
 * Built and torn down by the main thread.  While running, exports are
 * added and removed (a reload, under tune_lock; freed by the tick after a
 * grace period, see export.h) and the device table only grows; both are
 * read without a lock (see export-table.h); the configuration is changed
 * only under tune_lock, by a reload or wbctl tune.
 */
#ifndef WBD_DAEMON_H
#define WBD_DAEMON_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "atomics.h"
#include "budget.h"
#include "activation.h"
#include "config.h"
#include "export-table.h"
#include "grace.h"
#include "listener.h"
#include "ratelimit.h"
#include "tls.h"
#include "writeback.h"

struct backend;
struct drain_job;
struct export;
struct ioloop;
struct pending_table;
struct prefault;
struct wb_dev;

struct daemon {
	struct wbd_config cfg;          /* tune_lock, once running */
	struct ev_loop *loop;           /* the main thread's: accept, signals */

	struct ioloop **io;
	unsigned n_io;
	unsigned next_io;               /* round-robin for new connections */
	_Atomic unsigned n_conns;       /* open connections */
	struct slots *slots;            /* per client (slots.c) */
	_Atomic unsigned long refused_conns; /* refused by the limits */
	/* The control socket's (ctl.c), atomics: clients open, refused at
	 * accept by control.max_clients and co., closed idle
	 * (control.idle_timeout_s), requests too long. */
	_Atomic unsigned ctl_clients;
	_Atomic uint64_t ctl_refused, ctl_idle_closed, ctl_oversized;
	/* The metrics endpoint's (metrics-http.c), atomics: clients served
	 * now, refused by metrics.max_connections and co. */
	_Atomic unsigned metrics_clients;
	_Atomic uint64_t metrics_refused;
	/* Connections closed by metrics.timeout_s or to make room (atomic). */
	_Atomic uint64_t metrics_cut;
	struct ratelimit refuse_log;
	struct budget budget;  /* limits.max_inflight_bytes */
	struct tls_server tls; /* the tls group, swapped by reload */

	struct listeners listeners;
	/* Sockets systemd passed, until claimed (daemon_open, ctl_open) or
	 * served as extra listeners (daemon_start). */
	struct activation act;
	/* Opened before detaching, made exports by daemon_start. */
	struct backend **opened;

	struct export_table exports;
	struct wb_dev **devs;
	_Atomic size_t n_devs;
	/* Who reads the tables without a lock: the I/O threads, the control
	 * thread, the device pools' workers (grace.h). */
	struct grace grace;
	/* Removed exports out of the table, to be freed once no reader can
	 * hold them (main thread: the tick). */
	struct export *freeing;

	struct cache *cache;
	struct prefault *prefault; /* memory.prefault: stopped at shutdown,
	                              freed with the daemon */
	struct wb_ctl wb;
	ev_timer periodic;              /* the tick: dirty_writeback_centisecs */
	uint64_t last_periodic_ns;
	uint64_t last_trim_ns; /* daemon_trim_memory */
	/* Shutdown writeback, one job per export, allocated at start-up so
	 * that the final drain cannot fail for want of memory. */
	struct drain_job *drain_jobs;

	uint64_t started_ns;

	/* The control socket (ctl.c) and its thread. */
	int ctl_fd;
	bool ctl_passed; /* ctl_fd came from systemd */
	struct ioloop *ctl_io;
	struct ctl_state *ctl;
	/* Serialises tune and reload (control thread, main thread). */
	pthread_mutex_t tune_lock;
	/* The shutdown drain holds tune_lock for as long as the data takes
	 * to write back; wbctl status is answered meanwhile as its guest
	 * (ctl-status.c): under status_lock, while draining is set, the
	 * drain changes nothing tune_lock guards, and it clears draining
	 * (under status_lock) before it lets go of tune_lock.  drained (under
	 * tune_lock) is set then: the devices' pools are freed after it. */
	pthread_mutex_t status_lock;
	bool draining;           /* status_lock */
	bool drained;            /* tune_lock */
	uint64_t drain_began_ns; /* status_lock: when draining was set */
	/* Exports waiting for their remote (pending.c). */
	struct pending_table *pending;
	/* Atomic: set once by the main thread (daemon_stop, daemon_shutdown)
	 * with a release store, read by the control thread (which then
	 * refuses every command) with an acquire load. */
	_Atomic bool stopping;
};

/* The device table never moves: it is allocated at its full size at
 * start-up, entries are only appended (by the main thread at start-up, or
 * a reload under tune_lock) and published by a release store of the
 * count, so other threads read it without a lock.  A device is never
 * freed while the daemon runs; as many as the export table holds exports,
 * so that every configuration the checker accepts can start. */
#define DAEMON_MAX_DEVS CONFIG_MAX_EXPORTS

/* --- lifecycle (main thread) -------------------------------------------- */

/* Set up D for CFG (which it takes over); 0, or -1 if out of memory. */
int daemon_init(struct daemon *d, struct wbd_config *cfg);
/* Everything that can fail on bad input, before detaching: the sockets
 * systemd passed, the backing devices (an unreachable remote waits) and
 * the listeners.  -1 after logging why. */
int daemon_open(struct daemon *d);
/* After detaching: the cache, the exports and their devices, the I/O
 * threads, the tick; then accept connections.  -1 after logging why. */
int daemon_start(struct daemon *d);
/* Warn about each TCP listener that lets anyone who reaches it read and
 * write exports (config_exposed_listeners): at start and in wbd -n. */
void daemon_warn_exposed(const struct wbd_config *cfg);
/* Serve until daemon_stop. */
void daemon_run(struct daemon *d);
/* Ask the main loop to return (its thread: a signal handler). */
void daemon_stop(struct daemon *d, const char *why);
/*
 * Stop accepting, finish the requests in flight, and write back and flush
 * every export.  Returns the number of exports that could not be.
 */
int daemon_shutdown(struct daemon *d);

/*
 * A stop signal received again while shutting down (async-signal-safe: a
 * signal handler's call).  Nothing is given up for it: the drain answers
 * it at its next wake-up (within a second) with a line saying what is
 * left and that wbd exits once all of it is written back.
 */
void daemon_signal_again(int sig);
/* Free everything, once no other thread runs. */
void daemon_free(struct daemon *d);

/* --- what reload and the control socket use ----------------------------- */

static inline size_t
daemon_n_exports(struct daemon *d)
{
	return export_table_count(&d->exports);
}

static inline size_t
daemon_n_devs(struct daemon *d)
{
	return load_acquire(&d->n_devs);
}

/* The device of backend B, created (with its pool) on first use. */
struct wb_dev *daemon_get_dev(struct daemon *d, const struct backend *b);
/*
 * Create the export of EC on its opened backend B (which it then owns, or
 * closes on failure): its device (and pool) if new, its cache file, its
 * place in the table.  Main thread at start-up, or under tune_lock.
 * Returns 0 or -1, after logging why.
 */
int daemon_install_export(struct daemon *d, const struct export_conf *ec,
    struct backend *b);
/* Stop serving E (a reload, under tune_lock): no new clients; written
 * back once idle, then freed (export.h).  False if it was not live. */
bool daemon_remove_export(struct daemon *d, struct export *e);
/* Hand an accepted socket to the next I/O thread, or refuse it by the
 * limits (main thread); IDLE_S is its listener's idle_timeout_s, or -1. */
void daemon_dispatch_conn(struct daemon *d, int fd, const char *peer,
    const char *client, int idle_s);

/* Two strings that may be NULL (optional settings) are the same. */
static inline bool
str_equal(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

#endif
