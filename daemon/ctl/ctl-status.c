/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl-status.c - the "status" and "exports" answers of the control
 * socket, built from counters that every thread updates atomically: taking
 * a status never takes a lock an I/O thread waits on for long (shard locks
 * are held for a pointer read).  Runs on the control thread.
 *
 * The status also shows the writeback settings as set (d->cfg.writeback),
 * which a reload rewrites under daemon.tune_lock: it is built with that
 * lock held (first in the lock order, so every lock taken meanwhile comes
 * after it).  Waiting for it is waiting for a tune or a reload to end, as
 * "wbctl tune" (the list) does; those run on this thread, so only a SIGHUP
 * reload can hold it meanwhile (at most for as long as a new export's
 * remote takes to answer, its connect timeout).  The shutdown drain holds
 * it longer: a status is then built as the drain's guest, under
 * daemon.status_lock (daemon.h), and says what is left to write back.
 * No I/O thread or worker takes it: a status holding it delays only the
 * tick's installing of waiting exports (a trylock) and a reload.
 *
 * The request statistics (FLUSH latency, pacing) are each I/O thread's own
 * (stats.h), read without a lock and added up here.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "atomics.h"
#include "backend.h"
#include "bufstash.h"
#include "cache.h"
#include "config-load.h"
#include "conn.h"
#include "ctl-proto.h"
#include "ctl-status.h"
#include "daemon.h"
#include "export-journal.h"
#include "export.h"
#include "ioloop.h"
#include "lock.h"
#include "nbd-proto.h"
#include "pending.h"
#include "pool.h"
#include "prefault.h"
#include "settings.h"
#include "slots.h"
#include "wbdev.h"
#include "wbnice.h"
#include "writeback.h"

void
ctl_export_stats(struct daemon *d, struct export *e,
    struct stats_export_io *sum)
{
	memset(sum, 0, sizeof *sum);
	for (unsigned i = 0; i < d->n_io; i++)
		stats_io_add(&d->io[i]->host.stats, e, sum);
}

static void
ctl_set_u64(json_t *o, const char *key, uint64_t v)
{
	json_object_set_new(o, key, json_integer((json_int_t)v));
}

/* The FLUSH latency and pacing figures of X, into O (the same names for
 * an export and for all of them). */
static void
ctl_request_figures(json_t *o, const struct stats_export_io *x)
{
	const struct stats_hist *fl = &x->lat[STATS_OP_FLUSH];

	ctl_set_u64(o, "flushes", stats_hist_count(fl));
	ctl_set_u64(o, "flush_p50_us", stats_hist_quantile_ns(fl, 0.5) / 1000);
	ctl_set_u64(o, "flush_p99_us", stats_hist_quantile_ns(fl, 0.99) / 1000);
	ctl_set_u64(o, "paced_writes", load_relaxed(&x->paced));
	ctl_set_u64(o, "held_writes", load_relaxed(&x->held));
	ctl_set_u64(o, "paced_now",
	    load_relaxed(&x->paced) - load_relaxed(&x->paced_done));
	ctl_set_u64(o, "pause_ms", load_relaxed(&x->pause_ns) / 1000000);
}

/* Add X's figures to SUM. */
static void
ctl_stats_merge(struct stats_export_io *sum, const struct stats_export_io *x)
{
	const struct stats_hist *h = &x->lat[STATS_OP_FLUSH];

	for (unsigned i = 0; i < STATS_HIST_BUCKETS; i++)
		STATS_BUMP(&sum->lat[STATS_OP_FLUSH].bucket[i],
		    load_relaxed(&h->bucket[i]));
	STATS_BUMP(&sum->lat[STATS_OP_FLUSH].sum_ns, load_relaxed(&h->sum_ns));
	STATS_BUMP(&sum->paced, load_relaxed(&x->paced));
	STATS_BUMP(&sum->held, load_relaxed(&x->held));
	STATS_BUMP(&sum->paced_done, load_relaxed(&x->paced_done));
	STATS_BUMP(&sum->pause_ns, load_relaxed(&x->pause_ns));
}

/* The thresholds: what each is in effect, in bytes, and the settings
 * table's rows as set. */
static json_t *
ctl_thresholds_json(struct daemon *d)
{
	static const char *const rows[] = {
		"dirty_background_ratio",
		"dirty_ratio",
		"dirty_expire_centisecs",
		"dirty_writeback_centisecs",
	};
	const struct writeback_conf *wc = &d->cfg.writeback;
	uint64_t ps = d->wb.page_size;
	struct wb_thresholds th;

	wb_ctl_snapshot(&d->wb, &th);
	json_t *o = json_pack("{s:I, s:I}", "dirty_background_bytes",
	    (json_int_t)(th.bg_pages * ps), "dirty_bytes",
	    (json_int_t)(th.limit_pages * ps));

	for (size_t i = 0; o && i < sizeof rows / sizeof rows[0]; i++)
		json_object_set_new(o, rows[i],
		    settings_json(settings_find(rows[i]), wc));
	if (o) {
		json_object_set_new(o, "max_io_bytes",
		    json_integer((json_int_t)(th.max_run_pages * ps)));
		json_object_set_new(o, "background_nice",
		    settings_json(settings_find("background_nice"), wc));
		/* Not applied: no right to take a priority back. */
		json_object_set_new(o, "background_nice_applied",
		    json_boolean(wbnice_supported(0)));
	}
	return o;
}

/* The I/O threads: how many, and whether they run as SCHED_BATCH
 * (io_threads_batch; "batch_error": why one could not, else null). */
static json_t *
ctl_io_threads_json(struct daemon *d)
{
	int err = 0;

	for (size_t i = 0; i < d->n_io && !err; i++)
		if (d->io[i])
			err = load_relaxed(&d->io[i]->sched_batch_failed);
	return json_pack("{s:I, s:I, s:b, s:o}", "configured",
	    (json_int_t)d->cfg.io_threads, "running", (json_int_t)d->n_io,
	    "batch", d->cfg.io_threads_batch, "batch_error",
	    err ? json_string(strerror(err)) : json_null());
}

/* Who may open E: its allow list as written (null: anyone who reaches a
 * listener) and whether it takes only TLS connections. */
static json_t *
ctl_access_json(struct export *e)
{
	struct access_list *l = access_policy_get(&e->allow);
	json_t *allow = l ? json_array() : json_null();

	for (size_t i = 0; l && i < l->n; i++)
		json_array_append_new(allow, json_string(l->v[i].text));
	access_list_unref(l);
	return json_pack("{s:o, s:b}", "allow", allow, "tls_required",
	    e->hs.tls_only);
}

/* An export's write log (export-journal.h): null if it has none. */
static json_t *
ctl_journal_json(struct export *e)
{
	struct xj_stats st;

	if (!e->journal)
		return json_null();
	xj_get_stats(e->journal, &st);
	const struct journal_replay_stats *rp = &st.replay;
	json_t *replay = json_pack("{s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I}",
	    "records", (json_int_t)rp->records, "bytes", (json_int_t)rp->bytes,
	    "first_seq", (json_int_t)rp->first_seq, "last_seq",
	    (json_int_t)rp->last_seq, "end_offset", (json_int_t)rp->end_off,
	    "end", rp->end_why ? rp->end_why : "", "dropped_records",
	    (json_int_t)rp->dropped_records, "ms",
	    (json_int_t)(st.replay_ns / 1000000));
	json_t *o = json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I}",
	    "path", st.path, "mode",
	    st.mode == JOURNAL_ON_WRITE ? "on-write" : "on-flush", "broken",
	    st.broken, "size_bytes", (json_int_t)st.usage.size, "used_bytes",
	    (json_int_t)st.usage.used, "records", (json_int_t)st.usage.records,
	    "oldest_seq", (json_int_t)st.usage.oldest_seq, "next_seq",
	    (json_int_t)st.usage.next_seq);
	if (!o || !replay) {
		json_decref(o);
		json_decref(replay);
		return json_null();
	}
	json_object_set_new(o, "stale", json_boolean(st.stale));
	ctl_set_u64(replay, "stale_records", rp->stale_records);
	ctl_set_u64(o, "commits", st.commits);
	ctl_set_u64(o, "shared_flushes", st.shared);
	ctl_set_u64(o, "fallbacks", st.fallbacks);
	json_object_set_new(o, "last_fallback",
	    st.fallback_why ? json_string(st.fallback_why) : json_null());
	ctl_set_u64(o, "logged_bytes", st.logged_bytes);
	/* A FLUSH's time split: in the log, and written back instead. */
	ctl_set_u64(o, "log_avg_us",
	    st.commits ? st.log_ns / st.commits / 1000 : 0);
	ctl_set_u64(o, "backing_avg_us",
	    st.fallbacks ? st.backing_ns / st.fallbacks / 1000 : 0);
	ctl_set_u64(o, "reclaims", st.reclaims);
	/* Ordered writeback: epochs applied from the log, and the lag. */
	json_object_set_new(o, "ordered", json_boolean(st.ordered));
	json_object_set_new(o, "order_lost", json_boolean(st.order_lost));
	ctl_set_u64(o, "epochs_applied", st.epochs_applied);
	ctl_set_u64(o, "applied_bytes", st.applied_bytes);
	ctl_set_u64(o, "apply_avg_us",
	    st.epochs_applied ? st.apply_ns / st.epochs_applied / 1000 : 0);
	ctl_set_u64(o, "apply_errors", st.apply_errors);
	ctl_set_u64(o, "apply_lag_epochs", st.lag_epochs);
	ctl_set_u64(o, "apply_lag_bytes", st.lag_bytes);
	json_object_set_new(o, "replay", replay);
	return o;
}

static json_t *
ctl_export_json(struct daemon *d, struct export *e, bool details,
    struct stats_export_io *all)
{
	uint64_t ps = d->wb.page_size;
	json_t *o = json_pack("{s:s, s:I, s:s, s:b, s:s}", "name", e->name,
	    "size_bytes", (json_int_t)e->size_bytes, "cache_mode",
	    cache_mode_name(load_relaxed(&e->cache_mode)), "readonly",
	    (e->tflags & NBD_FLAG_READ_ONLY) != 0, "device", e->dev->name);

	static const char *const states[] = {
		[EXPORT_LIVE] = "live",
		[EXPORT_REMOVING] = "removing",
		[EXPORT_WRITING_BACK] = "writing back",
		[EXPORT_RETIRED] = "removed",
	};

	if (!o)
		return NULL;
	json_object_set_new(o, "state",
	    json_string(states[load_relaxed(&e->removed) & 3]));
	json_object_set_new(o, "access", ctl_access_json(e));
	if (!details) {
		json_object_set_new(o, "description",
		    e->description ? json_string(e->description) : json_null());
		return o;
	}
	uint64_t cached, dirty, oldest = cache_oldest_dirty_ns(e->cf);
	cache_file_stats(e->cf, &cached, &dirty);
	uint64_t now = now_ns();
	json_object_set_new(o, "cached_bytes",
	    json_integer((json_int_t)(cached * ps)));
	json_object_set_new(o, "dirty_bytes",
	    json_integer((json_int_t)(dirty * ps)));
	uint64_t wb_pages = cache_file_writeback_pages(e->cf);
	json_object_set_new(o, "writeback_bytes",
	    json_integer((json_int_t)(wb_pages * ps)));
	json_object_set_new(o, "at_risk_bytes",
	    json_integer((json_int_t)((dirty + wb_pages) * ps)));
	json_object_set_new(o, "oldest_dirty_age_ms",
	    json_integer(oldest && now > oldest ?
		    (json_int_t)((now - oldest) / 1000000) :
		    0));
	json_object_set_new(o, "connections",
	    json_integer(load_relaxed(&e->connections)));
	int idle = load_relaxed(&e->idle_timeout_s);
	json_object_set_new(o, "idle_timeout_s",
	    idle >= 0 ? json_integer(idle) : json_null());
	json_object_set_new(o, "writeback_errors",
	    json_integer((json_int_t)export_err_seq(e)));
	json_object_set_new(o, "journal", ctl_journal_json(e));
	struct stats_export_io x;
	ctl_export_stats(d, e, &x);
	ctl_request_figures(o, &x);
	ctl_stats_merge(all, &x);
	return o;
}

/* The device's link as writeback measures it (wbdev.h, linkest.h): the
 * round trip, the bandwidth, the window and what is in flight; and on a
 * remote its bound and write-behind. */
static json_t *
ctl_link_json(struct wb_dev *dev, struct backend *b)
{
	struct wb_dev_link l;
	json_t *o = json_object();
	bool remote = b && (b->caps & BACKEND_REMOTE);

	wb_dev_link(dev, &l);
	if (!o)
		return json_null();
	ctl_set_u64(o, "round_trip_us", l.rtt_ns / 1000);
	ctl_set_u64(o, "latency_us", l.srtt_ns / 1000);
	ctl_set_u64(o, "bandwidth_bytes_per_s", l.bandwidth_bps);
	ctl_set_u64(o, "window_writes", l.window);
	ctl_set_u64(o, "writes_in_flight", l.inflight);
	ctl_set_u64(o, "bytes_in_flight", l.inflight_bytes);
	ctl_set_u64(o, "writes_in_flight_max", l.inflight_max);
	ctl_set_u64(o, "max_inflight_bytes",
	    remote ? load_relaxed(&b->max_inflight_bytes) : 0);
	ctl_set_u64(o, "min_inflight_writes",
	    remote ? load_relaxed(&b->min_inflight) : 0);
	json_object_set_new(o, "write_behind",
	    json_boolean(remote && load_relaxed(&b->write_behind)));
	ctl_set_u64(o, "write_behind_bytes",
	    load_relaxed(&dev->write_behind_bytes));
	ctl_set_u64(o, "write_behind_deferred",
	    load_relaxed(&dev->behind_deferred));
	ctl_set_u64(o, "write_behind_defer_ms",
	    remote ? load_relaxed(&b->behind_defer_ms) : 0);
	ctl_set_u64(o, "read_round_trip_us", l.read_rtt_ns / 1000);
	ctl_set_u64(o, "read_bandwidth_bytes_per_s", l.read_bandwidth_bps);
	ctl_set_u64(o, "window_reads", l.read_window);
	ctl_set_u64(o, "reads_in_flight_max", l.reads_inflight_max);
	ctl_set_u64(o, "readahead_bytes", l.readahead_bytes);
	ctl_set_u64(o, "max_readahead_bytes",
	    remote ? load_relaxed(&b->max_readahead_bytes) : 0);
	ctl_set_u64(o, "flushes_sent", load_relaxed(&dev->flushes_sent));
	ctl_set_u64(o, "flushes_shared", load_relaxed(&dev->flushes_shared));
	ctl_set_u64(o, "flushes_by_fua", load_relaxed(&dev->flushes_by_fua));
	ctl_set_u64(o, "flushes_merged", load_relaxed(&dev->flushes_merged));
	ctl_set_u64(o, "flushes_joined", load_relaxed(&dev->flushes_joined));
	ctl_set_u64(o, "fua_writes", load_relaxed(&dev->fua_writes));
	ctl_set_u64(o, "fua_max_runs",
	    remote ? load_relaxed(&b->fua_max_runs) : 0);
	return o;
}

static json_t *
ctl_device_json(struct daemon *d, struct wb_dev *dev)
{
	uint64_t ps = d->wb.page_size;
	struct pool_stats st;
	uint64_t wb_pages = 0, unflushed = 0;
	json_t *names = json_array();
	int err = load_relaxed(&dev->last_err);

	pool_get_stats(dev->pool, &st);
	for (unsigned i = 0; i < wb_dev_n_targets(dev); i++) {
		struct wb_target *t = wb_dev_target(dev, i);
		if (!t)
			continue;
		struct export *e = container_of(t, struct export, wt);
		if (!export_retired(e))
			json_array_append_new(names, json_string(e->name));
		wb_pages += cache_file_writeback_pages(e->cf);
		unflushed += wb_target_unflushed(t);
	}
	uint64_t backoff_until = load_relaxed(&dev->backoff_until_ns),
		 now = now_ns();
	json_t *remote = json_null();
	struct backend *b = wb_dev_backend(dev);
	struct backend_state bs;
	if (b && (b->caps & BACKEND_REMOTE) && backend_get_state(b, &bs)) {
		remote = json_pack("{s:b, s:I, s:i, s:i, s:o}", "connected",
		    bs.connected, "since_unix_ms",
		    (json_int_t)(bs.since_realtime_ns / 1000000), "retries",
		    (int)bs.retries, "connections", (int)bs.connections,
		    "last_error",
		    bs.last_error[0] ? json_string(bs.last_error) :
				       json_null());
		ctl_set_u64(remote, "reconnects", bs.reconnects);
		ctl_set_u64(remote, "failed_reconnects", bs.failed_attempts);
		json_object_set_new(remote, "multi_conn",
		    json_boolean(bs.multi_conn));
		ctl_set_u64(remote, "conn_depth", bs.conn_depth);
		json_object_set_new(remote, "read_connection",
		    json_boolean(bs.read_connection));
		ctl_set_u64(remote, "read_connection_failures",
		    bs.read_connection_failures);
		json_object_set_new(remote, "write_connection",
		    json_boolean(bs.write_connection));
		ctl_set_u64(remote, "write_connections", bs.write_connections);
		ctl_set_u64(remote, "write_connection_failures",
		    bs.write_connection_failures);
		ctl_set_u64(remote, "all_connections", bs.all_connections);
		ctl_set_u64(remote, "max_connections", bs.max_connections);
		ctl_set_u64(remote, "connections_held_back",
		    bs.connections_held_back);
		ctl_set_u64(remote, "connect_timeout_ms",
		    bs.connect_timeout_ms);
		ctl_set_u64(remote, "reconnect_max_ms", bs.reconnect_max_ms);
		ctl_set_u64(remote, "io_timeout_ms", bs.io_timeout_ms);
		/* Reads after writeback (remote.md): only on a multi-conn
		 * remote that can flush. */
		json_object_set_new(remote, "flush_before_read",
		    json_boolean(b->caps & BACKEND_FLUSH_BEFORE_READ));
		ctl_set_u64(remote, "unflushed_ranges", unflushed);
		ctl_set_u64(remote, "unflushed_ranges_max",
		    load_relaxed(&b->unflushed_max));
		ctl_set_u64(remote, "unflushed_overflows",
		    load_relaxed(&dev->unflushed_overflows));
		ctl_set_u64(remote, "flushes_before_read",
		    load_relaxed(&dev->read_flushes));
		ctl_set_u64(remote, "commit_interval_ms",
		    load_relaxed(&b->commit_ms));
		ctl_set_u64(remote, "commits", load_relaxed(&dev->commits));
		ctl_set_u64(remote, "rewritten_after_loss_bytes",
		    load_relaxed(&dev->redo_pages) * ps);
		ctl_set_u64(remote, "writes_on_lost_connections",
		    load_relaxed(&dev->lost_writes));
	}
	json_t *o = json_pack(
	    "{s:s, s:o, s:I, s:I, s:{s:i, s:i, s:i, s:i, s:i},"
	    " s:{s:i, s:b, s:b, s:i, s:i, s:i, s:i}, s:I, s:I, s:I, s:i, s:i,"
	    " s:I, s:o, s:I}",
	    "device", dev->name, "exports", names, "dirty_bytes",
	    (json_int_t)(wb_dev_dirty_pages(dev) * ps), "writeback_bytes",
	    (json_int_t)(wb_pages * ps), "workers", "threads", (int)st.threads,
	    "busy", (int)st.busy, "min", (int)d->cfg.writeback.min_workers,
	    "max", (int)d->cfg.writeback.max_workers, "waits_at_max",
	    (int)st.at_max_total, "queued", "total", (int)st.queued,
	    "background", load_relaxed(&dev->bg_queued) != 0, "periodic",
	    load_relaxed(&dev->periodic_queued) != 0, "flush",
	    (int)load_relaxed(&dev->work_by_reason[WB_REASON_FLUSH]), "fua",
	    (int)load_relaxed(&dev->work_by_reason[WB_REASON_FUA]), "sync",
	    (int)load_relaxed(&dev->work_by_reason[WB_REASON_SYNC]), "read",
	    (int)load_relaxed(&dev->work_reads), "written_bytes",
	    (json_int_t)load_relaxed(&dev->written_bytes), "read_bytes",
	    (json_int_t)load_relaxed(&dev->read_bytes), "bandwidth_bytes_per_s",
	    (json_int_t)load_relaxed(&dev->bandwidth_bps), "min_ratio",
	    (int)load_relaxed(&dev->min_ratio), "max_ratio",
	    (int)load_relaxed(&dev->max_ratio), "errors",
	    (json_int_t)load_relaxed(&dev->errors), "last_error",
	    err ? json_string(strerror(err)) : json_null(), "backoff_ms",
	    (json_int_t)(backoff_until > now ? (backoff_until - now) / 1000000 :
					       0));
	if (o) {
		json_object_set_new(o, "backing",
		    json_string(b ? b->description : ""));
		json_object_set_new(o, "io_engine",
		    json_string(b ? backend_io_engine_used(b) : ""));
		ctl_set_u64(o, "rewritten_after_failed_flush_bytes",
		    load_relaxed(&dev->flush_redo_pages) * ps);
		json_object_set_new(o, "writeback_cpu_seconds",
		    json_real((double)load_relaxed(&dev->wb_cpu_ns) / 1e9));
		json_object_set_new(o, "writeback_cpu_share",
		    json_real(
			(double)load_relaxed(&dev->wb_cpu_share_ppm) / 1e6));
		json_object_set_new(o, "remote", remote);
		json_object_set_new(o, "link", ctl_link_json(dev, b));
	} else {
		json_decref(remote);
	}
	return o;
}

/* The tls group as it runs: mode, kind of credentials, verify_peer. */
static json_t *
ctl_tls_json(struct daemon *d)
{
	const struct tls_conf *tc = &d->cfg.tls;

	return json_pack("{s:s, s:s?, s:b}", "mode", tls_mode_name(tc->mode),
	    "credentials",
	    tc->mode == TLS_OFF ? NULL :
		tc->psk_file    ? "psk" :
				  "x509",
	    "verify_peer", tc->mode != TLS_OFF && tc->verify_peer);
}

/* Who the daemon runs as now, and the user and group wbd.conf named. */
static json_t *
ctl_run_as_json(struct daemon *d)
{
	const struct run_as_conf *ra = &d->cfg.run_as;

	return json_pack("{s:i, s:i, s:s?, s:s?}", "uid", (int)geteuid(), "gid",
	    (int)getegid(), "user", ra->user, "group", ra->group);
}

/* The control socket's limits and how they stand (control in
 * wbd.conf(5)). */
static json_t *
ctl_control_json(struct daemon *d)
{
	const struct control_conf *cc = &d->cfg.control;

	return json_pack("{s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "clients",
	    (int)load_relaxed(&d->ctl_clients), "max_clients",
	    (int)cc->max_clients, "max_clients_per_uid",
	    (int)cc->max_clients_per_uid, "admin_reserved",
	    (int)cc->admin_reserved, "idle_timeout_s", (int)cc->idle_timeout_s,
	    "refused", (json_int_t)load_relaxed(&d->ctl_refused), "idle_closed",
	    (json_int_t)load_relaxed(&d->ctl_idle_closed), "oversized_requests",
	    (json_int_t)load_relaxed(&d->ctl_oversized));
}

/* One listener of the listen group: its kind, address (or path) and
 * idle_timeout_s, null when not given (the limits' apply by client). */
static json_t *
ctl_listener_json(const char *kind, const char *address, int idle_s)
{
	return json_pack("{s:s, s:s, s:o}", "kind", kind, "address", address,
	    "idle_timeout_s", idle_s >= 0 ? json_integer(idle_s) : json_null());
}

/* The configured listeners (listen in wbd.conf(5)), as at start: a
 * change needs a restart. */
static json_t *
ctl_listeners_json(struct daemon *d)
{
	const struct wbd_config *cfg = &d->cfg;
	json_t *a = json_array();

	for (size_t i = 0; a && i < cfg->n_listen_tcp; i++)
		json_array_append_new(a,
		    ctl_listener_json("tcp", cfg->listen_tcp[i],
			config_listen_idle_s(cfg->listen_tcp_idle_s, i)));
	for (size_t i = 0; a && i < cfg->n_listen_unix; i++)
		json_array_append_new(a,
		    ctl_listener_json("unix", cfg->listen_unix[i],
			config_listen_idle_s(cfg->listen_unix_idle_s, i)));
	return a;
}

/* The metrics endpoint's limits and how they stand (metrics in
 * wbd.conf(5)); listen null when there is none. */
static json_t *
ctl_metrics_json(struct daemon *d)
{
	const struct metrics_conf *mc = &d->cfg.metrics;

	return json_pack("{s:s?, s:i, s:i, s:i, s:i, s:I, s:I}", "listen",
	    mc->listen, "max_connections", (int)mc->max_connections,
	    "max_connections_per_client", (int)mc->max_connections_per_client,
	    "timeout_s", (int)mc->timeout_s, "connections",
	    (int)load_relaxed(&d->metrics_clients), "refused",
	    (json_int_t)load_relaxed(&d->metrics_refused), "closed",
	    (json_int_t)load_relaxed(&d->metrics_cut));
}

/*
 * Where the process's memory is: its resident set, malloc's bytes in use
 * and those it keeps free (all arenas, mapped chunks included; little
 * under a sanitizer, whose malloc is its own), the request buffers the
 * threads keep for their next use (bufstash.h) and their bound, and the
 * buffers mapped apart from malloc (those of BUFSTASH_MAP_MIN and more,
 * in use or kept).  The cache's pages are mapped apart too: in the RSS
 * only.
 */
static json_t *
ctl_memory_json(void)
{
	uint64_t kept_bytes, kept = bufstash_kept_all(&kept_bytes);
	uint64_t mapped_bytes, mapped = bufstash_mapped(&mapped_bytes);
	uint64_t in_use = 0, free_bytes = 0, rss = 0;
	unsigned long pages_total, pages_rss;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &pages_total, &pages_rss) == 2)
			rss = (uint64_t)pages_rss *
			    (uint64_t)sysconf(_SC_PAGESIZE);
		fclose(f);
	}
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
	struct mallinfo2 mi = mallinfo2();
	in_use = mi.uordblks + mi.hblkhd;
	free_bytes = mi.fordblks;
#endif
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "rss_bytes", (json_int_t)rss, "malloc_in_use_bytes",
	    (json_int_t)in_use, "malloc_free_bytes", (json_int_t)free_bytes,
	    "buffers_kept", (json_int_t)kept, "buffers_kept_bytes",
	    (json_int_t)kept_bytes, "buffers_kept_max_bytes",
	    (json_int_t)BUFSTASH_ALL_BYTES, "buffers_mapped",
	    (json_int_t)mapped, "buffers_mapped_bytes",
	    (json_int_t)mapped_bytes);
}

/* The shutdown: stopping (once a stop signal came), draining (writing
 * back; since when) and what is left to write back. */
static json_t *
ctl_shutdown_json(struct daemon *d, bool draining)
{
	uint64_t left = 0, ps = d->wb.page_size;
	unsigned n = 0;
	struct export *e;

	export_table_foreach(&d->exports, i, e) {
		if (e->tflags & NBD_FLAG_READ_ONLY)
			continue;
		uint64_t p = cache_file_unwritten_pages(e->cf);
		left += p;
		n += p > 0;
	}
	return json_pack("{s:b, s:b, s:I, s:I, s:i}", "stopping",
	    (int)load_acquire(&d->stopping), "draining", (int)draining,
	    "draining_s",
	    (json_int_t)(draining ?
		    (now_ns() - d->drain_began_ns) / 1000000000u :
		    0),
	    "left_bytes", (json_int_t)(left * ps), "exports_left", (int)n);
}

/* The status: d->tune_lock held, or (DRAINING) d->status_lock while the
 * shutdown drain holds it. */
static json_t *
ctl_status_build(struct daemon *d, bool draining)
{
	struct cache_stats cs;
	uint64_t ps = d->wb.page_size;
	json_t *exports = json_array(), *devices = json_array();
	struct export *e;
	json_t *requests = json_object();
	struct stats_export_io all;

	if (draining)
		lock_assert_held(&d->status_lock);
	else
		lock_assert_held(&d->tune_lock);
	memset(&all, 0, sizeof all);
	cache_get_stats(d->cache, &cs);
	export_table_foreach(&d->exports, i, e)
		if (!export_retired(e))
			json_array_append_new(exports,
			    ctl_export_json(d, e, true, &all));
	ctl_request_figures(requests, &all);
	for (size_t i = 0; i < daemon_n_devs(d); i++)
		json_array_append_new(devices, ctl_device_json(d, d->devs[i]));
	json_t *waiting = json_array();
	struct pending_info pi;
	for (size_t i = 0; pending_get(d->pending, i, &pi); i++)
		json_array_append_new(waiting,
		    json_pack("{s:s, s:s, s:i, s:I}", "name", pi.name,
			"backing", pi.backing, "attempts", (int)pi.attempts,
			"since_unix_ms",
			(json_int_t)(pi.since_realtime_ns / 1000000)));
	const struct limits_conf *lc = &d->cfg.limits;
	struct budget_stats bs;
	budget_get_stats(&d->budget, &bs);
	unsigned conns = load_relaxed(&d->n_conns);
	json_t *limits = json_pack("{s:i, s:i, s:i, s:I, s:i, s:i, s:i, s:I,"
				   " s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
				   " s:i, s:I, s:I, s:i, s:I, s:I, s:i, s:i,"
				   " s:I}",
	    "max_connections", (int)lc->max_connections, "idle_timeout_s",
	    (int)lc->idle_timeout_s, "stall_timeout_s",
	    (int)lc->stall_timeout_s, "stalled", (json_int_t)bs.stalls,
	    "max_request_bytes", (int)lc->max_request_bytes,
	    "max_connections_per_client", (int)lc->max_connections_per_client,
	    "connections", (int)conns, "clients",
	    (json_int_t)slots_clients(d->slots), "refused",
	    (json_int_t)load_relaxed(&d->refused_conns), "max_inflight_bytes",
	    (json_int_t)bs.limit, "inflight_bytes", (json_int_t)bs.used,
	    "inflight_peak_bytes", (json_int_t)bs.peak, "inflight_waits",
	    (json_int_t)bs.waits, "inflight_reserve_bytes",
	    (json_int_t)bs.reserve_bytes, "inflight_small_bytes",
	    (json_int_t)bs.small_bytes, "connection_buffer_bytes",
	    (json_int_t)conns * CONN_RBUF_BYTES, "max_requests_per_connection",
	    (int)lc->max_requests_per_connection,
	    "max_inflight_bytes_per_connection",
	    (json_int_t)lc->max_inflight_bytes_per_connection,
	    "connection_pauses", (json_int_t)bs.pauses, "handshake_timeout_s",
	    (int)lc->handshake_timeout_s, "handshake_timeouts",
	    (json_int_t)bs.hs_timeouts, "client_errors",
	    (json_int_t)bs.client_errors, "client_ipv6_prefix",
	    (int)lc->client_ipv6_prefix, "max_cache_requests",
	    (int)lc->max_cache_requests, "cache_requests_skipped",
	    (json_int_t)bs.cache_skips);
	/* Each client's part of the budget (limits.max_client_share). */
	json_object_set_new(limits, "max_client_share",
	    json_integer((json_int_t)bs.share_pct));
	json_object_set_new(limits, "client_share_bytes",
	    json_integer((json_int_t)bs.share_bytes));
	json_object_set_new(limits, "client_share_waits",
	    json_integer((json_int_t)bs.share_waits));
	json_object_set_new(limits, "client_inflight_max_bytes",
	    json_integer((json_int_t)bs.client_max_bytes));
	if (limits) {
		json_object_set_new(limits, "reserved_connections",
		    json_integer(lc->reserved_connections));
		json_object_set_new(limits, "local_idle_timeout_s",
		    json_integer(lc->local_idle_timeout_s));
		json_object_set_new(limits, "idle_closed",
		    json_integer((json_int_t)conn_idle_closed()));
		json_object_set_new(limits, "max_cache_share",
		    json_integer(lc->max_cache_share));
		json_object_set_new(limits, "cache_requests_cut",
		    json_integer(
			(json_int_t)load_relaxed(&d->wb.prefetch_cut)));
	}
	json_t *o = json_pack("{s:b, s:i, s:s, s:i, s:I,"
			      " s:{s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:I,"
			      " s:I, s:I, s:I, s:I, s:I},"
			      " s:o, s:o, s:o, s:o, s:o, s:o}",
	    "ok", 1, "v", CTL_PROTOCOL_VERSION, "daemon_version", WBD_VERSION,
	    "pid", (int)getpid(), "uptime_s",
	    (json_int_t)((now_ns() - d->started_ns) / 1000000000u), "cache",
	    "size_bytes", (json_int_t)(cs.pages_total * ps), "page_size",
	    (int)ps, "used_bytes", (json_int_t)(cs.pages_used * ps),
	    "dirty_bytes", (json_int_t)(cs.dirty_pages * ps), "writeback_bytes",
	    (json_int_t)(cs.writeback_pages * ps), "hits", (json_int_t)cs.hits,
	    "misses", (json_int_t)cs.misses, "evictions",
	    (json_int_t)cs.evictions, "readahead_bytes",
	    (json_int_t)(cs.ahead_pages * ps), "readahead_hits",
	    (json_int_t)cs.ahead_hits, "zero_copy_bytes",
	    (json_int_t)cs.zero_copy_bytes, "zero_copy_refused",
	    (json_int_t)cs.zero_copy_refused, "prefaulted_bytes",
	    (json_int_t)prefault_done_bytes(d->prefault), "thresholds",
	    ctl_thresholds_json(d), "exports", exports, "devices", devices,
	    "waiting_exports", waiting, "limits", limits, "tls",
	    ctl_tls_json(d));
	if (o) {
		json_object_set_new(o, "requests", requests);
		/* The setting cache.readahead_bytes ("readahead_bytes" above
		 * is what is cached of read-ahead). */
		json_object_set_new(json_object_get(o, "cache"),
		    "readahead_limit_bytes",
		    json_integer((json_int_t)d->cfg.cache.readahead_bytes));
		json_object_set_new(o, "run_as", ctl_run_as_json(d));
		json_object_set_new(o, "io_threads", ctl_io_threads_json(d));
		json_object_set_new(o, "listeners", ctl_listeners_json(d));
		json_object_set_new(o, "control", ctl_control_json(d));
		json_object_set_new(o, "metrics", ctl_metrics_json(d));
		json_object_set_new(o, "memory", ctl_memory_json());
		json_object_set_new(o, "shutdown",
		    ctl_shutdown_json(d, draining));
	} else
		json_decref(requests);
	return o;
}

/* How long a status waits for tune_lock before it looks again whether
 * the shutdown drain holds it. */
#define CTL_STATUS_POLL_NS 50000000L

json_t *
ctl_status_json(struct daemon *d)
{
	json_t *o;

	for (;;) {
		pthread_mutex_lock(&d->status_lock);
		if (d->draining) {
			/* The drain holds tune_lock: nothing it guards
			 * changes until the drain ends, which waits for
			 * status_lock. */
			o = ctl_status_build(d, true);
			pthread_mutex_unlock(&d->status_lock);
			return o;
		}
		pthread_mutex_unlock(&d->status_lock);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += CTL_STATUS_POLL_NS;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		int r = pthread_mutex_timedlock(&d->tune_lock, &until);
		if (r == ETIMEDOUT)
			continue; /* a reload, or the drain began */
		if (r != 0)
			return NULL;
		/* Drained: the devices' pools are being freed. */
		o = d->drained ? NULL : ctl_status_build(d, false);
		pthread_mutex_unlock(&d->tune_lock);
		return o;
	}
}

json_t *
ctl_exports_json(struct daemon *d)
{
	json_t *a = json_array();
	struct export *e;

	export_table_foreach(&d->exports, i, e)
		if (!export_retired(e))
			json_array_append_new(a,
			    ctl_export_json(d, e, false, NULL));
	return json_pack("{s:b, s:i, s:o}", "ok", 1, "v", CTL_PROTOCOL_VERSION,
	    "exports", a);
}
