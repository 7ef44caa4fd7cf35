/*
 * daemon.c - the daemon-wide tables that I/O threads consult: export lookup
 * for the handshake, and the hand-off of new connections (main thread) to
 * I/O threads.  The export table is read-only after start-up.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "daemon.h"
#include "export.h"
#include "ioloop.h"
#include "backend.h"
#include "log.h"
#include "nbd-proto.h"
#include "pending.h"
#include "pool.h"
#include "settings.h"
#include "size.h"
#include "wbdev.h"
#include "writeback.h"

static bool
export_live(struct export *e)
{
	return !__atomic_load_n(&e->removed, __ATOMIC_ACQUIRE);
}

struct export *
daemon_find_export(struct daemon *d, const char *name)
{
	size_t n = daemon_n_exports(d);

	for (size_t i = 0; i < n; i++) {
		struct export *e = d->exports[i];
		/* "" is the default export: the first one still served. */
		if (export_live(e) && (!*name || strcmp(e->name, name) == 0))
			return e;
	}
	return NULL;
}

struct export *
daemon_nth_export(struct daemon *d, size_t nth)
{
	size_t n = daemon_n_exports(d);

	for (size_t i = 0; i < n; i++)
		if (export_live(d->exports[i]) && nth-- == 0)
			return d->exports[i];
	return NULL;
}

int
daemon_add_export(struct daemon *d, struct export *e)
{
	if (d->n_exports >= DAEMON_MAX_EXPORTS)
		return -1;
	d->exports[d->n_exports] = e;
	__atomic_store_n(&d->n_exports, d->n_exports + 1, __ATOMIC_RELEASE);
	return 0;
}

static void
pool_params_from_config(const struct wbd_config *cfg, struct pool_params *pp)
{
	pp->min_workers = cfg->writeback.min_workers;
	pp->max_workers = cfg->writeback.max_workers;
	pp->grow_delay_ms = cfg->writeback.worker_spawn_ms;
	pp->idle_timeout_ms = cfg->writeback.worker_idle_ms;
}

struct wb_dev *
daemon_get_dev(struct daemon *d, const struct backend *b)
{
	struct pool_params pp;

	for (size_t i = 0; i < d->n_devs; i++)
		if (d->devs[i]->id == b->dev)
			return d->devs[i];
	pool_params_from_config(&d->cfg, &pp);
	struct wb_dev *dev = wb_dev_new(b->dev, b->dev_name, &pp);
	if (!dev)
		return NULL;
	config_device_ratios(&d->cfg, dev->name, &dev->min_ratio,
	    &dev->max_ratio);
	if (d->n_devs >= DAEMON_MAX_DEVS) {
		log_warnx("more than %u writeback devices", DAEMON_MAX_DEVS);
		wb_dev_free(dev);
		return NULL;
	}
	d->devs[d->n_devs] = dev;
	__atomic_store_n(&d->n_devs, d->n_devs + 1, __ATOMIC_RELEASE);
	return dev;
}

/* A removed export: written back once idle (on its pool), then retired. */
static void
daemon_retire_run(struct job *job)
{
	struct export *e = (struct export *)((char *)job -
	    offsetof(struct export, retire_job));

	if (wb_flush_export(e, UINT64_MAX, WB_REASON_SYNC) == 0) {
		log_info("export \"%s\" removed: written back and no longer "
		    "served", e->name);
		__atomic_store_n(&e->removed, EXPORT_RETIRED, __ATOMIC_RELEASE);
	} else {
		/* Tried again on the next tick; the data stays dirty. */
		__atomic_store_n(&e->removed, EXPORT_REMOVING, __ATOMIC_RELEASE);
	}
}

void
daemon_retire_exports(struct daemon *d)
{
	size_t n = daemon_n_exports(d);

	for (size_t i = 0; i < n; i++) {
		struct export *e = d->exports[i];
		int expect = EXPORT_REMOVING;
		if (__atomic_load_n(&e->connections, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&e->removed, &expect,
		    EXPORT_WRITING_BACK, false, __ATOMIC_ACQ_REL,
		    __ATOMIC_RELAXED)) {
			memset(&e->retire_job, 0, sizeof e->retire_job);
			e->retire_job.run = daemon_retire_run;
			pool_submit(e->dev->pool, &e->retire_job);
		}
	}
}

/* Mailbox message carrying a new connection to an I/O thread. */
struct new_conn {
	struct job job;
	int fd;
	char peer[64];
};

static void
new_conn_done(struct job *job)
{
	struct new_conn *nc = (struct new_conn *)job;

	conn_start(job->owner, nc->fd, nc->peer);
	free(nc);
}

void
daemon_dispatch_conn(struct daemon *d, int fd, const char *peer)
{
	struct new_conn *nc;

	if (__atomic_load_n(&d->n_conns, __ATOMIC_RELAXED) >= d->max_conns) {
		log_warnx("%s: refused: already %u connections", peer,
		    d->max_conns);
		close(fd);
		return;
	}
	nc = calloc(1, sizeof *nc);
	if (!nc) {
		log_warnx("%s: out of memory, dropping connection", peer);
		close(fd);
		return;
	}
	nc->fd = fd;
	snprintf(nc->peer, sizeof nc->peer, "%s", peer);
	nc->job.done = new_conn_done;
	nc->job.owner = d->io[d->next_io++ % d->n_io];
	__atomic_add_fetch(&d->n_conns, 1, __ATOMIC_RELAXED);
	ioloop_post(nc->job.owner, &nc->job);
}

void
daemon_conn_closed(struct daemon *d)
{
	__atomic_sub_fetch(&d->n_conns, 1, __ATOMIC_RELAXED);
}

int
daemon_install_export(struct daemon *d, const struct export_conf *ec,
    struct backend *b)
{
	if (d->n_exports >= DAEMON_MAX_EXPORTS) {
		log_warnx("export \"%s\": the export table is full (%u)",
		    ec->name, DAEMON_MAX_EXPORTS);
		backend_close(b);
		return -1;
	}
	struct wb_dev *dev = daemon_get_dev(d, b);
	struct export *e = dev ? export_new(ec, dev, b, &d->wb) : NULL;
	char sz[32];

	if (!e) {
		backend_close(b);
		return -1;
	}
	daemon_add_export(d, e);        /* room checked above */
	log_info("export \"%s\": %s, %s, device %s%s", e->name,
	    b->description, size_human(e->size_bytes, sz, sizeof sz),
	    dev->name, (e->tflags & NBD_FLAG_READ_ONLY) ? ", read-only" : "");
	return 0;
}

/* A new export from a reload; one whose remote does not answer waits. */
static int
daemon_reload_add_export(struct daemon *d, const struct export_conf *ec,
    bool *waiting)
{
	struct backend *b = backend_open(ec, &d->cfg.remote);

	*waiting = false;
	if (!b && pending_wanted(ec, errno)) {
		*waiting = pending_add(d, ec) == 0;
		return *waiting ? 0 : -1;
	}
	if (!b || daemon_install_export(d, ec, b) < 0) {
		log_warnx("reload: export \"%s\": cannot be added", ec->name);
		return -1;
	}
	return 0;
}

/* Append to MSG (a running summary for the log and the control client). */
static void
reload_note(char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
reload_note(char *msg, size_t msglen, const char *fmt, ...)
{
	size_t used = strlen(msg);
	va_list ap;

	if (used + 2 >= msglen)
		return;
	if (used)
		strcat(msg, "; ");
	used = strlen(msg);
	va_start(ap, fmt);
	vsnprintf(msg + used, msglen - used, fmt, ap);
	va_end(ap);
}

static bool
strv_equal(char **a, size_t na, char **b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

int
daemon_reload(struct daemon *d, char *msg, size_t msglen)
{
	struct wbd_config nc;
	char err[1024];

	msg[0] = '\0';
	if (config_load(d->cfg.path, &nc, err, sizeof err) < 0) {
		snprintf(msg, msglen, "configuration rejected, the running one "
		    "stays: %s", err);
		log_warnx("reload: %s", msg);
		return -1;
	}
	pthread_mutex_lock(&d->tune_lock);

	/* What cannot change while running. */
	if (!strv_equal(d->cfg.listen_tcp, d->cfg.n_listen_tcp, nc.listen_tcp,
	    nc.n_listen_tcp) || !strv_equal(d->cfg.listen_unix,
	    d->cfg.n_listen_unix, nc.listen_unix, nc.n_listen_unix))
		reload_note(msg, msglen, "listeners changed: needs a restart");
	if (d->cfg.io_threads != nc.io_threads)
		reload_note(msg, msglen, "io_threads changed: needs a restart");
	if (d->cfg.cache.size_bytes != nc.cache.size_bytes ||
	    d->cfg.cache.page_size != nc.cache.page_size)
		reload_note(msg, msglen, "cache size or page size changed: "
		    "needs a restart");
	if (d->cfg.writeback.max_io_bytes != nc.writeback.max_io_bytes)
		reload_note(msg, msglen, "max_io_bytes changed: needs a restart");
	if (!str_equal(d->cfg.control.socket, nc.control.socket) ||
	    d->cfg.control.mode != nc.control.mode ||
	    !str_equal(d->cfg.control.group, nc.control.group) ||
	    !str_equal(d->cfg.control.admin_group, nc.control.admin_group))
		reload_note(msg, msglen, "control settings changed: needs a "
		    "restart");
	/* Remote settings: for new connections and requests from now on. */
	if (memcmp(&d->cfg.remote, &nc.remote, sizeof nc.remote) != 0) {
		d->cfg.remote = nc.remote;
		for (size_t j = 0; j < daemon_n_exports(d); j++) {
			struct backend *b = d->exports[j]->backend;
			if (b->ops->reconfigure)
				b->ops->reconfigure(b, &d->cfg.remote);
		}
		reload_note(msg, msglen, "remote settings applied");
	}
	pending_prune(d, nc.exports, nc.n_exports);
	for (size_t i = 0; i < nc.n_exports; i++) {
		const struct export_conf *ec = &nc.exports[i];
		struct export *e = NULL;
		/* A removed export of the same name counts as gone: a
		 * reload that brings it back adds it anew. */
		for (size_t j = 0; j < daemon_n_exports(d); j++)
			if (strcmp(d->exports[j]->name, ec->name) == 0 &&
			    !__atomic_load_n(&d->exports[j]->removed,
			    __ATOMIC_ACQUIRE))
				e = d->exports[j];
		bool leaving = false;
		for (size_t j = 0; j < daemon_n_exports(d); j++)
			leaving |= strcmp(d->exports[j]->name, ec->name) == 0 &&
			    __atomic_load_n(&d->exports[j]->removed,
			    __ATOMIC_ACQUIRE) != EXPORT_LIVE &&
			    !export_retired(d->exports[j]);
		if (!e && leaving) {
			/* Two caches over one backing would disagree. */
			reload_note(msg, msglen, "export \"%s\" is still being "
			    "removed; reload again once it is gone", ec->name);
			continue;
		}
		if (!e && pending_has(d, ec->name)) {
			reload_note(msg, msglen, "export \"%s\" is still "
			    "waiting for its remote", ec->name);
			continue;
		}
		if (!e) {
			bool waiting;
			if (daemon_reload_add_export(d, ec, &waiting) == 0)
				reload_note(msg, msglen, waiting ? "export \"%s\" "
				    "waits for its remote" : "export \"%s\" added",
				    ec->name);
			else
				reload_note(msg, msglen, "export \"%s\" could not "
				    "be added (see the log)", ec->name);
			continue;
		}
		if (strcmp(e->backing, ec->backing) != 0 ||
		    (ec->size_bytes && ec->size_bytes != e->size_bytes) ||
		    ec->readonly != ((e->tflags & NBD_FLAG_READ_ONLY) != 0) ||
		    ec->direct != e->direct ||
		    !str_equal(e->description, ec->description))
			reload_note(msg, msglen, "export \"%s\": backing, size, "
			    "readonly, direct or description changed: needs a "
			    "restart", e->name);
		if (e->cache_mode != ec->cache_mode) {
			__atomic_store_n(&e->cache_mode, ec->cache_mode,
			    __ATOMIC_RELAXED);
			reload_note(msg, msglen, "export \"%s\": cache_mode %s",
			    e->name, cache_mode_name(ec->cache_mode));
		}
	}
	for (size_t j = 0; j < daemon_n_exports(d); j++) {
		struct export *e = d->exports[j];
		bool found = false;
		for (size_t i = 0; i < nc.n_exports; i++)
			found |= strcmp(e->name, nc.exports[i].name) == 0;
		int expect = EXPORT_LIVE;
		if (__atomic_load_n(&e->removed, __ATOMIC_ACQUIRE))
			continue;       /* removed earlier */
		if (!found && __atomic_compare_exchange_n(&e->removed, &expect,
		    EXPORT_REMOVING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			reload_note(msg, msglen, "export \"%s\" removed: no new "
			    "connections; written back once idle", e->name);
	}

	/* Writeback settings apply at once; nc frees the old devices list. */
	settings_apply(d, &nc.writeback, NULL);
	pthread_mutex_unlock(&d->tune_lock);
	config_free(&nc);
	reload_note(msg, msglen, "writeback settings applied");
	log_info("reload: %s", msg);
	return 0;
}
