/*
 * daemon.h - the daemon as a whole: configuration, listeners, I/O threads,
 * exports and writeback devices.  Built and torn down by the main thread;
 * after start-up the export and device tables are read-only, so I/O threads
 * read them without a lock.
 */
#ifndef WBD_DAEMON_H
#define WBD_DAEMON_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "config.h"
#include "export-table.h"
#include "writeback.h"

struct backend;
struct export;
struct ioloop;
struct listener;
struct pending_table;
struct wb_dev;

struct daemon {
	struct wbd_config cfg;
	struct ev_loop *loop;           /* the main thread's: accept, signals */

	struct ioloop **io;
	unsigned n_io;
	unsigned next_io;               /* round-robin for new connections */
	unsigned n_conns;               /* open connections (atomic) */
	unsigned max_conns;

	struct listener *listeners;

	struct export_table exports;
	struct wb_dev **devs;
	size_t n_devs;

	struct cache *cache;
	struct wb_ctl wb;
	ev_timer periodic;              /* dirty_writeback_centisecs */
	uint64_t last_periodic_ns;

	ev_signal sig_term, sig_int, sig_hup;
	uint64_t started_ns;

	/* The control socket (ctl.c) and its thread. */
	int ctl_fd;
	struct ioloop *ctl_io;
	struct ctl_state *ctl;
	/* Serialises tune and reload (control thread, main thread). */
	pthread_mutex_t tune_lock;
	/* Exports waiting for their remote (pending.c). */
	struct pending_table *pending;
	bool stopping;
	int exit_status;
};

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
/* Write back removed exports whose last client has gone (main thread). */
void daemon_retire_exports(struct daemon *d);

#define DAEMON_MAX_CONNS_DEFAULT 1024
/* The device table never moves: it is allocated at its full size at
 * start-up, entries are only appended (by the main thread at start-up, or
 * a reload under tune_lock) and published by a release store of the
 * count, so other threads read it without a lock (as the export table). */
#define DAEMON_MAX_DEVS         256

static inline size_t
daemon_n_exports(struct daemon *d)
{
	return export_table_count(&d->exports);
}

static inline size_t
daemon_n_devs(struct daemon *d)
{
	return __atomic_load_n(&d->n_devs, __ATOMIC_ACQUIRE);
}

/* Two strings that may be NULL (optional settings) are the same. */
static inline bool
str_equal(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Hand an accepted socket to the next I/O thread (main thread). */
void daemon_dispatch_conn(struct daemon *d, int fd, const char *peer);
/*
 * Reread the configuration and apply what can change at run time (main or
 * control thread).  Returns 0, or -1 with the error in ERR; MSG says what
 * changed and what needs a restart.
 */
int daemon_reload(struct daemon *d, char *msg, size_t msglen);

#endif
