/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics.c - the Prometheus text exposition (format 0.0.4) of what the
 * daemon counts.
 *
 * Gauges and counters that "wbctl status" shows are taken from the status
 * answer itself (ctl_status_json), through the tables below: one row per
 * metric, naming the member it comes from, so both views always agree.
 * The request counters and latency histograms come from the I/O threads'
 * statistics (stats.h), summed per export, and writeback's per device.
 *
 * Runs on whichever thread asks (the control thread for "wbctl metrics",
 * the HTTP endpoint's own): it takes daemon.tune_lock for the status, as
 * the status does, and no lock an I/O thread holds for longer than a few
 * loads.  Every family has HELP and TYPE, even without samples;
 * docs/metrics.md lists them all (a test checks that it does).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "ctl-status.h"
#include "daemon.h"
#include "export.h"
#include "metrics.h"
#include "stats.h"
#include "wbdev.h"
#include "writeback.h"

enum metrics_type {
	GAUGE,
	COUNTER
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* A metric read from one member of a status object ("a.b": nested). */
struct metrics_row {
	const char *key;
	const char *name;
	enum metrics_type type;
	double scale; /* the member's unit to the metric's */
	const char *help;
};

static const struct metrics_row metrics_cache_rows[] = {
	{ "size_bytes", "wbd_cache_size_bytes", GAUGE, 1,
	    "Size of the write-back cache." },
	{ "page_size", "wbd_cache_page_size_bytes", GAUGE, 1,
	    "Size of a cache page." },
	{ "used_bytes", "wbd_cache_used_bytes", GAUGE, 1,
	    "Bytes of the cache holding data." },
	{ "dirty_bytes", "wbd_cache_dirty_bytes", GAUGE, 1,
	    "Dirty bytes in the cache, not yet under writeback." },
	{ "writeback_bytes", "wbd_cache_under_writeback_bytes", GAUGE, 1,
	    "Bytes being written back now." },
	{ "hits", "wbd_cache_hits_total", COUNTER, 1,
	    "Pages found in the cache." },
	{ "misses", "wbd_cache_misses_total", COUNTER, 1,
	    "Pages looked for and not found in the cache." },
	{ "evictions", "wbd_cache_evictions_total", COUNTER, 1,
	    "Clean pages evicted to make room." },
};

static const struct metrics_row metrics_threshold_rows[] = {
	{ "dirty_background_bytes", "wbd_dirty_background_bytes", GAUGE, 1,
	    "Dirty data above which background writeback starts "
	    "(dirty_background_ratio or dirty_background_bytes)." },
	{ "dirty_bytes", "wbd_dirty_limit_bytes", GAUGE, 1,
	    "Dirty data at which writers are held (dirty_ratio or "
	    "dirty_bytes); they are paced from half-way above the "
	    "background threshold." },
};

static const struct metrics_row metrics_limit_rows[] = {
	{ "connections", "wbd_connections", GAUGE, 1, "Open NBD connections." },
	{ "max_connections", "wbd_connections_max", GAUGE, 1,
	    "limits.max_connections." },
	{ "max_connections_per_client", "wbd_connections_per_client_max", GAUGE,
	    1, "limits.max_connections_per_client." },
	{ "clients", "wbd_clients", GAUGE, 1,
	    "Clients (addresses, or uids on a Unix socket and for TCP from "
	    "this host) connected." },
	{ "refused", "wbd_connections_refused_total", COUNTER, 1,
	    "Connections refused by the connection limits." },
	{ "reserved_connections", "wbd_connections_reserved", GAUGE, 1,
	    "limits.reserved_connections: the last connections, only for a "
	    "client holding none." },
	{ "idle_closed", "wbd_connections_idle_closed_total", COUNTER, 1,
	    "Connections closed by an idle timeout (limits.idle_timeout_s, "
	    "local_idle_timeout_s, an export's idle_timeout_s)." },
	{ "inflight_bytes", "wbd_inflight_bytes", GAUGE, 1,
	    "Request buffers and queued replies held, in the memory budget." },
	{ "max_inflight_bytes", "wbd_inflight_max_bytes", GAUGE, 1,
	    "The memory budget, limits.max_inflight_bytes." },
	{ "inflight_peak_bytes", "wbd_inflight_peak_bytes", GAUGE, 1,
	    "The most the memory budget has held since start-up." },
	{ "inflight_waits", "wbd_inflight_waits_total", COUNTER, 1,
	    "Times a connection stopped reading for want of memory budget." },
	{ "client_share_bytes", "wbd_client_share_max_bytes", GAUGE, 1,
	    "The most of the memory budget one client may hold "
	    "(limits.max_client_share)." },
	{ "client_inflight_max_bytes", "wbd_client_inflight_max_bytes", GAUGE,
	    1, "The most of the memory budget one client holds now." },
	{ "client_share_waits", "wbd_client_share_waits_total", COUNTER, 1,
	    "Times a connection stopped reading because its client held its "
	    "share of the memory budget (also in wbd_inflight_waits_total)." },
	{ "stalled", "wbd_connections_stalled_total", COUNTER, 1,
	    "Connections closed for holding replies or a payload without "
	    "progress (limits.stall_timeout_s), and those of the same "
	    "client waiting behind such replies, not reading their own." },
	{ "connection_buffer_bytes", "wbd_connection_buffer_bytes", GAUGE, 1,
	    "Input buffers of the open connections (outside the budget)." },
	{ "max_requests_per_connection", "wbd_connection_requests_max", GAUGE,
	    1, "limits.max_requests_per_connection." },
	{ "max_inflight_bytes_per_connection",
	    "wbd_connection_inflight_max_bytes", GAUGE, 1,
	    "limits.max_inflight_bytes_per_connection." },
	{ "connection_pauses", "wbd_connection_pauses_total", COUNTER, 1,
	    "Times a connection stopped reading at its own limits "
	    "(limits.max_requests_per_connection, "
	    "max_inflight_bytes_per_connection, or 64 KiB of handshake "
	    "replies unread)." },
	{ "handshake_timeouts", "wbd_handshake_timeouts_total", COUNTER, 1,
	    "Connections closed for not finishing the handshake within "
	    "limits.handshake_timeout_s." },
	{ "cache_requests_skipped", "wbd_cache_requests_skipped_total", COUNTER,
	    1,
	    "NBD_CMD_CACHE requests answered without prefetching "
	    "(limits.max_cache_requests being carried out on the "
	    "device)." },
	{ "cache_requests_cut", "wbd_cache_requests_cut_total", COUNTER, 1,
	    "NBD_CMD_CACHE requests cut short at limits.max_cache_share of "
	    "the cache." },
	{ "client_errors", "wbd_client_errors_total", COUNTER, 1,
	    "Clients' errors: rejected requests, oversized options, bad "
	    "magic." },
};

static const struct metrics_row metrics_export_rows[] = {
	{ "size_bytes", "wbd_export_size_bytes", GAUGE, 1,
	    "Size of the export." },
	{ "connections", "wbd_export_connections", GAUGE, 1,
	    "Clients connected to the export (transmission phase)." },
	{ "cached_bytes", "wbd_export_cached_bytes", GAUGE, 1,
	    "Bytes of the export in the cache." },
	{ "dirty_bytes", "wbd_export_dirty_bytes", GAUGE, 1,
	    "Dirty bytes of the export, not yet under writeback." },
	{ "writeback_bytes", "wbd_export_under_writeback_bytes", GAUGE, 1,
	    "Bytes of the export being written back now." },
	{ "at_risk_bytes", "wbd_export_at_risk_bytes", GAUGE, 1,
	    "Bytes acknowledged and not yet on the backing device (dirty or "
	    "under writeback): what a crash would lose unless flushed." },
	{ "oldest_dirty_age_ms", "wbd_export_oldest_dirty_age_seconds", GAUGE,
	    0.001, "Age of the export's oldest dirty page (0: none)." },
	{ "writeback_errors", "wbd_export_writeback_errors_total", COUNTER, 1,
	    "Failed writebacks and flushes of the export (its error "
	    "sequence)." },
	{ "journal.size_bytes", "wbd_export_journal_size_bytes", GAUGE, 1,
	    "The export's write log: bytes for records (exports with a "
	    "journal only)." },
	{ "journal.used_bytes", "wbd_export_journal_used_bytes", GAUGE, 1,
	    "Bytes of the write log holding records not yet given back (on "
	    "the backing device and flushed there)." },
	{ "journal.records", "wbd_export_journal_records", GAUGE, 1,
	    "Records in the write log not yet given back." },
	{ "journal.commits", "wbd_export_journal_commits_total", COUNTER, 1,
	    "Groups of writes appended to the write log and synced." },
	{ "journal.shared_flushes", "wbd_export_journal_shared_flushes_total",
	    COUNTER, 1,
	    "FLUSHes answered by a write log commit another one began "
	    "(group commit)." },
	{ "journal.fallbacks", "wbd_export_journal_fallbacks_total", COUNTER, 1,
	    "FLUSHes written back to the backing device instead of the "
	    "write log (full, a TRIM since, the log broken)." },
	{ "journal.logged_bytes", "wbd_export_journal_logged_bytes_total",
	    COUNTER, 1, "Bytes of data appended to the write log." },
	{ "journal.broken", "wbd_export_journal_broken", GAUGE, 1,
	    "1 once an I/O error stopped the use of the write log." },
	{ "journal.epochs_applied", "wbd_export_journal_epochs_applied_total",
	    COUNTER, 1,
	    "Ordered write log: epochs (batches of the log) applied to the "
	    "backing device, each written and flushed before the next." },
	{ "journal.apply_lag_epochs", "wbd_export_journal_apply_lag_epochs",
	    GAUGE, 1,
	    "Ordered write log: epochs committed and not yet applied to the "
	    "backing device." },
	{ "journal.apply_lag_bytes", "wbd_export_journal_apply_lag_bytes",
	    GAUGE, 1,
	    "Ordered write log: bytes of the epochs not yet applied." },
	{ "journal.order_lost", "wbd_export_journal_order_lost", GAUGE, 1,
	    "Ordered write log: 1 once epochs were written back out of order "
	    "(the log could not be read back)." },
};

static const struct metrics_row metrics_device_rows[] = {
	{ "dirty_bytes", "wbd_device_dirty_bytes", GAUGE, 1,
	    "Dirty bytes of every export on the device." },
	{ "writeback_bytes", "wbd_device_under_writeback_bytes", GAUGE, 1,
	    "Bytes being written back to the device now." },
	{ "workers.threads", "wbd_device_workers", GAUGE, 1,
	    "flush-MAJ:MIN worker threads of the device." },
	{ "workers.busy", "wbd_device_workers_busy", GAUGE, 1,
	    "Workers running a job." },
	{ "workers.min", "wbd_device_workers_min", GAUGE, 1,
	    "writeback.min_workers." },
	{ "workers.max", "wbd_device_workers_max", GAUGE, 1,
	    "writeback.max_workers." },
	{ "queued.total", "wbd_device_queued_jobs", GAUGE, 1,
	    "Jobs waiting for a worker of the device." },
	{ "bandwidth_bytes_per_s",
	    "wbd_device_writeback_bandwidth_bytes_per_second", GAUGE, 1,
	    "Writeback rate, sampled every second and smoothed." },
	{ "errors", "wbd_device_writeback_errors_total", COUNTER, 1,
	    "Failed writes and flushes of the device." },
	{ "rewritten_after_failed_flush_bytes",
	    "wbd_device_rewritten_after_failed_flush_bytes_total", COUNTER, 1,
	    "Bytes dirtied again to be written again: a flush of a file or "
	    "block device failed before it covered them." },
	{ "writeback_cpu_seconds", "wbd_device_writeback_cpu_seconds_total",
	    COUNTER, 1,
	    "CPU time of writeback work on the device's worker threads." },
	{ "writeback_cpu_share", "wbd_device_writeback_cpu_share", GAUGE, 1,
	    "Writeback's recent CPU use on the device, in CPUs (at most "
	    "its workers), sampled every second and smoothed." },
	{ "backoff_ms", "wbd_device_backoff_seconds", GAUGE, 0.001,
	    "Time left in the device's back-off after a failure (0: not "
	    "backing off)." },
	{ "min_ratio", "wbd_device_min_ratio_percent", GAUGE, 1,
	    "The device's guaranteed share of the dirty limit." },
	{ "max_ratio", "wbd_device_max_ratio_percent", GAUGE, 1,
	    "The device's largest share of the dirty limit." },
	{ "link.round_trip_us", "wbd_device_round_trip_seconds", GAUGE, 1e-6,
	    "The device's round trip: the least write latency of the last "
	    "10 s (0: no write yet)." },
	{ "link.bandwidth_bytes_per_s",
	    "wbd_device_link_bandwidth_bytes_per_second", GAUGE, 1,
	    "The device's write bandwidth, estimated over the time writes "
	    "were in flight." },
	{ "link.window_writes", "wbd_device_writeback_window_writes", GAUGE, 1,
	    "Writes the last writeback window to a remote was sized to." },
	{ "link.writes_in_flight", "wbd_device_writes_in_flight", GAUGE, 1,
	    "Writeback writes to the device in flight now." },
	{ "link.bytes_in_flight", "wbd_device_bytes_in_flight", GAUGE, 1,
	    "Bytes of the writeback writes in flight now." },
	{ "link.write_behind_bytes", "wbd_device_write_behind_bytes_total",
	    COUNTER, 1, "Bytes written back by write-behind." },
	{ "link.write_behind_deferred",
	    "wbd_device_write_behind_deferred_total", COUNTER, 1,
	    "Times write-behind left dirty pages to the FLUSH expected." },
	{ "link.read_round_trip_us", "wbd_device_read_round_trip_seconds",
	    GAUGE, 1e-6,
	    "The device's round trip as its read window measures it: the "
	    "least read latency of the last 10 s (0: no read yet)." },
	{ "link.read_bandwidth_bytes_per_s",
	    "wbd_device_link_read_bandwidth_bytes_per_second", GAUGE, 1,
	    "The device's read bandwidth, estimated over the time reads of "
	    "its read window were in flight." },
	{ "link.window_reads", "wbd_device_read_window_reads", GAUGE, 1,
	    "Reads the device's read window to a remote was last sized to." },
	{ "link.reads_in_flight_max", "wbd_device_reads_in_flight_max", GAUGE,
	    1, "The most reads of the read window in flight at once." },
	{ "link.readahead_bytes", "wbd_device_link_readahead_bytes", GAUGE, 1,
	    "The read-ahead a sequential reader of a remote was last given." },
	{ "link.flushes_sent", "wbd_device_flushes_sent_total", COUNTER, 1,
	    "Flushes sent to the device's backends." },
	{ "link.flushes_shared", "wbd_device_flushes_shared_total", COUNTER, 1,
	    "Flushes needed but shared with one in flight (group commit)." },
	{ "link.flushes_by_fua", "wbd_device_flushes_by_fua_total", COUNTER, 1,
	    "FLUSHes made durable by writing their runs with FUA instead of "
	    "writes and a flush." },
	{ "link.flushes_merged", "wbd_device_flushes_merged_total", COUNTER, 1,
	    "FLUSHes written back by a pass that wrote back another FLUSH "
	    "queued beside them." },
	{ "link.flushes_joined", "wbd_device_flushes_joined_total", COUNTER, 1,
	    "Of the merged FLUSHes, those answered by a pass already under "
	    "way, as nothing was written since it began." },
	{ "link.fua_writes", "wbd_device_fua_writes_total", COUNTER, 1,
	    "Writeback writes sent with FUA (remote.fua_max_runs)." },
	{ "remote.connected", "wbd_remote_connected", GAUGE, 1,
	    "A remote backing server: 1 while connected." },
	{ "remote.connections", "wbd_remote_connections", GAUGE, 1,
	    "Connections open to a remote backing server." },
	{ "remote.retries", "wbd_remote_retries", GAUGE, 1,
	    "Failed reconnections in the current outage of a remote." },
	{ "remote.reconnects", "wbd_remote_reconnects_total", COUNTER, 1,
	    "Outages of a remote ended by a reconnection." },
	{ "remote.failed_reconnects", "wbd_remote_failed_reconnects_total",
	    COUNTER, 1, "Reconnections to a remote that failed." },
	{ "remote.read_connection", "wbd_remote_read_connection", GAUGE, 1,
	    "A remote's cache misses: 1 while on a connection of their own." },
	{ "remote.read_connection_failures",
	    "wbd_remote_read_connection_failures_total", COUNTER, 1,
	    "Times a remote's read connection failed or could not open." },
	{ "remote.write_connection", "wbd_remote_write_connection", GAUGE, 1,
	    "A remote's writeback: 1 while on a connection of its own." },
	{ "remote.write_connections", "wbd_remote_write_connections", GAUGE, 1,
	    "A remote's write connections of wbd's own open now." },
	{ "remote.write_connection_failures",
	    "wbd_remote_write_connection_failures_total", COUNTER, 1,
	    "Times a remote's write connection failed or could not open." },
	{ "remote.all_connections", "wbd_remote_all_connections", GAUGE, 1,
	    "Connections to a remote open or opening, libnbd's and wbd's own." },
	{ "remote.max_connections", "wbd_remote_max_connections", GAUGE, 1,
	    "Their bound (remote.max_connections)." },
	{ "remote.connections_held_back",
	    "wbd_remote_connections_held_back_total", COUNTER, 1,
	    "Times remote.max_connections kept a connection from opening." },
	{ "remote.unflushed_ranges", "wbd_remote_unflushed_ranges", GAUGE, 1,
	    "Ranges written to a multi-conn remote that no FLUSH covers yet." },
	{ "remote.unflushed_overflows", "wbd_remote_unflushed_overflows_total",
	    COUNTER, 1,
	    "Times ranges were given up past remote.unflushed_ranges." },
	{ "remote.flushes_before_read", "wbd_remote_flushes_before_read_total",
	    COUNTER, 1,
	    "Misses and block status queries that sent a FLUSH first." },
	{ "remote.commits", "wbd_remote_commits_total", COUNTER, 1,
	    "FLUSHes writeback sent after writing (remote.commit_interval_ms)." },
	{ "remote.rewritten_after_loss_bytes",
	    "wbd_remote_rewritten_after_loss_bytes_total", COUNTER, 1,
	    "Bytes written again: the remote was lost before a FLUSH covered "
	    "them." },
	{ "remote.writes_on_lost_connections",
	    "wbd_remote_writes_on_lost_connections_total", COUNTER, 1,
	    "Writes that failed with a connection lost while they were in "
	    "flight, left dirty to be written again (not errors)." },
};

/* The work items counted on a device, by reason. */
static const char *const metrics_work_reasons[] = {
	"background",
	"periodic",
	"flush",
	"fua",
	"sync",
	"read",
};

/* Commands by NBD type (stats.h); DISC has no reply and is left out. */
static const char *const metrics_cmds[STATS_N_CMDS] = {
	"read",
	"write",
	NULL,
	"flush",
	"trim",
	"cache",
	"write_zeroes",
	"block_status",
	"other",
};

static const char *const metrics_ops[STATS_N_OPS] = {
	[STATS_OP_READ_HIT] = "read_hit",
	[STATS_OP_READ_MISS] = "read_miss",
	[STATS_OP_WRITE] = "write",
	[STATS_OP_FLUSH] = "flush",
	[STATS_OP_FUA] = "fua",
};

/* --- writing ------------------------------------------------------------ */

static const char *
metrics_type_name(enum metrics_type t)
{
	return t == COUNTER ? "counter" : "gauge";
}

static void
metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label pair NAME="VALUE", VALUE escaped as the format asks. */
static void
metrics_label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* "NAME{L1="V1"[,L2="V2"]} " (no braces without labels). */
static void
metrics_start(FILE *f, const char *name, const char *suffix, const char *l1,
    const char *v1, const char *l2, const char *v2)
{
	fprintf(f, "%s%s", name, suffix);
	if (l1) {
		fputc('{', f);
		metrics_label(f, l1, v1);
		if (l2) {
			fputc(',', f);
			metrics_label(f, l2, v2);
		}
		fputc('}', f);
	}
	fputc(' ', f);
}

static void
metrics_u64(FILE *f, uint64_t v)
{
	fprintf(f, "%llu\n", (unsigned long long)v);
}

static void
metrics_double(FILE *f, double v)
{
	fprintf(f, "%.9g\n", v);
}

/* A histogram's samples for one label set (L1 and L2 may be NULL). */
static void
metrics_hist(FILE *f, const char *name, const char *l1, const char *v1,
    const char *l2, const char *v2, const struct stats_hist *h)
{
	uint64_t cum = 0;
	char le[32];

	for (unsigned i = 0; i < STATS_HIST_BUCKETS; i++) {
		cum += load_relaxed(&h->bucket[i]);
		if (i < STATS_HIST_FINITE)
			snprintf(le, sizeof le, "%.9g", stats_hist_bound_s(i));
		else
			snprintf(le, sizeof le, "+Inf");
		fprintf(f, "%s_bucket{", name);
		if (l1) {
			metrics_label(f, l1, v1);
			fputc(',', f);
		}
		if (l2) {
			metrics_label(f, l2, v2);
			fputc(',', f);
		}
		metrics_label(f, "le", le);
		fputs("} ", f);
		metrics_u64(f, cum);
	}
	metrics_start(f, name, "_sum", l1, v1, l2, v2);
	metrics_double(f, (double)load_relaxed(&h->sum_ns) / 1e9);
	metrics_start(f, name, "_count", l1, v1, l2, v2);
	metrics_u64(f, cum);
}

/* --- from the status answer ------------------------------------------- */

/* O's member KEY, "a.b" meaning member b of member a. */
static json_t *
metrics_member(json_t *o, const char *key)
{
	const char *dot = strchr(key, '.');

	if (!dot)
		return json_object_get(o, key);
	char head[64];
	snprintf(head, sizeof head, "%.*s", (int)(dot - key), key);
	return json_object_get(json_object_get(o, head), dot + 1);
}

/* V (a number or a boolean) times SCALE; false if V is neither. */
static bool
metrics_value(FILE *f, json_t *v, double scale)
{
	if (json_is_integer(v) && scale == 1)
		fprintf(f, "%lld\n", (long long)json_integer_value(v));
	else if (json_is_number(v))
		metrics_double(f, json_number_value(v) * scale);
	else if (json_is_boolean(v))
		fputs(json_is_true(v) ? "1\n" : "0\n", f);
	else
		return false;
	return true;
}

/*
 * The metrics of ROWS from the objects in LIST (an array, or one object),
 * labelled LABEL="the object's member NAME_KEY" (no label if LABEL is
 * NULL).  An object without the member has no sample.
 */
static void
metrics_rows(FILE *f, const struct metrics_row *rows, size_t n, json_t *list,
    const char *label, const char *name_key)
{
	for (size_t r = 0; r < n; r++) {
		const struct metrics_row *row = &rows[r];
		size_t i;
		json_t *o;

		metrics_family(f, row->name, metrics_type_name(row->type),
		    row->help);
		if (!json_is_array(list)) {
			json_t *v = metrics_member(list, row->key);
			if (json_is_number(v) || json_is_boolean(v)) {
				metrics_start(f, row->name, "", NULL, NULL,
				    NULL, NULL);
				metrics_value(f, v, row->scale);
			}
			continue;
		}
		json_array_foreach(list, i, o)
		{
			json_t *v = metrics_member(o, row->key);
			const char *who =
			    json_string_value(json_object_get(o, name_key));
			if (!who || !(json_is_number(v) || json_is_boolean(v)))
				continue;
			metrics_start(f, row->name, "", label, who, NULL, NULL);
			metrics_value(f, v, row->scale);
		}
	}
}

static void
metrics_daemon(FILE *f, json_t *st)
{
	const char *version =
	    json_string_value(json_object_get(st, "daemon_version"));

	metrics_family(f, "wbd_build_info", "gauge",
	    "Always 1; the version of the running wbd in its label.");
	metrics_start(f, "wbd_build_info", "", "version",
	    version ? version : "", NULL, NULL);
	metrics_u64(f, 1);
	metrics_family(f, "wbd_uptime_seconds", "gauge",
	    "Time since wbd started.");
	metrics_start(f, "wbd_uptime_seconds", "", NULL, NULL, NULL, NULL);
	metrics_value(f, json_object_get(st, "uptime_s"), 1);
	metrics_family(f, "wbd_exports_waiting", "gauge",
	    "Configured exports not served yet: their remote has not "
	    "answered.");
	metrics_start(f, "wbd_exports_waiting", "", NULL, NULL, NULL, NULL);
	metrics_u64(f, json_array_size(json_object_get(st, "waiting_exports")));
}

/* The work waiting or running on each device, by reason. */
static void
metrics_device_work(FILE *f, json_t *devices)
{
	const char *name = "wbd_device_work_items";
	size_t i;
	json_t *o;

	metrics_family(f, name, "gauge",
	    "Work waiting or running on the device, by reason (background "
	    "and periodic: 1 while queued; read: cache misses and page "
	    "fills).");
	json_array_foreach(devices, i, o)
	{
		const char *dev =
		    json_string_value(json_object_get(o, "device"));
		json_t *q = json_object_get(o, "queued");
		for (size_t r = 0; dev &&
		     r < sizeof metrics_work_reasons /
			     sizeof metrics_work_reasons[0];
		     r++) {
			json_t *v = json_object_get(q, metrics_work_reasons[r]);
			if (!v)
				continue;
			metrics_start(f, name, "", "device", dev, "reason",
			    metrics_work_reasons[r]);
			metrics_value(f, v, 1);
		}
	}
}

/* --- from the statistics ------------------------------------------------ */

/*
 * A metric read from the statistics: the uint64_t at OFFSET in each
 * entity's struct, times SCALE; or, with LABEL, an array of them, one
 * sample per entry of VALUES (NULL entries left out).
 */
struct metrics_stat {
	const char *name;
	enum metrics_type type;
	size_t offset;
	const char *label;
	const char *const *values;
	unsigned n_values;
	double scale;
	const char *help;
};

struct metrics_export {
	const char *name;
	struct stats_export_io st;
	uint64_t paced_now;
};

struct metrics_dev {
	const char *name;
	struct stats_wb st;
};

static void
metrics_stat_value(FILE *f, const char *p, double scale)
{
	uint64_t v;

	memcpy(&v, p, sizeof v);
	if (scale == 1)
		metrics_u64(f, v);
	else
		metrics_double(f, (double)v * scale);
}

/* M's samples for one entity, WHO (labelled LABEL), whose struct is at E. */
static void
metrics_stat_samples(FILE *f, const struct metrics_stat *m, const char *label,
    const char *who, const char *e)
{
	if (!m->label) {
		metrics_start(f, m->name, "", label, who, NULL, NULL);
		metrics_stat_value(f, e + m->offset, m->scale);
		return;
	}
	for (unsigned j = 0; j < m->n_values; j++) {
		if (!m->values[j])
			continue;
		metrics_start(f, m->name, "", label, who, m->label,
		    m->values[j]);
		metrics_stat_value(f, e + m->offset + j * sizeof(uint64_t),
		    m->scale);
	}
}

/* ROWS for N entities of STRIDE bytes at BASE, each starting with its
 * name (a const char *), labelled LABEL. */
static void
metrics_stats(FILE *f, const struct metrics_stat *rows, size_t nrows,
    const char *label, const void *base, size_t stride, size_t n)
{
	for (size_t r = 0; r < nrows; r++) {
		metrics_family(f, rows[r].name, metrics_type_name(rows[r].type),
		    rows[r].help);
		for (size_t i = 0; i < n; i++) {
			const char *e = (const char *)base + i * stride;
			const char *who;
			memcpy(&who, e, sizeof who);
			metrics_stat_samples(f, &rows[r], label, who, e);
		}
	}
}

#define EXPORT_STAT(field) offsetof(struct metrics_export, st.field)

static const struct metrics_stat metrics_export_stats[] = {
	{ "wbd_export_requests_total", COUNTER, EXPORT_STAT(requests),
	    "command", metrics_cmds, STATS_N_CMDS, 1,
	    "Requests answered, by NBD command (refused ones included)." },
	{ "wbd_export_request_errors_total", COUNTER, EXPORT_STAT(errors),
	    "command", metrics_cmds, STATS_N_CMDS, 1,
	    "Requests answered with an NBD error, by command." },
	{ "wbd_export_read_bytes_total", COUNTER, EXPORT_STAT(read_bytes), NULL,
	    NULL, 0, 1, "Bytes answered to successful READs." },
	{ "wbd_export_written_bytes_total", COUNTER, EXPORT_STAT(written_bytes),
	    NULL, NULL, 0, 1, "Bytes of successful WRITEs." },
	{ "wbd_throttle_paced_writes_total", COUNTER, EXPORT_STAT(paced), NULL,
	    NULL, 0, 1,
	    "Write replies held back by writer throttling (dirty data high)." },
	{ "wbd_throttle_held_writes_total", COUNTER, EXPORT_STAT(held), NULL,
	    NULL, 0, 1,
	    "Of those, replies held at the dirty limit until there was room." },
	{ "wbd_throttle_pause_seconds_total", COUNTER, EXPORT_STAT(pause_ns),
	    NULL, NULL, 0, 1e-9,
	    "Time write replies were held back by throttling, added up." },
	{ "wbd_throttle_writes_paced", GAUGE,
	    offsetof(struct metrics_export, paced_now), NULL, NULL, 0, 1,
	    "Write replies being held back by throttling now." },
};

static void
metrics_exports_stats(FILE *f, const struct metrics_export *x, size_t n)
{
	const char *lat = "wbd_export_request_duration_seconds";

	metrics_stats(f, metrics_export_stats, N(metrics_export_stats),
	    "export", x, sizeof *x, n);
	metrics_family(f, lat, "histogram",
	    "Time from a request's arrival (its payload read) to its reply "
	    "being queued, by kind: READ answered from the cache (read_hit) "
	    "or not (read_miss), WRITE without FUA (write, pacing "
	    "included), FLUSH, WRITE with FUA (fua).");
	for (size_t i = 0; i < n; i++)
		for (unsigned o = 0; o < STATS_N_OPS; o++)
			metrics_hist(f, lat, "export", x[i].name, "op",
			    metrics_ops[o], &x[i].st.lat[o]);
}

#define DEV_STAT(field) offsetof(struct metrics_dev, st.field)

static void
metrics_devices_stats(FILE *f, struct daemon *d)
{
	const char *reasons[STATS_WB_REASONS];
	const struct metrics_stat rows[] = {
		{ "wbd_device_writeback_bytes_total", COUNTER, DEV_STAT(bytes),
		    "reason", reasons, STATS_WB_REASONS, 1,
		    "Bytes written back to the device, by the reason of the "
		    "work (background, periodic, flush, fua, shutdown, sync)." },
		{ "wbd_device_writeback_runs_total", COUNTER, DEV_STAT(runs),
		    "reason", reasons, STATS_WB_REASONS, 1,
		    "Writeback runs (one write of adjacent dirty pages) that "
		    "succeeded, by reason." },
		{ "wbd_device_writeback_failed_runs_total", COUNTER,
		    DEV_STAT(failed_runs), NULL, NULL, 0, 1,
		    "Writeback runs that failed (their pages stay dirty)." },
		{ "wbd_device_writeback_runs_in_flight", GAUGE,
		    DEV_STAT(in_flight), NULL, NULL, 0, 1,
		    "Writeback runs begun and not yet ended." },
	};
	const char *dur = "wbd_device_writeback_run_duration_seconds";
	size_t n = daemon_n_devs(d);
	struct metrics_dev *w = calloc(n ? n : 1, sizeof *w);

	if (!w)
		return;
	for (unsigned r = 0; r < STATS_WB_REASONS; r++)
		reasons[r] = wb_reason_name(r);
	for (size_t i = 0; i < n; i++) {
		w[i].name = d->devs[i]->name;
		stats_wb_get(&d->devs[i]->stats, &w[i].st);
	}
	metrics_stats(f, rows, N(rows), "device", w, sizeof *w, n);
	metrics_family(f, dur, "histogram",
	    "Time a writeback run took, from its write being issued to its "
	    "end, failed or not.");
	for (size_t i = 0; i < n; i++)
		metrics_hist(f, dur, "device", w[i].name, NULL, NULL,
		    &w[i].st.run_time);
	free(w);
}

/* --- the whole ----------------------------------------------------------- */

static void
metrics_write(FILE *f, struct daemon *d, json_t *st)
{
	json_t *exports = json_object_get(st, "exports");
	json_t *devices = json_object_get(st, "devices");
	size_t n = 0, cap = daemon_n_exports(d);
	struct metrics_export *x = calloc(cap ? cap : 1, sizeof *x);

	metrics_daemon(f, st);
	metrics_rows(f, metrics_cache_rows, N(metrics_cache_rows),
	    json_object_get(st, "cache"), NULL, NULL);
	metrics_rows(f, metrics_threshold_rows, N(metrics_threshold_rows),
	    json_object_get(st, "thresholds"), NULL, NULL);
	metrics_rows(f, metrics_limit_rows, N(metrics_limit_rows),
	    json_object_get(st, "limits"), NULL, NULL);
	metrics_rows(f, metrics_export_rows, N(metrics_export_rows), exports,
	    "export", "name");
	/* The HTTP thread is no grace reader: exports are freed under
	 * tune_lock, so they are looked at under it. */
	struct export *e;
	pthread_mutex_lock(&d->tune_lock);
	export_table_foreach(&d->exports, i, e) {
		if (!x || n == cap || export_retired(e))
			continue;
		x[n].name = e->name;
		ctl_export_stats(d, e, &x[n].st);
		x[n].paced_now = load_relaxed(&x[n].st.paced) -
		    load_relaxed(&x[n].st.paced_done);
		n++;
	}
	metrics_exports_stats(f, x, n);
	pthread_mutex_unlock(&d->tune_lock);
	free(x);
	metrics_rows(f, metrics_device_rows, N(metrics_device_rows), devices,
	    "device", "device");
	metrics_device_work(f, devices);
	metrics_devices_stats(f, d);
}

char *
metrics_render(struct daemon *d, size_t *len)
{
	char *text = NULL;
	json_t *st = ctl_status_json(d);
	FILE *f = st ? open_memstream(&text, len) : NULL;

	if (!f) {
		json_decref(st);
		return NULL;
	}
	metrics_write(f, d, st);
	json_decref(st);
	if (ferror(f)) {
		fclose(f);
		free(text);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}
