/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmd-status.c - "wbctl status": how much data is where, per export and
 * per writeback device, and the thresholds; with -w, a live view redrawn
 * every few seconds until SIGINT.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl-client.h"
#include "table.h"
#include "wbctl.h"

#define STATUS_WATCH_DEFAULT_S  2.0

/* Every line of the view fits in this many columns: longer text goes on
 * continuation lines, a table too wide changes shape (table.h). */
#define STATUS_WIDTH 100
/* Where the value of a labelled item starts: "  " and the label. */
#define STATUS_LABEL_COLS 21

static volatile sig_atomic_t status_interrupted;

static void
status_on_sigint(int sig)
{
	status_interrupted = 1;
}

/* "1d 2h", "3h 4m", "5m 6s", "7s". */
static const char *
fmt_uptime(uint64_t s, char *buf, size_t len)
{
	if (s >= 86400)
		snprintf(buf, len, "%llud %lluh", (unsigned long long)s / 86400,
		    (unsigned long long)s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, len, "%lluh %llum", (unsigned long long)s / 3600,
		    (unsigned long long)s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, len, "%llum %llus", (unsigned long long)s / 60,
		    (unsigned long long)s % 60);
	else
		snprintf(buf, len, "%llus", (unsigned long long)s);
	return buf;
}

/* "0.4 s", "12.0 s", "3m 4s". */
static const char *
fmt_ms(uint64_t ms, char *buf, size_t len)
{
	if (ms >= 60000)
		return fmt_uptime(ms / 1000, buf, len);
	snprintf(buf, len, "%.1f s", (double)ms / 1000);
	return buf;
}

/* A latency: "63 us", "1.2 ms", "2.50 s". */
static const char *
fmt_us(uint64_t us, char *buf, size_t len)
{
	if (us < 1000)
		snprintf(buf, len, "%llu us", (unsigned long long)us);
	else if (us < 1000000)
		snprintf(buf, len, "%.1f ms", (double)us / 1000);
	else
		snprintf(buf, len, "%.2f s", (double)us / 1000000);
	return buf;
}

static const char *
fmt_u64(uint64_t n, char *buf, size_t len)
{
	snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

/* A line at INDENT columns, its continuation lines CONT columns in. */
static void status_text(FILE *f, size_t indent, size_t cont, const char *fmt,
    ...) __attribute__((format(printf, 4, 5)));

static void
status_text(FILE *f, size_t indent, size_t cont, const char *fmt, ...)
{
	char first[STATUS_LABEL_COLS + 1], *text;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	snprintf(first, sizeof first, "%*s", (int)indent, "");
	table_wrap(f, first, cont, STATUS_WIDTH, text);
	free(text);
}

/* "  LABEL              TEXT", TEXT continued under itself. */
static void status_item(FILE *f, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
status_item(FILE *f, const char *label, const char *fmt, ...)
{
	char first[64], *text;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	snprintf(first, sizeof first, "  %-*s ", STATUS_LABEL_COLS - 3, label);
	table_wrap(f, first, STATUS_LABEL_COLS, STATUS_WIDTH, text);
	free(text);
}

/* "  NAME: TEXT", continued under TEXT (4 columns in after a long NAME):
 * the lines about one export or device. */
static void status_named(FILE *f, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
status_named(FILE *f, const char *name, const char *fmt, ...)
{
	char *text, *line;
	va_list ap;
	int n;

	if (!name)
		name = "?";
	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (asprintf(&line, "%s: %s", name, text) >= 0) {
		size_t cont = 2 + table_cols(name, strlen(name)) + 2;
		table_wrap(f, "  ", cont <= STATUS_LABEL_COLS ? cont : 4,
		    STATUS_WIDTH, line);
		free(line);
	}
	free(text);
}

/* A threshold: "10% of the cache = 25.6 MiB" or "4.0 MiB". */
static void
status_threshold(FILE *f, const json_t *th, const char *name)
{
	char key[64], h[32];
	json_t *ratio;

	snprintf(key, sizeof key, "%s_bytes", name);
	wbctl_human(jget_u64(th, key, 0), h, sizeof h);
	snprintf(key, sizeof key, "%s_ratio", name);
	ratio = json_object_get(th, key);
	if (json_is_number(ratio))
		status_item(f, name, "%lld%% of the cache = %s",
		    (long long)json_number_value(ratio), h);
	else
		status_item(f, name, "%s", h);
}

static void
status_exports(FILE *f, const json_t *exports)
{
	static const char *const heads[] = {
		"NAME", ">SIZE", "CACHE MODE", ">CACHED", ">DIRTY",
		">OLDEST DIRTY", ">CONNS", ">ERRORS", "DEVICE",
	};
	char sz[32], ca[32], di[32], age[32], co[32], er[32], mode[48];
	struct table t;
	json_t *e;
	size_t i;

	table_init(&t, sizeof heads / sizeof heads[0], heads);
	json_array_foreach(exports, i, e) {
		uint64_t dirty = jget_u64(e, "dirty_bytes", 0);
		const char *cm = jget_str(e, "cache_mode");
		snprintf(mode, sizeof mode, "%s%s", cm ? cm : "-",
		    jget_bool(e, "readonly") ? " (ro)" : "");
		table_add(&t, jget_str(e, "name"),
		    wbctl_human(jget_u64(e, "size_bytes", 0), sz, sizeof sz),
		    mode,
		    wbctl_human(jget_u64(e, "cached_bytes", 0), ca, sizeof ca),
		    wbctl_human(dirty, di, sizeof di),
		    dirty ? fmt_ms(jget_u64(e, "oldest_dirty_age_ms", 0), age,
		    sizeof age) : "-",
		    fmt_u64(jget_u64(e, "connections", 0), co, sizeof co),
		    fmt_u64(jget_u64(e, "writeback_errors", 0), er, sizeof er),
		    jget_str(e, "device"));
	}
	table_print(&t, f, "  ", STATUS_WIDTH);
	table_free(&t);
}

/* The items of the JSON array A, strings, joined by ", " into a new
 * string. */
static char *
status_join(const json_t *a)
{
	char *s = NULL;
	size_t len = 0, i;
	const json_t *v;
	FILE *m = open_memstream(&s, &len);

	if (!m)
		return NULL;
	json_array_foreach(a, i, v)
	{
		const char *item = json_string_value(v);
		fprintf(m, "%s%s", i ? ", " : "", item ? item : "?");
	}
	fclose(m);
	return s;
}

/* One line per export that not everyone may open: "disk0: allow
 * 127.0.0.0/8, uid:1000; TLS required". */
static void
status_access(FILE *f, const json_t *exports)
{
	json_t *e;
	size_t i;

	json_array_foreach(exports, i, e)
	{
		const json_t *a = json_object_get(e, "access");
		const json_t *allow = json_object_get(a, "allow");
		bool tls = jget_bool(a, "tls_required");
		if (!json_is_array(allow) && !tls)
			continue;
		char *list = json_is_array(allow) ? status_join(allow) : NULL;
		if (!json_is_array(allow))
			status_named(f, jget_str(e, "name"), "TLS required");
		else
			status_named(f, jget_str(e, "name"), "allow %s%s",
			    list && *list ? list : "nobody (empty list)",
			    tls ? "; TLS required" : "");
		free(list);
	}
}

/* One line per export with a write log: "disk0: journal /var/lib/...
 * (on-flush): 1.2 MiB of 256.0 MiB used, 3 records; 40 commits (12
 * shared), 1 written back instead (the log is full); FLUSH 310 us in the
 * log, 5.0 ms written back; replayed 2 records", and BROKEN when it is. */
static void
status_journals(FILE *f, const json_t *exports)
{
	char used[32], size[32], lus[32], bus[32];
	json_t *e;
	size_t i;

	json_array_foreach(exports, i, e)
	{
		const json_t *j = json_object_get(e, "journal");
		if (!json_is_object(j))
			continue;
		const json_t *rp = json_object_get(j, "replay");
		const char *why = jget_str(j, "last_fallback");
		wbctl_human(jget_u64(j, "used_bytes", 0), used, sizeof used);
		wbctl_human(jget_u64(j, "size_bytes", 0), size, sizeof size);
		fmt_us(jget_u64(j, "log_avg_us", 0), lus, sizeof lus);
		fmt_us(jget_u64(j, "backing_avg_us", 0), bus, sizeof bus);
		status_named(f, jget_str(e, "name"),
		    "journal %s (%s)%s: %s of %s used, %llu record(s); %llu "
		    "commit(s) (%llu FLUSHes shared), %llu written back "
		    "instead%s%s%s; FLUSH %s in the log, %s written back; "
		    "replayed %llu record(s)",
		    jget_str(j, "path"), jget_str(j, "mode"),
		    jget_bool(j, "stale") ?
			" BROKEN, not yet emptied: FLUSH fails" :
			jget_bool(j, "broken") ? " BROKEN" :
						 "",
		    used, size, (unsigned long long)jget_u64(j, "records", 0),
		    (unsigned long long)jget_u64(j, "commits", 0),
		    (unsigned long long)jget_u64(j, "shared_flushes", 0),
		    (unsigned long long)jget_u64(j, "fallbacks", 0),
		    why ? " (last: " : "", why ? why : "", why ? ")" : "", lus,
		    bus, (unsigned long long)jget_u64(rp, "records", 0));
		if (!jget_bool(j, "ordered"))
			continue;
		/* "disk0: ordered writeback: 12 epochs applied (3.0 MiB,
		 * 2.1 ms each), 1 behind (256.0 KiB)". */
		char ab[32], lb[32], aus[32];
		wbctl_human(jget_u64(j, "applied_bytes", 0), ab, sizeof ab);
		wbctl_human(jget_u64(j, "apply_lag_bytes", 0), lb, sizeof lb);
		fmt_us(jget_u64(j, "apply_avg_us", 0), aus, sizeof aus);
		status_named(f, jget_str(e, "name"),
		    "ordered writeback: %llu epoch(s) applied (%s, %s each), "
		    "%llu behind (%s), %llu failure(s)%s",
		    (unsigned long long)jget_u64(j, "epochs_applied", 0), ab,
		    aus, (unsigned long long)jget_u64(j, "apply_lag_epochs", 0),
		    lb, (unsigned long long)jget_u64(j, "apply_errors", 0),
		    jget_bool(j, "order_lost") ?
			"; ORDER LOST: epochs written back out of order" :
			"");
	}
}

/* A device's link as writeback measures it: round trip, bandwidth, the
 * window and what is in flight; write-behind on a remote.  Nothing before
 * its first write. */
static void
status_link(FILE *f, const char *dev, const json_t *lk)
{
	char rtt[32], bw[32], inb[32], wbb[32];

	if (!json_is_object(lk) || jget_u64(lk, "round_trip_us", 0) == 0)
		return;
	wbctl_human(jget_u64(lk, "bandwidth_bytes_per_s", 0), bw, sizeof bw);
	wbctl_human(jget_u64(lk, "bytes_in_flight", 0), inb, sizeof inb);
	wbctl_human(jget_u64(lk, "write_behind_bytes", 0), wbb, sizeof wbb);
	status_named(f, dev,
	    "link: round trip %s, %s/s; window %llu write(s), in flight %llu "
	    "(%s), at most %llu%s%s%s",
	    fmt_us(jget_u64(lk, "round_trip_us", 0), rtt, sizeof rtt), bw,
	    (unsigned long long)jget_u64(lk, "window_writes", 0),
	    (unsigned long long)jget_u64(lk, "writes_in_flight", 0), inb,
	    (unsigned long long)jget_u64(lk, "writes_in_flight_max", 0),
	    jget_bool(lk, "write_behind") ? "; write-behind wrote " : "",
	    jget_bool(lk, "write_behind") ? wbb : "",
	    jget_bool(lk, "write_behind") &&
		    jget_u64(lk, "write_behind_deferred", 0) ?
		", left some to FLUSHes" :
		"");
}

/*
 * A remote device's link settings and what its reads and FLUSHes did
 * (LK: its link, R: its remote), a line each: the settings are shown
 * before the link is measured.
 */
static void
status_remote_link(FILE *f, const char *dev, const json_t *lk, const json_t *r)
{
	char a[32], b[32], c[32], e[32];

	if (!json_is_object(lk))
		return;
	status_named(f, dev,
	    "writeback window: at least %llu write(s) "
	    "(min_writeback_inflight), at most %s in flight "
	    "(max_writeback_inflight_bytes); write-behind %s%s%s",
	    (unsigned long long)jget_u64(lk, "min_inflight_writes", 0),
	    wbctl_human(jget_u64(lk, "max_inflight_bytes", 0), a, sizeof a),
	    jget_bool(lk, "write_behind") ? "on" : "off",
	    jget_bool(lk, "write_behind") ? ", leaves a FLUSHing client's "
					    "pages to its FLUSHes for " :
					    "",
	    jget_bool(lk, "write_behind") ?
		fmt_ms(jget_u64(lk, "write_behind_defer_ms", 0), b, sizeof b) :
		"");
	uint64_t rrtt = jget_u64(lk, "read_round_trip_us", 0);
	status_named(f, dev,
	    "reads: round trip %s, %s/s; window %llu read(s), at most %llu "
	    "in flight; read ahead %s, at most %s (max_readahead_bytes)",
	    rrtt ? fmt_us(rrtt, a, sizeof a) : "-",
	    wbctl_human(jget_u64(lk, "read_bandwidth_bytes_per_s", 0), b,
		sizeof b),
	    (unsigned long long)jget_u64(lk, "window_reads", 0),
	    (unsigned long long)jget_u64(lk, "reads_in_flight_max", 0),
	    wbctl_human(jget_u64(lk, "readahead_bytes", 0), c, sizeof c),
	    wbctl_human(jget_u64(lk, "max_readahead_bytes", 0), e, sizeof e));
	status_named(f, dev,
	    "FLUSHes: %llu sent to the remote, %llu shared, %llu merged, "
	    "%llu joined a pass under way, %llu made by FUA (a run of up to "
	    "%llu: fua_max_runs); %llu FUA write(s)",
	    (unsigned long long)jget_u64(lk, "flushes_sent", 0),
	    (unsigned long long)jget_u64(lk, "flushes_shared", 0),
	    (unsigned long long)jget_u64(lk, "flushes_merged", 0),
	    (unsigned long long)jget_u64(lk, "flushes_joined", 0),
	    (unsigned long long)jget_u64(lk, "flushes_by_fua", 0),
	    (unsigned long long)jget_u64(lk, "fua_max_runs", 0),
	    (unsigned long long)jget_u64(lk, "fua_writes", 0));
	status_named(f, dev,
	    "lost connections: %llu reconnection(s) (%llu failed), %llu "
	    "write(s) met one; the read connection failed %llu time(s), "
	    "the write connections %llu",
	    (unsigned long long)jget_u64(r, "reconnects", 0),
	    (unsigned long long)jget_u64(r, "failed_reconnects", 0),
	    (unsigned long long)jget_u64(r, "writes_on_lost_connections", 0),
	    (unsigned long long)jget_u64(r, "read_connection_failures", 0),
	    (unsigned long long)jget_u64(r, "write_connection_failures", 0));
}

/* The work queued or running, by reason: "background, periodic, flush
 * 2"; "" if none. */
static const char *
fmt_queued(const json_t *q, char *buf, size_t len)
{
	static const char *const counted[] = { "flush", "fua", "sync", "read" };
	size_t n = 0;

	buf[0] = '\0';
	if (jget_bool(q, "background") && n < len)
		n += (size_t)snprintf(buf + n, len - n, "background");
	if (jget_bool(q, "periodic") && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%speriodic",
		    n ? ", " : "");
	for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++) {
		uint64_t c = jget_u64(q, counted[i], 0);
		if (c && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s %llu",
			    n ? ", " : "", counted[i], (unsigned long long)c);
	}
	return buf;
}

static void
status_devices(FILE *f, const json_t *devices)
{
	static const char *const heads[] = {
		"DEVICE",
		">DIRTY",
		">WRITEBACK",
		">WRITTEN",
		">BANDWIDTH",
		">WORKERS",
		">QUEUED",
		">ERRORS",
		">BACKOFF",
	};
	char di[32], wb[32], wk[96], bw[48], qu[32], wr[32], er[32], bo[32];
	struct table t;
	json_t *d;
	size_t i;

	table_init(&t, sizeof heads / sizeof heads[0], heads);
	json_array_foreach(devices, i, d)
	{
		const json_t *w = json_object_get(d, "workers");
		snprintf(wk, sizeof wk, "%llu/%llu (%llu..%llu)",
		    (unsigned long long)jget_u64(w, "busy", 0),
		    (unsigned long long)jget_u64(w, "threads", 0),
		    (unsigned long long)jget_u64(w, "min", 0),
		    (unsigned long long)jget_u64(w, "max", 0));
		wbctl_human(jget_u64(d, "bandwidth_bytes_per_s", 0), bw,
		    sizeof bw - 2);
		strcat(bw, "/s");
		uint64_t backoff = jget_u64(d, "backoff_ms", 0);
		table_add(&t, jget_str(d, "device"),
		    wbctl_human(jget_u64(d, "dirty_bytes", 0), di, sizeof di),
		    wbctl_human(jget_u64(d, "writeback_bytes", 0), wb,
			sizeof wb),
		    wbctl_human(jget_u64(d, "written_bytes", 0), wr, sizeof wr),
		    bw, wk,
		    fmt_u64(jget_u64(json_object_get(d, "queued"), "total", 0),
			qu, sizeof qu),
		    fmt_u64(jget_u64(d, "errors", 0), er, sizeof er),
		    backoff ? fmt_ms(backoff, bo, sizeof bo) : "-");
	}
	table_print(&t, f, "  ", STATUS_WIDTH);
	table_free(&t);
	json_array_foreach(devices, i, d) {
		const char *dev = jget_str(d, "device");
		const char *le = jget_str(d, "last_error");
		const json_t *r = json_object_get(d, "remote");
		const char *eng = jget_str(d, "io_engine");
		char *ex = status_join(json_object_get(d, "exports"));
		char why[128];
		fmt_queued(json_object_get(d, "queued"), why, sizeof why);
		status_named(f, dev,
		    "exports %s; ratio %llu..%llu%% of the dirty limit%s%s",
		    ex && *ex ? ex : "none",
		    (unsigned long long)jget_u64(d, "min_ratio", 0),
		    (unsigned long long)jget_u64(d, "max_ratio", 100),
		    *why ? "; queued or running: " : "", why);
		free(ex);
		/* Writeback's CPU: bounded by the workers, one CPU each. */
		unsigned long long atmax =
		    jget_u64(json_object_get(d, "workers"), "waits_at_max", 0);
		char waits[64] = "";
		if (atmax)
			snprintf(waits, sizeof waits,
			    "; %llu wait(s) at max_workers", atmax);
		status_named(f, dev,
		    "writeback CPU %.2f s, now %.0f%% of a CPU (at most "
		    "%llu00%%: workers)%s%s%s",
		    json_number_value(
			json_object_get(d, "writeback_cpu_seconds")),
		    100 *
			json_number_value(
			    json_object_get(d, "writeback_cpu_share")),
		    (unsigned long long)jget_u64(json_object_get(d, "workers"),
			"max", 0),
		    waits, eng && *eng ? "; io_engine " : "",
		    eng && *eng ? eng : "");
		if (le)
			status_named(f, dev, "last error: %s", le);
		status_link(f, dev, json_object_get(d, "link"));
		if (!json_is_object(r))
			continue;
		/* A remote NBD server: its connection. */
		time_t since = (time_t)(jget_u64(r, "since_unix_ms", 0) / 1000);
		char when[32] = "?";
		struct tm tm;
		if (since && localtime_r(&since, &tm))
			strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
		const char *rle = jget_str(r, "last_error");
		char depth[96] = "";
		if (jget_bool(r, "multi_conn"))
			snprintf(depth, sizeof depth,
			    " (multi-conn: another past %llu command(s) on "
			    "each)",
			    (unsigned long long)jget_u64(r, "conn_depth", 0));
		bool rdc = jget_bool(r, "read_connection"),
		     wrc = jget_bool(r, "write_connection");
		unsigned long long wrn = jget_u64(r, "write_connections", 0);
		char own[96] = "";
		if (wrc && wrn > 1)
			snprintf(own, sizeof own,
			    " and %s%llu write connections",
			    rdc ? "a read and " : "", wrn);
		else if (rdc || wrc)
			snprintf(own, sizeof own, " and %s",
			    rdc && wrc ? "a read and a write connection" :
				rdc    ? "a read connection" :
					 "a write connection");
		char held[64] = "";
		unsigned long long hb = jget_u64(r, "connections_held_back", 0);
		if (hb)
			snprintf(held, sizeof held, ", %llu held back", hb);
		status_named(f, dev,
		    "%s, %s since %s, %llu connection(s)%s%s; %llu in all, "
		    "at most %llu (max_connections)%s; %llu failed "
		    "reconnect(s)%s%s",
		    jget_str(d, "backing") ? jget_str(d, "backing") : "",
		    jget_bool(r, "connected") ? "connected" : "DISCONNECTED",
		    when, (unsigned long long)jget_u64(r, "connections", 0),
		    depth, own,
		    (unsigned long long)jget_u64(r, "all_connections", 0),
		    (unsigned long long)jget_u64(r, "max_connections", 0), held,
		    (unsigned long long)jget_u64(r, "retries", 0),
		    rle ? "; last: " : "", rle ? rle : "");
		if (jget_bool(r, "flush_before_read"))
			status_named(f, dev,
			    "written, not yet flushed: %llu range(s) of %llu "
			    "kept (%llu time(s) more); %llu read(s) flushed "
			    "first; %llu commit(s), every %llu ms at most",
			    (unsigned long long)jget_u64(r, "unflushed_ranges",
				0),
			    (unsigned long long)jget_u64(r,
				"unflushed_ranges_max", 0),
			    (unsigned long long)jget_u64(r,
				"unflushed_overflows", 0),
			    (unsigned long long)jget_u64(r,
				"flushes_before_read", 0),
			    (unsigned long long)jget_u64(r, "commits", 0),
			    (unsigned long long)jget_u64(r,
				"commit_interval_ms", 0));
		status_named(f, dev,
		    "timeouts: connect %llu ms, request %llu ms, reconnection "
		    "back-off at most %llu ms (connect_timeout_ms, "
		    "io_timeout_ms, reconnect_max_ms)",
		    (unsigned long long)jget_u64(r, "connect_timeout_ms", 0),
		    (unsigned long long)jget_u64(r, "io_timeout_ms", 0),
		    (unsigned long long)jget_u64(r, "reconnect_max_ms", 0));
		status_remote_link(f, dev, json_object_get(d, "link"), r);
		uint64_t redo = jget_u64(r, "rewritten_after_loss_bytes", 0);
		if (redo)
			status_named(f, dev,
			    "%llu byte(s) written again, the remote lost "
			    "before a flush covered them",
			    (unsigned long long)redo);
	}
}

/* Exports not served yet: their remote has not answered. */
static void
status_waiting(FILE *f, const json_t *waiting)
{
	const json_t *x;
	size_t i;

	json_array_foreach(waiting, i, x) {
		time_t since = (time_t)(jget_u64(x, "since_unix_ms", 0) / 1000);
		char when[32] = "?";
		struct tm tm;
		if (since && localtime_r(&since, &tm))
			strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
		status_named(f, jget_str(x, "name"),
		    "WAITING for its remote %s (%llu failed attempt(s) since "
		    "%s)",
		    jget_str(x, "backing") ? jget_str(x, "backing") : "?",
		    (unsigned long long)jget_u64(x, "attempts", 0), when);
	}
}

/* FLUSH latency and writer pacing since start-up, every export's. */
static void
status_requests(FILE *f, const json_t *rq)
{
	uint64_t flushes = jget_u64(rq, "flushes", 0);
	char a[32], b[32];

	fprintf(f, "\nrequests since start\n");
	if (flushes)
		status_item(f, "flush latency",
		    "p50 %s, p99 %s over %llu FLUSH%s",
		    fmt_us(jget_u64(rq, "flush_p50_us", 0), a, sizeof a),
		    fmt_us(jget_u64(rq, "flush_p99_us", 0), b, sizeof b),
		    (unsigned long long)flushes, flushes == 1 ? "" : "es");
	else
		status_item(f, "flush latency", "- (no FLUSH yet)");
	status_item(f, "pacing",
	    "%llu write(s) paced, %llu held at the dirty limit, %s paused in "
	    "all; %llu now",
	    (unsigned long long)jget_u64(rq, "paced_writes", 0),
	    (unsigned long long)jget_u64(rq, "held_writes", 0),
	    fmt_ms(jget_u64(rq, "pause_ms", 0), a, sizeof a),
	    (unsigned long long)jget_u64(rq, "paced_now", 0));
}

/* The limits on NBD connections and what they hold. */
static void
status_limits(FILE *f, const json_t *lim)
{
	char u[32], m[32], p[32], cb[32];

	status_item(f, "connections",
	    "%llu of %llu (max_connections), at most %llu per client "
	    "(max_connections_per_client; IPv6 per /%llu); %llu client(s), "
	    "%llu refused",
	    (unsigned long long)jget_u64(lim, "connections", 0),
	    (unsigned long long)jget_u64(lim, "max_connections", 0),
	    (unsigned long long)jget_u64(lim, "max_connections_per_client", 0),
	    (unsigned long long)jget_u64(lim, "client_ipv6_prefix", 128),
	    (unsigned long long)jget_u64(lim, "clients", 0),
	    (unsigned long long)jget_u64(lim, "refused", 0));
	if (json_object_get(lim, "reserved_connections"))
		status_item(f, "new clients",
		    "the last %llu connections for clients holding none "
		    "(reserved_connections)",
		    (unsigned long long)jget_u64(lim, "reserved_connections",
			0));
	if (json_object_get(lim, "local_idle_timeout_s")) {
		char r[32], l[32];
		status_item(f, "idle timeout",
		    "%s remote (idle_timeout_s), %s local "
		    "(local_idle_timeout_s); %llu closed",
		    jget_u64(lim, "idle_timeout_s", 0) ?
			fmt_ms(jget_u64(lim, "idle_timeout_s", 0) * 1000, r,
			    sizeof r) :
			"never",
		    jget_u64(lim, "local_idle_timeout_s", 0) ?
			fmt_ms(jget_u64(lim, "local_idle_timeout_s", 0) * 1000,
			    l, sizeof l) :
			"never",
		    (unsigned long long)jget_u64(lim, "idle_closed", 0));
	}
	if (json_object_get(lim, "max_inflight_bytes"))
		status_item(f, "in flight",
		    "%s of %s (max_inflight_bytes), peak %s, %llu wait(s); "
		    "connection buffers %s",
		    wbctl_human(jget_u64(lim, "inflight_bytes", 0), u,
			sizeof u),
		    wbctl_human(jget_u64(lim, "max_inflight_bytes", 0), m,
			sizeof m),
		    wbctl_human(jget_u64(lim, "inflight_peak_bytes", 0), p,
			sizeof p),
		    (unsigned long long)jget_u64(lim, "inflight_waits", 0),
		    wbctl_human(jget_u64(lim, "connection_buffer_bytes", 0), cb,
			sizeof cb));
	if (json_object_get(lim, "max_client_share"))
		status_item(f, "per client",
		    "%s (max_client_share %llu%%), the most held %s, %llu "
		    "wait(s)",
		    wbctl_human(jget_u64(lim, "client_share_bytes", 0), u,
			sizeof u),
		    (unsigned long long)jget_u64(lim, "max_client_share", 0),
		    wbctl_human(jget_u64(lim, "client_inflight_max_bytes", 0),
			m, sizeof m),
		    (unsigned long long)jget_u64(lim, "client_share_waits", 0));
	if (json_object_get(lim, "max_requests_per_connection"))
		status_item(f, "per connection",
		    "%llu requests (max_requests_per_connection), %s "
		    "(max_inflight_bytes_per_connection), %llu pause(s); "
		    "handshake within %llu s, %llu timed out; stall timeout "
		    "%llu s, %llu stalled; %llu client error(s); CACHE %llu at "
		    "once a device (max_cache_requests), %llu answered "
		    "without prefetching, %llu cut short at %llu%% of the "
		    "cache (max_cache_share); requests of up to %s "
		    "(max_request_bytes)",
		    (unsigned long long)jget_u64(lim,
			"max_requests_per_connection", 0),
		    wbctl_human(jget_u64(lim,
				    "max_inflight_bytes_per_connection", 0),
			m, sizeof m),
		    (unsigned long long)jget_u64(lim, "connection_pauses", 0),
		    (unsigned long long)jget_u64(lim, "handshake_timeout_s", 0),
		    (unsigned long long)jget_u64(lim, "handshake_timeouts", 0),
		    (unsigned long long)jget_u64(lim, "stall_timeout_s", 0),
		    (unsigned long long)jget_u64(lim, "stalled", 0),
		    (unsigned long long)jget_u64(lim, "client_errors", 0),
		    (unsigned long long)jget_u64(lim, "max_cache_requests", 0),
		    (unsigned long long)jget_u64(lim, "cache_requests_skipped",
			0),
		    (unsigned long long)jget_u64(lim, "cache_requests_cut", 0),
		    (unsigned long long)jget_u64(lim, "max_cache_share", 0),
		    wbctl_human(jget_u64(lim, "max_request_bytes", 0), p,
			sizeof p));
}

/* Where the daemon's memory is (the memory object, if it has one). */
static void
status_memory(FILE *f, const json_t *mem)
{
	char r[32], u[32], k[32], m[32];

	if (!mem)
		return;
	status_item(f, "memory",
	    "RSS %s; malloc %s in use; buffers kept %s of %s (%llu)",
	    wbctl_human(jget_u64(mem, "rss_bytes", 0), r, sizeof r),
	    wbctl_human(jget_u64(mem, "malloc_in_use_bytes", 0), u, sizeof u),
	    wbctl_human(jget_u64(mem, "buffers_kept_bytes", 0), k, sizeof k),
	    wbctl_human(jget_u64(mem, "buffers_kept_max_bytes", 0), m,
		sizeof m),
	    (unsigned long long)jget_u64(mem, "buffers_kept", 0));
}

/* The daemon's own settings: TLS, its user, the control socket, the
 * metrics endpoint. */
static void
status_service(FILE *f, const json_t *ans)
{
	const json_t *tls = json_object_get(ans, "tls");
	if (tls)
		status_item(f, "tls", "%s%s%s%s",
		    jget_str(tls, "mode") ? jget_str(tls, "mode") : "?",
		    jget_str(tls, "credentials") ? ", " : "",
		    jget_str(tls, "credentials") ?
			jget_str(tls, "credentials") :
			"",
		    jget_bool(tls, "verify_peer") ? ", verify_peer" : "");
	const json_t *ra = json_object_get(ans, "run_as");
	const char *user = jget_str(ra, "user"), *group = jget_str(ra, "group");
	if (ra)
		status_item(f, "running as", "uid %llu, gid %llu%s%s%s%s%s",
		    (unsigned long long)jget_u64(ra, "uid", 0),
		    (unsigned long long)jget_u64(ra, "gid", 0),
		    user ? " (user " : "", user ? user : "",
		    user && group ? ", group " : "", user && group ? group : "",
		    user ? ")" : "");
	const json_t *iot = json_object_get(ans, "io_threads");
	if (iot) {
		const char *berr = jget_str(iot, "batch_error");
		char how[128] = "";
		if (json_is_true(json_object_get(iot, "batch")))
			snprintf(how, sizeof how, ", SCHED_BATCH%s%s%s",
			    berr ? " not applied (" : "", berr ? berr : "",
			    berr ? ")" : "");
		status_item(f, "I/O threads",
		    "%llu running (io_threads %llu%s)%s",
		    (unsigned long long)jget_u64(iot, "running", 0),
		    (unsigned long long)jget_u64(iot, "configured", 0),
		    jget_u64(iot, "configured", 0) ? "" : ": one per CPU", how);
	}
	const json_t *ls = json_object_get(ans, "listeners");
	for (size_t i = 0; i < json_array_size(ls); i++) {
		const json_t *l = json_array_get(ls, i);
		const json_t *idle = json_object_get(l, "idle_timeout_s");
		char how[64];
		if (!json_is_integer(idle))
			snprintf(how, sizeof how, "by client (limits)");
		else if (json_integer_value(idle) == 0)
			snprintf(how, sizeof how, "never (its idle_timeout_s)");
		else
			snprintf(how, sizeof how, "%lld s (its idle_timeout_s)",
			    (long long)json_integer_value(idle));
		status_item(f, "listener", "%s %s: idle timeout %s",
		    jget_str(l, "kind") ? jget_str(l, "kind") : "?",
		    jget_str(l, "address") ? jget_str(l, "address") : "?", how);
	}
	const json_t *cc = json_object_get(ans, "control");
	if (cc)
		status_item(f, "control socket",
		    "%llu of %llu clients (max_clients), at most %llu per uid, "
		    "the last %llu for admins; idle timeout %llu s; %llu "
		    "refused, %llu closed idle, %llu request(s) too long",
		    (unsigned long long)jget_u64(cc, "clients", 0),
		    (unsigned long long)jget_u64(cc, "max_clients", 0),
		    (unsigned long long)jget_u64(cc, "max_clients_per_uid", 0),
		    (unsigned long long)jget_u64(cc, "admin_reserved", 0),
		    (unsigned long long)jget_u64(cc, "idle_timeout_s", 0),
		    (unsigned long long)jget_u64(cc, "refused", 0),
		    (unsigned long long)jget_u64(cc, "idle_closed", 0),
		    (unsigned long long)jget_u64(cc, "oversized_requests", 0));
	const json_t *mx = json_object_get(ans, "metrics");
	if (mx && jget_str(mx, "listen"))
		status_item(f, "metrics",
		    "http://%s/metrics: %llu of %llu connections "
		    "(max_connections), at most %llu per client; timeout "
		    "%llu s; %llu refused, %llu closed",
		    jget_str(mx, "listen"),
		    (unsigned long long)jget_u64(mx, "connections", 0),
		    (unsigned long long)jget_u64(mx, "max_connections", 0),
		    (unsigned long long)jget_u64(mx,
			"max_connections_per_client", 0),
		    (unsigned long long)jget_u64(mx, "timeout_s", 0),
		    (unsigned long long)jget_u64(mx, "refused", 0),
		    (unsigned long long)jget_u64(mx, "closed", 0));
}

/* The human view of a status answer. */
static void
status_print(FILE *f, const json_t *ans)
{
	const json_t *c = json_object_get(ans, "cache");
	const json_t *th = json_object_get(ans, "thresholds");
	const char *dv = jget_str(ans, "daemon_version");
	char a[32], b[32], d[32], e[32];

	status_text(f, 0, 4, "wbd %s, pid %llu, up %s", dv ? dv : "?",
	    (unsigned long long)jget_u64(ans, "pid", 0),
	    fmt_uptime(jget_u64(ans, "uptime_s", 0), a, sizeof a));
	const json_t *sd = json_object_get(ans, "shutdown");
	if (sd && json_is_true(json_object_get(sd, "draining")))
		status_text(f, 0, 4,
		    "SHUTTING DOWN: writing back, %s left in %llu export(s), "
		    "for %s; wbd exits once all of it is written back",
		    wbctl_human(jget_u64(sd, "left_bytes", 0), b, sizeof b),
		    (unsigned long long)jget_u64(sd, "exports_left", 0),
		    fmt_uptime(jget_u64(sd, "draining_s", 0), a, sizeof a));
	else if (sd && json_is_true(json_object_get(sd, "stopping")))
		status_text(f, 0, 4,
		    "SHUTTING DOWN: finishing the requests in flight; %s to "
		    "write back",
		    wbctl_human(jget_u64(sd, "left_bytes", 0), b, sizeof b));
	status_text(f, 0, 4,
	    "cache %s in %llu-byte pages: %s used, %s dirty, %s under "
	    "writeback",
	    wbctl_human(jget_u64(c, "size_bytes", 0), a, sizeof a),
	    (unsigned long long)jget_u64(c, "page_size", 0),
	    wbctl_human(jget_u64(c, "used_bytes", 0), b, sizeof b),
	    wbctl_human(jget_u64(c, "dirty_bytes", 0), d, sizeof d),
	    wbctl_human(jget_u64(c, "writeback_bytes", 0), e, sizeof e));
	status_text(f, 2, 4,
	    "hits %llu, misses %llu, evictions %llu; read ahead %s, %llu "
	    "read-ahead hits; at most %s at once (readahead_bytes)",
	    (unsigned long long)jget_u64(c, "hits", 0),
	    (unsigned long long)jget_u64(c, "misses", 0),
	    (unsigned long long)jget_u64(c, "evictions", 0),
	    wbctl_human(jget_u64(c, "readahead_bytes", 0), a, sizeof a),
	    (unsigned long long)jget_u64(c, "readahead_hits", 0),
	    wbctl_human(jget_u64(c, "readahead_limit_bytes", 0), b, sizeof b));
	status_text(f, 2, 4,
	    "writes received straight into cache pages %s, %llu time(s) "
	    "through a buffer instead",
	    wbctl_human(jget_u64(c, "zero_copy_bytes", 0), a, sizeof a),
	    (unsigned long long)jget_u64(c, "zero_copy_refused", 0));
	uint64_t pf = jget_u64(c, "prefaulted_bytes", 0);
	uint64_t size = jget_u64(c, "size_bytes", 0);
	if (pf > 0 && pf < size)
		status_text(f, 2, 4,
		    "memory faulted in at start so far %s of %s",
		    wbctl_human(pf, a, sizeof a),
		    wbctl_human(size, b, sizeof b));

	fprintf(f, "\nthresholds\n");
	status_threshold(f, th, "dirty_background");
	status_threshold(f, th, "dirty");
	status_item(f, "dirty_expire", "%s",
	    fmt_ms(jget_u64(th, "dirty_expire_centisecs", 0) * 10, a,
		sizeof a));
	uint64_t per = jget_u64(th, "dirty_writeback_centisecs", 0);
	status_item(f, "dirty_writeback", "%s",
	    per ? fmt_ms(per * 10, a, sizeof a) : "off");
	uint64_t nice = jget_u64(th, "background_nice", 0);
	const json_t *applied = json_object_get(th, "background_nice_applied");
	status_item(f, "background_nice", "%llu%s", (unsigned long long)nice,
	    nice && applied && !json_is_true(applied) ?
		" (not applied: no right to take a priority back)" :
		"");
	const json_t *lim = json_object_get(ans, "limits");
	if (lim)
		status_limits(f, lim);
	status_memory(f, json_object_get(ans, "memory"));
	status_service(f, ans);
	const json_t *rq = json_object_get(ans, "requests");
	if (rq)
		status_requests(f, rq);

	fprintf(f, "\nexports\n");
	status_exports(f, json_object_get(ans, "exports"));
	status_access(f, json_object_get(ans, "exports"));
	status_journals(f, json_object_get(ans, "exports"));
	status_waiting(f, json_object_get(ans, "waiting_exports"));
	fprintf(f, "\ndevices\n");
	status_devices(f, json_object_get(ans, "devices"));
}

static int
status_once(struct wbctl *w, struct cc_conn *c, FILE *f)
{
	json_t *req = json_pack("{s:s}", "cmd", "status"), *ans;
	int r = cc_call(c, req, CC_TIMEOUT_MS, NULL, NULL, &ans);

	json_decref(req);
	if (w->json && ans) {
		wbctl_print_json(f, ans);
	} else if (r == 0) {
		status_print(f, ans);
	}
	json_decref(ans);
	return r;
}

/* Sleep SECS, or less if SIGINT comes. */
static void
status_sleep(double secs)
{
	struct timespec ts = {
		.tv_sec = (time_t)secs,
		.tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9),
	};

	while (!status_interrupted && nanosleep(&ts, &ts) == -1 &&
	    errno == EINTR)
		;
}

static int
status_watch(struct wbctl *w, struct cc_conn *c, double secs)
{
	struct sigaction sa = { .sa_handler = status_on_sigint };
	bool tty = isatty(STDOUT_FILENO);
	int r = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (unsigned n = 0; !status_interrupted; n++) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		if (!f) {
			wbctl_err("out of memory");
			return WBCTL_EXIT_FAILED;
		}
		if (tty) {
			char when[64];
			time_t now = time(NULL);
			strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S",
			    localtime(&now));
			fputs("\033[H\033[2J", f);
			status_text(f, 0, 4,
			    "Every %gs: wbctl status (socket %s)  %s", secs,
			    c->path, when);
			fputc('\n', f);
		} else if (n > 0) {
			fputc('\n', f);
		}
		r = status_once(w, c, f);
		fclose(f);
		if (r == 0 || (w->json && len)) {
			fwrite(text, 1, len, stdout);
			fflush(stdout);
		}
		free(text);
		if (r)
			return r;
		status_sleep(secs);
	}
	return WBCTL_EXIT_OK;
}

static int
cmd_status(struct wbctl *w, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "watch", optional_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, WBCTL_OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	const struct wbctl_cmd *me = &cmd_status_entry;
	double watch = 0;
	int opt, r;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "+:hw::", longopts, NULL)) !=
	    -1) {
		if (opt != 'w') {
			if ((r = wbctl_common_opt(w, me, opt, argv)) != -1)
				return r;
			continue;
		}
		watch = STATUS_WATCH_DEFAULT_S;
		/* "-w 5" as well as "-w5" and "--watch=5". */
		const char *arg = optarg;
		if (!arg && optind < argc && argv[optind][0] >= '0' &&
		    argv[optind][0] <= '9')
			arg = argv[optind++];
		if (arg) {
			char *end;
			errno = 0;
			watch = strtod(arg, &end);
			if (errno || *end || !(watch >= 0.1 && watch <= 86400))
				return wbctl_usage_err(me, "-w: \"%s\" is not "
				    "a number of seconds from 0.1 to 86400",
				    arg);
		}
	}
	if (optind < argc)
		return wbctl_usage_err(me, "unexpected argument \"%s\"",
		    argv[optind]);

	struct cc_conn c;
	if ((r = cc_open(&c, w->socket_path)))
		return r;
	r = watch > 0 ? status_watch(w, &c, watch) : status_once(w, &c, stdout);
	cc_close(&c);
	return r;
}

const struct wbctl_cmd cmd_status_entry = {
	.name = "status",
	.usage = "status [-w [SECS]] [--json]",
	.summary = "show the cache, the exports, the writeback devices",
	.help =
	    "Shows the daemon (version, pid, uptime), the cache (size, used, dirty\n"
	    "and under-writeback bytes, hits, misses, evictions), the thresholds with\n"
	    "the byte values they resolve to, the limits, the FLUSH latency (p50 and\n"
	    "p99 since start-up) and writer pacing (writes paced, held at the dirty\n"
	    "limit, time paused in all, paced now), then one line per export (size,\n"
	    "cache mode, cached and dirty bytes, age of the oldest dirty page,\n"
	    "connections, writeback errors, device) and one per writeback device\n"
	    "(MAJ:MIN, dirty and under-writeback bytes, bytes written back, recent\n"
	    "writeback bandwidth, busy/running workers with (min..max), queued work,\n"
	    "errors, back-off); below, for each device, its exports, its min..max\n"
	    "ratio of the dirty limit and the work queued or running by reason, its\n"
	    "writeback CPU, its last error if any and its remote if it has one.\n"
	    "\n"
	    "Every line fits in 100 columns: a long one goes on indented continuation\n"
	    "lines; a table too wide puts a long name on a line of its own, or shows\n"
	    "each row as its name and \"title value, ...\" lines.\n"
	    "\n"
	    "  -w, --watch[=SECS]  redraw every SECS seconds (default 2) until\n"
	    "                      interrupted (SIGINT: exit status 0); on a terminal\n"
	    "                      the screen is redrawn in place, otherwise each\n"
	    "                      snapshot follows the last after a blank line\n",
	.exec = cmd_status,
};
