/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reload.c - rereading the configuration while running, in phases:
 *
 *   1. parse: the new file is loaded and checked in full; a bad one is
 *      rejected and nothing changes;
 *   2. restart-only: settings that cannot change while running are
 *      compared and reported ("needs a restart"), not applied;
 *   3. TLS, limits and remotes: new TLS credentials (loaded before
 *      anything changes) and a new memory budget apply at once, for new
 *      connections; new connection and I/O timeouts reach the open
 *      backends;
 *   4. exports: new ones are added (one whose remote does not answer
 *      waits), removed ones stop taking clients and are written back once
 *      idle, a changed cache mode applies at once, a changed allow list
 *      to the options of every connection from then on;
 *   5. writeback: thresholds, workers and device shares apply at once.
 *
 * Main thread (SIGHUP) or control thread (wbctl reload), under
 * daemon.tune_lock from phase 2 on.  MSG collects what happened, for the
 * log and the control client.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "atomics.h"
#include "backend.h"
#include "backing.h"
#include "config-load.h"
#include "daemon.h"
#include "export-journal.h"
#include "export.h"
#include "log.h"
#include "nbd-proto.h"
#include "pending.h"
#include "settings-apply.h"
#include "reload.h"
#include "wbdev.h"
#include "writeback.h"

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

/* The idle_timeout_s of N listeners, A's and B's, are the same. */
static bool
idle_equal(const int *a, const int *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (config_listen_idle_s(a, i) != config_listen_idle_s(b, i))
			return false;
	return true;
}

/* Phase 2: what cannot change while running is reported, not applied. */
static void
reload_restart_only(struct daemon *d, const struct wbd_config *nc, char *msg,
    size_t msglen)
{
	const struct wbd_config *oc = &d->cfg;

	if (!strv_equal(oc->listen_tcp, oc->n_listen_tcp, nc->listen_tcp,
		nc->n_listen_tcp) ||
	    !strv_equal(oc->listen_unix, oc->n_listen_unix, nc->listen_unix,
		nc->n_listen_unix) ||
	    !idle_equal(oc->listen_tcp_idle_s, nc->listen_tcp_idle_s,
		oc->n_listen_tcp) ||
	    !idle_equal(oc->listen_unix_idle_s, nc->listen_unix_idle_s,
		oc->n_listen_unix))
		reload_note(msg, msglen, "listeners changed: needs a restart");
	if (oc->unix_mode != nc->unix_mode ||
	    !str_equal(oc->unix_group, nc->unix_group))
		reload_note(msg, msglen,
		    "unix_mode or unix_group changed: "
		    "needs a restart");
	if (!str_equal(oc->run_as.user, nc->run_as.user) ||
	    !str_equal(oc->run_as.group, nc->run_as.group))
		reload_note(msg, msglen,
		    "user or group changed: needs a "
		    "restart");
	if (oc->io_threads != nc->io_threads)
		reload_note(msg, msglen, "io_threads changed: needs a restart");
	if (oc->io_threads_batch != nc->io_threads_batch)
		reload_note(msg, msglen,
		    "io_threads_batch changed: needs a restart");
	if (oc->cache.size_bytes != nc->cache.size_bytes ||
	    oc->cache.page_size != nc->cache.page_size ||
	    oc->cache.readahead_bytes != nc->cache.readahead_bytes)
		reload_note(msg, msglen,
		    "cache size, page size or "
		    "readahead_bytes changed: needs a restart");
	if (oc->writeback.max_io_bytes != nc->writeback.max_io_bytes)
		reload_note(msg, msglen, "max_io_bytes changed: needs a restart");
	if (oc->writeback.io_engine != nc->writeback.io_engine)
		reload_note(msg, msglen, "io_engine changed: needs a restart");
	if (oc->memory.lock != nc->memory.lock)
		reload_note(msg, msglen,
		    "memory.lock changed: needs a restart");
	if (oc->memory.prefault != nc->memory.prefault)
		reload_note(msg, msglen,
		    "memory.prefault changed: needs a restart");
	if (!str_equal(oc->control.socket, nc->control.socket) ||
	    oc->control.mode != nc->control.mode ||
	    !str_equal(oc->control.group, nc->control.group) ||
	    !str_equal(oc->control.admin_group, nc->control.admin_group) ||
	    oc->control.max_clients != nc->control.max_clients ||
	    oc->control.max_clients_per_uid !=
		nc->control.max_clients_per_uid ||
	    oc->control.admin_reserved != nc->control.admin_reserved ||
	    oc->control.idle_timeout_s != nc->control.idle_timeout_s)
		reload_note(msg, msglen, "control settings changed: needs a "
		    "restart");
	if (!str_equal(oc->metrics.listen, nc->metrics.listen) ||
	    oc->metrics.max_connections != nc->metrics.max_connections ||
	    oc->metrics.max_connections_per_client !=
		nc->metrics.max_connections_per_client ||
	    oc->metrics.timeout_s != nc->metrics.timeout_s)
		reload_note(msg, msglen,
		    "metrics settings changed: needs a restart");
	if (oc->limits.max_connections != nc->limits.max_connections ||
	    oc->limits.max_connections_per_client !=
		nc->limits.max_connections_per_client ||
	    oc->limits.reserved_connections !=
		nc->limits.reserved_connections ||
	    oc->limits.idle_timeout_s != nc->limits.idle_timeout_s ||
	    oc->limits.local_idle_timeout_s !=
		nc->limits.local_idle_timeout_s ||
	    oc->limits.stall_timeout_s != nc->limits.stall_timeout_s ||
	    oc->limits.max_requests_per_connection !=
		nc->limits.max_requests_per_connection ||
	    oc->limits.max_inflight_bytes_per_connection !=
		nc->limits.max_inflight_bytes_per_connection ||
	    oc->limits.handshake_timeout_s != nc->limits.handshake_timeout_s ||
	    oc->limits.max_request_bytes != nc->limits.max_request_bytes ||
	    oc->limits.client_ipv6_prefix != nc->limits.client_ipv6_prefix ||
	    oc->limits.max_cache_requests != nc->limits.max_cache_requests ||
	    oc->limits.max_cache_share != nc->limits.max_cache_share)
		reload_note(msg, msglen,
		    "connection limits changed: needs a "
		    "restart");
}

/* Phase 3a: TLS: the new mode and credentials (loaded before any change,
 * so a broken key rejects the whole reload) for new connections. */
static void
reload_tls(struct daemon *d, struct wbd_config *nc, struct tls_creds *cr,
    char *msg, size_t msglen)
{
	struct tls_conf old = d->cfg.tls;

	d->cfg.tls = nc->tls;
	nc->tls = old; /* freed with NC */
	tls_server_set(&d->tls, d->cfg.tls.mode, cr);
	if (d->cfg.tls.mode != TLS_OFF || old.mode != TLS_OFF)
		reload_note(msg, msglen, "TLS %s%s",
		    tls_mode_name(d->cfg.tls.mode),
		    d->cfg.tls.mode != TLS_OFF ? ", credentials reloaded" : "");
}

/* Phase 3b: the memory budget and the clients' share of it apply at once
 * (what is held stays held). */
static void
reload_limits(struct daemon *d, const struct wbd_config *nc, char *msg,
    size_t msglen)
{
	if (d->cfg.limits.max_client_share != nc->limits.max_client_share) {
		d->cfg.limits.max_client_share = nc->limits.max_client_share;
		budget_set_share(&d->budget, nc->limits.max_client_share);
		reload_note(msg, msglen, "limits.max_client_share changed");
	}
	if (d->cfg.limits.max_inflight_bytes == nc->limits.max_inflight_bytes)
		return;
	d->cfg.limits.max_inflight_bytes = nc->limits.max_inflight_bytes;
	budget_set_limit(&d->budget, nc->limits.max_inflight_bytes);
	reload_note(msg, msglen, "limits.max_inflight_bytes changed");
}

/* Phase 3c: remote settings, for new connections and requests from now on. */
static void
reload_remotes(struct daemon *d, const struct wbd_config *nc, char *msg,
    size_t msglen)
{
	struct export *e;

	if (memcmp(&d->cfg.remote, &nc->remote, sizeof nc->remote) == 0)
		return;
	d->cfg.remote = nc->remote;
	export_table_foreach(&d->exports, j, e)
		backend_reconfigure(e->backend, &d->cfg.remote);
	reload_note(msg, msglen, "remote settings applied");
}

/* A new export from a reload; one whose remote does not answer waits. */
static int
reload_add_export(struct daemon *d, const struct export_conf *ec,
    bool *waiting)
{
	struct backend *b = backing_open(ec, &d->cfg.remote);

	*waiting = false;
	if (!b && pending_wanted(ec, errno)) {
		*waiting = pending_add(d->pending, ec, &d->cfg.remote) == 0;
		return *waiting ? 0 : -1;
	}
	if (!b || daemon_install_export(d, ec, b) < 0) {
		int err = errno;
		log_warnx("reload: export \"%s\": cannot be added", ec->name);
		errno = b ? 0 : err;
		return -1;
	}
	return 0;
}

/* The live export called NAME, and whether one of that name is still
 * being removed. */
static struct export *
reload_find_export(struct daemon *d, const char *name, bool *leaving)
{
	struct export *live = NULL, *e;

	*leaving = false;
	export_table_foreach(&d->exports, j, e) {
		int state = load_acquire(&e->removed);
		if (strcmp(e->name, name) != 0)
			continue;
		/* A removed export of the same name counts as gone: a
		 * reload that brings it back adds it anew. */
		if (state == EXPORT_LIVE)
			live = e;
		else if (state != EXPORT_RETIRED)
			*leaving = true;
	}
	return live;
}

/* Phase 4, for an export the new file has: add it, or apply what can
 * change. */
static void
reload_export(struct daemon *d, const struct export_conf *ec, char *msg,
    size_t msglen)
{
	bool leaving, waiting;
	struct export *e = reload_find_export(d, ec->name, &leaving);

	if (!e && leaving) {
		/* Two caches over one backing would disagree. */
		reload_note(msg, msglen, "export \"%s\" is still being removed; "
		    "reload again once it is gone", ec->name);
		return;
	}
	if (!e && pending_has(d->pending, ec->name)) {
		reload_note(msg, msglen, "export \"%s\" is still waiting for its "
		    "remote", ec->name);
		return;
	}
	if (!e) {
		if (reload_add_export(d, ec, &waiting) == 0)
			reload_note(msg, msglen, waiting ? "export \"%s\" waits "
			    "for its remote" : "export \"%s\" added", ec->name);
		else if (errno == EACCES || errno == EPERM)
			reload_note(msg, msglen,
			    "export \"%s\" could not be "
			    "added: permission denied opening \"%s\"%s%s",
			    ec->name, ec->backing,
			    d->cfg.run_as.user ? " as user " : "",
			    d->cfg.run_as.user ? d->cfg.run_as.user : "");
		else
			reload_note(msg, msglen, "export \"%s\" could not be "
			    "added (see the log)", ec->name);
		return;
	}
	if (strcmp(e->backing, ec->backing) != 0 ||
	    (ec->size_bytes && ec->size_bytes != e->size_bytes) ||
	    ec->readonly != ((e->tflags & NBD_FLAG_READ_ONLY) != 0) ||
	    ec->direct != e->direct || ec->tls_require != e->hs.tls_only ||
	    !str_equal(e->description, ec->description) ||
	    !xj_same(e->journal, &ec->journal))
		reload_note(msg, msglen,
		    "export \"%s\": backing, size, "
		    "readonly, direct, tls, description or journal changed: "
		    "needs a restart",
		    e->name);
	if (access_policy_set(&e->allow, ec->allow))
		reload_note(msg, msglen,
		    "export \"%s\": allow list changed "
		    "(for new connections)",
		    e->name);
	if (load_relaxed(&e->idle_timeout_s) != export_conf_idle(ec)) {
		store_relaxed(&e->idle_timeout_s, export_conf_idle(ec));
		reload_note(msg, msglen,
		    "export \"%s\": idle_timeout_s changed (for new "
		    "connections)",
		    e->name);
	}
	if (load_relaxed(&e->cache_mode) != ec->cache_mode) {
		store_relaxed(&e->cache_mode, ec->cache_mode);
		reload_note(msg, msglen, "export \"%s\": cache_mode %s", e->name,
		    cache_mode_name(ec->cache_mode));
	}
}

/* Phase 4: exports added, changed, removed. */
static void
reload_exports(struct daemon *d, struct wbd_config *nc, char *msg,
    size_t msglen)
{
	struct export *e;

	pending_prune(d->pending, nc->exports, nc->n_exports, &nc->remote);
	for (size_t i = 0; i < nc->n_exports; i++)
		reload_export(d, &nc->exports[i], msg, msglen);
	export_table_foreach(&d->exports, j, e) {
		bool found = false;
		for (size_t i = 0; i < nc->n_exports; i++)
			found |= strcmp(e->name, nc->exports[i].name) == 0;
		if (!found && daemon_remove_export(d, e))
			reload_note(msg, msglen, "export \"%s\" removed: no new "
			    "connections; written back once idle", e->name);
	}
	if (str_equal(d->cfg.default_export, nc->default_export))
		return;
	if (export_table_set_default(&d->exports, nc->default_export) < 0) {
		reload_note(msg, msglen, "default_export: out of memory");
		return;
	}
	char *old = d->cfg.default_export;
	d->cfg.default_export = nc->default_export;
	nc->default_export = old; /* freed with NC */
	reload_note(msg, msglen, "default_export %s%s%s",
	    d->cfg.default_export ? "\"" : "",
	    d->cfg.default_export ? d->cfg.default_export :
				    "left out: the "
				    "first export",
	    d->cfg.default_export ? "\"" : "");
}

/* Phase 5: writeback settings apply at once; NC frees the old devices
 * list. */
static void
reload_writeback(struct daemon *d, struct wbd_config *nc, char *msg,
    size_t msglen)
{
	settings_apply(d, &nc->writeback, NULL);
	reload_note(msg, msglen, "writeback settings applied");
}

int
daemon_reload(struct daemon *d, char *msg, size_t msglen)
{
	struct wbd_config nc;
	struct tls_creds *cr = NULL;
	char err[1024];

	msg[0] = '\0';
	if (config_load(d->cfg.path, &nc, err, sizeof err) < 0) {
		snprintf(msg, msglen, "configuration rejected, the running one "
		    "stays: %s", err);
		log_warnx("reload: %s", msg);
		return -1;
	}
	if (nc.tls.mode != TLS_OFF &&
	    !(cr = tls_creds_load(&nc.tls, err, sizeof err))) {
		/* Changed on disk since config_load checked it. */
		snprintf(msg, msglen,
		    "configuration rejected, the running one "
		    "stays: TLS: %s",
		    err);
		log_warnx("reload: %s", msg);
		config_free(&nc);
		return -1;
	}
	config_log_warnings(&nc, "reload: ");
	pthread_mutex_lock(&d->tune_lock);
	reload_restart_only(d, &nc, msg, msglen);
	reload_tls(d, &nc, cr, msg, msglen);
	reload_limits(d, &nc, msg, msglen);
	reload_remotes(d, &nc, msg, msglen);
	reload_exports(d, &nc, msg, msglen);
	reload_writeback(d, &nc, msg, msglen);
	pthread_mutex_unlock(&d->tune_lock);
	config_free(&nc);
	log_info("reload: %s", msg);
	return 0;
}
